//! How the operator commands show a lock: its holders in the order they were granted, each named
//! by a short id, and its line of waiters, first in line first; as text for people (`status`,
//! the question of `break`, a row of `list`) and as JSON for scripts.
//!
//! Pure functions of a [`LockState`] and the time of the look: no Redis and no printing here.
//! Everything a holder or a waiter says about itself was written into Redis by whoever took the
//! lock (a note can hold anything): text renderings escape it with [`crate::text::sanitize`] or
//! [`crate::text::quote`], and the JSON encoder escapes every control character.
//!
//! This file builds the view (ids included); `text.rs` renders it for people, `json.rs` for
//! scripts.

#[cfg(test)]
pub mod fixtures;
mod json;
#[cfg(test)]
mod tests;
mod text;

pub use json::{LockJson, NewerJson, newer_json};
pub use text::newer_row;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::lock::{HeldBy, LockName, LockState, Survey, Waiting};

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
    /// The holder takes this key as part of a set and still waits for another of its keys
    /// (its command has not started): which, and its place in that key's line.
    pub set_wait: Option<SetWait>,
}

/// A set holder's wait for a later key ([`View::set_wait`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetWait {
    /// The key it waits for.
    pub key: String,
    /// Its place in that key's line (1: next), when it was found there.
    pub position: Option<usize>,
}

/// What a set holder of one key still waits for: the first key of its set (in the set's order)
/// that its token does not hold, and its place in that key's line (the waiter with the same
/// host and pid); `None` when it holds every key it was seen holding or waiting for. `state`
/// gives what an inspection found for a key of the set (`None`: not looked at, or free with
/// nobody waiting).
pub fn set_wait<'s>(
    held: &HeldBy,
    state: impl Fn(&str) -> Option<&'s LockState>,
) -> Option<SetWait> {
    let holder = held.holder.as_deref()?;
    let set = holder.set.as_deref()?;
    let token = held.token.as_deref()?;
    for key in set.split_whitespace() {
        let Some(state) = state(key) else {
            continue;
        };
        if state
            .holders
            .iter()
            .any(|h| h.token.as_deref() == Some(token))
        {
            continue;
        }
        let position = state
            .waiters
            .iter()
            .position(|w| {
                w.holder
                    .as_deref()
                    .is_some_and(|w| w.host == holder.host && w.pid == holder.pid)
            })
            .map(|i| i + 1);
        return Some(SetWait {
            key: key.to_owned(),
            position,
        });
    }
    None
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
    now_ms: 0,
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
            set_wait: None,
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
        !self.is_shared() && (self.limit > 1 || self.holders.len() > 1)
    }

    /// Whether the lock is held shared (`--shared`: readers, limit 0).
    pub fn is_shared(&self) -> bool {
        self.limit == 0 && !self.holders.is_empty()
    }

    /// Whether the lock is a shared lock (readers hold it or wait for it): its holders and
    /// waiters then say their mode.
    pub fn shared_family(&self) -> bool {
        self.is_shared() || self.waiters.iter().any(|w| w.limit == 0)
    }

    /// The mode of a holder or waiter of `limit` in a shared lock (`None` elsewhere).
    pub fn mode_of(&self, limit: u32) -> Option<&'static str> {
        match limit {
            _ if !self.shared_family() => None,
            0 => Some("shared"),
            1 => Some("exclusive"),
            _ => None,
        }
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
