//! Text for messages: quoting and sanitising user-controlled text, and durations for humans.
//!
//! A leaf: it imports nothing of the crate, so every layer (backend, lock, config, commands,
//! output) may use it without pulling in another. What a message *says* belongs to the layer
//! that knows the facts; how a value is *written* (quoted, escaped, `1.5s`) is decided here.

use std::time::Duration;

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
pub fn duration(d: Duration) -> String {
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
        humantime::format_duration(Duration::from_secs(secs)).to_string()
    }
}

/// The line of a `distlock check` that could not tell (exit 3), in the monitoring-plugins
/// convention: `DISTLOCK UNKNOWN: why` (one line; no `|`, which would start performance data).
pub fn unknown_line(why: &str) -> String {
    format!("DISTLOCK UNKNOWN: {}", sanitize(why).replace('|', "/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_escapes_control_characters() {
        assert_eq!(quote("deploy"), "\"deploy\"");
        assert_eq!(quote("a\nb"), "\"a\\nb\"");
        assert_eq!(quote("\u{1b}[31mred"), "\"\\u{1b}[31mred\"");
        assert_eq!(quote("say \"hi\""), "\"say \\\"hi\\\"\"");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(Duration::from_millis(250)), "250ms");
        assert_eq!(duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(duration(Duration::from_secs(30)), "30s");
        assert_eq!(duration(Duration::from_secs(150)), "2m 30s");
    }
}
