//! Several keys in one run (issue 27, exclusive keys): `-k a -k b` takes both in key order,
//! holding what it has while it waits for the next, all or nothing. Opposite orders never
//! deadlock nor overlap; every failure gives every key back and names the busy key; a
//! distlock killed while waiting blocks its first key for one claim at most; losing one key
//! kills the command (124) and releases the others; what the command sees; the refusals. The
//! core (opposite orders, loss) on one server, Sentinel, Cluster (keys on three primaries) and
//! Redlock.
//!
//! Every wait is bounded (`BOUND`) and synchronised by files the commands write, never by
//! sleeps.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::fixtures::topology::{Cluster, Primaries, Sentinel};
use crate::fixtures::*;

/// The nodes that may hold a key's lock.
type NodesOf<'a> = Box<dyn Fn(&str) -> Vec<&'a Redis> + 'a>;

/// Where a test's keys live: how to point distlock there, and which nodes to ask about a key.
struct Place<'a> {
    cmd: Box<dyn Fn() -> Command + 'a>,
    nodes: NodesOf<'a>,
}

impl Place<'_> {
    fn cmd(&self) -> Command {
        (self.cmd)()
    }

    /// Whether any node has the lock of `key` (held by anyone).
    fn held(&self, key: &str) -> bool {
        (self.nodes)(key).iter().any(|n| n.exists(&lock_key(key)))
    }

    /// The longest expiry any node has for the lock of `key` (ms; negative when none has it).
    fn pttl(&self, key: &str) -> i64 {
        (self.nodes)(key)
            .iter()
            .map(|n| n.pttl(&lock_key(key)))
            .max()
            .unwrap_or(-2)
    }

    /// How many wait in line for `key` (the most any node counts).
    fn in_line(&self, key: &str) -> i64 {
        (self.nodes)(key)
            .iter()
            .map(|n| n.in_line(key))
            .max()
            .unwrap_or(0)
    }
}

fn one_server(redis: &Redis) -> Place<'_> {
    Place {
        cmd: Box::new(|| distlock(redis)),
        nodes: Box::new(|_| vec![redis]),
    }
}

fn at(url: &str) -> Command {
    let mut cmd = bare_distlock();
    cmd.env("DISTLOCK_REDIS_URL", url);
    cmd
}

/// A run of `keys` whose command marks its section with an atomic `mkdir` (a second one inside
/// writes `overlap`) and logs `start TAG NS` (CLOCK_REALTIME), holding for 50 ms.
fn section(place: &Place<'_>, keys: &[&str], dir: &Scratch, tag: &str) -> Child {
    let mut cmd = place.cmd();
    cmd.arg("run").args(["--ttl", "5s"]);
    for key in keys {
        cmd.args(["-k", key]);
    }
    cmd.args(["--", "sh", "-c"])
        .arg(format!(
            "mkdir {inside} || echo overlap >> {bad}; echo \"start {tag} $(date +%s%N)\" >> {log}; \
             sleep 0.05; rmdir {inside}",
            inside = dir.str("inside"),
            bad = dir.str("overlap"),
            log = dir.str("log"),
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// The start times the sections logged, by tag.
fn starts(dir: &Scratch) -> Vec<(String, u128)> {
    std::fs::read_to_string(dir.path("log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace().skip(1);
            Some((w.next()?.to_owned(), w.next()?.parse().ok()?))
        })
        .collect()
}

/// `pairs` pairs of `-k a -k b` and `-k b -k a`, all started together: every run exits 0,
/// no two sections overlap, nothing is left held. Then `alone` pairs one after the other: in
/// each, neither waits longer than its partner's section plus 1 s.
fn opposite_orders(place: &Place<'_>, a: &str, b: &str, pairs: usize, alone: usize) {
    let dir = Scratch::new();
    let runs: Vec<Child> = (0..pairs)
        .flat_map(|i| {
            [
                section(place, &[a, b], &dir, &format!("ab{i}")),
                section(place, &[b, a], &dir, &format!("ba{i}")),
            ]
        })
        .collect();
    for run in runs {
        let out = finish(run);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    assert!(
        !dir.path("overlap").exists(),
        "two sections overlapped: {:?}",
        starts(&dir)
    );
    assert_eq!(starts(&dir).len(), pairs * 2);
    for i in 0..alone {
        let dir = Scratch::new();
        let spawned = now_ns();
        let x = section(place, &[a, b], &dir, "ab");
        let y = section(place, &[b, a], &dir, "ba");
        for run in [x, y] {
            let out = finish(run);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        }
        assert!(!dir.path("overlap").exists(), "pair {i} overlapped");
        for (tag, start) in starts(&dir) {
            let waited = Duration::from_nanos((start - spawned) as u64);
            assert!(
                waited < Duration::from_millis(1050),
                "pair {i}: {tag} waited {waited:?} (partner's section 50 ms + 1 s)"
            );
        }
    }
    wait_until("every key to be free", || !place.held(a) && !place.held(b));
}

/// A set running `read _ < go` after writing `held`; `break -k b` makes it lose b: 124, naming
/// b, and a is released once the command's group is dead.
fn losing_a_key(place: &Place<'_>, a: &str, b: &str) {
    let dir = Scratch::new();
    let holding = Holder::new(place.cmd(), &dir, a)
        .args(&["-k", b, "--ttl", "5s"])
        .hold();
    assert!(place.held(a) && place.held(b));
    let out = run(place.cmd().args(["break", "-k", b, "-y"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = finish(holding.into_child());
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("lost lock \"{b}\" of set")), "{err}");
    assert!(err.contains("the other keys were released"), "{err}");
    assert!(!place.held(a), "{a} is still held after the set lost {b}");
}

#[test]
fn opposite_orders_never_deadlock_nor_overlap_on_one_server() {
    let redis = Redis::start();
    opposite_orders(&one_server(&redis), "set-a", "set-b", 20, 3);
}

#[test]
fn losing_one_key_kills_the_command_and_releases_the_others_on_one_server() {
    let redis = Redis::start();
    losing_a_key(&one_server(&redis), "lose-a", "lose-b");
}

#[test]
fn a_busy_key_with_no_wait_is_named_and_every_key_given_back() {
    let redis = Redis::start();
    let place = one_server(&redis);
    let dir = Scratch::new();
    let mut holder = Holder::new(distlock(&redis), &dir, "nw-b").hold();
    let out = run(distlock(&redis)
        .args(["run", "-k", "nw-a", "-k", "nw-b", "-k", "nw-c", "-n"])
        .args(["--", "true"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("lock \"nw-b\" is busy"), "{err}");
    assert!(err.contains("gave back every key"), "{err}");
    assert!(!place.held("nw-a") && !place.held("nw-c"));
    assert_eq!(place.in_line("nw-b"), 0);
    // -E applies to a set as to one key.
    let out = run(distlock(&redis)
        .args(["run", "-k", "nw-a", "-k", "nw-b", "-n", "-E", "3"])
        .args(["--", "true"]));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    holder.release();
    assert_eq!(holder.finish().status.code(), Some(0));
    assert!(!place.held("nw-a") && !place.held("nw-b"));
}

#[test]
fn a_wait_that_runs_out_gives_every_key_back() {
    let redis = Redis::start();
    let place = one_server(&redis);
    let dir = Scratch::new();
    let mut holder = Holder::new(distlock(&redis), &dir, "wo-b").hold();
    let started = Instant::now();
    let out = run(distlock(&redis)
        .args(["run", "-k", "wo-b", "-k", "wo-a", "-w", "1s"])
        .args(["--", "true"]));
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(4),
        "{took:?}"
    );
    let err = stderr(&out);
    assert!(err.contains("lock \"wo-b\" is busy"), "{err}");
    assert!(
        !place.held("wo-a"),
        "wo-a stayed held after the wait ran out"
    );
    assert_eq!(place.in_line("wo-b"), 0, "the set stayed in wo-b's line");
    holder.release();
    assert_eq!(holder.finish().status.code(), Some(0));
}

/// A distlock SIGKILLed while it holds `a` and waits for `b` (held by another run) blocks `a`
/// for the claim at most: with `--ttl 3s` the claim is the TTL itself (shorter than the room a
/// claim needs), 3 s.
fn killed_while_waiting(place: &Place<'_>, a: &str, b: &str) {
    // The set takes the lower Redis key first: that is the one it holds while it waits.
    let (a, b) = if lock_key(a) < lock_key(b) {
        (a, b)
    } else {
        (b, a)
    };
    let dir = Scratch::new();
    let mut holder = Holder::new(place.cmd(), &dir, b).hold();
    let mut waiter = place
        .cmd()
        .args(["run", "-k", a, "-k", b, "--ttl", "3s", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // b is held throughout: a set that holds a waits for b.
    wait_while_running(&format!("the set to hold {a}"), &mut waiter, || {
        place.held(a)
    });
    let pttl = place.pttl(a);
    assert!(
        pttl > 0 && pttl <= 3000,
        "{a} is held for {pttl} ms, not the claim"
    );
    kill(Pid::from_raw(waiter.id() as i32), Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    let _ = waiter.wait();
    wait_until(&format!("{a} to expire"), || !place.held(a));
    assert!(
        killed.elapsed() <= Duration::from_millis(3200),
        "{:?}",
        killed.elapsed()
    );
    holder.release();
    assert_eq!(holder.finish().status.code(), Some(0));
}

#[test]
fn a_distlock_killed_while_waiting_for_its_second_key_frees_the_first_within_the_claim() {
    let redis = Redis::start();
    killed_while_waiting(&one_server(&redis), "kw-a", "kw-b");
}

#[test]
fn the_command_sees_every_key_in_the_order_typed() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let env = dir.str("env");
    let out = run(distlock(&redis)
        .env("DISTLOCK_KEY", "outer")
        .args(["run", "-k", "env-b", "-k", "env-a", "--"])
        .args(["sh", "-c", &format!("env > {env}")]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&env).unwrap();
    let var = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    };
    assert_eq!(var("DISTLOCK_KEYS").as_deref(), Some("env-b env-a"));
    assert_eq!(var("DISTLOCK_KEY0").as_deref(), Some("env-b"));
    assert_eq!(var("DISTLOCK_KEY1").as_deref(), Some("env-a"));
    assert_eq!(var("DISTLOCK_MODE0").as_deref(), Some("exclusive"));
    assert_eq!(var("DISTLOCK_MODE1").as_deref(), Some("exclusive"));
    let (t0, t1) = (
        var("DISTLOCK_TOKEN0").unwrap(),
        var("DISTLOCK_TOKEN1").unwrap(),
    );
    assert_eq!(t0.len(), 36);
    assert_eq!(t0, t1, "one token for every key");
    let f0: u64 = var("DISTLOCK_FENCE0").unwrap().parse().unwrap();
    let f1: u64 = var("DISTLOCK_FENCE1").unwrap().parse().unwrap();
    // Each key's fence is that key's: the counters in Redis say so.
    let counter = |key: &str| -> u64 {
        redis
            .get(&format!("{}:fence", lock_key(key)))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!((f0, f1), (counter("env-b"), counter("env-a")));
    // No single-key variable, not even an outer one: a fence check against it would be wrong.
    for single in ["DISTLOCK_KEY", "DISTLOCK_TOKEN", "DISTLOCK_FENCE"] {
        assert_eq!(var(single), None, "{single} in a set's environment");
    }
    let held: serde_json::Value = serde_json::from_str(&var("DISTLOCK_HELD").unwrap()).unwrap();
    assert_eq!(held.as_array().map(Vec::len), Some(2), "{held}");
    // One key: today's variables, and the numbered ones beside them.
    let out = run(distlock(&redis).args(["run", "-k", "env-one", "--"]).args([
        "sh",
        "-c",
        &format!("env > {env}"),
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&env).unwrap();
    let var = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    };
    assert_eq!(var("DISTLOCK_KEY").as_deref(), Some("env-one"));
    assert_eq!(var("DISTLOCK_KEYS").as_deref(), Some("env-one"));
    assert_eq!(var("DISTLOCK_TOKEN"), var("DISTLOCK_TOKEN0"));
    assert_eq!(var("DISTLOCK_FENCE"), var("DISTLOCK_FENCE0"));
}

#[test]
fn nested_runs_of_held_keys_reenter() {
    let redis = Redis::start();
    let inner = format!(
        "{bin} run -k nest-a -k nest-b -n -- sh -c 'test \"$DISTLOCK_KEYS\" = \"nest-a nest-b\"' \
         && {bin} run -k nest-b -n -- true",
        bin = env!("CARGO_BIN_EXE_distlock")
    );
    let out = run(distlock(&redis).args([
        "run", "-k", "nest-b", "-k", "nest-a", "--", "sh", "-c", &inner,
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A nested set of which the parent holds only some keys would wait for its parent: 64.
    let inner = format!(
        "{bin} run -k nest-a -k nest-c -- true",
        bin = env!("CARGO_BIN_EXE_distlock")
    );
    let out = run(distlock(&redis).args(["run", "-k", "nest-a", "--", "sh", "-c", &inner]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("holds \"nest-a\" but not \"nest-c\""),
        "{}",
        stderr(&out)
    );
    // So is an acquire of a set under a run that holds any of its keys.
    let inner = format!(
        "{bin} acquire -k nest-a -k nest-c --json",
        bin = env!("CARGO_BIN_EXE_distlock")
    );
    let out = run(distlock(&redis).args(["run", "-k", "nest-a", "--", "sh", "-c", &inner]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("acquire of a set cannot reenter"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn what_a_set_cannot_keep_is_refused_before_anything_is_sent() {
    // Nothing listens on port 1: a refusal that sent anything would fail otherwise (69).
    let refused = |args: &[&str], says: &str| {
        let out = run(bare_distlock()
            .args(["--redis", "redis://127.0.0.1:1", "run"])
            .args(args)
            .args(["--", "true"]));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    };
    refused(
        &["-k", "a", "-k", "b", "-k", "a"],
        "key \"a\" is given twice",
    );
    refused(
        &["-k", "a", "-k", "b", "--limit", "2"],
        "--limit 2 (a semaphore) takes one key",
    );
    refused(
        &["-k", "a", "-k", "b", "--supersede"],
        "--supersede takes one key",
    );
    refused(
        &["-k", "a", "-k", "b", "--replace"],
        "--replace takes one key",
    );
    let many: Vec<String> = (0..33).map(|i| format!("k{i}")).collect();
    let args: Vec<&str> = many.iter().flat_map(|k| ["-k", k.as_str()]).collect();
    refused(&args, "33 keys given; one run takes at most 32");
}

#[test]
fn opposite_orders_loss_and_a_killed_waiter_behind_sentinel() {
    let topo = Sentinel::start(0);
    let url = topo.url();
    let primary = topo.node(topo.primary());
    let place = Place {
        cmd: Box::new(|| at(&url)),
        nodes: Box::new(|_| vec![primary]),
    };
    opposite_orders(&place, "sen-a", "sen-b", 5, 1);
    losing_a_key(&place, "sen-a", "sen-b");
    killed_while_waiting(&place, "sen-a", "sen-b");
}

#[test]
fn opposite_orders_loss_and_a_killed_waiter_on_a_cluster_across_three_primaries() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.seeds_url();
    let keys: Vec<String> = (0..3).map(|i| cluster.key_on(i, "cl")).collect();
    let node_of = |key: &str| cluster.node(cluster.node_for_slot(Cluster::slot_of(&lock_key(key))));
    let nodes: Vec<usize> = keys
        .iter()
        .map(|k| cluster.node_for_slot(Cluster::slot_of(&lock_key(k))))
        .collect();
    assert_eq!(
        {
            let mut n = nodes.clone();
            n.sort();
            n.dedup();
            n.len()
        },
        3,
        "{keys:?} on {nodes:?}"
    );
    let place = Place {
        cmd: Box::new(|| at(&url)),
        nodes: Box::new(move |key| vec![node_of(key)]),
    };
    let (a, b, c) = (&keys[0], &keys[1], &keys[2]);
    opposite_orders(&place, a, c, 5, 1);
    losing_a_key(&place, b, c);
    killed_while_waiting(&place, a, b);
    // Three keys on three primaries, in both orders.
    let dir = Scratch::new();
    let x = section(&place, &[a, b, c], &dir, "abc");
    let y = section(&place, &[c, b, a], &dir, "cba");
    for run in [x, y] {
        let out = finish(run);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    assert!(!dir.path("overlap").exists());
}

#[test]
fn opposite_orders_loss_and_a_killed_waiter_on_a_redlock() {
    let nodes = Primaries::start(3);
    let place = Place {
        cmd: Box::new(|| {
            let mut cmd = bare_distlock();
            for url in nodes.urls() {
                cmd.arg("--redis").arg(url);
            }
            cmd
        }),
        nodes: Box::new(|_| nodes.iter().collect()),
    };
    opposite_orders(&place, "rl-a", "rl-b", 5, 1);
    losing_a_key(&place, "rl-a", "rl-b");
    killed_while_waiting(&place, "rl-a", "rl-b");
}

#[test]
fn acquire_with_an_env_file_then_renew_and_release_every_key() {
    let redis = Redis::start();
    let place = one_server(&redis);
    let dir = Scratch::new();
    let file = dir.str("env");
    let out = run(distlock(&redis).args([
        "acquire",
        "-k",
        "ci-b",
        "-k",
        "ci-a",
        "--ttl",
        "20s",
        "--env-file",
        &file,
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("DISTLOCK_KEY_COUNT=2\n"), "{text}");
    assert!(text.contains("DISTLOCK_KEY0=ci-b\n") && text.contains("DISTLOCK_KEY1=ci-a\n"));
    assert!(!text.contains("DISTLOCK_KEY="), "{text}");
    assert!(place.held("ci-a") && place.held("ci-b"));
    // Held to the full TTL, not the claim.
    assert!(redis.pttl(&lock_key("ci-a")) > 15_000);
    // A later step loads the file (as a shell would) and renews, then releases, every key.
    let shell = |what: &str| {
        let script = format!(
            "set -a; . {file}; set +a; exec {bin} {what}",
            bin = env!("CARGO_BIN_EXE_distlock")
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script])
            .env("DISTLOCK_REDIS_URL", redis.url())
            .env_remove("DISTLOCK_KEY")
            .env_remove("DISTLOCK_TOKEN");
        run(&mut cmd)
    };
    let out = shell("renew --ttl 60s");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(redis.pttl(&lock_key("ci-a")) > 50_000);
    assert!(redis.pttl(&lock_key("ci-b")) > 50_000);
    let out = shell("release");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!place.held("ci-a") && !place.held("ci-b"));
    let out = shell("release");
    assert_eq!(out.status.code(), Some(77), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("of set \"ci-b ci-a\""),
        "{}",
        stderr(&out)
    );
    // --json: one object with every key; a bare token is refused (64) before anything is sent.
    let out = run(distlock(&redis).args(["acquire", "-k", "j-a", "-k", "j-b", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["keys"], serde_json::json!(["j-a", "j-b"]));
    assert_eq!(json["locks"][1]["redis_key"], "distlock:{j-b}");
    let out = run(bare_distlock()
        .args(["--redis", "redis://127.0.0.1:1", "acquire"])
        .args(["-k", "a", "-k", "b"]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--env-file FILE or --json"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn status_and_list_say_which_key_a_set_still_waits_for() {
    let redis = Redis::start();
    let place = one_server(&redis);
    let dir = Scratch::new();
    let mut holder = Holder::new(distlock(&redis), &dir, "st-b").hold();
    let mut set = distlock(&redis)
        .args([
            "--history",
            "1h",
            "run",
            "-k",
            "st-b",
            "-k",
            "st-a",
            "--",
            "true",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_while_running("the set to hold st-a and wait for st-b", &mut set, || {
        place.held("st-a") && place.in_line("st-b") == 1
    });
    let out = run(distlock(&redis).args(["status", "-k", "st-a"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("part of set \"st-a st-b\""), "{text}");
    assert!(
        text.contains("for \"st-b\" (1st in line); the command has not started"),
        "{text}"
    );
    let out = run(distlock(&redis).args(["status", "-k", "st-a", "--json"]));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["holder"]["set"], "st-a st-b", "{json}");
    assert_eq!(json["holders"][0]["set"], "st-a st-b", "{json}");
    assert_eq!(json["holders"][0]["waiting_for"], "st-b", "{json}");
    let out = run(distlock(&redis).args(["list"]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("(set st-a st-b; waiting for st-b)"), "{text}");
    holder.release();
    assert_eq!(holder.finish().status.code(), Some(0));
    let out = finish(set);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The history records the set with each event.
    let out = run(distlock(&redis).args(["log", "-k", "st-a", "--json"]));
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(log.contains("\"set\":\"st-a st-b\""), "{log}");
}

#[test]
fn a_signal_or_a_conflict_gives_every_key_back() {
    let redis = Redis::start();
    let place = one_server(&redis);
    let dir = Scratch::new();
    let mut holder = Holder::new(distlock(&redis), &dir, "sig-b").hold();
    let mut set = distlock(&redis)
        .args(["run", "-k", "sig-a", "-k", "sig-b", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_while_running("the set to hold sig-a and wait for sig-b", &mut set, || {
        place.held("sig-a") && place.in_line("sig-b") == 1
    });
    kill(Pid::from_raw(set.id() as i32), Signal::SIGTERM).unwrap();
    let out = finish(set);
    assert_eq!(signal_of(&out), Some(libc::SIGTERM), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("every key was given back"),
        "{}",
        stderr(&out)
    );
    assert!(!place.held("sig-a"));
    assert_eq!(place.in_line("sig-b"), 0);
    holder.release();
    assert_eq!(holder.finish().status.code(), Some(0));
    // sig-b used as a semaphore: the set (a mutex on every key) is refused, 65, naming it.
    let mut semaphore = Holder::new(distlock(&redis), &dir, "sig-b")
        .args(&["--limit", "2"])
        .hold();
    let out = run(distlock(&redis).args(["run", "-k", "sig-a", "-k", "sig-b", "--", "true"]));
    assert_eq!(out.status.code(), Some(65), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("lock \"sig-b\" is held as a semaphore"),
        "{}",
        stderr(&out)
    );
    assert!(!place.held("sig-a"), "sig-a stayed held after the conflict");
    semaphore.release();
    assert_eq!(semaphore.finish().status.code(), Some(0));
}
