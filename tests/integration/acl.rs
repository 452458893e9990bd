//! Issue 24: distlock sends nothing that the documented ACL denies. Every command runs as a user
//! with exactly the rights docs/protocol.md lists for one server (read from the page), and the
//! server's `ACL LOG`, where Redis records every command, key or channel it denied, must stay
//! empty: a denied command that distlock shrugs off (a probe, an optional diagnostic) is still a
//! security entry in an operator's log. On a Cluster, `list` (the one command that looks for
//! the Cluster's other primaries) likewise, as the guide's Cluster user.

use std::process::{Command, Output, Stdio};

use crate::fixtures::topology::Cluster;
use crate::fixtures::*;

const USER: &str = "locker";
const PASSWORD: &str = "Locker-pw-3d81";

/// distlock at `url` as the documented user.
fn as_user(url: &str) -> Command {
    let mut cmd = bare_distlock();
    cmd.env("DISTLOCK_REDIS_URL", with_user(url, USER, PASSWORD));
    cmd
}

/// Run to completion and expect `code`.
fn expect(cmd: &mut Command, code: i32, what: &str) -> Output {
    let out = run(cmd);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
    out
}

/// One server: run (with a history), a waiter in line and a polling one, a `--limit 2`
/// semaphore, status and list (text and JSON), acquire/renew/release through an env file,
/// break (and the lost report of the broken run), a shared key's reader and writer, lock sets
/// (one with a shared key), log and stats; then nothing was denied.
#[test]
fn every_command_of_the_documented_acl_user_leaves_the_acl_log_empty() {
    let acls = documented_acls();
    let redis = Redis::options().user(USER, PASSWORD, &acls.server).start();
    let url = redis.url();
    let with_history = || {
        let mut cmd = as_user(&url);
        cmd.args(["--history", "1h"]);
        cmd
    };

    // A holder, a waiter in line (notify: subscribed) and one that polls.
    let dir = Scratch::new();
    let holder = Holder::new(with_history(), &dir, "k").hold();
    let waiters: Vec<_> = [&[][..], &["--wait-mode", "spin"][..]]
        .iter()
        .enumerate()
        .map(|(i, extra)| {
            let waiter = spawn(
                as_user(&url)
                    .args(["run", "-k", "k", "--wait", "20s"])
                    .args(*extra)
                    .args(["--", "true"]),
            );
            wait_until("the waiter in line", || redis.in_line("k") == i as i64 + 1);
            waiter
        })
        .collect();
    expect(as_user(&url).args(["status", "-k", "k"]), 0, "status");
    expect(
        as_user(&url).args(["status", "-k", "k", "--json"]),
        0,
        "status --json",
    );

    // A semaphore of 2: one holds, another takes the second slot.
    let sem_dir = Scratch::new();
    let sem = Holder::new(with_history(), &sem_dir, "sem")
        .args(&["--limit", "2"])
        .hold();
    expect(
        with_history().args(["run", "-k", "sem", "--limit", "2", "--", "true"]),
        0,
        "run --limit 2",
    );
    let out = expect(as_user(&url).arg("list"), 0, "list");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("k\t") && listed.contains("sem\t"),
        "{listed}"
    );
    expect(as_user(&url).args(["list", "--json"]), 0, "list --json");
    assert_eq!(sem.finish().status.code(), Some(0));

    // The release hands the lock to the waiters, one after the other.
    assert_eq!(holder.finish().status.code(), Some(0));
    for waiter in waiters {
        let out = finish(waiter);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }

    // Across CI steps: acquire into an env file, then renew and release from it.
    let ci = Scratch::new();
    expect(
        with_history()
            .args(["acquire", "-k", "ci", "--ttl", "20s", "--env-file"])
            .arg(ci.path("lock.env")),
        0,
        "acquire --env-file",
    );
    let mut steps = Command::new("sh");
    steps
        .args([
            "-ec",
            "set -a; . ./lock.env; set +a; distlock renew --ttl 30s; distlock release",
        ])
        .env_clear()
        .env("PATH", path_with_distlock())
        .env("DISTLOCK_REDIS_URL", with_user(&url, USER, PASSWORD))
        .current_dir(ci.0.path())
        .stdin(Stdio::null());
    expect(&mut steps, 0, "renew and release from the env file");
    assert!(!redis.exists(&lock_key("ci")));

    // break: the broken run ends with 124, and a copy of it reports the loss into the history.
    let victim_dir = Scratch::new();
    let victim = hold_until_released(with_history(), &victim_dir, "b", &[]);
    expect(
        as_user(&url).args(["break", "-k", "b", "--yes"]),
        0,
        "break",
    );
    release(&victim_dir);
    assert_eq!(finish(victim).status.code(), Some(124));
    let history = format!("{}:history", lock_key("b"));
    wait_until("the loss reported into the history", || {
        let last: Vec<(String, Vec<String>)> =
            redis.cmd(&["XREVRANGE", &history, "+", "-", "COUNT", "1"]);
        last.first()
            .is_some_and(|(_, fields)| fields.get(1).is_some_and(|e| e == "lost"))
    });

    // Shared keys and lock sets (issue 27): a reader holds, a writer waits in line behind it,
    // status shows both; then a set of two keys, one of them shared, and a set of two readers.
    let rw_dir = Scratch::new();
    let reader = Holder::new(with_history(), &rw_dir, "rw")
        .args(&["--shared"])
        .hold();
    let writer = spawn(with_history().args(["run", "-k", "rw", "--wait", "20s", "--", "true"]));
    wait_until("the writer in line", || redis.in_line("rw") == 1);
    expect(
        as_user(&url).args(["status", "-k", "rw", "--json"]),
        0,
        "status of a shared key",
    );
    assert_eq!(reader.finish().status.code(), Some(0));
    let out = finish(writer);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    expect(
        with_history().args([
            "run",
            "-k",
            "set-b",
            "-k",
            "rw",
            "--shared-key",
            "rw",
            "--",
            "true",
        ]),
        0,
        "a set with a shared key",
    );
    expect(
        with_history().args(["run", "-k", "set-b", "-k", "rw", "--shared", "--", "true"]),
        0,
        "a set of readers",
    );

    for args in [
        &["log"][..],
        &["log", "-k", "k", "--json"],
        &["stats"],
        &["stats", "-k", "b", "--json"],
    ] {
        let out = expect(as_user(&url).args(args), 0, &args.join(" "));
        assert!(!out.stdout.is_empty(), "{args:?} printed nothing");
    }

    assert_no_acl_denials(&redis, "the documented one-server user");
}

/// A Cluster, as the guide's Cluster user: `list` through a plain URL of one node, and through
/// the seeds, finds the locks of every primary and is denied nothing on any node.
#[test]
fn list_on_a_cluster_as_the_documented_acl_user_leaves_the_acl_logs_empty() {
    let acls = documented_acls();
    let cluster = Cluster::start_with(3, 0, Redis::options().user(USER, PASSWORD, &acls.cluster));
    let keys: Vec<String> = (0..3).map(|i| cluster.key_on(i, "each")).collect();
    for key in &keys {
        expect(
            as_user(&cluster.seeds_url()).args(["acquire", "-k", key, "--ttl", "60s"]),
            0,
            "acquire",
        );
    }
    for url in [cluster.url_of_node(0), cluster.seeds_url()] {
        let out = expect(as_user(&url).arg("list"), 0, &format!("list via {url}"));
        let listed = String::from_utf8_lossy(&out.stdout);
        for key in &keys {
            assert!(listed.contains(&format!("{key}\t")), "via {url}: {listed}");
        }
    }
    for i in 0..cluster.len() {
        assert_no_acl_denials(cluster.node(i), &format!("the Cluster user, node {i}"));
    }
}
