//! The one-server lock: a mutex with the protocol of redis-py's Lock, redsync and node-redlock
//! on one Redis (so they exclude and are excluded by distlock on the same key), plus distlock's
//! holder metadata, a fair line of waiters with direct hand-off, counting semaphores, and
//! fencing tokens beside it. The protocol lives in `lua/*.lua`, each script being
//! `lua/protocol.lua` (the key-layout version check), `lua/common.lua` and its own body; this
//! file only encodes requests and decodes replies.
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

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use super::{
    Answer, Conflict, CoolDown, Extended, HeldBy, HolderTtl, Holders, Lock, LockName, LockState,
    Ownership, Queueing, Request, Residue, Token, Use, Validity, Waiting,
};
use crate::backend::{
    BackendError, Budget, Connector, Notice, Reply, Script, Subscription, Unreplicated, Worker,
};
use crate::clock::Moment;
use crate::lock::holder::Holder;

macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("lua/protocol.lua"),
                include_str!("lua/history.lua"),
                include_str!("lua/common.lua"),
                include_str!(concat!("lua/", $file))
            ))
        })
    };
    // Without the protocol check: a script that touches only the keys of a lock it holds (by
    // token compare), which a newer layout cannot give it, and that must go through a Cluster
    // slot migration, where reading a key that does not exist fails (see `lua/common.lua`).
    ($file:literal, holder only) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("lua/history.lua"),
                include_str!("lua/common.lua"),
                include_str!(concat!("lua/", $file))
            ))
        })
    };
}

pub(super) static ACQUIRE: LazyLock<Script> = script!("acquire.lua");
pub(super) static RENEW: LazyLock<Script> = script!("renew.lua", holder only);
pub(super) static RELEASE: LazyLock<Script> = script!("release.lua");
pub(super) static INSPECT: LazyLock<Script> = script!("inspect.lua");
pub(super) static HOLDS: LazyLock<Script> = script!("holds.lua");

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

/// What a grant holds, which decides the keys its renewals declare (see `lua/renew.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// The mutex: its key and its owner hash.
    Mutex,
    /// A semaphore slot: the slots and holders of the semaphore.
    Slot,
}

impl Held {
    /// The keys a renewal of this kind declares (and touches).
    fn keys(self, name: &LockName) -> Vec<String> {
        let [lock, owner, _, _, _, _, slots, holders, ..] = name.keys();
        match self {
            Held::Mutex => vec![lock, owner],
            Held::Slot => vec![slots, holders],
        }
    }
}

/// A lock on one Redis server.
pub struct SingleNode {
    name: LockName,
    worker: Worker,
    /// What our last grant holds (`None` before one: `renew --token` tries both kinds).
    held: Option<Held>,
    /// An acquire request whose reply was lost on a connection that broke: if it was applied,
    /// only a release on a live connection can undo it (a request whose reply timed out keeps
    /// its connection, and a release written behind it covers it).
    uncovered: bool,
    /// An attempt took a place in line: giving up must leave it.
    joined: bool,
}

impl SingleNode {
    /// The lock `name` on the server behind `connector` (connects on first use; on a Redis
    /// Cluster, to the owner of the lock's slot).
    pub fn new(name: LockName, connector: Connector) -> Self {
        let worker = Worker::new(&connector.for_key(name.lock_key()));
        SingleNode {
            name,
            worker,
            held: None,
            uncovered: false,
            joined: false,
        }
    }

    /// Run `script` with every key of the lock (every one of ours is idempotent for the same
    /// arguments, so it may be sent again when its reply is lost).
    fn eval(
        &mut self,
        script: &'static LazyLock<Script>,
        args: Vec<Vec<u8>>,
        budget: &Budget,
    ) -> Result<Vec<Reply>, BackendError> {
        self.eval_keys(script, self.name.keys().to_vec(), args, budget)
    }

    /// As [`SingleNode::eval`], declaring only `keys`.
    fn eval_keys(
        &mut self,
        script: &'static LazyLock<Script>,
        keys: Vec<String>,
        args: Vec<Vec<u8>>,
        budget: &Budget,
    ) -> Result<Vec<Reply>, BackendError> {
        // Behind Sentinel, a write on a connection opened earlier asks the sentinels first
        // whether a failover happened since: the old primary accepts writes for a while after
        // it (and loses them); a lock taken there excludes nobody, a renewal there keeps the
        // command alive under a lock the new primary may not have, and a release there leaves
        // the lock on the new primary until it expires.
        let recheck = [&ACQUIRE, &RENEW, &RELEASE]
            .iter()
            .any(|write| std::ptr::eq(script, *write));
        self.worker.call(budget, true, move |node, deadline| {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            if recheck {
                node.recheck(deadline);
            }
            node.eval(script, &keys, &args, deadline)
        })
    }

    /// `--replicas`: wait until `wanted` replicas have every write made on this connection (the
    /// grant or extension just made), for at most `within`. (After a reply was lost and the
    /// request sent again on a new connection, the second one may have nothing left to write,
    /// and then confirms nothing about the first: a narrow window, like the rest of what
    /// asynchronous replication leaves open.)
    fn confirm_replicated(
        &mut self,
        wanted: u32,
        within: Duration,
        budget: &Budget,
    ) -> Result<(), BackendError> {
        let wait = Budget {
            deadline: Instant::now() + within + self.worker.connector().timeout(),
            cancel: budget.cancel.clone(),
        };
        let acked = self.worker.call(&wait, false, move |node, deadline| {
            let acked = node.wait_replicas(wanted, within, deadline)?;
            // Too few: say whether replicas are still syncing (right after a full resync,
            // which acknowledges nothing until it is done).
            let syncing = if acked < wanted {
                node.syncing_replicas(deadline)
            } else {
                Vec::new()
            };
            Ok((acked, syncing))
        });
        match acked {
            Ok((acked, _)) if acked >= wanted => Ok(()),
            Ok((acked, syncing)) => Err(BackendError::NotReplicated(Box::new(Unreplicated {
                acked,
                wanted,
                within,
                detail: None,
                syncing,
            }))),
            Err(BackendError::Interrupted { .. }) => Err(BackendError::Interrupted { sent: true }),
            Err(e) => Err(BackendError::NotReplicated(Box::new(Unreplicated {
                acked: 0,
                wanted,
                within,
                detail: Some(e.to_string()),
                syncing: Vec::new(),
            }))),
        }
    }

    /// Release `token` on a live connection (unless `live` is false), and also behind every
    /// request whose reply was lost, so that if one of them is applied later, the release
    /// follows it at once (in that order: a queued-behind release may run first and leave
    /// nothing for the live one to find). Returns whether every such request has a release
    /// behind it, and what the live release found.
    fn release_everywhere(
        &mut self,
        token: &Token,
        (live, succeeded): (bool, bool),
        budget: &Budget,
    ) -> Result<(bool, Option<Ownership>), BackendError> {
        let keys = self.name.keys();
        let args = release_args(token, succeeded);
        let again = args.clone();
        let (reply, behind) = self.worker.call(budget, true, move |node, deadline| {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let reply = live.then(|| {
                node.recheck(deadline);
                node.eval(&RELEASE, &keys, &args, deadline)
            });
            let (carried, of) = node.send_behind_lost_replies(&RELEASE, &keys, &args);
            Ok((reply, carried == of))
        })?;
        let behind = behind && !self.worker.left_requests_behind();
        match reply {
            None => Ok((behind, None)),
            // Releasing twice is harmless: the second finds nothing and changes nothing. A lost
            // first reply followed by "not ours" most likely means the first one did it.
            Some(Err(e)) if e.maybe_applied() && !budget.remaining().is_zero() => {
                let again = self.eval(&RELEASE, again, budget)?;
                Ok((
                    behind,
                    Some(match ownership(&again)? {
                        Ownership::NotHeld => Ownership::Held,
                        held => held,
                    }),
                ))
            }
            Some(other) => Ok((behind, Some(ownership(&other?)?))),
        }
    }
}

impl Lock for SingleNode {
    fn name(&self) -> &LockName {
        &self.name
    }

    fn describe(&self) -> String {
        self.worker.connector().describe()
    }

    fn queues(&self) -> bool {
        true
    }

    fn try_acquire(
        &mut self,
        request: &Request<'_>,
        budget: &Budget,
    ) -> Result<Answer, BackendError> {
        let args = acquire_args(request, request.queueing);
        if request.queueing != Queueing::Try {
            self.joined = true;
        }
        let mut anchor = Moment::now();
        let first = self.eval(&ACQUIRE, args.clone(), budget);
        if let Err(BackendError::Lost(_)) = &first {
            self.uncovered = true;
        }
        let reply = match first {
            // The reply was lost: the script may have run. It is idempotent for our token (it
            // never shortens our expiry), so asking again on a fresh connection tells us where
            // we stand, if there is time for it. If this fails too, the caller still knows
            // (maybe_applied) that it may hold the lock.
            Err(e)
                if e.maybe_applied()
                    && !matches!(e, BackendError::Interrupted { .. })
                    && budget.remaining() > Duration::from_millis(1) =>
            {
                anchor = Moment::now();
                let again = self.eval(&ACQUIRE, args, budget);
                if let Err(BackendError::Lost(_)) = &again {
                    self.uncovered = true;
                }
                again?
            }
            other => other?,
        };
        let answer = decode_answer(&reply, anchor, request.claim)?;
        if let Answer::Granted { .. } = answer {
            self.held = Some(if request.limit > 1 {
                Held::Slot
            } else {
                Held::Mutex
            });
        }
        if let (Answer::Granted { .. }, Some((wanted, within))) =
            (&answer, self.worker.connector().replicas())
        {
            if let Err(e) = self.confirm_replicated(wanted, within, budget) {
                // A grant the replicas do not have could be handed to someone else by a
                // failover: give it back rather than run on it.
                let timeout = self.worker.connector().timeout();
                let _ = self.release(request.token, &Budget::within(timeout));
                return Err(e);
            }
        }
        Ok(answer)
    }

    fn give_up(&mut self, token: &Token, claim: Duration, budget: &Budget) -> Residue {
        // A place in line, or a request lost on a broken connection, needs a live release. Every
        // other lost request kept its connection, and a release written behind each is enough
        // (and needs no answer: Redis may be stopped).
        let live = self.joined || self.uncovered;
        let lingers = if self.joined {
            claim.max(PLACE).max(TAKEUP)
        } else {
            claim
        };
        match self.release_everywhere(token, (live, false), budget) {
            Ok((true, Some(_))) => Residue::Nothing,
            Ok((true, None)) if !live => Residue::Nothing,
            _ => Residue::MayRemain(lingers),
        }
    }

    fn inspect(&mut self, budget: &Budget) -> Result<LockState, BackendError> {
        let reply = self.eval(&INSPECT, Vec::new(), budget)?;
        decode_state(&reply)
    }

    fn holds(&mut self, token: &Token, budget: &Budget) -> Result<Option<u64>, BackendError> {
        let reply = self.eval(&HOLDS, vec![token.as_str().into()], budget)?;
        match reply.as_slice() {
            [Reply::Int(1), Reply::Int(fence)] => Ok(Some(fence.unsigned_abs())),
            [Reply::Int(0)] => Ok(None),
            other => Err(unexpected("holds", other)),
        }
    }

    fn extend(
        &mut self,
        token: &Token,
        ttl: Duration,
        budget: &Budget,
    ) -> Result<Extended, BackendError> {
        let mut anchor = Moment::now();
        let args = vec![
            token.as_str().as_bytes().to_vec(),
            millis(ttl).to_string().into_bytes(),
        ];
        // Declaring only what it touches, a renewal goes through a Cluster slot migration.
        // Without a grant of ours to tell which it holds (`renew --token`), the mutex is
        // tried first, then the slot.
        let kind = self.held.unwrap_or(Held::Mutex);
        let mut reply = self.eval_keys(&RENEW, kind.keys(&self.name), args.clone(), budget)?;
        if self.held.is_none() && reply.as_slice() == [Reply::Int(0)] {
            anchor = Moment::now();
            reply = self.eval_keys(&RENEW, Held::Slot.keys(&self.name), args, budget)?;
        }
        match reply.as_slice() {
            [Reply::Int(1), Reply::Int(applied), replacer @ ..] => {
                // --replicas: an extension the replicas do not have does not count (the kill
                // deadline stays where the last acknowledged one put it).
                if let Some((wanted, within)) = self.worker.connector().replicas() {
                    self.confirm_replicated(wanted, within, budget)?;
                }
                let validity = Validity {
                    anchor,
                    ttl: Duration::from_millis(applied.unsigned_abs()),
                };
                Ok(match replacer {
                    [] => Extended::Held(validity),
                    [json, ..] => Extended::Replaced(
                        validity,
                        json.as_text().and_then(|j| Holder::from_json(&j)),
                    ),
                })
            }
            [Reply::Int(0)] => Ok(Extended::NotHeld),
            other => Err(unexpected("renew", other)),
        }
    }

    fn release_after(
        &mut self,
        token: &Token,
        succeeded: bool,
        budget: &Budget,
    ) -> Result<Ownership, BackendError> {
        match self.release_everywhere(token, (true, succeeded), budget)? {
            (_, Some(found)) => Ok(found),
            (_, None) => Ok(Ownership::NotHeld),
        }
    }

    fn fresh(&self, timeout: Duration) -> Box<dyn Lock> {
        Box::new(SingleNode {
            name: self.name.clone(),
            worker: Worker::inline(&self.worker.connector().with_timeout(timeout)),
            held: self.held,
            uncovered: false,
            joined: false,
        })
    }

    fn subscribe(
        &self,
        token: &Token,
        notify: Box<dyn Fn(Notice) + Send>,
        budget: &Budget,
    ) -> Result<Subscription, BackendError> {
        crate::backend::subscribe(
            self.worker.connector(),
            self.name.wake_channel(token.as_str()),
            notify,
            budget,
        )
    }
}

/// The arguments of `lua/acquire.lua` for `request`, taking a place in line as `queueing` says.
pub(super) fn acquire_args(request: &Request<'_>, queueing: Queueing) -> Vec<Vec<u8>> {
    let mode: &[u8] = match queueing {
        Queueing::Try => b"try",
        Queueing::Join => b"join",
        Queueing::Supersede => b"supersede",
        Queueing::Replace => b"replace",
    };
    let mut args: Vec<Vec<u8>> = vec![
        request.token.as_str().into(),
        millis(request.claim).to_string().into_bytes(),
        request.limit.max(1).to_string().into_bytes(),
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
    if request.polls {
        args.push(b"polls".to_vec());
        args.push(b"1".to_vec());
    }
    for (name, value) in request.holder.to_fields() {
        args.push(name.as_bytes().to_vec());
        args.push(value.into_bytes());
    }
    args.extend(crate::history::acquire_fields());
    args
}

/// The arguments of `lua/release.lua`: the token, and whether the work succeeded (`1`: a mutex
/// taken with an interval then cools down).
pub(super) fn release_args(token: &Token, succeeded: bool) -> Vec<Vec<u8>> {
    let mut args = vec![
        token.as_str().as_bytes().to_vec(),
        if succeeded {
            b"1".to_vec()
        } else {
            b"0".to_vec()
        },
    ];
    args.extend(crate::history::release_fields());
    args
}

/// Every lock under `prefix` whose key matches the glob `pattern` that is held or waited for,
/// with what is known about it (one SCAN, then one read-only script per lock). Runs on the
/// calling thread; every Redis command ends by its own timeout.
pub fn list(
    connector: &Connector,
    prefix: &str,
    pattern: &str,
) -> Result<Vec<(LockName, LockState)>, BackendError> {
    // Every primary's keys (a Redis Cluster's locks are spread over its shards).
    let mut keys: Vec<String> = Vec::new();
    for primary in connector.primaries()? {
        keys.extend(
            primary
                .node()
                .scan(&format!("{}*", LockName::scan_pattern(prefix, pattern)))?
                .iter()
                .filter_map(|redis_key| {
                    let (key, rest) = LockName::split(prefix, redis_key)?;
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
    let mut locks = Vec::new();
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
            Ok(state) if state.is_free() && state.waiters.is_empty() => {}
            Ok(state) => locks.push((name, state)),
            // A key of another type that happens to match: not a lock.
            Err(e) if e.is_wrong_type() => {}
            Err(BackendError::NewerProtocol(mut newer)) => {
                newer.key = Some(key);
                return Err(BackendError::NewerProtocol(newer));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(locks)
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn unexpected(script: &str, reply: &[Reply]) -> BackendError {
    BackendError::Reply(format!("{script} script returned {reply:?}"))
}

fn count(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

/// Decode an acquire reply (see `lua/acquire.lua`).
pub(super) fn decode_answer(
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
        [
            Reply::Int(0),
            Reply::Int(pttl),
            Reply::Int(now),
            Reply::Array(meta),
            Reply::Int(holders),
            Reply::Int(limit),
            Reply::Int(waiting),
        ] => Ok(Answer::Busy(Holders {
            first: held_by(None, *pttl, *now, meta),
            count: count(*holders).max(1),
            limit: count(*limit).max(1),
            waiting: count(*waiting),
        })),
        [
            Reply::Int(2),
            Reply::Int(pttl),
            Reply::Int(now),
            Reply::Array(meta),
            Reply::Int(holders),
            Reply::Int(limit),
            Reply::Int(waiting),
            Reply::Int(position),
        ] => Ok(Answer::Queued {
            holders: Holders {
                first: held_by(None, *pttl, *now, meta),
                count: count(*holders),
                limit: count(*limit).max(1),
                waiting: count(*waiting),
            },
            position: count(*position),
            refresh_in: REFRESH,
        }),
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
                _ => Use::Queue,
            },
            limit: count(*limit).max(1),
            count: count(*holders),
            holder: Holder::from_fields(&fields(meta)).0,
        })),
        other => Err(unexpected("acquire", other)),
    }
}

/// Decode an inspect reply (see `lua/inspect.lua`).
pub(super) fn decode_state(reply: &[Reply]) -> Result<LockState, BackendError> {
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
    let mut state = LockState::default();
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
    }
}

pub(super) fn ownership(reply: &[Reply]) -> Result<Ownership, BackendError> {
    match reply {
        [Reply::Int(1)] => Ok(Ownership::Held),
        [Reply::Int(0)] => Ok(Ownership::NotHeld),
        other => Err(unexpected("release", other)),
    }
}
