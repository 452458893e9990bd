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
    version,
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
    /// Redis server URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... or unix:///PATH.
    ///
    /// When absent, read from DISTLOCK_REDIS_URL, then REDIS_URL, else redis://127.0.0.1:6379.
    /// The password never appears in any output.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "DISTLOCK_REDIS_URL",
        hide_env_values = true
    )]
    pub redis: Option<String>,

    /// Prefix of every Redis key distlock writes.
    ///
    /// The lock for KEY lives at PREFIX{KEY}. Must not contain braces.
    #[arg(
        long,
        global = true,
        value_name = "PREFIX",
        env = "DISTLOCK_PREFIX",
        default_value = "distlock:"
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
    pub redis_timeout: Duration,

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
    /// DISTLOCK_KEY, DISTLOCK_TOKEN and DISTLOCK_TTL_MS in its environment.
    Run(RunArgs),

    /// Show whether a lock is held, by whom, since when, and until when.
    ///
    /// Exits 0 when the lock is held and 1 when it is free, so that scripts can branch on it.
    Status(StatusArgs),

    /// List the locks under the prefix, with holder, age and time left.
    ///
    /// Uses SCAN (never KEYS), so it does not block the server. An aligned table on a terminal,
    /// tab-separated lines otherwise, or JSON with --json.
    List(ListArgs),

    /// Delete a lock whoever holds it, after showing who does.
    ///
    /// Asks for confirmation on a terminal; requires --yes otherwise. Only the holder shown is
    /// removed: if the lock changed hands meanwhile, nothing is broken. The waiters are woken.
    /// The holder's next renewal then finds the lock gone and, for distlock run, terminates its
    /// command (exit 124).
    #[command(visible_alias = "force-release")]
    Break(BreakArgs),

    /// Acquire a lock and print its token, for locks that span several CI steps or scripts.
    ///
    /// The token (and nothing else) goes to stdout. Nothing renews the lock: choose a --ttl that
    /// covers the work, or call distlock renew; release it with distlock release.
    Acquire(AcquireArgs),

    /// Extend a lock acquired with distlock acquire.
    Renew(RenewArgs),

    /// Release a lock acquired with distlock acquire.
    Release(ReleaseArgs),

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
    pub ttl: Duration,

    /// Wait at most this long for the lock (default: wait forever).
    #[arg(
        short,
        long,
        value_name = "DUR",
        env = "DISTLOCK_WAIT",
        value_parser = parse_duration
    )]
    pub wait: Option<Duration>,

    /// Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT).
    #[arg(short, long)]
    pub no_wait: bool,

    /// Exit code when the lock was not acquired (busy), e.g. `-n -E 0` to skip quietly.
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
    /// notify: sleep until the holder releases (Redis pub/sub) or its lock expires. spin: retry
    /// with capped, jittered exponential backoff. Both never sleep past the holder's expiry.
    #[arg(
        long,
        value_name = "MODE",
        env = "DISTLOCK_WAIT_MODE",
        default_value = "notify"
    )]
    pub wait_mode: WaitMode,

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
    pub report_every: Duration,
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
    pub renew_every: Option<Duration>,

    /// Signal that stops the command when the lock is lost (name or number).
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
    pub kill_grace: Option<Duration>,

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
    #[arg(long)]
    pub json: bool,
}

/// `distlock list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only locks whose key matches this glob (* ? [...]), e.g. 'deploy-*'.
    #[arg(value_name = "PATTERN", default_value = "*")]
    pub pattern: String,

    /// Print JSON (an array) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `distlock break`.
#[derive(Debug, Args)]
pub struct BreakArgs {
    /// Name of the lock.
    #[arg(short, long, value_name = "KEY")]
    pub key: String,

    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(short = 'y', long)]
    pub yes: bool,
}

/// `distlock acquire`.
#[derive(Debug, Args)]
pub struct AcquireArgs {
    #[command(flatten)]
    pub take: TakeArgs,
}

/// The lock and token of `renew` and `release`.
#[derive(Debug, Args)]
pub struct HeldArgs {
    /// Name of the lock.
    #[arg(short, long, value_name = "KEY")]
    pub key: String,

    /// The token printed by distlock acquire.
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
    pub ttl: Option<Duration>,
}

/// `distlock release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub held: HeldArgs,
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
    let mut command = Cli::command().after_long_help(crate::help::after_help(""));
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        let text = crate::help::after_help(&name);
        command = command.mut_subcommand(&name, |sub| sub.after_long_help(text));
    }
    command
}

/// Parse a duration that must carry a unit (`500ms`, `30s`, `5m`, `1h30m`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration; write it with a unit, e.g. 30s".into());
    }
    if text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "'{text}' has no unit; write {text}s for seconds or {text}ms for milliseconds"
        ));
    }
    humantime::parse_duration(text).map_err(|e| {
        format!("'{text}' is not a duration ({e}); write e.g. 500ms, 30s, 5m or 1h30m")
    })
}

/// Parse a signal given as `TERM`, `SIGTERM`, `term` or `15`. Signals that do not end a process
/// (STOP, CONT, CHLD, ...) are refused: they could never stop a command that lost its lock.
pub fn parse_signal(text: &str) -> Result<i32, String> {
    let upper = text.trim().to_ascii_uppercase();
    let signal = if let Ok(n) = upper.parse::<i32>() {
        nix::sys::signal::Signal::try_from(n)
            .map_err(|_| format!("{n} is not a signal number on this system; use e.g. TERM"))?
    } else {
        let name = if upper.starts_with("SIG") {
            upper.clone()
        } else {
            format!("SIG{upper}")
        };
        name.parse::<nix::sys::signal::Signal>().map_err(|_| {
            format!("'{text}' is not a signal name; use e.g. TERM, INT, HUP or KILL")
        })?
    };
    use nix::sys::signal::Signal::*;
    match signal {
        SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU | SIGCONT | SIGCHLD | SIGWINCH | SIGURG => {
            Err(format!(
                "{} does not end a process; use a terminating signal such as TERM, INT or HUP",
                signal.as_str()
            ))
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
    fn durations_need_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        let err = parse_duration("30").unwrap_err();
        assert!(err.contains("30s"), "{err}");
        assert!(parse_duration("").is_err());
        assert!(parse_duration("soon").unwrap_err().contains("e.g."));
    }

    #[test]
    fn signals_by_name_and_number() {
        assert_eq!(parse_signal("TERM"), Ok(libc::SIGTERM));
        assert_eq!(parse_signal("sigint"), Ok(libc::SIGINT));
        assert_eq!(parse_signal("9"), Ok(libc::SIGKILL));
        assert!(parse_signal("STOP").unwrap_err().contains("does not end"));
        assert!(parse_signal("FOO").is_err());
        assert!(parse_signal("99").is_err());
    }
}
