//! Issue 28: `distlock check` (the monitoring-plugins convention: one line on stdout, exit 0 OK,
//! 1 WARNING, 2 CRITICAL, 3 UNKNOWN) and `distlock stats --timeline`, against real servers.

use std::process::{Command, Output};

use crate::fixtures::*;

/// `distlock check` with `args` on `redis`: its state, its one line.
fn check(mut cmd: Command, args: &[&str]) -> (i32, String, Output) {
    let out = run(cmd.arg("check").args(args));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        text.lines().count(),
        1,
        "one line: {text:?} {}",
        stderr(&out)
    );
    (
        out.status.code().unwrap_or(-1),
        text.trim_end().to_owned(),
        out,
    )
}

/// How long the lock `key` has been held, on the Redis server's clock (`status --json`).
fn held_for_ms(redis: &Redis, key: &str) -> u64 {
    let out = run(distlock(redis).args(["status", "--json", "-k", key]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["held_for_ms"].as_u64().unwrap_or(0)
}

/// OK, WARNING and CRITICAL on a held lock with a waiter: the thresholds are chosen against
/// the hold as Redis measures it (read first, never guessed from a sleep).
#[test]
fn check_exits_ok_warning_and_critical_with_the_thresholds_crossed() {
    let redis = Redis::start();
    let (code, line, _) = check(distlock(&redis), &["-k", "ck", "-w", "1h", "-c", "2h"]);
    assert_eq!(code, 0, "{line}");
    assert!(
        line.starts_with("DISTLOCK OK: lock \"ck\" is free | held=0s;3600;7200;0 "),
        "{line}"
    );

    let dir = Scratch::new();
    let holder = hold_until_released(distlock(&redis), &dir, "ck", &["--note", "deploy v42"]);
    let waiter = spawn(distlock(&redis).args(["run", "-k", "ck", "--", "true"]));
    wait_until("the waiter in line", || redis.in_line("ck") == 1);
    // Held for 20ms or more, as Redis counts it: -w 10ms must warn, -c 15ms be critical.
    wait_until("a hold of 20ms", || held_for_ms(&redis, "ck") >= 20);

    let (code, line, _) = check(distlock(&redis), &["-k", "ck", "-w", "1h", "-c", "2h"]);
    assert_eq!(code, 0, "{line}");
    assert!(
        line.contains("held ") && line.contains("(deploy v42)"),
        "{line}"
    );
    assert!(line.contains("; 1 waiting, oldest "), "{line}");
    assert!(
        line.contains(" holders=1;;;0;1 waiters=1;;;0 oldest_wait="),
        "{line}"
    );

    let (code, line, _) = check(distlock(&redis), &["-k", "ck", "-w", "10ms", "-c", "1h"]);
    assert_eq!(code, 1, "{line}");
    assert!(
        line.starts_with("DISTLOCK WARNING: ") && line.contains("(over -w 10ms)"),
        "{line}"
    );

    let (code, line, _) = check(distlock(&redis), &["-k", "ck", "-w", "10ms", "-c", "15ms"]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("DISTLOCK CRITICAL: ") && line.contains("(over -c 15ms)"),
        "{line}"
    );
    assert!(line.contains("| held="), "{line}");

    // The waiter's wait, as Redis counts it, past --crit-wait.
    wait_until("a wait of 20ms", || {
        let out = run(distlock(&redis).args(["status", "--json", "-k", "ck"]));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["waiting"][0]["waited_ms"].as_u64().unwrap_or(0) >= 20
    });
    let (code, line, _) = check(
        distlock(&redis),
        &["-k", "ck", "--warn-wait", "1ms", "--crit-wait", "10ms"],
    );
    assert_eq!(code, 2, "{line}");
    assert!(line.contains("(over --crit-wait 10ms)"), "{line}");

    release(&dir);
    assert_eq!(finish(holder).status.code(), Some(0));
    assert_eq!(finish(waiter).status.code(), Some(0));
}

/// UNKNOWN (3), never 64, 65 or 69: Redis down, a key that is not a lock, bad arguments (a bad
/// duration, an unknown flag, a missing --key, a warning above its critical), each with its
/// `DISTLOCK UNKNOWN: ` line on stdout and the `distlock:` line on stderr.
#[test]
fn check_is_unknown_on_redis_down_a_non_lock_key_and_bad_arguments() {
    let mut redis = Redis::start();
    let _: i64 = redis.cmd(&["HSET", &lock_key("hash"), "field", "value"]);
    let cases: [&[&str]; 5] = [
        &["-k", "hash"],
        &["-k", "ck", "-w", "30"],
        &["-k", "ck", "--bogus"],
        &["-w", "1m"],
        &["-k", "ck", "-w", "1h", "-c", "1m"],
    ];
    for args in cases {
        let (code, line, out) = check(distlock(&redis), args);
        assert_eq!(code, 3, "{args:?}: {line} {}", stderr(&out));
        assert!(line.starts_with("DISTLOCK UNKNOWN: "), "{args:?}: {line}");
        assert!(
            stderr(&out).starts_with("distlock: "),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // The same mistakes in another subcommand keep their usual code.
    let out = run(distlock(&redis).args(["status", "-k", "ck", "--bogus"]));
    assert_eq!(out.status.code(), Some(64));
    // A global option's value that reads "check" does not make a check.
    let out = run(distlock(&redis).args(["--prefix", "check", "status", "--bogus"]));
    assert_eq!(out.status.code(), Some(64));
    redis.kill();
    let (code, line, _) = check(distlock(&redis), &["-k", "ck"]);
    assert_eq!(code, 3, "{line}");
    assert!(line.contains("cannot read lock"), "{line}");
}

/// `--crit-since-success` reads the lock's history: UNKNOWN without one, CRITICAL when only
/// failures are recorded, OK once a run succeeded.
#[test]
fn check_since_success_reads_the_history() {
    let redis = Redis::start();
    let args = ["-k", "job", "--crit-since-success", "1h"];
    let (code, line, _) = check(distlock(&redis), &args);
    assert_eq!(code, 3, "{line}");
    assert!(line.contains("no history"), "{line}");
    let out = run(distlock(&redis).args(["--history", "1h", "run", "-k", "job", "--", "false"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let (code, line, _) = check(distlock(&redis), &args);
    assert_eq!(code, 2, "{line}");
    assert!(line.contains("no successful run recorded"), "{line}");
    let out = run(distlock(&redis).args(["run", "-k", "job", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (code, line, _) = check(distlock(&redis), &args);
    assert_eq!(code, 0, "{line}");
    assert!(
        line.contains("last success ") && line.contains(" since_success="),
        "{line}"
    );
    assert!(line.ends_with(";;3600;0"), "{line}");
    // A release --failed is no success.
    let acquired = run(distlock(&redis).args(["acquire", "-k", "job"]));
    let token = String::from_utf8_lossy(&acquired.stdout).trim().to_owned();
    let out = run(distlock(&redis).args(["release", "-k", "job", "--failed", "--token", &token]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(distlock(&redis).args(["log", "--json", "-k", "job", "-n", "1"]));
    let last: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(last["outcome"], "failed", "{last}");
}

/// `stats --timeline` on a recorded history: a run released, a waiter that gave up, a hold
/// broken (whose holder then reports it lost: drawn once, as broken), in a chart of the width
/// asked for, ASCII in the C locale and Unicode blocks in a UTF-8 one.
#[test]
fn timeline_draws_a_recorded_history() {
    let redis = Redis::start();
    let h = || {
        let mut cmd = distlock(&redis);
        cmd.args(["--history", "1h"]);
        cmd
    };
    let out = run(h().args(["run", "-k", "tl", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let dir = Scratch::new();
    let holder = hold_until_released(h(), &dir, "tl", &[]);
    let out = run(h().args(["run", "-k", "tl", "--wait", "200ms", "--", "true"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let out = run(h().args(["break", "-k", "tl", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(finish(holder).status.code(), Some(124));
    let last_kind = || {
        let out = run(distlock(&redis).args(["log", "--json", "-k", "tl", "-n", "1"]));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v["event"].as_str().unwrap_or_default().to_owned()
    };
    wait_until("the holder's lost report", || last_kind() == "lost");
    let out = run(distlock(&redis).args(["log", "--json", "-k", "tl", "-n", "1"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let host = v["host"].as_str().unwrap().to_owned();

    let chart = |locale: &str| {
        let out = run(distlock(&redis)
            .env("LC_ALL", locale)
            .env_remove("LC_CTYPE")
            .env("LANG", "C")
            .args(["stats", "-k", "tl", "--timeline", "--width", "60"]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let ascii = chart("C");
    assert!(ascii.is_ascii(), "{ascii}");
    assert!(ascii.starts_with("\"tl\"  "), "{ascii}");
    assert!(ascii.lines().all(|l| l.len() <= 60), "{ascii}");
    let lanes: Vec<&str> = ascii
        .lines()
        .filter(|l| l.starts_with(&host[..host.len().min(13)]))
        .collect();
    assert_eq!(lanes.len(), 1, "one lane, this host's:\n{ascii}");
    assert!(
        lanes[0].contains('#') && lanes[0].ends_with('!') && !lanes[0].contains('x'),
        "{ascii}"
    );
    assert!(
        ascii.contains(" |") && ascii.ends_with("+ held at most (expired)\n"),
        "{ascii}"
    );

    let unicode = chart("C.UTF-8");
    assert!(
        unicode.contains('█') && unicode.contains(" → ") && unicode.contains("░ waiting"),
        "{unicode}"
    );
    assert!(
        unicode.lines().all(|l| l.chars().count() <= 60),
        "{unicode}"
    );
    assert_eq!(
        unicode.lines().count(),
        ascii.lines().count(),
        "{unicode}{ascii}"
    );

    // Mistakes are usage errors: no key, a width below 40, with --json.
    for args in [
        &["stats", "--timeline"][..],
        &["stats", "-k", "tl", "--timeline", "--width", "39"],
        &["stats", "-k", "tl", "--timeline", "--json"],
        &["stats", "-k", "tl", "--width", "60"],
    ] {
        let out = run(distlock(&redis).args(args));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
    }
}

/// Over a Redlock of 3: the history read as a majority recorded it; a split (no token on a
/// majority) warns; a majority down is UNKNOWN.
#[test]
fn check_on_a_redlock_warns_on_a_split_and_is_unknown_without_a_majority() {
    use crate::fixtures::topology::Primaries;
    let mut nodes = Primaries::start(3);
    let urls = nodes.urls();
    let redlock = || {
        let mut cmd = bare_distlock();
        for url in &urls {
            cmd.arg("--redis").arg(url);
        }
        cmd
    };
    let out = run(redlock().args(["--history", "1h", "run", "-k", "job", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (code, line, _) = check(
        redlock(),
        &["-k", "job", "-w", "1h", "--crit-since-success", "1h"],
    );
    assert_eq!(code, 0, "{line}");
    assert!(line.contains("is free; last success "), "{line}");

    for (i, token) in [(0, "token-a-0000"), (1, "token-b-1111")] {
        let _: () = nodes
            .node(i)
            .cmd(&["SET", &lock_key("sp"), token, "PX", "60000"]);
    }
    let (code, line, _) = check(redlock(), &["-k", "sp"]);
    assert_eq!(code, 1, "{line}");
    assert!(
        line.starts_with("DISTLOCK WARNING: lock \"sp\" is split"),
        "{line}"
    );

    nodes.kill(1);
    nodes.kill(2);
    let (code, line, _) = check(redlock(), &["-k", "job"]);
    assert_eq!(code, 3, "{line}");
    assert!(line.starts_with("DISTLOCK UNKNOWN: "), "{line}");
}

/// On a Cluster (through a node that does not hold the key's slot) and through Sentinel, as
/// `status` reads them: the hold, and the history for --crit-since-success.
#[test]
fn check_follows_a_cluster_and_a_sentinel() {
    use crate::fixtures::topology::{Cluster, Sentinel};
    let at = |url: &str| {
        let mut cmd = bare_distlock();
        cmd.env("DISTLOCK_REDIS_URL", url);
        cmd
    };
    let cluster = Cluster::start(3, 0);
    let key = cluster.key_on(1, "job");
    let sentinel = Sentinel::start(0);
    for url in [cluster.url_of_node(2), sentinel.url()] {
        let out = run(at(&url).args(["--history", "1h", "run", "-k", &key, "--", "true"]));
        assert_eq!(out.status.code(), Some(0), "{url}: {}", stderr(&out));
        let args = ["-k", &key, "-c", "1h", "--crit-since-success", "1h"];
        let (code, line, _) = check(at(&url), &args);
        assert_eq!(code, 0, "{url}: {line}");
        assert!(line.contains(" is free; last success "), "{url}: {line}");
        let dir = Scratch::new();
        let holder = hold_until_released(at(&url), &dir, &key, &[]);
        let (code, line, _) = check(at(&url), &["-k", &key, "-c", "0s"]);
        assert!(
            line.contains(" held ") && line.contains("holders=1;"),
            "{url}: {line}"
        );
        // Held 0 ms exactly is not over -c 0s; any longer is.
        assert!(code == 2 || line.contains("held=0s;"), "{url}: {line}");
        release(&dir);
        assert_eq!(finish(holder).status.code(), Some(0));
    }
}
