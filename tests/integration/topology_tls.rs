//! Issue 10: TLS and an ACL user on every topology. Every server speaks TLS only (replication,
//! the sentinels' links and the cluster bus included), and distlock logs in as a user with
//! exactly the rights the documentation lists for the topology (docs/protocol.md and the
//! guide's topology sections), read from those pages: so a right the code needs and the
//! documentation forgets fails here, and so does a command the code sends that the rights
//! deny (the servers' `ACL LOG` stays empty). Each test also checks that no
//! password shows in any output (`-v` included), and that a wrong password ends distlock with 69
//! and an authentication message, at once, with nothing written.
//!
//! The servers' `default` user stays open: the fixtures administer the servers with it. distlock
//! never falls back to it (a failed AUTH is fatal), which the wrong-password cases check too.
//!
//! One test per topology: a Sentinel deployment costs about 1.3s to start and a cluster 2.1s,
//! so each test runs every check against the one it started.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::fixtures::topology::{Cluster, Primaries, Sentinel};
use crate::fixtures::*;

const USER: &str = "locker";
const PASSWORD: &str = "Locker-pw-7f3a";
/// The sentinels' own user, for the `sentinel_username`/`sentinel_password` parameters.
const SENTINEL_USER: &str = "watcher";
const SENTINEL_PASSWORD: &str = "Watcher-pw-2c9e";
const WRONG: &str = "Not-the-pw-5e1b";

/// A wrong password must be reported at once: well within one `--redis-timeout` (2s).
const AUTH_BOUND: Duration = Duration::from_secs(2);

/// distlock at `url` (one URL, or several separated by spaces), trusting `pki`'s CA, with
/// `-v`: the most it ever says, where a password would show if it could.
fn at(url: &str, pki: &Pki) -> Command {
    let mut cmd = bare_distlock();
    cmd.env("DISTLOCK_REDIS_URL", url)
        .env("DISTLOCK_TLS_CA", pki.dir.path("ca.crt"))
        .arg("-v");
    cmd
}

/// No password, right or wrong, in anything distlock wrote.
fn assert_no_password(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for secret in [PASSWORD, SENTINEL_PASSWORD, WRONG] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "a password shows:\n{stdout}\n{stderr}"
        );
    }
}

/// Run to completion; check the exit code and that no password shows.
fn expect(cmd: &mut Command, code: i32) -> Output {
    let out = run(cmd);
    assert_no_password(&out);
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Wait until `condition` holds while `child` runs; fail at once with its stderr if it ends.
fn wait_running(child: &mut Child, what: &str, mut condition: impl FnMut() -> bool) {
    wait_until(what, || {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            if let Some(pipe) = child.stderr.as_mut() {
                let _ = std::io::Read::read_to_string(pipe, &mut err);
            }
            panic!("distlock ended ({status}) before {what}: {err}");
        }
        condition()
    });
}

/// A `run` of `key` whose command says it holds the lock and waits for `let_go`.
fn hold(cmd: Command, dir: &Scratch, key: &str) -> Holding {
    Holder::new(cmd, dir, key).stdout_piped().hold()
}

/// End the command of `hold`; its run must end with 0.
fn let_go(holder: Holding) {
    let out = holder.finish();
    assert_no_password(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A waiter for `key` (notify mode: subscribed over TLS as the ACL user).
fn waiter(cmd: &mut Command, key: &str) -> Child {
    cmd.args(["run", "-k", key, "--wait", "20s", "--", "true"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The waiter got the lock once it was let go, woken by the release.
fn assert_woken(waiter: Child) {
    assert_woken_output(&finish(waiter));
}

/// The same, from the waiter's output.
fn assert_woken_output(out: &Output) {
    assert_no_password(out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    assert!(
        stderr(out).contains("release notification received"),
        "{}",
        stderr(out)
    );
}

/// `cmd` fails at once with 69 and an authentication message, runs nothing and shows no
/// password.
fn assert_refused(cmd: &mut Command) -> Output {
    let started = Instant::now();
    let out = expect(cmd.args(["run", "-k", "refused", "--", "echo", "ran"]), 69);
    assert!(started.elapsed() < AUTH_BOUND, "{:?}", started.elapsed());
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("authentication failed"),
        "{}",
        stderr(&out)
    );
    // The hint shows the URL form the user gave (every URL here is a TLS one).
    assert!(
        stderr(&out).contains("://[USER]:PASSWORD@HOST")
            && stderr(&out).contains("rediss")
            && !stderr(&out).contains("redis://[USER]"),
        "{}",
        stderr(&out)
    );
    out
}

/// Redlock over three TLS primaries (`rediss://` URLs), as a user with the one-server ACL:
/// a run holds the same token on a majority of the nodes; `status` and `list` see it; a waiter
/// is woken by the release; a wrong password is refused.
#[test]
fn redlock_over_tls_as_the_documented_acl_user() {
    let pki = pki();
    let acls = documented_acls();
    let nodes = Primaries::start_with(
        3,
        Redis::options()
            .tls(&pki)
            .user(USER, PASSWORD, &acls.server),
    );
    let urls = |password: &str| {
        (nodes.urls().iter())
            .map(|url| with_user(url, USER, password))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(urls(PASSWORD).starts_with("rediss://"));
    let url = urls(PASSWORD);
    let dir = Scratch::new();
    let holder = hold(at(&url, &pki), &dir, "rl");
    // The same token on a majority (a node slower than --node-timeout may have missed it).
    let tokens: Vec<String> = (0..3)
        .filter_map(|i| nodes.node(i).get(&lock_key("rl")))
        .collect();
    assert!(tokens.len() >= 2, "{tokens:?}");
    assert!(tokens.iter().all(|t| *t == tokens[0]), "{tokens:?}");
    let out = expect(at(&url, &pki).args(["status", "-k", "rl"]), 0);
    assert!(stdout(&out).contains("is held"), "{}", stdout(&out));
    let out = expect(at(&url, &pki).arg("list"), 0);
    assert!(stdout(&out).contains("rl\t"), "{}", stdout(&out));
    // The waiter's messages go to a file: it is let go only once its first attempt found the
    // lock busy (a Redlock keeps no line to watch), so it must be woken by the release.
    let said = dir.path("waiter.err");
    let mut waiting = at(&url, &pki)
        .args(["run", "-k", "rl", "--wait", "20s", "--", "true"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&said).unwrap())
        .spawn()
        .unwrap();
    let channel = format!("{}:released", lock_key("rl"));
    wait_running(
        &mut waiting,
        "the waiter to find the lock busy and subscribe",
        || {
            std::fs::read_to_string(&said).is_ok_and(|t| t.contains("is busy; waiting"))
                && (0..3).any(|i| {
                    let subscribers: (String, i64) =
                        nodes.node(i).cmd(&["PUBSUB", "NUMSUB", &channel]);
                    subscribers.1 > 0
                })
        },
    );
    let_go(holder);
    let mut out = finish(waiting);
    out.stderr = std::fs::read(&said).unwrap();
    assert_woken_output(&out);
    for i in 0..3 {
        assert!(!nodes.node(i).exists(&lock_key("rl")), "node {i}");
    }
    expect(at(&url, &pki).args(["status", "-k", "rl"]), 1);
    for i in 0..3 {
        assert_no_acl_denials(nodes.node(i), &format!("Redlock node {i}"));
    }

    assert_refused(&mut at(&urls(WRONG), &pki));
    for i in 0..3 {
        assert!(!nodes.node(i).exists(&lock_key("refused")), "node {i}");
    }
}

/// Sentinel over TLS (`rediss+sentinel://`): data nodes with the guide's data-node ACL,
/// sentinels with the guide's sentinel ACL, as the same user or as a user of their own
/// (`sentinel_username`/`sentinel_password`). The lock lives on the primary; a wrong password
/// for the data nodes or for the sentinels is refused.
#[test]
fn sentinel_over_tls_as_the_documented_acl_users() {
    let pki = pki();
    let acls = documented_acls();
    let topo = Sentinel::start_with(
        1,
        (Redis::options().tls(&pki))
            .user(USER, PASSWORD, &acls.sentinel_data)
            .user("norole", PASSWORD, &acls.server),
        (Redis::options().tls(&pki))
            .user(USER, PASSWORD, &acls.sentinels)
            .user(SENTINEL_USER, SENTINEL_PASSWORD, &acls.sentinels),
    );
    let base = topo.url();
    assert!(base.starts_with("rediss+sentinel://"), "{base}");
    let own_as = |user: &str, password: &str, sentinel_password: &str| {
        format!(
            "{}?sentinel_username={SENTINEL_USER}&sentinel_password={sentinel_password}",
            with_user(&base, user, password)
        )
    };
    let own = |password: &str, sentinel_password: &str| own_as(USER, password, sentinel_password);
    let same = with_user(&base, USER, PASSWORD);
    let url = own(PASSWORD, SENTINEL_PASSWORD);
    let dir = Scratch::new();
    let holder = hold(at(&url, &pki), &dir, "sl");
    let primary = topo.primary();
    assert!(topo.node(primary).exists(&lock_key("sl")));
    let out = expect(at(&same, &pki).args(["status", "-k", "sl"]), 0);
    assert!(stdout(&out).contains("is held"), "{}", stdout(&out));
    let out = expect(at(&url, &pki).arg("list"), 0);
    assert!(stdout(&out).contains("sl\t"), "{}", stdout(&out));
    let mut waiting = waiter(&mut at(&same, &pki), "sl");
    wait_running(&mut waiting, "the waiter to take its place in line", || {
        topo.node(primary).in_line("sl") == 1
    });
    let_go(holder);
    assert_woken(waiting);
    assert!(!topo.node(primary).exists(&lock_key("sl")));
    for i in 0..topo.len() {
        assert_no_acl_denials(topo.node(i), &format!("Sentinel data node {i}"));
    }
    assert_no_acl_denials(topo.sentinel(0), "the sentinel");

    // Without `+role` on the data nodes: refused at once, the hint saying what is missing.
    let out = expect(
        at(&own_as("norole", PASSWORD, SENTINEL_PASSWORD), &pki)
            .args(["run", "-k", "r", "--", "true"]),
        69,
    );
    assert!(stderr(&out).contains("'role' command"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("behind Sentinel also +role"),
        "{}",
        stderr(&out)
    );

    // The message says who refused: the sentinels and the data nodes have credentials of
    // their own.
    let out = assert_refused(&mut at(&own(WRONG, SENTINEL_PASSWORD), &pki));
    assert!(
        stderr(&out).contains("the primary rediss://locker:***@"),
        "{}",
        stderr(&out)
    );
    let out = assert_refused(&mut at(&own(PASSWORD, WRONG), &pki));
    assert!(
        stderr(&out).contains("sentinel rediss://watcher:***@"),
        "{}",
        stderr(&out)
    );
    let out = assert_refused(&mut at(&with_user(&base, USER, WRONG), &pki));
    assert!(
        stderr(&out).contains("sentinel rediss://locker:***@"),
        "{}",
        stderr(&out)
    );
    assert!(!topo.node(primary).exists(&lock_key("refused")));
}

/// Redis Cluster over TLS (bus included), as a user with the guide's cluster ACL: by
/// `rediss+cluster://` seeds, and by a plain `rediss://` URL of another node than the lock's,
/// which must follow MOVED over TLS. `list` through one node finds the locks of every primary.
#[test]
fn cluster_over_tls_as_the_documented_acl_user() {
    let pki = pki();
    let acls = documented_acls();
    let cluster = Cluster::start_with(
        3,
        0,
        Redis::options()
            .tls(&pki)
            .user(USER, PASSWORD, &acls.cluster),
    );
    let seeds = with_user(&cluster.seeds_url(), USER, PASSWORD);
    assert!(seeds.starts_with("rediss+cluster://"), "{seeds}");
    let node0 = with_user(&cluster.url_of_node(0), USER, PASSWORD);
    let key = cluster.key_on(1, "moved");
    let dir = Scratch::new();
    // The plain URL names node 0; the lock's slot is on node 1.
    let holder = hold(at(&node0, &pki), &dir, &key);
    assert!(cluster.node(1).exists(&lock_key(&key)));
    let out = expect(at(&seeds, &pki).args(["status", "-k", &key]), 0);
    assert!(stdout(&out).contains("is held"), "{}", stdout(&out));
    let mut waiting = waiter(&mut at(&seeds, &pki), &key);
    wait_running(&mut waiting, "the waiter to take its place in line", || {
        cluster.node(1).in_line(&key) == 1
    });
    let_go(holder);
    assert_woken(waiting);
    assert!(!cluster.node(1).exists(&lock_key(&key)));

    // One lock per primary, through the seeds; `list` through node 0 alone finds them all.
    let keys: Vec<String> = (0..3).map(|i| cluster.key_on(i, "each")).collect();
    for (i, key) in keys.iter().enumerate() {
        expect(
            at(&seeds, &pki).args(["acquire", "-k", key, "--ttl", "60s"]),
            0,
        );
        assert!(cluster.node(i).exists(&lock_key(key)), "{key} on node {i}");
    }
    let out = expect(at(&node0, &pki).arg("list"), 0);
    for key in &keys {
        assert!(
            stdout(&out).contains(&format!("{key}\t")),
            "{}",
            stdout(&out)
        );
    }

    for i in 0..cluster.len() {
        assert_no_acl_denials(cluster.node(i), &format!("Cluster node {i}"));
    }

    assert_refused(&mut at(&with_user(&cluster.seeds_url(), USER, WRONG), &pki));
    assert_refused(&mut at(
        &with_user(&cluster.url_of_node(0), USER, WRONG),
        &pki,
    ));
    let owner = cluster.node_for_slot(Cluster::slot_of(&lock_key("refused")));
    assert!(!cluster.node(owner).exists(&lock_key("refused")));
}
