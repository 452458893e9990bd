//! What a run costs Redis, counted, not timed: requests hold on a loaded machine where
//! milliseconds do not. Each test watches a server with `MONITOR` (every request of every
//! client, in the order the server ran them) and fails when a path makes more requests than it
//! does today, so that a change that adds a round trip to the path that matters shows in CI.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::fixtures::*;

/// A `redis-cli MONITOR` of `redis`, writing to a file; ready once the server said OK.
struct Monitor {
    child: Child,
    log: std::path::PathBuf,
    _dir: Scratch,
}

/// One request a client sent, as MONITOR shows it (scripts' own calls are left out).
#[derive(Debug)]
struct Request {
    /// When the server ran it (seconds, the server's clock).
    at: f64,
    /// The client's address (one per connection).
    client: String,
    /// The command and its arguments.
    words: Vec<String>,
}

impl Request {
    fn command(&self) -> String {
        self.words
            .first()
            .cloned()
            .unwrap_or_default()
            .to_uppercase()
    }

    /// How many keys a script declares (EVALSHA SHA N ...).
    fn keys(&self) -> usize {
        self.words.get(2).and_then(|n| n.parse().ok()).unwrap_or(0)
    }

    /// A script of the lock declaring all its keys (acquire, release, inspect), as opposed to
    /// a renewal, which declares two.
    fn is_full_script(&self) -> bool {
        self.command() == "EVALSHA" && self.keys() >= 9
    }

    /// A script's first argument (the token, for the lock's scripts).
    fn token(&self) -> Option<&str> {
        self.words.get(3 + self.keys()).map(String::as_str)
    }

    /// An acquire attempt's mode (its fourth argument): "try", "join", ...
    fn mode(&self) -> Option<&str> {
        self.words.get(3 + self.keys() + 3).map(String::as_str)
    }

    /// A release: its second argument says whether the work succeeded ("0" or "1"), where an
    /// acquire's is its claim in ms (then come the history's field/value pairs, if any).
    fn is_release(&self) -> bool {
        self.words
            .get(3 + self.keys() + 1)
            .is_some_and(|w| w == "0" || w == "1")
    }
}

impl Monitor {
    fn start(redis: &Redis) -> Monitor {
        let dir = Scratch::new();
        let log = dir.path("monitor");
        let child = Command::new("redis-cli")
            .args(["-p", &redis.port().to_string(), "MONITOR"])
            .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_until("MONITOR to be on", || {
            std::fs::read_to_string(&log).is_ok_and(|t| t.starts_with("OK"))
        });
        Monitor {
            child,
            log,
            _dir: dir,
        }
    }

    /// Every request seen so far, in the server's order.
    fn requests(&self) -> Vec<Request> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (at, rest) = line.split_once(" [")?;
                let at = at.parse().ok()?;
                let (client, words) = rest.split_once("] ")?;
                let client = client.split_whitespace().nth(1)?.to_owned();
                if client == "lua" {
                    return None;
                }
                let words: Vec<String> = words
                    .split("\" \"")
                    .map(|w| w.trim_matches('"').to_owned())
                    .collect();
                Some(Request { at, client, words })
            })
            .collect()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait until the monitor has seen a request for which `seen` holds.
fn wait_for(monitor: &Monitor, what: &str, seen: impl Fn(&Request) -> bool) {
    wait_until(what, || monitor.requests().iter().any(&seen));
}

/// An uncontended `run -- true` makes two requests: the acquire and the release, on one
/// connection. (A run that lasts past a quarter of a second also starts listening for a
/// replacement: a SUBSCRIBE and a renewal, on connections of their own; `true` never does on
/// a healthy machine, and on a slow one the count says so.)
#[test]
fn an_uncontended_run_makes_two_requests() {
    uncontended_run_makes_two_requests(&[]);
}

/// The same with a lock history kept (`--history`): the acquire and release scripts record the
/// events themselves, so the run makes the same two requests, and the history is there.
#[test]
fn an_uncontended_run_with_history_makes_two_requests() {
    let redis = uncontended_run_makes_two_requests(&["--history", "1h"]);
    let events: i64 = redis.cmd(&["XLEN", &format!("{}:history", lock_key("cost"))]);
    assert_eq!(events, 2, "acquired and released");
}

fn uncontended_run_makes_two_requests(extra: &[&str]) -> Redis {
    let redis = Redis::start();
    // Load the scripts first: a server that never saw them asks for them once (NOSCRIPT).
    let out = run(distlock(&redis).args(["run", "-k", "warm", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let monitor = Monitor::start(&redis);
    let started = Instant::now();
    let out = run(distlock(&redis)
        .args(extra)
        .args(["run", "-k", "cost", "--", "true"]));
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The release is the last: wait until MONITOR has written it.
    wait_for(&monitor, "the release", |r| {
        r.is_full_script() && r.is_release() && r.words.iter().any(|w| w == "distlock:{cost}")
    });
    let requests = monitor.requests();
    let full: Vec<&Request> = requests.iter().filter(|r| r.is_full_script()).collect();
    assert_eq!(full.len(), 2, "acquire and release: {requests:?}");
    assert_eq!(full[0].client, full[1].client, "one connection");
    if took < Duration::from_millis(250) {
        assert_eq!(requests.len(), 2, "{requests:?}");
    } else {
        // The listener (a SUBSCRIBE and a renewal) may have started: nothing else.
        assert!(
            requests.len() <= 4
                && requests
                    .iter()
                    .all(|r| r.is_full_script() || r.command() == "SUBSCRIBE" || r.keys() == 2),
            "{requests:?}"
        );
    }
    redis
}

/// A contended hand-off: between the holder's release and the waiter's command, the waiter
/// makes one request (it takes up the lock handed to it); the holder's release is the other.
/// Two round trips from one command's end to the next one's start.
#[test]
fn a_hand_off_takes_two_round_trips() {
    let requests = hand_off(Watch::FromTheLine);
    // From the holder's release (its last full script) to the waiter's command.
    let echo = requests.iter().position(|r| r.command() == "ECHO").unwrap();
    let holder = requests[..echo]
        .iter()
        .rev()
        .find(|r| r.is_full_script() && r.is_release())
        .map(|r| r.client.clone())
        .expect("the holder's release");
    let release_at = requests[..echo]
        .iter()
        .rposition(|r| r.client == holder && r.is_full_script())
        .unwrap();
    let between: Vec<&Request> = requests[release_at + 1..echo]
        .iter()
        .filter(|r| r.is_full_script())
        .collect();
    assert_eq!(
        between.len(),
        1,
        "the waiter's take-up alone: {:?}",
        &requests[release_at..=echo]
    );
}

/// A contended acquisition, from the waiter's start to its command (issue 26): one connection.
/// The attempt that joins the line ("join"); then, per look, one write of a wait on its
/// doorbell (BLPOP) with a "refresh" behind it, the first with a HELLO in front (which tells
/// whether the server lends idle clients a shared read buffer; Redis 7.0 here does not, so the
/// refresh rides behind every wait), never closer than 1.5 s apart while in line; the
/// holder's release pushes onto the doorbell, and the refresh queued behind the wait takes the
/// lock up: after the release, nothing else. No SUBSCRIBE, no "try".
#[test]
fn a_contended_acquisition_joins_then_waits_on_its_doorbell() {
    let requests = hand_off(Watch::FromTheStart);
    let echo = requests.iter().position(|r| r.command() == "ECHO").unwrap();
    let before = &requests[..echo];
    // The holder: the token of the release before the command (its renewals carry it too).
    let release_at = before
        .iter()
        .rposition(|r| r.is_full_script() && r.is_release())
        .expect("the holder's release");
    let holder = before[release_at].token().unwrap().to_owned();
    let holder_client = before[release_at].client.clone();
    let waiters: Vec<(usize, &Request)> = before
        .iter()
        .enumerate()
        .filter(|(_, r)| r.client != holder_client && r.command() != "ECHO")
        .filter(|(_, r)| match r.command().as_str() {
            "EVALSHA" => r.token() != Some(holder.as_str()),
            "SUBSCRIBE" => !r.words.iter().any(|w| w.ends_with(&holder)),
            // (The test's own requests, ZCARD of the line and its clients' CLIENT SETINFO on
            // a newer server, are left out.)
            command => command != "ZCARD" && command != "CLIENT",
        })
        .collect();
    let summary = |rs: &[(usize, &Request)]| -> Vec<String> {
        rs.iter()
            .map(|(_, r)| format!("{} {} {}", r.client, r.command(), r.mode().unwrap_or("")))
            .collect()
    };
    let first_client = waiters.first().map(|(_, r)| r.client.clone());
    assert!(
        waiters
            .iter()
            .all(|(_, r)| Some(&r.client) == first_client.as_ref()),
        "one connection: {:?}",
        summary(&waiters)
    );
    let (in_line, taking): (Vec<_>, Vec<_>) = waiters.iter().partition(|(i, _)| *i < release_at);
    let scripts: Vec<&Request> = in_line
        .iter()
        .map(|(_, r)| *r)
        .filter(|r| r.is_full_script())
        .collect();
    assert_eq!(
        scripts.first().and_then(|r| r.mode()),
        Some("join"),
        "{:?}",
        summary(&waiters)
    );
    assert!(
        scripts[1..].iter().all(|r| r.mode() == Some("refresh")),
        "join, then refresh: {:?}",
        summary(&waiters)
    );
    for pair in scripts[1..].windows(2) {
        assert!(
            pair[1].at - pair[0].at >= 1.5,
            "a place refreshed sooner than every 2 s: {:?}",
            summary(&waiters)
        );
    }
    // The server asked once, right after joining, in the write of the first wait (one
    // connection: MONITOR shows the commands of one write in order, nothing between them).
    let hellos: Vec<usize> = in_line
        .iter()
        .enumerate()
        .filter(|(_, (_, r))| r.command() == "HELLO")
        .map(|(at, _)| at)
        .collect();
    assert_eq!(
        hellos,
        [1],
        "one HELLO, after the join: {:?}",
        summary(&waiters)
    );
    assert_eq!(
        in_line.get(2).map(|(_, r)| r.command()).as_deref(),
        Some("BLPOP"),
        "the HELLO in the write of the first wait: {:?}",
        summary(&waiters)
    );
    // Each wait on the doorbell is followed by its refresh: one BLPOP per refresh, and the last
    // BLPOP's refresh is the take-up, after the release.
    let blpops = in_line
        .iter()
        .filter(|(_, r)| r.command() == "BLPOP")
        .count();
    assert_eq!(
        blpops,
        scripts.len(),
        "a BLPOP per refresh, the last one's refresh after the release: {:?}",
        summary(&waiters)
    );
    assert_eq!(
        in_line.len(),
        scripts.len() + blpops + 1,
        "nothing else: {:?}",
        summary(&waiters)
    );
    assert_eq!(
        taking
            .iter()
            .map(|(_, r)| format!("{} {}", r.command(), r.mode().unwrap_or("")))
            .collect::<Vec<_>>(),
        vec!["EVALSHA refresh".to_owned()],
        "after the release, the take-up alone: {:?}",
        summary(&waiters)
    );
}

/// When a hand-off's MONITOR starts.
#[derive(PartialEq)]
enum Watch {
    /// Before the waiter starts: its whole acquisition is seen.
    FromTheStart,
    /// Once the waiter is in line: the release and what follows.
    FromTheLine,
}

/// A holder, a waiter that takes its place in line, the holder's release: the requests MONITOR
/// saw until the waiter's command, which says it started by a request of its own (ECHO, seen in
/// order with the rest). Both runs succeed.
fn hand_off(watch: Watch) -> Vec<Request> {
    let redis = Redis::start();
    // Load the scripts first: a server that never saw them asks for them once (NOSCRIPT).
    let out = run(distlock(&redis).args(["run", "-k", "warm", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let dir = Scratch::new();
    let first = hold_until_released(distlock(&redis), &dir, "handoff", &[]);
    let early = (watch == Watch::FromTheStart).then(|| Monitor::start(&redis));
    let port = redis.port().to_string();
    let waiter = spawn(distlock(&redis).args([
        "run",
        "-k",
        "handoff",
        "--",
        "redis-cli",
        "-p",
        &port,
        "ECHO",
        "started",
    ]));
    wait_until("the waiter to take its place in line", || {
        redis.in_line("handoff") == 1
    });
    // Released once the waiter waits on its doorbell: the sequence is then always the same
    // (a release between its join and its first wait would be found by that wait at once).
    wait_until("the waiter to wait on its doorbell", || {
        redis.blocked_on_doorbell()
    });
    let monitor = early.unwrap_or_else(|| Monitor::start(&redis));
    release(&dir);
    assert_eq!(finish(first).status.code(), Some(0));
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    wait_for(&monitor, "the waiter's command", |r| r.command() == "ECHO");
    monitor.requests()
}

/// Issue 24: the first in line looks at the holder's expiry (a dead holder's waiter starts
/// within 0.3 s of it), the others only keep their place; no waiter sends more than one script
/// per 2 s while the holder renews a 3 s TTL (every second, the default third), which leaves
/// at least 2 s on the lock at any look. Three waiters, watched for three scripts each.
#[test]
fn a_line_costs_each_waiter_at_most_one_script_per_2s() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let holder = hold_until_released(distlock(&redis), &dir, "budget", &["--ttl", "3s"]);
    let waiters: Vec<Child> = (1..=3)
        .map(|place| {
            let waiter = distlock(&redis)
                .args(["run", "-k", "budget", "--", "true"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            wait_until("the waiter to take its place in line", || {
                redis.in_line("budget") == place
            });
            waiter
        })
        .collect();
    let monitor = Monitor::start(&redis);
    let by_waiter = || {
        let mut scripts: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
        for r in monitor.requests() {
            if r.is_full_script() && matches!(r.mode(), Some("join" | "refresh")) {
                let token = r.token().unwrap_or_default().to_owned();
                scripts.entry(token).or_default().push(r.at);
            }
        }
        scripts
    };
    wait_until("three scripts of each waiter", || {
        let scripts = by_waiter();
        scripts.len() == 3 && scripts.values().all(|at| at.len() >= 3)
    });
    for (token, at) in by_waiter() {
        for pair in at.windows(2) {
            assert!(
                pair[1] - pair[0] >= 1.5,
                "waiter {token}: scripts {:.3}s apart: {at:?}",
                pair[1] - pair[0]
            );
        }
    }
    release(&dir);
    assert_eq!(finish(holder).status.code(), Some(0));
    for waiter in waiters {
        assert_eq!(finish(waiter).status.code(), Some(0));
    }
}
