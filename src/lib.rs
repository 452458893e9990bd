//! distlock: run a command as a critical section guarded by a Redis lock.
//!
//! # Data flow
//!
//! ```text
//! argv -> cli::Cli -> config::Config -> backend (connect) -> lock::SingleNode
//!      -> wait::acquire -> renew::Renewer (thread) + child::spawn
//!      -> child::supervise (signals, reaping, kill deadlines) -> Ending
//!      -> release (always, bounded) -> exit code (exit.rs)
//! ```
//!
//! `commands/run.rs` reads in exactly that order. Module boundaries:
//!
//! * [`cli`]: what the user may type (the one source of help, man pages, completions);
//! * [`config`]: every decision that involves defaults or more than one flag;
//! * [`backend`]: the only module that names redis-rs types;
//! * [`lock`]: keys, token, Lua scripts and the [`lock::Lock`] interface;
//! * [`wait`] and [`renew`]: the engine around a `Lock`;
//! * [`child`]: the process group, terminal, signals and supervision;
//! * [`output`]: the one place that prints; [`error`] and [`exit`]: how distlock ends.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod backend;
pub mod child;
pub mod cli;
pub mod commands;
pub mod config;
pub mod error;
pub mod events;
pub mod exit;
pub mod help;
pub mod lock;
pub mod output;
pub mod renew;
pub mod wait;

use crate::commands::Exit;
use crate::config::{CommandConfig, Config};

/// Parse the command line, run the subcommand, and exit (or die of the child's signal).
pub fn main() -> ! {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The long help texts (exit codes, examples) are built only when they can be shown.
    let wants_docs = args
        .iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "-h" || a == "--help" || a == "help");
    let command = if wants_docs {
        cli::documented_command()
    } else {
        <cli::Cli as clap::CommandFactory>::command()
    };
    let cli = match command
        .try_get_matches_from(&args)
        .and_then(|m| <cli::Cli as clap::FromArgMatches>::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(err) => usage_error(err),
    };
    let out = config::output_for(&cli);
    let result = Config::from_cli(cli).and_then(|cfg| {
        let out = &cfg.output;
        match cfg.command {
            CommandConfig::Run(run) => commands::run::run(run, out),
            CommandConfig::Acquire(take) => commands::acquire::acquire(take, out),
            CommandConfig::Status {
                connector,
                name,
                json,
            } => commands::inspect::status(connector, name, json, out),
            CommandConfig::List {
                connector,
                prefix,
                pattern,
                json,
            } => commands::inspect::list(connector, &prefix, &pattern, json, out),
            CommandConfig::Break {
                connector,
                name,
                yes,
            } => commands::inspect::break_lock(connector, name, yes, out),
            CommandConfig::Renew {
                connector,
                name,
                token,
                ttl,
            } => commands::token::renew(connector, name, token, ttl, out),
            CommandConfig::Release {
                connector,
                name,
                token,
            } => commands::token::release(connector, name, token, out),
            CommandConfig::Generate { what, out: dir } => {
                commands::generate::generate(what, dir, out)
            }
        }
    });
    match result {
        Ok(Exit::Code(code)) => std::process::exit(i32::from(code)),
        Ok(Exit::Signal(signal)) => child::signals::die_of(signal),
        Err(err) => {
            out.error(err.message());
            std::process::exit(i32::from(err.exit_code()))
        }
    }
}

/// Report a command-line error as one line (`--help` and `--version` print normally) and exit.
fn usage_error(err: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = err.print();
        let code = if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            exit::USAGE
        } else {
            0
        };
        std::process::exit(i32::from(code));
    }
    let out = output::Output::new(output::Level::Normal, secrets_in_args());
    out.error(one_line(&err.render().to_string()));
    std::process::exit(i32::from(exit::USAGE))
}

/// clap's multi-line message folded into one line: the error, its tip, and where to look.
fn one_line(rendered: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut usage = None;
    for line in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("error: ") {
            parts.push(rest.to_owned());
        } else if let Some(rest) = line.strip_prefix("Usage: ") {
            usage = Some(rest.to_owned());
        } else if line.starts_with("For more information") {
            continue;
        } else {
            parts.push(line.to_owned());
        }
    }
    let mut text = parts.join(" ");
    if let Some(usage) = usage {
        text.push_str(&format!(" (usage: {usage}; see --help)"));
    }
    text
}

/// Passwords in a --redis argument that clap refused to parse, so they can be redacted.
/// (`args_os`: an argument that is not UTF-8 is exactly what clap may have refused.)
fn secrets_in_args() -> Vec<String> {
    std::env::args_os()
        .chain(std::env::var_os("DISTLOCK_REDIS_URL"))
        .chain(std::env::var_os("REDIS_URL"))
        .filter_map(|a| backend::password_in(&a.to_string_lossy()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_fold_into_one_line() {
        let text = "error: unexpected argument '--foo' found\n\n  tip: to pass '--foo' as a value, use '-- --foo'\n\nUsage: distlock run --key <KEY> <COMMAND>...\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(text),
            "unexpected argument '--foo' found tip: to pass '--foo' as a value, use '-- --foo' (usage: distlock run --key <KEY> <COMMAND>...; see --help)"
        );
    }
}
