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
pub mod lock;
pub mod output;
pub mod renew;
pub mod wait;

use clap::Parser;

use crate::commands::run::Exit;
use crate::config::{CommandConfig, Config};

/// Parse the command line, run the subcommand, and exit (or die of the child's signal).
pub fn main() -> ! {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => usage_error(err),
    };
    let out = config::output_for(&cli);
    let result = Config::from_cli(cli).and_then(|cfg| match cfg.command {
        CommandConfig::Run(run) => commands::run::run(run, &cfg.output),
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
fn secrets_in_args() -> Vec<String> {
    std::env::args()
        .chain(std::env::var("DISTLOCK_REDIS_URL"))
        .chain(std::env::var("REDIS_URL"))
        .filter_map(|a| backend::password_in(&a))
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
