//! Issue 10: `--replicas N [--replicas-timeout DUR]`: grants and renewals wait until N replicas
//! have them (WAIT on the connection that wrote); a grant that is not acknowledged is given
//! back (69); a renewal that is not acknowledged does not move the kill deadline.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::fixtures::topology::{Role, role};
use crate::fixtures::*;

/// A primary and one replica, synced.
fn pair() -> (Redis, Redis) {
    let primary = Redis::options()
        .args(&["--repl-diskless-sync-delay", "0"])
        .start();
    let replica = Redis::options()
        .args(&["--replicaof", "127.0.0.1", &primary.port().to_string()])
        .start();
    wait_until("the replica to sync", || {
        matches!(role(&replica), Ok(Role::Replica { synced: true, .. }))
    });
    // Synced on the replica's side is not yet streaming: after a full sync the primary holds
    // writes back until the replica's first REPLCONF ACK, up to a second later, and a
    // `--replicas 1 --replicas-timeout 200ms` grant made in that second is refused. Ready is
    // when a write is acknowledged.
    let mut con = primary.client();
    wait_until("the replica to acknowledge a write", || {
        redis::cmd("SET")
            .arg("test:replica-ready")
            .arg(1)
            .exec(&mut con)
            .unwrap();
        redis::cmd("WAIT")
            .arg(1)
            .arg(100)
            .query::<i64>(&mut con)
            .unwrap()
            >= 1
    });
    (primary, replica)
}

#[test]
fn grants_wait_for_the_replicas_and_are_given_back_without_them() {
    let (primary, mut replica) = pair();
    let out = run(distlock(&primary).args(["run", "-k", "r", "--replicas", "1", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(distlock(&primary).args(["acquire", "-k", "a", "--replicas", "1"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Acknowledged means the replica has it.
    assert!(replica.exists(&lock_key("a")));

    // Two replicas asked, one there: refused, nothing left behind.
    let started = Instant::now();
    let out = run(distlock(&primary).args([
        "run",
        "-k",
        "r2",
        "--replicas",
        "2",
        "--replicas-timeout",
        "300ms",
        "--",
        "echo",
        "ran",
    ]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "the command must not run");
    assert!(
        stderr(&out)
            .contains("only 1 of the 2 replicas required acknowledged the write within 300ms"),
        "{}",
        stderr(&out)
    );
    assert!(!primary.exists(&lock_key("r2")));
    assert!(started.elapsed() < Duration::from_secs(3));

    // The replica stopped: 0 of 1.
    replica.stop();
    let out = run(distlock(&primary).args([
        "run",
        "-k",
        "r3",
        "--replicas",
        "1",
        "--replicas-timeout",
        "200ms",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("only 0 of the 1 replica required"),
        "{}",
        stderr(&out)
    );
    assert!(!primary.exists(&lock_key("r3")));
    replica.cont();
}

/// The replica stops while the command runs: renewals are no longer acknowledged, so they do
/// not move the kill deadline, and the command is killed before the last acknowledged
/// renewal's TTL runs out (124), although the primary itself would have renewed the lock.
#[test]
fn unacknowledged_renewals_do_not_keep_the_command_alive() {
    let (primary, mut replica) = pair();
    let dir = Scratch::new();
    let holder = distlock(&primary)
        .args([
            "run",
            "-k",
            "ren",
            "--ttl",
            "3s",
            "--kill-grace",
            "300ms",
            "--replicas",
            "1",
            "--replicas-timeout",
            "200ms",
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("echo $$ > {}; exec sleep 60", dir.str("pid")))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let child = read_pid(&dir.path("pid"));
    replica.stop();
    let stopped = Instant::now();
    wait_dead(child);
    // Killed within the TTL of the last acknowledged renewal (3s), well before the 60s sleep.
    assert!(
        stopped.elapsed() < Duration::from_secs(4),
        "{:?}",
        stopped.elapsed()
    );
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("replica required acknowledged"),
        "{}",
        stderr(&out)
    );
    replica.cont();
}

#[test]
fn replicas_and_a_redlock_do_not_mix() {
    let a = Redis::start();
    let b = Redis::start();
    let c = Redis::start();
    let out = run(bare_distlock().args([
        "--redis",
        &a.url(),
        "--redis",
        &b.url(),
        "--redis",
        &c.url(),
        "--replicas",
        "1",
        "run",
        "-k",
        "x",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("--replicas"), "{}", stderr(&out));
}

/// A replica that is still syncing (its full sync held back by a long diskless-sync delay)
/// acknowledges nothing: the refusal says so, and what to wait for.
#[test]
fn a_replica_that_is_still_syncing_is_named_as_such() {
    let primary = Redis::options()
        .args(&["--repl-diskless-sync-delay", "30"])
        .start();
    let _replica = Redis::options()
        .args(&["--replicaof", "127.0.0.1", &primary.port().to_string()])
        .start();
    wait_until("the replica to ask for its sync", || {
        let info: String = primary.cmd(&["INFO", "replication"]);
        info.contains("state=wait_bgsave")
    });
    let out = run(distlock(&primary).args([
        "run",
        "-k",
        "syncing",
        "--replicas",
        "1",
        "--replicas-timeout",
        "100ms",
        "--",
        "echo",
        "ran",
    ]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "the command must not run");
    let err = stderr(&out);
    assert!(
        err.contains(
            "only 0 of the 1 replica required acknowledged the write within 100ms \
             (a replica is still syncing with the primary: state wait_bgsave)"
        ) && err.contains("try again once the replicas have synced"),
        "{err}"
    );
    assert!(!primary.exists(&lock_key("syncing")));
}
