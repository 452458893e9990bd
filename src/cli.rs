//! The command-line definition: the one source of `--help`, the man pages and the shell
//! completions.
//!
//! This module only describes what a user may type and checks each value's own syntax
//! (durations need a unit, signals must exist). Every decision that involves more than one flag,
//! and every default derived from another flag, lives in [`crate::config`]; nothing but `config`
//! reads these types.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::exit;

/// Run a command as a critical section guarded by a Redis lock.
///
/// distlock acquires a lock in Redis (waiting for it if another process holds it), runs the
/// command, renews the lock while the command runs, kills the command's whole process group if
/// the lock can no longer be kept, and releases the lock when the command exits. Use it for cron
/// jobs, scripts and CI steps that must never run twice at once, on one machine or many.
#[derive(Debug, Parser)]
#[command(
    name = "distlock",
    version = crate::VERSION,
    propagate_version = true,
    max_term_width = 100,
    help_expected = true,
    after_help = "Run 'distlock COMMAND --help' for a command's options, exit codes and examples."
)]
pub struct Cli {
    #[command(flatten, next_help_heading = "Global options")]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// Options accepted before or after the subcommand.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL.
    ///
    /// redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... (TLS) or unix:///PATH: one
    /// server. Given several times (or several URLs separated by whitespace in
    /// DISTLOCK_REDIS_URL): independent primaries, and the lock is a Redlock over them.
    /// redis+sentinel://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/SERVICE[/DB]: the primary
    /// the sentinels name. redis+cluster://HOST:PORT[,HOST:PORT...]: a Redis Cluster. When
    /// absent, read from DISTLOCK_REDIS_URL, then REDIS_URL, else redis://127.0.0.1:6379. The
    /// password never appears in any output.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "DISTLOCK_REDIS_URL",
        hide_env_values = true,
        action = clap::ArgAction::Append
    )]
    pub redis: Vec<String>,

    /// Redlock only: each node's time to answer one request (default: 5% of the TTL, 50-500ms).
    ///
    /// At most --redis-timeout. A node that does not answer in time counts as a "no"; a
    /// minority of slow or dead nodes costs no more than this. Commands that take no lock
    /// (status, list, break, renew, release) default to --redis-timeout.
    #[arg(
        long,
        global = true,
        value_name = "DUR",
        env = "DISTLOCK_NODE_TIMEOUT",
        value_parser = parse_duration
    )]
    pub node_timeout: Option<DurationArg>,

    /// After acquiring and after each renewal, wait until N replicas have the write (WAIT).
    ///
    /// One primary only (plain URL, Sentinel, or a Cluster shard). A grant that is not
    /// acknowledged in time is released (exit 69, saying how many replicas answered); a renewal
    /// that is not acknowledged does not count (the kill deadline stays where the last
    /// acknowledged one put it). Narrows, does not close, the window in which a failover can
    /// let a second holder in.
    #[arg(
        long,
        global = true,
        value_name = "N",
        env = "DISTLOCK_REPLICAS",
        value_parser = clap::value_parser!(u32).range(1..=100)
    )]
    pub replicas: Option<u32>,

    /// How long --replicas waits for the acknowledgements, per write (at most --redis-timeout).
    #[arg(
        long,
        global = true,
        value_name = "DUR",
        env = "DISTLOCK_REPLICAS_TIMEOUT",
        default_value = "1s",
        value_parser = parse_duration
    )]
    pub replicas_timeout: DurationArg,

    /// Prefix of every Redis key distlock writes.
    ///
    /// The lock for KEY lives at PREFIX{KEY}. Must not contain braces.
    #[arg(
        long,
        global = true,
        value_name = "PREFIX",
        env = "DISTLOCK_PREFIX",
        default_value = crate::config::DEFAULT_PREFIX
    )]
    pub prefix: String,

    /// Timeout for connecting to Redis and for each command.
    ///
    /// A command that gets no reply within it counts as failed (and, for an acquire, as possibly
    /// applied: distlock then checks whether it holds the lock).
    #[arg(
        long,
        global = true,
        value_name = "DUR",
        env = "DISTLOCK_REDIS_TIMEOUT",
        default_value = "2s",
        value_parser = parse_duration
    )]
    pub redis_timeout: DurationArg,

    /// CA certificate bundle (PEM) to trust for rediss:// instead of the system's roots.
    ///
    /// To skip verification altogether (test servers only), end the URL with #insecure.
    #[arg(long, global = true, value_name = "FILE", env = "DISTLOCK_TLS_CA")]
    pub tls_ca: Option<PathBuf>,

    /// Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key.
    #[arg(long, global = true, value_name = "FILE", env = "DISTLOCK_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// Private key (PEM) of --tls-cert.
    #[arg(long, global = true, value_name = "FILE", env = "DISTLOCK_TLS_KEY")]
    pub tls_key: Option<PathBuf>,

    /// Explain each step on stderr (connection, acquire, renewals, release). Wins over -q.
    #[arg(short, long, global = true)]
    pub verbose: bool,

    /// Print nothing but errors that explain a failing exit of distlock's own.
    ///
    /// Waiting notices, "lock busy" and warnings are silenced.
    #[arg(
        short,
        long,
        global = true,
        env = "DISTLOCK_QUIET",
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub quiet: bool,

    /// How messages on stderr are written: text (distlock: ...) or json (one object a line).
    ///
    /// With json, every message distlock writes on stderr is one line holding one JSON object:
    /// "ts" (RFC 3339, UTC, milliseconds), "level" (error, warning, notice, or debug for -v),
    /// "key" (the lock's key, null when the message is about no lock), "event" (a stable name
    /// from the list below), "msg" (what text mode prints after "distlock: "), and where they
    /// apply "exit" (the exit code the message explains), "signal", "waited_ms" and "holder"
    /// ({"host", "pid"}). -q and -v work as in text mode; the live status line of a waiter is
    /// replaced by lines. Errors in the command line itself are JSON too, when --log-format json
    /// is among the arguments or DISTLOCK_LOG_FORMAT=json is set.
    #[arg(
        long,
        global = true,
        value_name = "FORMAT",
        env = "DISTLOCK_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,

    /// Keep a history of each lock taken (who held it, how long, who waited) for DUR.
    ///
    /// At least 1s. The events go beside the lock, at PREFIX{KEY}:history (at most 1000 per
    /// lock, oldest dropped), and expire DUR after the last one; distlock log and distlock
    /// stats read them. Once a lock has a history, every distlock that takes it records into
    /// it, with this flag or without. distlock log -k KEY --clear deletes a history.
    #[arg(
        long,
        global = true,
        value_name = "DUR",
        env = "DISTLOCK_HISTORY",
        value_parser = parse_duration
    )]
    pub history: Option<DurationArg>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command while holding a lock.
    ///
    /// Acquires the lock KEY (waiting for it unless --no-wait), runs COMMAND with its arguments
    /// (directly, not through a shell) in its own process group, renews the lock in the
    /// background, and releases it when COMMAND exits. If the lock cannot be renewed, COMMAND's
    /// whole process group is terminated before the lock can expire in Redis, and distlock exits
    /// with 124.
    ///
    /// COMMAND inherits stdin, stdout and stderr (distlock writes only to stderr) and gets
    /// DISTLOCK_KEY, DISTLOCK_TOKEN, DISTLOCK_FENCE and DISTLOCK_TTL_MS in its environment,
    /// and with --limit N its slot, DISTLOCK_SLOT (0 to N-1, no two holders at once alike).
    Run(RunArgs),

    /// Show whether a lock is held, by whom, since when, until when, and who waits for it.
    ///
    /// For each holder: host, pid, user, command, note, CI job, how long it has held the lock,
    /// when it expires, and its fence; for a semaphore (--limit N), every holder, each named by
    /// a short id (the start of its token) that distlock break --holder takes. Then the waiters,
    /// first in line first: host, pid, note, CI job, and how long each has waited.
    ///
    /// Exits 0 when the lock is held and 1 when it is free (even with waiters: a lock being
    /// handed over), so that scripts can branch on it. Over a Redlock (several URLs), a lock
    /// whose nodes answer but agree on no holder by a majority is split: status lists what each
    /// node holds and exits 75 (nobody can take it until their locks expire). Nodes of a
    /// Redlock that did not answer (while a majority did) are listed after the lock, with
    /// their errors.
    Status(StatusArgs),

    /// List the locks under the prefix, with holders, age, time left and waiters.
    ///
    /// One row per lock that is held or waited for: its holder as HOST:PID (a semaphore's as
    /// 2/4 HOST:PID: how many of its slots are held, and its oldest holder), how long it has
    /// been held, when it expires, how many wait, and the command or note. Uses SCAN (never
    /// KEYS), so it does not block the server. An aligned table on a terminal, tab-separated
    /// lines otherwise, or JSON with --json (an array of what status --json prints).
    List(ListArgs),

    /// Break a lock whoever holds it (every holder of a semaphore, or one), after showing who.
    ///
    /// Asks for confirmation on a terminal; requires --yes otherwise. Each holder shown is
    /// released by the token it had when it was shown: one that left meanwhile, or a newer
    /// holder in its place, is never broken. The lock (or each slot) then passes to the next
    /// waiter in line. A broken holder's next renewal finds the lock gone and, for distlock run,
    /// terminates its command (exit 124). With --holder ID, only the holder of that id (as
    /// distlock status shows it) is broken.
    ///
    /// Over a Redlock (several URLs), a split lock (no holder has a majority of the nodes) shows
    /// each node's holder and releases every token that some node holds, each by its token on
    /// every node, so that the lock is free at once instead of when the nodes' locks expire
    /// (--holder ID: that token alone).
    #[command(visible_alias = "force-release")]
    Break(BreakArgs),

    /// Acquire a lock and print its token, for locks that span several CI steps or scripts.
    ///
    /// The token (and nothing else) goes to stdout, or with --env-file into a file that later CI
    /// steps load. Nothing renews the lock: choose a --ttl that covers the work, or call
    /// distlock renew; release it with distlock release.
    Acquire(AcquireArgs),

    /// Extend a lock acquired with distlock acquire.
    Renew(RenewArgs),

    /// Release a lock acquired with distlock acquire.
    Release(ReleaseArgs),

    /// Show a lock's history: who held it, for how long, who waited, who broke it.
    ///
    /// One line per event, newest last: acquired (how long it waited, its place when it joined
    /// the line, the fence), released (how long it was held, the command's exit), lost,
    /// expired (a holder that vanished, noticed by the next one), broken (by whom),
    /// superseded (by whom), gave-up (a waiter that left after --wait). Each names the holder
    /// (host, pid, note or command) and its id (the first 8 characters of its token). Without
    /// -k, every lock under the prefix, merged by time. Events are kept only for locks taken
    /// with --history (see there); a lock without a history prints nothing. Over a Redlock,
    /// each event shows once when a majority of the nodes recorded it, saying when some did
    /// not.
    Log(crate::history::cli::LogArgs),

    /// Count a lock's events and summarise how long holders waited and held it.
    ///
    /// Per lock: how many of each event, and the wait (acquired) and hold (released, lost,
    /// expired, broken) times as p50, p95 and max; on a terminal, a small histogram of each.
    /// A lock without a history says so on stderr and exits 0.
    Stats(crate::history::cli::StatsArgs),

    /// Write the shell completions or the man pages (for packagers).
    #[command(hide = true)]
    Generate(GenerateArgs),
}

/// Options shared by the commands that take a lock (`run`, `acquire`).
#[derive(Debug, Args)]
pub struct TakeArgs {
    /// Name of the lock.
    ///
    /// Up to 256 bytes of printable characters without whitespace, braces, backslashes or glob
    /// characters (* ? [ ]). Processes that use the same key (and prefix) on the same Redis
    /// exclude each other.
    #[arg(short, long, value_name = "KEY")]
    pub key: String,

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
        default_value_t = exit::BUSY
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
    /// flag.
    #[arg(
        short,
        long,
        value_name = "KEY",
        env = "DISTLOCK_KEY",
        hide_env_values = true
    )]
    pub key: String,

    /// The token printed by distlock acquire (or written to its --env-file as DISTLOCK_TOKEN).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "DISTLOCK_TOKEN",
        hide_env_values = true
    )]
    pub token: String,
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

/// `distlock generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// What to write (default: both).
    #[arg(value_name = "WHAT")]
    pub what: Option<Generated>,

    /// Directory that holds completions/ and man/ (default: the current one).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Generated files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Generated {
    /// bash, zsh, fish, elvish and PowerShell completions.
    Completions,
    /// distlock.1 and one page per subcommand.
    Man,
}

/// How messages are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line per message, prefixed "distlock: ".
    Text,
    /// One JSON object per line.
    Json,
}

/// How a waiter learns that the lock may be free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WaitMode {
    /// Sleep until the holder's release is published, or its lock expires.
    Notify,
    /// Poll with capped, jittered exponential backoff.
    Spin,
}

/// The command-line definition with the long texts that only `--help`, the man pages and the
/// completions need (exit codes and examples per subcommand). Building them costs more than
/// parsing a command line, so plain runs use the bare [`Cli`] definition.
pub fn documented_command() -> clap::Command {
    use clap::CommandFactory;
    let mut command = Cli::command()
        .after_long_help(crate::help::after_help(""))
        .mut_arg("log_format", |arg| {
            let text = arg.get_long_help().map(ToString::to_string);
            arg.long_help(format!(
                "{}\n\nEvents (a number in parentheses is the exit code that follows):\n{}",
                text.unwrap_or_default(),
                crate::output::event_table().trim_end()
            ))
        });
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        let text = crate::help::after_help(&name);
        command = command.mut_subcommand(&name, |sub| hide_unset_env(sub.after_long_help(text)));
    }
    hide_unset_env(command)
}

/// clap shows `[env: NAME=]` for a variable that is not set, as if it were set to nothing:
/// show `[env: NAME]` for those, and the value only for variables that are set (secrets are
/// never shown: their arguments hide their values always).
fn hide_unset_env(command: clap::Command) -> clap::Command {
    command.mut_args(|arg| {
        if arg
            .get_env()
            .is_some_and(|var| std::env::var_os(var).is_none())
        {
            arg.hide_env_values(true)
        } else {
            arg
        }
    })
}

/// A duration as the user wrote it: the value, and the text, so that a message about it echoes
/// `25h` rather than a reformatted `1day 1h`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurationArg {
    /// The duration.
    pub value: Duration,
    /// What the user wrote (without surrounding whitespace).
    pub text: String,
}

/// Why a value was refused, worded to follow the value (`has no unit; write 30s ...`), so that
/// the message can say where the value came from: `--ttl 30 has no unit; ...` when typed,
/// `DISTLOCK_TTL=30 (from the environment) has no unit; ...` when read from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadValue(pub String);

impl std::fmt::Display for BadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadValue {}

/// Parse a duration that must carry a unit (`500ms`, `30s`, `5m`, `1h30m`).
pub fn parse_duration(text: &str) -> Result<DurationArg, BadValue> {
    let text = text.trim();
    if text.is_empty() {
        return Err(BadValue(
            "is empty; write a duration with a unit, e.g. 30s".into(),
        ));
    }
    if text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(BadValue(format!(
            "has no unit; write {text}s for seconds or {text}ms for milliseconds"
        )));
    }
    let value = humantime::parse_duration(text).map_err(|e| {
        BadValue(format!(
            "is not a duration ({e}); write e.g. 500ms, 30s, 5m or 1h30m"
        ))
    })?;
    Ok(DurationArg {
        value,
        text: text.to_owned(),
    })
}

/// Parse a signal given as `TERM`, `SIGTERM`, `term` or `15`. Signals that do not end a process
/// (STOP, CONT, CHLD, ...) are refused: they could never stop a command that lost its lock.
pub fn parse_signal(text: &str) -> Result<i32, BadValue> {
    let upper = text.trim().to_ascii_uppercase();
    let signal = if let Ok(n) = upper.parse::<i32>() {
        nix::sys::signal::Signal::try_from(n)
            .map_err(|_| BadValue("is not a signal number on this system; use e.g. TERM".into()))?
    } else {
        let name = if upper.starts_with("SIG") {
            upper.clone()
        } else {
            format!("SIG{upper}")
        };
        name.parse::<nix::sys::signal::Signal>()
            .map_err(|_| BadValue("is not a signal name; use e.g. TERM, INT, HUP or KILL".into()))?
    };
    use nix::sys::signal::Signal::*;
    match signal {
        SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU | SIGCONT | SIGCHLD | SIGWINCH | SIGURG => {
            Err(BadValue(format!(
                "is {}, which does not end a process; use a terminating signal such as TERM, INT or HUP",
                signal.as_str()
            )))
        }
        s => Ok(s as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
        documented_command().debug_assert();
    }

    #[test]
    fn every_argument_is_documented() {
        fn check(command: &clap::Command, path: &str) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                let short = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
                assert!(!short.trim().is_empty(), "{path} {id} has no help");
                assert!(
                    short.trim_end().len() <= 100,
                    "{path} {id}: keep -h to one line"
                );
            }
            for sub in command.get_subcommands() {
                if sub.get_name() != "help" {
                    assert!(
                        sub.get_about().is_some(),
                        "{path} {} has no about",
                        sub.get_name()
                    );
                    check(sub, &format!("{path} {}", sub.get_name()));
                }
            }
        }
        check(&documented_command(), "distlock");
    }

    #[test]
    fn durations_need_units_and_keep_their_text() {
        let parsed = |text| parse_duration(text).map(|d| d.value);
        assert_eq!(parsed("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parsed("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(
            parse_duration(" 25h "),
            Ok(DurationArg {
                value: Duration::from_secs(25 * 3600),
                text: "25h".into()
            })
        );
        let err = parse_duration("30").unwrap_err();
        assert_eq!(
            err.0,
            "has no unit; write 30s for seconds or 30ms for milliseconds"
        );
        assert!(parse_duration("").is_err());
        assert!(parse_duration("soon").unwrap_err().0.contains("e.g."));
    }

    #[test]
    fn signals_by_name_and_number() {
        assert_eq!(parse_signal("TERM"), Ok(libc::SIGTERM));
        assert_eq!(parse_signal("sigint"), Ok(libc::SIGINT));
        assert_eq!(parse_signal("9"), Ok(libc::SIGKILL));
        assert!(parse_signal("STOP").unwrap_err().0.contains("does not end"));
        assert!(parse_signal("FOO").is_err());
        assert!(parse_signal("99").is_err());
    }
}
