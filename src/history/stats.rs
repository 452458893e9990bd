//! `distlock stats`: per lock, how many events of each kind, and the wait and hold times as
//! p50, p95 and max (with a small text histogram of each on a terminal); or, with `--timeline`,
//! one lock as a chart ([`super::timeline`]).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use crate::error::Error;
use crate::exit::Exit;
use crate::lock::{LockName, Topology};
use crate::output::{Ev, Output};

use super::event::{Event, LAPSED, NOT_TAKEN_UP};
use super::read::{self, Query};
use super::time::rfc3339;
use super::timeline;

/// The kinds of event, in the order they are shown.
pub const KINDS: [&str; 7] = [
    "acquired",
    "released",
    "lost",
    "expired",
    "broken",
    "superseded",
    "gave-up",
];

/// The reasons counted apart, each of one kind of event (a `why` the scripts record): they are
/// shown beside that kind's count.
pub const REASONS: [(&str, &str, &str); 2] = [
    ("gave-up", LAPSED, "lapsed"),
    ("expired", NOT_TAKEN_UP, "never taken up"),
];

/// `distlock stats`, decided.
#[derive(Debug)]
pub struct StatsConfig {
    /// Where.
    pub topology: Topology,
    /// The key prefix.
    pub prefix: String,
    /// One lock, or every lock under the prefix.
    pub name: Option<LockName>,
    /// Only events at or after this time (ms since the epoch).
    pub since_ms: Option<u64>,
    /// One JSON object per lock.
    pub json: bool,
    /// `--timeline`: a chart of one lock, at this width (None: the terminal's, or 80).
    pub timeline: Option<Option<usize>>,
}

/// p50, p95 and max of some durations (nearest rank).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The samples, sorted.
    pub samples: Vec<u64>,
}

impl Summary {
    fn new(mut samples: Vec<u64>) -> Summary {
        samples.sort_unstable();
        Summary { samples }
    }

    /// The p-th percentile (nearest rank), None without samples.
    pub fn percentile(&self, p: u64) -> Option<u64> {
        let n = self.samples.len() as u64;
        if n == 0 {
            return None;
        }
        let rank = (p * n).div_ceil(100).max(1);
        self.samples.get(usize::try_from(rank - 1).ok()?).copied()
    }

    /// The largest sample.
    pub fn max(&self) -> Option<u64> {
        self.samples.last().copied()
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "count": self.samples.len(),
            "p50": self.percentile(50),
            "p95": self.percentile(95),
            "max": self.max(),
        })
    }

    fn words(&self) -> String {
        let d = |ms: Option<u64>| {
            ms.map_or("-".into(), |ms| {
                crate::text::duration(Duration::from_millis(ms))
            })
        };
        format!(
            "p50 {}  p95 {}  max {}  ({} sample{})",
            d(self.percentile(50)),
            d(self.percentile(95)),
            d(self.max()),
            self.samples.len(),
            if self.samples.len() == 1 { "" } else { "s" }
        )
    }

    /// A text histogram: up to 8 buckets of equal width from 0 to max, bars of `#`.
    fn histogram(&self, indent: &str) -> String {
        let Some(max) = self.max() else {
            return String::new();
        };
        let buckets = 8u64;
        let width = (max / buckets + 1).max(1);
        let mut counts = [0usize; 8];
        for s in &self.samples {
            counts[usize::try_from((s / width).min(buckets - 1)).unwrap_or(7)] += 1;
        }
        let most = counts.iter().copied().max().unwrap_or(1).max(1);
        let mut text = String::new();
        for (i, count) in counts.iter().enumerate() {
            let from = width * i as u64;
            let label = format!(
                "{}-{}",
                crate::text::duration(Duration::from_millis(from)),
                crate::text::duration(Duration::from_millis(from + width))
            );
            let bar = "#".repeat((count * 30).div_ceil(most));
            text.push_str(&format!("{indent}{label:>15} |{bar} {count}\n"));
        }
        text
    }
}

/// What one lock's events add up to.
#[derive(Debug, Default)]
pub struct LockStats {
    /// How many of each kind.
    pub counts: BTreeMap<String, usize>,
    /// How many of each kind and reason of [`REASONS`].
    pub reasons: BTreeMap<(String, String), usize>,
    /// How long each `acquired` waited.
    pub wait: Summary,
    /// How long each hold lasted (`released`, `lost`, `expired` — at most —, `broken`; not a
    /// lock handed over that was never taken up).
    pub hold: Summary,
    /// The first and last event's time.
    pub span: (u64, u64),
}

impl LockStats {
    /// How many events of `kind` were recorded with why `reason` (one of [`REASONS`]).
    pub fn reason(&self, kind: &str, reason: &str) -> usize {
        self.reasons
            .get(&(kind.to_owned(), reason.to_owned()))
            .copied()
            .unwrap_or(0)
    }
}

/// Add up the events of one lock.
pub fn summarize(events: &[Event]) -> LockStats {
    let mut counts = BTreeMap::new();
    let mut reasons = BTreeMap::new();
    let (mut wait, mut hold) = (Vec::new(), Vec::new());
    for e in events {
        *counts.entry(e.kind.clone()).or_insert(0) += 1;
        let why = e.get("why").unwrap_or_default();
        if REASONS
            .iter()
            .any(|(kind, w, _)| *kind == e.kind && *w == why)
        {
            *reasons.entry((e.kind.clone(), why.to_owned())).or_insert(0) += 1;
        }
        let ms = |name: &str| e.get(name).and_then(|v| v.parse::<u64>().ok());
        match e.kind.as_str() {
            "acquired" => wait.extend(ms("waited_ms")),
            "expired" if why == NOT_TAKEN_UP => {}
            "released" | "lost" | "expired" | "broken" => hold.extend(ms("held_ms")),
            _ => {}
        }
    }
    LockStats {
        counts,
        reasons,
        wait: Summary::new(wait),
        hold: Summary::new(hold),
        span: (
            events.first().map_or(0, |e| e.at_ms),
            events.last().map_or(0, |e| e.at_ms),
        ),
    }
}

/// Run `distlock stats`.
pub fn stats(cfg: StatsConfig, out: &Output) -> Result<Exit, Error> {
    let query = Query {
        topology: &cfg.topology,
        prefix: &cfg.prefix,
        name: cfg.name.as_ref(),
        since_ms: cfg.since_ms,
        last: None,
    };
    let found = read::fetch(&query)
        .map_err(|e| Error::redis("cannot read lock histories", cfg.topology.describe(), e))?;
    for (node, e) in &found.silent {
        out.warn(
            Ev::NodeFailed,
            format!("node {node} did not answer ({e}); read the others"),
        );
    }
    let mut by_lock: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for e in found.events {
        by_lock.entry(e.key.clone()).or_default().push(e);
    }
    if by_lock.is_empty() {
        let what = match &cfg.name {
            Some(name) => format!("lock {} has no history", crate::text::quote(name.key())),
            None => "no lock under the prefix has a history".to_owned(),
        };
        let since = if cfg.since_ms.is_some() {
            " in that time"
        } else {
            ""
        };
        out.notice(
            Ev::NoHistory,
            format!(
                "{what}{since} (keep one with --history DUR, e.g. distlock --history 7d run ...)"
            ),
        );
        return Ok(Exit::from(crate::exit::Code::Success));
    }
    let terminal = std::io::stdout().is_terminal();
    let mut text = String::new();
    if let Some(width) = cfg.timeline {
        // One lock (--timeline requires --key).
        let events: Vec<Event> = by_lock.into_values().flatten().collect();
        let last = events.last().map_or(0, |e| e.at_ms);
        let frame = timeline::Frame {
            key: cfg.name.as_ref().map_or("", LockName::key).to_owned(),
            from_ms: cfg
                .since_ms
                .unwrap_or_else(|| events.first().map_or(0, |e| e.at_ms)),
            to_ms: super::time::now_ms().max(last),
            width: width
                .or_else(timeline::terminal_width)
                .unwrap_or(timeline::DEFAULT_WIDTH),
            glyphs: if timeline::unicode_locale(|name| std::env::var(name).ok()) {
                timeline::Glyphs::Unicode
            } else {
                timeline::Glyphs::Ascii
            },
        };
        text = timeline::render(&events, &frame);
        by_lock = BTreeMap::new();
    }
    for (key, events) in &by_lock {
        let s = summarize(events);
        if cfg.json {
            let counts: serde_json::Map<String, serde_json::Value> = KINDS
                .iter()
                .map(|k| {
                    (
                        (*k).to_owned(),
                        s.counts.get(*k).copied().unwrap_or(0).into(),
                    )
                })
                .collect();
            let mut why = serde_json::Map::new();
            for (kind, reason, _) in REASONS {
                let n = s.reason(kind, reason);
                let entry = why
                    .entry(kind)
                    .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
                if let serde_json::Value::Object(m) = entry {
                    m.insert(reason.to_owned(), n.into());
                }
            }
            let object = serde_json::json!({
                "key": key,
                "events": counts,
                "why": why,
                "wait_ms": s.wait.to_json(),
                "hold_ms": s.hold.to_json(),
                "first_ms": s.span.0,
                "last_ms": s.span.1,
            });
            text.push_str(&format!("{object}\n"));
            continue;
        }
        text.push_str(&format!(
            "lock {}: {} events from {} to {}\n",
            crate::text::quote(key),
            events.len(),
            rfc3339(s.span.0, false),
            rfc3339(s.span.1, false)
        ));
        let counts: Vec<String> = KINDS
            .iter()
            .map(|k| {
                let mut text = format!("{k} {}", s.counts.get(*k).copied().unwrap_or(0));
                let apart: Vec<String> = REASONS
                    .iter()
                    .filter(|(kind, ..)| kind == k)
                    .map(|(kind, reason, words)| (s.reason(kind, reason), words))
                    .filter(|(n, _)| *n > 0)
                    .map(|(n, words)| format!("{n} {words}"))
                    .collect();
                if !apart.is_empty() {
                    text.push_str(&format!(" ({})", apart.join(", ")));
                }
                text
            })
            .collect();
        text.push_str(&format!("  {}\n", counts.join("  ")));
        text.push_str(&format!("  wait  {}\n", s.wait.words()));
        if terminal {
            text.push_str(&s.wait.histogram("    "));
        }
        text.push_str(&format!("  hold  {}\n", s.hold.words()));
        if terminal {
            text.push_str(&s.hold.histogram("    "));
        }
    }
    let mut stdout = std::io::stdout().lock();
    // A closed pipe is not an error.
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
    Ok(Exit::from(crate::exit::Code::Success))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, fields: &[(&str, &str)]) -> Event {
        Event {
            at_ms: 1,
            id: "1-0".into(),
            kind: kind.into(),
            key: "k".into(),
            fields: fields
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            recorded_by: None,
            last_at_ms: None,
        }
    }

    #[test]
    fn reasons_are_counted_apart_and_an_untaken_hand_off_is_no_hold() {
        let s = summarize(&[
            event("gave-up", &[("waited_ms", "100")]),
            event("gave-up", &[("why", "lapsed"), ("waited_ms", "7000")]),
            event("expired", &[("why", "not-taken-up"), ("held_ms", "3000")]),
            event("expired", &[("held_ms", "40")]),
            event(
                "lost",
                &[("why", "the lock key was deleted"), ("held_ms", "5")],
            ),
        ]);
        assert_eq!(s.counts["gave-up"], 2);
        assert_eq!(s.reason("gave-up", "lapsed"), 1);
        assert_eq!(s.reason("expired", "not-taken-up"), 1);
        assert_eq!(s.reasons.len(), 2);
        assert_eq!(s.hold.samples, [5, 40]);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let s = Summary::new((1..=100).rev().collect());
        assert_eq!(s.percentile(50), Some(50));
        assert_eq!(s.percentile(95), Some(95));
        assert_eq!(s.max(), Some(100));
        let one = Summary::new(vec![7]);
        assert_eq!((one.percentile(50), one.percentile(95)), (Some(7), Some(7)));
        assert_eq!(Summary::default().percentile(50), None);
        assert_eq!(one.histogram("").lines().count(), 8);
    }
}
