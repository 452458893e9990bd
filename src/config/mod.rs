//! From what the user typed ([`crate::cli`]) to what distlock will do ([`Config`]): defaults
//! derived from other flags, cross-flag rules, and every check that needs more than one value.
//! Nothing but this module reads the parser's types.
//!
//! This file holds the flag logic of each command but `log` and `stats` (`history.rs`);
//! `topology.rs` builds where the locks live (URLs, timeouts, TLS) from the global options, and
//! `origins.rs` remembers where each value came from, so that every refusal names what the user
//! set. What a topology cannot keep is asked of the lock ([`Topology::refuses`]).

mod history;
mod origins;
mod topology;

use std::ffi::OsString;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::backend::Servers;
use crate::cli::{self, Cli};
use crate::envfile::{self, EnvFile};
use crate::error::Error;
use crate::hook::HookConfig;
use crate::lock::{self, AfterRun, DEFAULT_PREFIX, LockName, Token, Topology};
use crate::output::{Ev, Format, Level, Output};
use crate::renew::Deadlines;
use crate::wait::WaitPolicy;

pub use origins::Origins;
use topology::{redis_urls, topology};

/// Shortest accepted TTL.
pub const MIN_TTL: Duration = Duration::from_secs(1);
/// Longest accepted TTL: a crashed holder blocks everyone for up to this long.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// Shortest accepted renewal interval.
pub const MIN_RENEW_EVERY: Duration = Duration::from_millis(100);
/// Shortest time that must remain to retry a failed renewal before the kill signal.
pub const MIN_RETRY_WINDOW: Duration = Duration::from_millis(100);
/// The fewest characters of a holder id that `break --holder` accepts: fewer would name a
/// holder by accident.
pub const MIN_HOLDER_ID_CHARS: usize = 4;
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
    Acquire(AcquireConfig),
    /// `distlock status`.
    Status {
        /// How to reach Redis.
        topology: Topology,
        /// Which lock.
        name: LockName,
        /// JSON output.
        json: bool,
    },
    /// `distlock list`.
    List {
        /// How to reach Redis.
        topology: Topology,
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
        topology: Topology,
        /// Which lock.
        name: LockName,
        /// Only the holder whose token starts with this (`--holder`).
        holder: Option<String>,
        /// Skip the confirmation.
        yes: bool,
    },
    /// `distlock renew`.
    Renew {
        /// How to reach Redis.
        topology: Topology,
        /// Which lock.
        name: LockName,
        /// The holder's token.
        token: Token,
        /// A set's keys and tokens (from `acquire --env-file`; empty for one key, which
        /// `name` and `token` are).
        set: Vec<(LockName, Token)>,
        /// New TTL (default: the one it was acquired with).
        ttl: Option<Duration>,
    },
    /// `distlock release`.
    Release {
        /// How to reach Redis.
        topology: Topology,
        /// Which lock.
        name: LockName,
        /// The holder's token.
        token: Token,
        /// A set's keys and tokens (from `acquire --env-file`; empty for one key, which
        /// `name` and `token` are).
        set: Vec<(LockName, Token)>,
        /// The work failed: no cool-down (`--failed`).
        failed: bool,
    },
    /// `distlock log`.
    Log(crate::history::LogConfig),
    /// `distlock stats`.
    Stats(crate::history::StatsConfig),
    /// `distlock check`.
    Check(CheckConfig),
    /// `distlock metrics`.
    Metrics(MetricsConfig),
}

/// `distlock metrics`, decided.
#[derive(Debug)]
pub struct MetricsConfig {
    /// Where.
    pub topology: Topology,
    /// The key prefix.
    pub prefix: String,
    /// Glob over keys.
    pub pattern: String,
    /// Write here (atomically) instead of stdout.
    pub output: Option<std::path::PathBuf>,
    /// Labels added to every series (`--label`), each name once.
    pub labels: Vec<(String, String)>,
}

/// `distlock check`, decided.
#[derive(Debug)]
pub struct CheckConfig {
    /// Where.
    pub topology: Topology,
    /// The key prefix (to read the history).
    pub prefix: String,
    /// Which lock.
    pub name: LockName,
    /// The thresholds.
    pub limits: Limits,
}

/// What makes a lock WARNING or CRITICAL (each optional).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// `-w`: held longer than this.
    pub warn_held: Option<Duration>,
    /// `-c`: held longer than this.
    pub crit_held: Option<Duration>,
    /// `--warn-wait`: the first waiter waited longer than this.
    pub warn_wait: Option<Duration>,
    /// `--crit-wait`.
    pub crit_wait: Option<Duration>,
    /// `--crit-since-success`: no successful run recorded within this.
    pub crit_since_success: Option<Duration>,
}

/// Taking a lock (`run`, `acquire`), decided.
pub struct TakeConfig {
    /// How to reach Redis.
    pub topology: Topology,
    /// Which lock (the first key given, for a set).
    pub name: LockName,
    /// Every key given, in the order typed (one for most runs; up to [`MAX_KEYS`] for a set,
    /// which `lock::open_set` takes in key order).
    pub keys: Vec<LockName>,
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
    /// The expiry an acquire attempt sets, until the holder extends it to the TTL (see
    /// [`crate::lock`]): what an attempt whose reply was lost can block the key for.
    pub claim: Duration,
    /// How long to retry a Redis that has never answered.
    pub unreachable_after: Duration,
    /// 1: a mutex (an exclusive run); N: a counting semaphore; 0: shared (`--shared`, or
    /// `--shared-key` naming every key).
    pub limit: u32,
    /// The keys held shared while the others are exclusive (`--shared-key`, a set of mixed
    /// modes); empty when every key has [`TakeConfig::limit`]. See [`TakeConfig::limit_of`].
    pub shared_keys: Vec<LockName>,
    /// Cancel the older waiters (`--supersede`).
    pub supersede: bool,
    /// Stop the holder's command, and cancel the older waiters (`--replace`).
    pub replace: bool,
    /// How long the lock stays taken after a run that succeeded.
    pub after: AfterRun,
    /// Say so once when the wait has lasted this long (`run --warn-wait`).
    pub warn_wait: Option<Duration>,
}

impl TakeConfig {
    /// Whether the run takes several keys (a lock set).
    pub fn is_set(&self) -> bool {
        self.keys.len() > 1
    }

    /// The limit key `name` is taken with: 0 for a key held shared (`--shared`, or named by
    /// `--shared-key`), [`TakeConfig::limit`] otherwise.
    pub fn limit_of(&self, name: &LockName) -> u32 {
        if self.shared_keys.contains(name) {
            0
        } else {
            self.limit
        }
    }

    /// Each key's own limit where it differs from [`TakeConfig::limit`] (a set of mixed modes,
    /// `--shared-key`), in the order typed: what `lock::open_set` gives each member.
    pub fn members(&self) -> Vec<(LockName, Option<u32>)> {
        self.keys
            .iter()
            .map(|name| {
                let limit = self.limit_of(name);
                (name.clone(), (limit != self.limit).then_some(limit))
            })
            .collect()
    }

    /// A set's keys in the order it takes them (by Redis key bytes, as `lock::open_set`),
    /// space-separated: the `set` field of its holder metadata. `None` for one key.
    pub fn set_field(&self) -> Option<String> {
        if !self.is_set() {
            return None;
        }
        let mut names: Vec<&LockName> = self.keys.iter().collect();
        names.sort_by(|a, b| a.lock_key().as_bytes().cmp(b.lock_key().as_bytes()));
        let keys: Vec<&str> = names.iter().map(|n| n.key()).collect();
        Some(keys.join(" "))
    }

    /// What messages call the lock: `"deploy"`, or for a set `set "db deploy"` (the keys in the
    /// order typed).
    pub fn quoted(&self) -> String {
        if self.is_set() {
            let keys: Vec<&str> = self.keys.iter().map(LockName::key).collect();
            format!("set {}", crate::text::quote(&keys.join(" ")))
        } else {
            crate::text::quote(self.name.key())
        }
    }
}

/// `distlock acquire`, decided.
pub struct AcquireConfig {
    /// Which lock, and how to wait for it.
    pub take: TakeConfig,
    /// Where to append the lock's values instead of printing the token.
    pub env_file: Option<EnvFile>,
    /// Print JSON (token, fence, ...) instead of the bare token.
    pub json: bool,
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
    /// Stop the command after this long (`--timeout`).
    pub timeout: Option<Duration>,
    /// Say so once when the command has held the lock this long (`--warn-after`).
    pub warn_after: Option<Duration>,
    /// `--hook`, when given.
    pub hook: Option<HookConfig>,
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
    // Every password as typed and as decoded (redis://:p%40ss@host means "p@ss"), of every URL
    // and every node they name: none may appear in any output.
    let urls = redis_urls(&cli.global);
    let mut secrets: Vec<String> = urls
        .iter()
        .flat_map(|u| u.split_whitespace())
        .filter_map(crate::backend::password_in)
        .collect();
    if let Ok(servers) = Servers::parse(&urls) {
        secrets.extend(
            servers
                .endpoints()
                .iter()
                .filter_map(|e| e.password().map(str::to_owned)),
        );
        // Behind Sentinel, the endpoints are the sentinels: the data nodes' own password (the
        // URL's userinfo) is known decoded only from a data node's endpoint.
        if let Servers::Sentinel(sentinel) = &servers {
            if let Ok(data) = sentinel.data.endpoint("127.0.0.1", 6379) {
                secrets.extend(data.password().map(str::to_owned));
            }
        }
    }
    let format = match cli.global.log_format {
        cli::LogFormat::Text => Format::Text,
        cli::LogFormat::Json => Format::Json,
    };
    Output::new(level, format, secrets)
}

impl Config {
    /// Decide everything, or explain the first problem as a usage error (naming each value the
    /// way the user set it, see [`Origins`]).
    pub fn from_cli(cli: Cli, origins: &Origins) -> Result<Config, Error> {
        let output = output_for(&cli);
        let global = &cli.global;
        let prefix = global.prefix.as_str();
        crate::history::configure(history::history(global, origins)?);
        let command = match cli.command {
            cli::Command::Run(args) => CommandConfig::Run(run_config(args, global, origins)?),
            cli::Command::Acquire(args) => {
                CommandConfig::Acquire(acquire_config(args, global, origins)?)
            }
            cli::Command::Status(args) => CommandConfig::Status {
                topology: topology(global, origins, None)?,
                name: lock_name(prefix, &args.key, origins)?,
                json: args.json,
            },
            cli::Command::List(args) => {
                lock::validate_pattern(&args.pattern).map_err(Error::Usage)?;
                CommandConfig::List {
                    topology: topology(global, origins, None)?,
                    prefix: checked_prefix(prefix, origins)?.to_owned(),
                    pattern: args.pattern,
                    json: args.json,
                }
            }
            cli::Command::Break(args) => CommandConfig::Break {
                topology: topology(global, origins, None)?,
                name: lock_name(prefix, &args.key, origins)?,
                holder: args.holder.as_deref().map(holder_id).transpose()?,
                yes: args.yes,
            },
            cli::Command::Renew(args) => {
                if let Some(ttl) = &args.ttl {
                    check_ttl(
                        ttl,
                        origins,
                        "the lock is held until it expires or is released",
                    )?;
                }
                let held = held_locks(prefix, &args.held, origins)?;
                CommandConfig::Renew {
                    topology: topology(global, origins, None)?,
                    name: held[0].0.clone(),
                    token: held[0].1.clone(),
                    set: if held.len() > 1 { held } else { Vec::new() },
                    ttl: args.ttl.map(|ttl| ttl.value),
                }
            }
            cli::Command::Release(args) => {
                let held = held_locks(prefix, &args.held, origins)?;
                CommandConfig::Release {
                    topology: topology(global, origins, None)?,
                    name: held[0].0.clone(),
                    token: held[0].1.clone(),
                    set: if held.len() > 1 { held } else { Vec::new() },
                    failed: args.failed,
                }
            }
            cli::Command::Log(a) => CommandConfig::Log(history::log_config(a, global, origins)?),
            cli::Command::Stats(a) => {
                CommandConfig::Stats(history::stats_config(a, global, origins)?)
            }
            cli::Command::Check(args) => CommandConfig::Check(check_config(args, global, origins)?),
            cli::Command::Metrics(args) => {
                lock::validate_pattern(&args.pattern).map_err(Error::Usage)?;
                if let Some((name, _)) = (args.label.iter().enumerate())
                    .find(|(i, (name, _))| args.label[..*i].iter().any(|(n, _)| n == name))
                    .map(|(_, label)| label)
                {
                    return Err(Error::Usage(format!(
                        "--label {name} is given twice; give each label once"
                    )));
                }
                CommandConfig::Metrics(MetricsConfig {
                    topology: topology(global, origins, None)?,
                    prefix: checked_prefix(prefix, origins)?.to_owned(),
                    pattern: args.pattern,
                    output: args.output,
                    labels: args.label,
                })
            }
        };
        // From here on, messages name the lock they are about (JSON lines carry its key).
        let output = match command.key() {
            Some(key) => output.about(key),
            None => output,
        };
        Ok(Config { output, command })
    }
}

impl CommandConfig {
    /// The key of the one lock the command is about, if it is about one.
    fn key(&self) -> Option<&str> {
        match self {
            CommandConfig::Run(run) => Some(run.take.name.key()),
            CommandConfig::Acquire(acquire) => Some(acquire.take.name.key()),
            CommandConfig::Status { name, .. }
            | CommandConfig::Break { name, .. }
            | CommandConfig::Renew { name, .. }
            | CommandConfig::Release { name, .. } => Some(name.key()),
            CommandConfig::Log(log) => log.name.as_ref().map(LockName::key),
            CommandConfig::Stats(stats) => stats.name.as_ref().map(LockName::key),
            CommandConfig::Check(check) => Some(check.name.key()),
            CommandConfig::List { .. } | CommandConfig::Metrics(_) => None,
        }
    }
}

/// `distlock check`: a warning threshold above its critical one is refused (it could never
/// warn).
fn check_config(
    args: cli::CheckArgs,
    global: &cli::GlobalArgs,
    origins: &Origins,
) -> Result<CheckConfig, Error> {
    let prefix = global.prefix.as_str();
    for (warn, crit) in [
        (&args.warning, &args.critical),
        (&args.warn_wait, &args.crit_wait),
    ] {
        if let (Some(w), Some(c)) = (warn, crit)
            && w.value > c.value
        {
            return Err(Error::Usage(format!(
                "the warning threshold {} is above the critical one {}: it could never warn",
                w.text, c.text
            )));
        }
    }
    let value = |d: &Option<cli::DurationArg>| d.as_ref().map(|d| d.value);
    Ok(CheckConfig {
        topology: topology(global, origins, None)?,
        prefix: checked_prefix(prefix, origins)?.to_owned(),
        name: lock_name(prefix, &args.key, origins)?,
        limits: Limits {
            warn_held: value(&args.warning),
            crit_held: value(&args.critical),
            warn_wait: value(&args.warn_wait),
            crit_wait: value(&args.crit_wait),
            crit_since_success: value(&args.crit_since_success),
        },
    })
}

fn checked_prefix<'p>(prefix: &'p str, origins: &Origins) -> Result<&'p str, Error> {
    lock::validate_prefix(prefix).map_err(|e| Error::Usage(origins.blame("prefix", e)))?;
    Ok(prefix)
}

fn lock_name(prefix: &str, key: &str, origins: &Origins) -> Result<LockName, Error> {
    lock::validate_key(key).map_err(Error::Usage)?;
    Ok(LockName::new(checked_prefix(prefix, origins)?, key))
}

/// A holder id given to `break --holder`: the start of a token, long enough not to name a
/// holder by accident.
fn holder_id(text: &str) -> Result<String, Error> {
    let id = text.trim();
    let min = MIN_HOLDER_ID_CHARS;
    if id.chars().count() < min {
        return Err(Error::Usage(format!(
            "--holder {} is too short; give at least {min} characters of the id that \
             distlock status shows for the holder",
            crate::text::quote(id)
        )));
    }
    Ok(id.to_owned())
}

/// The lock(s) `renew` and `release` act on: `--key`/`--token` (or `DISTLOCK_KEY` and
/// `DISTLOCK_TOKEN`), or else a set as `acquire --env-file` wrote it (`DISTLOCK_KEY_COUNT`,
/// `DISTLOCK_KEY<i>`, `DISTLOCK_TOKEN<i>`; or `DISTLOCK_KEYS` for the count, as a run's
/// command has it). Never empty.
fn held_locks(
    prefix: &str,
    args: &cli::HeldArgs,
    origins: &Origins,
) -> Result<Vec<(LockName, Token)>, Error> {
    let no_token = || {
        Error::Usage(
            "no token given; pass --token (or DISTLOCK_TOKEN), as distlock acquire printed it"
                .into(),
        )
    };
    if let Some(key) = &args.key {
        let text = args.token.as_deref().ok_or_else(no_token)?;
        return Ok(vec![(
            lock_name(prefix, key, origins)?,
            token(text, origins)?,
        )]);
    }
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let count = var("DISTLOCK_KEY_COUNT")
        .and_then(|n| n.trim().parse::<usize>().ok())
        .or_else(|| var("DISTLOCK_KEYS").map(|keys| keys.split_whitespace().count()));
    let Some(count) = count else {
        return Err(Error::Usage(
            "no key given; pass --key (or DISTLOCK_KEY), or load the --env-file that distlock \
             acquire wrote"
                .into(),
        ));
    };
    if count > MAX_KEYS {
        return Err(Error::Usage(format!(
            "DISTLOCK_KEY_COUNT is {count}; distlock takes at most {MAX_KEYS} keys"
        )));
    }
    let mut held = Vec::new();
    for i in 0..count {
        let key = var(&format!("DISTLOCK_KEY{i}")).ok_or_else(|| {
            Error::Usage(format!(
                "DISTLOCK_KEY{i} is missing; load the whole --env-file that distlock acquire wrote"
            ))
        })?;
        let key = key.as_str();
        let text = var(&format!("DISTLOCK_TOKEN{i}")).ok_or_else(|| {
            Error::Usage(format!(
                "DISTLOCK_TOKEN{i} is missing for key {}; load the whole --env-file that \
                 distlock acquire wrote",
                crate::text::quote(key)
            ))
        })?;
        held.push((lock_name(prefix, key, origins)?, token(&text, origins)?));
    }
    if held.is_empty() {
        return Err(no_token());
    }
    Ok(held)
}

fn token(text: &str, origins: &Origins) -> Result<Token, Error> {
    let text = text.trim();
    if text.is_empty()
        || text.len() > 128
        || text.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        // Never echo the token: it is the key to the lock.
        return Err(Error::Usage(format!(
            "{} is empty or malformed; pass what distlock acquire printed, with --token or DISTLOCK_TOKEN",
            origins.option("token")
        )));
    }
    Ok(Token::from_text(text))
}

fn check_ttl(ttl: &cli::DurationArg, origins: &Origins, why: &str) -> Result<(), Error> {
    if (MIN_TTL..=MAX_TTL).contains(&ttl.value) {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "{} is out of range; use 1s to 24h ({why})",
            origins.duration("ttl", ttl)
        )))
    }
}

fn take_config(
    args: cli::TakeArgs,
    global: &cli::GlobalArgs,
    origins: &Origins,
    why_ttl: &str,
) -> Result<TakeConfig, Error> {
    let keys = lock_names(&global.prefix, &args, origins)?;
    let name = keys[0].clone();
    check_ttl(&args.ttl, origins, why_ttl)?;
    if args.report_every.value < Duration::from_secs(1) {
        return Err(Error::Usage(format!(
            "{} is too short; use 1s or more",
            origins.duration("report_every", &args.report_every)
        )));
    }
    if args.replace && args.no_wait {
        return Err(Error::Usage(
            "--replace waits for the running command to stop: it needs a wait; drop --no-wait"
                .into(),
        ));
    }
    let shared_keys = shared_keys(&args, &keys, origins)?;
    // `--shared-key` naming every key is `--shared`.
    let shared = args.shared || (!shared_keys.is_empty() && shared_keys.len() == keys.len());
    let option = if args.shared {
        "--shared"
    } else {
        "--shared-key"
    };
    if args.shared || !shared_keys.is_empty() {
        let with = if args.limit > 1 {
            Some("--limit (readers are not counted: a shared key has no limit)")
        } else if args.supersede || args.replace {
            Some("--supersede or --replace (a shared run cancels or stops nobody)")
        } else if args.min_interval.is_some() || args.cooldown.is_some() {
            Some("--min-interval or --cooldown (they keep an exclusive lock taken)")
        } else {
            None
        };
        if let Some(with) = with {
            return Err(Error::Usage(format!(
                "{option} does not go with {with}: drop one of them"
            )));
        }
    }
    if args.replace && args.limit > 1 {
        return Err(Error::Usage(format!(
            "--replace stops the one holder of a mutex; a semaphore of --limit {} has several: \
             drop --replace or --limit",
            args.limit
        )));
    }
    if args.supersede && args.no_wait {
        return Err(Error::Usage(
            "--supersede takes a place in line and cancels the older waiters: it needs a wait; \
             drop --no-wait"
                .into(),
        ));
    }
    if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&args.unreachable_after.value)
    {
        return Err(Error::Usage(format!(
            "{} is out of range; use 1s to 1h",
            origins.duration("unreachable_after", &args.unreachable_after)
        )));
    }
    let after = after_run(&args, origins)?;
    let topology = topology(global, origins, Some(args.ttl.value))?;
    if let Some(refused) = topology.refuses(args.supersede || args.replace, args.limit) {
        return Err(Error::Usage(refused));
    }
    if (args.shared || !shared_keys.is_empty())
        && matches!(topology, crate::lock::Topology::Redlock { .. })
    {
        return Err(Error::Usage(format!(
            "{option} needs a line of waiters, which a Redlock of independent servers cannot \
             keep (a stream of readers would starve a writer); drop {option}, or give one URL \
             (plain, redis+sentinel:// or redis+cluster://)"
        )));
    }
    Ok(TakeConfig {
        topology,
        name,
        keys,
        ttl: args.ttl.value,
        wait: WaitPolicy {
            limit: if args.no_wait {
                Some(Duration::ZERO)
            } else {
                args.wait.map(|wait| wait.value)
            },
            mode: match args.wait_mode {
                cli::WaitMode::Notify => crate::wait::WaitMode::Notify,
                cli::WaitMode::Spin => crate::wait::WaitMode::Spin,
            },
        },
        busy_exit: args.conflict_exit_code,
        note: args.note,
        report_every: args.report_every.value,
        // `acquire` has no command to stop: its claim only needs room for the extension (run
        // recomputes it with its kill grace).
        claim: Deadlines {
            ttl: args.ttl.value,
            grace: Duration::ZERO,
        }
        .claim(global.redis_timeout.value),
        unreachable_after: args.unreachable_after.value,
        // 0: a shared lock's reader (see `lock::Request::limit`).
        limit: if shared { 0 } else { args.limit },
        shared_keys: if shared { Vec::new() } else { shared_keys },
        supersede: args.supersede,
        replace: args.replace,
        after,
        warn_wait: None,
    })
}

/// The most keys one run takes (`-k` repeated).
pub const MAX_KEYS: usize = 32;

/// The keys of a take (`-k`, repeatable), checked: each a valid key, none twice, at most
/// [`MAX_KEYS`], and, with several, none of the flags a set cannot keep (`--limit N>1`,
/// `--supersede`, `--replace`): refused before anything is sent. Never empty (clap requires
/// one `-k`).
fn lock_names(
    prefix: &str,
    args: &cli::TakeArgs,
    origins: &Origins,
) -> Result<Vec<LockName>, Error> {
    let given = &args.key;
    if given.is_empty() {
        return Err(Error::Usage(
            "no key given; name the lock with -k KEY".into(),
        ));
    }
    if given.len() > MAX_KEYS {
        return Err(Error::Usage(format!(
            "{} keys given; one run takes at most {MAX_KEYS}: split the work, or use fewer keys",
            given.len()
        )));
    }
    if let Some((_, key)) = given
        .iter()
        .enumerate()
        .find(|(i, key)| given[..*i].contains(key))
    {
        return Err(Error::Usage(format!(
            "key {} is given twice (-k); give each key once",
            crate::text::quote(key)
        )));
    }
    if given.len() > 1 {
        let refused = if args.limit > 1 {
            Some(format!(
                "{} {} (a semaphore) takes one key; several keys are mutexes: drop it or keep \
                 one -k",
                origins.option("limit"),
                args.limit
            ))
        } else if args.supersede {
            Some("--supersede takes one key; drop it or keep one -k".to_owned())
        } else if args.replace {
            Some("--replace takes one key; drop it or keep one -k".to_owned())
        } else {
            None
        };
        if let Some(refused) = refused {
            return Err(Error::Usage(format!("{refused} (several keys given)")));
        }
    }
    given
        .iter()
        .map(|key| lock_name(prefix, key, origins))
        .collect()
}

/// The keys `--shared-key` names (each one of the `-k` keys, none twice, not with
/// `--shared`), checked before anything is sent.
fn shared_keys(
    args: &cli::TakeArgs,
    keys: &[LockName],
    origins: &Origins,
) -> Result<Vec<LockName>, Error> {
    let given = &args.shared_key;
    if given.is_empty() {
        return Ok(Vec::new());
    }
    if args.shared {
        let shared = origins.option("shared");
        return Err(Error::Usage(format!(
            "--shared-key is redundant with {shared}, which already makes every key shared: \
             drop --shared-key (or drop {shared} to keep only the named keys shared)"
        )));
    }
    let mut shared: Vec<LockName> = Vec::new();
    for (i, key) in given.iter().enumerate() {
        if given[..i].contains(key) {
            return Err(Error::Usage(format!(
                "--shared-key {} is given twice; give each key once",
                crate::text::quote(key)
            )));
        }
        match keys.iter().find(|name| name.key() == key) {
            Some(name) => shared.push(name.clone()),
            None => {
                return Err(Error::Usage(format!(
                    "--shared-key {} names a key not given with -k; add -k {key}, or name \
                     one of the -k keys",
                    crate::text::quote(key),
                )));
            }
        }
    }
    Ok(shared)
}

/// The longest `--min-interval` or `--cooldown`.
pub const MAX_INTERVAL: Duration = Duration::from_secs(31 * 24 * 3600);

/// `--min-interval` and `--cooldown`, checked.
fn after_run(args: &cli::TakeArgs, origins: &Origins) -> Result<AfterRun, Error> {
    let mut after = AfterRun::default();
    for (id, given, into) in [
        ("min_interval", &args.min_interval, &mut after.min_interval),
        ("cooldown", &args.cooldown, &mut after.cooldown),
    ] {
        let Some(given) = given else { continue };
        if !(Duration::from_millis(1)..=MAX_INTERVAL).contains(&given.value) {
            return Err(Error::Usage(format!(
                "{} is out of range; use 1ms to 31 days",
                origins.duration(id, given)
            )));
        }
        if args.limit > 1 {
            return Err(Error::Usage(format!(
                "{} keeps a mutex taken after a run; it does not apply to a semaphore: drop it or \
                 --limit",
                origins.option(id)
            )));
        }
        *into = Some(given.value);
    }
    Ok(after)
}

fn acquire_config(
    args: cli::AcquireArgs,
    global: &cli::GlobalArgs,
    origins: &Origins,
) -> Result<AcquireConfig, Error> {
    let take = take_config(
        args.take,
        global,
        origins,
        "the lock is held until it expires or is released",
    )?;
    // `-E 0` turns "busy" into a success: with --env-file, the job would go on without the lock
    // (and without its values), the very thing --env-file is there to prevent.
    if args.env_file.is_some() && take.busy_exit == crate::exit::Code::Success.get() {
        return Err(Error::Usage(
            origins.blame(
                "conflict_exit_code",
                "-E 0 makes a busy lock a success, so with --env-file the CI job would go on \
             without the lock; drop -E 0 (or DISTLOCK_CONFLICT_EXIT_CODE=0), or use \
             distlock run -n -E 0 to skip a step quietly"
                    .into(),
            ),
        ));
    }
    // Several tokens and fences do not fit on one line of stdout.
    if take.is_set() && args.env_file.is_none() && !args.json {
        return Err(Error::Usage(
            "acquire with several keys hands over a key, fence and token per key: add \
             --env-file FILE or --json"
                .into(),
        ));
    }
    // Every key goes into the file: each must read the same there.
    if take.is_set() && args.env_file.is_some() {
        for key in &take.keys {
            envfile::check_value("the lock key", key.key())
                .map_err(|message| Error::Usage(origins.blame("key", message)))?;
        }
    }
    // The default prefix needs no line: later steps use it anyway.
    let prefix = Some(global.prefix.as_str()).filter(|p| *p != DEFAULT_PREFIX);
    let env_file = args
        .env_file
        .map(|path| EnvFile::new(path, take.name.key(), prefix))
        .transpose()
        .map_err(|refused| {
            Error::Usage(match refused {
                envfile::Refused::Value { id, message } => origins.blame(id, message),
                envfile::Refused::File(message) => message,
            })
        })?;
    Ok(AcquireConfig {
        take,
        env_file,
        json: args.json,
    })
}

fn run_config(
    args: cli::RunArgs,
    global: &cli::GlobalArgs,
    origins: &Origins,
) -> Result<RunConfig, Error> {
    if args.command.first().is_none_or(|c| c.is_empty()) {
        return Err(Error::Usage(
            "no command given; put it after --, e.g. distlock run --key k -- ./job.sh".into(),
        ));
    }
    let ttl_text = origins.duration("ttl", &args.take.ttl);
    let mut take = take_config(
        args.take,
        global,
        origins,
        "renewal keeps a short TTL alive as long as the command runs",
    )?;
    let ttl = take.ttl;
    // Durations the user gave are echoed as written (and named the way they were set),
    // defaults as computed.
    let renew_every = args
        .renew_every
        .as_ref()
        .map_or_else(|| whole_ms(ttl / 3), |given| given.value);
    let renew_every_text = args.renew_every.as_ref().map_or_else(
        || format!("--renew-every {}", crate::text::duration(renew_every)),
        |given| origins.duration("renew_every", given),
    );
    if renew_every < MIN_RENEW_EVERY || renew_every >= ttl {
        return Err(Error::Usage(format!(
            "{renew_every_text} must be at least 100ms and shorter than {ttl_text} (default: a third of it)"
        )));
    }
    let grace = args.kill_grace.as_ref().map_or_else(
        || whole_ms(ttl / 5).min(Duration::from_secs(5)),
        |given| given.value,
    );
    let grace_text = args.kill_grace.as_ref().map_or_else(
        || format!("--kill-grace {}", crate::text::duration(grace)),
        |given| origins.duration("kill_grace", given),
    );
    let deadlines = Deadlines { ttl, grace };
    take.claim = deadlines.claim(global.redis_timeout.value);
    match deadlines.retry_window(renew_every) {
        Some(window) if window >= MIN_RETRY_WINDOW => {}
        _ => {
            let room = ttl
                .saturating_sub(deadlines.margin() + renew_every + MIN_RETRY_WINDOW)
                .as_millis();
            return Err(Error::Usage(format!(
                "{grace_text} with {ttl_text} and {renew_every_text} leaves no time to retry a failed \
                 renewal before the kill (safety margin {}); use a --kill-grace of at most {room}ms, a \
                 shorter --renew-every, or a longer --ttl",
                crate::text::duration(deadlines.margin()),
            )));
        }
    }
    let kill_signal = Signal::try_from(args.kill_signal).map_err(|_| {
        Error::Usage(format!(
            "--kill-signal {} is not a signal",
            args.kill_signal
        ))
    })?;
    if let Some(given) = &args.timeout {
        if !(Duration::from_millis(1)..=MAX_INTERVAL).contains(&given.value) {
            return Err(Error::Usage(format!(
                "{} is out of range; use 1ms to 31 days",
                origins.duration("timeout", given)
            )));
        }
    }
    for (name, given) in [
        ("warn_after", &args.warn_after),
        ("warn_wait", &args.warn_wait),
    ] {
        if let Some(given) = given {
            if !(Duration::from_millis(1)..=MAX_INTERVAL).contains(&given.value) {
                return Err(Error::Usage(format!(
                    "{} is out of range; use 1ms to 31 days",
                    origins.duration(name, given)
                )));
            }
        }
    }
    take.warn_wait = args.warn_wait.map(|w| w.value);
    let hook = match args.hook.filter(|h| !h.trim().is_empty()) {
        None => None,
        Some(command) => Some(HookConfig {
            command,
            events: hook_events(&args.hook_events)?,
            timeout: args.hook_timeout.value,
        }),
    };
    Ok(RunConfig {
        take,
        renew_every,
        deadlines,
        kill_signal,
        timeout: args.timeout.map(|t| t.value),
        warn_after: args.warn_after.map(|w| w.value),
        hook,
        argv: args.command,
    })
}

/// `--hook-events`: names of [`crate::hook::EVENTS`], comma-separated, or `all`.
fn hook_events(list: &str) -> Result<Vec<Ev>, Error> {
    let mut events = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if name == "all" {
            events.extend(crate::hook::EVENTS);
            continue;
        }
        match crate::hook::EVENTS.iter().find(|ev| ev.as_str() == name) {
            Some(ev) => events.push(*ev),
            None => {
                let known: Vec<&str> = crate::hook::EVENTS.iter().map(|ev| ev.as_str()).collect();
                return Err(Error::Usage(format!(
                    "--hook-events: no event {}; use {} or all",
                    crate::text::quote(name),
                    known.join(", ")
                )));
            }
        }
    }
    Ok(events)
}

/// `d` truncated to whole milliseconds (for defaults that users read back in messages).
fn whole_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
