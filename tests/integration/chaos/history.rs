//! The history mode of the chaos test (`DISTLOCK_CHAOS_HISTORY=1`): every contender keeps a
//! lock history (`DISTLOCK_HISTORY`), and afterwards the recorded holds of each mutex, read
//! back with `distlock log --json` (over a Redlock: what a majority of the nodes recorded),
//! must never overlap. A hold runs from its `acquired` to the event that ended it: `released`
//! or `broken`, or, for a holder that vanished or lost its lock, `expired` (recorded by the
//! next taker, in the same script and before its own `acquired`) or `lost` (reported by the
//! holder, which removes the hold, when nobody took the lock before). On a Redlock a hold
//! starts when the last node of its majority recorded it, and ends when the first one
//! recorded its end: the holds checked are never longer than the real ones.
//!
//! A restart of the single server without persistence forgets the locks and their
//! histories: there, a collector ([`collect`]) reads the new events every 100ms during the
//! attack, so that a restart forgets at most the last moment's; holds whose start or end was
//! forgotten are not checked (counted in a note), and overlaps across a restart that forgot
//! the locks are excused, as in the main check. (A Redlock's persistent nodes forget nothing:
//! its histories are read once, at the end, with `distlock log`.)

use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use super::faults::Restart;
use super::plan::KEYS;
use crate::fixtures::*;

/// How long the contenders keep their histories, beyond the attack's length: long enough to
/// read them all at the end.
pub(super) const KEEP_AFTER_SECS: u64 = 120;

/// Whether `DISTLOCK_CHAOS_HISTORY=1`.
pub(super) fn enabled() -> bool {
    std::env::var("DISTLOCK_CHAOS_HISTORY").is_ok_and(|v| v.trim() == "1")
}

/// Whether `key` is a history key (the stream or its holds).
pub(super) fn is_history_key(key: &str) -> bool {
    key.ends_with(":history") || key.ends_with(":history:held")
}

/// One recorded hold of a mutex.
#[derive(Debug)]
struct Hold {
    token: String,
    start_ms: u64,
    end_ms: u64,
    ended_by: String,
}

/// Every event of `key`, as `distlock log --json` reads it from `urls`.
fn events(urls: &[String], key: &str) -> Vec<Value> {
    let mut cmd: Command = bare_distlock();
    cmd.env("DISTLOCK_REDIS_URL", urls.join(" "))
        .args(["log", "--json", "-k", key]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "log: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Read every new event of the mutexes on the server at `url` every 100ms until `stop`, as
/// JSON objects like `distlock log --json` prints (at_ms, event, key, token).
pub(super) fn collect(url: &str, stop: &AtomicBool) -> Vec<Value> {
    let mut events = Vec::new();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut con: Option<redis::Connection> = None;
    loop {
        // One last read after the stop.
        let last = stop.load(Ordering::SeqCst);
        if con.is_none() {
            con = super::monitor::connect(url);
        }
        if let Some(c) = con.as_mut() {
            for key in KEYS.iter().filter(|k| k.is_mutex()) {
                let stream = format!("{}:history", lock_key(key.name));
                let Ok(read) = entries(c, &stream) else {
                    con = None;
                    break;
                };
                for (id, event) in read {
                    if seen.insert((key.name.to_owned(), id)) {
                        events.push(event);
                    }
                }
            }
        }
        if last {
            return events;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The holds in `events` (oldest first), and how many could not be paired.
fn holds(events: &[Value]) -> (Vec<Hold>, usize) {
    let at = |e: &Value| e["at_ms"].as_u64().unwrap_or(0);
    let mut open: HashMap<String, u64> = HashMap::new();
    let mut holds = Vec::new();
    let mut unpaired = 0;
    for e in events {
        let token = e["token"].as_str().unwrap_or_default().to_owned();
        match e["event"].as_str().unwrap_or_default() {
            "acquired" => {
                // A Redlock's hold begins when its majority is complete.
                let start = e["last_at_ms"].as_u64().unwrap_or_else(|| at(e));
                if open.insert(token, start).is_some() {
                    unpaired += 1;
                }
            }
            kind @ ("released" | "broken" | "expired" | "lost") => match open.remove(&token) {
                Some(start_ms) => holds.push(Hold {
                    token,
                    start_ms,
                    end_ms: at(e),
                    ended_by: kind.to_owned(),
                }),
                // A lost holder whose end was recorded as expired already, or a start a
                // restart forgot.
                None if kind == "lost" => {}
                None => unpaired += 1,
            },
            _ => {}
        }
    }
    unpaired += open.len();
    (holds, unpaired)
}

/// The events of `stream` as XRANGE gives them, as JSON objects like `distlock log --json`
/// prints (at_ms, event, key, token, ...).
fn entries(con: &mut redis::Connection, stream: &str) -> redis::RedisResult<Vec<(String, Value)>> {
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query(con)?;
    Ok(entries
        .into_iter()
        .map(|(id, fields)| {
            let mut object = serde_json::Map::new();
            let at: u64 = id
                .split('-')
                .next()
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            object.insert("at_ms".into(), at.into());
            for (f, v) in fields {
                object.insert(f, v.into());
            }
            (id, Value::Object(object))
        })
        .collect())
}

/// Every event of `key` on the server at `url`, oldest first.
fn node_events(url: &str, key: &str) -> Vec<Value> {
    let mut con = redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .expect("a connection to read the history");
    entries(&mut con, &format!("{}:history", lock_key(key)))
        .expect("the history")
        .into_iter()
        .map(|(_, e)| e)
        .collect()
}

/// Check every mutex's recorded holds: (violations, notes). Each server's history is checked
/// on its own: a Redlock's node records what it granted, and its holds, like one server's,
/// must never overlap (a Redlock's majority holds then cannot either: two majorities share a
/// node). `collected`: what [`collect`] read during the attack (one server), else None (each
/// node is read now). On a Redlock, the note also says what `distlock log` shows (each event
/// once, as a majority recorded it). `restarts` excuse overlaps across a restart that forgot the
/// locks (`wall_ms_of` maps a monotonic time to the servers' clock, in ms).
pub(super) fn check(
    urls: &[String],
    collected: Option<&[Value]>,
    restarts: &[Restart],
    wall_ms_of: impl Fn(u64) -> u64,
) -> (Vec<String>, Vec<String>) {
    let (mut violations, mut notes) = (Vec::new(), Vec::new());
    for key in KEYS.iter().filter(|k| k.is_mutex()) {
        let per_node: Vec<Vec<Value>> = match collected {
            Some(all) => {
                let mut mine: Vec<Value> = all
                    .iter()
                    .filter(|e| e["key"] == key.name)
                    .cloned()
                    .collect();
                mine.sort_by_key(|e| e["at_ms"].as_u64().unwrap_or(0));
                vec![mine]
            }
            None => urls.iter().map(|u| node_events(u, key.name)).collect(),
        };
        let (mut checked, mut overlaps, mut excused, mut unpaired, mut count) = (0, 0, 0, 0, 0);
        let (mut lapsed, mut untaken) = (0, 0);
        let mut ends: HashMap<String, usize> = HashMap::new();
        for (node, events) in per_node.iter().enumerate() {
            count += events.len();
            for e in events {
                match (e["event"].as_str(), e["why"].as_str()) {
                    (Some("gave-up"), Some("lapsed")) => {
                        lapsed += 1;
                        // A place lasts 3s at least (6s, 3s for a waiter that polls): one that
                        // lapsed sooner was never a lapse.
                        let waited = e["waited_ms"].as_u64().or_else(|| {
                            e["waited_ms"].as_str().and_then(|w| w.parse::<u64>().ok())
                        });
                        if waited.is_none_or(|w| w < 3000) {
                            violations.push(format!(
                                "HISTORY: a lapsed place recorded after less than a place's length on {}: {e}",
                                key.name
                            ));
                        }
                    }
                    (Some("expired"), Some("not-taken-up")) => untaken += 1,
                    _ => {}
                }
            }
            let (mut holds, lone) = holds(events);
            unpaired += lone;
            checked += holds.len();
            holds.sort_by_key(|h| h.start_ms);
            for h in &holds {
                *ends.entry(h.ended_by.clone()).or_default() += 1;
            }
            let on = if urls.len() > 1 {
                format!(" (node {node})")
            } else {
                String::new()
            };
            for pair in holds.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                if b.start_ms >= a.end_ms {
                    continue;
                }
                let across_restart = restarts.iter().any(|r| {
                    let (from, to) = (wall_ms_of(r.kill_sent), wall_ms_of(r.up));
                    from <= b.start_ms + 1000 && a.start_ms <= to + 1000
                });
                if across_restart {
                    excused += 1;
                    continue;
                }
                overlaps += 1;
                violations.push(format!(
                    "HISTORY OVERLAP on {}{on}: hold {} [{}..{} {}] and hold {} from {} ({} ms before the first ended)",
                    key.name,
                    a.token,
                    a.start_ms,
                    a.end_ms,
                    a.ended_by,
                    b.token,
                    b.start_ms,
                    a.end_ms - b.start_ms
                ));
            }
        }
        let merged = if urls.len() > 1 {
            let shown = events(urls, key.name);
            let everywhere = shown
                .iter()
                .filter(|e| e["recorded_by"] == e["nodes"])
                .count();
            format!(
                "; distlock log shows {} events, {everywhere} of them recorded by every node",
                shown.len()
            )
        } else {
            String::new()
        };
        notes.push(format!(
            "history of {}: {count} events, {checked} holds checked ({ends:?}), {overlaps} \
             overlapping, {excused} excused by a restart, {unpaired} unpaired (forgotten by a \
             restart, or still open); {lapsed} waiters' places lapsed (gave-up), {untaken} \
             hand-offs never taken up{merged}",
            key.name,
        ));
    }
    (violations, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_pair_each_start_with_its_end() {
        let events: Vec<Value> = [
            r#"{"event":"acquired","token":"a","at_ms":1}"#,
            r#"{"event":"released","token":"a","at_ms":5}"#,
            r#"{"event":"acquired","token":"b","at_ms":6}"#,
            r#"{"event":"expired","token":"b","at_ms":9}"#,
            r#"{"event":"acquired","token":"c","at_ms":9,"last_at_ms":10}"#,
            r#"{"event":"lost","token":"b","at_ms":12}"#,
            r#"{"event":"lost","token":"c","at_ms":13}"#,
        ]
        .iter()
        .map(|s| serde_json::from_str(s).unwrap())
        .collect();
        let (holds, unpaired) = holds(&events);
        assert_eq!(unpaired, 0);
        let spans: Vec<(u64, u64)> = holds.iter().map(|h| (h.start_ms, h.end_ms)).collect();
        assert_eq!(spans, [(1, 5), (6, 9), (10, 13)]);
    }
}
