//! The doorbell (issue 26): a waiter in line waits on one connection, blocked on its own list,
//! with its next attempt sent behind the wait. What a signal does to that wait, what a user
//! without the doorbell's ACL rights gets, and mixed fleets: a holder or a waiter of a distlock
//! from before the doorbell (its scripts, as they were: `fixtures/before_doorbell/`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::fixtures::*;

/// A script as distlock builds it (`protocol.lua`, `history.lua`, `common.lua` and its own
/// body) from the files in `dir` (relative to the crate).
fn built(dir: &str, body: &str) -> String {
    ["protocol", "history", "common", body]
        .iter()
        .map(|name| {
            std::fs::read_to_string(format!("{}/{dir}/{name}.lua", env!("CARGO_MANIFEST_DIR")))
                .unwrap()
        })
        .collect()
}

/// One of today's scripts.
fn current(body: &str) -> String {
    built("src/lock/lua", body)
}

/// One of the older distlock's scripts.
fn before_doorbell(body: &str) -> String {
    built("tests/integration/fixtures/before_doorbell", body)
}

/// The twelve keys of the lock `key` (see `src/lock/lua/common.lua`).
fn keys_of(key: &str) -> Vec<String> {
    let k = lock_key(key);
    let mut keys = vec![k.clone(), format!("{k}:owner")];
    for suffix in [
        "fence",
        "queue",
        "waiters",
        "alive",
        "slots",
        "holders",
        "superseded",
        "protocol",
        "history",
        "history:held",
    ] {
        keys.push(format!("{k}:{suffix}"));
    }
    keys
}

/// Run an older distlock's script `body` for `key` with `args`.
fn old_script(redis: &Redis, body: &str, key: &str, args: &[&str]) -> redis::Value {
    script(redis, &before_doorbell(body), key, args)
}

/// Run `source` for `key` with `args`.
fn script(redis: &Redis, source: &str, key: &str, args: &[&str]) -> redis::Value {
    let keys = keys_of(key);
    let mut words: Vec<&str> = vec!["EVAL", source, "12"];
    words.extend(keys.iter().map(String::as_str));
    words.extend(args);
    redis.cmd(&words)
}

/// An older distlock's acquire attempt (a mutex, `mode`, a 30 s claim).
fn old_acquire(redis: &Redis, key: &str, token: &str, mode: &str) -> redis::Value {
    old_script(
        redis,
        "acquire",
        key,
        &[token, "30000", "1", mode, "6000", "3000", "host", "old"],
    )
}

/// A waiter blocked on its doorbell ends within a second of SIGTERM, SIGINT or SIGHUP (the read
/// is cut short, not waited out: the wait lasts up to 2 s), dies of that signal, and leaves
/// nothing of its own in Redis: no place, no doorbell, no grant.
#[test]
fn a_signal_ends_a_wait_on_the_doorbell_at_once_and_leaves_nothing() {
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        let redis = Redis::start();
        let key = lock_key("bell-int");
        redis.cmd::<String>(&["SET", &key, "holder", "PX", "60000"]);
        let waiter = distlock(&redis)
            .args(["run", "-k", "bell-int", "--", "echo", "ran"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until("the waiter to block on its doorbell", || {
            redis.in_line("bell-int") == 1 && redis.blocked_on_doorbell()
        });
        let sent = Instant::now();
        kill(Pid::from_raw(waiter.id() as i32), signal).unwrap();
        let out = finish(waiter);
        let took = sent.elapsed();
        assert_eq!(
            signal_of(&out),
            Some(signal as i32),
            "{signal}: {:?} {}",
            out.status,
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "the command must not run");
        assert!(
            took < Duration::from_secs(1),
            "{signal}: the wait ended {took:?} after the signal"
        );
        assert_eq!(redis.get(&key).as_deref(), Some("holder"));
        let mut keys: Vec<String> = redis.cmd(&["KEYS", "*"]);
        keys.sort();
        assert_eq!(keys, vec![key.clone(), format!("{key}:fence")], "{signal}");
        assert!(!redis.blocked_on_doorbell(), "{signal}: nothing waits");
    }
}

/// A holder of a distlock from before the doorbell releases by publishing only: a waiter with a
/// doorbell is not woken, and takes its turn up at its next look, within about 2 s of the
/// hand-off (issue 26: "within 2.1 s"; the take-up window is 3 s, so it never loses the turn).
#[test]
fn an_older_holders_hand_off_is_taken_up_at_the_next_look() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let granted = old_acquire(&redis, "mixed-old-holder", "old-holder", "try");
    assert!(matches!(&granted, redis::Value::Array(a) if a.first() == Some(&redis::Value::Int(1))));
    let waiter = distlock(&redis)
        .args(["run", "-k", "mixed-old-holder", "--", "sh", "-c"])
        .arg(format!("date +%s.%N > {}", dir.str("started")))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the waiter to block on its doorbell", || {
        redis.in_line("mixed-old-holder") == 1 && redis.blocked_on_doorbell()
    });
    let reply = old_script(&redis, "release", "mixed-old-holder", &["old-holder", "0"]);
    let released = Instant::now();
    assert_eq!(reply, redis::Value::Array(vec![redis::Value::Int(1)]));
    // Handed over (the key holds the waiter's token, marked `handed`) until the waiter's
    // attempt takes it up: watched on the server, so that the waiter's own start-up (a process
    // to spawn, on a loaded machine) does not count.
    let owner = format!("{}:owner", lock_key("mixed-old-holder"));
    wait_until("the waiter to take its turn up", || {
        redis.cmd::<i64>(&["HEXISTS", &owner, "handed"]) == 0
    });
    let late = released.elapsed();
    eprintln!("an older holder's hand-off taken up {late:?} after the release");
    // The waiter's wait on the doorbell ends at most 2 s after it began (before the release);
    // Redis ends a blocking wait on its timer (every 100 ms).
    assert!(
        late < Duration::from_millis(2300),
        "taken up {late:?} after an older holder's release (the waiter looks every 2 s)"
    );
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    wait_for_file(&dir.path("started"));
    assert!(!redis.exists(&lock_key("mixed-old-holder")));
}

/// A waiter of a distlock from before the doorbell subscribes to its wake channel and says
/// nothing of a doorbell: a new holder's release publishes its turn there, as before.
#[test]
fn an_older_waiter_is_woken_by_a_message() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let first = hold_until_released(distlock(&redis), &dir, "mixed-old-waiter", &[]);
    // The older waiter: subscribed first, then in line (as it did).
    let channel = format!("{}:wake:old-waiter", lock_key("mixed-old-waiter"));
    let mut subscriber = Command::new("redis-cli")
        .args(["-p", &redis.port().to_string(), "SUBSCRIBE", &channel])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(subscriber.stdout.take().unwrap()).lines();
    // "subscribe", the channel, 1: subscribed.
    for _ in 0..3 {
        lines.next().unwrap().unwrap();
    }
    let queued = old_acquire(&redis, "mixed-old-waiter", "old-waiter", "join");
    assert!(matches!(&queued, redis::Value::Array(a) if a.first() == Some(&redis::Value::Int(2))));
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    // "message", the channel, the message.
    let message: Vec<String> = (0..3).map(|_| lines.next().unwrap().unwrap()).collect();
    assert_eq!(message, ["message", channel.as_str(), "granted"]);
    let _ = subscriber.kill();
    let _ = subscriber.wait();
    assert_eq!(
        redis.get(&lock_key("mixed-old-waiter")).as_deref(),
        Some("old-waiter")
    );
    assert!(!redis.exists(&format!("{}:wake:old-waiter", lock_key("mixed-old-waiter"))));
}

/// A user without the doorbell's rights (`+blpop`, `+lpush`: the ACL documented before it)
/// keeps working: the waiter says once under `-v` that it waits for release notifications
/// instead, and is woken by one within a second of the release.
#[test]
fn a_user_without_the_doorbells_rights_is_woken_by_a_message() {
    let rules = "~distlock:* &distlock:* -@all +evalsha +eval +script|load +subscribe +get +set +del +exists +pexpire +pexpireat +pttl +publish +hset +hget +hgetall +hdel +zadd +zrange +zrangebyscore +zrank +zscore +zrem +zcard +time +xadd +xrange +xrevrange";
    let redis = Redis::options().user("older", "pw", rules).start();
    let url = format!("redis://older:pw@127.0.0.1:{}", redis.port());
    let as_older = || {
        let mut cmd = bare_distlock();
        cmd.args(["--redis", &url]);
        cmd
    };
    let dir = Scratch::new();
    let started = Scratch::new();
    let first = hold_until_released(as_older(), &dir, "no-bell", &[]);
    let waiter = as_older()
        .args(["-v", "run", "-k", "no-bell", "--", "sh", "-c"])
        .arg(format!("date +%s.%N > {}", started.str("started")))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the waiter to subscribe", || {
        let channels: Vec<String> = redis.cmd(&["PUBSUB", "CHANNELS", "*:wake:*"]);
        redis.in_line("no-bell") == 1 && !channels.is_empty()
    });
    let released = std::time::SystemTime::now();
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = stderr(&out).matches("refuses the doorbell").count();
    assert_eq!(said, 1, "{}", stderr(&out));
    let started: f64 = wait_for_file(&started.path("started"))
        .trim()
        .parse()
        .unwrap();
    let late = started
        - released
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
    assert!(late < 1.0, "woken {late:.3}s after the release");
}

/// Ctrl-Z (SIGTSTP) while a waiter is blocked on its doorbell stops it when that wait ends (at
/// most the 2 s of one wait, without a terminal), not never: the signal waits for the read, and
/// is then acted on. Resumed, it waits on and gets the lock.
#[test]
fn ctrl_z_while_on_the_doorbell_stops_the_waiter_within_one_wait() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let first = hold_until_released(distlock(&redis), &dir, "bell-tstp", &[]);
    let waiter = distlock(&redis)
        .args(["run", "-k", "bell-tstp", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(waiter.id() as i32);
    wait_until("the waiter to block on its doorbell", || {
        redis.in_line("bell-tstp") == 1 && redis.blocked_on_doorbell()
    });
    let sent = Instant::now();
    kill(pid, Signal::SIGTSTP).unwrap();
    wait_until("the waiter to stop", || state_of(pid) == "T");
    let took = sent.elapsed();
    assert!(
        took < Duration::from_millis(2500),
        "stopped {took:?} after SIGTSTP"
    );
    kill(pid, Signal::SIGCONT).unwrap();
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A "refresh" (the attempt sent behind a wait on the doorbell) for a token without a place in
/// line, as one that Redis runs after its waiter gave up: it answers "no place" and changes
/// nothing, on a busy lock (it does not join) and on a free one (it does not take it).
#[test]
fn a_refresh_without_a_place_changes_nothing() {
    let redis = Redis::start();
    let acquire = current("acquire");
    let refresh = |key: &str| {
        script(
            &redis,
            &acquire,
            key,
            &[
                "gone", "9200", "1", "refresh", "6000", "3000", "wake", "list",
            ],
        )
    };
    let dump = || {
        let mut keys: Vec<String> = redis.cmd(&["KEYS", "*"]);
        keys.sort();
        keys.into_iter()
            .map(|k| {
                let kind: String = redis.cmd(&["TYPE", &k]);
                (k, kind)
            })
            .collect::<Vec<_>>()
    };
    redis.cmd::<String>(&["SET", &lock_key("busy"), "holder", "PX", "60000"]);
    let before = dump();
    assert_eq!(
        refresh("busy"),
        redis::Value::Array(vec![redis::Value::Int(5)])
    );
    assert_eq!(
        refresh("free"),
        redis::Value::Array(vec![redis::Value::Int(5)])
    );
    assert_eq!(dump(), before, "nothing changed");
    assert_eq!(redis.in_line("busy"), 0);
    assert!(!redis.exists(&lock_key("free")));
}
