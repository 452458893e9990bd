//! The key layout's protocol version (docs/protocol.md, "Protocol version"): a lock whose
//! `P{K}:protocol` key names a newer layout than this distlock speaks is refused by every
//! command with exit 65 and a message that says to upgrade (but `list`, which names it among
//! the other locks), and nothing of it is read as a lock of ours, changed or deleted. The newer locks here are written by hand, as a future
//! distlock might lay them out; `1` (this protocol, written explicitly) is accepted.

use serde_json::Value;

use crate::fixtures::topology::{Cluster, Primaries};
use crate::fixtures::*;

/// Every key under the default prefix, with its type, value and whether it expires: what a
/// refusing distlock must leave exactly as it was.
fn snapshot(redis: &Redis) -> Vec<(String, String, String, bool)> {
    let mut keys: Vec<String> = redis.cmd(&["KEYS", "distlock:*"]);
    keys.sort();
    keys.into_iter()
        .map(|key| {
            let kind: String = redis.cmd(&["TYPE", &key]);
            let value = match kind.as_str() {
                "string" => redis.get(&key).unwrap_or_default(),
                "hash" => format!("{:?}", redis.cmd::<Vec<String>>(&["HGETALL", &key])),
                "zset" => format!(
                    "{:?}",
                    redis.cmd::<Vec<String>>(&["ZRANGE", &key, "0", "-1", "WITHSCORES"])
                ),
                other => other.to_owned(),
            };
            let expires = redis.pttl(&key) >= 0;
            (key, kind, value, expires)
        })
        .collect()
}

/// A lock of a future protocol 2, by hand: the marker, and keys this distlock must not take for
/// its own. Its mutex key is absent (layout 2 keeps its holder elsewhere): a distlock that
/// ignored the marker would find the lock free and take it beside the protocol-2 holder.
fn newer_lock(redis: &Redis, key: &str) {
    let base = lock_key(key);
    redis.cmd::<String>(&["SET", &format!("{base}:protocol"), "3"]);
    redis.cmd::<i64>(&[
        "HSET",
        &format!("{base}:lease"),
        "token",
        "v2-token",
        "host",
        "newer-host",
    ]);
    redis.cmd::<i64>(&["PEXPIRE", &format!("{base}:lease"), "600000"]);
    redis.cmd::<String>(&["SET", &format!("{base}:fence"), "1700000000000000"]);
}

/// `out` is the refusal: exit 65, one line naming both protocols and the fix.
fn assert_refused(out: &std::process::Output, what: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(65), "{what}: {err}");
    assert!(
        err.contains("protocol 3") && err.contains("speaks protocol 2"),
        "{what}: {err}"
    );
    assert!(err.contains("upgrade distlock"), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: {err}");
}

#[test]
fn every_command_refuses_a_lock_of_a_newer_protocol_and_leaves_it_alone() {
    let redis = Redis::start();
    newer_lock(&redis, "v2");
    let before = snapshot(&redis);
    let dir = Scratch::new();
    let ran = dir.str("ran");

    let out =
        run(distlock(&redis).args(["run", "-k", "v2", "--", "sh", "-c", &format!(": > {ran}")]));
    assert_refused(&out, "run");
    assert!(!dir.path("ran").exists(), "the command ran");
    // Waiting changes nothing: the refusal is at once, not after --wait.
    let out = run(distlock(&redis).args(["run", "-k", "v2", "--wait", "1h", "--", "true"]));
    assert_refused(&out, "run --wait");
    let out = run(distlock(&redis).args(["run", "-n", "-k", "v2", "--limit", "3", "--", "true"]));
    assert_refused(&out, "run --limit");
    let out = run(distlock(&redis).args(["acquire", "-k", "v2", "--ttl", "1m"]));
    assert_refused(&out, "acquire");
    assert!(out.stdout.is_empty());
    let out = run(distlock(&redis).args(["status", "-k", "v2"]));
    assert_refused(&out, "status");
    let out = run(distlock(&redis).args(["status", "-k", "v2", "--json"]));
    assert_refused(&out, "status --json");
    assert!(out.stdout.is_empty(), "status printed a reading of it");
    // `list` names it (below), without reading it.
    let out = run(distlock(&redis).args(["list"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(distlock(&redis).args(["break", "-k", "v2", "--yes"]));
    assert_refused(&out, "break");
    for command in ["renew", "release"] {
        let out = run(distlock(&redis).args([command, "-k", "v2", "--token", "v2-token"]));
        assert_refused(&out, command);
    }

    assert_eq!(
        snapshot(&redis),
        before,
        "a refusing distlock changed the lock"
    );
}

/// The locks that `list` shows, in order: each row's key, holder and last column (text), or
/// each object's key and what it says (JSON).
fn listed(out: &std::process::Output) -> Vec<(String, String, String)> {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let text = String::from_utf8_lossy(&out.stdout);
    if text.starts_with('[') {
        let items: Vec<Value> = serde_json::from_str(&text).unwrap();
        return items
            .iter()
            .map(|item| {
                let said = match item.get("protocol") {
                    Some(p) => format!("protocol {} {}", p.as_str().unwrap(), item["error"]),
                    None => format!("held {}", item["held"]),
                };
                (
                    item["key"].as_str().unwrap().to_owned(),
                    said,
                    String::new(),
                )
            })
            .collect();
    }
    (text.lines().skip(1))
        .map(|line| {
            let cells: Vec<&str> = line.split('\t').collect();
            assert_eq!(cells.len(), 6, "{line}");
            (cells[0].into(), cells[1].into(), cells[5].into())
        })
        .collect()
}

/// `list` does not stop at a lock of a newer protocol: it lists every other lock, before and
/// after it, and names that one for what it is (text and JSON), reading and changing nothing of
/// it; its exit code stays 0 (listed).
#[test]
fn list_names_a_lock_of_a_newer_protocol_among_the_others() {
    let redis = Redis::start();
    for key in ["a", "c"] {
        let out = run(distlock(&redis).args(["acquire", "-k", key, "--ttl", "60s", "--note", key]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    newer_lock(&redis, "b");
    let before = snapshot(&redis);

    let out = run(distlock(&redis).arg("list"));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let rows = listed(&out);
    let keys: Vec<&str> = rows.iter().map(|(k, _, _)| k.as_str()).collect();
    assert_eq!(keys, ["a", "b", "c"], "{rows:?}");
    assert_eq!(rows[0].2, "a");
    assert_eq!(rows[2].2, "c");
    assert_eq!(rows[1].1, "(protocol 3)", "{rows:?}");
    assert!(
        rows[1].2.contains("a lock of protocol 3")
            && rows[1].2.contains("speaks protocol 2")
            && rows[1].2.contains("upgrade distlock to manage it"),
        "{rows:?}"
    );

    let out = run(distlock(&redis).args(["list", "--json"]));
    let items = listed(&out);
    let keys: Vec<&str> = items.iter().map(|(k, _, _)| k.as_str()).collect();
    assert_eq!(keys, ["a", "b", "c"], "{items:?}");
    assert_eq!(items[0].1, "held true");
    assert_eq!(items[2].1, "held true");
    assert!(
        items[1].1.starts_with("protocol 3 ") && items[1].1.contains("upgrade distlock"),
        "{items:?}"
    );

    assert_eq!(snapshot(&redis), before, "list changed the locks");
}

/// `metrics` leaves a lock of a newer protocol out (it can read nothing of it) but says so, one
/// warning naming the lock, and exports the others; its exit code stays 0.
#[test]
fn metrics_warns_of_a_lock_of_a_newer_protocol_and_exports_the_others() {
    let redis = Redis::start();
    let out = run(distlock(&redis).args(["acquire", "-k", "a", "--ttl", "60s"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    newer_lock(&redis, "b");
    let before = snapshot(&redis);

    let out = run(distlock(&redis).arg("metrics"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    let warnings: Vec<&str> = err.lines().collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].starts_with("distlock: ")
            && warnings[0].contains("lock \"b\" is stored in protocol 3")
            && warnings[0].contains("upgrade distlock"),
        "{err}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("key=\"a\""), "{text}");
    assert!(!text.contains("key=\"b\""), "{text}");
    assert_eq!(snapshot(&redis), before, "metrics changed the locks");
}

#[test]
fn the_refusal_is_one_json_event_with_its_exit_code() {
    let redis = Redis::start();
    newer_lock(&redis, "v2");
    let out = run(distlock(&redis).args(["--log-format", "json", "run", "-k", "v2", "--", "true"]));
    assert_eq!(out.status.code(), Some(65), "{}", stderr(&out));
    let lines: Vec<Value> = stderr(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["event"], "newer-protocol");
    assert_eq!(lines[0]["level"], "error");
    assert_eq!(lines[0]["exit"], 65);
    assert_eq!(lines[0]["key"], "v2");
}

/// Protocol 1 written explicitly is this protocol, and a marker on another key concerns only
/// that key: other locks go on working beside a newer one.
#[test]
fn protocol_one_and_other_keys_work_as_before() {
    let redis = Redis::start();
    redis.cmd::<String>(&["SET", &format!("{}:protocol", lock_key("v1")), "1"]);
    newer_lock(&redis, "v2");
    let out = run(distlock(&redis).args(["run", "-k", "v1", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(distlock(&redis).args(["run", "-k", "other", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        redis
            .get(&format!("{}:protocol", lock_key("v1")))
            .as_deref(),
        Some("1")
    );
    assert_eq!(
        redis
            .get(&format!("{}:protocol", lock_key("v2")))
            .as_deref(),
        Some("3")
    );
}

/// A value that is not a protocol this distlock knows (garbage, a future "2.1") is refused the
/// same way, with the value sanitised: never read as "no marker".
#[test]
fn an_unknown_marker_is_refused_not_ignored() {
    let redis = Redis::start();
    let marker = format!("{}:protocol", lock_key("odd"));
    redis.cmd::<String>(&["SET", &marker, "2.1 beta\nx"]);
    let out = run(distlock(&redis).args(["run", "-k", "odd", "--", "true"]));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(65), "{err}");
    assert!(err.contains("protocol 2.1?beta?x"), "{err}");
    assert_eq!(redis.get(&marker).as_deref(), Some("2.1 beta\nx"));
}

/// Over a Redlock and on a Redis Cluster the same scripts refuse the same way (on the Cluster,
/// the marker is declared to the script, so it is routed with the lock's other keys).
#[test]
fn a_newer_lock_is_refused_over_a_redlock_and_on_a_cluster() {
    let nodes = Primaries::start(3);
    for i in 0..nodes.len() {
        newer_lock(nodes.node(i), "v2");
    }
    let redlock = || {
        let mut cmd = bare_distlock();
        for i in 0..nodes.len() {
            cmd.arg("--redis").arg(nodes.url(i));
        }
        cmd
    };
    let out = run(redlock().args(["run", "-k", "v2", "--", "true"]));
    assert_refused(&out, "run over a Redlock");
    // `list` names it beside a lock of ours.
    let out = run(redlock().args(["acquire", "-k", "v1", "--ttl", "60s"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows = listed(&run(redlock().arg("list")));
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!((rows[0].0.as_str(), rows[1].0.as_str()), ("v1", "v2"));
    assert_eq!(rows[1].1, "(protocol 3)", "{rows:?}");

    let cluster = Cluster::start(3, 0);
    let key = cluster.key_on(2, "v2");
    let owner = cluster.node_for_slot(Cluster::slot_of(&key));
    newer_lock(cluster.node(owner), &key);
    let before = snapshot(cluster.node(owner));
    for url in [cluster.url_of_node(0), cluster.seeds_url()] {
        let mut cmd = bare_distlock();
        cmd.env("DISTLOCK_REDIS_URL", &url);
        let out = run(cmd.args(["run", "-k", &key, "--", "true"]));
        assert_refused(&out, &format!("run on a Cluster via {url}"));
    }
    let mut status = bare_distlock();
    status.env("DISTLOCK_REDIS_URL", cluster.seeds_url());
    assert_refused(
        &run(status.args(["status", "-k", &key])),
        "status on a Cluster",
    );
    let ours = cluster.key_on(0, "v1");
    let mut list = bare_distlock();
    list.env("DISTLOCK_REDIS_URL", cluster.seeds_url());
    let out = run(list.args(["acquire", "-k", &ours, "--ttl", "60s"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut list = bare_distlock();
    list.env("DISTLOCK_REDIS_URL", cluster.url_of_node(1));
    let rows = listed(&run(list.arg("list")));
    let mut keys: Vec<&str> = rows.iter().map(|(k, _, _)| k.as_str()).collect();
    keys.sort();
    let mut expected = [ours.as_str(), key.as_str()];
    expected.sort();
    assert_eq!(keys, expected, "{rows:?}");
    assert!(
        rows.iter()
            .any(|(k, holder, _)| *k == key && holder == "(protocol 3)"),
        "{rows:?}"
    );
    assert_eq!(snapshot(cluster.node(owner)), before);
}
