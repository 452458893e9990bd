//! The configuration of the history commands (`distlock log`, `distlock stats`) and of the
//! global `--history`: from what the user typed to [`LogConfig`] and [`StatsConfig`].

use std::time::Duration;

use super::topology::topology;
use super::{Origins, checked_prefix, lock_name};
use crate::cli::history::{LogArgs, StatsArgs};
use crate::cli::{self};
use crate::error::Error;
use crate::history::{LogConfig, MIN_DURATION, StatsConfig};
use crate::lock::{LockName, Topology};

/// `distlock log`.
pub(super) fn log_config(
    args: LogArgs,
    global: &cli::GlobalArgs,
    origins: &Origins,
) -> Result<LogConfig, Error> {
    let (topology, prefix, name) = scope(args.key.as_deref(), global, origins)?;
    Ok(LogConfig {
        topology,
        prefix,
        name,
        since_ms: args.since.map(|s| s.0),
        lines: args.lines,
        json: args.json,
        follow: args.follow,
        clear: args.clear,
    })
}

/// `distlock stats`.
pub(super) fn stats_config(
    args: StatsArgs,
    global: &cli::GlobalArgs,
    origins: &Origins,
) -> Result<StatsConfig, Error> {
    let (topology, prefix, name) = scope(args.key.as_deref(), global, origins)?;
    let min = crate::history::timeline::MIN_WIDTH;
    if let Some(width) = args.width.filter(|w| !(min..=10_000).contains(w)) {
        return Err(Error::Usage(format!(
            "--width {width} is out of range; give {min} to 10000 characters"
        )));
    }
    Ok(StatsConfig {
        topology,
        prefix,
        name,
        since_ms: args.since.map(|s| s.0),
        json: args.json,
        timeline: args.timeline.then_some(args.width),
    })
}

/// What the history commands read: where, under which prefix, and which lock (None: every lock
/// under the prefix).
fn scope(
    key: Option<&str>,
    global: &cli::GlobalArgs,
    origins: &Origins,
) -> Result<(Topology, String, Option<LockName>), Error> {
    let prefix = global.prefix.as_str();
    Ok((
        topology(global, origins, None)?,
        checked_prefix(prefix, origins)?.to_owned(),
        key.map(|k| lock_name(prefix, k, origins)).transpose()?,
    ))
}

/// `--history`: at least 1s.
pub(super) fn history(
    global: &cli::GlobalArgs,
    origins: &Origins,
) -> Result<Option<Duration>, Error> {
    match &global.history {
        Some(d) if d.value < MIN_DURATION => Err(Error::Usage(format!(
            "{} is too short; keep a history for 1s or more, e.g. 7d",
            origins.duration("history", d)
        ))),
        d => Ok(d.as_ref().map(|d| d.value)),
    }
}
