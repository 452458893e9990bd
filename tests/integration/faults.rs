//! Real faults while the lock is held: the server stopped (SIGSTOP), paused (CLIENT PAUSE),
//! killed, restarted without its data, asleep during an acquire (DEBUG SLEEP), and a short blip
//! that a healthy job must survive.
//!
//! The safety assertion: the command is dead before the lock could expire in Redis. The earliest
//! possible expiry is bounded from the key's PTTL read *before* the fault: the key cannot expire
//! before `send time of that PTTL + PTTL` (later renewals only push the expiry out).

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::fixtures::*;

struct Held {
    holder: std::process::Child,
    child: nix::unistd::Pid,
    grandchild: nix::unistd::Pid,
    /// The lock cannot expire before this instant.
    earliest_expiry: Instant,
}

/// Start a holder with `ttl` whose command runs a background grandchild and waits, and measure
/// the earliest possible expiry of its lock.
fn hold(redis: &Redis, dir: &Scratch, key: &str, ttl: &str) -> Held {
    let holder = distlock(redis)
        .args(["run", "-k", key, "--ttl", ttl, "--", "sh", "-c"])
        .arg(format!(
            "sleep 1000 & echo $! > {gc}; echo $$ > {pid}; wait",
            gc = dir.str("grandchild"),
            pid = dir.str("child"),
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let child = read_pid(&dir.path("child"));
    let grandchild = read_pid(&dir.path("grandchild"));
    let sent = Instant::now();
    let pttl = redis.pttl(&lock_key(key));
    assert!(
        pttl > 0,
        "the lock must be held with an expiry, PTTL {pttl}"
    );
    Held {
        holder,
        child,
        grandchild,
        earliest_expiry: sent + Duration::from_millis(pttl as u64),
    }
}

/// Wait until the command and its grandchild are dead; assert it happened before the lock
/// could expire, and that distlock reports the loss with 124.
fn assert_killed_in_time(held: Held) -> String {
    let dead = wait_dead(held.child).max(wait_dead(held.grandchild));
    assert!(
        dead < held.earliest_expiry,
        "the command outlived the lock by {:?}",
        dead - held.earliest_expiry
    );
    let out = finish(held.holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    stderr(&out)
}

#[test]
fn redis_stopped_while_held() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let held = hold(&redis, &dir, "stopped", "2s");
    redis.signal(Signal::SIGSTOP);
    let err = assert_killed_in_time(held);
    redis.signal(Signal::SIGCONT);
    assert!(err.contains("renewing the lock failed"), "{err}");
    assert!(err.contains("lost lock \"stopped\""), "{err}");
}

/// When distlock kills in time by itself (Redis stopped: renewals fail until the deadline), the
/// command gets one kill signal, not two: distlock tells its guard, which holds the same
/// deadlines, before it sends it, and the guard only backs up the SIGKILL. The reason given is
/// distlock's own.
#[test]
fn a_kill_in_time_sends_one_kill_signal_and_gives_distlocks_reason() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let holder = distlock(&redis)
        .args(["run", "-k", "once", "--ttl", "2s", "--kill-grace", "400ms"])
        .args(["--", "sh", "-c"])
        .arg(format!(
            "trap 'echo TERM >> {log}' TERM; echo $$ > {pid}; while :; do sleep 0.02; done",
            log = dir.str("log"),
            pid = dir.str("child"),
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let child = read_pid(&dir.path("child"));
    let sent = Instant::now();
    let pttl = redis.pttl(&lock_key("once"));
    assert!(pttl > 0, "PTTL {pttl}");
    redis.signal(Signal::SIGSTOP);
    let dead = wait_dead(child);
    redis.signal(Signal::SIGCONT);
    assert!(dead < sent + Duration::from_millis(pttl as u64));
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.path("log")).unwrap_or_default(),
        "TERM\n",
        "exactly one kill signal"
    );
    assert!(
        stderr(&out).contains("renewing the lock failed"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("guard"), "{}", stderr(&out));
}

#[test]
fn redis_killed_while_held() {
    let mut redis = Redis::start();
    let dir = Scratch::new();
    let held = hold(&redis, &dir, "killed", "2s");
    redis.kill();
    let err = assert_killed_in_time(held);
    assert!(err.contains("lost lock"), "{err}");
}

#[test]
fn redis_restarted_without_data_while_held() {
    let mut redis = Redis::start();
    let dir = Scratch::new();
    let held = hold(&redis, &dir, "restarted", "3s");
    redis.restart();
    let err = assert_killed_in_time(held);
    assert!(err.contains("lost lock"), "{err}");
}

#[test]
fn client_pause_while_held() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let held = hold(&redis, &dir, "paused", "2s");
    redis.cmd::<String>(&["CLIENT", "PAUSE", "5000", "WRITE"]);
    let err = assert_killed_in_time(held);
    redis.cmd::<String>(&["CLIENT", "UNPAUSE"]);
    assert!(err.contains("lost lock"), "{err}");
}

/// A stop of the server shorter than the retry window costs the job nothing.
#[test]
fn a_short_blip_does_not_kill_a_healthy_job() {
    let redis = Redis::start();
    let dir = Scratch::new();
    // TTL 6s: renewal every 2s, SIGTERM 4.64s after the last confirmed renewal. A 2.2s stop
    // always swallows one renewal and always ends before that deadline.
    let holder = Holder::new(distlock(&redis), &dir, "blip")
        .args(&["--ttl", "6s"])
        .then("echo survived")
        .stdout_piped()
        .hold();
    redis.signal(Signal::SIGSTOP);
    let stopped = Instant::now();
    while stopped.elapsed() < Duration::from_millis(2200) {
        // The fault's duration is the thing under test, not a synchronisation.
        std::thread::sleep(Duration::from_millis(20));
    }
    redis.signal(Signal::SIGCONT);
    // Give the renewer the chance to succeed again, then let the command finish.
    wait_until("a renewal after the blip", || {
        redis.pttl(&lock_key("blip")) > 5000
    });
    let out = holder.finish();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "survived");
}

/// Block the server in DEBUG SLEEP and wait until it really is asleep (a PING gets no answer).
fn put_to_sleep(redis: &Redis, seconds: &str) -> std::thread::JoinHandle<()> {
    let port = redis.port();
    let seconds = seconds.to_owned();
    let sleeper = std::thread::spawn(move || {
        let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .unwrap()
            .get_connection()
            .unwrap();
        let _: () = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(&seconds)
            .query(&mut con)
            .unwrap();
    });
    wait_until("the server to fall asleep", || {
        let mut probe = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        probe
            .set_read_timeout(Some(Duration::from_millis(30)))
            .unwrap();
        probe.write_all(b"PING\r\n").unwrap();
        let mut buf = [0u8; 16];
        probe.read(&mut buf).is_err()
    });
    sleeper
}

/// An acquire whose reply is lost (the server sleeps past our timeout) may still land. distlock
/// must find out and use it: the command runs exactly once and no key is left behind.
#[test]
fn ambiguous_acquire_is_resolved_not_leaked() {
    let redis = Redis::start();
    let dir = Scratch::new();
    // Load the scripts, so that the attempts queued behind DEBUG SLEEP really execute.
    let out = run(distlock(&redis).args(["run", "-k", "warm-up", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    let sleeper = put_to_sleep(&redis, "1");
    let out = run(distlock(&redis)
        .args([
            "--redis-timeout",
            "200ms",
            "run",
            "-k",
            "ambiguous",
            "--wait",
            "10s",
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("echo ran >> {}", dir.str("runs"))));
    sleeper.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("failed while waiting for lock \"ambiguous\" (no answer within 200ms)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(dir.path("runs")).unwrap(), "ran\n");
    assert!(!redis.exists(&lock_key("ambiguous")), "the lock was leaked");
}

/// Redis pauses writes just as the command ends and lets them through after the lock expired:
/// the release finds the key gone. That is expiry during a slow release, not a lost lock: the
/// command ended while the lock was certainly held, so its own status is reported (with a
/// warning).
#[test]
fn a_release_delayed_past_expiry_is_not_a_lost_lock() {
    let redis = Redis::start();
    let out = run(distlock(&redis)
        .args([
            "--redis-timeout",
            "5s",
            "run",
            "-k",
            "slow-release",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
        ])
        .arg(format!(
            "redis-cli -p {} CLIENT PAUSE 1500 WRITE > /dev/null; exit 7",
            redis.port()
        )));
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("had expired by the time Redis answered the release"),
        "{}",
        stderr(&out)
    );
}
