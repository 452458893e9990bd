//! `distlock log`: a lock's events (or every lock's under the prefix, merged by time), newest
//! last, one line each; `--follow` keeps printing; `--clear` deletes a history.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::exit::Exit;
use crate::lock::{LockName, Topology};
use crate::output::{Ev, Msg, Output};

use super::event::Event;
use super::read::{self, Found, Query};

/// How often `--follow` reads again: an event shows within a second of happening.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(250);
/// `--follow` reads again this far back (ms) from the newest event it printed, for events a
/// Redlock's majority recorded late, or that a server with a clock behind recorded.
const FOLLOW_OVERLAP_MS: u64 = 15_000;

/// `distlock log`, decided.
#[derive(Debug)]
pub struct LogConfig {
    /// Where.
    pub topology: Topology,
    /// The key prefix.
    pub prefix: String,
    /// One lock, or every lock under the prefix.
    pub name: Option<LockName>,
    /// Only events at or after this time (ms since the epoch).
    pub since_ms: Option<u64>,
    /// Only the newest N.
    pub lines: Option<usize>,
    /// One JSON object per line.
    pub json: bool,
    /// Keep printing.
    pub follow: bool,
    /// Delete the history instead.
    pub clear: bool,
}

fn fail(cfg: &LogConfig, e: crate::backend::BackendError) -> Error {
    let what = cfg.name.as_ref().map_or_else(
        || "cannot read lock histories".to_owned(),
        |n| {
            format!(
                "cannot read the history of lock {}",
                crate::text::quote(n.key())
            )
        },
    );
    Error::redis(what, cfg.topology.describe(), e)
}

/// Print `events`; false when stdout is gone (a closed pipe ends `log`, exit 0).
fn print(events: &[Event], cfg: &LogConfig) -> bool {
    let mut stdout = std::io::stdout().lock();
    for event in events {
        let line = if cfg.json {
            event.to_json().to_string()
        } else {
            event.line(cfg.name.is_none())
        };
        if writeln!(stdout, "{line}").is_err() {
            return false;
        }
    }
    stdout.flush().is_ok()
}

/// Say what a Redlock's read left out or could not reach.
fn notes(found: &Found, out: &Output) {
    for (node, e) in &found.silent {
        out.warn(
            Ev::NodeFailed,
            format!("node {node} did not answer ({e}); read the others"),
        );
    }
    if found.minority > 0 {
        out.notice(
            Ev::HistoryMinority,
            format!(
                "left out {} event(s) that fewer than a majority of the nodes recorded (attempts \
                 that failed, or nodes that lost data)",
                found.minority
            ),
        );
    }
}

/// Run `distlock log`.
pub fn log(cfg: LogConfig, out: &Output) -> Result<Exit, Error> {
    if cfg.clear {
        return clear(&cfg, out);
    }
    let query = Query {
        topology: &cfg.topology,
        prefix: &cfg.prefix,
        name: cfg.name.as_ref(),
        since_ms: cfg.since_ms,
        last: cfg.lines,
    };
    let found = read::fetch(&query).map_err(|e| fail(&cfg, e))?;
    notes(&found, out);
    if !print(&found.events, &cfg) {
        return Ok(Exit::from(crate::exit::Code::Success));
    }
    if cfg.follow {
        follow(&cfg, found.events, out)?;
    }
    Ok(Exit::from(crate::exit::Code::Success))
}

/// What identifies a printed event across reads (an event a Redlock's nodes recorded keeps
/// its earliest time).
fn seen_key(e: &Event) -> (u64, (String, String, String, String)) {
    (e.at_ms, e.identity())
}

/// `--follow`: read again every [`FOLLOW_EVERY`] until SIGINT, SIGTERM or SIGHUP (exit 0), or
/// until stdout is closed.
fn follow(cfg: &LogConfig, printed: Vec<Event>, out: &Output) -> Result<(), Error> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| Error::Internal(format!("cannot catch signals: {e}")))?;
    }
    let mut newest = printed.iter().map(|e| e.at_ms).max().unwrap_or_else(|| {
        cfg.since_ms
            .unwrap_or(0)
            .max(super::time::now_ms().saturating_sub(FOLLOW_OVERLAP_MS))
    });
    let mut seen: HashMap<_, ()> = printed.iter().map(|e| (seen_key(e), ())).collect();
    let mut warned = false;
    while !stop.load(Ordering::Relaxed) {
        let next = Instant::now() + FOLLOW_EVERY;
        while Instant::now() < next && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(25));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let from = newest
            .saturating_sub(FOLLOW_OVERLAP_MS)
            .max(cfg.since_ms.unwrap_or(0));
        let query = Query {
            topology: &cfg.topology,
            prefix: &cfg.prefix,
            name: cfg.name.as_ref(),
            since_ms: Some(from),
            last: None,
        };
        let found = match read::fetch(&query) {
            Ok(found) => {
                warned = false;
                found
            }
            // Redis away for a moment: say so once, and keep following.
            Err(e) => {
                if !warned {
                    out.warn(Ev::HistoryReadFailed, fail(cfg, e).message());
                    warned = true;
                }
                continue;
            }
        };
        let fresh: Vec<Event> = found
            .events
            .into_iter()
            .filter(|e| seen.insert(seen_key(e), ()).is_none())
            .collect();
        if let Some(at) = fresh.iter().map(|e| e.at_ms).max() {
            newest = newest.max(at);
        }
        seen.retain(|(at, _), _| *at + 2 * FOLLOW_OVERLAP_MS >= newest);
        if !print(&fresh, cfg) {
            break;
        }
    }
    Ok(())
}

/// `distlock log -k KEY --clear`.
fn clear(cfg: &LogConfig, out: &Output) -> Result<Exit, Error> {
    let Some(name) = &cfg.name else {
        return Err(Error::Usage(
            "--clear needs --key KEY: the lock whose history to delete".into(),
        ));
    };
    let key = crate::text::quote(name.key());
    let had = read::clear(&cfg.topology, name).map_err(|e| {
        Error::redis(
            format!("cannot clear the history of lock {key}"),
            cfg.topology.describe(),
            e,
        )
    })?;
    if had > 0 {
        out.notice(
            Ev::HistoryCleared,
            Msg::new(format!(
                "deleted the history of lock {key}; it records nothing more until a distlock with \
                 --history takes it again"
            )),
        );
    } else {
        out.notice(Ev::HistoryCleared, format!("lock {key} had no history"));
    }
    Ok(Exit::from(crate::exit::Code::Success))
}
