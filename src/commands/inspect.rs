//! The operator commands: `status` (one lock), `list` (all locks under the prefix) and `break`
//! (delete a lock whoever holds it). Their data goes to stdout; `break` talks on stderr.

use std::io::{BufRead, IsTerminal, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::backend::Connector;
use crate::commands::Exit;
use crate::error::Error;
use crate::exit;
use crate::lock::{
    self, HeldBy, HolderTtl, Lock, LockName, LockState, Ownership, SingleNode, Token,
};
use crate::output::{self, Level, Output};

/// A lock as `status --json` and `list --json` show it.
#[derive(Serialize)]
struct LockJson<'a> {
    key: &'a str,
    redis_key: &'a str,
    held: bool,
    /// Milliseconds left before expiry; null when free or set without expiry.
    ttl_ms: Option<u64>,
    /// How long it has been held (Redis server clock); null when unknown.
    held_for_ms: Option<u64>,
    /// When it was acquired, RFC 3339 (Redis server clock); null when unknown.
    acquired_at: Option<String>,
    holder: Option<HolderJson<'a>>,
}

#[derive(Serialize)]
struct HolderJson<'a> {
    host: Option<&'a str>,
    pid: Option<u32>,
    user: Option<&'a str>,
    command: Option<&'a str>,
    kind: Option<&'a str>,
    version: Option<&'a str>,
    ci_url: Option<&'a str>,
    note: Option<&'a str>,
}

fn to_json<'a>(name: &'a LockName, held: Option<&'a HeldBy>) -> LockJson<'a> {
    let ttl_ms = held.and_then(|h| match h.ttl {
        HolderTtl::Expires(d) => Some(millis(d)),
        HolderTtl::Never => None,
    });
    LockJson {
        key: name.key(),
        redis_key: name.lock_key(),
        held: held.is_some(),
        ttl_ms,
        held_for_ms: held.and_then(|h| h.held_for).map(millis),
        acquired_at: held.and_then(acquired_at),
        holder: held.and_then(|h| h.holder.as_ref()).map(|h| HolderJson {
            host: h.host.as_deref(),
            pid: h.pid,
            user: h.user.as_deref(),
            command: h.command.as_deref(),
            kind: h.kind.as_deref(),
            version: h.version.as_deref(),
            ci_url: h.ci_url.as_deref(),
            note: h.note.as_deref(),
        }),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// When the lock was acquired, as RFC 3339 (from "held for", both on the Redis server's clock).
fn acquired_at(held: &HeldBy) -> Option<String> {
    let held_for = held.held_for?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    let at = UNIX_EPOCH + Duration::from_secs(now.saturating_sub(held_for).as_secs());
    Some(humantime::format_rfc3339_seconds(at).to_string())
}

fn redis_error(context: String, lock: &SingleNode, source: crate::backend::BackendError) -> Error {
    Error::Redis {
        context,
        server: lock.describe(),
        source,
    }
}

/// Look at one lock.
fn read(connector: Connector, name: &LockName) -> Result<(SingleNode, LockState), Error> {
    let mut lock = SingleNode::new(name.clone(), connector);
    match lock.inspect() {
        Ok(state) => Ok((lock, state)),
        Err(e) => Err(redis_error(
            format!("cannot read lock {}", output::quote(name.key())),
            &lock,
            e,
        )),
    }
}

fn print(text: &str) -> Result<(), Error> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // A closed pipe (`distlock list | head`) is not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::Internal(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

/// `distlock status`: 0 when held, 1 when free.
pub fn status(
    connector: Connector,
    name: LockName,
    json: bool,
    out: &Output,
) -> Result<Exit, Error> {
    let (_, state) = read(connector, &name)?;
    let held = match &state {
        LockState::Free => None,
        LockState::Held(held) => Some(held),
    };
    if json {
        let text = serde_json::to_string_pretty(&to_json(&name, held))
            .map_err(|e| Error::Internal(format!("cannot encode JSON: {e}")))?;
        print(&format!("{text}\n"))?;
    } else if out.level() != Level::Quiet {
        print(&describe(&name, held))?;
    }
    Ok(Exit::Code(if held.is_some() {
        exit::SUCCESS
    } else {
        exit::FREE
    }))
}

/// Several lines about one lock, for humans.
fn describe(name: &LockName, held: Option<&HeldBy>) -> String {
    let key = output::quote(name.key());
    let Some(held) = held else {
        return format!("lock {key} is free\n");
    };
    let mut text = format!("lock {key} is held\n");
    let mut row = |label: &str, value: String| {
        text.push_str(&format!("  {label:<9} {}\n", output::sanitize(&value)));
    };
    match &held.holder {
        Some(h) => {
            let mut who = h.host.clone().unwrap_or_else(|| "?".into());
            if let Some(pid) = h.pid {
                who.push_str(&format!(", pid {pid}"));
            }
            if let Some(user) = &h.user {
                who.push_str(&format!(", user {user}"));
            }
            row("holder", who);
            if let Some(command) = &h.command {
                row("command", command.clone());
            }
            if let Some(note) = &h.note {
                row("note", note.clone());
            }
            if let Some(url) = &h.ci_url {
                row("ci job", url.clone());
            }
            if let (Some(kind), Some(version)) = (&h.kind, &h.version) {
                row("via", format!("distlock {version} {kind}"));
            }
        }
        None => row(
            "holder",
            "another client (it stores no distlock metadata)".into(),
        ),
    }
    if let Some(held_for) = held.held_for {
        let since = acquired_at(held)
            .map(|a| format!(" (since {a})"))
            .unwrap_or_default();
        row("held for", format!("{}{since}", output::duration(held_for)));
    }
    row(
        "expires",
        match held.ttl {
            HolderTtl::Expires(d) => format!("in {} unless renewed", output::duration(d)),
            HolderTtl::Never => "never (set without expiry)".into(),
        },
    );
    text
}

/// `distlock list`.
pub fn list(
    connector: Connector,
    prefix: &str,
    pattern: &str,
    json: bool,
    out: &Output,
) -> Result<Exit, Error> {
    let locks = lock::list(&connector, prefix, pattern).map_err(|source| Error::Redis {
        context: "cannot list locks".into(),
        server: connector.display().to_owned(),
        source,
    })?;
    if json {
        let items: Vec<LockJson<'_>> = locks.iter().map(|(n, h)| to_json(n, Some(h))).collect();
        let text = serde_json::to_string_pretty(&items)
            .map_err(|e| Error::Internal(format!("cannot encode JSON: {e}")))?;
        print(&format!("{text}\n"))?;
        return Ok(Exit::Code(exit::SUCCESS));
    }
    if locks.is_empty() {
        out.notice(format!(
            "no locks under prefix {} match {}",
            output::quote(prefix),
            output::quote(pattern)
        ));
        return Ok(Exit::Code(exit::SUCCESS));
    }
    let mut rows = vec![[
        "KEY".to_owned(),
        "HOLDER".to_owned(),
        "HELD FOR".to_owned(),
        "EXPIRES IN".to_owned(),
        "COMMAND / NOTE".to_owned(),
    ]];
    for (name, held) in &locks {
        let holder = held.holder.as_ref();
        let who = holder
            .map(|h| match (&h.host, h.pid) {
                (Some(host), Some(pid)) => format!("{host}:{pid}"),
                (Some(host), None) => host.clone(),
                (None, Some(pid)) => format!("pid {pid}"),
                (None, None) => "?".into(),
            })
            .unwrap_or_else(|| "(other client)".into());
        let what = holder
            .and_then(|h| h.note.clone().or_else(|| h.command.clone()))
            .unwrap_or_default();
        rows.push(
            [
                name.key().to_owned(),
                who,
                held.held_for
                    .map(output::duration)
                    .unwrap_or_else(|| "?".into()),
                match held.ttl {
                    HolderTtl::Expires(d) => output::duration(d),
                    HolderTtl::Never => "never".into(),
                },
                what,
            ]
            .map(|cell| output::sanitize(&cell)),
        );
    }
    print(&table(&rows, std::io::stdout().is_terminal()))?;
    Ok(Exit::Code(exit::SUCCESS))
}

/// Rows as an aligned table (on a terminal) or tab-separated lines (for scripts).
fn table(rows: &[[String; 5]], aligned: bool) -> String {
    let mut text = String::new();
    if !aligned {
        for row in rows {
            text.push_str(&row.join("\t"));
            text.push('\n');
        }
        return text;
    }
    let mut widths = [0usize; 5];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// `distlock break`: 0 broken, 1 nothing broken.
pub fn break_lock(
    connector: Connector,
    name: LockName,
    yes: bool,
    out: &Output,
) -> Result<Exit, Error> {
    let key = output::quote(name.key());
    let (mut lock, state) = read(connector, &name)?;
    let held = match state {
        LockState::Free => {
            out.notice(format!("lock {key} is free; nothing to break"));
            return Ok(Exit::Code(exit::FREE));
        }
        LockState::Held(held) => held,
    };
    let Some(token) = held.token.as_deref().map(Token::from_text) else {
        return Err(Error::Internal("the lock's token could not be read".into()));
    };
    if !yes {
        // Like rm -i: ask when someone can answer on a terminal.
        if !std::io::stdin().is_terminal() {
            return Err(Error::Usage(format!(
                "refusing to break lock {key} ({}) without --yes: there is no terminal to ask on",
                held.summary()
            )));
        }
        eprint!(
            "{}Break it? Its holder loses it (distlock run terminates its command at the next renewal). [y/N] ",
            describe(&name, Some(&held))
        );
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            out.notice(format!("lock {key} was not broken"));
            return Ok(Exit::Code(exit::FREE));
        }
    }
    // Compare-and-delete with the token we showed: a newer holder is never broken by mistake.
    match lock.release(&token) {
        Ok(Ownership::Held) => {
            out.notice(format!(
                "broke lock {key} ({}); waiters were woken",
                held.summary()
            ));
            Ok(Exit::Code(exit::SUCCESS))
        }
        Ok(Ownership::NotHeld) => {
            out.notice(format!(
                "lock {key} changed hands or was released meanwhile; nothing was broken"
            ));
            Ok(Exit::Code(exit::FREE))
        }
        Err(e) => Err(redis_error(format!("cannot break lock {key}"), &lock, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_on_terminals_and_tab_otherwise() {
        let rows = vec![
            [
                "KEY".into(),
                "HOLDER".into(),
                "A".into(),
                "B".into(),
                "C".into(),
            ],
            [
                "deploy".into(),
                "h:1".into(),
                "1s".into(),
                "2s".into(),
                "x y".into(),
            ],
        ];
        assert_eq!(
            table(&rows, true),
            "KEY     HOLDER  A   B   C\ndeploy  h:1     1s  2s  x y\n"
        );
        assert_eq!(
            table(&rows, false),
            "KEY\tHOLDER\tA\tB\tC\ndeploy\th:1\t1s\t2s\tx y\n"
        );
    }
}
