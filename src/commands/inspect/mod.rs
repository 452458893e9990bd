//! The operator commands: `status` (one lock), `list` (all locks under the prefix), `break`
//! (release a lock, or holders of a semaphore, whoever holds them) and `check` (one lock judged
//! for a monitoring system, [`check`]). Their data goes to stdout;
//! `break` talks on stderr (through [`Output`], its question included).
//!
//! This file reads locks and writes what the commands print; how a lock is shown (holder ids,
//! text, JSON) is [`view`]'s, and what `break` decides is [`breaking`]'s.

mod breaking;
pub mod check;
mod view;

use std::io::{BufRead, IsTerminal, Write};
use std::time::SystemTime;

use crate::backend::Budget;
use crate::error::Error;
use crate::exit::{Code, Exit};
use crate::lock::{self, Lock, LockName, Survey, Topology};
use crate::output::{Ev, Level, Output};

use breaking::Consent;
use view::View;

/// Survey one lock: what a majority agrees on (or a split), with each node's view; and the
/// lock, to act on what was seen.
fn survey(topology: &Topology, name: &LockName) -> Result<(Box<dyn Lock>, Survey), Error> {
    let budget = Budget::within(topology.timeout());
    let mut lock = lock::open(name.clone(), topology);
    match lock.survey(&budget) {
        Ok(survey) => Ok((lock, survey)),
        Err(e) => Err(Error::redis(
            format!("cannot read lock {}", crate::text::quote(name.key())),
            lock.describe(),
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

/// Print `value` as pretty JSON. serde_json escapes the control characters below U+0020 in
/// strings; DEL and the C1 controls (some terminals obey U+009B as an escape sequence) are
/// escaped here, as in the JSON lines on stderr. They occur only inside strings.
fn print_json(value: &impl serde::Serialize) -> Result<(), Error> {
    let encoded = serde_json::to_string_pretty(value)
        .map_err(|e| Error::Internal(format!("cannot encode JSON: {e}")))?;
    let mut text = String::with_capacity(encoded.len() + 1);
    for c in encoded.chars() {
        if c.is_control() && c >= '\u{7f}' {
            text.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            text.push(c);
        }
    }
    text.push('\n');
    print(&text)
}

/// `distlock status`: 0 when held, 1 when free (waiters or not), 75 on a Redlock's split: no
/// holder has a majority, so nobody holds the lock and nobody can take it until the nodes'
/// locks expire (busy, retry later: the code of a busy lock).
pub fn status(topology: Topology, name: LockName, json: bool, out: &Output) -> Result<Exit, Error> {
    let (_, survey) = survey(&topology, &name)?;
    // A holder that takes this key as part of a set: one read of each other key says which
    // one it still waits for.
    let set_keys: Vec<LockName> = (survey.agreed.iter())
        .flat_map(|s| s.holders.first())
        .filter_map(|h| h.holder.as_deref()?.set.clone())
        .flat_map(|set| {
            set.split_whitespace()
                .filter(|k| *k != name.key())
                .map(|k| LockName::new(name.prefix(), k))
                .collect::<Vec<_>>()
        })
        .collect();
    let mut others = Vec::new();
    for other in &set_keys {
        // Best effort: a key that cannot be read is left out of the answer.
        if let Ok((_, s)) = self::survey(&topology, other) {
            others.push((other.key().to_owned(), s));
        }
    }
    let mut view = View::surveyed(&name, &survey, SystemTime::now());
    if let Some(held) = survey.agreed.as_ref().and_then(|s| s.holders.first()) {
        view.set_wait = view::set_wait(held, |key| {
            if key == name.key() {
                return survey.agreed.as_ref();
            }
            others
                .iter()
                .find(|(k, _)| k == key)
                .and_then(|(_, s)| s.agreed.as_ref())
        });
    }
    if json {
        print_json(&view.json())?;
    } else if out.level() != Level::Quiet {
        print(&view.text())?;
    }
    Ok(Exit::Code(if view.split {
        Code::Busy.get()
    } else if view.holders.is_empty() {
        Code::Free.get()
    } else {
        Code::Success.get()
    }))
}

/// `distlock list`.
pub fn list(
    topology: Topology,
    prefix: &str,
    pattern: &str,
    json: bool,
    out: &Output,
) -> Result<Exit, Error> {
    let listing = lock::list(&topology, prefix, pattern, false)
        .map_err(|source| Error::redis("cannot list locks", topology.describe(), source))?;
    // Nodes of a Redlock that did not answer: on stderr, so that the table and the JSON keep
    // their shape (each lock's `nodes` in the JSON says it too).
    let nodes = match &topology {
        Topology::Redlock { nodes, .. } => nodes.len(),
        Topology::Single(_) => 1,
    };
    for (address, error) in &listing.silent {
        let answered = nodes - listing.silent.len();
        out.warn(
            Ev::NodeFailed,
            format!(
                "Redis node {} did not answer ({error}); the list shows what the other {answered} \
                 of the {nodes} nodes hold (a Redlock of {nodes} needs {}, so {})",
                crate::text::sanitize(address),
                nodes / 2 + 1,
                crate::lock::node_margin(answered, nodes / 2 + 1)
            ),
        );
    }
    let locks = listing.locks;
    let now = SystemTime::now();
    let views: Vec<View<'_>> = locks
        .iter()
        .map(|(name, survey)| {
            let mut view = View::surveyed(name, survey, now);
            // A set holder: what it still waits for, from the other rows (no more reads).
            if let Some(held) = survey.agreed.as_ref().and_then(|s| s.holders.first()) {
                view.set_wait = view::set_wait(held, |key| {
                    locks
                        .iter()
                        .find(|(n, _)| n.key() == key)
                        .and_then(|(_, s)| s.agreed.as_ref())
                });
            }
            view
        })
        .collect();
    // A lock of a newer protocol is listed among the others, in key order, for what it is.
    let newer = &listing.newer;
    if json {
        let mut items: Vec<(&str, Item<'_>)> = (views.iter())
            .map(|view| (view.name.key(), Item::Lock(Box::new(view.json()))))
            .chain(
                newer
                    .iter()
                    .map(|n| (n.name.key(), Item::Newer(view::newer_json(n)))),
            )
            .collect();
        items.sort_by_key(|(key, _)| *key);
        let items: Vec<Item<'_>> = items.into_iter().map(|(_, item)| item).collect();
        print_json(&items)?;
        return Ok(Exit::from(Code::Success));
    }
    if views.is_empty() && newer.is_empty() {
        out.notice(
            Ev::NoLocks,
            format!(
                "no locks under prefix {} match {}",
                crate::text::quote(prefix),
                crate::text::quote(pattern)
            ),
        );
        return Ok(Exit::from(Code::Success));
    }
    let mut rows = vec![
        [
            "KEY",
            "HOLDER",
            "HELD FOR",
            "EXPIRES IN",
            "WAITING",
            "COMMAND / NOTE",
        ]
        .map(String::from),
    ];
    let mut listed: Vec<[String; 6]> = (views.iter().map(View::row))
        .chain(newer.iter().map(view::newer_row))
        .collect();
    listed.sort_by(|a, b| a[0].cmp(&b[0]));
    rows.extend((listed.into_iter()).map(|row| row.map(|cell| crate::text::sanitize(&cell))));
    print(&table(&rows, std::io::stdout().is_terminal()))?;
    Ok(Exit::from(Code::Success))
}

/// An element of `list --json`: a lock, or a lock of a newer protocol.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Item<'a> {
    Lock(Box<view::LockJson<'a>>),
    Newer(view::NewerJson<'a>),
}

/// Rows as an aligned table (on a terminal) or tab-separated lines (for scripts).
fn table<const N: usize>(rows: &[[String; N]], aligned: bool) -> String {
    let mut text = String::new();
    if !aligned {
        for row in rows {
            text.push_str(&row.join("\t"));
            text.push('\n');
        }
        return text;
    }
    let mut widths = [0usize; N];
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

/// `distlock break`: 0 broken, 1 nothing broken. `holder` (an id prefix, as `status` shows
/// it) breaks that holder alone; without it, every holder shown is broken. On a Redlock's
/// split (no holder has a majority), the holders are the tokens its nodes hold.
pub fn break_lock(
    topology: Topology,
    name: LockName,
    holder: Option<String>,
    yes: bool,
    out: &Output,
) -> Result<Exit, Error> {
    let timeout = topology.timeout();
    let (mut lock, survey) = survey(&topology, &name)?;
    let view = View::surveyed(&name, &survey, SystemTime::now());
    // Like rm -i: ask when someone can answer on a terminal.
    let mut ask = |question: &str| {
        out.prompt(Ev::ConfirmBreak, question);
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
    };
    let consent = if yes {
        Consent::Given
    } else if std::io::stdin().is_terminal() {
        Consent::Ask(&mut ask)
    } else {
        Consent::Impossible
    };
    let budget = || Budget::within(timeout);
    let broken = if view.split {
        breaking::break_split(
            lock.as_mut(),
            &view,
            holder.as_deref(),
            consent,
            &budget,
            out,
        )
    } else {
        breaking::break_holders(
            lock.as_mut(),
            &view,
            holder.as_deref(),
            consent,
            &budget,
            out,
        )
    };
    crate::commands::warn_failed_nodes(lock.as_mut(), out);
    broken
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
