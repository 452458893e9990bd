//! Issue 9: who goes next. The fair line with direct hand-off, what a dead or impatient waiter
//! leaves behind, `--supersede`, no herd, fences, reentrancy and a redis-py Lock on the same key.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::fixtures::*;

/// A holder whose command says when it holds the lock and then waits for `release(dir)`.
fn holder(redis: &Redis, dir: &Scratch, key: &str, extra: &[&str]) -> Child {
    hold_until_released(distlock(redis), dir, key, extra)
}

/// A waiter whose command appends `tag` to `log`; returns once it is in line (at `place`).
fn waiter(redis: &Redis, key: &str, place: i64, log: &str, tag: &str, extra: &[&str]) -> Child {
    let child = distlock(redis)
        .args(["run", "-k", key])
        .args(extra)
        .args(["--", "sh", "-c"])
        .arg(format!("echo {tag} >> {log}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(&format!("{tag} to take place {place} in line"), || {
        redis.in_line(key) == place
    });
    child
}

/// The keys of `key`'s lock left in Redis, without the fence counter (the one key that outlives
/// a lock, by design).
fn leftovers(redis: &Redis, key: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis.cmd(&["KEYS", &format!("{}*", lock_key(key))]);
    keys.retain(|k| !k.ends_with(":fence"));
    keys.sort();
    keys
}

/// Ten waiters started one after another are served in that order.
#[test]
fn waiters_are_served_in_the_order_they_joined() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let log = dir.str("order");
    let first = holder(&redis, &dir, "fifo", &[]);
    let waiters: Vec<Child> = (1..=10)
        .map(|i| waiter(&redis, "fifo", i, &log, &format!("w{i}"), &[]))
        .collect();
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    for w in waiters {
        let out = finish(w);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let order = std::fs::read_to_string(&log).unwrap();
    let expected: Vec<String> = (1..=10).map(|i| format!("w{i}")).collect();
    assert_eq!(order.lines().collect::<Vec<_>>(), expected);
    assert_eq!(leftovers(&redis, "fifo"), Vec::<String>::new());
}

/// Spin waiters (polling, no pub/sub) take their place in the same line: nobody overtakes them,
/// and they overtake nobody; a --supersede spin waiter cancels the older ones.
#[test]
fn spin_waiters_wait_in_the_same_line() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let log = dir.str("order");
    let spin = ["--wait-mode", "spin"];
    let first = holder(&redis, &dir, "mixed", &[]);
    let waiters = vec![
        waiter(&redis, "mixed", 1, &log, "spin1", &spin),
        waiter(&redis, "mixed", 2, &log, "notify2", &[]),
        waiter(&redis, "mixed", 3, &log, "spin3", &spin),
        waiter(&redis, "mixed", 4, &log, "notify4", &[]),
    ];
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    for w in waiters {
        let out = finish(w);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "spin1\nnotify2\nspin3\nnotify4\n"
    );

    let dir = Scratch::new();
    let first = holder(&redis, &dir, "mixed", &[]);
    let older = waiter(&redis, "mixed", 1, &log, "older", &spin);
    let newer = waiter(
        &redis,
        "mixed",
        1,
        &log,
        "newer",
        &["--wait-mode", "spin", "--supersede"],
    );
    let out = finish(older);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(stderr(&out).contains("superseded"), "{}", stderr(&out));
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    assert_eq!(finish(newer).status.code(), Some(0));
    assert_eq!(leftovers(&redis, "mixed"), Vec::<String>::new());
}

/// A waiter in line holds one connection, blocked on its doorbell, and no subscription (issue
/// 26); once it holds the lock, nothing of it is blocked, and it keeps one subscription only, on
/// its own wake channel, where a newer run with `--replace` asks it to stop.
#[test]
fn a_waiter_holds_one_connection_and_no_subscription() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let next = Scratch::new();
    let first = holder(&redis, &dir, "unsub", &[]);
    // Every connection but this test's own.
    let clients = || -> Vec<String> {
        let clients: String = redis.cmd(&["CLIENT", "LIST"]);
        clients
            .lines()
            .filter(|l| !l.contains(" cmd=client"))
            .map(str::to_owned)
            .collect()
    };
    let before = clients().len();
    let taker = distlock(&redis)
        .args(["run", "-k", "unsub", "--", "sh", "-c"])
        .arg(format!(
            "echo $DISTLOCK_TOKEN > {}; sleep 30",
            next.str("held")
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the taker to wait on its doorbell", || {
        redis.in_line("unsub") == 1 && clients().iter().any(|l| l.contains(" cmd=blpop"))
    });
    let now = clients();
    assert_eq!(now.len(), before + 1, "one connection: {now:#?}");
    assert!(
        !now.iter().any(|l| l.contains(" sub=1")
            && l.contains(" cmd=subscribe")
            && !l.contains(&format!("{}:wake", lock_key("unsub")))),
        "{now:#?}"
    );
    // (The holder may listen on its own wake channel: nothing else listens.)
    let waiter: Vec<String> =
        redis.cmd(&["ZRANGE", &format!("{}:queue", lock_key("unsub")), "0", "0"]);
    let subscribed: Vec<String> = redis.cmd(&["PUBSUB", "CHANNELS", "*"]);
    assert!(
        subscribed.len() <= 1 && !subscribed.iter().any(|c| c.ends_with(&waiter[0])),
        "{subscribed:?}"
    );
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    let token = wait_for_file(&next.path("held")).trim().to_owned();
    // What listens now is the new holder, on its own wake channel alone; nothing blocks.
    wait_until("the holder to listen for a replacement", || {
        let channels: Vec<String> = redis.cmd(&["PUBSUB", "CHANNELS", "*"]);
        channels == [format!("{}:wake:{token}", lock_key("unsub"))]
    });
    assert!(
        !clients()
            .iter()
            .any(|l| l.contains(" cmd=blpop") && l.contains(" flags=b")),
        "{:#?}",
        clients()
    );
    let _ = kill(Pid::from_raw(taker.id() as i32), Signal::SIGTERM);
    finish(taker);
}

/// A waiter SIGKILLed first in line, and one in the middle, do not stall the line: the last
/// waiter gets the lock within the documented bound (3s for a lock handed to a dead waiter; a
/// dead waiter's place lapses 6s after its last refresh), not after a TTL.
#[test]
fn dead_waiters_do_not_stall_the_line() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let log = dir.str("order");
    let first = holder(&redis, &dir, "dead", &["--ttl", "60s"]);
    let head = waiter(&redis, "dead", 1, &log, "head", &["--ttl", "60s"]);
    let middle = waiter(&redis, "dead", 2, &log, "middle", &["--ttl", "60s"]);
    let last = waiter(&redis, "dead", 3, &log, "last", &["--ttl", "60s"]);
    for w in [&head, &middle] {
        kill(Pid::from_raw(w.id() as i32), Signal::SIGKILL).unwrap();
    }
    let released = Instant::now();
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    let out = finish(last);
    let took = released.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "last\n");
    // At most two hand-offs to dead waiters (3s each), plus the refresh that notices (2s).
    assert!(
        took < Duration::from_secs(9),
        "the line stalled for {took:?}"
    );
    for w in [head, middle] {
        finish(w);
    }
    // The dead waiters' places lapse by themselves.
    wait_until("the dead waiters' places to lapse", || {
        leftovers(&redis, "dead").is_empty()
    });
}

/// A waiter that gives up (its --wait runs out, SIGINT, SIGTERM) leaves the line at once and
/// leaves nothing behind.
#[test]
fn giving_up_leaves_nothing_in_redis() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let log = dir.str("never");
    let first = holder(&redis, &dir, "giveup", &[]);
    let held = leftovers(&redis, "giveup");
    let out = run(distlock(&redis).args(["run", "-k", "giveup", "--wait", "1s", "--", "true"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert_eq!(leftovers(&redis, "giveup"), held);
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        let w = waiter(&redis, "giveup", 1, &log, "x", &[]);
        kill(Pid::from_raw(w.id() as i32), signal).unwrap();
        let out = finish(w);
        assert_eq!(signal_of(&out), Some(signal as i32), "{}", stderr(&out));
        assert_eq!(redis.in_line("giveup"), 0, "{signal}: still in line");
        assert_eq!(leftovers(&redis, "giveup"), held, "{signal}");
    }
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    assert!(leftovers(&redis, "giveup").is_empty());
    assert!(!dir.path("never").exists());
}

/// The release is held up by CLIENT PAUSE WRITE; when it goes through, the lock is handed to
/// the waiter, which runs its command once, after the holder's.
#[test]
fn hand_off_while_redis_is_paused() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let log = dir.str("order");
    let first = holder(&redis, &dir, "paused", &[]);
    let w = waiter(&redis, "paused", 1, &log, "waiter", &[]);
    redis.cmd::<String>(&["CLIENT", "PAUSE", "1500", "WRITE"]);
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    let out = finish(w);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "waiter\n");
}

/// A lock handed to a waiter waits for it for the take-up window (3s); once taken up, it lasts
/// the taker's own TTL, even before its first renewal: a crashed holder blocks others for at
/// most its --ttl, also when it got the lock by hand-off. The same for a semaphore slot.
#[test]
fn a_lock_taken_up_lasts_the_takers_ttl() {
    for limit in ["1", "2"] {
        let redis = Redis::start();
        let dir = Scratch::new();
        let next = Scratch::new();
        let key = "takeup";
        let sem = ["--limit", limit];
        let first = holder(&redis, &dir, key, &sem);
        // With a limit of 2, a second holder fills the semaphore, so the waiter must wait.
        let other = Scratch::new();
        let second = (limit == "2").then(|| holder(&redis, &other, key, &sem));
        let taker = distlock(&redis)
            .args([
                "run", "-k", key, "--limit", limit, "--ttl", "1s", "--", "sh", "-c",
            ])
            .arg(format!("echo held > {}; sleep 30", next.str("held")))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until("the taker to take its place", || redis.in_line(key) == 1);
        release(&dir);
        assert_eq!(finish(first).status.code(), Some(0));
        wait_for_file(&next.path("held"));
        // Freeze the taker before its renewals can matter: the expiry is its own TTL already.
        let pid = Pid::from_raw(taker.id() as i32);
        kill(pid, Signal::SIGSTOP).unwrap();
        // (With a limit of 2, the taker's slot is the one that expires first.)
        let left = if limit == "1" {
            redis.pttl(&lock_key(key))
        } else {
            let now: Vec<String> = redis.cmd(&["TIME"]);
            let now_ms =
                now[0].parse::<i64>().unwrap() * 1000 + now[1].parse::<i64>().unwrap() / 1000;
            let first: Vec<String> = redis.cmd(&[
                "ZRANGE",
                &format!("{}:slots", lock_key(key)),
                "0",
                "0",
                "WITHSCORES",
            ]);
            first[1].parse::<i64>().unwrap() - now_ms
        };
        assert!(
            (0..=1000).contains(&left),
            "limit {limit}: a lock taken up with --ttl 1s expires in {left}ms"
        );
        kill(pid, Signal::SIGKILL).unwrap();
        finish(taker);
        if let Some(second) = second {
            release(&other);
            finish(second);
        }
    }
}

/// A release costs the same Redis work whether 2 or 20 processes wait: it hands the lock to the
/// first and wakes only it (no herd).
#[test]
fn a_release_wakes_one_waiter_whatever_the_line() {
    let mut calls = Vec::new();
    for waiters in [2, 20] {
        let redis = Redis::start();
        let dir = Scratch::new();
        let next = Scratch::new();
        let log = dir.str("order");
        let first = holder(&redis, &dir, "herd", &["--ttl", "60s"]);
        // The first waiter holds on once it has the lock, like the holder did.
        let second = Holder::new(distlock(&redis), &next, "herd")
            .args(&["--ttl", "60s"])
            .start();
        wait_until("the first waiter to take its place", || {
            redis.in_line("herd") == 1
        });
        let line: Vec<Child> = (2..=waiters)
            .map(|i| waiter(&redis, "herd", i, &log, &format!("w{i}"), &["--ttl", "60s"]))
            .collect();
        // From the release to the next holder's command: count what Redis ran.
        let scripts = || redis.successful_calls("evalsha") + redis.successful_calls("eval");
        let woken = || redis.successful_calls("publish") + redis.successful_calls("lpush");
        let (before, woken_before) = (scripts(), woken());
        release(&dir);
        assert_eq!(finish(first).status.code(), Some(0));
        wait_for_file(&next.path("held"));
        let ran = scripts() - before;
        let woke = woken() - woken_before;
        calls.push((waiters, ran, woke));
        for w in line {
            let _ = kill(Pid::from_raw(w.id() as i32), Signal::SIGTERM);
            finish(w);
        }
        second.finish();
    }
    // The release (which hands over and wakes one: a push onto its doorbell) and the first
    // waiter's take-up; another waiter's refresh may fall in the window (one per waiter every
    // 2s), so allow one or two.
    for (waiters, ran, woke) in &calls {
        assert!(
            *ran <= 4,
            "{waiters} waiters: {ran} scripts for one hand-off"
        );
        assert_eq!(
            *woke, 1,
            "{waiters} waiters: {woke} wake-ups (pushes or messages) for one hand-off"
        );
    }
}

/// Fences strictly increase across runs, hand-offs and concurrent processes, and a restart
/// without persistence (the counter is lost) does not make them go back.
#[test]
fn fences_only_grow() {
    let mut redis = Redis::start();
    let dir = Scratch::new();
    let log = dir.str("fences");
    let fence = format!("echo $DISTLOCK_FENCE >> {log}");
    for _ in 0..3 {
        let out = run(distlock(&redis).args(["run", "-k", "fence", "--", "sh", "-c", &fence]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    // Concurrent processes, each waiting in line (hand-offs).
    let children: Vec<Child> = (0..6)
        .map(|_| {
            distlock(&redis)
                .args(["run", "-k", "fence", "--", "sh", "-c", &fence])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        assert_eq!(finish(c).status.code(), Some(0));
    }
    redis.restart();
    let out = run(distlock(&redis).args(["run", "-k", "fence", "--", "sh", "-c", &fence]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let fences: Vec<u64> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().expect("a fence"))
        .collect();
    assert_eq!(fences.len(), 10);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences must strictly increase: {fences:?}"
    );
}

/// A nested run of the lock its parent holds runs at once, three levels deep, under the same
/// grant (same fence, nothing waited for); a nested run whose parent's lock is gone does not
/// start its command (124).
#[test]
fn nested_runs_of_the_same_lock_reenter() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let inner = format!("echo $DISTLOCK_FENCE > {}", dir.str("innermost"));
    let level3 = format!("distlock run -k re -n -- sh -c '{inner}'");
    let level2 = format!("distlock run -k re -n -- sh -c \"{level3}\"");
    let path = path_with_distlock();
    let out = run(distlock(&redis).env("PATH", &path).args([
        "run",
        "-k",
        "re",
        "--",
        "sh",
        "-c",
        &format!("echo $DISTLOCK_FENCE > {}; {level2}", dir.str("outer")),
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.path("innermost")).unwrap(),
        std::fs::read_to_string(dir.path("outer")).unwrap()
    );
    // The outer lock deleted while the command runs: the nested run refuses.
    let out = run(distlock(&redis).env("PATH", &path).args([
        "run",
        "-k",
        "re",
        "--ttl",
        "30s",
        "--",
        "sh",
        "-c",
        &format!(
            "redis-cli -p {} DEL '{}' > /dev/null; distlock run -k re -- sh -c 'echo ran > {}'; echo $? > {}",
            redis.port(),
            lock_key("re"),
            dir.str("ran"),
            dir.str("nested")
        ),
    ]));
    assert_eq!(
        std::fs::read_to_string(dir.path("nested")).unwrap().trim(),
        "124"
    );
    assert!(!dir.path("ran").exists());
    assert!(
        stderr(&out).contains("no longer held by the run that started this one"),
        "{}",
        stderr(&out)
    );
}

/// --supersede with three waiters: the two older ones leave the line at once, each saying who
/// superseded it, with exit 75 (or what -E says); the holder is not touched; the newest gets
/// the lock when the holder is done.
#[test]
fn the_newest_waiter_supersedes_the_older_ones() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let log = dir.str("order");
    let first = holder(&redis, &dir, "newest", &[]);
    let w1 = waiter(&redis, "newest", 1, &log, "w1", &[]);
    let w2 = waiter(&redis, "newest", 2, &log, "w2", &["-E", "0"]);
    let started = Instant::now();
    let w3 = distlock(&redis)
        .args([
            "run",
            "-k",
            "newest",
            "--supersede",
            "--note",
            "deploy v43",
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("echo w3 >> {log}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o1 = finish(w1);
    let o2 = finish(w2);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(o1.status.code(), Some(75), "{}", stderr(&o1));
    assert_eq!(o2.status.code(), Some(0), "{}", stderr(&o2));
    for o in [&o1, &o2] {
        assert!(
            stderr(o).contains("superseded by ") && stderr(o).contains("(deploy v43)"),
            "{}",
            stderr(o)
        );
    }
    assert_eq!(redis.in_line("newest"), 1);
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    let o3 = finish(w3);
    assert_eq!(o3.status.code(), Some(0), "{}", stderr(&o3));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "w3\n");
}

/// A redis-py Lock on the same key excludes distlock's waiters and is excluded by distlock; its
/// release (which publishes nothing) is noticed by the waiter in line within its refresh.
#[test]
fn a_redis_py_lock_on_the_same_key_still_excludes() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let python = |script: &str| {
        std::process::Command::new("/usr/bin/python3")
            .args(["-c", script])
            .output()
            .expect("/usr/bin/python3 with redis-py (apt-get install python3-redis)")
    };
    let take = format!(
        "import redis, sys\n\
         r = redis.Redis(port={})\n\
         l = r.lock('{}', timeout=60, blocking=False)\n\
         ok = l.acquire()\n\
         open('{}', 'w').write(l.local.token.decode() if ok else '')\n\
         sys.exit(0 if ok else 1)",
        redis.port(),
        lock_key("py"),
        dir.str("py-token")
    );
    let out = python(&take);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Held by redis-py: distlock waits in line.
    let log = dir.str("order");
    let w = waiter(&redis, "py", 1, &log, "distlock", &[]);
    let token = std::fs::read_to_string(dir.path("py-token")).unwrap();
    let out = python(&format!(
        "import redis\n\
         r = redis.Redis(port={})\n\
         l = r.lock('{}', timeout=60)\n\
         l.local.token = b'{token}'\n\
         l.release()",
        redis.port(),
        lock_key("py"),
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let released = Instant::now();
    let out = finish(w);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        released.elapsed() < Duration::from_secs(4),
        "{:?}",
        released.elapsed()
    );
    // Held by distlock: redis-py cannot take it.
    let first = holder(&redis, &dir, "py", &[]);
    let out = python(&take);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
}

/// `acquire --json` prints the token and the fence; a nested `acquire` inside a run of the same
/// lock hands out the run's token and fence instead of waiting for itself; a later CI step
/// whose environment holds the values `acquire --env-file` wrote runs under that lock at once.
#[test]
fn acquire_json_nested_acquire_and_later_ci_steps() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let out = run(distlock(&redis).args(["acquire", "-k", "json", "--ttl", "30s", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["key"], "json");
    assert!(v["fence"].as_u64().unwrap() > 0);
    let token = v["token"].as_str().unwrap().to_owned();
    assert_eq!(
        redis.get(&lock_key("json")).as_deref(),
        Some(token.as_str())
    );
    // -E 0 with --env-file would let the job go on without the lock: refused.
    let out = run(distlock(&redis).args([
        "acquire",
        "-k",
        "json",
        "-E",
        "0",
        "--env-file",
        &dir.str("env"),
    ]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("-E 0"), "{}", stderr(&out));
    // A later step: the values of --env-file in its environment.
    let out =
        run(distlock(&redis).args(["acquire", "-k", "ci-step", "--env-file", &dir.str("env")]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let env = std::fs::read_to_string(dir.path("env")).unwrap();
    let value = |name: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap()
            .to_owned()
    };
    assert!(value("DISTLOCK_FENCE").parse::<u64>().unwrap() > 0);
    let out = run(distlock(&redis)
        .env("DISTLOCK_KEY", value("DISTLOCK_KEY"))
        .env("DISTLOCK_TOKEN", value("DISTLOCK_TOKEN"))
        .args([
            "run",
            "-k",
            "ci-step",
            "-n",
            "--",
            "sh",
            "-c",
            "echo $DISTLOCK_FENCE",
        ]));
    assert_eq!(
        out.status.code(),
        Some(0),
        "a later step waited for its own lock: {}",
        stderr(&out)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        value("DISTLOCK_FENCE")
    );
    // The same values for a lock they do not hold here: taken as usual.
    let out = run(distlock(&redis)
        .env("DISTLOCK_KEY", "other")
        .env("DISTLOCK_TOKEN", value("DISTLOCK_TOKEN"))
        .args(["run", "-k", "other", "-n", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A nested acquire inside a run hands out the run's token and fence.
    let path = path_with_distlock();
    let out = run(distlock(&redis).env("PATH", &path).args([
        "run",
        "-k",
        "nest-acq",
        "--",
        "sh",
        "-c",
        "echo \"$DISTLOCK_TOKEN $DISTLOCK_FENCE\"; distlock acquire -k nest-acq -n --json",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = stdout.lines();
    let outer: Vec<&str> = lines.next().unwrap().split(' ').collect();
    let nested: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(nested["token"], outer[0]);
    assert_eq!(nested["fence"].to_string(), outer[1]);
}

/// Issue 24: a holder that dies (SIGKILL: nothing releases) costs the waiter first in line at
/// most 0.3 s past its lock's expiry (it used to look no more often than every 2 s, and started
/// up to 2 s late). Twice.
#[test]
fn a_dead_holders_waiter_starts_within_300ms_of_the_expiry() {
    let redis = Redis::start();
    assert_a_dead_holders_waiter_starts_promptly(
        &|| distlock(&redis),
        &|_| &redis,
        Duration::from_millis(300),
        2,
    );
}
