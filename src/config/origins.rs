//! Where each value the user gave came from (a flag, or a `DISTLOCK_*` variable clap read for
//! it), so that every message of the configuration names what the user actually set.

use std::collections::HashMap;

use crate::cli;

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

    pub(super) fn record(&mut self, command: &clap::Command, matches: &clap::ArgMatches) {
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
    pub(super) fn env_var(&self, id: &str) -> Option<&str> {
        self.from_env.get(id).map(String::as_str)
    }

    /// The option `id`, as the user set it: `--tls-ca` or `DISTLOCK_TLS_CA (from the environment)`.
    pub(super) fn option(&self, id: &str) -> String {
        match self.env_var(id) {
            Some(var) => format!("{var} (from the environment)"),
            None => flag(id),
        }
    }

    /// The option `id` with its value (already made safe to print), as the user set it:
    /// `--ttl 25h` or `DISTLOCK_TTL=25h (from the environment)`.
    pub(super) fn given(&self, id: &str, value: &str) -> String {
        match self.env_var(id) {
            Some(var) => format!("{var}={value} (from the environment)"),
            None => format!("{} {value}", flag(id)),
        }
    }

    /// A duration the user gave, named as [`Origins::given`] does, echoed as written.
    pub(super) fn duration(&self, id: &str, d: &cli::DurationArg) -> String {
        self.given(id, &crate::text::sanitize(&d.text))
    }

    /// A message about the value of `id` found by another module (it names the value, not where it
    /// came from), prefixed with the variable when the value came from the environment.
    pub(super) fn blame(&self, id: &str, message: String) -> String {
        blamed_on(self.env_var(id), message)
    }

    /// Pretend the values of `ids` came from these variables (for tests of the messages).
    #[cfg(test)]
    pub(super) fn with_env(pairs: &[(&str, &str)]) -> Origins {
        Origins {
            from_env: pairs
                .iter()
                .map(|(id, var)| (id.to_string(), var.to_string()))
                .collect(),
        }
    }
}

/// `message`, prefixed with the environment variable `var` when the value came from one.
pub(super) fn blamed_on(var: Option<&str>, message: String) -> String {
    match var {
        Some(var) => format!("{var} (from the environment): {message}"),
        None => message,
    }
}

/// The long flag of argument `id` (clap derives `--redis-timeout` from `redis_timeout`).
fn flag(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}
