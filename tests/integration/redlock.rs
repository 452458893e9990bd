//! Redlock over independent primaries (several `--redis` URLs), against real redis-server
//! nodes: exclusion, a minority down, stopped or taken by a stranger, a majority lost (before
//! and during a run), a node that comes back empty, every subcommand, fences, `--supersede`,
//! and how `status`/`list` show a split (no token on a majority).
//!
//! Faults are injected only after a readiness handshake (the child wrote a file); every wait is
//! bounded. Timing assertions use generous bounds: they catch "waited for the TTL" or "hung",
//! not a few milliseconds.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::topology::Primaries;
use crate::util::*;

/// distlock pointed at every node of `nodes` (one `--redis` per node: a Redlock).
fn redlock(nodes: &Primaries) -> Command {
    let mut cmd = bare_distlock();
    for url in nodes.urls() {
        cmd.arg("--redis").arg(url);
    }
    cmd
}

/// Every key under the default prefix on node `i`.
fn keys(nodes: &Primaries, i: usize) -> Vec<String> {
    let mut keys: Vec<String> = nodes.node(i).cmd(&["KEYS", "distlock:*"]);
    keys.sort();
    keys
}

/// Node `i` keeps nothing of lock `key` but its fence counter (the one key that may stay after
/// a lock is gone: docs/protocol.md, "Redis key layout").
fn nothing_left_but_the_fence(nodes: &Primaries, i: usize, key: &str) {
    let (lock, fence) = (lock_key(key), format!("{}:fence", lock_key(key)));
    let left: Vec<String> = keys(nodes, i)
        .into_iter()
        .filter(|k| k.starts_with(&lock) && *k != fence)
        .collect();
    assert!(left.is_empty(), "node {i} keeps {left:?}");
}

/// A stranger's lock on node `i`, as another client (redis-py's `Lock`) writes it: the bare
/// token with an expiry, no metadata.
fn stranger(nodes: &Primaries, i: usize, key: &str, token: &str) {
    let _: () = nodes
        .node(i)
        .cmd(&["SET", &lock_key(key), token, "PX", "60000"]);
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(out)
        )
    })
}

/// `run -n` of a command that exits at once, with `extra` flags before the command.
fn quick_run(nodes: &Primaries, key: &str, extra: &[&str]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let out = run(redlock(nodes)
        .args(["run", "-k", key, "-n"])
        .args(extra)
        .args(["--", "true"]));
    (out, started.elapsed())
}

/// A `run` whose command writes its pid to `ready` and then sleeps: for faults injected while
/// it holds the lock.
fn holding(nodes: &Primaries, key: &str, ttl: &str, ready: &str) -> Child {
    redlock(nodes)
        .args(["run", "-k", key, "--ttl", ttl, "--", "sh", "-c"])
        .arg(format!("echo $$ > {ready}; exec sleep 60"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn distlock")
}

/// Several runs on one key over 3 nodes, all at once, each waiting: every one runs, never two
/// at a time (each critical section appends a start and an end marker; they must alternate).
#[test]
fn concurrent_runs_exclude_each_other_and_all_get_their_turn() {
    let nodes = Primaries::start(3);
    let dir = Scratch::new();
    let log = dir.str("log");
    let children: Vec<Child> = (0..4)
        .map(|i| {
            spawn(
                redlock(&nodes)
                    .args(["run", "-k", "mx", "--wait", "20s", "--", "sh", "-c"])
                    .arg(format!(
                        "echo start {i} >> {log}; sleep 0.1; echo end {i} >> {log}"
                    )),
            )
        })
        .collect();
    for child in children {
        let out = finish(child);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8, "{text}");
    for pair in lines.chunks(2) {
        let (start, end) = (pair[0], pair[1]);
        assert!(start.starts_with("start "), "overlap:\n{text}");
        assert_eq!(end, start.replace("start", "end"), "overlap:\n{text}");
    }
    for i in 0..3 {
        nothing_left_but_the_fence(&nodes, i, "mx");
    }
}

/// A minority killed, stopped, or holding a stranger's lock does not keep a Redlock from the
/// lock; a stopped node costs a bounded extra delay (its per-node timeout per round), never the
/// Redis timeout or the TTL.
#[test]
fn a_minority_down_stopped_or_taken_does_not_stop_the_lock() {
    let mut nodes = Primaries::start(3);
    let (out, healthy) = quick_run(&nodes, "k0", &["--node-timeout", "200ms"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    nodes.kill(0);
    let (out, _) = quick_run(&nodes, "k1", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    nodes.restart(0);

    stranger(&nodes, 1, "k2", "py-token-of-someone-else");
    let (out, _) = quick_run(&nodes, "k2", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The stranger's lock is untouched; nothing of ours stays on the others.
    assert_eq!(
        nodes.node(1).get(&lock_key("k2")).as_deref(),
        Some("py-token-of-someone-else")
    );
    nothing_left_but_the_fence(&nodes, 0, "k2");

    nodes.stop(2);
    let (out, stopped) = quick_run(&nodes, "k3", &["--node-timeout", "200ms"]);
    nodes.cont(2);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A stopped node costs one per-node timeout (200ms), in the acquire round, and no more
    // (not the Redis timeout, 2s, nor the TTL): the fences agree, so there is no second round,
    // and the release is written behind the lost request instead of waiting for the node again.
    // Measured: about 200ms more. (The claim's extension runs beside the command.)
    assert!(
        stopped < healthy + Duration::from_millis(200) + Duration::from_millis(350),
        "healthy {healthy:?}, one node stopped {stopped:?}"
    );

    // Five nodes: two killed, the three others make the majority.
    let mut five = Primaries::start(5);
    five.kill(1);
    five.kill(3);
    let (out, _) = quick_run(&five, "k5", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for i in [0, 2, 4] {
        nothing_left_but_the_fence(&five, i, "k5");
    }
}

/// A majority down: `-n` fails as unreachable (69) in bounded time; a majority held by a
/// stranger: busy (75). Either way the nodes that granted give the lock back: nothing of ours
/// stays but the fence counter.
#[test]
fn a_majority_lost_or_taken_refuses_and_leaves_nothing_behind() {
    for n in [3, 5] {
        let mut nodes = Primaries::start(n);
        let majority = n / 2 + 1;
        for i in 0..majority {
            nodes.kill(i);
        }
        let (out, took) = quick_run(&nodes, "down", &[]);
        assert_eq!(out.status.code(), Some(69), "{n} nodes: {}", stderr(&out));
        assert!(took < Duration::from_secs(5), "{n} nodes: {took:?}");
        for i in majority..n {
            nothing_left_but_the_fence(&nodes, i, "down");
        }

        for i in 0..majority {
            nodes.restart(i);
            stranger(&nodes, i, "taken", &format!("stranger-{i}"));
        }
        let (out, took) = quick_run(&nodes, "taken", &[]);
        assert_eq!(out.status.code(), Some(75), "{n} nodes: {}", stderr(&out));
        assert!(took < Duration::from_secs(5), "{n} nodes: {took:?}");
        for i in 0..majority {
            assert_eq!(
                keys(&nodes, i)
                    .into_iter()
                    .filter(|k| k.starts_with(&lock_key("taken")))
                    .collect::<Vec<_>>(),
                [lock_key("taken")],
                "{n} nodes: the stranger's lock alone on node {i}"
            );
            assert_eq!(
                nodes.node(i).get(&lock_key("taken")),
                Some(format!("stranger-{i}"))
            );
        }
        for i in majority..n {
            nothing_left_but_the_fence(&nodes, i, "taken");
        }
    }
}

/// Renewals that lose their quorum while the command runs (two of three nodes stopped): the
/// command is killed before the lock's validity can end, and distlock exits 124.
#[test]
fn losing_the_quorum_mid_run_kills_the_command_in_time() {
    let mut nodes = Primaries::start(3);
    let dir = Scratch::new();
    let holder = holding(&nodes, "renew", "3s", &dir.str("pid"));
    let child = read_pid(&dir.path("pid"));
    nodes.stop(0);
    nodes.stop(1);
    let fault = Instant::now();
    let died = wait_dead(child);
    // The validity runs from the last renewal that reached a quorum, before the fault: the
    // command must be gone within one TTL of it.
    assert!(
        died - fault < Duration::from_secs(3),
        "the command outlived the TTL: {:?}",
        died - fault
    );
    let out = finish(holder);
    nodes.cont(0);
    nodes.cont(1);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
}

/// A node restarted empty mid-run (it forgot the lock): the two others still hold the quorum,
/// renewals keep succeeding, and the run ends normally.
#[test]
fn a_node_that_comes_back_empty_does_not_end_the_run() {
    let mut nodes = Primaries::start(3);
    let dir = Scratch::new();
    let (ready, go) = (dir.str("ready"), dir.str("go"));
    // A long TTL with frequent renewals: a loaded machine that delays a renewal by a second
    // must not end the run, which is not what this test is about.
    let mut holder = spawn(
        redlock(&nodes)
            .args([
                "run",
                "-k",
                "empty",
                "--ttl",
                "10s",
                "--renew-every",
                "300ms",
                "--",
                "sh",
                "-c",
            ])
            .arg(format!(
                "echo $$ > {ready}; while [ ! -e {go} ]; do sleep 0.02; done"
            )),
    );
    wait_for_file(&dir.path("ready"));
    nodes.restart_empty(1);
    assert!(!nodes.node(1).exists(&lock_key("empty")));
    // Two renewals after the restart (each resets node 0's expiry upwards).
    for _ in 0..2 {
        let before = nodes.node(0).pttl(&lock_key("empty"));
        wait_while_running("a renewal", &mut holder, || {
            nodes.node(0).pttl(&lock_key("empty")) > before
        });
    }
    std::fs::write(&go, "").unwrap();
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for i in 0..3 {
        nothing_left_but_the_fence(&nodes, i, "empty");
    }
}

/// acquire, status, list, renew, release and break over a Redlock; fences strictly increase
/// across runs.
#[test]
fn every_subcommand_over_a_redlock() {
    let nodes = Primaries::start(3);
    let out = run(redlock(&nodes).args(["acquire", "-k", "a", "--ttl", "30s"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    for i in 0..3 {
        assert_eq!(nodes.node(i).get(&lock_key("a")).as_ref(), Some(&token));
    }

    let out = run(redlock(&nodes).args(["status", "-k", "a"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("lock \"a\" is held"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run(redlock(&nodes).args(["status", "-k", "a", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["held"], true);
    assert_eq!(v["holder"]["kind"], "acquire");
    let nodes_json = v["nodes"].as_array().expect("a nodes array");
    assert_eq!(nodes_json.len(), 3);
    for (i, node) in nodes_json.iter().enumerate() {
        assert_eq!(
            node["address"].as_str(),
            Some(nodes.url(i).as_str()),
            "{node}"
        );
        assert_eq!(node["held"], true, "{node}");
        // Each node keeps the fence it granted; the holder got the largest.
        assert!(node["fence"].as_u64() <= v["fence"].as_u64(), "{node}");
    }

    let out = run(redlock(&nodes).args(["list"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\na\t"));
    let out = run(redlock(&nodes).args(["list", "--json"]));
    let v = json(&out);
    assert_eq!(v[0]["key"], "a");
    assert_eq!(v[0]["nodes"].as_array().map(Vec::len), Some(3));

    let out = run(redlock(&nodes).args(["renew", "-k", "a", "--token", &token, "--ttl", "60s"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(nodes.node(2).pttl(&lock_key("a")) > 30_000);
    let out = run(redlock(&nodes).args(["release", "-k", "a", "--token", &token]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(redlock(&nodes).args(["release", "-k", "a", "--token", &token]));
    assert_eq!(out.status.code(), Some(77), "{}", stderr(&out));
    let out = run(redlock(&nodes).args(["status", "-k", "a"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));

    // acquire --json: the token and the fence; break then frees it everywhere.
    let out = run(redlock(&nodes).args(["acquire", "-k", "b", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let token = v["token"].as_str().expect("a token").to_owned();
    assert!(v["fence"].as_u64().is_some(), "{v}");
    assert_eq!(nodes.node(0).get(&lock_key("b")), Some(token));
    // status shows the holder's fence: the one acquire printed (the largest a node granted).
    let status = json(&run(redlock(&nodes).args(["status", "-k", "b", "--json"])));
    assert_eq!(status["fence"], v["fence"], "{status}");
    let out = run(redlock(&nodes).args(["break", "-k", "b", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for i in 0..3 {
        nothing_left_but_the_fence(&nodes, i, "b");
    }
    let out = run(redlock(&nodes).args(["break", "-k", "b", "--yes"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));

    // Fences strictly increase across runs, whichever node restarts empty in between.
    let mut nodes = nodes;
    let dir = Scratch::new();
    let fences = dir.str("fences");
    for round in 0..4 {
        if round == 2 {
            nodes.restart_empty(0);
        }
        let out = run(redlock(&nodes)
            .args(["run", "-k", "f", "--", "sh", "-c"])
            .arg(format!("echo $DISTLOCK_FENCE >> {fences}")));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let seen: Vec<u64> = std::fs::read_to_string(&fences)
        .unwrap()
        .lines()
        .map(|l| l.parse().expect("a fence"))
        .collect();
    assert_eq!(seen.len(), 4);
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
}

/// `--supersede` needs a line of waiters, which a Redlock cannot keep: refused up front as a
/// usage error, whether or not the lock is free.
#[test]
fn supersede_is_refused_over_a_redlock() {
    let nodes = Primaries::start(3);
    let out = run(redlock(&nodes).args([
        "run",
        "-k",
        "s",
        "--wait",
        "1s",
        "--supersede",
        "--",
        "echo",
        "ran",
    ]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "the command must not run");
    assert!(stderr(&out).contains("--supersede"), "{}", stderr(&out));
    assert!(stderr(&out).contains("Redlock"), "{}", stderr(&out));
    for i in 0..3 {
        assert!(keys(&nodes, i).is_empty(), "{:?}", keys(&nodes, i));
    }
}

/// No token on a majority (strangers' locks, a different one per node): `status` says so,
/// lists each node's view and exits 75 (nobody holds it, nobody can take it until the nodes'
/// locks expire: busy); `--json` marks the split; `list` shows the lock with a marker.
#[test]
fn a_split_is_reported_with_each_nodes_view() {
    let mut nodes = Primaries::start(3);
    stranger(&nodes, 0, "sp", "token-a-0000");
    stranger(&nodes, 1, "sp", "token-b-1111");
    nodes.kill(2);

    let out = run(redlock(&nodes).args(["status", "-k", "sp"]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(75), "{text}{}", stderr(&out));
    assert!(
        text.contains("no holder has a majority of the 3 nodes"),
        "{text}"
    );
    assert!(text.contains("token-"), "{text}");
    assert!(
        !text.contains("token-a-0000"),
        "never a whole token: {text}"
    );
    assert!(text.contains(&nodes.url(2)), "{text}");

    let out = run(redlock(&nodes).args(["status", "-k", "sp", "--json"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["split"], true, "{v}");
    assert_eq!(v["held"], false, "{v}");
    let views = v["nodes"].as_array().expect("nodes");
    assert_eq!(views.len(), 3);
    assert_eq!(views[0]["held"], true);
    assert_eq!(views[0]["holders"][0]["id"], "token-");
    assert_eq!(views[1]["held"], true);
    assert!(views[2]["error"].is_string(), "{v}");

    let out = run(redlock(&nodes).args(["list"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("sp\t(split)"), "{text}");
    let out = run(redlock(&nodes).args(["list", "--json"]));
    let v = json(&out);
    assert_eq!(v[0]["key"], "sp");
    assert_eq!(v[0]["split"], true);

    // `break` has no holder to break: it says so and what to do, and touches nothing.
    let out = run(redlock(&nodes).args(["break", "-k", "sp", "--yes"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the lock is split") && stderr(&out).contains("distlock status"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        nodes.node(0).get(&lock_key("sp")).as_deref(),
        Some("token-a-0000")
    );

    // A healthy lock on one node: no "split" field, and single-node JSON has no "nodes".
    let single = Redis::start();
    let out = run(distlock(&single).args(["acquire", "-k", "one"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&run(
        distlock(&single).args(["status", "-k", "one", "--json"])
    ));
    assert!(v.get("nodes").is_none() && v.get("split").is_none(), "{v}");
}
