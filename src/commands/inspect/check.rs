//! `distlock check`: a lock judged for a monitoring system, in the monitoring-plugins
//! convention (docs/monitoring.md): one line on stdout, `DISTLOCK STATE: text | perfdata`, and
//! the state as exit code (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN).
//!
//! [`judge`] is a pure function of what was read (the lock's survey, its history) and the
//! thresholds; [`check`] reads and prints. Errors are the caller's to turn into UNKNOWN.

use std::time::Duration;

use crate::config::{CheckConfig, Limits};
use crate::error::Error;
use crate::exit::{Exit, Plugin};
use crate::history::Event;
use crate::lock::{LockName, Survey};

/// What the history says about successful runs (for `--crit-since-success`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Successes {
    /// The lock has no history.
    NoHistory,
    /// The history holds no successful run; its first event is at this time (ms).
    None { since_ms: u64 },
    /// The last successful run ended at this time (ms since the epoch, Redis clock).
    Last { at_ms: u64 },
}

/// Whether an event is the end of a successful run: a `released` of a run whose command exited
/// 0, or of a `distlock release` (which records no outcome; `--failed` records `failed`).
pub fn is_success(event: &Event) -> bool {
    event.kind == "released" && matches!(event.get("outcome"), None | Some("exit 0"))
}

/// The successes of a lock's events (oldest first).
pub fn successes(events: &[Event]) -> Successes {
    match (events.iter().rev().find(|e| is_success(e)), events.first()) {
        (Some(e), _) => Successes::Last { at_ms: e.at_ms },
        (None, Some(first)) => Successes::None {
            since_ms: first.at_ms,
        },
        (None, None) => Successes::NoHistory,
    }
}

/// Seconds with up to 3 decimals (`2823.1`, `0`, `0.005`), as performance data takes them.
fn secs(d: Duration) -> String {
    let ms = d.as_millis();
    let text = format!("{}.{:03}", ms / 1000, ms % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn opt_secs(d: Option<Duration>) -> String {
    d.map(secs).unwrap_or_default()
}

/// One performance datum: `label=value[UOM];warn;crit;min;max`, trailing empty fields dropped.
fn perf(label: &str, value: &str, fields: [&str; 4]) -> String {
    let mut text = format!("{label}={value}");
    let used = fields
        .iter()
        .rposition(|f| !f.is_empty())
        .map_or(0, |i| i + 1);
    for f in &fields[..used] {
        text.push(';');
        text.push_str(f);
    }
    text
}

/// Judge a lock: the state and the output line (without a newline). `survey` is what a
/// majority agrees on (or a split); `successes` is read only for `--crit-since-success`;
/// `now_ms` is this machine's clock (for the history's times).
pub fn judge(
    name: &LockName,
    survey: &Survey,
    successes: Option<Successes>,
    limits: &Limits,
    now_ms: u64,
) -> (Plugin, String) {
    let mut state = Plugin::Ok;
    let mut parts: Vec<String> = Vec::new();
    let key = crate::text::quote(name.key());
    let over =
        |value: Duration, warn: Option<Duration>, crit: Option<Duration>, w: &str, c: &str| match (
            crit.filter(|c| value > *c),
            warn.filter(|w| value > *w),
        ) {
            (Some(limit), _) => (
                Plugin::Critical,
                format!(" (over {c} {})", crate::text::duration(limit)),
            ),
            (None, Some(limit)) => (
                Plugin::Warning,
                format!(" (over {w} {})", crate::text::duration(limit)),
            ),
            _ => (Plugin::Ok, String::new()),
        };
    // Without -w, the (oldest) holder's own --warn-after, when it stored one.
    let mut warn_held = limits.warn_held;
    let (held, holders, limit, waiters, oldest_wait) = match &survey.agreed {
        None => {
            state = Plugin::Warning;
            parts.push(format!(
                "lock {key} is split: no holder has a majority of the nodes (nobody can take it \
                 until the nodes' locks expire)"
            ));
            (None, 0, 0, 0, None)
        }
        Some(lock) => {
            // A mutex kept taken after a run that succeeded holds nothing: the run is over.
            let holding: Vec<_> = lock
                .holders
                .iter()
                .filter(|h| h.cooldown.is_none())
                .collect();
            let oldest = holding
                .iter()
                .max_by_key(|h| h.held_for.unwrap_or_default());
            let held = oldest.map(|h| h.held_for.unwrap_or_default());
            match (oldest, held) {
                (Some(h), Some(for_)) => {
                    let who = h
                        .holder
                        .as_deref()
                        .map_or("another client".to_owned(), |h| h.summary());
                    // Another client's lock says nothing of when it was taken.
                    let w = if warn_held.is_some() {
                        "-w"
                    } else {
                        warn_held = h
                            .holder
                            .as_deref()
                            .and_then(|h| h.warn_after_ms)
                            .map(Duration::from_millis);
                        "its --warn-after"
                    };
                    let (s, note) = match h.held_for {
                        Some(_) => over(for_, warn_held, limits.crit_held, w, "-c"),
                        None => (Plugin::Ok, " (since when, it does not say)".to_owned()),
                    };
                    state = state.worst(s);
                    let slots = if lock.limit > 1 {
                        format!(
                            " ({} of {} slots held; the oldest)",
                            holding.len(),
                            lock.limit
                        )
                    } else {
                        String::new()
                    };
                    let for_text = match h.held_for {
                        Some(_) => format!(" {}", crate::text::duration(for_)),
                        None => String::new(),
                    };
                    parts.push(format!("lock {key} held{for_text} by {who}{slots}{note}"));
                }
                _ if !lock.holders.is_empty() => {
                    parts.push(format!(
                        "lock {key} is kept taken after a run that succeeded"
                    ));
                }
                _ => parts.push(format!("lock {key} is free")),
            }
            let oldest_wait = lock.waiters.iter().filter_map(|w| w.waited).max();
            if !lock.waiters.is_empty() {
                let mut text = format!("{} waiting", lock.waiters.len());
                if let Some(waited) = oldest_wait {
                    let (s, note) = over(
                        waited,
                        limits.warn_wait,
                        limits.crit_wait,
                        "--warn-wait",
                        "--crit-wait",
                    );
                    state = state.worst(s);
                    text.push_str(&format!(", oldest {}{note}", crate::text::duration(waited)));
                }
                parts.push(text);
            }
            (
                held,
                holding.len(),
                lock.limit.max(1),
                lock.waiters.len(),
                oldest_wait,
            )
        }
    };
    let mut since_success = None;
    if let (Some(limit), Some(found)) = (limits.crit_since_success, successes) {
        let ago = |ms: u64| Duration::from_millis(now_ms.saturating_sub(ms));
        let (s, text) = match found {
            Successes::NoHistory => (
                Plugin::Unknown,
                "no history to tell when it last succeeded (keep one with --history DUR)"
                    .to_owned(),
            ),
            Successes::None { since_ms } => (
                Plugin::Critical,
                format!(
                    "no successful run recorded (history since {} ago)",
                    crate::text::duration(ago(since_ms))
                ),
            ),
            Successes::Last { at_ms } => {
                let age = ago(at_ms);
                since_success = Some(age);
                if age > limit {
                    (
                        Plugin::Critical,
                        format!(
                            "last success {} ago (over --crit-since-success {})",
                            crate::text::duration(age),
                            crate::text::duration(limit)
                        ),
                    )
                } else {
                    (
                        Plugin::Ok,
                        format!("last success {} ago", crate::text::duration(age)),
                    )
                }
            }
        };
        // UNKNOWN is not a degree of badness: it wins, as nothing else can be judged for sure.
        state = if s == Plugin::Unknown {
            s
        } else {
            state.worst(s)
        };
        parts.push(text);
    }
    let held_text = secs(held.unwrap_or_default()) + "s";
    let mut data = vec![
        perf(
            "held",
            &held_text,
            [&opt_secs(warn_held), &opt_secs(limits.crit_held), "0", ""],
        ),
        perf(
            "holders",
            &holders.to_string(),
            ["", "", "0", &limit.to_string()],
        ),
        perf("waiters", &waiters.to_string(), ["", "", "0", ""]),
        perf(
            "oldest_wait",
            &(secs(oldest_wait.unwrap_or_default()) + "s"),
            [
                &opt_secs(limits.warn_wait),
                &opt_secs(limits.crit_wait),
                "0",
                "",
            ],
        ),
    ];
    if let Some(age) = since_success {
        data.push(perf(
            "since_success",
            &(secs(age) + "s"),
            ["", &opt_secs(limits.crit_since_success), "0", ""],
        ));
    }
    // The text may hold what holders wrote (a note): `|` would start the performance data.
    let text = parts.join("; ").replace('|', "/");
    (
        state,
        format!("DISTLOCK {}: {text} | {}", state.word(), data.join(" ")),
    )
}

pub use crate::text::unknown_line;

/// Run `distlock check`: read the lock (and its history for `--crit-since-success`), print the
/// line, exit with the state. A Redis error is the caller's (UNKNOWN).
pub fn check(cfg: CheckConfig) -> Result<Exit, Error> {
    let (_, survey) = super::survey(&cfg.topology, &cfg.name)?;
    let successes = match cfg.limits.crit_since_success {
        None => None,
        Some(_) => {
            let query = crate::history::Query {
                topology: &cfg.topology,
                prefix: &cfg.prefix,
                name: Some(&cfg.name),
                since_ms: None,
                last: None,
            };
            let found = crate::history::fetch(&query).map_err(|e| {
                Error::redis("cannot read the lock's history", cfg.topology.describe(), e)
            })?;
            Some(successes(&found.events))
        }
    };
    let (state, line) = judge(
        &cfg.name,
        &survey,
        successes,
        &cfg.limits,
        crate::history::time::now_ms(),
    );
    super::print(&format!("{line}\n"))?;
    Ok(Exit::from(state))
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
