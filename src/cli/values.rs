//! The syntax of single values: durations with a unit, signals that end a process, and the
//! choices of a few flags. What a value means next to the others is [`crate::config`]'s.

use std::time::Duration;

use clap::ValueEnum;

/// Generated files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Generated {
    /// bash, zsh, fish, elvish and PowerShell completions.
    Completions,
    /// distlock.1 and one page per subcommand.
    Man,
}

/// How messages are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line per message, prefixed "distlock: ".
    Text,
    /// One JSON object per line.
    Json,
}

/// How a waiter learns that the lock may be free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WaitMode {
    /// Sleep until the holder's release is published, or its lock expires.
    Notify,
    /// Poll with capped, jittered exponential backoff.
    Spin,
}

/// A duration as the user wrote it: the value, and the text, so that a message about it echoes
/// `25h` rather than a reformatted `1day 1h`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurationArg {
    /// The duration.
    pub value: Duration,
    /// What the user wrote (without surrounding whitespace).
    pub text: String,
}

/// Why a value was refused, worded to follow the value (`has no unit; write 30s ...`), so that
/// the message can say where the value came from: `--ttl 30 has no unit; ...` when typed,
/// `DISTLOCK_TTL=30 (from the environment) has no unit; ...` when read from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadValue(pub String);

impl std::fmt::Display for BadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadValue {}

/// Parse a duration that must carry a unit (`500ms`, `30s`, `5m`, `1h30m`).
pub fn parse_duration(text: &str) -> Result<DurationArg, BadValue> {
    let text = text.trim();
    if text.is_empty() {
        return Err(BadValue(
            "is empty; write a duration with a unit, e.g. 30s".into(),
        ));
    }
    if text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(BadValue(format!(
            "has no unit; write {text}s for seconds or {text}ms for milliseconds"
        )));
    }
    let value = humantime::parse_duration(text).map_err(|e| {
        BadValue(format!(
            "is not a duration ({e}); write e.g. 500ms, 30s, 5m or 1h30m"
        ))
    })?;
    Ok(DurationArg {
        value,
        text: text.to_owned(),
    })
}

/// Parse a signal given as `TERM`, `SIGTERM`, `term` or `15`. Signals that do not end a process
/// (STOP, CONT, CHLD, ...) are refused: they could never stop a command that lost its lock.
pub fn parse_signal(text: &str) -> Result<i32, BadValue> {
    let upper = text.trim().to_ascii_uppercase();
    let signal = if let Ok(n) = upper.parse::<i32>() {
        nix::sys::signal::Signal::try_from(n)
            .map_err(|_| BadValue("is not a signal number on this system; use e.g. TERM".into()))?
    } else {
        let name = if upper.starts_with("SIG") {
            upper.clone()
        } else {
            format!("SIG{upper}")
        };
        name.parse::<nix::sys::signal::Signal>()
            .map_err(|_| BadValue("is not a signal name; use e.g. TERM, INT, HUP or KILL".into()))?
    };
    use nix::sys::signal::Signal::*;
    match signal {
        SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU | SIGCONT | SIGCHLD | SIGWINCH | SIGURG => {
            Err(BadValue(format!(
                "is {}, which does not end a process; use a terminating signal such as TERM, INT or HUP",
                signal.as_str()
            )))
        }
        s => Ok(s as i32),
    }
}

/// The labels `distlock metrics` sets itself, which `--label` cannot name.
pub const METRICS_LABELS: [&str; 4] = ["key", "event", "le", "host"];

/// Parse a `--label NAME=VALUE` of `distlock metrics`: a Prometheus label name (letters,
/// digits, `_`, not a digit first, not `__` first, none of [`METRICS_LABELS`] nor `kind`), and
/// any value.
pub fn parse_label(text: &str) -> Result<(String, String), BadValue> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(BadValue(
            "has no '='; write NAME=VALUE, e.g. redis=prod".into(),
        ));
    };
    let first = name.chars().next();
    if first.is_none_or(|c| c.is_ascii_digit())
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(BadValue(
            "has no valid label name before '=' (letters, digits and _, not a digit first), \
             e.g. redis=prod"
                .into(),
        ));
    }
    if name.starts_with("__") || METRICS_LABELS.contains(&name) || name == "kind" {
        return Err(BadValue(format!(
            "names label {name}, which is reserved (names starting with __) or set by \
             distlock metrics itself; choose another name"
        )));
    }
    Ok((name.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_units_and_keep_their_text() {
        let parsed = |text| parse_duration(text).map(|d| d.value);
        assert_eq!(parsed("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parsed("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(
            parse_duration(" 25h "),
            Ok(DurationArg {
                value: Duration::from_secs(25 * 3600),
                text: "25h".into()
            })
        );
        let err = parse_duration("30").unwrap_err();
        assert_eq!(
            err.0,
            "has no unit; write 30s for seconds or 30ms for milliseconds"
        );
        assert!(parse_duration("").is_err());
        assert!(parse_duration("soon").unwrap_err().0.contains("e.g."));
    }

    #[test]
    fn labels_need_a_valid_free_name() {
        assert_eq!(
            parse_label("redis=a=b \"c\""),
            Ok(("redis".into(), "a=b \"c\"".into()))
        );
        assert_eq!(parse_label("_x1="), Ok(("_x1".into(), String::new())));
        for bad in [
            "redis",
            "=x",
            "1a=x",
            "a-b=x",
            "__name__=x",
            "key=x",
            "le=x",
            "kind=x",
        ] {
            assert!(parse_label(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn signals_by_name_and_number() {
        assert_eq!(parse_signal("TERM"), Ok(libc::SIGTERM));
        assert_eq!(parse_signal("sigint"), Ok(libc::SIGINT));
        assert_eq!(parse_signal("9"), Ok(libc::SIGKILL));
        assert!(parse_signal("STOP").unwrap_err().0.contains("does not end"));
        assert!(parse_signal("FOO").is_err());
        assert!(parse_signal("99").is_err());
    }
}
