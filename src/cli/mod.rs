//! The command-line definition: the one source of `--help`, the man pages and the shell
//! completions.
//!
//! This module only describes what a user may type and checks each value's own syntax
//! (durations need a unit, signals must exist). Every decision that involves more than one flag,
//! and every default derived from another flag, lives in [`crate::config`]; nothing but `config`
//! reads these types.
//!
//! The parts: this file (the top level: [`Cli`], the global options, the subcommands), [`args`]
//! (each subcommand's options), [`values`] (the syntax of single values) and [`usage`] (a command
//! line clap refused, reworded as distlock's one-line errors).

pub mod args;
pub mod history;
pub mod usage;
pub mod values;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use args::*;
pub use values::*;

/// What `distlock --version` says: the version, and the commit and date it was built from when
/// built from a git checkout (`0.1.0 (8324320 2026-11-25)`; see `build.rs`). Holder metadata
/// and the man pages use the plain `CARGO_PKG_VERSION`.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), env!("DISTLOCK_BUILD_INFO"));

/// Run a command as a critical section guarded by a Redis lock.
///
/// distlock acquires a lock in Redis (waiting for it if another process holds it), runs the
/// command, renews the lock while the command runs, kills the command's whole process group if
/// the lock can no longer be kept, and releases the lock when the command exits. Use it for cron
/// jobs, scripts and CI steps that must never run twice at once, on one machine or many.
#[derive(Debug, Parser)]
#[command(
    name = "distlock",
    version = VERSION,
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
        default_value = crate::lock::DEFAULT_PREFIX
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
// One value per process, parsed once: boxing `run`'s arguments would buy nothing.
#[allow(clippy::large_enum_variant)]
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
    /// and with --limit N its slot, DISTLOCK_SLOT (0 to N-1, no two holders at once alike);
    /// with several keys, DISTLOCK_KEYS and per key DISTLOCK_KEY<i>, DISTLOCK_FENCE<i>,
    /// DISTLOCK_TOKEN<i> and DISTLOCK_MODE<i> (shared or exclusive) instead.
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
    /// been held, when it expires, how many wait, and the command or note. A lock that a newer
    /// distlock stores in a newer key layout (protocol N) has a row of its own saying so
    /// (holder "(protocol N)"): upgrade distlock to manage it. Uses SCAN (never KEYS), so it
    /// does not block the server. An aligned table on a terminal, tab-separated lines
    /// otherwise, or JSON with --json (an array of what status --json prints).
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
    /// expired (a holder that vanished, or a lock handed to a waiter that never took it up,
    /// noticed by the next one), broken (by whom), superseded (by whom), gave-up (a waiter that
    /// left after --wait, or was killed in line: its place lapsed). Each names the holder
    /// (host, pid, note or command) and its id (the first 8 characters of its token). Without
    /// -k, every lock under the prefix, merged by time. Events are kept only for locks taken
    /// with --history (see there); a lock without a history prints nothing. Over a Redlock,
    /// each event shows once when a majority of the nodes recorded it, saying when some did
    /// not.
    Log(history::LogArgs),

    /// Count a lock's events and summarise how long holders waited and held it.
    ///
    /// Per lock: how many of each event (and how many gave-up were lapsed places), and the
    /// wait (acquired) and hold (released, lost, expired, broken) times as p50, p95 and max;
    /// on a terminal, a small histogram of each. With --timeline, one lock's holds and waits
    /// as a text chart instead: one lane per host, lost, broken and expired marked, a time
    /// axis and a legend. A lock without a history says so on stderr and exits 0.
    Stats(history::StatsArgs),

    /// Check a lock for a monitoring system: one line, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    ///
    /// The monitoring-plugins convention (Nagios, Icinga, Naemon, Sensu, Consul script
    /// checks): one line on stdout, "DISTLOCK STATE: what it found | performance data"
    /// (held, holders, waiters, oldest_wait, and since_success with --crit-since-success, in
    /// seconds with their thresholds), and the state as exit code. Hold and wait times are on
    /// the Redis server's clock, as status shows them; a mutex kept taken after a run that
    /// succeeded (--min-interval, --cooldown) is not held. Without thresholds it only checks
    /// that the lock can be read. Whatever goes wrong (Redis unreachable, a key that is not a
    /// lock, a bad argument) is UNKNOWN, exit 3, never another code.
    Check(args::CheckArgs),

    /// Print the state of every lock as Prometheus metrics, for node_exporter or a Pushgateway.
    ///
    /// Prometheus' text format (0.0.4): per lock (every lock held, waited for or with a
    /// history under the prefix; every primary of a Cluster; what a majority of a Redlock's
    /// nodes agrees on) its holders, limit, waiters, when its oldest holder took it and its
    /// first waiter joined (Unix timestamps on the Redis server's clock), the holder's
    /// --warn-after, the holding hosts (distlock_lock_holder_info), a Redlock's split; with a
    /// history (--history), every event counted (not only those the history still holds),
    /// wait and hold histograms and when a run last succeeded. distlock_up says whether Redis
    /// answered. The same state prints the same bytes. Recipes for node_exporter's textfile
    /// collector, a Pushgateway and alert rules: docs/monitoring.md.
    Metrics(args::MetricsArgs),
}

/// The command line of `distlock run ...` only: [`Cli`]'s top level and its `run` subcommand,
/// without the other subcommands. clap builds every subcommand it knows before parsing and
/// copies each global option into each of them (about 150 KB of heap and 40 page faults per
/// run), which a `run`, the call whose start-up counts, never uses. Parsing with this gives
/// the same [`Cli`] as [`Cli`]'s own command (tested below); help, version and every error
/// are left to the full command (see `crate::main`).
pub fn run_command() -> clap::Command {
    use clap::Args;
    let top = clap::Command::new("distlock")
        .version(VERSION)
        .propagate_version(true)
        .subcommand_required(true)
        .arg_required_else_help(true);
    GlobalArgs::augment_args(top).subcommand(RunArgs::augment_args(clap::Command::new("run")))
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `run_command` gives what the full command gives, to the last field and origin; what it
    /// refuses, the full command reports (see `crate::main`).
    #[test]
    fn the_run_command_parses_a_run_as_the_full_command_does() {
        let parse = |mut command: clap::Command, line: &[&str]| {
            command.try_get_matches_from_mut(line).and_then(|m| {
                let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&m)?;
                let origins = crate::config::Origins::of(&command, &m);
                Ok(format!("{cli:?} {origins:?}"))
            })
        };
        for line in [
            &["distlock", "run", "-k", "k", "--", "true"][..],
            &["distlock", "run", "-k", "k", "--ttl", "10s", "--", "true"],
            &[
                "distlock", "run", "-k", "k", "-n", "-E", "0", "--note", "n", "--", "sh", "-c", "x",
            ],
            &[
                "distlock",
                "run",
                "--redis",
                "redis://h:1",
                "--redis",
                "redis://h:2",
                "-k",
                "k",
                "-q",
                "--log-format",
                "json",
                "--history",
                "1h",
                "--timeout",
                "5s",
                "true",
                "a",
            ],
            &[
                "distlock",
                "run",
                "-k",
                "k",
                "--limit",
                "3",
                "--wait",
                "1m",
                "--wait-mode",
                "spin",
                "--kill-signal",
                "INT",
                "--kill-grace",
                "2s",
                "-v",
                "--",
                "true",
                "--ttl",
            ],
            &[
                "distlock",
                "run",
                "--prefix",
                "p:",
                "--tls-ca",
                "/x",
                "-k",
                "k",
                "--replace",
                "--min-interval",
                "1h",
                "--renew-every",
                "1s",
                "--",
                "true",
            ],
            // Global options before the subcommand (the form the README and the benchmark use).
            &[
                "distlock",
                "--redis",
                "redis://127.0.0.1:1",
                "-q",
                "run",
                "--key",
                "k",
                "--wait-mode",
                "notify",
                "--",
                "true",
            ],
            &[
                "distlock", "-v", "--redis", "run", "run", "-k", "run", "--", "run",
            ],
        ] {
            let full = parse(Cli::command(), line).unwrap();
            assert_eq!(parse(run_command(), line).unwrap(), full, "{line:?}");
        }
        // What it refuses, it refuses (the full command then says why).
        for line in [
            &["distlock", "run", "--help"][..],
            &["distlock", "run", "--version"],
            &["distlock", "run", "-k", "k", "--ttl", "soon", "--", "true"],
            &["distlock", "run", "--bogus"],
            &["distlock", "status", "--key", "run"],
            &["distlock", "-q", "list", "run"],
        ] {
            assert!(parse(run_command(), line).is_err(), "{line:?}");
        }
    }

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
}
