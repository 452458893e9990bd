//! Issue 19: what cron and CI users ask of a lock tool. At most one run per period
//! (`--min-interval`, `--cooldown`: after a run that succeeded the lock stays taken), and which
//! slot of a semaphore a holder got (`DISTLOCK_SLOT`).
//!
//! Times are compared on one clock: the jobs stamp `date +%s%N` (the machine's real-time clock)
//! and the Redis server stamps `acquired_at` and `ended_at` with `TIME`, the same clock; so a
//! bound such as "the next run started at least 2s after the last one ended" is exact, however
//! loaded the machine.

use std::process::Child;

use crate::fixtures::topology::Primaries;
use crate::fixtures::*;

/// `sh -c` that appends `start <ns>` to `file`, sleeps `secs`, appends `end <ns>`, then exits
/// with `code`.
fn job(file: &str, secs: &str, code: i32) -> [String; 3] {
    [
        "sh".into(),
        "-c".into(),
        format!(
            "echo start $(date +%s%N) >> {file}; sleep {secs}; echo end $(date +%s%N) >> {file}; \
             exit {code}"
        ),
    ]
}

/// The stamps of `what` (`start` or `end`) in `file`, in ms since the epoch.
fn stamps(file: &std::path::Path, what: &str) -> Vec<u64> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix(what)?.trim().parse::<u64>().ok())
        .map(|ns| ns / 1_000_000)
        .collect()
}

/// A field of the lock's owner hash, as a number.
fn owner_field(redis: &Redis, key: &str, field: &str) -> Option<u64> {
    let value: Option<String> = redis.cmd(&["HGET", &format!("{}:owner", lock_key(key)), field]);
    value.and_then(|v| v.parse().ok())
}

fn run_job(redis: &Redis, key: &str, flags: &[&str], job: &[String]) -> std::process::Output {
    run(distlock(redis)
        .args(["run", "-k", key])
        .args(flags)
        .arg("--")
        .args(job))
}

/// The same cron entry on two hosts, the second firing after the first one's run is over (3s
/// apart, the first run taking 1s): with `--min-interval 1m` the report runs once and the late
/// host skips (quietly with `-n -E 0`, as cron wants; with a message and 75 otherwise); without
/// it, twice.
#[test]
fn a_cron_job_runs_once_per_period_across_hosts() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let report = dir.str("report");
    for host in 0..2 {
        let out = run_job(
            &redis,
            "report",
            &["-n", "-E", "0", "--min-interval", "1m"],
            &job(&report, "1", 0),
        );
        assert_eq!(out.status.code(), Some(0), "host {host}: {}", stderr(&out));
        if host == 1 {
            assert!(
                out.stderr.is_empty(),
                "cron mails any output: {}",
                stderr(&out)
            );
        }
    }
    assert_eq!(stamps(&dir.path("report"), "start").len(), 1, "ran once");

    // Without -E 0, the skip says when the last run was and when the next may start.
    let out = run_job(
        &redis,
        "report",
        &["-n", "--min-interval", "1m"],
        &job(&report, "0", 0),
    );
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("lock \"report\" ran recently: the last run, by ")
            && err.contains("ended ")
            && err.contains("the next may start in ")
            && err.contains("(--min-interval 1m)"),
        "{err}"
    );
    assert_eq!(stamps(&dir.path("report"), "start").len(), 1);

    // Without --min-interval: twice.
    let twice = dir.str("twice");
    for _ in 0..2 {
        let out = run_job(&redis, "twice", &["-n", "-E", "0"], &job(&twice, "1", 0));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    assert_eq!(stamps(&dir.path("twice"), "start").len(), 2);
}

/// A waiter takes the lock once the interval has passed: no earlier than the first run's
/// start (the server's `acquired_at`) plus `--min-interval`, however early it asked.
#[test]
fn a_waiter_starts_once_the_interval_has_passed() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let log = dir.str("log");
    let first = spawn(
        distlock(&redis)
            .args(["run", "-k", "iv", "--min-interval", "2s", "--"])
            .args(job(&log, "0.2", 0)),
    );
    wait_until("the first run to start", || {
        !stamps(&dir.path("log"), "start").is_empty()
    });
    let acquired_at = owner_field(&redis, "iv", "acquired_at").expect("acquired_at");
    let second = spawn(
        distlock(&redis)
            .args([
                "run",
                "-k",
                "iv",
                "--wait",
                "20s",
                "--min-interval",
                "2s",
                "--",
            ])
            .args(job(&log, "0", 0)),
    );
    assert_eq!(finish(first).status.code(), Some(0));
    let out = finish(second);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let starts = stamps(&dir.path("log"), "start");
    assert_eq!(starts.len(), 2);
    assert!(
        starts[1] >= acquired_at + 2000,
        "the second run started {}ms after the first was acquired",
        starts[1] as i64 - acquired_at as i64
    );
}

/// `--cooldown` counts from the end of the run: the next run starts no earlier than the end
/// (the server's `ended_at`, and the job's own last stamp) plus the cool-down.
#[test]
fn a_cooldown_counts_from_the_end_of_the_run() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let log = dir.str("log");
    let first = spawn(
        distlock(&redis)
            .args(["run", "-k", "cd", "--cooldown", "2s", "--"])
            .args(job(&log, "1", 0)),
    );
    wait_until("the first run to start", || {
        !stamps(&dir.path("log"), "start").is_empty()
    });
    let second = spawn(
        distlock(&redis)
            .args(["run", "-k", "cd", "--wait", "20s", "--"])
            .args(job(&log, "0", 0)),
    );
    assert_eq!(finish(first).status.code(), Some(0));
    let ended_at = owner_field(&redis, "cd", "ended_at");
    let out = finish(second);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (starts, ends) = (
        stamps(&dir.path("log"), "start"),
        stamps(&dir.path("log"), "end"),
    );
    assert_eq!(starts.len(), 2);
    assert!(
        starts[1] >= ends[0] + 2000,
        "the second run started {}ms after the first ended",
        starts[1] as i64 - ends[0] as i64
    );
    if let Some(ended_at) = ended_at {
        assert!(
            ended_at >= ends[0],
            "ended_at is the release, after the job's end"
        );
        assert!(starts[1] >= ended_at + 2000);
    }
}

/// A run that fails (non-zero exit, or killed by a signal) leaves the lock free at once, so
/// that the next host can retry.
#[test]
fn a_failed_run_does_not_block_the_retry() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let log = dir.str("log");
    let out = run_job(&redis, "f", &["--min-interval", "1m"], &job(&log, "0", 3));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!redis.exists(&lock_key("f")), "free at once");
    let out = run(distlock(&redis).args([
        "run",
        "-k",
        "f",
        "--min-interval",
        "1m",
        "--",
        "sh",
        "-c",
        "kill -TERM $$",
    ]));
    assert_eq!(signal_of(&out), Some(libc::SIGTERM), "{}", stderr(&out));
    assert!(!redis.exists(&lock_key("f")));
    let out = run_job(
        &redis,
        "f",
        &["-n", "--min-interval", "1m"],
        &job(&log, "0", 0),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stamps(&dir.path("log"), "start").len(), 2);
    // That one succeeded: now the lock cools down.
    assert!(redis.exists(&lock_key("f")));
}

/// `status` and `list` show a lock cooling down (held: exit 0), with when the last run ended
/// and when the next may start; `break` clears it.
#[test]
fn status_and_list_show_a_cool_down_and_break_clears_it() {
    let redis = Redis::start();
    let out = run(distlock(&redis).args(["run", "-k", "st", "--cooldown", "1h", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(distlock(&redis).args(["status", "-k", "st"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.starts_with("lock \"st\" is cooling down (it ran recently)\n")
            && text.contains("  ended     ")
            && text.contains("  next run  may start in ")
            && text.contains("--cooldown 1h"),
        "{text}"
    );
    let out = run(distlock(&redis).args(["status", "-k", "st", "--json"]));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["held"], true);
    assert_eq!(json["cooldown"]["cooldown_ms"], 3_600_000);
    assert!(json["cooldown"]["next_at"].is_string(), "{json}");
    let out = run(distlock(&redis).arg("list"));
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(listed.contains("(cooling down) true"), "{listed}");

    let out = run(distlock(&redis).args(["break", "-k", "st", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(distlock(&redis).args(["run", "-n", "-k", "st", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `acquire` stores the interval with the lock, and `release` applies it; `release --failed`
/// leaves the lock free.
#[test]
fn acquire_and_release_apply_the_interval() {
    let redis = Redis::start();
    for (key, failed) in [("ok", false), ("failed", true)] {
        let out = run(distlock(&redis).args(["acquire", "-k", key, "--min-interval", "1h"]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let mut release = distlock(&redis);
        release.args(["release", "-k", key, "--token", &token]);
        if failed {
            release.arg("--failed");
        }
        let out = run(&mut release);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let out = run(distlock(&redis).args(["run", "-n", "-k", key, "--", "true"]));
        let expected = if failed { 0 } else { 75 };
        assert_eq!(out.status.code(), Some(expected), "{key}: {}", stderr(&out));
    }
}

#[test]
fn intervals_are_refused_where_they_mean_nothing() {
    for (args, said) in [
        (
            vec!["--min-interval", "1m", "--limit", "3"],
            "--min-interval keeps a mutex taken after a run; it does not apply to a semaphore",
        ),
        (
            vec!["--cooldown", "40d"],
            "--cooldown 40d is out of range; use 1ms to 31 days",
        ),
        (
            vec!["--min-interval", "0s"],
            "--min-interval 0s is out of range",
        ),
    ] {
        let out = run(bare_distlock()
            .env("DISTLOCK_REDIS_URL", "redis://127.0.0.1:1")
            .args(["run", "-k", "x"])
            .args(&args)
            .args(["--", "true"]));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(said), "{args:?}: {}", stderr(&out));
    }
}

/// A Redlock cools down on every node: the next run, even on a majority alone, finds it taken.
#[test]
fn a_redlock_keeps_the_interval_on_every_node() {
    let nodes = Primaries::start(3);
    let urls = nodes.urls().join(" ");
    let at = || {
        let mut cmd = bare_distlock();
        cmd.env("DISTLOCK_REDIS_URL", &urls);
        cmd
    };
    let out = run(at().args(["run", "-k", "rl", "--min-interval", "1m", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for i in 0..3 {
        assert!(nodes.node(i).exists(&lock_key("rl")), "node {i}");
    }
    let out = run(at().args(["run", "-n", "-k", "rl", "--", "echo", "ran"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(stderr(&out).contains("ran recently"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

/// A holder of a slot of `pool` (`--limit 3`) whose command says its `DISTLOCK_SLOT`, then
/// waits for its release.
fn slot_holder(redis: &Redis, dir: &Scratch, extra: &[&str]) -> Holding {
    Holder::new(distlock(redis), dir, "pool")
        .args(&["--limit", "3"])
        .args(extra)
        .says("$DISTLOCK_SLOT")
        .start()
}

/// Three holders of `--limit 3` get the slots 0, 1 and 2; when one leaves, the next holder
/// gets its slot; `status` shows each holder's slot.
#[test]
fn semaphore_holders_get_distinct_slots_and_a_freed_one_is_reused() {
    let redis = Redis::start();
    let dirs: [Scratch; 4] = std::array::from_fn(|_| Scratch::new());
    let mut holders: Vec<Holding> = dirs[..3]
        .iter()
        .map(|dir| slot_holder(&redis, dir, &[]))
        .collect();
    let slot = |holder: &Holding| -> u32 { holder.said().parse().unwrap() };
    let mut slots: Vec<u32> = holders.iter().map(slot).collect();
    slots.sort_unstable();
    assert_eq!(slots, [0, 1, 2]);
    let out = run(distlock(&redis).args(["status", "-k", "pool"]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    for n in 0..3 {
        assert!(text.contains(&format!("  slot      {n}\n")), "{text}");
    }

    let freed = slot(&holders[1]);
    let fourth = slot_holder(&redis, &dirs[3], &["--wait", "20s"]);
    wait_until("the fourth to wait in line", || redis.in_line("pool") == 1);
    holders[1].release();
    assert_eq!(slot(&fourth), freed);
    holders.push(fourth);
    for holder in holders {
        assert_eq!(holder.finish().status.code(), Some(0));
    }
    // acquire hands the slot out too.
    let out = run(distlock(&redis).args(["acquire", "-k", "pool", "--limit", "3", "--json"]));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["slot"], 0, "{json}");
}

/// `--timeout 1s` on a command that runs for 30s and has a grandchild: the whole group is
/// stopped (the stubborn grandchild by SIGKILL after the grace), the lock is released, and
/// distlock exits 79, its own code, not 124.
#[test]
fn a_time_limit_stops_the_command_and_releases() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let started = std::time::Instant::now();
    let out = run(distlock(&redis)
        .args([
            "run",
            "-k",
            "tl",
            "--timeout",
            "1s",
            "--kill-grace",
            "1s",
            "--",
        ])
        .args(["sh", "-c"])
        .arg(format!(
            "sh -c 'trap \"\" TERM; echo $$ > {child}; sleep 30' & \
             trap 'echo term > {term}; wait' TERM; sleep 30 & wait",
            child = dir.str("grandchild"),
            term = dir.str("term"),
        )));
    assert_eq!(out.status.code(), Some(79), "{}", stderr(&out));
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    let err = stderr(&out);
    assert!(
        err.contains("the command ran past --timeout 1s; its process group was stopped and lock \"tl\" released (exit 79)"),
        "{err}"
    );
    assert_eq!(
        wait_for_file(&dir.path("term")).trim(),
        "term",
        "--kill-signal first"
    );
    assert!(
        !alive(read_pid(&dir.path("grandchild"))),
        "the grandchild outlived the run"
    );
    assert!(!redis.exists(&lock_key("tl")), "released");
    let out = run(distlock(&redis).args(["run", "-n", "-k", "tl", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A holder that stamps every 10ms until it is stopped.
fn stamping_holder(redis: &Redis, dir: &Scratch, key: &str, extra: &[&str]) -> Child {
    let child = spawn(
        distlock(redis)
            .args(["run", "-k", key])
            .args(extra)
            .args(["--", "sh", "-c"])
            .arg(format!(
                "trap 'echo end $(date +%s%N) >> {log}; exit 0' TERM; echo held > {held}; \
                 while :; do echo tick $(date +%s%N) >> {log}; sleep 0.01; done",
                log = dir.str("old"),
                held = dir.str("held"),
            )),
    );
    wait_for_file(&dir.path("held"));
    child
}

/// `--replace`: the newer run asks the running holder to stop; its distlock stops the command
/// (--kill-signal), releases, and exits 75 saying who replaced it; the older waiters are
/// cancelled; the new command starts after the old one's last write, never beside it.
#[test]
fn a_newer_run_replaces_the_running_one_without_overlap() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let old = stamping_holder(&redis, &dir, "pr", &[]);
    let waiter = spawn(distlock(&redis).args(["run", "-k", "pr", "--", "true"]));
    wait_until("the waiter to take its place in line", || {
        redis.in_line("pr") == 1
    });
    let out = run(distlock(&redis)
        .args(["run", "-k", "pr", "--replace", "--note", "preview 43", "--"])
        .args(["sh", "-c"])
        .arg(format!("echo start $(date +%s%N) >> {}", dir.str("new"))));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = finish(old);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("replaced by ") && stderr(&out).contains("(preview 43)"),
        "{}",
        stderr(&out)
    );
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(stderr(&out).contains("superseded by"), "{}", stderr(&out));
    let new_start = stamps(&dir.path("new"), "start")[0];
    let old_last = std::fs::read_to_string(dir.path("old"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .max()
        .unwrap()
        / 1_000_000;
    assert!(
        stamps(&dir.path("old"), "end").len() == 1,
        "the old command was stopped with --kill-signal"
    );
    assert!(
        new_start > old_last,
        "the new command started {}ms before the old one's last write",
        old_last - new_start
    );
}

/// A replacement asked for at once (before the holder listens for it) still stops the holder:
/// its first renewal reads the request.
#[test]
fn a_replacement_right_after_the_start_is_not_missed() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let old = stamping_holder(&redis, &dir, "early", &["--ttl", "30s"]);
    let out = run(distlock(&redis).args(["run", "-k", "early", "--replace", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(finish(old).status.code(), Some(75));
}

/// A holder that no distlock run supervises (an acquire) cannot be stopped: the replacing run
/// waits for its release. --replace is refused where it cannot work.
#[test]
fn replace_waits_for_an_acquired_lock_and_is_refused_where_it_cannot_work() {
    let redis = Redis::start();
    let out = run(distlock(&redis).args(["acquire", "-k", "acq", "--ttl", "1m"]));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let out = run(distlock(&redis).args([
        "run",
        "-k",
        "acq",
        "--replace",
        "--wait",
        "1s",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let out = run(distlock(&redis).args(["release", "-k", "acq", "--token", &token]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    for (args, said) in [
        (
            vec!["-n"],
            "--replace waits for the running command to stop: it needs a wait",
        ),
        (
            vec!["--limit", "2"],
            "--replace stops the one holder of a mutex",
        ),
    ] {
        let out = run(distlock(&redis)
            .args(["run", "-k", "r", "--replace"])
            .args(&args)
            .args(["--", "true"]));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(said), "{}", stderr(&out));
    }
    let nodes = Primaries::start(3);
    let out = run(bare_distlock()
        .env("DISTLOCK_REDIS_URL", nodes.urls().join(" "))
        .args(["run", "-k", "r", "--replace", "--", "true"]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--supersede and --replace need a line"),
        "{}",
        stderr(&out)
    );
}
