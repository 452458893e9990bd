//! The protocol distlock speaks to one Redis server, shared by every lock algorithm: the Lua
//! scripts (`lua/*.lua`, each being `lua/protocol.lua` (the key-layout version check),
//! `lua/common.lua` and its own body), the arguments they take, the decoding of their replies,
//! the timing of the line of waiters, and the listing of the locks on a server. It encodes
//! requests and decodes replies; it sends nothing on its own except for [`list`]. The
//! one-server lock ([`super::single`]) and each node of a Redlock ([`super::redlock`]) use it;
//! what to do with the answers is theirs.
//!
//! # The line
//!
//! A waiter that joins the line gets a ticket (a number from the same counter as fences, so the
//! order is the Redis server's). Its place lasts [`PLACE`] from its last attempt, on the
//! server's clock, so it attempts again every [`REFRESH`]: a waiter that dies leaves the line by
//! itself, and one that gives up leaves it at once. A release hands the lock directly to the
//! first live waiter (the key then holds that waiter's token, for [`TAKEUP`]) and wakes it
//! alone; its next attempt finds its own token and takes the lock up with its claim. A waiter
//! that does not take it up (dead, or its wake-up lost and its next refresh late) loses it when
//! that expires, and any attempt that then finds the lock free with waiters hands it on. So a
//! dead waiter costs the line at most [`TAKEUP`] (3s; none once its place lapsed, 6s after its
//! last refresh), and a lost wake-up at most [`REFRESH`] (2s).

use std::time::{Duration, Instant};

use super::{
    Answer, Conflict, CoolDown, HeldBy, HolderTtl, Holders, LockName, LockState, NewerLock,
    Ownership, Queueing, Request, Token, Use, Validity, Waiting,
};
use crate::backend::{BackendError, Connector, Reply, Script};
use crate::clock::Moment;
use crate::lock::holder::Holder;

macro_rules! script {
    ($file:literal) => {
        Script::new(concat!(
            include_str!("lua/protocol.lua"),
            include_str!("lua/history.lua"),
            include_str!("lua/common.lua"),
            include_str!(concat!("lua/", $file))
        ))
    };
    // Without the protocol check: a script that touches only the keys of a lock it holds (by
    // token compare), which a newer layout cannot give it, and that must go through a Cluster
    // slot migration, where reading a key that does not exist fails (see `lua/common.lua`).
    ($file:literal, holder only) => {
        Script::new(concat!(
            include_str!("lua/history.lua"),
            include_str!("lua/common.lua"),
            include_str!(concat!("lua/", $file))
        ))
    };
}

pub static ACQUIRE: Script = script!("acquire.lua");
pub static RENEW: Script = script!("renew.lua", holder only);
pub static RELEASE: Script = script!("release.lua");
pub static INSPECT: Script = script!("inspect.lua");
pub static HOLDS: Script = script!("holds.lua");

/// How long a place in line lasts without another attempt (on the Redis server's clock): it
/// survives two missed refreshes (a slow request), and then a dead waiter leaves the line.
pub const PLACE: Duration = Duration::from_secs(6);
/// The same for a waiter that polls (at least every 500ms): nobody hands it the lock, but a
/// dead one at the head of the line holds up the waiters behind it until its place lapses.
pub const PLACE_POLLING: Duration = Duration::from_secs(3);
/// How often a waiter in line attempts again (at most 0.5 requests per second): a lost wake-up
/// costs at most this long.
pub const REFRESH: Duration = Duration::from_secs(2);
/// How long a lock handed to a waiter waits for it to take it up: what a waiter that died
/// while first in line costs the others. Longer than [`REFRESH`], so that a waiter whose
/// wake-up was lost still takes up its turn.
pub const TAKEUP: Duration = Duration::from_secs(3);

/// The arguments of `lua/acquire.lua` for `request`, taking a place in line as `queueing` says.
pub fn acquire_args(request: &Request<'_>, queueing: Queueing) -> Vec<Vec<u8>> {
    let mode: &[u8] = match queueing {
        Queueing::Try => b"try",
        Queueing::Join => b"join",
        Queueing::Supersede => b"supersede",
        Queueing::Replace => b"replace",
        Queueing::Refresh => b"refresh",
    };
    let mut args: Vec<Vec<u8>> = vec![
        request.token.as_str().into(),
        millis(request.claim).to_string().into_bytes(),
        // 0: a shared lock's reader, said twice (limit 0 and mode = shared: see acquire.lua).
        request.limit.to_string().into_bytes(),
        mode.to_vec(),
        millis(if request.polls { PLACE_POLLING } else { PLACE })
            .to_string()
            .into_bytes(),
        millis(TAKEUP).to_string().into_bytes(),
        b"ttl_ms".to_vec(),
        millis(request.ttl).to_string().into_bytes(),
    ];
    for (name, interval) in [
        ("min_interval_ms", request.after.min_interval),
        ("cooldown_ms", request.after.cooldown),
    ] {
        if let Some(interval) = interval {
            args.push(name.as_bytes().to_vec());
            args.push(millis(interval).to_string().into_bytes());
        }
    }
    if request.limit == 0 {
        args.push(b"mode".to_vec());
        args.push(b"shared".to_vec());
    }
    if request.polls {
        args.push(b"polls".to_vec());
        args.push(b"1".to_vec());
    } else if request.doorbell {
        args.push(b"wake".to_vec());
        args.push(b"list".to_vec());
    }
    for (name, value) in request.holder.to_fields() {
        args.push(name.as_bytes().to_vec());
        args.push(value.into_bytes());
    }
    args.extend(super::history::acquire_fields());
    args
}

/// The arguments of `lua/renew.lua`: the token, the expiry to set (`0`: the TTL the lock was
/// taken with), and for a Redlock, the fence floor each node's counter is raised to.
pub fn renew_args(token: &Token, ttl: Duration, fence_floor: Option<u64>) -> Vec<Vec<u8>> {
    let mut args = vec![
        token.as_str().as_bytes().to_vec(),
        millis(ttl).to_string().into_bytes(),
    ];
    if let Some(floor) = fence_floor {
        args.push(floor.to_string().into_bytes());
    }
    args
}

/// The arguments of `lua/release.lua`: the token, and whether the work succeeded (`1`: a mutex
/// taken with an interval then cools down).
pub fn release_args(token: &Token, succeeded: bool) -> Vec<Vec<u8>> {
    let mut args = vec![
        token.as_str().as_bytes().to_vec(),
        if succeeded {
            b"1".to_vec()
        } else {
            b"0".to_vec()
        },
    ];
    args.extend(super::history::release_fields());
    args
}

/// What [`list`] found on one server.
#[derive(Debug, Default)]
pub struct Found {
    /// The locks held or waited for, with what is known about them.
    pub locks: Vec<(LockName, LockState)>,
    /// The locks of a newer protocol, which the scripts refuse to read.
    pub newer: Vec<NewerLock>,
}

/// Every lock under `prefix` whose key matches the glob `pattern` that is held or waited for
/// (`histories`: or that keeps a history), with what is known about it (one SCAN, then one
/// read-only script per lock), and the locks of a newer protocol, by name (the other locks are
/// listed all the same). Runs on the calling thread; every Redis command ends by its own
/// timeout.
pub fn list(
    connector: &Connector,
    prefix: &str,
    pattern: &str,
    histories: bool,
) -> Result<Found, BackendError> {
    // Every primary's keys (a Redis Cluster's locks are spread over its shards).
    let mut keys: Vec<String> = Vec::new();
    let mut kept: Vec<String> = Vec::new();
    for primary in connector.primaries()? {
        keys.extend(
            primary
                .node()
                .scan(&format!("{}*", LockName::scan_pattern(prefix, pattern)))?
                .iter()
                .filter_map(|redis_key| {
                    let (key, rest) = LockName::split(prefix, redis_key)?;
                    if histories && rest == ":history" {
                        kept.push(key.to_owned());
                        return Some(key.to_owned());
                    }
                    // A lock shows in its mutex key, its slots or its line (the fence counter
                    // stays after the lock is gone, and says nothing about it); a lock in a
                    // newer layout by its protocol marker, and its inspection then refuses it.
                    matches!(rest, "" | ":slots" | ":queue" | ":protocol").then(|| key.to_owned())
                }),
        );
    }
    keys.sort();
    keys.dedup();
    let cluster = connector.is_cluster();
    let mut node = connector.node();
    let mut found = Found::default();
    for key in keys {
        let name = LockName::new(prefix, &key);
        let deadline = Instant::now() + connector.timeout();
        if cluster {
            node = connector.for_key(name.lock_key()).node();
        }
        let keys = name.keys();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let state = node
            .eval(&INSPECT, &keys, &[], deadline)
            .and_then(|reply| decode_state(&reply));
        match state {
            Ok(state) if state.is_free() && state.waiters.is_empty() && !kept.contains(&key) => {}
            Ok(state) => found.locks.push((name, state)),
            // A key of another type that happens to match: not a lock.
            Err(e) if e.is_wrong_type() => {}
            // Not ours to read: named for what it is, and the listing goes on.
            Err(BackendError::NewerProtocol(newer)) => found.newer.push(NewerLock {
                name,
                protocol: newer.found,
            }),
            Err(e) => return Err(e),
        }
    }
    Ok(found)
}

pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub fn unexpected(script: &str, reply: &[Reply]) -> BackendError {
    BackendError::Reply(format!("{script} script returned {reply:?}"))
}

fn count(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

/// Decode an acquire reply (see `lua/acquire.lua`).
pub fn decode_answer(
    reply: &[Reply],
    anchor: Moment,
    claim: Duration,
) -> Result<Answer, BackendError> {
    match reply {
        [Reply::Int(1), Reply::Int(fence)] => Ok(Answer::Granted {
            validity: Validity { anchor, ttl: claim },
            fence: fence.unsigned_abs(),
            slot: None,
            token: None,
        }),
        [Reply::Int(1), Reply::Int(fence), Reply::Int(slot)] => Ok(Answer::Granted {
            validity: Validity { anchor, ttl: claim },
            fence: fence.unsigned_abs(),
            slot: u32::try_from(*slot).ok(),
            token: None,
        }),
        // Busy (0) and queued (2) say who holds it alike; a queued waiter's place follows.
        [
            Reply::Int(code @ (0 | 2)),
            Reply::Int(pttl),
            Reply::Int(now),
            Reply::Array(meta),
            Reply::Int(holders),
            Reply::Int(limit),
            Reply::Int(waiting),
            place @ ..,
        ] => {
            let holders = Holders {
                first: held_by(None, *pttl, *now, meta),
                count: count(*holders),
                // 0 with holders: a shared lock's readers.
                limit: if *limit == 0 && *holders > 0 {
                    0
                } else {
                    count(*limit).max(1)
                },
                waiting: count(*waiting),
            };
            match (code, place) {
                (0, []) => Ok(Answer::Busy(Holders {
                    count: holders.count.max(1),
                    ..holders
                })),
                (2, [Reply::Int(position)]) => Ok(Answer::Queued {
                    holders,
                    position: count(*position),
                    refresh_in: REFRESH,
                }),
                _ => Err(unexpected("acquire", reply)),
            }
        }
        [Reply::Int(5)] => Ok(Answer::NoPlace),
        [Reply::Int(3), Reply::Array(meta)] => {
            Ok(Answer::Superseded(Holder::from_fields(&fields(meta)).0))
        }
        [
            Reply::Int(4),
            use_ @ Reply::Bytes(_),
            Reply::Int(limit),
            Reply::Int(holders),
            Reply::Array(meta),
        ] => Ok(Answer::Conflict(Conflict {
            use_: match use_.as_text().as_deref() {
                Some("mutex") => Use::Mutex,
                Some("semaphore") => Use::Semaphore,
                Some("shared") => Use::Shared,
                _ => Use::Queue,
            },
            // 0: readers of a shared lock (held, or first in line).
            limit: count(*limit),
            count: count(*holders),
            holder: Holder::from_fields(&fields(meta)).0,
        })),
        other => Err(unexpected("acquire", other)),
    }
}

/// Decode an inspect reply (see `lua/inspect.lua`).
pub fn decode_state(reply: &[Reply]) -> Result<LockState, BackendError> {
    let [
        Reply::Int(now),
        Reply::Array(mutex),
        Reply::Array(slots),
        Reply::Int(limit),
        Reply::Array(line),
        Reply::Int(_last),
    ] = reply
    else {
        return Err(unexpected("inspect", reply));
    };
    let mut state = LockState {
        now_ms: u64::try_from(*now).unwrap_or(0),
        ..LockState::default()
    };
    if let [
        token @ Reply::Bytes(_),
        Reply::Int(pttl),
        Reply::Array(meta),
    ] = mutex.as_slice()
    {
        state
            .holders
            .push(held_by(token.as_text(), *pttl, *now, meta));
        state.limit = 1;
    }
    for slot in slots.chunks(3) {
        if let [
            token @ Reply::Bytes(_),
            Reply::Int(left),
            Reply::Array(meta),
        ] = slot
        {
            state
                .holders
                .push(held_by(token.as_text(), *left, *now, meta));
        }
    }
    if state.limit == 0 && !slots.is_empty() {
        state.limit = count(*limit);
    }
    for entry in line.chunks(3) {
        if let [Reply::Bytes(_), _, Reply::Array(meta)] = entry {
            let fields = fields(meta);
            let get = |name: &str| {
                fields
                    .iter()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, v)| v.parse::<u64>().ok())
            };
            let waited = get("since").and_then(|since| {
                let now = u64::try_from(*now).ok()?;
                Some(Duration::from_millis(now.saturating_sub(since)))
            });
            state.waiters.push(Waiting {
                holder: Holder::from_fields(&fields).0,
                waited,
                limit: get("limit")
                    .and_then(|l| u32::try_from(l).ok())
                    .unwrap_or(1),
            });
        }
    }
    Ok(state)
}

/// A flat field/value array as pairs of strings.
fn fields(meta: &[Reply]) -> Vec<(String, String)> {
    meta.chunks(2)
        .filter_map(|pair| match pair {
            [name, value] => Some((name.as_text()?, value.as_text()?)),
            _ => None,
        })
        .collect()
}

/// Decode the holder part of a reply: its remaining time, and its metadata.
fn held_by(token: Option<String>, pttl: i64, now_ms: i64, meta: &[Reply]) -> HeldBy {
    let ttl = match pttl {
        -1 => HolderTtl::Never,
        // -2: free (a lock handed on, or about to be): "about to change".
        n if n < 0 => HolderTtl::Expires(Duration::ZERO),
        n => HolderTtl::Expires(Duration::from_millis(n.unsigned_abs())),
    };
    let fields = fields(meta);
    let fence = fields
        .iter()
        .find(|(name, _)| name == "fence")
        .and_then(|(_, v)| v.parse().ok());
    let (holder, acquired_at) = Holder::from_fields(&fields);
    let now = u64::try_from(now_ms).ok();
    let held_for = acquired_at.and_then(|at| Some(Duration::from_millis(now?.saturating_sub(at))));
    let number = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.parse::<u64>().ok())
    };
    let ms = |name: &str| number(name).filter(|ms| *ms > 0).map(Duration::from_millis);
    let cooldown = number("ended_at").map(|ended| CoolDown {
        ended_ago: Duration::from_millis(now.unwrap_or(ended).saturating_sub(ended)),
        min_interval: ms("min_interval_ms"),
        cooldown: ms("cooldown_ms"),
    });
    HeldBy {
        ttl,
        holder,
        held_for,
        token,
        fence,
        slot: number("slot").and_then(|n| u32::try_from(n).ok()),
        cooldown,
        warn_after: ms("warn_after_ms"),
    }
}

pub fn ownership(reply: &[Reply]) -> Result<Ownership, BackendError> {
    match reply {
        [Reply::Int(1)] => Ok(Ownership::Held),
        [Reply::Int(0)] => Ok(Ownership::NotHeld),
        other => Err(unexpected("release", other)),
    }
}

#[cfg(test)]
mod script_tests {
    use super::*;

    #[test]
    fn every_script_has_the_hash_redis_gives_it() {
        for script in [&ACQUIRE, &RENEW, &RELEASE, &INSPECT, &HOLDS] {
            assert_eq!(
                script.hash(),
                redis::Script::new(script.source()).get_hash()
            );
        }
    }
}
