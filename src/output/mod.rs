//! The one place that prints distlock's own messages.
//!
//! Every message goes to stderr (stdout belongs to the child during `run`), names its event
//! ([`Ev`]), and honours `-q`/`-v`. In text mode (the default) it is one line starting with
//! `distlock: `; with `--log-format json` it is one JSON object per line (see `json_line`).
//! Two filters apply in both formats: user-controlled text is sanitised by
//! [`crate::text::quote`] before it reaches a terminal, and registered secrets (the password of
//! the Redis URL) are replaced by `***` in every message, whatever produced it (including Redis
//! error texts).
//!
//! It sits above the lock and the backend and imports neither: callers hand it text (built
//! with [`crate::text`]) and plain facts (`Msg::holder` takes what `HeldBy::who` says).

mod event;

pub use event::{Ev, table as event_table};

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

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

/// How each message is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `distlock: TEXT`, for people (the default).
    Text,
    /// One JSON object per line, for programs (`--log-format json`).
    Json,
}

/// How serious a message is: which of [`Output`]'s methods printed it (the `level` field of a
/// JSON line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Severity {
    Error,
    Warning,
    Notice,
    Debug,
}

impl Severity {
    fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Notice => "notice",
            Severity::Debug => "debug",
        }
    }
}

/// A message: the human text, and the few facts a program may want without parsing it (only
/// JSON lines carry them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Msg {
    text: String,
    exit: Option<u8>,
    signal: Option<String>,
    waited_ms: Option<u64>,
    reason: Option<&'static str>,
    holder: Option<HolderFields>,
}

/// Who holds the lock, in a JSON line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
struct HolderFields {
    host: Option<String>,
    pid: Option<u32>,
}

impl Msg {
    /// A message with this text.
    pub fn new(text: impl Into<String>) -> Msg {
        Msg {
            text: text.into(),
            ..Msg::default()
        }
    }

    /// distlock exits with `code` because of what this message says.
    pub fn exit(mut self, code: u8) -> Msg {
        self.exit = Some(code);
        self
    }

    /// The signal concerned (`SIGINT`).
    pub fn signal(mut self, name: impl Into<String>) -> Msg {
        self.signal = Some(name.into());
        self
    }

    /// How long distlock waited for the lock.
    pub fn waited(mut self, waited: Duration) -> Msg {
        self.waited_ms = Some(u64::try_from(waited.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// Why: a `lost` line's `not-held`, `renewals-failed`, `guard` or `gone-at-release`.
    pub fn reason(mut self, reason: &'static str) -> Msg {
        self.reason = Some(reason);
        self
    }

    /// The facts a JSON line carries besides its text, as (field, value) pairs: `exit`,
    /// `signal`, `waited_ms`, `reason`, `holder_host`, `holder_pid` (the `--hook`'s
    /// environment).
    pub fn facts(&self) -> Vec<(&'static str, String)> {
        let host = self.holder.as_ref().and_then(|h| h.host.clone());
        let pid = self.holder.as_ref().and_then(|h| h.pid);
        [
            ("exit", self.exit.map(|c| c.to_string())),
            ("signal", self.signal.clone()),
            ("waited_ms", self.waited_ms.map(|w| w.to_string())),
            ("reason", self.reason.map(str::to_owned)),
            ("holder_host", host),
            ("holder_pid", pid.map(|p| p.to_string())),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect()
    }

    /// The holder of the lock, when it stored who it is: its host and process id (as
    /// `HeldBy::who` gives them).
    pub fn holder(mut self, who: Option<(Option<&str>, Option<u32>)>) -> Msg {
        self.holder = who.map(|(host, pid)| HolderFields {
            host: host.map(str::to_owned),
            pid,
        });
        self
    }
}

impl From<String> for Msg {
    fn from(text: String) -> Msg {
        Msg::new(text)
    }
}

impl From<&str> for Msg {
    fn from(text: &str) -> Msg {
        Msg::new(text)
    }
}

/// Sees every message about one of its events, whatever the level and the format: the event,
/// its level (`error` ... `debug`), the message, and the JSON line `--log-format json` prints
/// for it (`run --hook`, see `crate::hook`).
pub type Tap = Arc<dyn Fn(Ev, &str, &Msg, &str) + Send + Sync>;

/// A [`Tap`] and the events it wants.
#[derive(Clone)]
struct Tapped(Vec<Ev>, Tap);

impl std::fmt::Debug for Tapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Tapped").field(&self.0).finish()
    }
}

/// A cheap, clonable handle on the output settings, shared with background threads.
#[derive(Clone, Debug)]
pub struct Output {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    level: Level,
    format: Format,
    /// The lock the messages are about (the `key` field of a JSON line).
    key: Option<String>,
    secrets: Vec<String>,
    tap: Option<Tapped>,
}

impl Output {
    /// An output at `level`, in `format`, that redacts each of `secrets` (empty strings are
    /// ignored).
    pub fn new(level: Level, format: Format, secrets: Vec<String>) -> Self {
        let secrets = secrets.into_iter().filter(|s| !s.is_empty()).collect();
        Output {
            inner: Arc::new(Inner {
                level,
                format,
                key: None,
                secrets,
                tap: None,
            }),
        }
    }

    /// The same output, for messages about the lock `key`.
    pub fn about(&self, key: &str) -> Output {
        Output {
            inner: Arc::new(Inner {
                level: self.inner.level,
                format: self.inner.format,
                key: Some(key.to_owned()),
                secrets: self.inner.secrets.clone(),
                tap: self.inner.tap.clone(),
            }),
        }
    }

    /// The same output, that also hands every message about one of `events` to `tap`.
    pub fn tapped(&self, events: Vec<Ev>, tap: Tap) -> Output {
        Output {
            inner: Arc::new(Inner {
                level: self.inner.level,
                format: self.inner.format,
                key: self.inner.key.clone(),
                secrets: self.inner.secrets.clone(),
                tap: Some(Tapped(events, tap)),
            }),
        }
    }

    /// The level in effect.
    pub fn level(&self) -> Level {
        self.inner.level
    }

    /// The format in effect.
    pub fn format(&self) -> Format {
        self.inner.format
    }

    /// An error that explains why distlock exits non-zero. Shown even with `-q`.
    pub fn error(&self, ev: Ev, msg: impl Into<Msg>) {
        self.say(Level::Quiet, Severity::Error, ev, msg.into());
    }

    /// Something went wrong but distlock carries on. Hidden by `-q`.
    pub fn warn(&self, ev: Ev, msg: impl Into<Msg>) {
        self.say(Level::Normal, Severity::Warning, ev, msg.into());
    }

    /// A normal notice (e.g. "waiting for the lock"). Hidden by `-q`.
    pub fn notice(&self, ev: Ev, msg: impl Into<Msg>) {
        self.say(Level::Normal, Severity::Notice, ev, msg.into());
    }

    /// A step explained with `-v`.
    pub fn verbose(&self, ev: Ev, msg: impl Into<Msg>) {
        self.say(Level::Verbose, Severity::Debug, ev, msg.into());
    }

    /// Print `msg` if the level is at least `from`; hand it to the tap if it wants `ev`.
    fn say(&self, from: Level, severity: Severity, ev: Ev, msg: Msg) {
        if let Some(Tapped(events, tap)) = &self.inner.tap {
            if events.contains(&ev) {
                let at = SystemTime::now();
                let line = json_line(
                    at,
                    severity,
                    self.inner.key.as_deref(),
                    ev,
                    &self.text(severity, &msg),
                    &msg,
                    &|text| self.redact(text),
                );
                tap(ev, severity.as_str(), &msg, &line);
            }
        }
        if self.inner.level >= from {
            self.emit(severity, ev, msg);
        }
    }

    /// A question that waits for an answer on the terminal (even with `-q`): `text` as it is,
    /// without prefix or newline, so that the answer is typed after it. In JSON mode it is a
    /// line like any other (a notice), and the answer is typed on the next line.
    pub fn prompt(&self, ev: Ev, text: &str) {
        match self.inner.format {
            Format::Text => self.write(self.redact(text)),
            Format::Json => self.emit(Severity::Notice, ev, Msg::new(text.trim_end())),
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

    fn emit(&self, severity: Severity, ev: Ev, msg: Msg) {
        self.write(self.render(SystemTime::now(), severity, ev, &msg));
    }

    /// The line for `msg`, as printed at `at`.
    fn render(&self, at: SystemTime, severity: Severity, ev: Ev, msg: &Msg) -> String {
        let text = self.text(severity, msg);
        match self.inner.format {
            Format::Text => format!("distlock: {}\n", self.redact(&text)),
            Format::Json => json_line(
                at,
                severity,
                self.inner.key.as_deref(),
                ev,
                &text,
                msg,
                &|text| self.redact(text),
            ),
        }
    }

    /// What text mode prints after `distlock: ` (before redaction).
    fn text(&self, severity: Severity, msg: &Msg) -> String {
        match severity {
            Severity::Warning => format!("warning: {}", msg.text),
            _ => msg.text.clone(),
        }
    }

    fn write(&self, text: String) {
        // One write call per line so that lines from several threads never interleave. A failed
        // write to stderr has nowhere to be reported.
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

/// One message (`text`, and the fields of `msg`) as a JSON line:
/// `{"ts":"2026-11-23T10:00:00.123Z","level":"notice","key":"deploy","event":"waiting","msg":"lock \"deploy\" is busy; ..."}`,
/// then the fields the message carries (`exit`, `signal`, `waited_ms`, `reason`, `holder`). `key` is null
/// when the message is about no lock. Every string passes through `redact` before it is encoded
/// (after encoding, a secret with a quote or a backslash would no longer match); quotes,
/// backslashes and every control character are escaped, so one message is always one line and
/// never a terminal escape sequence.
fn json_line(
    at: SystemTime,
    severity: Severity,
    key: Option<&str>,
    ev: Ev,
    text: &str,
    msg: &Msg,
    redact: &dyn Fn(&str) -> String,
) -> String {
    #[derive(Serialize)]
    struct Line<'a> {
        ts: String,
        level: &'static str,
        key: Option<String>,
        event: &'static str,
        msg: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit: Option<u8>,
        #[serde(skip_serializing_if = "Option::is_none")]
        signal: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        waited_ms: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        holder: Option<HolderFields>,
    }
    let line = Line {
        ts: humantime::format_rfc3339_millis(at).to_string(),
        level: severity.as_str(),
        key: key.map(redact),
        event: ev.as_str(),
        msg: redact(text),
        exit: msg.exit,
        signal: msg.signal.as_deref(),
        waited_ms: msg.waited_ms,
        reason: msg.reason,
        holder: msg.holder.as_ref().map(|h| HolderFields {
            host: h.host.as_deref().map(redact),
            pid: h.pid,
        }),
    };
    match serde_json::to_string(&line) {
        Ok(encoded) => {
            // JSON requires escaping only below U+0020; escape DEL and the C1 controls too (some
            // terminals obey U+009B as an escape sequence), as text mode's `quote` does.
            let mut text = String::with_capacity(encoded.len() + 1);
            for c in encoded.chars() {
                if c.is_control() {
                    text.push_str(&format!("\\u{:04x}", u32::from(c)));
                } else {
                    text.push(c);
                }
            }
            text.push('\n');
            text
        }
        // Strings and numbers always encode; if this ever fails, still say something parseable.
        Err(_) => format!(
            "{{\"ts\":\"{}\",\"level\":\"error\",\"key\":null,\"event\":\"internal-error\",\"msg\":\"a message could not be encoded\"}}\n",
            line.ts
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn redacts_every_occurrence() {
        let out = Output::new(
            Level::Normal,
            Format::Text,
            vec!["s3cret".into(), String::new()],
        );
        assert_eq!(
            out.redact("redis://u:s3cret@h and s3cret"),
            "redis://u:***@h and ***"
        );
    }

    /// The line `out` prints for `msg` at a fixed time (as a notice unless said otherwise).
    fn render(out: &Output, severity: Severity, ev: Ev, msg: &Msg) -> String {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_000_000_123);
        out.render(at, severity, ev, msg)
    }

    /// A JSON output about `key` that redacts `secrets`.
    fn json_out(key: Option<&str>, secrets: &[&str]) -> Output {
        let out = Output::new(
            Level::Normal,
            Format::Json,
            secrets.iter().map(|s| s.to_string()).collect(),
        );
        match key {
            Some(key) => out.about(key),
            None => out,
        }
    }

    fn parse(line: &str) -> serde_json::Value {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn a_json_line_has_the_documented_fields_in_order() {
        let out = json_out(Some("deploy"), &[]);
        let msg = Msg::new("lock \"deploy\" is busy");
        assert_eq!(
            render(&out, Severity::Notice, Ev::Waiting, &msg),
            "{\"ts\":\"2026-11-18T11:06:40.123Z\",\"level\":\"notice\",\"key\":\"deploy\",\
             \"event\":\"waiting\",\"msg\":\"lock \\\"deploy\\\" is busy\"}\n"
        );
        // No lock: the key is null, not absent, so that `.key` always works.
        let out = json_out(None, &[]);
        let line = render(
            &out,
            Severity::Error,
            Ev::UsageError,
            &Msg::new("bad").exit(64),
        );
        assert!(line.contains("\"key\":null"), "{line}");
        let value = parse(&line);
        assert_eq!(value["level"], "error");
        assert_eq!(value["exit"], 64);
        assert!(value.get("holder").is_none() && value.get("signal").is_none());
    }

    #[test]
    fn text_lines_are_unchanged_by_events() {
        let out = Output::new(Level::Normal, Format::Text, vec!["s3cret".into()]).about("k");
        let msg = Msg::new("cannot release redis://:s3cret@h").exit(69);
        assert_eq!(
            render(&out, Severity::Warning, Ev::ReleaseFailed, &msg),
            "distlock: warning: cannot release redis://:***@h\n"
        );
        assert_eq!(
            render(&out, Severity::Debug, Ev::Released, &Msg::new("released")),
            "distlock: released\n"
        );
    }

    #[test]
    fn json_lines_escape_control_characters_and_quotes() {
        let text = "a\nb\r\u{1b}[31m\t\"q\" \\ \u{7f} \u{9b} \u{2028} é";
        let line = render(
            &json_out(Some("k"), &[]),
            Severity::Notice,
            Ev::Busy,
            &Msg::new(text),
        );
        assert_eq!(line.matches('\n').count(), 1, "{line:?}");
        assert!(line.ends_with("}\n"));
        assert!(!line.trim_end().chars().any(char::is_control), "{line:?}");
        assert!(
            line.contains(r#"a\nb\r\u001b[31m\t\"q\" \\ \u007f \u009b "#),
            "{line}"
        );
        assert_eq!(parse(&line)["msg"], text);
    }

    #[test]
    fn json_lines_redact_every_string_field() {
        // A secret with a quote and a backslash: redacting the encoded line would miss it.
        let secret = "pa\"ss\\w0rd";
        let host = format!("host-{secret}");
        let msg = Msg::new(format!("cannot reach redis://:{secret}@h"))
            .holder(Some((Some(&host), Some(7))))
            .signal("SIGINT")
            .waited(Duration::from_millis(1500));
        let out = json_out(Some(&format!("k{secret}")), &[secret]);
        let line = render(&out, Severity::Error, Ev::RedisError, &msg);
        assert!(!line.contains("w0rd"), "{line}");
        let value = parse(&line);
        assert_eq!(value["msg"], "cannot reach redis://:***@h");
        assert_eq!(value["key"], "k***");
        assert_eq!(value["holder"]["host"], "host-***");
        assert_eq!(value["holder"]["pid"], 7);
        assert_eq!(value["signal"], "SIGINT");
        assert_eq!(value["waited_ms"], 1500);
    }

    #[test]
    fn json_warnings_keep_the_text_after_the_prefix() {
        // `distlock: ` + msg is the text line, in both formats.
        let line = render(
            &json_out(Some("k"), &[]),
            Severity::Warning,
            Ev::ReleaseFailed,
            &Msg::new("cannot release"),
        );
        let value = parse(&line);
        assert_eq!(value["level"], "warning");
        assert_eq!(value["msg"], "warning: cannot release");
    }
}
