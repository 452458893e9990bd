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
    mut cmd: Command,
    node: &dyn Fn() -> &'a Redis,
    key: &str,
    place: i64,
    log: &str,
    tag: &str,
    extra: &[&str],
) -> Child {
    let mut child = cmd
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

/// A distlock command whose SIGINT is at its default (a test harness may run tests with SIGINT
/// ignored, which survives exec).
fn with_default_sigint(mut cmd: Command) -> Command {
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
///   fence is left;
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
    let mut w = cmd()
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
