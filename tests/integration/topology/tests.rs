//! Tests of the topology fixtures themselves, and the record of how fast each topology starts
//! and fails over on this machine: run them with
//! `cargo test --test integration topology -- --nocapture` to see the timings.

use std::time::Instant;

use super::{Cluster, Primaries, Role, Sentinel, role};
use crate::util::{Redis, wait_until};

/// Run `f`, print how long it took under `what`, return its value.
fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let value = f();
    eprintln!("timing: {what}: {:.2?}", start.elapsed());
    value
}

/// Whether the process is stopped (state `T` in /proc), as SIGSTOP leaves it.
fn is_stopped(node: &Redis) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", node.pid())).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().next())
        == Some("T")
}

fn get(node: &Redis, key: &str) -> Option<String> {
    node.cmd(&["GET", key])
}

#[test]
fn persistent_primaries_keep_their_data_across_restarts_unless_emptied() {
    let mut primaries = timed("3 persistent primaries start", || {
        Primaries::start_persistent(3)
    });
    assert_eq!(primaries.len(), 3);
    let urls = primaries.urls();
    assert_eq!(urls[1], primaries.url(1));
    assert!(urls.iter().all(|url| !url.ends_with(":6379")));
    for i in 0..3 {
        primaries.node(i).cmd::<()>(&["SET", "k", &i.to_string()]);
    }

    primaries.stop(0);
    wait_until("node 0 to stop", || is_stopped(primaries.node(0)));
    primaries.cont(0);
    assert_eq!(get(primaries.node(0), "k").as_deref(), Some("0"));

    primaries.kill(1);
    assert!(primaries.node(1).try_cmd::<String>(&["PING"]).is_err());
    let port = primaries.node(1).port();
    timed("a persistent primary restarts", || primaries.restart(1));
    assert_eq!(primaries.node(1).port(), port);
    assert_eq!(get(primaries.node(1), "k").as_deref(), Some("1"));

    primaries.restart_empty(2);
    assert_eq!(get(primaries.node(2), "k"), None);
}

/// `tls` and `user` reach every server: the fixture's own connections speak TLS, and the user
/// exists from the start.
#[test]
fn primaries_with_tls_and_an_acl_user() {
    let pki = crate::tls::pki();
    let primaries = Primaries::start_with(
        2,
        Redis::options()
            .tls(&pki)
            .user("someone", "pw", "~k:* +get"),
    );
    for i in 0..2 {
        assert!(primaries.url(i).starts_with("rediss://127.0.0.1:"));
        let users: Vec<String> = primaries.node(i).cmd(&["ACL", "USERS"]);
        assert_eq!(users, ["default", "someone"]);
    }
}

#[test]
fn primaries_without_persistence_come_back_empty() {
    let mut primaries = Primaries::start(2);
    primaries.node(0).cmd::<()>(&["SET", "k", "v"]);
    primaries.restart(0);
    assert_eq!(get(primaries.node(0), "k"), None);
    assert_eq!(get(primaries.node(1), "k"), None);
}

#[test]
fn sentinel_fails_over_on_command_and_when_the_primary_is_killed() {
    let mut sentinel = timed("sentinel: primary, 2 replicas, 3 sentinels start", || {
        Sentinel::start(2)
    });
    let url = sentinel.url();
    assert!(url.starts_with("redis+sentinel://127.0.0.1:"), "{url}");
    assert!(url.ends_with(&format!("/{}", sentinel.service())), "{url}");
    assert_eq!(url.matches(',').count(), 2, "{url}");
    assert_eq!(sentinel.primary(), 0);
    let primary = sentinel.node(0);
    assert_eq!(
        sentinel.primary_addr(),
        format!("127.0.0.1:{}", primary.port())
    );
    let mut con = primary.client();
    redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<()>(&mut con)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(&mut con).unwrap();
    assert_eq!(acked, 2, "both replicas acknowledge the write");

    let first = timed("sentinel: SENTINEL FAILOVER", || sentinel.failover());
    assert_ne!(first, 0);
    assert_eq!(role(sentinel.node(first)), Ok(Role::Primary));
    assert_eq!(get(sentinel.node(first), "k").as_deref(), Some("v"));
    assert_eq!(
        role(sentinel.node(0)),
        Ok(Role::Primary),
        "the old primary is demoted seconds later: two primaries meanwhile"
    );

    let second = timed("sentinel: failover after SIGKILL of the primary", || {
        sentinel.kill_primary()
    });
    assert!(second != first && second != 0);
    assert_eq!(get(sentinel.node(second), "k").as_deref(), Some("v"));

    sentinel.restart(first);
    sentinel.settle_now();
    // The sentinels may fail over once more meanwhile: a node that answers PING late for
    // DOWN_AFTER_MS on a loaded machine is down to them. What must hold is that the restarted
    // node rejoined and that the data followed whichever node is primary now.
    let now = sentinel.primary();
    assert_eq!(get(sentinel.node(now), "k").as_deref(), Some("v"));
    let port = sentinel.node(now).port();
    for i in (0..sentinel.len()).filter(|&i| i != now) {
        let role = role(sentinel.node(i));
        assert!(
            matches!(role, Ok(Role::Replica { of, synced: true }) if of == port),
            "{i}: {role:?}"
        );
    }
    let replica = (0..sentinel.len()).find(|&i| i != now).unwrap();
    sentinel.stop(replica);
    wait_until("a replica to stop", || is_stopped(sentinel.node(replica)));
    sentinel.cont(replica);
    sentinel.kill(replica);

    sentinel.stop_sentinels();
    wait_until("the sentinels to stop", || {
        (0..3).all(|i| is_stopped(sentinel.sentinel(i)))
    });
    sentinel.cont_sentinels();
    assert_eq!(sentinel.primary(), now);
    sentinel.kill_sentinels();
    assert!(sentinel.sentinel(0).try_cmd::<String>(&["PING"]).is_err());
}

#[test]
fn cluster_routes_keys_and_migrates_a_slot_with_its_keys() {
    let cluster = timed("cluster: 3 primaries start", || Cluster::start(3, 0));
    assert_eq!(cluster.primaries(), vec![0, 1, 2]);
    assert_eq!(cluster.url_of_node(2), cluster.node(2).url());
    let myid: String = cluster.node(1).cmd(&["CLUSTER", "MYID"]);
    assert_eq!(cluster.id(1), myid);
    let seeds = cluster.seeds_url();
    assert!(seeds.starts_with("redis+cluster://127.0.0.1:"), "{seeds}");
    assert_eq!(seeds.matches(',').count(), 2, "{seeds}");
    for key in [
        "123456789",
        "k",
        "{user1000}.following",
        "foo{}{bar}",
        "{}",
        "a{b}c{d}",
    ] {
        let asked: u16 = cluster.node(0).cmd(&["CLUSTER", "KEYSLOT", key]);
        assert_eq!(Cluster::slot_of(key), asked, "slot of {key:?}");
    }

    let key = "{lock}";
    let slot = Cluster::slot_of(key);
    let from = cluster.node_for_slot(slot);
    let to = (from + 1) % 3;
    let moved = cluster
        .node(to)
        .try_cmd::<()>(&["SET", key, "v"])
        .unwrap_err();
    assert_eq!(moved.code(), Some("MOVED"), "{moved}");
    for k in [key, "{lock}:a", "{lock}:b"] {
        cluster
            .node(from)
            .cmd::<()>(&["SET", k, "v", "PX", "60000"]);
    }

    cluster.begin_migration(slot, from, to);
    let ask = (cluster.node(from))
        .try_cmd::<Option<String>>(&["GET", "{lock}:absent"])
        .unwrap_err();
    assert_eq!(ask.code(), Some("ASK"), "{ask}");
    assert_eq!(cluster.migrate_keys(slot, from, to), 3);
    timed("cluster: SETSLOT NODE seen by every node", || {
        cluster.end_migration(slot, from, to)
    });
    assert_eq!(cluster.node_for_slot(slot), to);
    assert_eq!(get(cluster.node(to), key).as_deref(), Some("v"));
    let pttl: i64 = cluster.node(to).cmd(&["PTTL", key]);
    assert!(
        pttl > 0 && pttl <= 60_000,
        "the TTL travels with the key: {pttl}"
    );

    assert_eq!(cluster.migrate_slot(slot, to, from), 3);
    assert_eq!(cluster.node_for_slot(slot), from);
    let there = cluster.key_on(to, "key-");
    assert_eq!(cluster.node_for_slot(Cluster::slot_of(&there)), to);
}

#[test]
fn cluster_fails_over_to_a_replica_on_command_and_when_the_primary_is_killed() {
    let mut cluster = timed("cluster: 3 primaries + 3 replicas start", || {
        Cluster::start(3, 1)
    });
    assert_eq!(cluster.len(), 6);
    assert_eq!(cluster.primaries(), vec![0, 1, 2]);
    for primary in 0..3 {
        assert_eq!(cluster.replicas_of(primary).len(), 1, "node {primary}");
    }
    let key = cluster.key_on(0, "k");
    let slot = Cluster::slot_of(&key);
    let mut con = cluster.node(0).client();
    redis::cmd("SET")
        .arg(&key)
        .arg("v")
        .query::<()>(&mut con)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut con).unwrap();
    assert_eq!(acked, 1);

    let replica = cluster.replicas_of(0)[0];
    let new = timed("cluster: CLUSTER FAILOVER", || cluster.failover(0));
    assert_eq!(new, replica);
    assert_eq!(cluster.node_for_slot(slot), new);
    assert_eq!(cluster.replicas_of(new), vec![0]);
    assert_eq!(get(cluster.node(new), &key).as_deref(), Some("v"));

    let back = timed("cluster: failover after SIGKILL of the primary", || {
        cluster.kill_primary(new)
    });
    assert_eq!(back, 0);
    assert_eq!(cluster.node_for_slot(slot), 0);
    assert_eq!(get(cluster.node(0), &key).as_deref(), Some("v"));

    timed(
        "cluster: killed primary restarts and rejoins as a replica",
        || {
            cluster.restart(new);
            cluster.wait_ok();
        },
    );
    assert_eq!(cluster.replicas_of(0), vec![new]);

    let other = cluster.replicas_of(1)[0];
    cluster.stop(other);
    wait_until("the replica to stop", || is_stopped(cluster.node(other)));
    cluster.cont(other);
    cluster.kill(other);
    assert!(cluster.node(other).try_cmd::<String>(&["PING"]).is_err());
}

/// How long the sentinels leave the old primary a primary after `SENTINEL FAILOVER` (about
/// 10 s): ignored in CI for its length; run it to measure.
#[test]
#[ignore]
fn sentinel_demotes_the_old_primary_by_itself() {
    let mut sentinel = Sentinel::start(1);
    let new = sentinel.failover();
    timed("sentinel: old primary demoted by the sentinels", || {
        sentinel.wait_settled()
    });
    let port = sentinel.node(new).port();
    assert!(matches!(role(sentinel.node(0)), Ok(Role::Replica { of, .. }) if of == port));
}
