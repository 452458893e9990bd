//! Keeping the lock, and losing it: renewal, an operator taking the key, a child that ignores
//! SIGTERM, grandchildren, and processes left behind.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::fixtures::*;

#[test]
fn renewal_keeps_a_short_ttl_lock_through_a_longer_command() {
    let redis = Redis::start();
    let key = lock_key("renewed");
    // A 1s TTL, a 3.5s command that checks at the end that the lock is still its own.
    let script = format!(
        "sleep 3.5; v=$(redis-cli -p {port} GET '{key}'); [ \"$v\" = \"$DISTLOCK_TOKEN\" ] && echo still-mine",
        port = redis.port()
    );
    let out = run(distlock(&redis).args([
        "run", "-k", "renewed", "--ttl", "1s", "--", "sh", "-c", &script,
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "still-mine");
    assert!(
        out.stderr.is_empty(),
        "no warnings for a healthy run: {}",
        stderr(&out)
    );
    assert!(!redis.exists(&key));
}

/// Start a holder whose command writes its pid and its background grandchild's pid, then waits.
fn start_holder(
    redis: &Redis,
    dir: &Scratch,
    key: &str,
    extra: &[&str],
    body: &str,
) -> std::process::Child {
    distlock(redis)
        .args(["run", "-k", key])
        .args(extra)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "{body} sleep 1000 & echo $! > {gc}; echo $$ > {pid}; wait",
            gc = dir.str("grandchild"),
            pid = dir.str("child"),
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn operator_takes_the_key(take: &[&str]) {
    let redis = Redis::start();
    let dir = Scratch::new();
    let key = lock_key("taken");
    let holder = start_holder(&redis, &dir, "taken", &["--ttl", "3s"], "");
    let child = read_pid(&dir.path("child"));
    let grandchild = read_pid(&dir.path("grandchild"));
    let mut args = take.to_vec();
    args.insert(1, &key);
    redis.cmd::<redis::Value>(&args);
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("lost lock \"taken\""),
        "{}",
        stderr(&out)
    );
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(!alive(child), "the command must be dead");
    assert!(
        !alive(grandchild),
        "its background process must be dead too"
    );
    // The new holder's key is untouched.
    if take[0] == "SET" {
        assert_eq!(redis.get(&key).as_deref(), Some("operator"));
    } else {
        assert!(!redis.exists(&key));
    }
}

#[test]
fn operator_overwrites_the_key() {
    operator_takes_the_key(&["SET", "operator", "PX", "60000"]);
}

#[test]
fn operator_deletes_the_key() {
    operator_takes_the_key(&["DEL"]);
}

#[test]
fn a_child_that_ignores_sigterm_gets_sigkill_after_the_grace() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let holder = start_holder(
        &redis,
        &dir,
        "stubborn",
        &["--ttl", "10s", "--kill-grace", "1s"],
        "trap '' TERM;",
    );
    let child = read_pid(&dir.path("child"));
    let grandchild = read_pid(&dir.path("grandchild"));
    redis.cmd::<i64>(&["DEL", &lock_key("stubborn")]);
    // The loss is noticed at the next renewal (every ttl/3); SIGKILL follows the TERM by 1s.
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(!alive(child) && !alive(grandchild));
}

#[test]
fn processes_left_behind_are_stopped_before_the_release() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let out = run(distlock(&redis)
        .args(["run", "-k", "leftover", "--", "sh", "-c"])
        .arg(format!("sleep 1000 & echo $! > {}", dir.str("bg"))));
    let bg = read_pid(&dir.path("bg"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!alive(bg), "a background process outlived the lock");
    assert!(stderr(&out).contains("left processes"), "{}", stderr(&out));
    assert!(!redis.exists(&lock_key("leftover")));
}

#[test]
fn lost_lock_when_operator_deletes_key_between_renewals_of_a_finished_command() {
    // The command finishes before the next renewal could notice the deletion: the release
    // finds the lock gone, and distlock must not report success.
    let redis = Redis::start();
    let script = format!(
        "redis-cli -p {} DEL '{}' > /dev/null",
        redis.port(),
        lock_key("gone")
    );
    let start = Instant::now();
    let out = run(distlock(&redis).args([
        "run", "-k", "gone", "--ttl", "60s", "--", "sh", "-c", &script,
    ]));
    assert!(start.elapsed() < Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(stderr(&out).contains("no longer held"), "{}", stderr(&out));
}
