//! The one-server lock: a mutex with the protocol of redis-py's Lock, redsync and node-redlock
//! on one Redis (so they exclude and are excluded by distlock on the same key), plus distlock's
//! holder metadata, a fair line of waiters with direct hand-off, counting semaphores, and
//! fencing tokens beside it. The protocol (scripts, arguments, replies, the line's timing) is
//! [`super::protocol`]'s; this file drives it on one connection: retries after a lost reply,
//! the releases written behind lost requests, `--replicas`, and the Sentinel re-check before
//! a write.

use std::time::{Duration, Instant};

use super::protocol::{
    ACQUIRE, HOLDS, INSPECT, PLACE, RELEASE, RENEW, TAKEUP, acquire_args, decode_answer,
    decode_state, ownership, release_args, renew_args, unexpected,
};
use super::{
    Answer, Extended, Lock, LockName, LockState, Ownership, Queueing, Request, Residue, Token,
    Turn, Validity,
};
use crate::backend::{
    BackendError, Budget, Connector, Notice, Rang, Reply, Script, Subscription, Unreplicated,
    Worker,
};
use crate::clock::Moment;
use crate::lock::holder::Holder;

/// What a grant holds, which decides the keys its renewals declare (see `lua/renew.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Held {
    /// The mutex: its key and its owner hash.
    Mutex,
    /// A semaphore slot: the slots and holders of the semaphore.
    Slot,
    /// A shared lock's reader: its slot, and the marks that follow the readers' slots (the
    /// mutex key and the protocol marker, see `mark_shared` in `lua/common.lua`).
    Shared,
}

impl Held {
    /// The keys a renewal of this kind declares (and touches).
    pub(super) fn keys(self, name: &LockName) -> Vec<String> {
        let [lock, owner, _, _, _, _, slots, holders, _, protocol, ..] = name.keys();
        match self {
            Held::Mutex => vec![lock, owner],
            Held::Slot => vec![slots, holders],
            Held::Shared => vec![slots, holders, lock, protocol],
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
    /// The longest claim an attempt asked for (a take-up sent behind a wait on the doorbell
    /// asks for more than the claim): what one that lands after we gave up may leave.
    longest: Duration,
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
            longest: Duration::ZERO,
        }
    }

    /// Run `script` with every key of the lock (every one of ours is idempotent for the same
    /// arguments, so it may be sent again when its reply is lost).
    fn eval(
        &mut self,
        script: &'static Script,
        args: Vec<Vec<u8>>,
        budget: &Budget,
    ) -> Result<Vec<Reply>, BackendError> {
        self.eval_keys(script, self.name.keys().to_vec(), args, budget)
    }

    /// As [`SingleNode::eval`], declaring only `keys`.
    fn eval_keys(
        &mut self,
        script: &'static Script,
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
        let renewal = std::ptr::eq(script, &RENEW);
        self.worker.call(budget, true, move |node, deadline| {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            if recheck {
                node.recheck(deadline);
            }
            let reply = node.eval(script, &keys, &args, deadline)?;
            // A renewal whose primary no sentinel confirmed in time is sent all the same (if
            // that server still is the primary, its lock must not lapse while the sentinels
            // are slow), but it does not count: after a failover the old primary accepts it,
            // and a kill deadline anchored there would outlive the lock on the new primary.
            // The deadline stays where the last confirmed renewal put it, and the renewer
            // tries again soon.
            if renewal && node.primary_unconfirmed() {
                return Err(BackendError::Lost(
                    "no sentinel answered in time whether the primary is still the one named \
                     last: the renewal sent there does not count"
                        .into(),
                ));
            }
            Ok(reply)
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

    /// What an attempt's answer means here: a grant is what this connection holds from now on
    /// and, with `--replicas`, only counts once the replicas have it.
    fn granted(
        &mut self,
        answer: Answer,
        request: &Request<'_>,
        budget: &Budget,
    ) -> Result<Answer, BackendError> {
        if let Answer::Granted { .. } = answer {
            self.held = Some(match request.limit {
                0 => Held::Shared,
                1 => Held::Mutex,
                _ => Held::Slot,
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

    /// Wait on our doorbell with the take-up behind it (see [`Lock::await_turn`]), and decode.
    fn ring(
        &mut self,
        request: &Request<'_>,
        block: Duration,
        behind: bool,
        budget: &Budget,
    ) -> Result<(Rang, Moment), BackendError> {
        let keys = self.name.keys();
        let args = acquire_args(request, Queueing::Refresh);
        let bell = self.name.wake_channel(request.token.as_str());
        let cancel = budget.cancel.clone();
        let anchor = Moment::now();
        let rang = self.worker.call_blocking(budget, move |node, deadline| {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            // Behind Sentinel, as before every acquire (see eval_keys): a wait is no hurry.
            node.recheck(deadline);
            let then = behind.then_some((&ACQUIRE, keys.as_slice(), args.as_slice()));
            node.ring(&bell, block, then, cancel.as_ref(), deadline)
        });
        if let Err(BackendError::Lost(_)) = &rang {
            self.uncovered = true;
        }
        Ok((rang?, anchor))
    }
}

/// The doorbell's answers that mean "ask again where the lock is now" (a Cluster slot on the
/// move, a failover), not "no doorbell here".
fn moving(e: &BackendError) -> bool {
    matches!(e, BackendError::Server { code, .. } if matches!(
        code.as_str(),
        "MOVED" | "ASK" | "TRYAGAIN" | "UNBLOCKED" | "READONLY" | "MASTERDOWN" | "CLUSTERDOWN" | "LOADING"
    ))
}

impl Lock for SingleNode {
    fn name(&self) -> &LockName {
        &self.name
    }

    fn describe(&self) -> String {
        self.worker.connector().describe()
    }

    fn deployment(&self) -> String {
        self.worker.connector().display().to_owned()
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
        self.granted(answer, request, budget)
    }

    fn has_doorbell(&self) -> bool {
        true
    }

    fn await_turn(
        &mut self,
        request: &Request<'_>,
        block: Duration,
        budget: &Budget,
    ) -> Result<Turn, BackendError> {
        // The take-up rides behind the wait, and may run as late as `block` after the send
        // time that anchors its validity: it asks for the claim plus `block`. Only under the
        // TTL (a claim never exceeds it), and only where queueing it costs the server no
        // memory: a server that lends idle clients a shared read buffer gives a client with a
        // request queued behind its wait a buffer of its own for the whole wait, about 20 KB
        // against about 3 KB (benches/README.md, issue 26). Otherwise it is sent after the
        // wait, with the claim: one round trip more on a hand-off. Until the server has said
        // which it is (it is asked in the same write as the first wait on a connection), the
        // take-up rides behind: a first wait costs such a server 20 KB for at most one refresh
        // interval, where asking first would cost every contended acquisition a round trip.
        let shares = self
            .worker
            .call(budget, true, |node, _| Ok(node.shares_read_buffers()))?
            .unwrap_or(false);
        let plain = Request {
            queueing: Queueing::Refresh,
            doorbell: true,
            ..request.clone()
        };
        let longer = Request {
            claim: plain.claim + block,
            ..plain.clone()
        };
        let behind = longer.claim <= plain.ttl && !shares;
        if behind {
            self.longest = self.longest.max(longer.claim);
        }
        let (rang, anchor) =
            self.ring(if behind { &longer } else { &plain }, block, behind, budget)?;
        let Rang { bell, script } = rang;
        let rang = matches!(bell, Ok(true));
        let waited = match &bell {
            Ok(_) => true,
            Err(e) if moving(e) => false,
            // Refused (an ACL user without +blpop, a proxy without blocking commands): the
            // attempt behind it ran all the same.
            Err(_) => {
                let answer = match script {
                    Some(reply) => decode_answer(&reply?, anchor, longer.claim)?,
                    None => self.try_acquire(&plain, budget)?,
                };
                return Ok(Turn {
                    answer: self.granted(answer, &longer, budget)?,
                    rang,
                    waited: false,
                    refused: true,
                });
            }
        };
        let answer = match script {
            Some(Ok(reply)) if waited => decode_answer(&reply, anchor, longer.claim)?,
            Some(Err(e)) if waited && !moving(&e) => return Err(e),
            // A redirection or a failover answered the wait or the attempt behind it (which then
            // never ran, or ran on a server that is not the lock's any more); attempt where the
            // lock is now, as every attempt does (following MOVED and ASK, waiting out
            // TRYAGAIN).
            Some(_) | None => {
                return Ok(Turn {
                    answer: self.try_acquire(&plain, budget)?,
                    rang,
                    waited,
                    refused: false,
                });
            }
        };
        // Behind Sentinel, a turn that came during the wait may have come from a primary that
        // a failover demoted meanwhile: it counts only if the sentinels still name it.
        let answer = if let Answer::Granted { .. } = answer {
            let moved = self
                .worker
                .call(budget, true, |node, deadline| Ok(node.recheck(deadline)))
                .unwrap_or(false);
            if moved {
                return Ok(Turn {
                    answer: self.try_acquire(&plain, budget)?,
                    rang,
                    waited,
                    refused: false,
                });
            }
            self.granted(answer, &longer, budget)?
        } else {
            answer
        };
        Ok(Turn {
            answer,
            rang,
            waited,
            refused: false,
        })
    }

    fn give_up(&mut self, token: &Token, claim: Duration, budget: &Budget) -> Residue {
        // A place in line, or a request lost on a broken connection, needs a live release. Every
        // other lost request kept its connection, and a release written behind each is enough
        // (and needs no answer: Redis may be stopped).
        let live = self.joined || self.uncovered;
        let claim = claim.max(self.longest);
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
        let args = renew_args(token, ttl, None);
        // Declaring only what it touches, a renewal goes through a Cluster slot migration.
        // Without a grant of ours to tell which it holds (`renew --token`), the mutex is
        // tried first, then the slot, declaring what a reader's renewal touches too (the
        // readers' marks follow a reader's slot; a semaphore's slot has none to touch).
        let kind = self.held.unwrap_or(Held::Mutex);
        let mut reply = self.eval_keys(&RENEW, kind.keys(&self.name), args.clone(), budget)?;
        if self.held.is_none() && reply.as_slice() == [Reply::Int(0)] {
            anchor = Moment::now();
            reply = self.eval_keys(&RENEW, Held::Shared.keys(&self.name), args, budget)?;
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
            longest: Duration::ZERO,
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
