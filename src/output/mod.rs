//! The one place that prints distlock's own messages.
//!
//! Every line goes to stderr (stdout belongs to the child during `run`), starts with `distlock: `,
//! honours `-q`/`-v`, and passes through two filters: user-controlled text is sanitised by
//! [`quote`] before it reaches a terminal, and registered secrets (the password of the Redis URL)
//! are replaced by `***` in every line, whatever produced it (including Redis error texts).

pub mod progress;

use std::io::Write;
use std::sync::Arc;

/// How chatty to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// `-q`: only errors that explain a failing exit of distlock's own.
    Quiet,
    /// Default: errors, warnings and notices (waiting, busy).
    Normal,
    /// `-v`: also explain each step.
    Verbose,
}

/// A cheap, clonable handle on the output settings, shared with background threads.
#[derive(Clone, Debug)]
pub struct Output {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    level: Level,
    secrets: Vec<String>,
}

impl Output {
    /// An output at `level` that redacts each of `secrets` (empty strings are ignored).
    pub fn new(level: Level, secrets: Vec<String>) -> Self {
        let secrets = secrets.into_iter().filter(|s| !s.is_empty()).collect();
        Output {
            inner: Arc::new(Inner { level, secrets }),
        }
    }

    /// The level in effect.
    pub fn level(&self) -> Level {
        self.inner.level
    }

    /// An error that explains why distlock exits non-zero. Shown even with `-q`.
    pub fn error(&self, msg: impl AsRef<str>) {
        self.line(msg.as_ref());
    }

    /// Something went wrong but distlock carries on. Hidden by `-q`.
    pub fn warn(&self, msg: impl AsRef<str>) {
        if self.inner.level >= Level::Normal {
            self.line(&format!("warning: {}", msg.as_ref()));
        }
    }

    /// A normal notice (e.g. "waiting for the lock"). Hidden by `-q`.
    pub fn notice(&self, msg: impl AsRef<str>) {
        if self.inner.level >= Level::Normal {
            self.line(msg.as_ref());
        }
    }

    /// A step explained with `-v`.
    pub fn verbose(&self, msg: impl AsRef<str>) {
        if self.inner.level >= Level::Verbose {
            self.line(msg.as_ref());
        }
    }

    /// Whether `verbose` lines are shown (to skip building expensive messages).
    pub fn is_verbose(&self) -> bool {
        self.inner.level >= Level::Verbose
    }

    /// Remove every registered secret from `text`.
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.inner.secrets {
            text = text.replace(secret.as_str(), "***");
        }
        text
    }

    fn line(&self, msg: &str) {
        let text = format!("distlock: {}\n", self.redact(msg));
        // One write call per line so that lines from several threads never interleave. A failed
        // write to stderr has nowhere to be reported.
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

/// Quote user-controlled text for a message: wrapped in double quotes, with control characters,
/// quotes and backslashes escaped, so that a key or an argument can never move the cursor,
/// change colours or forge a second line.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// User-controlled text made safe for a terminal, without quotes: control characters are
/// escaped (`\n`, `\u{1b}`), everything else is kept.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Quote an argument that may not be UTF-8.
pub fn quote_os(text: &std::ffi::OsStr) -> String {
    quote(&text.to_string_lossy())
}

/// A duration for humans: `250ms`, `1.5s`, `2m 30s`.
pub fn duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        let tenths = ms / 100;
        if tenths % 10 == 0 {
            format!("{}s", tenths / 10)
        } else {
            format!("{}.{}s", tenths / 10, tenths % 10)
        }
    } else {
        let secs = d.as_secs();
        humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn quote_escapes_control_characters() {
        assert_eq!(quote("deploy"), "\"deploy\"");
        assert_eq!(quote("a\nb"), "\"a\\nb\"");
        assert_eq!(quote("\u{1b}[31mred"), "\"\\u{1b}[31mred\"");
        assert_eq!(quote("say \"hi\""), "\"say \\\"hi\\\"\"");
    }

    #[test]
    fn redacts_every_occurrence() {
        let out = Output::new(Level::Normal, vec!["s3cret".into(), String::new()]);
        assert_eq!(
            out.redact("redis://u:s3cret@h and s3cret"),
            "redis://u:***@h and ***"
        );
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(Duration::from_millis(250)), "250ms");
        assert_eq!(duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(duration(Duration::from_secs(30)), "30s");
        assert_eq!(duration(Duration::from_secs(150)), "2m 30s");
    }
}
