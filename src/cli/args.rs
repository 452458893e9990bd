//! Each subcommand's options (the top level and the global options are in [`super`]).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

use super::values::{DurationArg, WaitMode, parse_duration, parse_label, parse_signal};
use crate::exit::Code;

/// Options shared by the commands that take a lock (`run`, `acquire`).
#[derive(Debug, Args)]
pub struct TakeArgs {
    /// Name of the lock; repeat for several keys (up to 32), all taken before the command starts.
    ///
    /// Up to 256 bytes of printable characters without whitespace, braces, backslashes or glob
    /// characters (* ? [ ]). Processes that use the same key (and prefix) on the same Redis
    /// exclude each other. With several keys (-k db -k deploy), distlock takes them one at a
    /// time in one order (by Redis key, whatever order they were typed in), keeping those it
    /// has while it waits for the next, under one --wait: runs that name the same keys in
    /// other orders never deadlock. Any failure gives every key back. Not with --limit N>1,
    /// --supersede or --replace.
    #[arg(short, long, value_name = "KEY", required = true)]
    pub key: Vec<String>,

    /// Lifetime of the lock in Redis without renewal (from 1s to 24h).
    ///
    /// distlock run renews the lock every --renew-every while the command runs; if distlock or
    /// its machine dies, the lock expires after at most this long.
    #[arg(
        short,
        long,
        value_name = "DUR",
        env = "DISTLOCK_TTL",
        default_value = "30s",
        value_parser = parse_duration
    )]
    pub ttl: DurationArg,

    /// Wait at most this long for the lock (default: wait forever).
    #[arg(
        short,
        long,
        value_name = "DUR",
        env = "DISTLOCK_WAIT",
        value_parser = parse_duration
    )]
    pub wait: Option<DurationArg>,

    /// Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT).
    #[arg(short, long)]
    pub no_wait: bool,

    /// Exit code when busy, superseded or replaced (not acquired), e.g. `-n -E 0` to skip quietly.
    #[arg(
        short = 'E',
        long,
        value_name = "CODE",
        env = "DISTLOCK_CONFLICT_EXIT_CODE",
        default_value_t = Code::Busy.get()
    )]
    pub conflict_exit_code: u8,

    /// How to wait for a busy lock.
    ///
    /// Both wait in the fair line (first come, first served). notify: woken alone when the
    /// lock is handed over. spin: poll with capped, jittered exponential backoff (no pub/sub).
    /// Neither sleeps past the holder's expiry.
    #[arg(
        long,
        value_name = "MODE",
        env = "DISTLOCK_WAIT_MODE",
        default_value = "notify"
    )]
    pub wait_mode: WaitMode,

    /// Let up to N holders in at once (a counting semaphore); 1, the default, is a mutex.
    ///
    /// Every holder has its own token, renewal and release. Everyone who uses KEY must give the
    /// same limit: a key held as a mutex, or as a semaphore of another limit, is refused.
    #[arg(
        long,
        value_name = "N",
        env = "DISTLOCK_LIMIT",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=10_000)
    )]
    pub limit: u32,

    /// Hold KEY shared (a reader): shared holders hold it together, an exclusive one alone.
    ///
    /// Without it a run is exclusive (a writer). The line is first come, first served across
    /// both: a waiting exclusive run holds back shared runs that come after it, and the shared
    /// runs at the head of the line start together when it ends. Unlike flock -s, -n --shared
    /// is busy while an exclusive run waits. The command gets DISTLOCK_MODE=shared (exclusive
    /// otherwise) and no DISTLOCK_SLOT. Not with --limit, --supersede, --replace,
    /// --min-interval, --cooldown, nor a Redlock (several URLs). A shared run inside an
    /// exclusive one reenters it; an exclusive run inside a shared one is refused (65).
    #[arg(long, env = "DISTLOCK_SHARED")]
    pub shared: bool,

    /// Hold this one key shared (a reader), the other keys exclusive; repeatable.
    ///
    /// For a set of mixed modes: -k db -k deploy --shared-key db reads db beside other
    /// readers of db while holding deploy alone. Each key keeps its own line and mode, and
    /// the command gets DISTLOCK_MODE<i> per key. KEY must be one of the -k keys. Not with
    /// --shared (which makes every key shared), nor with what --shared refuses (--limit,
    /// --supersede, --replace, --min-interval, --cooldown, a Redlock).
    #[arg(long, value_name = "KEY")]
    pub shared_key: Vec<String>,

    /// Newest wins: join the line and cancel every waiter that joined before (not the holder).
    ///
    /// Each cancelled waiter leaves the line at once, says who superseded it, and exits with
    /// the -E code (75 by default; -E 0 makes it a quiet skip). Needs a wait (not --no-wait)
    /// and one Redis deployment: a Redlock (several URLs) keeps no line, and refuses it.
    #[arg(long)]
    pub supersede: bool,

    /// Newest replaces the running one: stop the holder's command, then take the lock.
    ///
    /// Cancels the older waiters as --supersede does, and asks the holder to stop: its own
    /// distlock run stops its command with the usual policy (--kill-signal, then SIGKILL after
    /// --kill-grace), releases the lock once the command and everything it started are gone,
    /// and exits with its -E code (75 by default), saying it was replaced by whom. This run
    /// starts only then: never while the old command may still run. A holder that is not a
    /// distlock run (an acquire, another client) is waited for. Needs a wait (not --no-wait), a
    /// mutex (not --limit) and one Redis deployment (a Redlock keeps no line).
    #[arg(long)]
    pub replace: bool,

    /// A reason, stored with the lock and shown to whoever waits for it or asks about it.
    #[arg(long, value_name = "TEXT", env = "DISTLOCK_NOTE")]
    pub note: Option<String>,

    /// Without a terminal, print a "still waiting" line this often while waiting.
    #[arg(
        long,
        value_name = "DUR",
        env = "DISTLOCK_REPORT_EVERY",
        default_value = "30s",
        value_parser = parse_duration
    )]
    pub report_every: DurationArg,

    /// At most one run per period: keep the lock taken this long after a good run started.
    ///
    /// After a run that succeeded (exit 0), the lock stays taken until this long after the run
    /// started. For a cron entry on several hosts: a host whose cron fires late finds the lock taken
    /// ("it ran recently") instead of free, and with -n skips (the -E code; -n -E 0 skips
    /// quietly); waiters wait until the period is over (within --wait). A run that failed
    /// (non-zero exit, a signal, a lost lock) leaves the lock free at once, so that the next
    /// host can retry. status shows the lock cooling down; break clears it. A mutex only (not
    /// with --limit). For acquire, distlock release applies it (release --failed does not).
    #[arg(
        long,
        value_name = "DUR",
        env = "DISTLOCK_MIN_INTERVAL",
        value_parser = parse_duration
    )]
    pub min_interval: Option<DurationArg>,

    /// After a run that succeeded, keep the lock taken this long after the run ended.
    ///
    /// As --min-interval, counted from the end of the run instead of its start; with both,
    /// the later of the two ends the cool-down.
    #[arg(
        long,
        value_name = "DUR",
        env = "DISTLOCK_COOLDOWN",
        value_parser = parse_duration
    )]
    pub cooldown: Option<DurationArg>,

    /// Give up (exit 69) on a Redis that has not answered once within this long.
    ///
    /// A server that has never answered since distlock started (wrong host or port, a firewall
    /// that drops packets, TLS against plain text) is a configuration problem, not a wait:
    /// refused connections, TLS, authentication and protocol errors end the wait at once;
    /// timeouts are retried until this limit, then reported. Once Redis has answered, failures
    /// are retried within --wait and reported every --report-every.
    #[arg(
        long,
        value_name = "DUR",
        env = "DISTLOCK_UNREACHABLE_AFTER",
        default_value = "30s",
        value_parser = parse_duration
    )]
    pub unreachable_after: DurationArg,
}

/// `distlock run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub take: TakeArgs,

    /// Renew the lock this often while the command runs (default: a third of --ttl).
    #[arg(
        long,
        value_name = "DUR",
        env = "DISTLOCK_RENEW_EVERY",
        value_parser = parse_duration
    )]
    pub renew_every: Option<DurationArg>,

    /// Signal that stops the command (lock lost, --timeout, --replace) (name or number).
    #[arg(
        long,
        value_name = "SIG",
        env = "DISTLOCK_KILL_SIGNAL",
        default_value = "TERM",
        value_parser = parse_signal
    )]
    pub kill_signal: i32,

    /// Time between --kill-signal and SIGKILL (default: 5s, or a fifth of --ttl if shorter).
    ///
    /// Both signals go to the command's whole process group, timed so that the group is dead
    /// before the lock can expire in Redis.
    #[arg(
        long,
        value_name = "DUR",
        env = "DISTLOCK_KILL_GRACE",
        value_parser = parse_duration
    )]
    pub kill_grace: Option<DurationArg>,

    /// Stop the command if it runs longer than this, release the lock, and exit 79.
    ///
    /// Counted from the command's start. The command's process group gets --kill-signal, then
    /// SIGKILL after --kill-grace, as when the lock is lost; the lock is kept (renewed) until
    /// the group is gone, then released. 79 is distlock's own code, unlike timeout(1)'s 124,
    /// which distlock uses for a lost lock. Renewals keep a hung job's lock forever: this is
    /// the bound on a job that must not block every later run.
    #[arg(
        long,
        value_name = "DUR",
        env = "DISTLOCK_TIMEOUT",
        value_parser = parse_duration
    )]
    pub timeout: Option<DurationArg>,

    /// Warn once the command has held the lock this long (held-too-long; stored with the lock).
    ///
    /// One warning (the held-too-long event, and --hook) while the command goes on running.
    /// The value is stored with the holder as warn_after_ms: status and list show a hold past
    /// it, and distlock check warns past it when it is given no -w.
    #[arg(
        long,
        value_name = "DUR",
        env = "DISTLOCK_WARN_AFTER",
        value_parser = parse_duration
    )]
    pub warn_after: Option<DurationArg>,

    /// Warn once the wait for the lock has lasted this long, naming the holder (long-wait).
    ///
    /// One warning (the long-wait event, and --hook); the wait goes on (within --wait).
    #[arg(
        long,
        value_name = "DUR",
        env = "DISTLOCK_WARN_WAIT",
        value_parser = parse_duration
    )]
    pub warn_wait: Option<DurationArg>,

    /// Run CMD with /bin/sh -c on the events of --hook-events, the event's JSON line on stdin.
    ///
    /// To alert: e.g. DISTLOCK_HOOK='curl -fsS -m 10 --data-binary @- "$ALERT_URL"'. Its
    /// environment is distlock's, without DISTLOCK_TOKEN, DISTLOCK_HELD and DISTLOCK_HOOK,
    /// with DISTLOCK_EVENT, DISTLOCK_KEY, DISTLOCK_ID (once the lock is held), and when the
    /// event says them DISTLOCK_EXIT, DISTLOCK_REASON (why a lock was lost), DISTLOCK_WAITED_MS,
    /// DISTLOCK_HOLDER_HOST and DISTLOCK_HOLDER_PID (who holds it). Nothing is substituted
    /// into CMD. It runs in a process group of its own, once per event and run; its output
    /// goes to distlock's stderr (stdout is the command's). For a lost lock it starts after the
    /// command's group was killed. A hook that fails is a hook-failed warning: distlock's exit
    /// code stays the command's.
    #[arg(long, value_name = "CMD", env = "DISTLOCK_HOOK")]
    pub hook: Option<String>,

    /// The events that run --hook, comma-separated; all adds acquired, released, superseded,
    /// replaced.
    ///
    /// Names as in --log-format json: lost, timed-out, held-too-long (--warn-after),
    /// long-wait (--warn-wait) and busy (gave up; not with -E 0, a quiet skip) by default.
    #[arg(
        long,
        value_name = "LIST",
        env = "DISTLOCK_HOOK_EVENTS",
        default_value = "lost,timed-out,held-too-long,long-wait,busy"
    )]
    pub hook_events: String,

    /// How long distlock waits for a running --hook before it exits (0s: not at all).
    ///
    /// Counted from the hook's start. A hook still running then gets SIGTERM, and SIGKILL a
    /// second later, and is reported (hook-failed).
    #[arg(
        long,
        value_name = "DUR",
        env = "DISTLOCK_HOOK_TIMEOUT",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub hook_timeout: DurationArg,

    /// The command to run, and its arguments (put them after --).
    #[arg(
        value_name = "COMMAND",
        required = true,
        num_args = 1..,
        trailing_var_arg = true
    )]
    pub command: Vec<OsString>,
}

/// `distlock status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Name of the lock.
    #[arg(short, long, value_name = "KEY")]
    pub key: String,

    /// Print JSON (one object) instead of text.
    ///
    /// key, redis_key, held, ttl_ms, held_for_ms, acquired_at and holder describe the holder
    /// (a semaphore's oldest); fence is its fencing token; cooldown, present only when a run
    /// that succeeded keeps the lock taken (--min-interval, --cooldown), says when it ended
    /// and when the next may start (ended_ms_ago, ended_at, next_at, min_interval_ms,
    /// cooldown_ms); limit is 1 for a mutex, N for a semaphore, 0 when free; holders lists
    /// every holder (id, ttl_ms, held_for_ms, acquired_at, fence, slot for a semaphore,
    /// holder) and waiting every waiter, first in line first (position, waited_ms, since,
    /// limit, holder).
    #[arg(long)]
    pub json: bool,
}

/// `distlock check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Name of the lock.
    #[arg(short, long, value_name = "KEY")]
    pub key: String,

    /// WARNING when a holder has held the lock longer than this (its oldest holder's hold).
    ///
    /// Default: the --warn-after that holder's distlock run was given (stored with the lock as
    /// warn_after_ms); none when it was given none.
    #[arg(short = 'w', long, value_name = "DUR", value_parser = parse_duration)]
    pub warning: Option<DurationArg>,

    /// CRITICAL when a holder has held the lock longer than this.
    #[arg(short = 'c', long, value_name = "DUR", value_parser = parse_duration)]
    pub critical: Option<DurationArg>,

    /// WARNING when the first waiter in line has waited longer than this.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub warn_wait: Option<DurationArg>,

    /// CRITICAL when the first waiter in line has waited longer than this.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub crit_wait: Option<DurationArg>,

    /// CRITICAL when the lock's history records no successful run within this long.
    ///
    /// A successful run: a released event of a run whose command exited 0, or of a distlock
    /// release without --failed. Needs the lock's history (--history): a lock without one is
    /// UNKNOWN, a history without a success in it (within DUR, or at all) CRITICAL. Measured
    /// against this machine's clock (events carry the Redis server's).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub crit_since_success: Option<DurationArg>,
}

/// `distlock list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only locks whose key matches this glob (* ? [...]), e.g. 'deploy-*'.
    #[arg(value_name = "PATTERN", default_value = "*")]
    pub pattern: String,

    /// Print JSON (an array of what status --json prints) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `distlock metrics`.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Only locks whose key matches this glob (* ? [...]), e.g. 'deploy-*'.
    #[arg(value_name = "PATTERN", default_value = "*")]
    pub pattern: String,

    /// Write the metrics to FILE instead of stdout, atomically, mode 0644.
    ///
    /// Written to a temporary file in FILE's directory (.NAME.PID.tmp, which node_exporter's
    /// textfile collector ignores) and renamed over FILE, so that a reader never sees half a
    /// file; the mode is 0644 whatever the umask, so that node_exporter can read it as another
    /// user. When Redis cannot be reached, FILE is still replaced, with distlock_up 0, so that
    /// nothing stale is served.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Add the label NAME="VALUE" to every series (repeat for more).
    ///
    /// To tell apart two deployments collected on one host, e.g. --label redis=prod. NAME
    /// cannot be one distlock sets (key, event, le, host, kind) or start with __.
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_label)]
    pub label: Vec<(String, String)>,
}

/// `distlock break`.
#[derive(Debug, Args)]
pub struct BreakArgs {
    /// Name of the lock.
    #[arg(short, long, value_name = "KEY")]
    pub key: String,

    /// Break only the holder with this id (as distlock status shows it; 4 characters or more).
    ///
    /// An id is the start of the holder's token: its first 4 characters or more name it. An id
    /// that matches several holders is refused, listing their ids (exit 64); one that matches
    /// none breaks nothing (exit 1).
    #[arg(long, value_name = "ID")]
    pub holder: Option<String>,

    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(short = 'y', long)]
    pub yes: bool,
}

/// `distlock acquire`.
#[derive(Debug, Args)]
pub struct AcquireArgs {
    #[command(flatten)]
    pub take: TakeArgs,

    /// Append the lock's DISTLOCK_KEY, DISTLOCK_FENCE and DISTLOCK_TOKEN to FILE; print nothing.
    ///
    /// Only once the lock is held: when it is busy, Redis is unreachable or distlock is
    /// interrupted, FILE is left untouched and the exit is non-zero, so that one line fails a
    /// CI step that did not get the lock (--env-file "$GITHUB_ENV" in GitHub Actions, a dotenv
    /// file in GitLab CI). Appends NAME=value lines in one write: DISTLOCK_KEY,
    /// DISTLOCK_TTL_MS, DISTLOCK_FENCE, DISTLOCK_SLOT with --limit N, DISTLOCK_TOKEN, and
    /// DISTLOCK_PREFIX when --prefix is not the default;
    /// never the Redis URL. Nothing goes to stdout, which keeps the token out of CI logs. Later
    /// steps with these in their environment run distlock renew and distlock release without
    /// --key and --token. If FILE cannot be written after all, the lock is released and
    /// distlock exits 74.
    #[arg(long, value_name = "FILE")]
    pub env_file: Option<PathBuf>,

    /// Print one JSON object instead of the bare token: key, token, fence, TTL and limit.
    #[arg(long, conflicts_with = "env_file")]
    pub json: bool,
}

/// The lock and token of `renew` and `release`.
#[derive(Debug, Args)]
pub struct HeldArgs {
    /// Name of the lock.
    ///
    /// When absent, read from DISTLOCK_KEY, as the token is from DISTLOCK_TOKEN: a later step
    /// that has both in its environment (distlock acquire --env-file writes them) needs neither
    /// flag. Without either, the keys of a set come from DISTLOCK_KEYS, DISTLOCK_KEY<i> and
    /// DISTLOCK_TOKEN<i> (what acquire --env-file writes for several keys): every key is
    /// renewed or released.
    #[arg(
        short,
        long,
        value_name = "KEY",
        env = "DISTLOCK_KEY",
        hide_env_values = true
    )]
    pub key: Option<String>,

    /// The token printed by distlock acquire (or written to its --env-file as DISTLOCK_TOKEN).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "DISTLOCK_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

/// `distlock renew`.
#[derive(Debug, Args)]
pub struct RenewArgs {
    #[command(flatten)]
    pub held: HeldArgs,

    /// New lifetime from now (default: the TTL the lock was acquired with).
    #[arg(short, long, value_name = "DUR", value_parser = parse_duration)]
    pub ttl: Option<DurationArg>,
}

/// `distlock release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub held: HeldArgs,

    /// The work under the lock failed: free it at once (no --min-interval or --cooldown).
    ///
    /// A lock acquired with --min-interval or --cooldown otherwise stays taken after the
    /// release until the interval has passed.
    #[arg(long)]
    pub failed: bool,
}
