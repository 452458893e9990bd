//! A command line clap refused, as distlock's messages: one line (`distlock: ...`, or a JSON
//! event with `--log-format json`) that names where a refused value came from (typed, or read
//! from a `DISTLOCK_*` variable), plus one line per clap tip; exit 64.

use crate::exit::Code;
use crate::output;

/// Report a command-line error as one line, plus one per clap tip (`--help` and `--version` print
/// normally), and exit. `command` and `args` are what clap parsed, to tell where a refused value
/// came from.
pub fn usage_error(err: clap::Error, command: &clap::Command, args: &[std::ffi::OsString]) -> ! {
    use clap::error::ErrorKind;
    // (Help on a missing subcommand is only for a bare `distlock`: with --log-format or
    // DISTLOCK_LOG_FORMAT, clap reports the missing subcommand as an error, a JSON line below.)
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = err.print();
        let code = if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            usage_code(command, args)
        } else {
            0
        };
        std::process::exit(i32::from(code));
    }
    let format = format_in_args(args, std::env::var_os("DISTLOCK_LOG_FORMAT"));
    let out = output::Output::new(output::Level::Normal, format, secrets_in_args());
    let mut lines = message_lines(&err.render().to_string());
    if let (Some(first), Some(refused)) = (lines.first_mut(), refused_value(&err, command, args)) {
        *first = refused.reword(first);
    }
    let code = usage_code(command, args);
    let mut lines = lines.into_iter();
    if let Some(first) = lines.next() {
        if code != Code::Usage.get() {
            // `check`: the monitoring system reads stdout.
            use std::io::Write;
            let line = crate::text::unknown_line(&first);
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }
        out.error(output::Ev::UsageError, output::Msg::new(first).exit(code));
    }
    for tip in lines {
        out.error(output::Ev::UsageTip, tip);
    }
    std::process::exit(i32::from(code))
}

/// The exit code of a refused command line: 64, but UNKNOWN (3) for `check`, whose callers
/// (monitoring systems) read any other code as CRITICAL.
fn usage_code(command: &clap::Command, args: &[std::ffi::OsString]) -> u8 {
    if subcommand_in_args(command, args).as_deref() == Some("check") {
        crate::exit::Plugin::Unknown.get()
    } else {
        Code::Usage.get()
    }
}

/// The subcommand a command line names: its first word that is neither an option nor the
/// value of a global option that takes one (`--prefix check status` is `status`).
fn subcommand_in_args(command: &clap::Command, args: &[std::ffi::OsString]) -> Option<String> {
    let takes_value = |word: &str| {
        command.get_arguments().any(|a| {
            a.get_action().takes_values()
                && (word
                    .strip_prefix("--")
                    .is_some_and(|l| a.get_long() == Some(l))
                    || (word.len() == 2
                        && word.strip_prefix('-').and_then(|s| s.chars().next()) == a.get_short()))
        })
    };
    let mut words = args.iter().skip(1);
    while let Some(word) = words.next() {
        let word = word.to_str()?;
        if word == "--" {
            return None;
        }
        if word.starts_with('-') {
            if !word.contains('=') && takes_value(word) {
                words.next();
            }
            continue;
        }
        return Some(word.to_owned());
    }
    None
}

/// The message format asked for by a command line that clap refused (so there are no matches to
/// ask): the last `--log-format F` or `--log-format=F` before `--`, else `env` (the value of
/// `DISTLOCK_LOG_FORMAT`), as clap would have decided; JSON only for exactly `json`, as clap
/// accepts no other spelling. Words after `--` belong to the command of `run`. (A command given
/// without `--` whose own arguments include `--log-format json` is taken for ours: the price of
/// not parsing what clap could not.)
fn format_in_args(args: &[std::ffi::OsString], env: Option<std::ffi::OsString>) -> output::Format {
    let mut chosen = env;
    let mut words = args.iter().skip(1).take_while(|a| *a != "--");
    while let Some(word) = words.next() {
        if word == "--log-format" {
            chosen = words.next().cloned();
        } else if let Some(value) = word.to_str().and_then(|w| w.strip_prefix("--log-format=")) {
            chosen = Some(value.into());
        }
    }
    if chosen.is_some_and(|f| f == "json") {
        output::Format::Json
    } else {
        output::Format::Text
    }
}

/// clap's multi-line message as distlock's lines: the error folded into the first line with where
/// to look, then each `tip:` on a line of its own (every line gets the `distlock: ` prefix).
fn message_lines(rendered: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut tips: Vec<String> = Vec::new();
    let mut usage = None;
    for line in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("error: ") {
            parts.push(rest.to_owned());
        } else if let Some(rest) = line.strip_prefix("Usage: ") {
            usage = Some(rest.to_owned());
        } else if line.starts_with("For more information") {
            continue;
        } else if line.starts_with("tip: ") {
            tips.push(line.to_owned());
        } else {
            parts.push(line.to_owned());
        }
    }
    let mut text = parts.join(" ");
    if let Some(usage) = usage {
        text.push_str(&format!(" (usage: {usage}; see --help)"));
    }
    std::iter::once(text).chain(tips).collect()
}

/// A value clap refused (a bad duration, signal, number or choice), and where it came from.
struct Refused {
    /// The argument as clap names it in its message: `--ttl <DUR>`.
    shown: String,
    /// Its long flag, if it has one.
    long: Option<String>,
    /// The environment variable the value was read from, if it was.
    env_var: Option<String>,
    /// The value, made safe to print.
    value: String,
    /// distlock's own reason (worded to follow the value), if the refusal is distlock's.
    reason: Option<String>,
}

impl Refused {
    /// The first line of the message, in place of clap's `first`: `--ttl 30 has no unit; ...`
    /// or `DISTLOCK_TTL=30 (from the environment) has no unit; ...`. Refusals of clap's own
    /// (numbers, choices) keep clap's words, with the variable in place of the flag.
    fn reword(&self, first: &str) -> String {
        match (&self.env_var, &self.reason, &self.long) {
            (Some(var), Some(reason), _) => {
                format!("{var}={} (from the environment) {reason}", self.value)
            }
            (None, Some(reason), Some(long)) => format!("--{long} {} {reason}", self.value),
            (Some(var), None, _) => first.replace(
                &format!("'{}'", self.shown),
                &format!("{var} (from the environment)"),
            ),
            (None, _, _) => first.to_owned(),
        }
    }
}

/// The value clap refused in `err`, if that is what `err` is about.
fn refused_value(
    err: &clap::Error,
    command: &clap::Command,
    args: &[std::ffi::OsString],
) -> Option<Refused> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        err.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return None;
    }
    let (Some(ContextValue::String(shown)), Some(ContextValue::String(value))) = (
        err.get(ContextKind::InvalidArg),
        err.get(ContextKind::InvalidValue),
    ) else {
        return None;
    };
    // Every subcommand built, not only the one parsed: clap cannot name an unbuilt argument.
    let mut command = command.clone();
    command.build();
    let arg = find_arg(&command, shown)?;
    let env_var = arg
        .get_env()
        .filter(|var| came_from_env(err, arg.get_id().as_str(), var, value, args))
        .map(|var| var.to_string_lossy().into_owned());
    let reason = std::error::Error::source(err)
        .and_then(|source| source.downcast_ref::<super::BadValue>())
        .map(|bad| bad.0.clone());
    Some(Refused {
        shown: shown.clone(),
        long: arg.get_long().map(str::to_owned),
        env_var,
        value: if value.is_empty() || value.contains(char::is_whitespace) {
            crate::text::quote(value)
        } else {
            crate::text::sanitize(value)
        },
        reason,
    })
}

/// The argument clap names `shown` (`--ttl <DUR>`) in its messages, in `command` or a subcommand.
fn find_arg<'c>(command: &'c clap::Command, shown: &str) -> Option<&'c clap::Arg> {
    command
        .get_arguments()
        .find(|arg| arg.to_string() == shown)
        .or_else(|| {
            command
                .get_subcommands()
                .find_map(|sub| find_arg(sub, shown))
        })
}

/// Whether the `value` of argument `id` that `err` refused came from its environment variable
/// `var`: the variable holds exactly that value, and the same command line parsed without the
/// variable does not refuse it again (so it was not typed). Parsing again leaves to clap what
/// counts as typed (`-t30`, `--ttl=30`, `-nt 30`, words after the command); it costs a parse,
/// on this error path only.
fn came_from_env(
    err: &clap::Error,
    id: &str,
    var: &std::ffi::OsStr,
    value: &str,
    args: &[std::ffi::OsString],
) -> bool {
    use clap::error::ContextKind;
    if std::env::var_os(var).as_deref() != Some(std::ffi::OsStr::new(value)) {
        return false;
    }
    let without_var = |command: clap::Command| {
        if command.get_arguments().any(|a| a.get_id() == id) {
            command.mut_arg(id, |a| a.env(None))
        } else {
            command
        }
    };
    let mut command = without_var(<super::Cli as clap::CommandFactory>::command());
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, without_var);
    }
    match command.try_get_matches_from(args) {
        Ok(_) => true,
        Err(again) => [ContextKind::InvalidArg, ContextKind::InvalidValue]
            .into_iter()
            .any(|kind| again.get(kind) != err.get(kind)),
    }
}

/// Passwords in a --redis argument that clap refused to parse, so they can be redacted.
/// (`args_os`: an argument that is not UTF-8 is exactly what clap may have refused.)
fn secrets_in_args() -> Vec<String> {
    std::env::args_os()
        .chain(std::env::var_os("DISTLOCK_REDIS_URL"))
        .chain(std::env::var_os("REDIS_URL"))
        .filter_map(|a| crate::backend::password_in(&a.to_string_lossy()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_values_are_named_the_way_they_were_set() {
        let refused = |env_var: Option<&str>, reason: Option<&str>| Refused {
            shown: "--ttl <DUR>".into(),
            long: Some("ttl".into()),
            env_var: env_var.map(Into::into),
            value: "30".into(),
            reason: reason.map(Into::into),
        };
        let clap = "invalid value '30' for '--ttl <DUR>': no unit";
        assert_eq!(
            refused(None, Some("has no unit")).reword(clap),
            "--ttl 30 has no unit"
        );
        assert_eq!(
            refused(Some("DISTLOCK_TTL"), Some("has no unit")).reword(clap),
            "DISTLOCK_TTL=30 (from the environment) has no unit"
        );
        // A refusal of clap's own keeps its words, with the variable in place of the flag.
        assert_eq!(
            refused(Some("DISTLOCK_TTL"), None).reword(clap),
            "invalid value '30' for DISTLOCK_TTL (from the environment): no unit"
        );
        assert_eq!(refused(None, None).reword(clap), clap);
    }

    #[test]
    fn the_message_format_is_found_in_arguments_clap_refused() {
        use output::Format::{Json, Text};
        let format = |args: &[&str], env: Option<&str>| {
            let args: Vec<std::ffi::OsString> = std::iter::once("distlock")
                .chain(args.iter().copied())
                .map(Into::into)
                .collect();
            format_in_args(&args, env.map(Into::into))
        };
        assert_eq!(
            format(&["--log-format", "json", "run", "--ttl", "30"], None),
            Json
        );
        assert_eq!(
            format(&["run", "--log-format=json", "--ttl", "30"], None),
            Json
        );
        assert_eq!(format(&["run", "--ttl", "30"], Some("json")), Json);
        assert_eq!(format(&["run", "--ttl", "30"], None), Text);
        // Typed wins over the environment; the last one typed wins; no other spelling.
        assert_eq!(format(&["--log-format", "text", "run"], Some("json")), Text);
        assert_eq!(
            format(
                &["--log-format", "json", "run", "--log-format", "text"],
                None
            ),
            Text
        );
        assert_eq!(format(&["--log-format", "JSON", "run"], None), Text);
        assert_eq!(format(&["run"], Some("yaml")), Text);
        // The command's own arguments are not ours.
        assert_eq!(
            format(
                &["run", "-k", "k", "--", "tool", "--log-format", "json"],
                None
            ),
            Text
        );
    }

    #[test]
    fn clap_errors_fold_into_one_line_and_tips_get_their_own() {
        let text = "error: unexpected argument '--kil-grace' found\n\n  tip: a similar argument exists: '--kill-grace'\n  tip: to pass '--kil-grace' as a value, use '-- --kil-grace'\n\nUsage: distlock run --key <KEY> <COMMAND>...\n\nFor more information, try '--help'.\n";
        assert_eq!(
            message_lines(text),
            [
                "unexpected argument '--kil-grace' found (usage: distlock run --key <KEY> <COMMAND>...; see --help)",
                "tip: a similar argument exists: '--kill-grace'",
                "tip: to pass '--kil-grace' as a value, use '-- --kil-grace'",
            ]
        );
        let text = "error: invalid value 'pol' for '--wait-mode <MODE>'\n  [possible values: notify, spin]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            message_lines(text),
            ["invalid value 'pol' for '--wait-mode <MODE>' [possible values: notify, spin]"]
        );
    }
}
