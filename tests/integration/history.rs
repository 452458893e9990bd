//! Issue 17: lock history (`--history`), `distlock log` and `distlock stats`, against real
//! servers: one server, a Redlock of 3 and a Cluster of 3 primaries.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::fixtures::topology::{Cluster, Primaries, Sentinel};
use crate::fixtures::*;

fn history_key(key: &str) -> String {
    format!("{}:history", lock_key(key))
}

/// `log --json` (with `extra`), one object per line.
fn log_json(mut cmd: Command, extra: &[&str]) -> Vec<Value> {
    let out = run(cmd.args(["log", "--json"]).args(extra));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect()
}

fn ms(event: &Value, field: &str) -> u64 {
    event[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {event}"))
}

/// Wait until the last event of `key`'s history is of `kind`.
fn wait_for_last(redis: &Redis, key: &str, kind: &str) {
    wait_until(&format!("a {kind} event last"), || {
        let last: Vec<(String, Vec<String>)> =
            redis.cmd(&["XREVRANGE", &history_key(key), "+", "-", "COUNT", "1"]);
        last.first()
            .is_some_and(|(_, f)| f.get(1).is_some_and(|e| e == kind))
    });
}

/// Every key of the lock `key` on `redis`.
fn keys_of(redis: &Redis, key: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis.cmd(&["KEYS", &format!("{}*", lock_key(key))]);
    keys.sort();
    keys
}

/// Every kind of event, each with the fields the issue asks for: acquired (waited, place,
/// fence), released (held for, exit code), gave-up (waited), superseded (by whom), broken
/// (by whom), expired (a holder that vanished, noticed by the next taker), lost (held for,
/// why); never a full token.
#[test]
fn every_event_is_recorded_with_its_fields() {
    let redis = Redis::start();
    let h = |redis: &Redis| {
        let mut cmd = distlock(redis);
        cmd.args(["--history", "1h"]);
        cmd
    };
    // acquired + released, with a waiter that gives up and one that joins and gets it.
    let dir = Scratch::new();
    let holder = hold_until_released(h(&redis), &dir, "ev", &["--note", "deploy v42"]);
    let out = run(h(&redis).args(["run", "-k", "ev", "--wait", "300ms", "--", "true"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let waiter = spawn(distlock(&redis).args(["run", "-k", "ev", "--", "sh", "-c", "exit 3"]));
    wait_until("the waiter in line", || redis.in_line("ev") == 1);
    // A newer waiter supersedes it; then the holder ends.
    let newer = spawn(distlock(&redis).args(["run", "-k", "ev", "--supersede", "--", "true"]));
    assert_eq!(finish(waiter).status.code(), Some(75));
    wait_until("the newer waiter in line", || redis.in_line("ev") == 1);
    std::thread::sleep(Duration::from_millis(200));
    release(&dir);
    assert_eq!(finish(holder).status.code(), Some(0));
    assert_eq!(finish(newer).status.code(), Some(0));
    // broken
    let dir2 = Scratch::new();
    let victim = hold_until_released(distlock(&redis), &dir2, "ev", &[]);
    let out = run(distlock(&redis).args(["break", "-k", "ev", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    release(&dir2);
    assert_eq!(finish(victim).status.code(), Some(124));
    wait_for_last(&redis, "ev", "lost");
    // expired: a token-holder that never releases, then the next taker.
    let out = run(distlock(&redis).args(["acquire", "-k", "ev", "--ttl", "1s"]));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(token.len(), 36, "{}", stderr(&out));
    wait_until("the lock to expire", || !redis.exists(&lock_key("ev")));
    let out = run(distlock(&redis).args(["run", "-k", "ev", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // lost: the key is deleted under a running holder.
    let lost =
        spawn(distlock(&redis).args(["run", "-k", "ev", "--ttl", "3s", "--", "sleep", "30"]));
    wait_until("the holder", || redis.exists(&lock_key("ev")));
    redis.cmd::<i64>(&["DEL", &lock_key("ev")]);
    assert_eq!(finish(lost).status.code(), Some(124));
    // The loss is reported by a copy of distlock, after it exited.
    wait_for_last(&redis, "ev", "lost");

    let events = log_json(distlock(&redis), &["-k", "ev"]);
    assert_eq!(
        kinds(&events),
        [
            "acquired",
            "gave-up",
            "superseded",
            "released",
            "acquired",
            "released",
            "acquired",
            "broken",
            "lost",
            "acquired",
            "expired",
            "acquired",
            "released",
            "acquired",
            "lost"
        ],
        "{events:#?}"
    );
    let first = &events[0];
    assert_eq!(first["note"], "deploy v42");
    assert_eq!(first["key"], "ev");
    assert!(first["host"].is_string() && first["pid"].is_u64() && first["user"].is_string());
    assert!(first["fence"].is_u64());
    assert_eq!(first["token"].as_str().unwrap().len(), 8);
    let gave_up = &events[1];
    // Counted from its place in line, taken just after a first attempt.
    assert!((250..2000).contains(&ms(gave_up, "waited_ms")), "{gave_up}");
    let superseded = &events[2];
    assert_eq!(superseded["command"], "sh -c 'exit 3'");
    assert_eq!(superseded["by_command"], "true");
    assert_eq!(superseded["by_token"].as_str().unwrap().len(), 8);
    assert_eq!(events[3]["outcome"], "exit 0");
    assert!(ms(&events[3], "held_ms") >= 200, "{}", events[3]);
    let handed = &events[4];
    assert_eq!(handed["command"], "true");
    assert!(ms(handed, "waited_ms") >= 200, "{handed}");
    // It joined behind the waiter it superseded.
    assert_eq!(handed["place"], 2);
    assert_eq!(events[5]["outcome"], "exit 0");
    let broken = &events[7];
    assert!(
        broken["by_pid"].is_u64() && broken["by_host"].is_string(),
        "{broken}"
    );
    assert_eq!(broken["fence"], events[6]["fence"]);
    // The broken holder found out at its release, and said so; its end was recorded already.
    assert_eq!(events[8]["expired"], "1");
    assert_eq!(events[8]["token"], events[7]["token"]);
    let expired = &events[10];
    assert_eq!(expired["token"].as_str().unwrap(), &token[..8]);
    assert!(ms(expired, "held_ms") >= 1000, "{expired}");
    assert_eq!(expired["kind"], "acquire");
    let lost = &events[14];
    assert!(lost["why"].as_str().unwrap().contains("deleted"), "{lost}");
    assert!(lost.get("held_ms").is_some());
    // Never a full token: not in any event, not in the text.
    let raw: String = redis
        .cmd::<Vec<Vec<(String, Vec<String>)>>>(&["XRANGE", &history_key("ev"), "-", "+"])
        .into_iter()
        .flatten()
        .flat_map(|(_, fields)| fields)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(!raw.contains(&token), "{raw}");
    let text = run(distlock(&redis).args(["log", "-k", "ev"]));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(!text.contains(&token));
    assert!(
        text.lines().next().unwrap().contains("acquired    ")
            && text
                .lines()
                .next()
                .unwrap()
                .contains("(deploy v42)  waited 0ms"),
        "{text}"
    );
    assert!(text.contains("broken by "), "{text}");
}

/// Without --history nothing is written and no key stays behind; `log` prints nothing and
/// exits 0, `stats` says there is no history (stderr) and exits 0; a malformed `--since` or
/// `--history` is a usage error naming the value.
#[test]
fn no_history_without_the_flag() {
    let redis = Redis::start();
    let out = run(distlock(&redis).args(["run", "-k", "plain", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    let dir = Scratch::new();
    let holder = hold_until_released(distlock(&redis), &dir, "plain", &[]);
    let out = run(distlock(&redis).args(["run", "-k", "plain", "--wait", "200ms", "--", "true"]));
    assert_eq!(out.status.code(), Some(75));
    release(&dir);
    let _ = finish(holder);
    let keys: Vec<String> = redis.cmd(&["KEYS", "*history*"]);
    assert!(keys.is_empty(), "{keys:?}");
    assert_eq!(
        keys_of(&redis, "plain"),
        [format!("{}:fence", lock_key("plain"))]
    );
    let out = run(distlock(&redis).args(["log"]));
    assert_eq!((out.status.code(), out.stdout.len()), (Some(0), 0));
    let out = run(distlock(&redis).args(["log", "-k", "plain"]));
    assert_eq!((out.status.code(), out.stdout.len()), (Some(0), 0));
    let out = run(distlock(&redis).args(["stats", "-k", "plain"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("no history"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let out = run(distlock(&redis).args(["log", "--since", "yesterday"]));
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("--since yesterday"),
        "{}",
        stderr(&out)
    );
    let out = run(distlock(&redis).args(["--history", "500ms", "run", "-k", "p", "--", "true"]));
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("--history 500ms"), "{}", stderr(&out));
    let out = run(distlock(&redis)
        .env("DISTLOCK_HISTORY", "soon")
        .args(["run", "-k", "p", "--", "true"]));
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("DISTLOCK_HISTORY=soon"),
        "{}",
        stderr(&out)
    );
}

/// Once a lock has a history, a holder without the flag records into it (and keeps its
/// duration); `log --clear` deletes it, and from then on nothing records.
#[test]
fn a_holder_without_the_flag_records_into_an_existing_history() {
    let redis = Redis::start();
    let out = run(distlock(&redis).args(["--history", "1h", "run", "-k", "k", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    let out = run(distlock(&redis).args(["run", "-k", "k", "--", "sh", "-c", "exit 5"]));
    assert_eq!(out.status.code(), Some(5));
    let events = log_json(distlock(&redis), &["-k", "k"]);
    assert_eq!(
        kinds(&events),
        ["acquired", "released", "acquired", "released"]
    );
    assert_eq!(events[3]["outcome"], "exit 5");
    assert!(redis.pttl(&history_key("k")) > 3_500_000);
    let out = run(distlock(&redis).args(["log", "-k", "k", "--clear"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(distlock(&redis).args(["run", "-k", "k", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    let keys: Vec<String> = redis.cmd(&["KEYS", "*history*"]);
    assert!(keys.is_empty(), "{keys:?}");
}

/// A history expires DUR after its last event, both keys; a history holds at most 1000
/// events (the oldest dropped).
#[test]
fn a_history_expires_and_is_capped() {
    let redis = Redis::start();
    let out = run(distlock(&redis).args(["--history", "1s", "run", "-k", "short", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(redis.exists(&history_key("short")));
    let ttl = redis.pttl(&history_key("short"));
    assert!((0..=1000).contains(&ttl), "{ttl}");
    assert!((0..=1000).contains(&redis.pttl(&format!("{}:held", history_key("short")))));
    let started = Instant::now();
    wait_until("the history to expire", || {
        keys_of(&redis, "short")
            .iter()
            .all(|k| !k.contains("history"))
    });
    assert!(started.elapsed() < Duration::from_secs(3));

    // 1100 events already there: the next run trims to the cap.
    let key = history_key("capped");
    let mut conn = redis.client();
    let mut pipe = redis::pipe();
    for i in 0..1100 {
        pipe.cmd("XADD")
            .arg(&key)
            .arg("*")
            .arg("event")
            .arg("acquired")
            .arg("key")
            .arg("capped")
            .arg("n")
            .arg(i)
            .ignore();
    }
    pipe.query::<()>(&mut conn).unwrap();
    let out = run(distlock(&redis).args(["run", "-k", "capped", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    let len: i64 = redis.cmd(&["XLEN", &key]);
    assert_eq!(len, 1000);
    let events = log_json(distlock(&redis), &["-k", "capped", "-n", "3"]);
    assert_eq!(kinds(&events), ["acquired", "acquired", "released"]);
    let memory: i64 = redis.cmd(&["MEMORY", "USAGE", &key]);
    eprintln!("MEMORY USAGE of a history at the cap: {memory} bytes");
}

/// `log --follow` prints an event within a second of its recording, and ends with exit 0 on
/// SIGINT.
#[test]
fn follow_sees_an_event_within_a_second() {
    let redis = Redis::start();
    let out = run(distlock(&redis).args(["--history", "1h", "run", "-k", "f", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    let mut follower = distlock(&redis)
        .args(["log", "-k", "f", "--json", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = follower.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send((line, std::time::SystemTime::now()));
        }
    });
    // The two events already there.
    for _ in 0..2 {
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
    }
    let out = run(distlock(&redis).args(["run", "-k", "f", "--note", "new", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    for _ in 0..2 {
        let (line, seen) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(event["note"], "new");
        let at = Duration::from_millis(ms(&event, "at_ms"));
        let seen = seen.duration_since(std::time::UNIX_EPOCH).unwrap();
        let after = seen.saturating_sub(at);
        assert!(
            after <= Duration::from_secs(1),
            "{event} seen {after:?} after it happened"
        );
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(follower.id() as i32),
        Signal::SIGINT,
    )
    .unwrap();
    let out = finish(follower);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `stats` counts what the runs did, and its hold and wait figures agree with how long they
/// held and waited.
#[test]
fn stats_agree_with_the_runs() {
    let redis = Redis::start();
    for secs in ["0.2", "0.4", "0.6"] {
        let out =
            run(distlock(&redis).args(["--history", "1h", "run", "-k", "s", "--", "sleep", secs]));
        assert_eq!(out.status.code(), Some(0));
    }
    // One waiter that waits behind a holder of about 0.5s.
    let dir = Scratch::new();
    let holder = hold_until_released(distlock(&redis), &dir, "s", &[]);
    let waiter = spawn(distlock(&redis).args(["run", "-k", "s", "--", "true"]));
    wait_until("the waiter in line", || redis.in_line("s") == 1);
    let waiting = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    release(&dir);
    assert_eq!(finish(holder).status.code(), Some(0));
    assert_eq!(finish(waiter).status.code(), Some(0));
    let waited = waiting.elapsed();
    let out = run(distlock(&redis).args(["stats", "-k", "s", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["key"], "s");
    assert_eq!(stats["events"]["acquired"], 5);
    assert_eq!(stats["events"]["released"], 5);
    assert_eq!(stats["events"]["lost"], 0);
    assert_eq!(stats["hold_ms"]["count"], 5);
    assert_eq!(stats["wait_ms"]["count"], 5);
    let hold_max = ms(&stats["hold_ms"], "max");
    assert!((500..3000).contains(&hold_max), "{stats}");
    let p50 = ms(&stats["hold_ms"], "p50");
    assert!((400..2000).contains(&p50), "{stats}");
    let wait_max = ms(&stats["wait_ms"], "max");
    assert!(
        wait_max >= 500 && wait_max <= waited.as_millis() as u64 + 100,
        "{stats} waited {waited:?}"
    );
    assert_eq!(ms(&stats["wait_ms"], "p50"), 0);
    // The text form says the same.
    let out = run(distlock(&redis).args(["stats"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("lock \"s\": 10 events"), "{text}");
    assert!(text.contains("acquired 5  released 5"), "{text}");
}

fn redlock(nodes: &Primaries) -> Command {
    let mut cmd = bare_distlock();
    for url in nodes.urls() {
        cmd.arg("--redis").arg(url);
    }
    cmd
}

/// A Redlock of 3: each node records what it granted; `log` shows each event once, saying when
/// a node did not record it, and leaves out what only a minority recorded.
#[test]
fn a_redlock_shows_each_event_once_and_says_when_nodes_disagree() {
    let nodes = Primaries::start(3);
    let out = run(redlock(&nodes).args(["--history", "1h", "run", "-k", "r", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for i in 0..3 {
        let len: i64 = nodes.node(i).cmd(&["XLEN", &history_key("r")]);
        assert_eq!(len, 2, "node {i}");
    }
    let events = log_json(redlock(&nodes), &["-k", "r"]);
    assert_eq!(kinds(&events), ["acquired", "released"]);
    assert_eq!(
        (
            events[0]["recorded_by"].as_u64(),
            events[0]["nodes"].as_u64()
        ),
        (Some(3), Some(3))
    );
    // Node 2 loses its history: the next events are recorded by all three, the earlier ones by
    // two of three, which log says.
    nodes.node(2).cmd::<i64>(&["DEL", &history_key("r")]);
    let out = run(redlock(&nodes).args(["--history", "1h", "run", "-k", "r", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    // One node alone says something happened: left out.
    nodes.node(1).cmd::<String>(&[
        "XADD",
        &history_key("r"),
        "*",
        "event",
        "acquired",
        "key",
        "r",
        "token",
        "zzzzzzzz",
    ]);
    let events = log_json(redlock(&nodes), &["-k", "r"]);
    assert_eq!(
        kinds(&events),
        ["acquired", "released", "acquired", "released"],
        "{events:#?}"
    );
    assert_eq!(events[0]["recorded_by"], 2);
    assert_eq!(events[2]["recorded_by"], 3);
    let out = run(redlock(&nodes).args(["log", "-k", "r"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("(recorded by 2 of 3 nodes)").count(),
        2,
        "{text}"
    );
    assert!(
        stderr(&out).contains("left out 1 event"),
        "{}",
        stderr(&out)
    );
    // stats count each event once too.
    let out = run(redlock(&nodes).args(["stats", "--json"]));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["events"]["acquired"], 2, "{stats}");
}

/// A Cluster: the history lives in the lock's slot, and `log` without `-k` reads every primary.
#[test]
fn a_cluster_log_reads_every_primary() {
    let cluster = Cluster::start(3, 0);
    // Two keys on different primaries.
    let a = "hist-a";
    let node_a = cluster.node_for_slot(Cluster::slot_of(&lock_key(a)));
    let b = (0..100)
        .map(|i| format!("hist-b{i}"))
        .find(|k| cluster.node_for_slot(Cluster::slot_of(&lock_key(k))) != node_a)
        .unwrap();
    let at = |url: &str| {
        let mut cmd = bare_distlock();
        cmd.env("DISTLOCK_REDIS_URL", url);
        cmd
    };
    let url = cluster.url_of_node(0);
    for key in [a, b.as_str()] {
        let out = run(at(&url).args(["--history", "1h", "run", "-k", key, "--", "true"]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let node_b = cluster.node_for_slot(Cluster::slot_of(&lock_key(&b)));
    let len: i64 = cluster.node(node_b).cmd(&["XLEN", &history_key(&b)]);
    assert_eq!(len, 2);
    let events = log_json(at(&url), &[]);
    let mut keys: Vec<&str> = events.iter().map(|e| e["key"].as_str().unwrap()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys, [a, b.as_str()], "{events:#?}");
    assert_eq!(events.len(), 4);
    let events = log_json(at(&cluster.seeds_url()), &["-k", &b]);
    assert_eq!(kinds(&events), ["acquired", "released"]);
}

/// A semaphore records per slot: each holder's events carry its slot.
#[test]
fn semaphore_slots_record_per_slot() {
    let redis = Redis::start();
    let (d1, d2) = (Scratch::new(), Scratch::new());
    let h = |redis: &Redis| {
        let mut cmd = distlock(redis);
        cmd.args(["--history", "1h"]);
        cmd
    };
    let one = hold_until_released(h(&redis), &d1, "sem", &["--limit", "2"]);
    let two = hold_until_released(h(&redis), &d2, "sem", &["--limit", "2"]);
    release(&d1);
    release(&d2);
    assert_eq!(finish(one).status.code(), Some(0));
    assert_eq!(finish(two).status.code(), Some(0));
    let events = log_json(distlock(&redis), &["-k", "sem"]);
    assert_eq!(
        kinds(&events),
        ["acquired", "acquired", "released", "released"],
        "{events:#?}"
    );
    let mut slots: Vec<u64> = events[..2].iter().map(|e| ms(e, "slot")).collect();
    slots.sort();
    assert_eq!(slots, [0, 1]);
    for released in &events[2..] {
        let acquired = events[..2]
            .iter()
            .find(|a| a["token"] == released["token"])
            .unwrap();
        assert_eq!(acquired["slot"], released["slot"]);
        assert!(released["held_ms"].is_u64());
    }
}

/// Sentinel: the history is kept on the primary the sentinels name, beside the lock, and
/// `log` and `stats` read it there.
#[test]
fn sentinel_keeps_the_history_on_the_primary() {
    let topo = Sentinel::start(1);
    let at = || {
        let mut cmd = bare_distlock();
        cmd.env("DISTLOCK_REDIS_URL", topo.url());
        cmd
    };
    let out = run(at().args(["--history", "1h", "run", "-k", "sent", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let len: i64 = topo.node(0).cmd(&["XLEN", &history_key("sent")]);
    assert_eq!(len, 2);
    assert_eq!(
        kinds(&log_json(at(), &["-k", "sent"])),
        ["acquired", "released"]
    );
    assert_eq!(kinds(&log_json(at(), &[])), ["acquired", "released"]);
    let out = run(at().args(["stats", "--json"]));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["events"]["released"], 1, "{stats}");
}

/// The server's clock (TIME), in ms.
fn server_ms(redis: &Redis) -> u64 {
    let t: Vec<String> = redis.cmd(&["TIME"]);
    t[0].parse::<u64>().unwrap() * 1000 + t[1].parse::<u64>().unwrap() / 1000
}

/// A waiter in line at `key` (run `-- true`), once it is there: its process, and its token as
/// the line knows it.
fn waiter_in_line(redis: &Redis, key: &str) -> (std::process::Child, String) {
    let waiter = spawn(distlock(redis).args(["run", "-k", key, "--", "true"]));
    let queue = format!("{}:queue", lock_key(key));
    let mut token = String::new();
    wait_until(&format!("the waiter in line at {key}"), || {
        let line: Vec<String> = redis.cmd(&["ZRANGE", &queue, "0", "-1"]);
        token = line.first().cloned().unwrap_or_default();
        !token.is_empty()
    });
    (waiter, token)
}

/// SIGKILL distlock `waiter` and its guard: nothing of it refreshes its place any more.
fn kill_waiter(waiter: std::process::Child) -> u32 {
    let pid = nix::unistd::Pid::from_raw(waiter.id() as i32);
    wait_until("the waiter's guard", || !guards_of(pid).is_empty());
    let guards = guards_of(pid);
    nix::sys::signal::kill(pid, Signal::SIGKILL).unwrap();
    for guard in guards {
        let _ = nix::sys::signal::kill(guard, Signal::SIGKILL);
        wait_dead(guard);
    }
    assert_eq!(crate::fixtures::signal_of(&finish(waiter)), Some(9));
    pid.as_raw() as u32
}

/// Issue 24: a waiter SIGKILLed in line leaves a trace: `gave-up` with `why: lapsed`, the
/// waiter's metadata and 8-character token, its place, and `waited_ms` up to the lapse of its
/// place (6s after its last refresh, on the server's clock), recorded by the next script that
/// purges the line (here a live waiter's refresh) or, when the line's keys expired with the
/// dead waiter's place, by the next script that runs (here the holder's release). A lock
/// handed to a waiter killed in line, which never takes it up, ends in `expired` with `why:
/// not-taken-up` once the take-up window (3s) passed. `log` says both, `stats` counts them.
#[test]
fn a_waiter_killed_in_line_is_recorded_once_its_place_lapses() {
    let redis = Redis::start();
    let with_history = || {
        let mut cmd = distlock(&redis);
        cmd.args(["--history", "1h"]);
        cmd
    };
    // Three locks held, each with a waiter in line (without --history: the history exists).
    let dirs = [Scratch::new(), Scratch::new(), Scratch::new()];
    let keys = ["alone", "purged", "handed"];
    let mut holders = Vec::new();
    let mut waiters = Vec::new();
    for (dir, key) in dirs.iter().zip(keys) {
        holders.push(hold_until_released(with_history(), dir, key, &[]));
        waiters.push(waiter_in_line(&redis, key));
    }
    let mut dead = Vec::new();
    for (waiter, token) in waiters {
        dead.push((kill_waiter(waiter), token));
    }
    let mut holders = holders.into_iter();
    let (h1, h2, h3) = (
        holders.next().unwrap(),
        holders.next().unwrap(),
        holders.next().unwrap(),
    );
    // The third lock is handed at once to its dead waiter, which never takes it up.
    release(&dirs[2]);
    assert_eq!(finish(h3).status.code(), Some(0));
    // A fourth, handed to a live waiter that takes it up and is then killed: its expiry is a
    // plain `expired`, a hold.
    let taker_dir = Scratch::new();
    let held = hold_until_released(with_history(), &taker_dir, "taken", &[]);
    let taker = spawn(
        distlock(&redis)
            .args(["run", "-k", "taken", "--ttl", "1s", "--", "sh", "-c"])
            .arg(format!("echo held > {}; sleep 60", taker_dir.str("held"))),
    );
    wait_until("the taker in line", || redis.in_line("taken") == 1);
    release(&taker_dir);
    assert_eq!(finish(held).status.code(), Some(0));
    wait_for_file(&taker_dir.path("held"));
    // (Its guard ends its command.)
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(taker.id() as i32),
        Signal::SIGKILL,
    )
    .unwrap();
    finish(taker);
    // When the two dead waiters' places lapse (and when they joined).
    let mut lapse = Vec::new();
    for (key, (_, token)) in keys.iter().zip(&dead).take(2) {
        let alive = format!("{}:alive", lock_key(key));
        let deadline: u64 = redis.cmd(&["ZSCORE", &alive, token]);
        let waiters = format!("{}:waiters", lock_key(key));
        let entry: String = redis.cmd(&["HGET", &waiters, token]);
        let since: u64 = serde_json::from_str::<Value>(&entry).unwrap()["since"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        lapse.push((deadline, since));
    }
    // A live waiter joins behind the second dead one: its refreshes purge the line.
    let live = spawn(distlock(&redis).args(["run", "-k", "purged", "--", "true"]));
    wait_until("the live waiter in line", || redis.in_line("purged") == 2);
    wait_for_last(&redis, "purged", "gave-up");
    assert!(server_ms(&redis) > lapse[1].0);
    release(&dirs[1]);
    assert_eq!(finish(h2).status.code(), Some(0));
    assert_eq!(finish(live).status.code(), Some(0));
    // The first dead waiter was alone in line: the line's keys expire with its place, and
    // nothing is recorded until a script runs.
    wait_until("the line of the lone dead waiter to expire", || {
        !redis.exists(&format!("{}:queue", lock_key("alone")))
    });
    assert!(server_ms(&redis) > lapse[0].0);
    assert_eq!(
        kinds(&log_json(distlock(&redis), &["-k", "alone"])),
        ["acquired"]
    );
    release(&dirs[0]);
    assert_eq!(finish(h1).status.code(), Some(0));
    // The handed lock's take-up window passed: the next taker notices.
    wait_until("the unclaimed hand-off to expire", || {
        !redis.exists(&lock_key("handed"))
    });
    let out = run(distlock(&redis).args(["run", "-k", "handed", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    wait_until("the killed taker's lock to expire", || {
        !redis.exists(&lock_key("taken"))
    });
    let out = run(distlock(&redis).args(["run", "-k", "taken", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = log_json(distlock(&redis), &["-k", "taken"]);
    assert_eq!(
        kinds(&events),
        [
            "acquired", "released", "acquired", "expired", "acquired", "released"
        ],
        "{events:#?}"
    );
    assert!(events[3].get("why").is_none(), "{}", events[3]);

    let expected: [&[&str]; 3] = [
        &["acquired", "gave-up", "released"],
        &["acquired", "gave-up", "released", "acquired", "released"],
        &[
            "acquired", "released", "acquired", "expired", "acquired", "released",
        ],
    ];
    let mut logs = Vec::new();
    for (key, want) in keys.iter().zip(expected) {
        let events = log_json(distlock(&redis), &["-k", key]);
        assert_eq!(kinds(&events), want, "{key}: {events:#?}");
        logs.push(events);
    }
    for (i, (deadline, since)) in lapse.iter().enumerate() {
        let gave_up = &logs[i][1];
        let (pid, token) = &dead[i];
        assert_eq!(gave_up["why"], "lapsed", "{gave_up}");
        assert_eq!(gave_up["token"].as_str().unwrap(), &token[..8]);
        assert_eq!(gave_up["pid"], *pid, "{gave_up}");
        assert_eq!(gave_up["command"], "true");
        assert!(gave_up["host"].is_string() && gave_up["user"].is_string());
        assert_eq!(gave_up["place"], 1);
        let at = ms(gave_up, "at_ms");
        assert!(at > *deadline, "{gave_up}");
        // Purged: up to the lapse; noticed later: up to then.
        let waited = ms(gave_up, "waited_ms");
        if i == 1 {
            assert_eq!(waited, deadline - since, "{gave_up}");
        } else {
            assert!(
                (deadline - since..=at - since).contains(&waited),
                "{gave_up}"
            );
        }
    }
    let handed = &logs[2][2];
    let expired = &logs[2][3];
    assert_eq!(handed["pid"], dead[2].0, "{handed}");
    assert_eq!(expired["token"], handed["token"]);
    assert_eq!(expired["why"], "not-taken-up", "{expired}");
    // Never a full token.
    for (key, (_, token)) in keys.iter().zip(&dead) {
        let raw: String = redis
            .cmd::<Vec<(String, Vec<String>)>>(&["XRANGE", &history_key(key), "-", "+"])
            .into_iter()
            .flat_map(|(_, fields)| fields)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(!raw.contains(token.as_str()), "{raw}");
    }
    // `log` says why; `stats` counts it.
    let text = run(distlock(&redis).args(["log", "-k", "alone"]));
    let text = String::from_utf8_lossy(&text.stdout);
    let line = text.lines().nth(1).unwrap();
    assert!(
        line.contains("gave-up") && line.contains("place in line lapsed"),
        "{text}"
    );
    let text = run(distlock(&redis).args(["log", "-k", "handed"]));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("never taken up"), "{text}");
    let out = run(distlock(&redis).args(["stats", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stats: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stats.len(), 4);
    for s in stats.iter().filter(|s| s["key"] != "taken") {
        let lapsed = if s["key"] == "handed" { 0 } else { 1 };
        assert_eq!(s["events"]["gave-up"], lapsed, "{s}");
        assert_eq!(s["why"]["gave-up"]["lapsed"], lapsed, "{s}");
        let untaken = if s["key"] == "handed" { 1 } else { 0 };
        assert_eq!(s["why"]["expired"]["not-taken-up"], untaken, "{s}");
    }
    // A hand-off never taken up was not a hold.
    let handed = stats.iter().find(|s| s["key"] == "handed").unwrap();
    assert_eq!(handed["hold_ms"]["count"], 2, "{handed}");
    let out = run(distlock(&redis).args(["stats", "-k", "purged"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("gave-up 1 (1 lapsed)"), "{text}");
    // No waiter left for the history to remember (beside its settings and the counters that
    // `distlock metrics` reads: `_`-prefixed fields, never a waiter's `_w:`).
    let held: Vec<String> = redis.cmd(&["HKEYS", &format!("{}:held", history_key("purged"))]);
    assert!(held.contains(&"_history_ms".to_owned()), "{held:?}");
    assert!(
        held.iter()
            .all(|f| f.starts_with('_') && !f.starts_with("_w:")),
        "{held:?}"
    );
}

/// The same on a semaphore's slots: a slot handed to a waiter killed in line ends in `expired`
/// with `why: not-taken-up` (and its slot); one handed to a waiter that took it up and was
/// then killed, in a plain `expired`.
#[test]
fn a_semaphore_slot_handed_to_a_dead_waiter_says_so() {
    let redis = Redis::start();
    let sem = ["--limit", "2"];
    let (d1, d2, taker_dir) = (Scratch::new(), Scratch::new(), Scratch::new());
    let mut with_history = distlock(&redis);
    with_history.args(["--history", "1h"]);
    let one = hold_until_released(with_history, &d1, "sem", &sem);
    let two = hold_until_released(distlock(&redis), &d2, "sem", &sem);
    let dead = spawn(distlock(&redis).args(["run", "-k", "sem", "--limit", "2", "--", "true"]));
    wait_until("the first waiter in line", || redis.in_line("sem") == 1);
    let taker = spawn(
        distlock(&redis)
            .args([
                "run", "-k", "sem", "--limit", "2", "--ttl", "1s", "--", "sh", "-c",
            ])
            .arg(format!("echo held > {}; sleep 60", taker_dir.str("held"))),
    );
    wait_until("the second waiter in line", || redis.in_line("sem") == 2);
    let dead_pid = kill_waiter(dead);
    release(&d1);
    assert_eq!(finish(one).status.code(), Some(0));
    release(&d2);
    assert_eq!(finish(two).status.code(), Some(0));
    wait_for_file(&taker_dir.path("held"));
    let taker_pid = taker.id();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(taker_pid as i32),
        Signal::SIGKILL,
    )
    .unwrap();
    finish(taker);
    // Both slots lapse (the take-up window, the taker's TTL), by the server's clock.
    let slots = format!("{}:slots", lock_key("sem"));
    let until: Vec<String> = redis.cmd(&["ZRANGE", &slots, "0", "-1", "WITHSCORES"]);
    let last: u64 = until[until.len() - 1].parse().unwrap();
    wait_until("both slots to lapse", || server_ms(&redis) > last);
    let out = run(distlock(&redis).args(["run", "-k", "sem", "--limit", "2", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = log_json(distlock(&redis), &["-k", "sem"]);
    let expired: Vec<&Value> = events.iter().filter(|e| e["event"] == "expired").collect();
    assert_eq!(expired.len(), 2, "{events:#?}");
    let of = |pid: u32| *expired.iter().find(|e| e["pid"] == pid).unwrap();
    assert_eq!(of(dead_pid)["why"], "not-taken-up", "{events:#?}");
    assert!(of(dead_pid)["slot"].is_u64());
    assert!(of(taker_pid).get("why").is_none(), "{events:#?}");
}
