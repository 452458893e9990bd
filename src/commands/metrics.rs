//! `distlock metrics`: every lock under the prefix in Prometheus' text exposition format
//! (0.0.4), for node_exporter's textfile collector or a Pushgateway (docs/monitoring.md).
//!
//! [`render`] is a pure function of what was read (the locks as `list` surveys them, with the
//! counters their histories keep, see [`crate::history::counts`]): families in a fixed order,
//! series sorted, no sample timestamps, times as Unix timestamps on the Redis server's clock,
//! so that the same state prints the same bytes. Labels are bounded: the key, the event, the
//! bucket, and the holder's host and kind only in `distlock_lock_holder_info`. [`metrics`]
//! reads, and writes to stdout or atomically to a file.

use std::io::Write;
use std::path::Path;

use crate::config::MetricsConfig;
use crate::error::Error;
use crate::exit::{Code, Exit};
use crate::history::counts::{self, BUCKETS, Counts, EVENTS, Histogram};
use crate::lock::{self, LockName, LockState, Survey, Topology};
use crate::output::{Ev, Msg, Output};

/// A lock as the metrics show it.
pub struct Lock<'a> {
    pub name: &'a LockName,
    pub survey: &'a Survey,
    /// Its history's counters, if it keeps a history.
    pub counts: Option<Counts>,
}

/// `distlock metrics`: 0 written; 69 Redis unreachable (the metrics say `distlock_up 0`, and
/// are written all the same); 74 the file could not be written.
pub fn metrics(cfg: MetricsConfig, out: &Output) -> Result<Exit, Error> {
    let read = read(&cfg.topology, &cfg.prefix, &cfg.pattern, out);
    let text = match &read {
        Ok((listing, counts)) => {
            let locks: Vec<Lock<'_>> = (listing.locks.iter().zip(counts))
                .map(|((name, survey), counts)| Lock {
                    name,
                    survey,
                    counts: *counts,
                })
                .collect();
            let redlock = matches!(cfg.topology, Topology::Redlock { .. });
            render(&cfg.labels, Some(&locks), redlock)
        }
        Err(_) => render(&cfg.labels, None, false),
    };
    let written = match &cfg.output {
        Some(path) => write_atomically(path, text.as_bytes()).map_err(|e| {
            format!(
                "cannot write the metrics to {}: {e}",
                crate::text::quote(&path.to_string_lossy())
            )
        }),
        None => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(format!("cannot write the metrics to stdout: {e}"))
                }
                _ => Ok(()),
            }
        }
    };
    if let Err(why) = written {
        out.error(
            Ev::MetricsNotWritten,
            Msg::new(why).exit(Code::IoError.get()),
        );
        return Ok(Exit::from(Code::IoError));
    }
    read.map(|_| Exit::from(Code::Success))
}

/// Every lock under the prefix (held, waited for, or with a history) and its counters.
fn read(
    topology: &Topology,
    prefix: &str,
    pattern: &str,
    out: &Output,
) -> Result<(lock::Listing, Vec<Option<Counts>>), Error> {
    let failed = |source| Error::redis("cannot read the locks", topology.describe(), source);
    let listing = lock::list(topology, prefix, pattern, true).map_err(failed)?;
    for (address, error) in &listing.silent {
        out.warn(
            Ev::NodeFailed,
            format!(
                "Redis node {} did not answer ({error}); the metrics show what the other nodes \
                 hold",
                crate::text::sanitize(address)
            ),
        );
    }
    // Left out of the metrics (nothing of them can be read), but never silently: a fleet half
    // upgraded would otherwise see a lock vanish from its dashboards.
    for newer in &listing.newer {
        out.warn(
            Ev::NewerProtocol,
            format!(
                "lock {} is stored in protocol {}, newer than this distlock's {}: the metrics \
                 leave it out (upgrade distlock to export it)",
                crate::text::quote(newer.name.key()),
                newer.protocol,
                crate::lock::PROTOCOL
            ),
        );
    }
    let names: Vec<LockName> = listing.locks.iter().map(|(n, _)| n.clone()).collect();
    let counts = counts::read(topology, &names).map_err(failed)?;
    Ok((listing, counts))
}

/// Write `bytes` to `path` atomically: into a temporary file in the same directory, whose name
/// does not end in `.prom` (node_exporter reads `*.prom`), mode 0644 whatever the umask,
/// synced, then renamed over `path`.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = dir.join(temp_name);
    // A file of a process that had our pid and died before its rename.
    let _ = std::fs::remove_file(&temp);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&temp)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written?;
    // The rename itself survives a crash once the directory is synced (best effort).
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// A label value escaped for the text format: `\` `"` and newline.
pub fn escape(value: &str) -> String {
    let mut text = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => text.push_str("\\\\"),
            '"' => text.push_str("\\\""),
            '\n' => text.push_str("\\n"),
            c => text.push(c),
        }
    }
    text
}

/// Milliseconds as seconds: `1764300000.123`, `0.5`, `12`.
fn seconds(ms: u64) -> String {
    let text = format!("{}.{:03}", ms / 1000, ms % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The text of the families, one after the other.
struct Exposition {
    text: String,
    /// `--label`s, rendered (`redis="prod",`).
    common: String,
}

impl Exposition {
    /// A family: its HELP and TYPE, then its samples (none: the family is left out).
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: Vec<(String, String)>) {
        if samples.is_empty() {
            return;
        }
        self.text
            .push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        for (series, value) in samples {
            self.text.push_str(&series);
            self.text.push(' ');
            self.text.push_str(&value);
            self.text.push('\n');
        }
    }

    /// A series: `name{labels}` with the common labels first.
    fn series(&self, name: &str, labels: &[(&str, &str)]) -> String {
        let mut text = format!("{name}{{{}", self.common);
        for (label, value) in labels {
            text.push_str(&format!("{label}=\"{}\",", escape(value)));
        }
        if text.ends_with('{') {
            text.pop();
        } else {
            text.pop();
            text.push('}');
        }
        text
    }
}

/// The metrics of `locks` (`None`: Redis did not answer, only `distlock_up 0`), with `labels`
/// on every series; `redlock`: the locks are a Redlock's (`distlock_lock_split`).
pub fn render(labels: &[(String, String)], locks: Option<&[Lock<'_>]>, redlock: bool) -> String {
    let mut x = Exposition {
        text: String::new(),
        common: (labels.iter())
            .map(|(name, value)| format!("{name}=\"{}\",", escape(value)))
            .collect(),
    };
    let up = x.series("distlock_up", &[]);
    x.family(
        "distlock_up",
        "gauge",
        "Whether Redis answered (a Redlock: a majority of its nodes).",
        vec![(up, if locks.is_some() { "1" } else { "0" }.to_owned())],
    );
    let mut locks: Vec<&Lock<'_>> = locks.unwrap_or_default().iter().collect();
    locks.sort_by(|a, b| a.name.key().cmp(b.name.key()));
    let no_majority = LockState::default();
    // Per lock: its key, what a majority agrees on, and who holds it (a mutex kept taken
    // after a run that succeeded, --min-interval or --cooldown, holds nothing).
    let seen: Vec<(&str, &LockState, Vec<&lock::HeldBy>)> = (locks.iter())
        .map(|l| {
            let state = l.survey.agreed.as_ref().unwrap_or(&no_majority);
            let holding = (state.holders.iter())
                .filter(|h| h.cooldown.is_none())
                .collect();
            (l.name.key(), state, holding)
        })
        .collect();
    let per_lock = |x: &Exposition, name: &str, value: &dyn Fn(usize) -> Option<String>| {
        (seen.iter().enumerate())
            .filter_map(|(i, (key, ..))| Some((x.series(name, &[("key", key)]), value(i)?)))
            .collect::<Vec<_>>()
    };
    // The oldest holder (the longest hold), if it says since when.
    let oldest = |i: usize| {
        let (_, state, holding) = &seen[i];
        let held = holding.iter().max_by_key(|h| h.held_for)?;
        Some((state.now_ms, held))
    };
    let samples = per_lock(&x, "distlock_lock_holders", &|i| {
        Some(seen[i].2.len().to_string())
    });
    x.family(
        "distlock_lock_holders",
        "gauge",
        "Holders of the lock now (a semaphore's slots held).",
        samples,
    );
    let samples = per_lock(&x, "distlock_lock_limit", &|i| {
        Some(seen[i].1.limit.to_string())
    });
    x.family(
        "distlock_lock_limit",
        "gauge",
        "1 for a mutex, N for a semaphore of N slots, 0 when nobody holds the lock.",
        samples,
    );
    let samples = per_lock(&x, "distlock_lock_waiters", &|i| {
        Some(seen[i].1.waiters.len().to_string())
    });
    x.family(
        "distlock_lock_waiters",
        "gauge",
        "Waiters in line for the lock.",
        samples,
    );
    let name = "distlock_lock_acquired_timestamp_seconds";
    let samples = per_lock(&x, name, &|i| {
        let (now, held) = oldest(i)?;
        let held_for = u64::try_from(held.held_for?.as_millis()).ok()?;
        Some(seconds(now.checked_sub(held_for)?))
    });
    x.family(
        name,
        "gauge",
        "When the oldest holder took the lock (Unix time, Redis clock).",
        samples,
    );
    let name = "distlock_lock_oldest_wait_timestamp_seconds";
    let samples = per_lock(&x, name, &|i| {
        let state = seen[i].1;
        let waited = state.waiters.iter().filter_map(|w| w.waited).max()?;
        let waited = u64::try_from(waited.as_millis()).ok()?;
        Some(seconds(state.now_ms.checked_sub(waited)?))
    });
    x.family(
        name,
        "gauge",
        "When the first waiter in line joined it (Unix time, Redis clock).",
        samples,
    );
    let name = "distlock_lock_warn_after_seconds";
    let samples = per_lock(&x, name, &|i| {
        let warn = oldest(i)?.1.warn_after?;
        Some(seconds(u64::try_from(warn.as_millis()).ok()?))
    });
    x.family(
        name,
        "gauge",
        "The oldest holder's --warn-after: how long it means to hold the lock at most.",
        samples,
    );
    let mut info: Vec<(&str, &str, &str)> = (seen.iter())
        .flat_map(|(key, _, holding)| {
            holding.iter().map(|h| {
                let holder = h.holder.as_deref();
                let host = holder.and_then(|h| h.host.as_deref()).unwrap_or("");
                let kind = holder.and_then(|h| h.kind.as_deref()).unwrap_or("");
                (*key, host, kind)
            })
        })
        .collect();
    info.sort();
    info.dedup();
    let name = "distlock_lock_holder_info";
    let samples = (info.iter())
        .map(|(key, host, kind)| {
            let series = x.series(name, &[("key", key), ("host", host), ("kind", kind)]);
            (series, "1".to_owned())
        })
        .collect();
    x.family(
        name,
        "gauge",
        "The hosts holding the lock (kind: run or acquire), 1 each.",
        samples,
    );
    if redlock {
        let samples = (locks.iter())
            .map(|l| {
                let split = l.survey.agreed.is_none();
                let series = x.series("distlock_lock_split", &[("key", l.name.key())]);
                (series, u8::from(split).to_string())
            })
            .collect();
        x.family(
            "distlock_lock_split",
            "gauge",
            "1 when no holder has a majority of the Redlock's nodes (nobody can take the lock).",
            samples,
        );
    }
    // With a history: its counters.
    let kept: Vec<(&str, &Counts)> = (locks.iter())
        .filter_map(|l| Some((l.name.key(), l.counts.as_ref()?)))
        .collect();
    let name = "distlock_events_total";
    let samples = (kept.iter())
        .flat_map(|(key, counts)| {
            let x = &x;
            (EVENTS.iter().zip(counts.events)).map(move |(event, n)| {
                (
                    x.series(name, &[("key", key), ("event", event)]),
                    n.to_string(),
                )
            })
        })
        .collect();
    x.family(
        name,
        "counter",
        "Events of the lock's history (every one recorded, also those the history dropped).",
        samples,
    );
    let histogram = |x: &Exposition, name: &str, of: &dyn Fn(&Counts) -> Histogram| {
        let mut samples = Vec::new();
        for (key, counts) in &kept {
            let h = of(counts);
            let mut total = 0;
            for (le, n) in BUCKETS.iter().zip(h.buckets) {
                total += n;
                let series = x.series(&format!("{name}_bucket"), &[("key", key), ("le", le)]);
                samples.push((series, total.to_string()));
            }
            let sum = x.series(&format!("{name}_sum"), &[("key", key)]);
            samples.push((sum, seconds(h.sum_ms)));
            let count = x.series(&format!("{name}_count"), &[("key", key)]);
            samples.push((count, total.to_string()));
        }
        samples
    };
    let samples = histogram(&x, "distlock_wait_seconds", &|c| c.wait);
    x.family(
        "distlock_wait_seconds",
        "histogram",
        "How long each holder waited before it took the lock.",
        samples,
    );
    let samples = histogram(&x, "distlock_hold_seconds", &|c| c.hold);
    x.family(
        "distlock_hold_seconds",
        "histogram",
        "How long each hold lasted (released, lost, broken; expired: at most so long).",
        samples,
    );
    let name = "distlock_last_success_timestamp_seconds";
    let samples = (kept.iter())
        .filter(|(_, c)| c.last_ok_ms > 0)
        .map(|(key, c)| (x.series(name, &[("key", key)]), seconds(c.last_ok_ms)))
        .collect();
    x.family(
        name,
        "gauge",
        "When a run under the lock last succeeded (Unix time, Redis clock).",
        samples,
    );
    x.text
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
