//! A [`View`] as text for people: `status` (and `break` before its question), and a row of
//! `list`. Everything a holder says about itself is escaped here.

use super::{Shown, View};
use crate::lock::{HolderTtl, NewerLock, Waiting};

impl View<'_> {
    /// Several lines about the lock, for people (`status`, and `break` before its question).
    pub fn text(&self) -> String {
        let key = crate::text::quote(self.name.key());
        if self.split {
            return self.split_text();
        }
        let mut text = match (self.holders.as_slice(), self.is_semaphore()) {
            ([], _) => format!("lock {key} is free\n"),
            (holders, _) if self.is_shared() => self.holders_text(
                format!(
                    "lock {key} is held shared by {} (readers: --shared)\n",
                    holders.len()
                ),
                holders,
            ),
            ([only], false) if only.held.cooldown.is_some() => {
                // Kept taken after a run that succeeded: nobody may take it until it expires.
                let mut text = format!("lock {key} is cooling down (it ran recently)\n");
                self.holder_rows(&mut text, only, false);
                text
            }
            ([only], false) => {
                let mut text = format!("lock {key} is held\n");
                self.holder_rows(&mut text, only, false);
                text
            }
            (holders, _) => self.holders_text(
                format!(
                    "lock {key} is held: {} of {} slots (a semaphore)\n",
                    holders.len(),
                    self.limit
                ),
                holders,
            ),
        };
        if !self.waiters.is_empty() {
            text.push_str(&match self.waiters.len() {
                1 => "1 waiting:\n".to_owned(),
                n => format!("{n} waiting, first in line first:\n"),
            });
            for (i, waiting) in self.waiters.iter().enumerate() {
                text.push_str(&format!("  {}. {}\n", i + 1, self.waiter_line(waiting)));
            }
        }
        text.push_str(&self.silent_nodes_text());
        text
    }

    /// The nodes of a Redlock that did not answer, for people: how many, and what the lock
    /// can still lose, then a line per node with its error. Empty when every node answered.
    fn silent_nodes_text(&self) -> String {
        let silent: Vec<(&str, &str)> = self
            .nodes
            .iter()
            .filter_map(|node| node.state.as_ref().err().map(|e| (node.address, *e)))
            .collect();
        if silent.is_empty() {
            return String::new();
        }
        let nodes = self.nodes.len();
        let needed = nodes / 2 + 1;
        let answered = nodes - silent.len();
        let margin = crate::lock::node_margin(answered, needed);
        let mut text = format!(
            "{} of the {nodes} nodes did not answer (the lock works with the other {answered}; \
             a Redlock of {nodes} needs {needed}, so {margin}):\n",
            silent.len()
        );
        for (address, error) in silent {
            text.push_str(&format!(
                "  node {}: {}\n",
                crate::text::sanitize(address),
                crate::text::sanitize(error)
            ));
        }
        text
    }

    /// The rows about one holder; a semaphore's start with its id.
    /// `heading`, then every holder's rows (a semaphore's slots, a shared key's readers): a blank
    /// line before each holder's rows, and before the line after them.
    fn holders_text(&self, heading: String, holders: &[Shown<'_>]) -> String {
        let mut text = heading;
        for shown in holders {
            text.push('\n');
            self.holder_rows(&mut text, shown, true);
        }
        if !self.waiters.is_empty() {
            text.push('\n');
        }
        text
    }

    fn holder_rows(&self, text: &mut String, shown: &Shown<'_>, with_id: bool) {
        let held = shown.held;
        let mut row = |label: &str, value: String| {
            text.push_str(&format!("  {label:<9} {}\n", crate::text::sanitize(&value)));
        };
        if with_id {
            row("id", shown.id.clone().unwrap_or_else(|| "?".into()));
        }
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
                if let Some(set) = &h.set {
                    row("set", format!("part of set {}", crate::text::quote(set)));
                }
                if let Some(wait) = self.set_wait.as_ref().filter(|_| !with_id) {
                    row("waiting", set_wait_words(wait));
                }
            }
            None => row(
                "holder",
                "another client (it stores no distlock metadata)".into(),
            ),
        }
        if let Some(slot) = held.slot {
            row("slot", slot.to_string());
        }
        if let (Some(cool), HolderTtl::Expires(left)) = (&held.cooldown, held.ttl) {
            // The run is over: when it started and ended, and when the next may start.
            if let Some(ran_for) = held.held_for {
                let since = aside("at", self.since(ran_for));
                row(
                    "started",
                    format!("{} ago{since}", crate::text::duration(ran_for)),
                );
            }
            let ended = aside("at", self.since(cool.ended_ago));
            row(
                "ended",
                format!("{} ago{ended}", crate::text::duration(cool.ended_ago)),
            );
            let free_at = aside("at", self.until(left));
            row(
                "next run",
                format!(
                    "may start in {}{free_at}: {}",
                    crate::text::duration(left),
                    cool.flags()
                ),
            );
        } else {
            if let Some(held_for) = held.held_for {
                let since = aside("since", self.since(held_for));
                row(
                    "held for",
                    format!(
                        "{}{since}{}",
                        crate::text::duration(held_for),
                        warn_after(held, ", over its --warn-after ", ", --warn-after ")
                    ),
                );
            }
            row(
                "expires",
                match held.ttl {
                    HolderTtl::Expires(d) => {
                        format!("in {} unless renewed", crate::text::duration(d))
                    }
                    HolderTtl::Never => "never (set without expiry)".into(),
                },
            );
        }
        if let Some(fence) = held.fence {
            row("fence", fence.to_string());
        }
    }

    /// A split, for people: that no holder has a majority, then what each node holds.
    fn split_text(&self) -> String {
        let mut text = format!(
            "lock {} is split: no holder has a majority of the {} nodes (after partial \
             acquires, or a node that lost its data; it resolves when their locks expire)\n",
            crate::text::quote(self.name.key()),
            self.nodes.len()
        );
        for node in &self.nodes {
            let seen = match &node.state {
                Ok(view) if view.holders.is_empty() => "free".to_owned(),
                Ok(view) => view.id_list(),
                Err(e) => format!("no answer ({})", crate::text::sanitize(e)),
            };
            text.push_str(&format!(
                "  node {}: {seen}\n",
                crate::text::sanitize(node.address)
            ));
        }
        text
    }

    /// One line about a waiter: `ci-7, pid 4121, waiting for 12s (since ...); note "x"; CI job URL`.
    fn waiter_line(&self, waiting: &Waiting) -> String {
        let mut line = match &waiting.holder {
            Some(h) => {
                let mut who = crate::text::sanitize(h.host.as_deref().unwrap_or("?"));
                if let Some(pid) = h.pid {
                    who.push_str(&format!(", pid {pid}"));
                }
                who
            }
            None => "an unnamed waiter".to_owned(),
        };
        if let Some(mode) = self.mode_of(waiting.limit) {
            line.push_str(&format!(" ({mode})"));
        }
        if let Some(waited) = waiting.waited {
            line.push_str(&format!(", waiting for {}", crate::text::duration(waited)));
            if let Some(since) = self.since(waited) {
                line.push_str(&format!(" (since {since})"));
            }
        }
        if let Some(h) = &waiting.holder {
            if let Some(note) = &h.note {
                line.push_str(&format!("; note {}", crate::text::quote(note)));
            }
            if let Some(url) = &h.ci_url {
                line.push_str(&format!("; CI job {}", crate::text::sanitize(url)));
            }
        }
        line
    }

    /// The row of `list`: key, holder(s), held for, expires in, waiting, command or note (not
    /// yet escaped).
    pub fn row(&self) -> [String; 6] {
        if self.split {
            return [
                self.name.key().to_owned(),
                "(split)".into(),
                "-".into(),
                "-".into(),
                self.waiters.len().to_string(),
                format!("no holder has a majority of the {} nodes", self.nodes.len()),
            ];
        }
        let first = self.holders.first().map(|shown| shown.held);
        let holder = first.and_then(|h| h.holder.as_deref());
        let mut who = match first {
            None => "(free)".to_owned(),
            Some(_) => holder.map_or_else(
                || "(other client)".to_owned(),
                |h| match (&h.host, h.pid) {
                    (Some(host), Some(pid)) => format!("{host}:{pid}"),
                    (Some(host), None) => host.clone(),
                    (None, Some(pid)) => format!("pid {pid}"),
                    (None, None) => "?".into(),
                },
            ),
        };
        if self.is_semaphore() {
            who = format!("{}/{} {who}", self.holders.len(), self.limit);
        } else if self.is_shared() {
            who = format!("shared×{} {who}", self.holders.len());
        }
        [
            self.name.key().to_owned(),
            who,
            match first {
                None => "-".into(),
                Some(h) => h.held_for.map_or_else(
                    || "?".into(),
                    |d| match warn_after(h, " (over ", " (of ") {
                        w if w.is_empty() => crate::text::duration(d),
                        w => format!("{}{w})", crate::text::duration(d)),
                    },
                ),
            },
            match first.map(|h| h.ttl) {
                None => "-".into(),
                Some(HolderTtl::Expires(d)) => crate::text::duration(d),
                Some(HolderTtl::Never) => "never".into(),
            },
            self.waiters.len().to_string(),
            format!(
                "{}{}{}",
                if first.is_some_and(|h| h.cooldown.is_some()) {
                    "(cooling down) "
                } else {
                    ""
                },
                match (holder.and_then(|h| h.set.as_deref()), &self.set_wait) {
                    (Some(set), Some(wait)) => format!("(set {set}; waiting for {}) ", wait.key),
                    (Some(set), None) => format!("(set {set}) "),
                    _ => String::new(),
                },
                holder
                    .and_then(|h| h.note.clone().or_else(|| h.command.clone()))
                    .unwrap_or_default()
            ),
        ]
    }
}

/// `for "b" (1st in line); the command has not started`.
fn set_wait_words(wait: &super::SetWait) -> String {
    let place = match wait.position {
        Some(1) => " (1st in line)".to_owned(),
        Some(2) => " (2nd in line)".to_owned(),
        Some(3) => " (3rd in line)".to_owned(),
        Some(n) => format!(" ({n}th in line)"),
        None => String::new(),
    };
    format!(
        "for {}{place}; the command has not started",
        crate::text::quote(&wait.key)
    )
}

/// The row of `list` for a lock of a newer protocol: its key, its protocol, and what to do.
/// Nothing else of it can be read (its scripts refuse it), hence the `?`s.
pub fn newer_row(lock: &NewerLock) -> [String; 6] {
    [
        lock.name.key().to_owned(),
        format!("(protocol {})", lock.protocol),
        "?".into(),
        "?".into(),
        "?".into(),
        newer_note(lock),
    ]
}

/// What a lock of a newer protocol is and what to do about it, for `list` (text and JSON).
pub fn newer_note(lock: &NewerLock) -> String {
    format!(
        "a lock of protocol {}; this distlock ({}) speaks protocol {}: upgrade distlock to manage it",
        lock.protocol,
        env!("CARGO_PKG_VERSION"),
        crate::lock::PROTOCOL
    )
}

/// `over` or `within` then the holder's `--warn-after` (as it stored it), whichever its hold
/// is; nothing when it gave none.
fn warn_after(held: &crate::lock::HeldBy, over: &str, within: &str) -> String {
    let Some(after) = held
        .holder
        .as_ref()
        .and_then(|h| h.warn_after_ms)
        .map(std::time::Duration::from_millis)
    else {
        return String::new();
    };
    let word = if held.held_for.is_some_and(|d| d > after) {
        over
    } else {
        within
    };
    format!("{word}{}", crate::text::duration(after))
}

/// ` (at 2026-11-23T09:58:55Z)`: an instant in parentheses after `word`, or nothing when the
/// clock could not place it.
fn aside(word: &str, instant: Option<String>) -> String {
    instant
        .map(|a| format!(" ({word} {a})"))
        .unwrap_or_default()
}
