//! Waiting for a busy lock: expiry of a crashed holder, release notifications, wait limits.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::fixtures::*;

/// A holder that crashed leaves its key to expire; nothing is published. A waiter must take the
/// lock as soon as it expires, in both modes, without waiting for a notification.
fn crashed_holder_expiry_is_picked_up(mode: &str) {
    let redis = Redis::start();
    let key = lock_key("crashed");
    let dir = Scratch::new();
    redis.cmd::<String>(&["SET", &key, "dead-holder", "PX", "1500"]);
    let set_at = Instant::now();
    let out = run(distlock(&redis)
        .args([
            "run",
            "-k",
            "crashed",
            "--wait-mode",
            mode,
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("echo started > {}", dir.str("started"))));
    let elapsed = set_at.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.path("started").exists());
    // Not before the expiry, and not much after it: the wait is bounded by the holder's PTTL,
    // not by the notification that never comes (nor by the 5s no-expiry poll).
    assert!(elapsed >= Duration::from_millis(1500), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_millis(4000),
        "{mode}: took {elapsed:?} after a 1.5s expiry"
    );
}

#[test]
fn crashed_holder_expiry_is_picked_up_notify() {
    crashed_holder_expiry_is_picked_up("notify");
}

#[test]
fn crashed_holder_expiry_is_picked_up_spin() {
    crashed_holder_expiry_is_picked_up("spin");
}

/// With a holder whose lock has a long TTL, only the release notification can wake the waiter
/// early: a waiter that starts its command long before the TTL ran out proves the hand-off.
#[test]
fn notify_mode_hands_off_on_release() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let holder = hold_until_released(distlock(&redis), &dir, "handoff", &["--ttl", "60s"]);
    let waiter = distlock(&redis)
        .args(["run", "-k", "handoff", "-v", "--", "sh", "-c"])
        .arg(format!("echo got > {}", dir.str("got")))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The waiter subscribes before it sleeps: wait until it has.
    wait_until("the waiter to subscribe", || redis.in_line("handoff") == 1);
    let released = Instant::now();
    release(&dir);
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(0));
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.path("got").exists());
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "hand-off took {took:?}; without the notification it would take ~60s"
    );
    assert!(
        stderr(&out).contains("release notification received"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn wait_limit_is_honoured() {
    let redis = Redis::start();
    redis.cmd::<String>(&["SET", &lock_key("held"), "x", "PX", "60000"]);
    for mode in ["notify", "spin"] {
        let start = Instant::now();
        let out = run(distlock(&redis).args([
            "run",
            "-k",
            "held",
            "--wait",
            "700ms",
            "--wait-mode",
            mode,
            "--",
            "true",
        ]));
        let took = start.elapsed();
        assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
        assert!(
            took >= Duration::from_millis(700),
            "{mode}: gave up early ({took:?})"
        );
        assert!(
            stderr(&out).contains("busy; waiting for up to 700ms"),
            "{}",
            stderr(&out)
        );
    }
}

/// A holder without expiry (another client's lock without a timeout) is polled slowly, and its
/// release is still noticed.
#[test]
fn holder_without_expiry_is_waited_for() {
    let redis = Redis::start();
    let key = lock_key("forever");
    redis.cmd::<String>(&["SET", &key, "no-ttl"]);
    let mut waiter = distlock(&redis)
        .args(["run", "-k", "forever", "--wait-mode", "spin", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The attempt that takes a place in line is the one that reports the busy lock (before
    // anything else happens in the waiter): once in line, the holder can go. (Waiting for a
    // first attempt only let a loaded machine delete the key before the waiter had said why
    // it waits.)
    wait_while_running("the waiter to take its place in line", &mut waiter, || {
        redis.in_line("forever") == 1
    });
    redis.cmd::<i64>(&["DEL", &key]);
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("set without expiry"),
        "{}",
        stderr(&out)
    );
}
