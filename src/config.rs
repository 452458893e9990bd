//! From what the user typed ([`crate::cli`]) to what distlock will do ([`Config`]): defaults
//! derived from other flags, cross-flag rules, and every check that needs more than one value.
//! Nothing but this module reads the parser's types.

use std::ffi::OsString;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::backend::{Connector, Endpoint, TlsFiles};
use crate::cli::{self, Cli};
use crate::error::Error;
use crate::lock::{self, LockName, Token};
use crate::output::{self, Level, Output};
use crate::renew::Deadlines;
use crate::wait::WaitPolicy;

/// Shortest accepted TTL.
pub const MIN_TTL: Duration = Duration::from_secs(1);
/// Longest accepted TTL: a crashed holder blocks everyone for up to this long.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// Shortest accepted renewal interval.
pub const MIN_RENEW_EVERY: Duration = Duration::from_millis(100);
/// Shortest time that must remain to retry a failed renewal before the kill signal.
pub const MIN_RETRY_WINDOW: Duration = Duration::from_millis(100);
/// Default Redis URL.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Everything distlock will do.
pub struct Config {
    /// Where messages go.
    pub output: Output,
    /// The subcommand.
    pub command: CommandConfig,
}

/// A subcommand's settings.
pub enum CommandConfig {
    /// `distlock run`.
    Run(RunConfig),
    /// `distlock acquire`.
    Acquire(TakeConfig),
    /// `distlock status`.
    Status {
        /// How to reach Redis.
        connector: Connector,
        /// Which lock.
        name: LockName,
        /// JSON output.
        json: bool,
    },
    /// `distlock list`.
    List {
        /// How to reach Redis.
        connector: Connector,
        /// The key prefix.
        prefix: String,
        /// Glob over keys.
        pattern: String,
        /// JSON output.
        json: bool,
    },
    /// `distlock break`.
    Break {
        /// How to reach Redis.
        connector: Connector,
        /// Which lock.
        name: LockName,
        /// Skip the confirmation.
        yes: bool,
    },
    /// `distlock renew`.
    Renew {
        /// How to reach Redis.
        connector: Connector,
        /// Which lock.
        name: LockName,
        /// The holder's token.
        token: Token,
        /// New TTL (default: the one it was acquired with).
        ttl: Option<Duration>,
    },
    /// `distlock release`.
    Release {
        /// How to reach Redis.
        connector: Connector,
        /// Which lock.
        name: LockName,
        /// The holder's token.
        token: Token,
    },
    /// `distlock generate`.
    Generate {
        /// What to write (None: both).
        what: Option<cli::Generated>,
        /// Where.
        out: Option<std::path::PathBuf>,
    },
}

/// Taking a lock (`run`, `acquire`), decided.
pub struct TakeConfig {
    /// How to reach Redis.
    pub connector: Connector,
    /// Which lock.
    pub name: LockName,
    /// The lock's TTL.
    pub ttl: Duration,
    /// How long and how to wait.
    pub wait: WaitPolicy,
    /// Exit code when busy.
    pub busy_exit: u8,
    /// Stored with the lock.
    pub note: Option<String>,
    /// Interval of "still waiting" lines without a terminal.
    pub report_every: Duration,
}

/// `distlock run`, decided.
pub struct RunConfig {
    /// Which lock, and how to wait for it.
    pub take: TakeConfig,
    /// Renewal interval.
    pub renew_every: Duration,
    /// Kill timing.
    pub deadlines: Deadlines,
    /// Signal that starts the kill sequence.
    pub kill_signal: Signal,
    /// The command.
    pub argv: Vec<OsString>,
}

/// The output settings alone, for reporting errors found before the rest of the configuration.
pub fn output_for(cli: &Cli) -> Output {
    let level = if cli.global.verbose {
        Level::Verbose
    } else if cli.global.quiet {
        Level::Quiet
    } else {
        Level::Normal
    };
    // The password as typed and as decoded (redis://:p%40ss@host means "p@ss"): neither may
    // appear in any output.
    let url = redis_url(&cli.global).unwrap_or_default();
    let secrets = [
        crate::backend::password_in(&url),
        Endpoint::parse(&url)
            .ok()
            .and_then(|e| e.password().map(str::to_owned)),
    ];
    Output::new(level, secrets.into_iter().flatten().collect())
}

/// The URL given with --redis or DISTLOCK_REDIS_URL (clap reads both), else REDIS_URL.
fn redis_url(global: &cli::GlobalArgs) -> Option<String> {
    global
        .redis
        .clone()
        .or_else(|| std::env::var("REDIS_URL").ok().filter(|s| !s.is_empty()))
}

impl Config {
    /// Decide everything, or explain the first problem as a usage error.
    pub fn from_cli(cli: Cli) -> Result<Config, Error> {
        let output = output_for(&cli);
        let global = &cli.global;
        let prefix = global.prefix.as_str();
        let command = match cli.command {
            cli::Command::Run(args) => CommandConfig::Run(run_config(args, global)?),
            cli::Command::Acquire(args) => CommandConfig::Acquire(take_config(
                args.take,
                global,
                "the lock is held until it expires or is released",
            )?),
            cli::Command::Status(args) => CommandConfig::Status {
                connector: connector(global)?,
                name: lock_name(prefix, &args.key)?,
                json: args.json,
            },
            cli::Command::List(args) => {
                lock::validate_pattern(&args.pattern).map_err(Error::Usage)?;
                CommandConfig::List {
                    connector: connector(global)?,
                    prefix: checked_prefix(prefix)?.to_owned(),
                    pattern: args.pattern,
                    json: args.json,
                }
            }
            cli::Command::Break(args) => CommandConfig::Break {
                connector: connector(global)?,
                name: lock_name(prefix, &args.key)?,
                yes: args.yes,
            },
            cli::Command::Renew(args) => {
                if let Some(ttl) = args.ttl {
                    check_ttl(ttl, "the lock is held until it expires or is released")?;
                }
                CommandConfig::Renew {
                    connector: connector(global)?,
                    name: lock_name(prefix, &args.held.key)?,
                    token: token(&args.held.token)?,
                    ttl: args.ttl,
                }
            }
            cli::Command::Release(args) => CommandConfig::Release {
                connector: connector(global)?,
                name: lock_name(prefix, &args.held.key)?,
                token: token(&args.held.token)?,
            },
            cli::Command::Generate(args) => CommandConfig::Generate {
                what: args.what,
                out: args.out,
            },
        };
        Ok(Config { output, command })
    }
}

/// The Redis connector the global options describe.
fn connector(global: &cli::GlobalArgs) -> Result<Connector, Error> {
    let url = redis_url(global).unwrap_or_else(|| DEFAULT_URL.to_owned());
    let endpoint = Endpoint::parse(&url).map_err(Error::Usage)?;
    let timeout = global.redis_timeout;
    if !(Duration::from_millis(10)..=Duration::from_secs(60)).contains(&timeout) {
        return Err(Error::Usage(format!(
            "--redis-timeout {} is out of range; use 10ms to 60s",
            output::duration(timeout)
        )));
    }
    let tls = tls_files(global, &endpoint)?;
    Connector::new(endpoint, timeout, tls)
        .map_err(|e| Error::Usage(format!("cannot set up the Redis client: {e}")))
}

fn checked_prefix(prefix: &str) -> Result<&str, Error> {
    lock::validate_prefix(prefix).map_err(Error::Usage)?;
    Ok(prefix)
}

fn lock_name(prefix: &str, key: &str) -> Result<LockName, Error> {
    lock::validate_key(key).map_err(Error::Usage)?;
    Ok(LockName::new(checked_prefix(prefix)?, key))
}

fn token(text: &str) -> Result<Token, Error> {
    let text = text.trim();
    if text.is_empty()
        || text.len() > 128
        || text.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(Error::Usage(
            "the token is empty or malformed; pass what distlock acquire printed, with --token or DISTLOCK_TOKEN".into(),
        ));
    }
    Ok(Token::from_text(text))
}

fn check_ttl(ttl: Duration, why: &str) -> Result<(), Error> {
    if (MIN_TTL..=MAX_TTL).contains(&ttl) {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "--ttl {} is out of range; use 1s to 24h ({why})",
            output::duration(ttl)
        )))
    }
}

fn take_config(
    args: cli::TakeArgs,
    global: &cli::GlobalArgs,
    why_ttl: &str,
) -> Result<TakeConfig, Error> {
    let name = lock_name(&global.prefix, &args.key)?;
    check_ttl(args.ttl, why_ttl)?;
    if args.report_every < Duration::from_secs(1) {
        return Err(Error::Usage(format!(
            "--report-every {} is too short; use 1s or more",
            output::duration(args.report_every)
        )));
    }
    Ok(TakeConfig {
        connector: connector(global)?,
        name,
        ttl: args.ttl,
        wait: WaitPolicy {
            limit: if args.no_wait {
                Some(Duration::ZERO)
            } else {
                args.wait
            },
            mode: args.wait_mode,
        },
        busy_exit: args.conflict_exit_code,
        note: args.note,
        report_every: args.report_every,
    })
}

/// Read the TLS files named on the command line; only meaningful with rediss://.
fn tls_files(global: &cli::GlobalArgs, endpoint: &Endpoint) -> Result<TlsFiles, Error> {
    let named = [&global.tls_ca, &global.tls_cert, &global.tls_key];
    if !endpoint.is_tls() {
        if named.iter().any(|f| f.is_some()) {
            return Err(Error::Usage(
                "--tls-ca, --tls-cert and --tls-key need a rediss:// URL".into(),
            ));
        }
        return Ok(TlsFiles::default());
    }
    let read = |flag: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| {
            Error::Usage(format!(
                "cannot read {flag} {}: {e}",
                output::quote(&path.display().to_string())
            ))
        })
    };
    let ca = global
        .tls_ca
        .as_deref()
        .map(|p| read("--tls-ca", p))
        .transpose()?;
    let client = match (&global.tls_cert, &global.tls_key) {
        (Some(cert), Some(key)) => Some((read("--tls-cert", cert)?, read("--tls-key", key)?)),
        (None, None) => None,
        _ => {
            return Err(Error::Usage(
                "--tls-cert and --tls-key go together; give both or neither".into(),
            ));
        }
    };
    Ok(TlsFiles { ca, client })
}

fn run_config(args: cli::RunArgs, global: &cli::GlobalArgs) -> Result<RunConfig, Error> {
    if args.command.first().is_none_or(|c| c.is_empty()) {
        return Err(Error::Usage(
            "no command given; put it after --, e.g. distlock run --key k -- ./job.sh".into(),
        ));
    }
    let take = take_config(
        args.take,
        global,
        "renewal keeps a short TTL alive as long as the command runs",
    )?;
    let ttl = take.ttl;
    let renew_every = args.renew_every.unwrap_or_else(|| whole_ms(ttl / 3));
    if renew_every < MIN_RENEW_EVERY || renew_every >= ttl {
        return Err(Error::Usage(format!(
            "--renew-every {} must be at least 100ms and shorter than --ttl {} (default: a third of it)",
            output::duration(renew_every),
            output::duration(ttl)
        )));
    }
    let grace = args
        .kill_grace
        .unwrap_or_else(|| whole_ms(ttl / 5).min(Duration::from_secs(5)));
    let deadlines = Deadlines {
        ttl,
        grace,
        margin: Deadlines::margin_for(ttl),
    };
    match deadlines.retry_window(renew_every) {
        Some(window) if window >= MIN_RETRY_WINDOW => {}
        _ => {
            let room = ttl
                .saturating_sub(deadlines.margin + renew_every + MIN_RETRY_WINDOW)
                .as_millis();
            return Err(Error::Usage(format!(
                "--kill-grace {} with --ttl {} and --renew-every {} leaves no time to retry a failed renewal \
                 before the kill (safety margin {}); use a --kill-grace of at most {room}ms, a shorter \
                 --renew-every, or a longer --ttl",
                output::duration(grace),
                output::duration(ttl),
                output::duration(renew_every),
                output::duration(deadlines.margin),
            )));
        }
    }
    let kill_signal = Signal::try_from(args.kill_signal).map_err(|_| {
        Error::Usage(format!(
            "--kill-signal {} is not a signal",
            args.kill_signal
        ))
    })?;
    Ok(RunConfig {
        take,
        renew_every,
        deadlines,
        kill_signal,
        argv: args.command,
    })
}

/// `d` truncated to whole milliseconds (for defaults that users read back in messages).
fn whole_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<RunConfig, Error> {
        let mut argv = vec!["distlock", "--redis", "redis://127.0.0.1:1", "run"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).map_err(|e| Error::Usage(e.to_string()))?;
        match Config::from_cli(cli)?.command {
            CommandConfig::Run(run) => Ok(run),
            _ => unreachable!("a run command line"),
        }
    }

    fn usage(args: &[&str]) -> String {
        match parse(args) {
            Err(Error::Usage(msg)) => msg,
            Err(other) => panic!("expected a usage error, got {other}"),
            Ok(_) => panic!("expected a usage error for {args:?}"),
        }
    }

    #[test]
    fn defaults() {
        let run = parse(&["-k", "k", "--", "true"]).unwrap();
        assert_eq!(run.take.ttl, Duration::from_secs(30));
        assert_eq!(run.renew_every, Duration::from_secs(10));
        assert_eq!(run.deadlines.grace, Duration::from_secs(5));
        assert_eq!(run.take.wait.limit, None);
        assert_eq!(run.take.busy_exit, 75);
        assert_eq!(run.kill_signal, Signal::SIGTERM);
        assert_eq!(run.take.name.lock_key(), "distlock:{k}");
    }

    #[test]
    fn short_ttl_scales_grace_and_renewal() {
        let run = parse(&["-k", "k", "--ttl", "1s", "true"]).unwrap();
        assert_eq!(run.renew_every, Duration::from_millis(333));
        assert_eq!(run.deadlines.grace, Duration::from_millis(200));
    }

    #[test]
    fn no_wait_means_one_try() {
        let run = parse(&["-k", "k", "-n", "-E", "0", "true"]).unwrap();
        assert_eq!(run.take.wait.limit, Some(Duration::ZERO));
        assert_eq!(run.take.busy_exit, 0);
    }

    #[test]
    fn bad_combinations_are_explained() {
        assert!(usage(&["-k", "k", "--ttl", "0s", "true"]).contains("1s to 24h"));
        assert!(usage(&["-k", "k", "--ttl", "500ms", "true"]).contains("1s to 24h"));
        assert!(usage(&["-k", "k", "--ttl", "2d", "true"]).contains("1s to 24h"));
        assert!(
            usage(&["-k", "k", "--ttl", "10s", "--renew-every", "10s", "true"])
                .contains("shorter than --ttl")
        );
        assert!(
            usage(&["-k", "k", "--ttl", "10s", "--kill-grace", "9s", "true"]).contains("at most")
        );
        assert!(usage(&["-k", "", "true"]).contains("empty"));
        assert!(usage(&["-k", "a b", "true"]).contains("whitespace"));
        assert!(usage(&["-k", "k", "", ""]).contains("no command"));
    }
}
