//! A [`View`] as JSON for scripts (`status --json`, `list --json`): the shapes serde encodes.

use std::time::Duration;

use serde::Serialize;

use super::View;
use crate::lock::{HeldBy, Holder, HolderTtl, NewerLock};

impl View<'_> {
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
            mode: if self.is_shared() {
                Some("shared")
            } else if first.is_some() {
                self.mode_of(1)
            } else {
                None
            },
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
                    set: shown.held.holder.as_deref().and_then(|h| h.set.as_deref()),
                    waiting_for: shown
                        .held
                        .holder
                        .as_deref()
                        .and_then(|h| h.set.as_ref())
                        .map(|_| self.set_wait.as_ref().map(|w| w.key.as_str())),
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
                    mode: self.mode_of(waiting.limit),
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
        warn_after_ms: h.warn_after_ms,
        set: h.set.as_deref(),
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
    /// 1 for a mutex, N for a semaphore, 0 when free or held shared.
    limit: u32,
    /// A shared lock's only (held shared, or with readers in line): `shared` while readers
    /// hold it, `exclusive` while a writer does; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'static str>,
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

/// A lock of a newer protocol in `list --json`: its names, its protocol and what to do; no
/// other field, since nothing else of it can be read.
#[derive(Serialize)]
pub struct NewerJson<'a> {
    key: &'a str,
    redis_key: &'a str,
    protocol: &'a str,
    error: String,
}

/// `lock` as `list --json` shows it.
pub fn newer_json(lock: &NewerLock) -> NewerJson<'_> {
    NewerJson {
        key: lock.name.key(),
        redis_key: lock.name.lock_key(),
        protocol: &lock.protocol,
        error: super::text::newer_note(lock),
    }
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
    /// The keys of its set, when it takes several (as `holder.set`).
    #[serde(skip_serializing_if = "Option::is_none")]
    set: Option<&'a str>,
    /// The key of its set it still waits for (its command has not started); null once it
    /// holds every key; absent for a holder of one key.
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting_for: Option<Option<&'a str>>,
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
    /// In a shared lock: `shared` or `exclusive`; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'static str>,
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
    /// `run --warn-after`, when it was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    warn_after_ms: Option<u64>,
    /// The keys of its set (space-separated, in the order taken), when it takes several.
    #[serde(skip_serializing_if = "Option::is_none")]
    set: Option<&'a str>,
}
