//! How the operator commands show a lock: its holders in the order they were granted, each named
//! by a short id, and its line of waiters, first in line first; as text for people (`status`,
//! the question of `break`, a row of `list`) and as JSON for scripts.
//!
//! Pure functions of a [`LockState`] and the time of the look: no Redis and no printing here.
//! Everything a holder or a waiter says about itself was written into Redis by whoever took the
//! lock (a note can hold anything): text renderings escape it with [`crate::text::sanitize`] or
//! [`crate::text::quote`], and the JSON encoder escapes every control character.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::lock::{HeldBy, Holder, HolderTtl, LockName, LockState, Survey, Waiting};

/// Characters of a token that make a holder's id (more when two holders share them).
pub const ID_CHARS: usize = 8;

/// A lock as the operator commands show it.
pub struct View<'a> {
    /// Which lock.
    pub name: &'a LockName,
    /// 1 for a mutex, N for a semaphore, 0 when free.
    pub limit: u32,
    /// Its holders, oldest grant first.
    pub holders: Vec<Shown<'a>>,
    /// Its waiters, first in line first.
    pub waiters: &'a [Waiting],
    /// When it was looked at (to turn "held for" into "since").
    now: SystemTime,
    /// Each node's view of the lock (a Redlock's); empty for one server.
    pub nodes: Vec<NodeShown<'a>>,
    /// The nodes answered, but no holder (nor "free") is on a majority of them: the lock is
    /// neither held (no holder can count on it) nor free (no attempt can win a majority until
    /// the locks of the nodes expire). `holders` is then empty.
    pub split: bool,
}

/// One node's view of a lock, or why the node did not answer.
pub struct NodeShown<'a> {
    /// The node's address (passwords redacted).
    pub address: &'a str,
    /// The lock as this node alone sees it, or the error's text.
    pub state: Result<View<'a>, &'a str>,
}

/// The lock on a split: nobody holds it as far as a majority knows.
static NO_MAJORITY: LockState = LockState {
    holders: Vec::new(),
    limit: 0,
    waiters: Vec::new(),
};

/// A holder, with the id that names it.
pub struct Shown<'a> {
    /// A short prefix of its token (None when the token could not be read or is too short to
    /// give part of it away).
    pub id: Option<String>,
    /// What is known about it.
    pub held: &'a HeldBy,
}

impl Shown<'_> {
    /// The holder's token, to release it with.
    pub fn token(&self) -> Option<&str> {
        self.held.token.as_deref()
    }

    /// `holder 3f2a9c1e` (escaped), or `a holder without an id`, for messages.
    pub fn named(&self) -> String {
        match &self.id {
            Some(id) => format!("holder {}", crate::text::sanitize(id)),
            None => "a holder without an id".to_owned(),
        }
    }
}

impl<'a> View<'a> {
    /// The view of `state`, looked at `now`.
    pub fn new(name: &'a LockName, state: &'a LockState, now: SystemTime) -> View<'a> {
        let mut held: Vec<&HeldBy> = state.holders.iter().collect();
        // Oldest grant first, by fence: an order that stays put while the holders renew (Redis
        // lists semaphore slots by expiry, which every renewal changes). A holder without a
        // fence (another client's mutex) is alone anyway.
        held.sort_by_key(|h| (h.fence.is_none(), h.fence));
        let tokens: Vec<Option<&str>> = held.iter().map(|h| h.token.as_deref()).collect();
        let holders = short_ids(&tokens)
            .into_iter()
            .zip(held)
            .map(|(id, held)| Shown { id, held })
            .collect();
        View {
            name,
            limit: state.limit,
            holders,
            waiters: &state.waiters,
            now,
            nodes: Vec::new(),
            split: false,
        }
    }

    /// The view of what a survey found: the lock a majority agrees on, and each node's view.
    pub fn surveyed(name: &'a LockName, survey: &'a Survey, now: SystemTime) -> View<'a> {
        let mut view = View::new(name, survey.agreed.as_ref().unwrap_or(&NO_MAJORITY), now);
        view.split = survey.agreed.is_none();
        view.nodes = survey
            .nodes
            .iter()
            .map(|node| NodeShown {
                address: &node.address,
                state: match &node.state {
                    Ok(state) => Ok(View::new(name, state, now)),
                    Err(e) => Err(e.as_str()),
                },
            })
            .collect();
        view
    }

    /// Whether the lock is a counting semaphore (several slots).
    pub fn is_semaphore(&self) -> bool {
        self.limit > 1 || self.holders.len() > 1
    }

    /// The ids of every holder, for messages:
    /// `3f2a9c1e held by host pid 12 (note); 9b07d2aa held by ...`.
    pub fn id_list(&self) -> String {
        let ids: Vec<String> = self
            .holders
            .iter()
            .map(|shown| {
                let id = shown
                    .id
                    .as_deref()
                    .map_or_else(|| "(no id)".to_owned(), crate::text::sanitize);
                format!("{id} held by {}", who(shown.held))
            })
            .collect();
        ids.join("; ")
    }

    /// When something that has lasted `d` (on the Redis server's clock) began, as RFC 3339.
    fn since(&self, d: Duration) -> Option<String> {
        let now = self.now.duration_since(UNIX_EPOCH).ok()?;
        let at = UNIX_EPOCH + Duration::from_secs(now.saturating_sub(d).as_secs());
        Some(humantime::format_rfc3339_seconds(at).to_string())
    }

    /// When something due in `d` (on the Redis server's clock) will happen, as RFC 3339.
    fn until(&self, d: Duration) -> Option<String> {
        let now = self.now.duration_since(UNIX_EPOCH).ok()?;
        let at = UNIX_EPOCH + Duration::from_secs((now + d).as_secs());
        Some(humantime::format_rfc3339_seconds(at).to_string())
    }

    /// Several lines about the lock, for people (`status`, and `break` before its question).
    pub fn text(&self) -> String {
        let key = crate::text::quote(self.name.key());
        if self.split {
            return self.split_text();
        }
        let mut text = match (self.holders.as_slice(), self.is_semaphore()) {
            ([], _) => format!("lock {key} is free\n"),
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
            (holders, _) => {
                let mut text = format!(
                    "lock {key} is held: {} of {} slots (a semaphore)\n",
                    holders.len(),
                    self.limit
                );
                // A blank line before each holder's rows, and before the line after them.
                for shown in holders {
                    text.push('\n');
                    self.holder_rows(&mut text, shown, true);
                }
                if !self.waiters.is_empty() {
                    text.push('\n');
                }
                text
            }
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
                let since = self
                    .since(ran_for)
                    .map(|a| format!(" (at {a})"))
                    .unwrap_or_default();
                row(
                    "started",
                    format!("{} ago{since}", crate::text::duration(ran_for)),
                );
            }
            let ended = self
                .since(cool.ended_ago)
                .map(|a| format!(" (at {a})"))
                .unwrap_or_default();
            row(
                "ended",
                format!("{} ago{ended}", crate::text::duration(cool.ended_ago)),
            );
            let free_at = self
                .until(left)
                .map(|a| format!(" (at {a})"))
                .unwrap_or_default();
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
                let since = self
                    .since(held_for)
                    .map(|a| format!(" (since {a})"))
                    .unwrap_or_default();
                row(
                    "held for",
                    format!("{}{since}", crate::text::duration(held_for)),
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

    /// The lock as one JSON object (`status --json`, an element of `list --json`).
    pub fn json(&self) -> LockJson<'_> {
        let first = self.holders.first().map(|shown| shown.held);
        LockJson {
            key: self.name.key(),
            redis_key: self.name.lock_key(),
            held: first.is_some(),
            ttl_ms: first.and_then(ttl_ms),
            held_for_ms: first.and_then(|h| h.held_for).map(millis),
            acquired_at: first.and_then(|h| self.since(h.held_for?)),
            holder: first.and_then(|h| h.holder.as_deref()).map(holder_json),
            fence: first.and_then(|h| h.fence),
            cooldown: first.and_then(|h| self.cooldown_json(h)),
            limit: self.limit,
            holders: self
                .holders
                .iter()
                .map(|shown| HeldJson {
                    id: shown.id.as_deref(),
                    ttl_ms: ttl_ms(shown.held),
                    held_for_ms: shown.held.held_for.map(millis),
                    acquired_at: shown.held.held_for.and_then(|d| self.since(d)),
                    fence: shown.held.fence,
                    slot: shown.held.slot,
                    holder: shown.held.holder.as_deref().map(holder_json),
                })
                .collect(),
            waiting: self
                .waiters
                .iter()
                .enumerate()
                .map(|(i, waiting)| WaitingJson {
                    position: i + 1,
                    waited_ms: waiting.waited.map(millis),
                    since: waiting.waited.and_then(|d| self.since(d)),
                    limit: waiting.limit,
                    holder: waiting.holder.as_deref().map(holder_json),
                })
                .collect(),
            split: (!self.nodes.is_empty()).then_some(self.split),
            nodes: (!self.nodes.is_empty()).then(|| {
                self.nodes
                    .iter()
                    .map(|node| NodeJson {
                        address: node.address,
                        lock: node.state.as_ref().ok().map(View::json),
                        error: node.state.as_ref().err().copied(),
                    })
                    .collect()
            }),
        }
    }

    /// A mutex cooling down after its run, for JSON.
    fn cooldown_json(&self, held: &HeldBy) -> Option<CooldownJson> {
        let cool = held.cooldown?;
        Some(CooldownJson {
            ended_ms_ago: millis(cool.ended_ago),
            ended_at: self.since(cool.ended_ago),
            next_at: match held.ttl {
                HolderTtl::Expires(left) => self.until(left),
                HolderTtl::Never => None,
            },
            min_interval_ms: cool.min_interval.map(millis),
            cooldown_ms: cool.cooldown.map(millis),
        })
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
        }
        [
            self.name.key().to_owned(),
            who,
            match first {
                None => "-".into(),
                Some(h) => h.held_for.map_or_else(|| "?".into(), crate::text::duration),
            },
            match first.map(|h| h.ttl) {
                None => "-".into(),
                Some(HolderTtl::Expires(d)) => crate::text::duration(d),
                Some(HolderTtl::Never) => "never".into(),
            },
            self.waiters.len().to_string(),
            format!(
                "{}{}",
                if first.is_some_and(|h| h.cooldown.is_some()) {
                    "(cooling down) "
                } else {
                    ""
                },
                holder
                    .and_then(|h| h.note.clone().or_else(|| h.command.clone()))
                    .unwrap_or_default()
            ),
        ]
    }
}

/// Who a holder is, in a few words (escaped): `host pid 12 (note)`.
pub fn who(held: &HeldBy) -> String {
    held.holder
        .as_ref()
        .map_or_else(|| "another client".to_owned(), |h| h.summary())
}

/// The id of each token: its first [`ID_CHARS`] characters, more where two tokens share them (as
/// git shortens hashes), but never more than half of the token. The id names a holder for
/// `break --holder`; the token itself lets whoever knows it renew or release the lock, so it is
/// never shown whole. A token too short to give a character away has no id.
pub fn short_ids(tokens: &[Option<&str>]) -> Vec<Option<String>> {
    let chars: Vec<Option<Vec<char>>> = tokens
        .iter()
        .map(|t| t.map(|t| t.chars().collect()))
        .collect();
    // The longest prefix each token shares with another: its neighbours in sorted order.
    let mut order: Vec<usize> = (0..chars.len()).filter(|&i| chars[i].is_some()).collect();
    order.sort_by(|&a, &b| chars[a].cmp(&chars[b]));
    let mut shared = vec![0usize; chars.len()];
    for pair in order.windows(2) {
        if let [a, b] = *pair {
            if let (Some(x), Some(y)) = (&chars[a], &chars[b]) {
                let common = x.iter().zip(y).take_while(|(p, q)| p == q).count();
                shared[a] = shared[a].max(common);
                shared[b] = shared[b].max(common);
            }
        }
    }
    chars
        .iter()
        .zip(shared)
        .map(|(token, shared)| {
            let token = token.as_ref()?;
            let cap = token.len() / 2;
            let len = ID_CHARS.max(shared + 1).min(cap);
            (len > 0).then(|| token[..len].iter().collect())
        })
        .collect()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn ttl_ms(held: &HeldBy) -> Option<u64> {
    match held.ttl {
        HolderTtl::Expires(d) => Some(millis(d)),
        HolderTtl::Never => None,
    }
}

fn holder_json(h: &Holder) -> HolderJson<'_> {
    HolderJson {
        host: h.host.as_deref(),
        pid: h.pid,
        user: h.user.as_deref(),
        command: h.command.as_deref(),
        kind: h.kind.as_deref(),
        version: h.version.as_deref(),
        ci_url: h.ci_url.as_deref(),
        note: h.note.as_deref(),
    }
}

/// A lock as `status --json` and `list --json` show it. The fields before `fence` are those of
/// the mutex holder (or of a semaphore's first holder), as before semaphores existed, so that
/// scripts written then keep working.
#[derive(Serialize)]
pub struct LockJson<'a> {
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
    /// The fencing token of the (first) holder; null when free or granted by another client.
    fence: Option<u64>,
    /// A mutex kept taken after its run succeeded (--min-interval, --cooldown); absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    cooldown: Option<CooldownJson>,
    /// 1 for a mutex, N for a semaphore, 0 when free.
    limit: u32,
    /// Every holder, oldest grant first.
    holders: Vec<HeldJson<'a>>,
    /// Every waiter, first in line first.
    waiting: Vec<WaitingJson<'a>>,
    /// A Redlock's only: whether no holder has a majority of the nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    split: Option<bool>,
    /// A Redlock's only: each node's view, in the order the nodes were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<Vec<NodeJson<'a>>>,
}

/// One node's view: its address, then either the lock as it alone sees it (the fields of
/// [`LockJson`]) or `error`.
#[derive(Serialize)]
struct NodeJson<'a> {
    address: &'a str,
    #[serde(flatten)]
    lock: Option<LockJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

#[derive(Serialize)]
struct HeldJson<'a> {
    id: Option<&'a str>,
    ttl_ms: Option<u64>,
    held_for_ms: Option<u64>,
    acquired_at: Option<String>,
    fence: Option<u64>,
    /// A semaphore holder's slot index (DISTLOCK_SLOT); absent for a mutex.
    #[serde(skip_serializing_if = "Option::is_none")]
    slot: Option<u32>,
    holder: Option<HolderJson<'a>>,
}

/// When the last run ended, and when the next may start (both RFC 3339, our clock).
#[derive(Serialize)]
struct CooldownJson {
    ended_ms_ago: u64,
    ended_at: Option<String>,
    next_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_interval_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cooldown_ms: Option<u64>,
}

#[derive(Serialize)]
struct WaitingJson<'a> {
    position: usize,
    waited_ms: Option<u64>,
    since: Option<String>,
    limit: u32,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-23T10:00:00Z.
    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_795_428_000)
    }

    fn held(token: &str, fence: u64, pid: u32, note: &str, held_for: u64) -> HeldBy {
        HeldBy {
            ttl: HolderTtl::Expires(Duration::from_millis(28_600)),
            holder: Some(Box::new(Holder {
                host: Some("ci-7".into()),
                pid: Some(pid),
                user: Some("deploy".into()),
                command: Some("./batch.sh".into()),
                kind: Some("run".into()),
                version: Some("0.1.0".into()),
                ci_url: None,
                note: Some(note.into()),
            })),
            held_for: Some(Duration::from_secs(held_for)),
            token: Some(token.into()),
            fence: Some(fence),
            slot: None,
            cooldown: None,
        }
    }

    fn waiting(pid: u32, note: Option<&str>, waited: u64, limit: u32) -> Waiting {
        Waiting {
            holder: Some(Box::new(Holder {
                host: Some("ci-8".into()),
                pid: Some(pid),
                note: note.map(Into::into),
                ci_url: (pid == 31).then(|| "https://ci/job/31".into()),
                ..Holder::default()
            })),
            waited: Some(Duration::from_secs(waited)),
            limit,
        }
    }

    fn semaphore() -> LockState {
        LockState {
            // As Redis lists them: soonest expiry first, not the order of the grants.
            holders: vec![
                held("9b07d2aa-0000-4000-8000-000000000002", 20, 12, "batch 2", 5),
                held(
                    "3f2a9c1e-0000-4000-8000-000000000001",
                    10,
                    11,
                    "batch 1",
                    65,
                ),
            ],
            limit: 2,
            waiters: vec![waiting(31, Some("batch 3"), 12, 2), waiting(32, None, 3, 2)],
        }
    }

    #[test]
    fn a_semaphore_shows_every_holder_by_id_and_the_line_in_order() {
        let name = LockName::new("distlock:", "pool");
        let state = semaphore();
        let view = View::new(&name, &state, now());
        assert_eq!(
            view.text(),
            "lock \"pool\" is held: 2 of 2 slots (a semaphore)\n\
             \n\
             \x20 id        3f2a9c1e\n\
             \x20 holder    ci-7, pid 11, user deploy\n\
             \x20 command   ./batch.sh\n\
             \x20 note      batch 1\n\
             \x20 via       distlock 0.1.0 run\n\
             \x20 held for  1m 5s (since 2026-11-23T09:58:55Z)\n\
             \x20 expires   in 28.6s unless renewed\n\
             \x20 fence     10\n\
             \n\
             \x20 id        9b07d2aa\n\
             \x20 holder    ci-7, pid 12, user deploy\n\
             \x20 command   ./batch.sh\n\
             \x20 note      batch 2\n\
             \x20 via       distlock 0.1.0 run\n\
             \x20 held for  5s (since 2026-11-23T09:59:55Z)\n\
             \x20 expires   in 28.6s unless renewed\n\
             \x20 fence     20\n\
             \n\
             2 waiting, first in line first:\n\
             \x20 1. ci-8, pid 31, waiting for 12s (since 2026-11-23T09:59:48Z); note \"batch 3\"; CI job https://ci/job/31\n\
             \x20 2. ci-8, pid 32, waiting for 3s (since 2026-11-23T09:59:57Z)\n"
        );
        assert_eq!(
            view.row(),
            ["pool", "2/2 ci-7:11", "1m 5s", "28.6s", "2", "batch 1"].map(String::from)
        );
    }

    #[test]
    fn a_mutex_keeps_its_layout_plus_its_fence() {
        let name = LockName::new("distlock:", "m");
        let state = LockState {
            holders: vec![held("aaaaaaaa-1", 7, 11, "deploy 42", 5)],
            limit: 1,
            waiters: vec![waiting(32, None, 3, 1)],
        };
        let view = View::new(&name, &state, now());
        let text = view.text();
        assert!(
            text.starts_with("lock \"m\" is held\n  holder    ci-7, pid 11, user deploy\n"),
            "{text}"
        );
        assert!(!text.contains("  id "), "{text}");
        assert!(text.contains("\n  fence     7\n1 waiting:\n  1. ci-8, pid 32"));
        assert_eq!(view.row()[1], "ci-7:11");
        // Free, with a waiter (a hand-off under way): still shown.
        let free = LockState {
            holders: Vec::new(),
            limit: 0,
            waiters: vec![waiting(32, None, 3, 1)],
        };
        let view = View::new(&name, &free, now());
        assert!(view.text().starts_with("lock \"m\" is free\n1 waiting:\n"));
        assert_eq!(
            view.row(),
            ["m", "(free)", "-", "-", "1", ""].map(String::from)
        );
    }

    #[test]
    fn json_keeps_the_mutex_fields_and_adds_holders_and_the_line() {
        let name = LockName::new("distlock:", "pool");
        let state = semaphore();
        let view = View::new(&name, &state, now());
        let v = serde_json::to_value(view.json()).unwrap();
        assert_eq!(v["held"], true);
        assert_eq!(v["holder"]["pid"], 11, "the first holder's, as before");
        assert_eq!(v["acquired_at"], "2026-11-23T09:58:55Z");
        assert_eq!(v["fence"], 10);
        assert_eq!(v["limit"], 2);
        assert_eq!(v["holders"][0]["id"], "3f2a9c1e");
        assert_eq!(v["holders"][1]["id"], "9b07d2aa");
        assert_eq!(v["holders"][1]["fence"], 20);
        assert_eq!(v["holders"][1]["holder"]["note"], "batch 2");
        assert_eq!(v["holders"][1]["ttl_ms"], 28_600);
        assert_eq!(v["waiting"][0]["position"], 1);
        assert_eq!(v["waiting"][0]["holder"]["note"], "batch 3");
        assert_eq!(v["waiting"][0]["waited_ms"], 12_000);
        assert_eq!(v["waiting"][0]["since"], "2026-11-23T09:59:48Z");
        assert_eq!(v["waiting"][1]["position"], 2);
        assert_eq!(v["waiting"][1]["limit"], 2);
        let text = serde_json::to_string(&view.json()).unwrap();
        assert!(!text.contains("-0000-4000"), "never a whole token: {text}");
    }

    #[test]
    fn a_split_shows_each_node_and_no_holder() {
        use crate::lock::NodeView;
        let name = LockName::new("distlock:", "sp");
        let one = |token: &str, fence| LockState {
            holders: vec![held(token, fence, 11, "n", 5)],
            limit: 1,
            waiters: Vec::new(),
        };
        let survey = Survey {
            agreed: None,
            nodes: vec![
                NodeView {
                    address: "redis://a:6379".into(),
                    state: Ok(one("3f2a9c1e-0000-4000-8000-000000000001", 7)),
                },
                NodeView {
                    address: "redis://b:6379".into(),
                    state: Ok(LockState::default()),
                },
                NodeView {
                    address: "redis://c:6379".into(),
                    state: Err("cannot connect\x1b[2J".into()),
                },
            ],
        };
        let view = View::surveyed(&name, &survey, now());
        let text = view.text();
        assert!(
            text.starts_with("lock \"sp\" is split: no holder has a majority of the 3 nodes"),
            "{text}"
        );
        assert!(
            text.contains("\n  node redis://a:6379: 3f2a9c1e held by ci-7 pid 11"),
            "{text}"
        );
        assert!(text.contains("\n  node redis://b:6379: free\n"), "{text}");
        assert!(
            text.contains("\n  node redis://c:6379: no answer (cannot connect"),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert_eq!(view.row()[1], "(split)");
        let v = serde_json::to_value(view.json()).unwrap();
        assert_eq!(v["split"], true);
        assert_eq!(v["held"], false);
        assert_eq!(v["nodes"][0]["address"], "redis://a:6379");
        assert_eq!(v["nodes"][0]["fence"], 7);
        assert_eq!(v["nodes"][1]["held"], false);
        assert!(v["nodes"][2]["error"].is_string());
        assert!(v["nodes"][2].get("held").is_none());
        // One server: neither field, as before.
        let single = Survey {
            agreed: Some(LockState::default()),
            nodes: Vec::new(),
        };
        let v = serde_json::to_value(View::surveyed(&name, &single, now()).json()).unwrap();
        assert!(v.get("split").is_none() && v.get("nodes").is_none(), "{v}");
    }

    #[test]
    fn ids_are_short_unique_and_never_the_whole_token() {
        let ids = |tokens: &[Option<&str>]| short_ids(tokens);
        assert_eq!(
            ids(&[Some("3f2a9c1e-aaaa-aaaa"), Some("9b07d2aa-bbbb-bbbb"), None]),
            [Some("3f2a9c1e".into()), Some("9b07d2aa".into()), None]
        );
        // Two tokens that share their first 8 characters get one more than they share.
        assert_eq!(
            ids(&[
                Some("3f2a9c1e-aa-0000000000"),
                Some("3f2a9c1e-ab-0000000000"),
                Some("77777777-zz-0000000000")
            ]),
            [
                Some("3f2a9c1e-aa".into()),
                Some("3f2a9c1e-ab".into()),
                Some("77777777".into())
            ]
        );
        // Another client's short token: half of it at most; nothing when that is nothing.
        assert_eq!(
            ids(&[Some("py-token")]),
            [Some("py-t".into())],
            "8 characters would be all of it"
        );
        assert_eq!(ids(&[Some("x")]), [None]);
        assert_eq!(ids(&[Some("ééééééééééé-ü")]), [Some("éééééé".into())]);
    }

    #[test]
    fn text_from_redis_cannot_forge_lines() {
        let name = LockName::new("distlock:", "k");
        let mut state = semaphore();
        if let Some(h) = state.holders[0].holder.as_mut() {
            h.note = Some("x\ndistlock: acquired\u{1b}[2J".into());
        }
        if let Some(h) = state.waiters[0].holder.as_mut() {
            h.host = Some("evil\rhost".into());
            h.note = Some("n\u{9b}31m".into());
            h.ci_url = Some("https://ci/\n1".into());
        }
        state.holders[1].token = Some("ab\u{1b}cd\nefgh-ijklmnop".into());
        let text = View::new(&name, &state, now()).text();
        assert_eq!(text.matches('\n').count(), 23, "{text}");
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
    }
}
