//! distlock: run a command as a critical section guarded by a Redis lock.
//!
//! # Data flow
//!
//! ```text
//! argv -> cli::Cli (a refused line: cli::usage, exit 64) -> config::Config
//!      -> commands::run::run: lock::open (a worker thread connects) -> dyn Lock
//!      -> session::reentry (an ancestor holds this lock? exec the command under it)
//!      -> session::Session::start (signals become events) -> Session::take (wait::acquire)
//!      -> Session::interrupted? -> child::spawn + renew::Renewer (thread)
//!      -> child::supervise (signals, reaping, kill deadlines) -> Ending
//!      -> Session::release (always, bounded) -> exit::Exit (exit.rs)
//! ```
//!
//! `commands/run.rs` reads in exactly that order (`acquire` shares the session up to the
//! take, then hands the token over). Module boundaries, top to bottom: a module imports only
//! modules below it (the table in `docs/design.md`, "Source layout", lists what each imports):
//!
//! * [`commands`]: one function per subcommand (`inspect/`: status, list, break, check);
//!   [`session`]: what `run` and `acquire` share, given an open lock (`reenter.rs`, `take.rs`);
//! * [`config`]: every decision that involves defaults or more than one flag (`topology.rs`
//!   builds where the locks live; `origins.rs` remembers who set each value; `history.rs`
//!   the history commands and `--history`);
//! * [`cli`]: what the user may type (the one source of help, man pages, completions: `mod.rs`
//!   the top level, `args.rs` each subcommand, `values.rs` single values), and how a refused
//!   command line is reported (`usage.rs`); `history.rs`: the arguments of log and stats;
//! * [`history`]: `distlock log` and `distlock stats`, reading what the scripts recorded (on a
//!   Redlock, what a majority did); the recording itself is [`lock::history`]'s;
//! * [`error`]: typed errors that decide exit codes;
//! * [`child`]: the process group, the terminal and supervision; `child/guard/`: the guard
//!   process that kills the group if distlock dies or stalls;
//! * [`wait`]: the acquire loop in small steps (`waiter.rs`, `sleep.rs`) and its display
//!   (`display.rs`); [`renew`]: the renewal thread;
//! * [`hook`]: `run --hook`, the command run on events (it hears them through [`output`]'s
//!   tap; the supervisor hands back the hooks it reaps);
//! * [`signals`] and [`events`]: the process-wide signal policy, and the one channel the main
//!   thread waits on (signals, release notifications, renewals);
//! * [`lock`]: keys, token, Lua scripts and the [`lock::Lock`] interface: `protocol.rs` (what
//!   every lock says to one server), `single.rs`, `redlock/` (its majority rules and refusals),
//!   `set.rs` (several keys taken in one order, a lock over one member lock per key),
//!   `topology.rs` (opening, listing, what a deployment refuses), `history.rs` (what the
//!   scripts record into a lock's history, and a loss), `model/` (tests only: a Redis in
//!   memory that runs the real scripts, and `ScriptLock`, the lock over it that the engine's
//!   unit tests drive; `docs/verification.md`);
//! * [`backend`]: the only module that names redis-rs types; `backend/route/` finds the server
//!   (fixed, Cluster, Sentinel);
//! * [`envfile`]: the `NAME=value` file `acquire --env-file` hands a lock to later CI steps in;
//!   [`help`]: the text `--help` and the man pages share;
//! * [`output`]: the one place that prints (it imports nothing of the crate);
//! * leaves: [`exit`] (the [`exit::Code`]s and the tables built from them), [`text`]
//!   (quoting, sanitising, durations), [`clock`] (the clock of leases and kill deadlines,
//!   CLOCK_BOOTTIME: it counts a suspend).

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod backend;
pub mod child;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod config;
pub mod envfile;
pub mod error;
pub mod events;
pub mod exit;
pub mod help;
pub mod history;
pub mod hook;
pub mod lock;
pub mod output;
pub mod renew;
pub mod session;
pub mod signals;
pub mod text;
pub mod wait;

pub use cli::VERSION;

use crate::config::{CommandConfig, Config};
use crate::exit::Exit;

/// Parse the command line, run the subcommand, and exit (or die of the child's signal).
pub fn main() -> ! {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The long help texts (exit codes, examples) are built only when they can be shown.
    let wants_docs = args
        .iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "-h" || a == "--help" || a == "help");
    let parse = |command: &mut clap::Command| {
        command.try_get_matches_from_mut(&args).and_then(|m| {
            let cli = <cli::Cli as clap::FromArgMatches>::from_arg_matches(&m)?;
            Ok((cli, config::Origins::of(command, &m)))
        })
    };
    // `distlock [GLOBAL OPTIONS] run ...` is parsed with the run subcommand alone (see
    // `cli::run_command`); anything it does not accept (help, --version, another subcommand
    // with a `run` among its values, a mistake) goes to the full command, which says it as it
    // always did.
    let runs = args
        .iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "run");
    let fast = (!wants_docs && runs)
        .then(|| parse(&mut cli::run_command()).ok())
        .flatten();
    let (cli, origins) = match fast {
        Some(parsed) => parsed,
        None => {
            let mut command = if wants_docs {
                cli::documented_command()
            } else {
                <cli::Cli as clap::CommandFactory>::command()
            };
            match parse(&mut command) {
                Ok(parsed) => parsed,
                Err(err) => cli::usage::usage_error(err, &command, &args),
            }
        }
    };
    let mut out = config::output_for(&cli);
    // `check` speaks the monitoring-plugins convention: whatever fails is UNKNOWN (exit 3),
    // said on stdout too, where monitoring systems read it.
    let checks = matches!(cli.command, cli::Command::Check(_));
    let result = Config::from_cli(cli, &origins).and_then(|cfg| {
        // The decided output also names the lock: errors below are about it too.
        out = cfg.output.clone();
        let out = &cfg.output;
        match cfg.command {
            // A copy that only reports its parent's lost lock into the history.
            CommandConfig::Run(run) if let Some(report) = history::take_lost_report() => {
                // Into each key's history (a set lost them all: its command was stopped).
                for name in &run.take.keys {
                    history::send_lost(&run.take.topology, name, &report);
                }
                Ok(Exit::from(exit::Code::Success))
            }
            CommandConfig::Run(run) => commands::run::run(run, out),
            CommandConfig::Acquire(acquire) => commands::acquire::acquire(acquire, out),
            CommandConfig::Status {
                topology,
                name,
                json,
            } => commands::inspect::status(topology, name, json, out),
            CommandConfig::List {
                topology,
                prefix,
                pattern,
                json,
            } => commands::inspect::list(topology, &prefix, &pattern, json, out),
            CommandConfig::Break {
                topology,
                name,
                holder,
                yes,
            } => {
                // Its releases are recorded as breaks, by this process (see `history`).
                history::mark_break();
                commands::inspect::break_lock(topology, name, holder, yes, out)
            }
            CommandConfig::Renew {
                topology,
                name,
                token,
                set,
                ttl,
            } => commands::token::renew(topology, (name, token, set), ttl, out),
            CommandConfig::Release {
                topology,
                name,
                token,
                set,
                failed,
            } => commands::token::release(topology, (name, token, set), failed, out),
            CommandConfig::Log(log) => history::log(log, out),
            CommandConfig::Stats(stats) => history::stats(stats, out),
            CommandConfig::Check(check) => commands::inspect::check::check(check),
            CommandConfig::Metrics(metrics) => commands::metrics::metrics(metrics, out),
        }
    });
    match result {
        Ok(Exit::Code(code)) => std::process::exit(i32::from(code)),
        Ok(Exit::Signal(signal)) => signals::die_of(signal),
        Err(err) if checks => {
            let code = exit::Plugin::Unknown.get();
            let line = text::unknown_line(&err.message());
            out.error(err.event(), output::Msg::new(err.message()).exit(code));
            use std::io::Write;
            let _ = writeln!(std::io::stdout().lock(), "{line}");
            std::process::exit(i32::from(code))
        }
        Err(err) => {
            let code = err.exit_code();
            out.error(err.event(), output::Msg::new(err.message()).exit(code));
            std::process::exit(i32::from(code))
        }
    }
}
