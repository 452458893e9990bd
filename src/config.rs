//! From what the user typed ([`crate::cli`]) to what distlock will do ([`Config`]): defaults
//! derived from other flags, cross-flag rules, and every check that needs more than one value.
//! Nothing but this module reads the parser's types.

use std::collections::HashMap;
use std::ffi::OsString;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::backend::{Connector, Endpoint, Servers, TlsFiles};
use crate::cli::{self, Cli};
use crate::envfile::{self, EnvFile};
use crate::error::Error;
use crate::lock::{self, AfterRun, LockName, Token, Topology};
use crate::output::{self, Format, Level, Output};
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
/// The fewest characters of a holder id that `break --holder` accepts: fewer would name a
/// holder by accident.
pub const MIN_HOLDER_ID_CHARS: usize = 4;
/// Default Redis URL.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
/// Default key prefix (clap's default for --prefix; a test keeps the two equal).
pub const DEFAULT_PREFIX: &str = "distlock:";

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
        /// The work failed: no cool-down (`--failed`).
        failed: bool,
    },
    /// `distlock log`.
    Log(crate::history::LogConfig),
    /// `distlock stats`.
    Stats(crate::history::StatsConfig),
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
    pub topology: Topology,
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
    /// The expiry an acquire attempt sets, until the holder extends it to the TTL (see
    /// [`crate::lock`]): what an attempt whose reply was lost can block the key for.
    pub claim: Duration,
    /// How long to retry a Redis that has never answered.
    pub unreachable_after: Duration,
    /// 1: a mutex; N: a counting semaphore.
    pub limit: u32,
    /// Cancel the older waiters (`--supersede`).
    pub supersede: bool,
    /// Stop the holder's command, and cancel the older waiters (`--replace`).
    pub replace: bool,
    /// How long the lock stays taken after a run that succeeded.
    pub after: AfterRun,
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
    /// The command.
    pub argv: Vec<OsString>,
}

/// Where the values the user gave came from, so that a message names what the user actually set:
/// a value read from a `DISTLOCK_*` variable is named by that variable, since the flag it stands
/// for was never typed (`DISTLOCK_TTL=25h (from the environment) is out of range`).
#[derive(Clone, Debug, Default)]
pub struct Origins {
    /// Argument id (`ttl`, `redis_timeout`, ...) -> the variable its value was read from.
    from_env: HashMap<String, String>,
}

impl Origins {
    /// Where clap found each value: in the matches of the command and of its subcommand. (clap
    /// gives a global option the same source at every level.)
    pub fn of(command: &clap::Command, matches: &clap::ArgMatches) -> Origins {
        let mut origins = Origins::default();
        origins.record(command, matches);
        if let Some((name, sub_matches)) = matches.subcommand() {
            if let Some(sub) = command.find_subcommand(name) {
                origins.record(sub, sub_matches);
            }
        }
        origins
    }

    fn record(&mut self, command: &clap::Command, matches: &clap::ArgMatches) {
        for arg in command.get_arguments() {
            let (id, Some(var)) = (arg.get_id().as_str(), arg.get_env()) else {
                continue;
            };
            // Only ids these matches know: clap's debug builds panic on others.
            if matches.ids().any(|known| known.as_str() == id)
                && matches.value_source(id) == Some(clap::parser::ValueSource::EnvVariable)
            {
                self.from_env
                    .insert(id.to_owned(), var.to_string_lossy().into_owned());
            }
        }
    }

    /// The variable the value of argument `id` was read from, if it was.
    fn env_var(&self, id: &str) -> Option<&str> {
        self.from_env.get(id).map(String::as_str)
    }

    /// The option `id`, as the user set it: `--tls-ca` or `DISTLOCK_TLS_CA (from the environment)`.
    fn option(&self, id: &str) -> String {
        match self.env_var(id) {
            Some(var) => format!("{var} (from the environment)"),
            None => flag(id),
        }
    }

    /// The option `id` with its value (already made safe to print), as the user set it:
    /// `--ttl 25h` or `DISTLOCK_TTL=25h (from the environment)`.
    fn given(&self, id: &str, value: &str) -> String {
        match self.env_var(id) {
            Some(var) => format!("{var}={value} (from the environment)"),
            None => format!("{} {value}", flag(id)),
        }
    }

    /// A duration the user gave, named as [`Origins::given`] does, echoed as written.
    fn duration(&self, id: &str, d: &cli::DurationArg) -> String {
        self.given(id, &output::sanitize(&d.text))
    }

    /// A message about the value of `id` found by another module (it names the value, not where it
    /// came from), prefixed with the variable when the value came from the environment.
    fn blame(&self, id: &str, message: String) -> String {
        blamed_on(self.env_var(id), message)
    }

    /// Pretend the values of `ids` came from these variables (for tests of the messages).
    #[cfg(test)]
    fn with_env(pairs: &[(&str, &str)]) -> Origins {
        Origins {
            from_env: pairs
                .iter()
                .map(|(id, var)| (id.to_string(), var.to_string()))
                .collect(),
        }
    }
}

/// `message`, prefixed with the environment variable `var` when the value came from one.
fn blamed_on(var: Option<&str>, message: String) -> String {
    match var {
        Some(var) => format!("{var} (from the environment): {message}"),
        None => message,
    }
}

/// The long flag of argument `id` (clap derives `--redis-timeout` from `redis_timeout`).
fn flag(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
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

/// The URLs given with --redis or DISTLOCK_REDIS_URL (clap reads both), else REDIS_URL.
fn redis_urls(global: &cli::GlobalArgs) -> Vec<String> {
    if !global.redis.is_empty() {
        return global.redis.clone();
    }
    std::env::var("REDIS_URL")
        .ok()
        .filter(|s| !s.is_empty())
        .into_iter()
        .collect()
}

impl Config {
    /// Decide everything, or explain the first problem as a usage error (naming each value the
    /// way the user set it, see [`Origins`]).
    pub fn from_cli(cli: Cli, origins: &Origins) -> Result<Config, Error> {
        let output = output_for(&cli);
        let global = &cli.global;
        let prefix = global.prefix.as_str();
        crate::history::configure(history(global, origins)?);
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
                CommandConfig::Renew {
                    topology: topology(global, origins, None)?,
                    name: lock_name(prefix, &args.held.key, origins)?,
                    token: token(&args.held.token, origins)?,
                    ttl: args.ttl.map(|ttl| ttl.value),
                }
            }
            cli::Command::Release(args) => CommandConfig::Release {
                topology: topology(global, origins, None)?,
                name: lock_name(prefix, &args.held.key, origins)?,
                token: token(&args.held.token, origins)?,
                failed: args.failed,
            },
            cli::Command::Log(args) => CommandConfig::Log(crate::history::LogConfig {
                topology: topology(global, origins, None)?,
                prefix: checked_prefix(prefix, origins)?.to_owned(),
                name: args
                    .key
                    .map(|k| lock_name(prefix, &k, origins))
                    .transpose()?,
                since_ms: args.since.map(|s| s.0),
                lines: args.lines,
                json: args.json,
                follow: args.follow,
                clear: args.clear,
            }),
            cli::Command::Stats(args) => CommandConfig::Stats(crate::history::StatsConfig {
                topology: topology(global, origins, None)?,
                prefix: checked_prefix(prefix, origins)?.to_owned(),
                name: args
                    .key
                    .map(|k| lock_name(prefix, &k, origins))
                    .transpose()?,
                since_ms: args.since.map(|s| s.0),
                json: args.json,
            }),
            cli::Command::Generate(args) => CommandConfig::Generate {
                what: args.what,
                out: args.out,
            },
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
            CommandConfig::List { .. } | CommandConfig::Generate { .. } => None,
        }
    }
}

/// The servers the global options describe (`ttl`: the lock's TTL, when the command takes a
/// lock; a Redlock's per-node timeout is derived from it).
fn topology(
    global: &cli::GlobalArgs,
    origins: &Origins,
    ttl: Option<Duration>,
) -> Result<Topology, Error> {
    let urls = redis_urls(global);
    // Name the variable a bad URL came from: DISTLOCK_REDIS_URL (read by clap) or REDIS_URL.
    let from_env = if global.redis.is_empty() {
        (!urls.is_empty()).then_some("REDIS_URL")
    } else {
        origins.env_var("redis")
    };
    // An empty URL is most often a CI secret that is missing and expanded to nothing: say so,
    // rather than that "the Redis URL has no scheme". (An empty REDIS_URL counts as unset.)
    if !urls.is_empty() && urls.iter().all(|u| u.trim().is_empty()) {
        return Err(Error::Usage(match from_env {
            Some(var) => format!(
                "{var} is set but empty (a missing CI secret?); set it to a URL such as \
                 redis://HOST:6379, or unset it to use the default (REDIS_URL, else {DEFAULT_URL})"
            ),
            None => format!(
                "--redis is empty; give a URL such as redis://HOST:6379, or leave --redis out to \
                 use the default (DISTLOCK_REDIS_URL, else REDIS_URL, else {DEFAULT_URL})"
            ),
        }));
    }
    let urls = if urls.is_empty() {
        vec![DEFAULT_URL.to_owned()]
    } else {
        urls
    };
    let servers = Servers::parse(&urls).map_err(|e| Error::Usage(blamed_on(from_env, e)))?;
    let timeout = global.redis_timeout.value;
    if !(Duration::from_millis(10)..=Duration::from_secs(60)).contains(&timeout) {
        return Err(Error::Usage(format!(
            "{} is out of range; use 10ms to 60s",
            origins.duration("redis_timeout", &global.redis_timeout)
        )));
    }
    let tls = tls_files(global, origins, servers.is_tls())?;
    let replicas = match global.replicas {
        None => None,
        Some(n) => {
            let within = global.replicas_timeout.value;
            if !(Duration::from_millis(10)..=timeout).contains(&within) {
                return Err(Error::Usage(format!(
                    "{} is out of range; use 10ms to --redis-timeout ({})",
                    origins.duration("replicas_timeout", &global.replicas_timeout),
                    output::duration(timeout)
                )));
            }
            if matches!(servers, Servers::Independent(_)) {
                return Err(Error::Usage(
                    "--replicas waits for the replicas of one primary; a Redlock's nodes are \
                     independent primaries and its majority is its safety: drop --replicas, or \
                     give one URL (plain, redis+sentinel:// or redis+cluster://)"
                        .into(),
                ));
            }
            Some((n, within))
        }
    };
    let set_up = |e| Error::Usage(format!("cannot set up the Redis client: {e}"));
    let connector = |endpoint: &Endpoint| {
        Connector::fixed(endpoint.clone(), timeout, tls.clone()).map_err(set_up)
    };
    match &servers {
        Servers::One(_) | Servers::Sentinel(_) | Servers::Cluster(_) => {
            Ok(Topology::Single(Box::new(
                Connector::for_servers(&servers, timeout, tls.clone())
                    .map_err(set_up)?
                    .with_replicas(replicas),
            )))
        }
        Servers::Independent(endpoints) => {
            let node_timeout = match &global.node_timeout {
                Some(given) => {
                    if !(Duration::from_millis(10)..=timeout).contains(&given.value) {
                        return Err(Error::Usage(format!(
                            "{} is out of range; use 10ms to --redis-timeout ({})",
                            origins.duration("node_timeout", given),
                            output::duration(timeout)
                        )));
                    }
                    given.value
                }
                // A lock's validity loses what its nodes take to answer: 5% of its TTL. A
                // command that takes no lock (status, list, break, renew, release) has no
                // validity to protect, and a busy machine's TLS handshake can take longer.
                None => match ttl {
                    Some(ttl) => (ttl / 20)
                        .clamp(Duration::from_millis(50), Duration::from_millis(500))
                        .min(timeout),
                    None => timeout,
                },
            };
            Ok(Topology::Redlock {
                nodes: endpoints
                    .iter()
                    .map(connector)
                    .collect::<Result<Vec<_>, _>>()?,
                node_timeout,
            })
        }
    }
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
            output::quote(id)
        )));
    }
    Ok(id.to_owned())
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

/// `--history`: at least 1s.
fn history(global: &cli::GlobalArgs, origins: &Origins) -> Result<Option<Duration>, Error> {
    match &global.history {
        Some(d) if d.value < crate::history::MIN_DURATION => Err(Error::Usage(format!(
            "{} is too short; keep a history for 1s or more, e.g. 7d",
            origins.duration("history", d)
        ))),
        d => Ok(d.as_ref().map(|d| d.value)),
    }
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
    let name = lock_name(&global.prefix, &args.key, origins)?;
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
    if let Topology::Redlock { nodes, .. } = &topology {
        redlock_allows(nodes.len(), args.supersede || args.replace, args.limit)?;
    }
    Ok(TakeConfig {
        topology,
        name,
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
        limit: args.limit,
        supersede: args.supersede,
        replace: args.replace,
        after,
    })
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

/// What a Redlock over `nodes` independent primaries cannot do: keep a line of waiters
/// (`--supersede` cancels the waiters ahead in it), or count more than one holder (a majority of
/// slots each does not make at most N holders: with 3 nodes and `--limit 3`, four holders can
/// each hold slots on two nodes).
fn redlock_allows(nodes: usize, supersede: bool, limit: u32) -> Result<(), Error> {
    if supersede {
        return Err(Error::Usage(format!(
            "--supersede and --replace need a line of waiters, which a Redlock over {nodes} \
             independent servers cannot keep; drop them, or give one URL (plain, \
             redis+sentinel:// or redis+cluster://)"
        )));
    }
    if limit > 1 {
        return Err(Error::Usage(format!(
            "--limit {limit} cannot be kept over a Redlock of {nodes} independent servers (a \
             majority of slots for each holder does not bound the holders to {limit}); use \
             --limit 1, or give one URL (plain, redis+sentinel:// or redis+cluster://)"
        )));
    }
    Ok(())
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
    if args.env_file.is_some() && take.busy_exit == crate::exit::SUCCESS {
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

/// Read the TLS files named on the command line; only meaningful with rediss://.
fn tls_files(global: &cli::GlobalArgs, origins: &Origins, tls: bool) -> Result<TlsFiles, Error> {
    let named = [
        ("tls_ca", &global.tls_ca),
        ("tls_cert", &global.tls_cert),
        ("tls_key", &global.tls_key),
    ];
    if !tls {
        let given: Vec<String> = named
            .iter()
            .filter(|(_, path)| path.is_some())
            .map(|(id, _)| origins.option(id))
            .collect();
        if !given.is_empty() {
            let verb = if given.len() == 1 { "needs" } else { "need" };
            return Err(Error::Usage(format!(
                "{} {verb} a rediss:// URL",
                and_list(&given)
            )));
        }
        return Ok(TlsFiles::default());
    }
    let read = |id: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| {
            Error::Usage(format!(
                "cannot read {}: {e}",
                origins.given(id, &output::quote(&path.display().to_string()))
            ))
        })
    };
    let ca = global
        .tls_ca
        .as_deref()
        .map(|p| read("tls_ca", p))
        .transpose()?;
    let client = match (&global.tls_cert, &global.tls_key) {
        (Some(cert), Some(key)) => Some((read("tls_cert", cert)?, read("tls_key", key)?)),
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => {
            let (given, missing) = if global.tls_cert.is_some() {
                ("tls_cert", "--tls-key")
            } else {
                ("tls_key", "--tls-cert")
            };
            return Err(Error::Usage(format!(
                "{} is given without {missing}; --tls-cert and --tls-key go together: give both or neither",
                origins.option(given)
            )));
        }
    };
    Ok(TlsFiles { ca, client })
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
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
        || format!("--renew-every {}", output::duration(renew_every)),
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
        || format!("--kill-grace {}", output::duration(grace)),
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
                output::duration(deadlines.margin()),
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
    Ok(RunConfig {
        take,
        renew_every,
        deadlines,
        kill_signal,
        timeout: args.timeout.map(|t| t.value),
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
        parse_with(&Origins::default(), args)
    }

    /// Parse `distlock ... run ARGS`, as if the values of `origins` came from the environment.
    fn parse_with(origins: &Origins, args: &[&str]) -> Result<RunConfig, Error> {
        let mut argv = vec!["distlock", "--redis", "redis://127.0.0.1:1", "run"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).map_err(|e| Error::Usage(e.to_string()))?;
        match Config::from_cli(cli, origins)?.command {
            CommandConfig::Run(run) => Ok(run),
            _ => unreachable!("a run command line"),
        }
    }

    fn usage(args: &[&str]) -> String {
        usage_with(&Origins::default(), args)
    }

    fn usage_with(origins: &Origins, args: &[&str]) -> String {
        match parse_with(origins, args) {
            Err(Error::Usage(msg)) => msg,
            Err(other) => panic!("expected a usage error, got {other}"),
            Ok(_) => panic!("expected a usage error for {args:?}"),
        }
    }

    #[test]
    fn a_redlock_refuses_what_it_cannot_keep() {
        let redlock = [
            "--redis",
            "redis://127.0.0.1:2",
            "--redis",
            "redis://127.0.0.1:3",
        ];
        let with = |extra: &[&'static str]| {
            let mut args = redlock.to_vec();
            args.extend_from_slice(extra);
            args.extend_from_slice(&["-k", "x", "--", "true"]);
            args
        };
        assert!(usage(&with(&["--supersede"])).contains("--supersede and --replace need a line"));
        assert!(usage(&with(&["--replace"])).contains("--supersede and --replace need a line"));
        let msg = usage(&with(&["--limit", "3"]));
        assert!(
            msg.contains("--limit 3 cannot be kept over a Redlock of 2"),
            "{msg}"
        );
        assert!(parse(&with(&["--limit", "1"])).is_ok());
        // One server keeps both.
        assert!(parse(&["-k", "x", "--supersede", "--limit", "3", "--", "true"]).is_ok());
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
    fn default_prefix_is_the_one_clap_applies() {
        use clap::CommandFactory;
        let command = Cli::command();
        let prefix = command
            .get_arguments()
            .find(|a| a.get_id() == "prefix")
            .unwrap();
        assert_eq!(
            prefix.get_default_values(),
            [std::ffi::OsStr::new(DEFAULT_PREFIX)]
        );
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

    #[test]
    fn values_from_the_environment_are_named_by_their_variable() {
        let env = Origins::with_env(&[
            ("ttl", "DISTLOCK_TTL"),
            ("renew_every", "DISTLOCK_RENEW_EVERY"),
            ("report_every", "DISTLOCK_REPORT_EVERY"),
            ("redis_timeout", "DISTLOCK_REDIS_TIMEOUT"),
            ("prefix", "DISTLOCK_PREFIX"),
        ]);
        assert_eq!(
            usage_with(&env, &["-k", "k", "--ttl", "25h", "true"]),
            "DISTLOCK_TTL=25h (from the environment) is out of range; use 1s to 24h \
             (renewal keeps a short TTL alive as long as the command runs)"
        );
        let msg = usage_with(&env, &["-k", "k", "--renew-every", "1m", "true"]);
        assert!(
            msg.starts_with(
                "DISTLOCK_RENEW_EVERY=1m (from the environment) must be at least 100ms and \
                 shorter than DISTLOCK_TTL=30s (from the environment)"
            ),
            "{msg}"
        );
        let msg = usage_with(&env, &["-k", "k", "--report-every", "10ms", "true"]);
        assert_eq!(
            msg,
            "DISTLOCK_REPORT_EVERY=10ms (from the environment) is too short; use 1s or more"
        );
        let msg = usage_with(&env, &["--redis-timeout", "90s", "-k", "k", "true"]);
        assert_eq!(
            msg,
            "DISTLOCK_REDIS_TIMEOUT=90s (from the environment) is out of range; use 10ms to 60s"
        );
        let msg = usage_with(&env, &["--prefix", "a{", "-k", "k", "true"]);
        assert!(
            msg.starts_with("DISTLOCK_PREFIX (from the environment): the prefix"),
            "{msg}"
        );
        // Typed values keep their flags, even when other values came from the environment.
        let grace = Origins::with_env(&[("kill_grace", "DISTLOCK_KILL_GRACE")]);
        let msg = usage_with(
            &grace,
            &["-k", "k", "--ttl", "10s", "--kill-grace", "9s", "true"],
        );
        assert!(
            msg.starts_with(
                "DISTLOCK_KILL_GRACE=9s (from the environment) with --ttl 10s and --renew-every \
                 3.3s leaves no time"
            ),
            "{msg}"
        );
    }

    #[test]
    fn every_password_is_redacted_as_typed_and_decoded() {
        for url in [
            "redis://:p%40ss@127.0.0.1:6379",
            "redis+sentinel://:p%40ss@127.0.0.1:26379/mymaster",
            "redis+sentinel://:p%40ss@127.0.0.1:26379/mymaster?sentinel_password=other",
        ] {
            let cli =
                Cli::try_parse_from(["distlock", "--redis", url, "status", "-k", "k"]).unwrap();
            let out = output_for(&cli);
            assert_eq!(out.redact("p%40ss and p@ss"), "*** and ***", "{url}");
        }
    }

    #[test]
    fn an_empty_redis_url_is_named() {
        let empty = |origins: &Origins, url: &str| {
            let cli =
                Cli::try_parse_from(["distlock", "--redis", url, "status", "-k", "k"]).unwrap();
            match Config::from_cli(cli, origins) {
                Err(Error::Usage(msg)) => msg,
                _ => panic!("expected a usage error for {url:?}"),
            }
        };
        let env = Origins::with_env(&[("redis", "DISTLOCK_REDIS_URL")]);
        assert!(
            empty(&env, "").starts_with(
                "DISTLOCK_REDIS_URL is set but empty (a missing CI secret?); set it to a URL such \
                 as redis://HOST:6379, or unset it"
            ),
            "{}",
            empty(&env, "")
        );
        assert!(
            empty(&Origins::default(), " ").starts_with("--redis is empty; give a URL"),
            "{}",
            empty(&Origins::default(), " ")
        );
    }

    #[test]
    fn tls_options_are_named_the_way_they_were_set() {
        let env = Origins::with_env(&[("tls_ca", "DISTLOCK_TLS_CA")]);
        let msg = usage_with(&env, &["--tls-ca", "/ca.pem", "-k", "k", "true"]);
        assert_eq!(
            msg,
            "DISTLOCK_TLS_CA (from the environment) needs a rediss:// URL"
        );
        let msg = usage_with(
            &env,
            &[
                "--tls-ca",
                "/ca.pem",
                "--tls-cert",
                "/c.pem",
                "-k",
                "k",
                "true",
            ],
        );
        assert_eq!(
            msg,
            "DISTLOCK_TLS_CA (from the environment) and --tls-cert need a rediss:// URL"
        );
        let tls = |extra: &[&str]| {
            let mut argv = vec!["distlock", "--redis", "rediss://127.0.0.1:1"];
            argv.extend_from_slice(extra);
            argv.extend_from_slice(&["status", "-k", "k"]);
            let cli = Cli::try_parse_from(argv).unwrap();
            match Config::from_cli(cli, &env) {
                Err(Error::Usage(msg)) => msg,
                _ => panic!("expected a usage error for {extra:?}"),
            }
        };
        let msg = tls(&["--tls-ca", "/nonexistent/ca.pem"]);
        assert!(
            msg.starts_with(
                "cannot read DISTLOCK_TLS_CA=\"/nonexistent/ca.pem\" (from the environment): "
            ),
            "{msg}"
        );
        let msg = tls(&["--tls-cert", "/nonexistent/c.pem"]);
        assert!(
            msg.starts_with("--tls-cert is given without --tls-key;"),
            "{msg}"
        );
    }

    #[test]
    fn durations_are_echoed_as_written() {
        assert_eq!(
            usage(&["-k", "k", "--ttl", "25h", "true"]),
            "--ttl 25h is out of range; use 1s to 24h \
             (renewal keeps a short TTL alive as long as the command runs)"
        );
        let msg = usage(&[
            "-k",
            "k",
            "--ttl",
            "0.5m",
            "--renew-every",
            "30000ms",
            "true",
        ]);
        assert!(
            msg.starts_with(
                "--renew-every 30000ms must be at least 100ms and shorter than --ttl 0.5m"
            ),
            "{msg}"
        );
        // Given values as written, defaults (a fifth of --ttl, capped at 5s) as computed.
        let msg = usage(&["-k", "k", "--ttl", "10s", "--kill-grace", "9000ms", "true"]);
        assert!(
            msg.starts_with("--kill-grace 9000ms with --ttl 10s and --renew-every 3.3s leaves"),
            "{msg}"
        );
        let msg = usage(&["-k", "k", "--ttl", "2s", "--renew-every", "1500ms", "true"]);
        assert!(
            msg.starts_with("--kill-grace 400ms with --ttl 2s and --renew-every 1500ms leaves"),
            "{msg}"
        );
    }
}
