//! Issue 10: locks on a real Redis Cluster (three primaries made by `redis-cli --cluster
//! create`), reached by a plain `redis://` URL of any node or by `redis+cluster://` seeds:
//! MOVED and ASK are followed, `list` covers every primary, waiters are woken whatever node
//! their URL names, and a lock survives a slot migration and a failover during its run.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::fixtures::topology::Cluster;
use crate::fixtures::*;

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
/// `status` follows ASK and answers at once (the source has none of the lock's keys left, so
/// the target has them all); afterwards the renewals follow MOVED (the key keeps being
/// extended on its new node) and the release finds it there.
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
    let out = run(at(&url).args(["status", "-k", &key]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    cluster.end_migration(slot, 0, 1);
    // The key lives on node 1 now, and the renewals follow it there.
    wait_renewed_on(cluster.node(1), &lock_key(&key), &mut first);
    release(&dir);
    let out = finish(first);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!cluster.node(1).exists(&lock_key(&key)));
}

/// Watches a lock key through a slot migration between two nodes, and counts the moments it
/// was on neither: asked of the source first, then of the target, so a key that moves in
/// between is seen on the target (keys only move from the source to the target).
struct Presence {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(u32, u32)>,
}

impl Presence {
    fn watch(cluster: &Cluster, key: &str, nodes: [usize; 2]) -> Presence {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let urls: Vec<String> = nodes.iter().map(|&i| cluster.url_of_node(i)).collect();
        let (flag, key) = (stop.clone(), key.to_owned());
        let thread = std::thread::spawn(move || {
            let connect = |url: &str| {
                let con = redis::Client::open(url).unwrap().get_connection().unwrap();
                con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                con
            };
            let mut cons: Vec<redis::Connection> = urls.iter().map(|u| connect(u)).collect();
            let (mut looks, mut absent) = (0, 0);
            while !flag.load(Ordering::SeqCst) {
                let on = |con: &mut redis::Connection| {
                    let _: () = redis::cmd("ASKING").query(con).unwrap();
                    match redis::cmd("EXISTS").arg(&key).query::<i64>(con) {
                        Ok(n) => n == 1,
                        Err(e) if matches!(e.code(), Some("ASK" | "MOVED")) => false,
                        Err(e) => panic!("EXISTS {key}: {e}"),
                    }
                };
                let present = on(&mut cons[0]) || on(&mut cons[1]);
                looks += 1;
                absent += u32::from(!present);
            }
            (looks, absent)
        });
        Presence { stop, thread }
    }

    /// Stop watching: how many looks, and how many found the key on neither node.
    fn end(self) -> (u32, u32) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// The reshard by hand, with a 2s TTL: the slot opens, the lock key moves alone (its
/// owner hash stays behind: renewals are told TRYAGAIN), then the rest, and the slot stays open
/// until a renewal has gone to the target by ASK; then it closes, and the renewals follow
/// MOVED. The command runs on, a waiter keeps its place in line and gets the lock afterwards,
/// the lock key was on one node or the other at every moment, and nothing of the lock is left
/// on either node at the end.
#[test]
fn a_hand_migration_keeps_a_short_lock_and_its_line() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.seeds_url();
    let key = cluster.key_on(0, "handmig");
    let lock = lock_key(&key);
    let slot = Cluster::slot_of(&lock);
    let dir = Scratch::new();
    let mut first = holder(&url, &dir, &key, &["--ttl", "2s"]);
    let waiter = at(&url)
        .args(["-v", "run", "-k", &key, "--ttl", "2s", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the waiter to take its place in line", || {
        cluster.node(0).in_line(&key) == 1
    });
    let presence = Presence::watch(&cluster, &lock, [0, 1]);

    cluster.begin_migration(slot, 0, 1);
    let tryagain = cluster.tryagain_count(0);
    cluster.migrate_these(0, 1, std::slice::from_ref(&lock));
    wait_while_running("a renewal to be told TRYAGAIN", &mut first, || {
        cluster.tryagain_count(0) > tryagain
    });
    let moved = cluster.migrate_keys(slot, 0, 1);
    assert!(moved >= 4, "{moved} keys moved (owner, fence, the line)");
    let before = cluster.pttl_on(1, &lock);
    wait_while_running("a renewal on the target by ASK", &mut first, || {
        cluster.pttl_on(1, &lock) > before
    });
    cluster.end_migration(slot, 0, 1);
    wait_renewed_on(cluster.node(1), &lock, &mut first);
    assert_eq!(
        cluster.node(1).in_line(&key),
        1,
        "the waiter kept its place"
    );

    // The watch ends (its last look answered) before the release: from the release on, the
    // key is gone by design (the waiter's `true` takes the lock and releases it at once).
    let (looks, absent) = presence.end();
    release(&dir);
    let out = finish(first);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(looks > 10, "only {looks} looks at the key");
    assert_eq!(absent, 0, "the lock key was on neither node {absent} times");
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("release notification received"),
        "{}",
        stderr(&out)
    );
    assert_nothing_left(&cluster, &key);
}

/// Nothing of the lock `key` is left on any node but its fence counter (which outlives every
/// lock by design, so that fences keep growing).
fn assert_nothing_left(cluster: &Cluster, key: &str) {
    for i in 0..cluster.len() {
        let left: Vec<String> = cluster
            .node(i)
            .cmd(&["KEYS", &format!("{}*", lock_key(key))]);
        let left: Vec<&String> = left.iter().filter(|k| !k.ends_with(":fence")).collect();
        assert!(
            left.is_empty(),
            "node {i} still has {} keys, e.g. {:?}",
            left.len(),
            left.iter().take(5).collect::<Vec<_>>()
        );
    }
}

/// `redis-cli --cluster reshard` moves the lock's slot, with 10,000 other keys in it, to
/// another node and back while a 2s lock is held and a waiter is in line (there one key per
/// MIGRATE, about 1.5s; back with redis-cli's default of 10): the command runs on,
/// the renewals follow the slot both ways, the waiter gets the lock afterwards, and nothing is
/// left behind.
#[test]
fn a_reshard_of_a_busy_slot_both_ways_keeps_the_lock() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.seeds_url();
    // redis-cli moves a node's lowest slots first: the lock's slot is node 0's lowest.
    let slot = cluster.first_slot_of(0);
    let key = Cluster::key_in_slot("reshard", slot);
    let lock = lock_key(&key);
    let filled: i64 = cluster.node(0).cmd(&[
        "EVAL",
        "local tag = string.match(KEYS[1], '{.*}') \
         for i = 1, 10000 do redis.call('SET', 'other' .. tag .. i, 'x') end return 1",
        "1",
        &lock,
    ]);
    assert_eq!(filled, 1);
    let dir = Scratch::new();
    let mut first = holder(&url, &dir, &key, &["--ttl", "2s"]);
    let waiter = at(&url)
        .args(["run", "-k", &key, "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the waiter to take its place in line", || {
        cluster.node(0).in_line(&key) == 1
    });
    let presence = Presence::watch(&cluster, &lock, [0, 1]);
    cluster.reshard(0, 1, 1, 1);
    assert_eq!(cluster.node_for_slot(slot), 1);
    wait_renewed_on(cluster.node(1), &lock, &mut first);
    let there = presence.end();
    let presence = Presence::watch(&cluster, &lock, [1, 0]);
    cluster.reshard(1, 0, 1, 10);
    assert_eq!(cluster.node_for_slot(slot), 0);
    wait_renewed_on(cluster.node(0), &lock, &mut first);
    let back = presence.end();
    for (way, (looks, absent)) in [("there", there), ("back", back)] {
        assert!(looks > 10, "only {looks} looks at the key ({way})");
        assert_eq!(
            absent, 0,
            "the lock key was on neither node {absent} times ({way})"
        );
    }
    assert_eq!(
        cluster.node(0).in_line(&key),
        1,
        "the waiter kept its place"
    );
    release(&dir);
    let out = finish(first);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_nothing_left(&cluster, &key);
    let others: i64 = cluster
        .node(0)
        .cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
    assert_eq!(others, 10_001, "the other keys and the fence came back");
}

/// Taking a lock while its slot migrates: a lock never used before is taken at once (the
/// source sends the request to the target, which creates it there); a lock whose keys are
/// split between the nodes waits until they are on one side (TRYAGAIN), within
/// --redis-timeout, and is then taken: never "busy".
#[test]
fn a_lock_is_taken_while_its_slot_migrates() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.seeds_url();
    let key = cluster.key_on(0, "takemig");
    let lock = lock_key(&key);
    let slot = Cluster::slot_of(&lock);
    let dir = Scratch::new();
    cluster.begin_migration(slot, 0, 1);
    let out = run(at(&url)
        .args(["run", "-n", "-k", &key, "--", "sh", "-c"])
        .arg(format!("echo ran > {}", dir.str("fresh"))));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(wait_for_file(&dir.path("fresh")).trim(), "ran");
    // Its fence counter (the one key a lock leaves) went to the target: the source has none.
    assert!(cluster.holds_key(1, &format!("{lock}:fence")));
    cluster.end_migration(slot, 0, 1);

    // Back to node 0. The source, node 1, holds the fence counter and none of the other
    // keys an attempt declares: it answers TRYAGAIN until the counter has moved too.
    cluster.begin_migration(slot, 1, 0);
    let tryagain = cluster.tryagain_count(1);
    let mut taker = at(&url)
        .args([
            "--redis-timeout",
            "20s",
            "run",
            "-n",
            "-k",
            &key,
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("echo ran > {}", dir.str("split")))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_while_running("the attempt to be told TRYAGAIN", &mut taker, || {
        cluster.tryagain_count(1) > tryagain
    });
    assert!(!dir.path("split").exists(), "taken before its keys moved");
    cluster.migrate_keys(slot, 1, 0);
    let out = finish(taker);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(wait_for_file(&dir.path("split")).trim(), "ran");
    cluster.end_migration(slot, 1, 0);
    assert_nothing_left(&cluster, &key);
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

/// Issue 19 on a Cluster: `--replace` stops a holder whose slot is on another node than the
/// URL's (the wake-up crosses the cluster bus), `--min-interval` keeps the lock taken, and a
/// semaphore numbers its slots.
#[test]
fn replace_intervals_and_slots_work_on_a_cluster() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.url_of_node(0);
    let key = cluster.key_on(2, "ci");
    let dir = Scratch::new();
    let old = holder(&url, &dir, &key, &[]);
    let out = run(at(&cluster.seeds_url()).args(["run", "-k", &key, "--replace", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = finish(old);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(stderr(&out).contains("replaced by"), "{}", stderr(&out));

    let out = run(at(&url).args(["run", "-k", &key, "--min-interval", "1m", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(at(&url).args(["run", "-n", "-k", &key, "--", "true"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(stderr(&out).contains("ran recently"), "{}", stderr(&out));

    let out = run(at(&url).args([
        "run",
        "-k",
        "pool",
        "--limit",
        "2",
        "--",
        "sh",
        "-c",
        "echo $DISTLOCK_SLOT",
    ]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "{}",
        stderr(&out)
    );
}

/// A nested run of the lock its parent holds reenters through the cluster too. The lock's
/// display names the server it reached once connected, which a nested run cannot know before it
/// connects: reentry compares the servers as configured.
#[test]
fn a_nested_run_reenters_through_the_cluster() {
    let topo = Cluster::start(3, 0);
    assert_a_nested_run_reenters(at(&topo.seeds_url()));
}

/// Issue 24: on a Cluster too, a dead holder's waiter starts within 0.3 s of its lock's
/// expiry.
#[test]
fn a_dead_holders_waiter_starts_within_300ms_of_the_expiry() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.seeds_url();
    assert_a_dead_holders_waiter_starts_promptly(
        &|| at(&url),
        &|key| cluster.node(cluster.node_for_slot(Cluster::slot_of(key))),
        Duration::from_millis(300),
        1,
    );
}
