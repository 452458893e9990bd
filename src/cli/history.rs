//! The command-line arguments of `distlock log` and `distlock stats` (flattened into the
//! subcommands of [`crate::cli::Command`]), and the values they parse.

use clap::Args;

use super::BadValue;

/// `distlock log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only this lock's events (default: every lock under the prefix, merged by time).
    #[arg(short, long, value_name = "KEY")]
    pub key: Option<String>,

    /// Only events since this long ago (30m, 2h) or since this time (2026-11-25T03:00:00Z).
    ///
    /// A time without a zone is UTC; a bare date is its midnight, UTC. Measured against this
    /// machine's clock (events carry the Redis server's).
    #[arg(long, value_name = "DUR|TIME", value_parser = parse_since)]
    pub since: Option<Since>,

    /// Only the newest N events.
    #[arg(short = 'n', long = "lines", value_name = "N")]
    pub lines: Option<usize>,

    /// Print one JSON object per line instead of text.
    ///
    /// ts (RFC 3339, UTC, ms), at_ms, event, key, and the fields recorded: token (its first 8
    /// characters), host, pid, user, command, note, ci_url, kind, and as the event has them
    /// fence, slot, waited_ms, place, held_ms, outcome, why, by_host, by_pid, by_user,
    /// by_command, by_token; over a Redlock, recorded_by and nodes (how many nodes recorded
    /// the event, of how many), and last_at_ms (when the last of them did; at_ms is the
    /// first).
    #[arg(long)]
    pub json: bool,

    /// Keep printing new events (within a second of happening) until interrupted.
    #[arg(short, long, conflicts_with = "clear")]
    pub follow: bool,

    /// Delete the lock's history (needs --key), which turns the history off.
    ///
    /// Nothing records into the lock any more until a distlock with --history takes it again.
    #[arg(long, requires = "key")]
    pub clear: bool,
}

/// `distlock stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Only this lock (default: every lock under the prefix, one after the other).
    #[arg(short, long, value_name = "KEY")]
    pub key: Option<String>,

    /// Only events since this long ago (30m, 2h) or since this time (2026-11-25T03:00:00Z).
    #[arg(long, value_name = "DUR|TIME", value_parser = parse_since)]
    pub since: Option<Since>,

    /// Print one JSON object per lock instead of text.
    ///
    /// key, events (how many of each kind: acquired, released, lost, expired, broken,
    /// superseded, gave-up), why (how many gave-up were lapsed places, how many expired were
    /// hand-offs not taken up: {"gave-up": {"lapsed": N}, "expired": {"not-taken-up": N}}),
    /// wait_ms and hold_ms (each count, p50, p95 and max; null figures without samples),
    /// first_ms and last_ms (the times of the first and last event).
    #[arg(long)]
    pub json: bool,

    /// Draw the lock's holds and waits as a text chart (needs --key).
    ///
    /// One lane per host (past 12, the least busy share a lane, "others"), from --since (or
    /// the first event) to now, with a time axis in UTC and a legend: held, waiting (before
    /// an acquired, a gave-up, a superseded), lost (x), broken (!), and held at most (a holder
    /// that vanished and whose lock expired: its end is an upper bound). As wide as the
    /// terminal (80 columns without one); Unicode blocks when the locale (LC_ALL, LC_CTYPE,
    /// LANG) is UTF-8, plain ASCII otherwise.
    #[arg(long, requires = "key", conflicts_with = "json")]
    pub timeline: bool,

    /// The width of the --timeline chart in characters (at least 40), instead of the
    /// terminal's.
    #[arg(long, value_name = "N", requires = "timeline")]
    pub width: Option<usize>,
}

/// `--since`: a time, in ms since the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Since(pub u64);

/// Parse `--since`: a duration back from now (with a unit), or an RFC 3339 time.
pub fn parse_since(text: &str) -> Result<Since, BadValue> {
    let now = crate::history::time::now_ms();
    if let Some(ms) = crate::history::time::parse_rfc3339(text) {
        return Ok(Since(ms));
    }
    match crate::cli::parse_duration(text) {
        Ok(d) => Ok(Since(now.saturating_sub(
            u64::try_from(d.value.as_millis()).unwrap_or(u64::MAX),
        ))),
        Err(_) => Err(BadValue(
            "is neither a duration nor a time; write e.g. 30m, 2h or 2026-11-25T03:00:00Z".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_durations_and_times() {
        assert_eq!(
            parse_since("2026-11-25T03:00:00Z"),
            Ok(Since(
                crate::history::time::parse_rfc3339("2026-11-25T03:00:00Z").unwrap()
            ))
        );
        let an_hour_ago = parse_since("1h").unwrap().0;
        let now = crate::history::time::now_ms();
        assert!(now - an_hour_ago >= 3_600_000 && now - an_hour_ago < 3_700_000);
        assert!(parse_since("yesterday").is_err());
        assert!(parse_since("30").is_err());
    }
}
