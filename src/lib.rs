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
//! take, then hands the token over). Module boundaries:
//!
//! * [`cli`]: what the user may type (the one source of help, man pages, completions), and how
//!   a refused command line is reported;
//! * [`config`]: every decision that involves defaults or more than one flag;
//! * [`commands`]: one function per subcommand; [`session`]: what `run` and `acquire` share
//!   (reentrancy, signals, the take, the release), given an open lock;
//! * [`backend`]: the only module that names redis-rs types;
//! * [`lock`]: keys, token, Lua scripts and the [`lock::Lock`] interface;
//! * [`wait`] (with its display) and [`renew`]: the engine around a `Lock`;
//! * [`clock`]: the clock of leases and kill deadlines (CLOCK_BOOTTIME: it counts a suspend);
//! * [`signals`] and [`events`]: the process-wide signal policy, and the one channel the main
//!   thread waits on (signals, release notifications, renewals);
//! * [`child`]: the process group, the guard, the terminal and supervision;
//! * [`output`]: the one place that prints; [`error`] and [`exit`]: how distlock ends (the
//!   [`exit::Code`]s and the tables built from them);
//! * [`envfile`]: the `NAME=value` file `acquire --env-file` hands a lock to later CI steps in.

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
    // `distlock run ...` is parsed with the run subcommand alone (see `cli::run_command`);
    // anything it does not accept (help, --version, a mistake) goes to the full command,
    // which says it as it always did.
    let fast = (!wants_docs && args.get(1).is_some_and(|a| a == "run"))
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
    let result = Config::from_cli(cli, &origins).and_then(|cfg| {
        // The decided output also names the lock: errors below are about it too.
        out = cfg.output.clone();
        let out = &cfg.output;
        match cfg.command {
            // A copy that only reports its parent's lost lock into the history.
            CommandConfig::Run(run) if let Some(report) = history::take_lost_report() => {
                history::send_lost(&run.take.topology, &run.take.name, &report);
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
                ttl,
            } => commands::token::renew(topology, name, token, ttl, out),
            CommandConfig::Release {
                topology,
                name,
                token,
                failed,
            } => commands::token::release(topology, name, token, failed, out),
            CommandConfig::Log(log) => history::log(log, out),
            CommandConfig::Stats(stats) => history::stats(stats, out),
            CommandConfig::Generate { what, out: dir } => {
                commands::generate::generate(what, dir, out)
            }
        }
    });
    match result {
        Ok(Exit::Code(code)) => std::process::exit(i32::from(code)),
        Ok(Exit::Signal(signal)) => signals::die_of(signal),
        Err(err) => {
            let code = err.exit_code();
            out.error(err.event(), output::Msg::new(err.message()).exit(code));
            std::process::exit(i32::from(code))
        }
    }
}
