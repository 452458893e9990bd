//! Issue 26's guarantees on every topology: one server (where `doorbell.rs` and `queue.rs` do
//! not cover them already), Sentinel and Cluster. FIFO and no lost wake-up with several
//! waiters, a short `--ttl`, a waiter killed first in line skipped within the take-up window, a
//! waiter killed while blocked leaving nothing behind, signals and `--wait` ending a blocked
//! wait, failovers and slot migrations during blocked waits, and one connection per waiter
//! after its reads timed out.
//!
//! Every bound is measured from the event the waiters react to (a kill, a signal, a release),
//! never from the test's start; every wait is bounded (`BOUND`).

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::fixtures::topology::{Cluster, Sentinel};
use crate::fixtures::*;

/// distlock pointed at `url` (a topology's).
fn at(url: &str) -> Command {
    let mut cmd = bare_distlock();
    cmd.env("DISTLOCK_REDIS_URL", url);
    cmd
}

/// A waiter whose command appends `start TAG NS` and `end TAG NS` (CLOCK_REALTIME in ns) to
/// `log`; returns once it holds place `place` in line on `node`.
fn waiter<'a>(
    cmd: Command,
    node: &dyn Fn() -> &'a Redis,
    key: &str,
    place: i64,
    log: &str,
    tag: &str,
    extra: &[&str],
) -> Child {
    let mut child = reaped(cmd)
        .args(["run", "-k", key])
        .args(extra)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "echo \"start {tag} $(date +%s%N)\" >> {log}; sleep 0.05; \
             echo \"end {tag} $(date +%s%N)\" >> {log}"
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_while_running(
        &format!("{tag} to take place {place} in line"),
        &mut child,
        || node().in_line(key) == place,
    );
    child
}

/// The runs in `log` (as `waiter` writes it): `(tag, start ns, end ns)` in order, asserting
/// that each run started after the previous one ended (one holder at a time).
fn runs_of(log: &str) -> Vec<(String, u128, u128)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert!(lines.len() % 2 == 0, "an unfinished run: {text}");
    let mut runs = Vec::new();
    for pair in lines.chunks(2) {
        let (start, end) = (&pair[0], &pair[1]);
        assert!(
            start[0] == "start" && end[0] == "end" && start[1] == end[1],
            "two runs overlap: {text}"
        );
        runs.push((
            start[1].to_owned(),
            start[2].parse().unwrap(),
            end[2].parse().unwrap(),
        ));
    }
    runs
}

/// The keys of `key`'s lock left on `node` (every key with its hash tag).
fn keys_left(node: &Redis, key: &str) -> Vec<String> {
    let mut keys: Vec<String> = node.cmd(&["KEYS", &format!("*{{{key}}}*")]);
    keys.sort();
    keys
}

/// Wait until only the fence counter of `key` (which outlives every lock, by design) is left on
/// `node`; returns how long that took.
fn wait_only_fence_left(node: &Redis, key: &str) -> Duration {
    let start = Instant::now();
    let fence = vec![format!("{}:fence", lock_key(key))];
    wait_until(&format!("only the fence of {key} to be left"), || {
        keys_left(node, key) == fence
    });
    start.elapsed()
}

/// How many TCP connections process `pid` has open to any of `ports` (its socket fds, matched
/// against /proc/net/tcp by inode).
fn connections_of(pid: u32, ports: &[u16]) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    let inodes: Vec<String> = fds
        .flatten()
        .filter_map(|fd| {
            let target = std::fs::read_link(fd.path()).ok()?;
            let target = target.to_str()?;
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let remote = fields
                .get(2)
                .and_then(|r| r.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            fields.get(3) == Some(&"01")
                && remote.is_some_and(|p| ports.contains(&p))
                && fields.get(9).is_some_and(|i| inodes.iter().any(|n| n == i))
        })
        .count()
}

/// `cmd`, SIGKILLed when the test's thread ends (PR_SET_PDEATHSIG): a failing test leaves no
/// waiter behind (a test that passes has waited for every one).
fn reaped(mut cmd: Command) -> Command {
    // SAFETY: the closure makes one async-signal-safe call (prctl(2)) and allocates nothing,
    // as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd
}

/// A distlock command whose SIGINT is at its default (a test harness may run tests with SIGINT
/// ignored, which survives exec).
fn with_default_sigint(cmd: Command) -> Command {
    let mut cmd = reaped(cmd);
    // SAFETY: the closure makes one async-signal-safe call (signal(2)) and allocates nothing,
    // as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd
}

/// What `guarantees` measured, printed for the report (read through `Debug` alone).
#[derive(Debug)]
#[allow(dead_code)]
struct Measured {
    /// The longest gap from one run's end to the next one's start.
    longest_gap: Duration,
    /// From the SIGKILL of the waiter first in line to the start of the next one's command.
    dead_head: Duration,
    /// From the end of the line to only the fence left.
    lapse: Duration,
    /// From the SIGKILL of a waiter blocked behind another to its place gone.
    place_lapsed: Duration,
    /// From each signal to the waiter's exit.
    signals: Vec<(Signal, Duration)>,
    /// How long `--wait 1s` waited.
    gave_up: Duration,
}

/// Issue 26's guarantees for a lock `key` on `node`, through distlock commands from `cmd`:
///
/// * FIFO and no lost wake-up: four waiters (two with `--ttl 1s`, where the take-up is sent
///   after the pop instead of behind it) run in the order they joined, one at a time, each
///   started within 1.5 s of the previous end (a lost wake-up waits for the next look, 2 s);
/// * a waiter SIGKILLed while first in line is skipped within the take-up window (3 s) and a
///   little: the next one runs within 3.5 s of the kill;
/// * a waiter killed while blocked leaves no place and no grant: once the line is done, only the
///   fence is left; one killed behind another loses its place within 10 s of the kill (6 s
///   after its last refresh, which was up to 2 s before the kill, noticed by the next script
///   of the line, up to 2 s later), the lock still held;
/// * SIGTERM and SIGINT during the blocked read end the wait within 1 s of the signal, and the
///   waiter leaves the line;
/// * `--wait 1s` gives up after 1 s (and under 2.5 s), leaving the line.
fn guarantees<'a>(cmd: &dyn Fn() -> Command, node: &dyn Fn() -> &'a Redis, key: &str) -> Measured {
    let dir = Scratch::new();
    let log = dir.str("log");
    let holder = Holder::new(cmd(), &dir, key).hold();
    let short = ["--ttl", "1s"];
    let waiters: Vec<Child> = (1..=4)
        .map(|i| {
            let extra: &[&str] = if i % 2 == 0 { &short } else { &[] };
            waiter(cmd(), node, key, i, &log, &format!("w{i}"), extra)
        })
        .collect();
    wait_until("the waiters to block on their doorbells", || {
        blocked_clients(node()) >= 4
    });
    holder.finish();
    for w in waiters {
        let out = finish(w);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let runs = runs_of(&log);
    let tags: Vec<&str> = runs.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(tags, ["w1", "w2", "w3", "w4"], "FIFO");
    let longest_gap = runs
        .windows(2)
        .map(|w| Duration::from_nanos((w[1].1.saturating_sub(w[0].2)) as u64))
        .max()
        .unwrap();
    assert!(
        longest_gap < Duration::from_millis(1500),
        "a hand-off took {longest_gap:?}: a lost wake-up?"
    );

    // A waiter killed while first in line (blocked on its doorbell), with one behind it.
    let dir = Scratch::new();
    let log = dir.str("log");
    let holder = Holder::new(cmd(), &dir, key).hold();
    let head = waiter(cmd(), node, key, 1, &log, "head", &[]);
    let next = waiter(cmd(), node, key, 2, &log, "next", &[]);
    wait_until("both to block on their doorbells", || {
        blocked_clients(node()) >= 2
    });
    kill(Pid::from_raw(head.id() as i32), Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    finish(head);
    holder.finish();
    let out = finish(next);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let runs = runs_of(&log);
    assert_eq!(runs.len(), 1, "only the live waiter ran");
    let killed_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .saturating_sub(killed.elapsed());
    let dead_head = Duration::from_nanos(runs[0].1 as u64).saturating_sub(killed_at);
    assert!(
        dead_head < Duration::from_millis(3500),
        "the next waiter ran {dead_head:?} after the head was killed"
    );
    let lapse = wait_only_fence_left(node(), key);

    // A waiter killed while blocked behind another: its place lapses while the lock is still
    // held (at most 6 s after its last refresh, noticed at the next script of the line).
    let dir = Scratch::new();
    let log = dir.str("log");
    let holder = Holder::new(cmd(), &dir, key).hold();
    let head = waiter(cmd(), node, key, 1, &log, "head", &[]);
    let behind = waiter(cmd(), node, key, 2, &log, "behind", &[]);
    wait_until("both to block on their doorbells", || {
        blocked_clients(node()) >= 2
    });
    kill(Pid::from_raw(behind.id() as i32), Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    finish(behind);
    wait_until("the killed waiter's place to lapse", || {
        node().in_line(key) == 1
    });
    let place_lapsed = killed.elapsed();
    assert!(
        place_lapsed < Duration::from_secs(10),
        "the killed waiter's place lapsed {place_lapsed:?} after the kill"
    );
    holder.finish();
    let out = finish(head);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let runs = runs_of(&log);
    assert_eq!(runs.len(), 1, "only the live waiter ran");
    wait_only_fence_left(node(), key);

    // Signals during the blocked read, then --wait.
    let dir = Scratch::new();
    let holder = Holder::new(cmd(), &dir, key).hold();
    let mut signals = Vec::new();
    for signal in [Signal::SIGTERM, Signal::SIGINT] {
        let mut w = with_default_sigint(cmd())
            .args(["run", "-k", key, "--", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_while_running("the waiter to block on its doorbell", &mut w, || {
            node().in_line(key) == 1 && node().blocked_on_doorbell()
        });
        let sent = Instant::now();
        kill(Pid::from_raw(w.id() as i32), signal).unwrap();
        let out = finish(w);
        let took = sent.elapsed();
        assert_eq!(signal_of(&out), Some(signal as i32), "{}", stderr(&out));
        assert!(
            took < Duration::from_secs(1),
            "{signal}: the wait ended {took:?} after the signal"
        );
        assert_eq!(node().in_line(key), 0, "{signal}: still in line");
        signals.push((signal, took));
    }
    let started = Instant::now();
    let out = run(cmd().args(["run", "-k", key, "--wait", "1s", "--", "true"]));
    let gave_up = started.elapsed();
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(
        gave_up >= Duration::from_secs(1) && gave_up < Duration::from_millis(2500),
        "--wait 1s gave up after {gave_up:?}"
    );
    assert_eq!(node().in_line(key), 0, "--wait: still in line");
    holder.finish();
    wait_only_fence_left(node(), key);
    Measured {
        longest_gap,
        dead_head,
        lapse,
        place_lapsed,
        signals,
        gave_up,
    }
}

/// How many clients of `node` are blocked in BLPOP (waiters on their doorbells).
fn blocked_clients(node: &Redis) -> usize {
    let clients: String = node.cmd(&["CLIENT", "LIST"]);
    clients
        .lines()
        .filter(|l| l.contains(" flags=b ") && l.contains(" cmd=blpop"))
        .count()
}

#[test]
fn the_guarantees_hold_on_one_server() {
    let redis = Redis::start();
    let measured = guarantees(&|| distlock(&redis), &|| &redis, "bell-one");
    eprintln!("one server: {measured:?}");
}

#[test]
fn the_guarantees_hold_behind_sentinel() {
    let topo = Sentinel::start(1);
    let url = topo.url();
    let primary = topo.node(topo.primary());
    let measured = guarantees(&|| at(&url), &|| primary, "bell-sentinel");
    eprintln!("sentinel: {measured:?}");
}

#[test]
fn the_guarantees_hold_on_a_cluster() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.seeds_url();
    let key = cluster.key_on(1, "bell-cluster");
    let node = cluster.node(cluster.node_for_slot(Cluster::slot_of(&lock_key(&key))));
    let measured = guarantees(&|| at(&url), &|| node, &key);
    eprintln!("cluster: {measured:?}");
}

/// A waiter whose reads time out (the server stopped for longer than `--redis-timeout`) parks
/// each connection whose request got no reply; once the server answers again, it closes them
/// all before its next waits on the doorbell: one connection per waiter again, within a few
/// waits (each probe gives a parked connection 50 ms; one still blocked in a late BLPOP answers
/// at the next). `ports` are the data nodes' ports; the waiter must park `parked` connections
/// while `stall(true)` has stopped the lock's node (`stall(false)` resumes it). Returns the
/// most connections the waiter had, and how long after the resumption it had one again.
fn one_connection_after_timeouts<'a>(
    cmd: &dyn Fn() -> Command,
    node: &dyn Fn() -> &'a Redis,
    ports: &[u16],
    key: &str,
    parked: usize,
    stall: &mut dyn FnMut(bool),
) -> (usize, Duration) {
    let dir = Scratch::new();
    let holder = Holder::new(cmd(), &dir, key).args(&["--ttl", "60s"]).hold();
    let mut w = reaped(cmd())
        .args(["--redis-timeout", "300ms", "run", "-k", key, "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_while_running("the waiter to block on its doorbell", &mut w, || {
        node().in_line(key) == 1 && node().blocked_on_doorbell()
    });
    let pid = w.id();
    assert_eq!(connections_of(pid, ports), 1, "one connection at first");
    stall(true);
    let mut most = 0;
    wait_while_running(&format!("the waiter to park {parked}"), &mut w, || {
        most = most.max(connections_of(pid, ports));
        most > parked
    });
    stall(false);
    let resumed = Instant::now();
    wait_while_running("the waiter to keep one connection", &mut w, || {
        connections_of(pid, ports) == 1 && node().blocked_on_doorbell()
    });
    let shed = resumed.elapsed();
    holder.finish();
    let out = finish(w);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (most, shed)
}

/// Stop or resume `node` (SIGSTOP, SIGCONT).
fn stall(node: &Redis, on: bool) {
    node.signal(if on { Signal::SIGSTOP } else { Signal::SIGCONT });
}

#[test]
fn a_waiter_keeps_one_connection_after_timeouts_on_one_server() {
    let redis = Redis::start();
    let (most, shed) = one_connection_after_timeouts(
        &|| distlock(&redis),
        &|| &redis,
        &[redis.port()],
        "bell-conns",
        3,
        &mut |on| stall(&redis, on),
    );
    eprintln!("one server: {most} connections at most, one again {shed:?} after SIGCONT");
}

/// Behind Sentinel, a primary without replicas: nothing to fail over to while it is stopped.
/// Only the wait's connection is parked there: a new connection is confirmed with `ROLE`,
/// which a stopped primary does not answer, so it is closed, not parked.
#[test]
fn a_waiter_keeps_one_connection_after_timeouts_behind_sentinel() {
    let topo = Sentinel::start(0);
    let url = topo.url();
    let primary = topo.node(topo.primary());
    let (most, shed) = one_connection_after_timeouts(
        &|| at(&url),
        &|| primary,
        &[primary.port()],
        "bell-conns",
        1,
        &mut |on| stall(primary, on),
    );
    eprintln!("sentinel: {most} connections at most, one again {shed:?} after SIGCONT");
}

/// On a Cluster without replicas: nothing to fail over to while the lock's node is stopped.
#[test]
fn a_waiter_keeps_one_connection_after_timeouts_on_a_cluster() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.seeds_url();
    let key = cluster.key_on(1, "bell-conns");
    let node = cluster.node(1);
    let ports: Vec<u16> = (0..3).map(|i| cluster.node(i).port()).collect();
    let (most, shed) =
        one_connection_after_timeouts(&|| at(&url), &|| node, &ports, &key, 3, &mut |on| {
            stall(node, on)
        });
    eprintln!("cluster: {most} connections at most, one again {shed:?} after SIGCONT");
}

/// The shell that logs a run as `waiter`'s command does (for a holder's `then`).
fn logged(tag: &str, log: &str) -> String {
    format!(
        "echo \"start {tag} $(date +%s%N)\" >> {log}; echo \"end {tag} $(date +%s%N)\" >> {log}"
    )
}

/// A holder of `key` (its run logged to `log` after its release) and `n` waiters behind it,
/// `w1`..`wN`, each blocked on its doorbell on `node`; `extra` are options of all, and
/// `holder_extra` of the holder alone.
fn line<'a>(
    cmd: &dyn Fn() -> Command,
    node: &dyn Fn() -> &'a Redis,
    key: &str,
    n: i64,
    dir: &Scratch,
    extra: &[&str],
    holder_extra: &[&str],
) -> (Holding, Vec<Child>) {
    let log = dir.str("log");
    let holder = Holder::new(cmd(), dir, key)
        .args(extra)
        .args(holder_extra)
        .then(&logged("holder", &log))
        .hold();
    let waiters: Vec<Child> = (1..=n)
        .map(|i| waiter(cmd(), node, key, i, &log, &format!("w{i}"), extra))
        .collect();
    wait_until("the waiters to block on their doorbells", || {
        blocked_clients(node()) >= n as usize
    });
    (holder, waiters)
}

/// Wait for the holder and the waiters to end (each must succeed); the order the runs took,
/// one at a time (`runs_of`), and when the last one ended.
fn served(holder: Holding, waiters: Vec<Child>, dir: &Scratch) -> (Vec<String>, Instant) {
    let out = holder.finish();
    assert_eq!(out.status.code(), Some(0), "holder: {}", stderr(&out));
    for (i, w) in waiters.into_iter().enumerate() {
        let out = finish(w);
        assert_eq!(out.status.code(), Some(0), "w{}: {}", i + 1, stderr(&out));
    }
    let done = Instant::now();
    let runs = runs_of(&dir.str("log"));
    (runs.into_iter().map(|(tag, _, _)| tag).collect(), done)
}

/// Three waiters blocked on their doorbells on the primary when `SENTINEL FAILOVER` promotes
/// the replica, and the holder's release right after: the waiters take the lock on the new
/// primary, one at a time, and nothing of the lock but its fence is left there.
#[test]
fn blocked_waiters_follow_a_sentinel_failover_and_a_release_right_after_it() {
    let mut topo = Sentinel::start(1);
    let url = topo.url();
    let key = "bell-sfo";
    let dir = Scratch::new();
    let old = topo.primary();
    let (holder, waiters) = line(&|| at(&url), &|| topo.node(old), key, 3, &dir, &[], &[]);
    wait_until("the line to be on the replica too", || {
        (0..2).all(|i| topo.node(i).in_line(key) == 3)
    });
    let fence = format!("{}:fence", lock_key(key));
    let before: i64 = topo.node(old).get(&fence).unwrap().parse().unwrap();
    let new = topo.failover();
    assert_ne!(new, old);
    let released = Instant::now();
    let (order, done) = served(holder, waiters, &dir);
    // The waiters' grants raised the fence on the new primary (the old one no longer
    // replicates to it: grants there would not).
    let after: i64 = topo.node(new).get(&fence).unwrap().parse().unwrap();
    assert!(
        after > before,
        "the fence on the new primary: {after} <= {before}"
    );
    eprintln!(
        "sentinel failover: order {order:?}, the line done {:?} after the release",
        done - released
    );
    assert_eq!(order, ["holder", "w1", "w2", "w3"]);
    wait_only_fence_left(topo.node(new), key);
}

/// A coordinated failover of the lock's shard (`CLUSTER FAILOVER`) while three waiters are
/// blocked on their doorbells on its primary: the demoted primary unblocks them, they follow
/// the slot to the new primary, keep their places, and are served in order, one at a time.
#[test]
fn blocked_waiters_follow_a_cluster_shard_failover() {
    let mut cluster = Cluster::start(3, 1);
    let url = cluster.seeds_url();
    let key = cluster.key_on(0, "bell-cfo");
    let dir = Scratch::new();
    let (holder, waiters) = line(&|| at(&url), &|| cluster.node(0), &key, 3, &dir, &[], &[]);
    let new = cluster.failover(0);
    let failed_over = Instant::now();
    wait_until("the waiters to block on the new primary", || {
        blocked_clients(cluster.node(new)) >= 3
    });
    let rejoined = failed_over.elapsed();
    let released = Instant::now();
    let (order, done) = served(holder, waiters, &dir);
    eprintln!(
        "cluster failover: blocked again on the new primary {rejoined:?} after it, the line \
         done {:?} after the release",
        done - released
    );
    assert_eq!(order, ["holder", "w1", "w2", "w3"]);
    wait_only_fence_left(cluster.node(new), &key);
}

/// Nothing of the lock `key` on node `i` of `cluster` (`only_fence`: but its fence).
fn assert_left_on(cluster: &Cluster, i: usize, key: &str, only_fence: bool) {
    let want: Vec<String> = if only_fence {
        vec![format!("{}:fence", lock_key(key))]
    } else {
        Vec::new()
    };
    assert_eq!(keys_left(cluster.node(i), key), want, "node {i}");
}

/// A quick slot migration (IMPORTING/MIGRATING, every key of the slot by MIGRATE, SETSLOT NODE)
/// of the lock's slot while two waiters are blocked on their doorbells on the source: they are
/// unblocked (MOVED), follow the slot to the target with their places, and are served in
/// order after the release, one at a time.
#[test]
fn blocked_waiters_follow_a_quick_slot_migration() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.seeds_url();
    let key = cluster.key_on(0, "bell-qmig");
    let slot = Cluster::slot_of(&key);
    let dir = Scratch::new();
    let (holder, waiters) = line(&|| at(&url), &|| cluster.node(0), &key, 2, &dir, &[], &[]);
    let moved = cluster.migrate_slot(slot, 0, 1);
    let migrated = Instant::now();
    assert!(moved >= 6, "{moved} keys moved");
    wait_until("the waiters to block on the target", || {
        blocked_clients(cluster.node(1)) >= 2
    });
    let rejoined = migrated.elapsed();
    let released = Instant::now();
    let (order, done) = served(holder, waiters, &dir);
    eprintln!(
        "quick migration: blocked on the target {rejoined:?} after it, the line done {:?} \
         after the release",
        done - released
    );
    assert_eq!(order, ["holder", "w1", "w2"]);
    assert_left_on(&cluster, 1, &key, true);
    assert_left_on(&cluster, 0, &key, false);
}

/// A slot migration stopped half-way while two waiters are blocked on their doorbells on the
/// source: the slot opens, the lock key moves alone (the rest stays behind: scripts are told
/// TRYAGAIN), the holder releases then, with its keys split, and the other keys move one
/// MIGRATE at a time before the slot closes. Every run succeeds, in order, one at a time, and
/// nothing but the fence is left on the target, nothing on the source.
#[test]
fn blocked_waiters_and_a_release_while_the_lock_keys_are_split() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.seeds_url();
    let key = cluster.key_on(0, "bell-smig");
    let lock = lock_key(&key);
    let slot = Cluster::slot_of(&key);
    let dir = Scratch::new();
    let (holder, waiters) = line(&|| at(&url), &|| cluster.node(0), &key, 2, &dir, &[], &[]);
    cluster.begin_migration(slot, 0, 1);
    let tryagain = cluster.tryagain_count(0);
    cluster.migrate_these(0, 1, std::slice::from_ref(&lock));
    wait_until("a script to be told TRYAGAIN", || {
        cluster.tryagain_count(0) > tryagain
    });
    // The release, mid-migration (the holder's command ends once it reads its fifo).
    let mut holder = holder;
    holder.release();
    let released = Instant::now();
    let mut moved = 1;
    loop {
        let keys: Vec<String> =
            cluster
                .node(0)
                .cmd(&["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "1"]);
        if keys.is_empty() {
            break;
        }
        cluster.migrate_these(0, 1, &keys);
        moved += 1;
        assert!(released.elapsed() < BOUND, "the slot still has keys");
    }
    cluster.end_migration(slot, 0, 1);
    let migrated = released.elapsed();
    let (order, done) = served(holder, waiters, &dir);
    eprintln!(
        "split keys: {moved} keys moved one by one in {migrated:?} after the release, {} \
         TRYAGAIN in all, the line done {:?} after the release",
        cluster.tryagain_count(0),
        done - released
    );
    assert_eq!(order, ["holder", "w1", "w2"]);
    assert_left_on(&cluster, 1, &key, true);
    assert_left_on(&cluster, 0, &key, false);
}

/// A slow slot migration (2,000 other keys in the lock's slot, moved one MIGRATE per key, as
/// `redis-cli --cluster reshard --cluster-pipeline 1` does) while two waiters (`--ttl 3s`)
/// are blocked on their doorbells on the source, and the holder's release when half of the
/// keys have moved: every run succeeds, in order, one at a time, and nothing of the lock but
/// its fence is left, on the target.
#[test]
fn blocked_waiters_and_a_release_during_a_slow_slot_migration() {
    let cluster = Cluster::start(3, 0);
    let url = cluster.seeds_url();
    let key = cluster.key_on(0, "bell-slow");
    let slot = Cluster::slot_of(&key);
    let filled: i64 = cluster.node(0).cmd(&[
        "EVAL",
        "local tag = string.match(KEYS[1], '{.*}') \
         for i = 1, 2000 do redis.call('SET', 'other' .. tag .. i, 'x') end return 1",
        "1",
        &lock_key(&key),
    ]);
    assert_eq!(filled, 1);
    let dir = Scratch::new();
    let ttl = ["--ttl", "3s"];
    let (mut holder, waiters) = line(&|| at(&url), &|| cluster.node(0), &key, 2, &dir, &ttl, &[]);
    cluster.begin_migration(slot, 0, 1);
    let began = Instant::now();
    let mut moved = 0;
    let mut released = None;
    loop {
        let keys: Vec<String> =
            cluster
                .node(0)
                .cmd(&["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "1"]);
        if keys.is_empty() {
            break;
        }
        cluster.migrate_these(0, 1, &keys);
        moved += 1;
        if moved == 1000 {
            holder.release();
            released = Some(Instant::now());
        }
        assert!(began.elapsed() < BOUND, "the slot still has keys");
    }
    cluster.end_migration(slot, 0, 1);
    let migration = began.elapsed();
    let released = released.unwrap();
    let (order, done) = served(holder, waiters, &dir);
    eprintln!(
        "slow migration: {moved} keys in {migration:?}, {} TRYAGAIN, the line done {:?} after \
         the release",
        cluster.tryagain_count(0),
        done - released
    );
    assert_eq!(order, ["holder", "w1", "w2"]);
    let left: Vec<String> = keys_left(cluster.node(1), &key)
        .into_iter()
        .filter(|k| !k.starts_with("other"))
        .collect();
    assert_eq!(left, [format!("{}:fence", lock_key(&key))]);
    assert_left_on(&cluster, 0, &key, false);
}

/// The primary SIGKILLed while three waiters are blocked on their doorbells on it (the
/// automatic path: the sentinels judge it down, elect, promote the replica): the waiters' reads
/// fail, they find the new primary through the sentinels, and after the holder's release there
/// (its lock replicated, its TTL longer than the failover) they are served one at a time.
#[test]
fn blocked_waiters_follow_the_primary_killed_behind_sentinel() {
    let mut topo = Sentinel::start(1);
    let url = topo.url();
    let key = "bell-skill";
    let dir = Scratch::new();
    let old = topo.primary();
    // The holder's TTL outlasts the automatic failover (3 s to judge the primary down, then
    // an election and a promotion; see sentinel.rs), which its renewals must survive.
    let (holder, waiters) = line(
        &|| at(&url),
        &|| topo.node(old),
        key,
        3,
        &dir,
        &[],
        &["--ttl", "20s", "--renew-every", "1s"],
    );
    let token = topo.node(old).get(&lock_key(key)).unwrap();
    let mut holder = holder;
    wait_renewed_on(topo.node(old), &lock_key(key), holder.child());
    wait_until("the line and the lock to be on the replica too", || {
        (0..2).all(|i| {
            topo.node(i).in_line(key) == 3
                && topo.node(i).get(&lock_key(key)) == Some(token.clone())
        })
    });
    let new = topo.kill_primary();
    let promoted = Instant::now();
    wait_until("the waiters to block on the new primary", || {
        blocked_clients(topo.node(new)) >= 3
    });
    let rejoined = promoted.elapsed();
    let released = Instant::now();
    let (order, done) = served(holder, waiters, &dir);
    eprintln!(
        "sentinel primary killed: blocked on the new primary {rejoined:?} after its promotion, \
         the line done {:?} after the release, in the order {order:?}",
        done - released
    );
    // One at a time (`runs_of`), each once, the holder first. Not necessarily in the order
    // they joined: the promotion can come later than a place lapses (6 s after its last
    // refresh), and a waiter whose place lapsed joins again at the end of the line.
    assert_eq!(order[0], "holder", "{order:?}");
    let mut waiters = order[1..].to_vec();
    waiters.sort();
    assert_eq!(waiters, ["w1", "w2", "w3"], "{order:?}");
    wait_only_fence_left(topo.node(new), key);
}
