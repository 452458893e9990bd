//! Issue 10: locks on a real Redis Cluster (three primaries made by `redis-cli --cluster
//! create`), reached by a plain `redis://` URL of any node or by `redis+cluster://` seeds:
//! MOVED and ASK are followed, `list` covers every primary, waiters are woken whatever node
//! their URL names, and a lock survives a slot migration and a failover during its run.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::topology::Cluster;
use crate::util::*;

fn at(url: &str) -> Command {
    let mut cmd = bare_distlock();
    cmd.env("DISTLOCK_REDIS_URL", url);
    cmd
}

/// A holder whose command writes `held` in `dir` and waits for `release(dir)`.
fn holder(url: &str, dir: &Scratch, key: &str, extra: &[&str]) -> Child {
    hold_until_released(at(url), dir, key, extra)
}

/// A plain URL of node 0, for a lock whose slot is on node 1: distlock follows MOVED, and every
/// subcommand works; `list` through one node's URL shows the locks of every primary; a waiter
/// whose URL names another node is woken by the hand-off.
#[test]
fn a_plain_url_follows_the_cluster_for_every_subcommand() {
    let cluster = Cluster::start(3, 0);
    let url0 = cluster.url_of_node(0);
    let url2 = cluster.url_of_node(2);
    let key = cluster.key_on(1, "moved");
    let dir = Scratch::new();
    let first = holder(&url0, &dir, &key, &[]);
    assert!(cluster.node(1).exists(&lock_key(&key)));
    let out = run(at(&url2).args(["status", "-k", &key]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // A waiter through node 2, woken by the release through node 0.
    let waiter = at(&url2)
        .args(["-v", "run", "-k", &key, "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the waiter to take its place in line", || {
        cluster
            .node(1)
            .cmd::<i64>(&["ZCARD", &format!("{}:queue", lock_key(&key))])
            == 1
    });
    let released = Instant::now();
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("release notification received"),
        "{}",
        stderr(&out)
    );
    // Woken, not polling (a waiter polls every 2s).
    assert!(released.elapsed() < Duration::from_millis(1500));

    // One lock per primary, taken through the seeds; list through one node's plain URL.
    let keys: Vec<String> = (0..3).map(|i| cluster.key_on(i, "each")).collect();
    let seeds = cluster.seeds_url();
    let mut tokens = Vec::new();
    for key in &keys {
        let out = run(at(&seeds).args(["acquire", "-k", key, "--ttl", "60s"]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        tokens.push(String::from_utf8_lossy(&out.stdout).trim().to_owned());
    }
    for (i, key) in keys.iter().enumerate() {
        assert!(cluster.node(i).exists(&lock_key(key)), "{key} on node {i}");
    }
    let out = run(at(&url0).args(["list"]));
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    for key in &keys {
        assert!(listed.contains(key.as_str()), "{key} missing from {listed}");
    }
    let out = run(at(&url2).args(["renew", "-k", &keys[0], "--token", &tokens[0]]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(at(&url0).args(["release", "-k", &keys[1], "--token", &tokens[1]]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(at(&url0).args(["break", "-k", &keys[2], "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!cluster.node(1).exists(&lock_key(&keys[1])));
    assert!(!cluster.node(2).exists(&lock_key(&keys[2])));
}

/// The lock's slot moves to another node while its command runs: during the migration a
/// `status` follows ASK; afterwards the renewals follow MOVED (the key keeps being extended on
/// its new node) and the release finds it there.
#[test]
fn a_slot_migration_during_a_run_keeps_the_lock() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.url_of_node(0);
    let key = cluster.key_on(0, "mig");
    let slot = Cluster::slot_of(&lock_key(&key));
    let dir = Scratch::new();
    let mut first = holder(&url, &dir, &key, &["--ttl", "3s"]);
    cluster.begin_migration(slot, 0, 1);
    let moved = cluster.migrate_keys(slot, 0, 1);
    assert!(moved >= 2, "{moved} keys moved (the lock and its owner)");
    // While the slot is open, Redis answers a script TRYAGAIN (its keys are not all on one
    // side) or ASK: a status started now gets its answer once the migration is closed.
    let status = at(&url)
        .args(["--redis-timeout", "5s", "status", "-k", &key])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let calls = || {
        let info: String = cluster.node(1).cmd(&["INFO", "errorstats"]);
        info.contains("errorstat_TRYAGAIN")
    };
    wait_until("the status to be told TRYAGAIN", calls);
    cluster.end_migration(slot, 0, 1);
    let out = finish(status);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The key lives on node 1 now, and the renewals follow it there.
    wait_renewed_on(cluster.node(1), &lock_key(&key), &mut first);
    release(&dir);
    let out = finish(first);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!cluster.node(1).exists(&lock_key(&key)));
}

/// CLUSTER FAILOVER of the lock's shard during its run: the old primary, now a replica,
/// answers MOVED; the renewals and the release go to the new primary.
#[test]
fn a_shard_failover_during_a_run_keeps_the_lock() {
    let mut cluster = Cluster::start(3, 1);
    let key = cluster.key_on(0, "fo");
    let url = cluster.seeds_url();
    let dir = Scratch::new();
    let mut first = holder(&url, &dir, &key, &["--ttl", "3s"]);
    let token = cluster.node(0).get(&lock_key(&key)).unwrap();
    let new = cluster.failover(0);
    assert_eq!(cluster.node(new).get(&lock_key(&key)), Some(token));
    wait_renewed_on(cluster.node(new), &lock_key(&key), &mut first);
    release(&dir);
    let out = finish(first);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!cluster.node(new).exists(&lock_key(&key)));
}
