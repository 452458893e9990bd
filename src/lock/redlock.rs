//! Redlock: one lock over N independent Redis primaries, following the algorithm of Redis's
//! distributed-locks page and the reference client's constants, with distlock's safety contract
//! on top. Every node runs the same scripts as [`super::single`]; this file only asks them all
//! and counts.
//!
//! * The same token on every node; the nodes are asked **at once** (a request is written to
//!   each, then each reply is read: about one round trip, without a thread per node while they
//!   answer), each bounded by the per-node timeout, far below the TTL.
//! * The lock is ours only if at least N/2+1 nodes granted it **and** the validity
//!   `claim − elapsed − drift` (drift = 1% of the claim + 2ms) is still positive; otherwise it is
//!   released on **every** node, those whose reply was lost included, before anything else.
//! * Its validity is anchored at the send time of the round that reached a quorum, minus the
//!   drift, so the kill deadlines of `run` end the command before a majority can forget it.
//! * Renewals extend on every node and count only with a quorum; a slow or dead minority costs
//!   its per-node timeout and nothing else.
//! * **Fences.** Each node's fence counter is independent. Every node is proposed the same
//!   floor ([`fence_floor`]), so nodes in step grant the same fence. When they do not, a second
//!   round raises the counter of every granting node below the largest fence granted to it
//!   (before the command starts): any later majority shares a node with this one, so it grants
//!   a larger fence. Fences thus strictly increase across grants while a majority keeps its
//!   data.
//! * **No line.** A strict FIFO across independent nodes would need a consensus that Redlock
//!   does not have: waiters on a Redlock take no place in line, and are woken by every release
//!   (heard from any node: a notify waiter subscribes on every node; a spin waiter polls them
//!   all) or at the holder's expiry; the first to win a majority takes the lock.
//!   `--supersede` needs a line and is refused.
//! * **No semaphore.** A majority keeps two holders of a mutex apart (two majorities share a
//!   node), not L+1 holders of a semaphore of L: on 5 nodes, none losing data, with nodes 3
//!   and 4 down A takes a slot on 0-2; they come back, 0 and 1 go down, B takes one on 2-4; all
//!   up, C takes one on all five; D then finds room on 0, 1, 3 and 4: 4 holders of `--limit 3`
//!   (found by the chaos test). A quorum above N·L/(L+1) would be safe but survive fewer
//!   failures. The configuration refuses `--limit N>1`, and `--supersede`, over a Redlock.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::protocol::{
    ACQUIRE, HOLDS, INSPECT, RELEASE, RENEW, acquire_args, decode_answer, decode_state, millis,
    ownership, release_args,
};
use super::{
    Answer, Answering, Extended, LockName, LockState, NodeFailure, NodeView, Ownership, Queueing,
    Request, Residue, Survey, Token, Validity,
};
use crate::backend::{
    BackendError, Begun, Budget, Connector, NoQuorum, Notice, Reply, Script, Subscription, Worker,
};
use crate::clock::Moment;

/// A lock over independent primaries.
pub struct Redlock {
    name: LockName,
    nodes: Vec<Worker>,
    /// Each node's budget for one request.
    node_timeout: Duration,
    /// Per node: an attempt of ours may hold the lock there (it granted, or its reply was
    /// lost), so giving up must release there.
    touched: Vec<bool>,
    /// Per node: its last request was sent and got no reply in time (a stopped or overloaded
    /// server). A release for it is written behind that request instead of waiting for the
    /// node once more (see [`Redlock::release_all`]).
    stuck: Vec<bool>,
    /// The token attempts use from now on, when it is no longer the request's; and the tokens
    /// retired before it (see [`Redlock::retire`]), which giving up and releasing clear too.
    token: Option<Token>,
    retired: Vec<Token>,
    /// What this run learnt of each node, shared with the handles [`Lock::fresh`] makes.
    ///
    /// [`Lock::fresh`]: super::Lock::fresh
    health: Arc<Mutex<Health>>,
}

/// What a run learns about each node, shared by every handle on the lock (the renewer's
/// included): which answered its last request, and which failed while a majority answered,
/// each reported once per run (a node that stays down is named once, not at every renewal).
#[derive(Debug, Default)]
struct Health {
    /// Per node: it answered the last request it was asked.
    answered: Vec<bool>,
    /// Per node: a failure of it was reported (or waits in `pending` to be).
    reported: Vec<bool>,
    /// Failures not handed out yet (see [`super::Lock::take_failures`]).
    pending: Vec<NodeFailure>,
}

/// The drift allowance for an expiry of `ttl`: clocks run at slightly different rates (the
/// reference client's 1%, plus 2ms).
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The fence proposed to every node of an acquire round: our clock in microseconds, plus a
/// second so that it lies above the nodes' own clocks (each node hands out at least its clock in
/// microseconds). Nodes whose counters are in step (every grant raised them to the same fence)
/// then all grant exactly this number, and the round that would raise the smaller ones is not
/// needed. Correctness does not depend on it: a node whose clock or counter is ahead grants more,
/// and the others are raised to that.
fn fence_floor() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.as_micros())
        .unwrap_or(u64::MAX / 2)
        .saturating_add(1_000_000)
}

/// What one node said, or why it said nothing.
type Said = Result<Vec<Reply>, BackendError>;

impl Redlock {
    /// The lock `name` over the primaries behind `connectors`.
    pub fn new(name: LockName, connectors: &[Connector], node_timeout: Duration) -> Self {
        let health = Health {
            answered: vec![false; connectors.len()],
            reported: vec![false; connectors.len()],
            pending: Vec::new(),
        };
        Redlock::with_health(name, connectors, node_timeout, Arc::new(Mutex::new(health)))
    }

    fn with_health(
        name: LockName,
        connectors: &[Connector],
        node_timeout: Duration,
        health: Arc<Mutex<Health>>,
    ) -> Self {
        Redlock {
            name,
            nodes: connectors.iter().map(Worker::new).collect(),
            node_timeout,
            touched: vec![false; connectors.len()],
            stuck: vec![false; connectors.len()],
            token: None,
            retired: Vec::new(),
            health,
        }
    }

    /// After a failed round, `token`'s release reached not every node (it was queued behind a
    /// request still unanswered, or got no answer itself): it may still land on a node after
    /// our next attempt, and delete what that attempt granted there, under the command of a
    /// run that believes it holds a majority. Such a token is never asked with again: the next
    /// attempts use a fresh one (the holder's token is whichever was granted).
    fn retire(&mut self, token: &Token) -> Result<(), BackendError> {
        let fresh = Token::generate()
            .map_err(|e| BackendError::Connect(format!("cannot draw a new token: {e}")))?;
        self.retired.push(token.clone());
        self.token = Some(fresh);
        self.touched.iter_mut().for_each(|t| *t = false);
        Ok(())
    }

    /// Release every retired token, best effort (each is released on every node, queued
    /// behind an unanswered request where there is one: none is asked with again).
    fn release_retired(&mut self, budget: &Budget) {
        for token in std::mem::take(&mut self.retired) {
            self.release_all(&token, false, budget);
        }
    }

    /// Node `i`'s address, for people (passwords redacted).
    fn address(&self, i: usize) -> String {
        self.nodes
            .get(i)
            .map_or_else(String::new, |w| w.connector().display().to_owned())
    }

    /// Note how each asked node answered a round; when every node was asked and a majority
    /// answered, each node that failed for the first time in the run becomes a failure to
    /// report. (A round without a majority fails, and its error names the nodes itself.)
    fn note(&self, said: &[Option<Said>]) {
        let Ok(mut health) = self.health.lock() else {
            return;
        };
        let nodes = said.len();
        let answered = said.iter().filter(|s| matches!(s, Some(Ok(_)))).count();
        let whole = said.iter().all(Option::is_some) && answered >= self.quorum();
        for (i, said) in said.iter().enumerate() {
            match said {
                Some(Ok(_)) => health.answered[i] = true,
                // A signal cut the wait: that says nothing of the node.
                None | Some(Err(BackendError::Interrupted { .. })) => {}
                Some(Err(e)) => {
                    health.answered[i] = false;
                    if whole && !health.reported[i] {
                        health.reported[i] = true;
                        let failure = NodeFailure {
                            address: self.address(i),
                            error: e.clone(),
                            answered,
                            nodes,
                            needed: self.quorum(),
                        };
                        health.pending.push(failure);
                    }
                }
            }
        }
    }

    /// How many nodes make a majority.
    pub fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// Run `script` with `args` on every node at once, each by its own deadline (the per-node
    /// timeout, cut to the budget's).
    fn ask(&mut self, script: &'static Script, args: &[Vec<u8>], budget: &Budget) -> Vec<Said> {
        let all = vec![true; self.nodes.len()];
        self.ask_some(&all, script, args, budget)
            .into_iter()
            .map(|said| said.unwrap_or_else(|| Err(BackendError::Lost("not asked".into()))))
            .collect()
    }

    /// Run `script` with `args` at once on the nodes that `which` selects (`None` for the
    /// others), each by its own deadline (the per-node timeout, cut to the budget's). Notes
    /// which nodes left a request without a reply.
    fn ask_some(
        &mut self,
        which: &[bool],
        script: &'static Script,
        args: &[Vec<u8>],
        budget: &Budget,
    ) -> Vec<Option<Said>> {
        let node_budget = Budget {
            deadline: budget.deadline.min(Instant::now() + self.node_timeout),
            cancel: budget.cancel.clone(),
        };
        let keys = self.name.keys();
        let begun: Vec<Option<Begun<Vec<Reply>>>> = self
            .nodes
            .iter_mut()
            .zip(which)
            .map(|(worker, &asked)| {
                if !asked {
                    return None;
                }
                let (keys_sent, args_sent) = (keys.clone(), args.to_vec());
                let (keys_read, args_read) = (keys.clone(), args.to_vec());
                Some(worker.begin(
                    &node_budget,
                    move |node, deadline| {
                        let keys: Vec<&str> = keys_sent.iter().map(String::as_str).collect();
                        let args: Vec<&[u8]> = args_sent.iter().map(Vec::as_slice).collect();
                        node.send_eval(script, &keys, &args, deadline)
                    },
                    move |node, sent, deadline| {
                        let keys: Vec<&str> = keys_read.iter().map(String::as_str).collect();
                        let args: Vec<&[u8]> = args_read.iter().map(Vec::as_slice).collect();
                        node.recv_eval(script, &keys, &args, sent, deadline)
                    },
                ))
            })
            .collect();
        let said: Vec<Option<Said>> = begun
            .into_iter()
            .zip(self.nodes.iter_mut())
            .map(|(begun, worker)| begun.map(|begun| worker.end(&node_budget, begun)))
            .collect();
        for (stuck, said) in self.stuck.iter_mut().zip(&said) {
            match said {
                Some(Ok(_)) => *stuck = false,
                Some(Err(e)) if e.is_timeout() && e.maybe_applied() => *stuck = true,
                _ => {}
            }
        }
        self.note(&said);
        said
    }

    /// Release `token` on every node; returns how many nodes answered, how many held it, and
    /// why the others did not answer.
    ///
    /// A node whose last request got no reply in time (stopped, say) is not waited for again:
    /// the release is written behind that request on its connection, so that if the server
    /// ever applies it, the release follows at once (Redis runs one connection's requests in
    /// order). A stopped minority thus costs one per-node timeout per acquire, not one more per
    /// release. Where that cannot be done (no such connection is left), it is asked live.
    fn release_all(&mut self, token: &Token, succeeded: bool, budget: &Budget) -> Released {
        let keys = self.name.keys();
        let args = release_args(token, succeeded);
        let mut live = vec![true; self.nodes.len()];
        for (i, worker) in self.nodes.iter_mut().enumerate() {
            if !self.stuck[i] || worker.left_requests_behind() {
                continue;
            }
            let (keys, args) = (keys.clone(), args.clone());
            // Writes only (each bounded by its own short timeout): no cancel flag needed.
            let carried = worker.call(&Budget::within(self.node_timeout), false, move |node, _| {
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                Ok(node.send_behind_lost_replies(&RELEASE, &keys, &args))
            });
            if let Ok((sent, of)) = carried
                && of > 0
                && sent == of
            {
                live[i] = false;
                self.touched[i] = false;
                self.stuck[i] = false;
            }
        }
        let said = self.ask_some(&live, &RELEASE, &args, budget);
        let mut released = Released {
            answered: 0,
            held: 0,
            errors: Vec::new(),
        };
        for (i, reply) in said.into_iter().enumerate() {
            let Some(reply) = reply else {
                released.errors.push((
                    i,
                    BackendError::Lost(
                        "its last request is still unanswered; the release was queued behind it"
                            .into(),
                    ),
                ));
                continue;
            };
            match reply.and_then(|r| ownership(&r)) {
                Ok(found) => {
                    released.answered += 1;
                    self.touched[i] = false;
                    if found == Ownership::Held {
                        released.held += 1;
                    }
                }
                Err(e) => released.errors.push((i, e)),
            }
        }
        released
    }

    /// Why no majority was reached: `answered` nodes answered, and each of `errors` (by node)
    /// did not.
    fn no_quorum(&self, errors: Vec<(usize, BackendError)>, answered: usize) -> BackendError {
        BackendError::NoQuorum(Box::new(NoQuorum {
            answered,
            nodes: self.nodes.len(),
            needed: self.quorum(),
            failed: errors
                .into_iter()
                .map(|(i, e)| (self.address(i), e))
                .collect(),
        }))
    }
}

/// What a release on every node found.
struct Released {
    /// How many nodes answered.
    answered: usize,
    /// How many of them held the token.
    held: usize,
    /// Why each other node did not answer.
    errors: Vec<(usize, BackendError)>,
}

impl super::Lock for Redlock {
    fn name(&self) -> &LockName {
        &self.name
    }

    fn describe(&self) -> String {
        self.nodes
            .iter()
            .map(|w| w.connector().display().to_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn queues(&self) -> bool {
        false
    }

    fn try_acquire(
        &mut self,
        request: &Request<'_>,
        budget: &Budget,
    ) -> Result<Answer, BackendError> {
        // `--supersede` and `--limit N>1` never get here: the configuration refuses them over a
        // Redlock (see the module docs), before anything is sent.
        let claim = request.claim;
        let token = self.token.clone().unwrap_or_else(|| request.token.clone());
        let request = &Request {
            token: &token,
            ..request.clone()
        };
        let start = Moment::now();
        let mut args = acquire_args(request, Queueing::Try);
        args.push(b"fence_floor".to_vec());
        args.push(fence_floor().to_string().into_bytes());
        let said = self.ask(&ACQUIRE, &args, budget);
        let mut fences: Vec<Option<u64>> = vec![None; self.nodes.len()];
        let mut busy = None;
        let mut conflict = None;
        let mut errors = Vec::new();
        for (i, reply) in said.into_iter().enumerate() {
            match reply.and_then(|r| decode_answer(&r, start, claim)) {
                Ok(Answer::Granted { fence, .. }) => {
                    self.touched[i] = true;
                    fences[i] = Some(fence);
                }
                Ok(Answer::Busy(holders) | Answer::Queued { holders, .. }) => {
                    busy.get_or_insert(holders);
                }
                Ok(Answer::Conflict(c)) => {
                    conflict.get_or_insert(c);
                }
                Ok(Answer::Superseded(_)) => {}
                Err(e) => {
                    self.touched[i] |= e.maybe_applied();
                    errors.push((i, e));
                }
            }
        }
        let quorum = self.quorum();
        let answered = self.nodes.len() - errors.len();
        let granted = fences.iter().flatten().count();
        // Anchored at the send time of the round that granted it: every node's expiry lies at
        // least `claim` after it (less the drift between clocks).
        let validity = Validity {
            anchor: start,
            ttl: claim.saturating_sub(drift(claim)),
        };
        if granted >= quorum && validity.earliest_expiry() > Moment::now() {
            // Every granting node's fence counter must reach the fence handed out before anyone
            // can use it: a later majority shares a node with this one, and must get a larger
            // fence there. Nodes that granted a smaller fence are raised in a second round
            // (none, usually: nodes that saw the same grants agree).
            let fence = fences.iter().flatten().copied().max().unwrap_or(0);
            let behind: Vec<bool> = fences
                .iter()
                .map(|f| f.is_some_and(|f| f < fence))
                .collect();
            let mut level = granted - behind.iter().filter(|b| **b).count();
            if level < granted {
                let args = [
                    request.token.as_str().as_bytes().to_vec(),
                    millis(claim).to_string().into_bytes(),
                    fence.to_string().into_bytes(),
                ];
                level += self
                    .ask_some(&behind, &RENEW, &args, budget)
                    .iter()
                    .filter(|r| {
                        matches!(
                            r.as_ref().map(|r| r.as_deref()),
                            Some(Ok([Reply::Int(1), ..]))
                        )
                    })
                    .count();
            }
            if level >= quorum && validity.earliest_expiry() > Moment::now() {
                return Ok(Answer::Granted {
                    validity,
                    fence,
                    slot: None,
                    token: self.token.clone(),
                });
            }
        }
        // Not ours: give back what some nodes granted (or may have), everywhere, before waiting.
        let release_budget = Budget::within(self.node_timeout);
        let released = self.release_all(request.token, false, &release_budget);
        if !released.errors.is_empty() {
            self.retire(request.token)?;
        }
        if let Some(conflict) = conflict {
            return Ok(Answer::Conflict(conflict));
        }
        // Too few answered to tell whether the lock is busy: that is the answer, whatever the
        // few said (so that nodes that refuse are reported as such, not as a busy lock).
        if answered < quorum {
            return Err(self.no_quorum(errors, answered));
        }
        match busy {
            Some(holders) => Ok(Answer::Busy(holders)),
            None => Err(BackendError::Lost(format!(
                "{granted} of {} Redis nodes granted the lock, but not within its validity (the \
                 {} claim less the drift), or their fences could not be brought level; it was \
                 given back",
                self.nodes.len(),
                crate::text::duration(claim)
            ))),
        }
    }

    fn give_up(&mut self, token: &Token, claim: Duration, budget: &Budget) -> Residue {
        let retired = !self.retired.is_empty();
        self.release_retired(budget);
        let token = self.token.clone().unwrap_or_else(|| token.clone());
        if !self.touched.iter().any(|t| *t) {
            // A retired token's release may still be queued: it expires within its claim.
            return if retired {
                Residue::MayRemain(claim)
            } else {
                Residue::Nothing
            };
        }
        self.release_all(&token, false, budget);
        if self.touched.iter().any(|t| *t) {
            Residue::MayRemain(claim)
        } else {
            Residue::Nothing
        }
    }

    fn inspect(&mut self, budget: &Budget) -> Result<LockState, BackendError> {
        let nodes = self.nodes.len();
        // The operator commands survey the lock instead (a split is an answer there, and
        // `break` releases it); a caller that wants one holder gets an error on a split.
        self.survey(budget)?.agreed.ok_or_else(|| {
            BackendError::Mismatch(format!(
                "the lock is split: no holder has a majority of the {nodes} nodes (after partial \
                 acquires, or a node that lost its data); `distlock status` shows what each node \
                 holds, and the split ends when their locks expire (or `distlock break` \
                 releases them)"
            ))
        })
    }

    fn survey(&mut self, budget: &Budget) -> Result<Survey, BackendError> {
        let said = self.ask(&INSPECT, &[], budget);
        let quorum = self.quorum();
        let mut views = Vec::new();
        let mut errors = Vec::new();
        for (i, (reply, worker)) in said.into_iter().zip(&self.nodes).enumerate() {
            let state = reply.and_then(|r| decode_state(&r)).map_err(|e| {
                let text = e.to_string();
                errors.push((i, e));
                text
            });
            views.push(NodeView {
                address: worker.connector().display().to_owned(),
                state,
            });
        }
        let states: Vec<&LockState> = views.iter().filter_map(|v| v.state.as_ref().ok()).collect();
        if states.len() < quorum {
            let answered = states.len();
            return Err(self.no_quorum(errors, answered));
        }
        // The holder a majority agrees on (by token); free if a majority is free.
        let token_of = |s: &LockState| s.holders.first().and_then(|h| h.token.clone());
        let mut counts: Vec<(Option<String>, usize)> = Vec::new();
        for state in &states {
            let token = token_of(state);
            match counts.iter_mut().find(|(t, _)| *t == token) {
                Some((_, n)) => *n += 1,
                None => counts.push((token, 1)),
            }
        }
        let agreed = counts
            .iter()
            .find(|(_, n)| *n >= quorum)
            .and_then(|(token, _)| states.iter().find(|s| token_of(s) == *token))
            .map(|s| {
                // Each node stores the fence it granted; the holder was given the largest of a
                // quorum's (see the module docs). Show that one, as the holder sees it.
                let mut agreed = (*s).clone();
                for held in &mut agreed.holders {
                    held.fence = states
                        .iter()
                        .flat_map(|s| &s.holders)
                        .filter(|h| h.token == held.token)
                        .filter_map(|h| h.fence)
                        .max();
                }
                agreed
            });
        Ok(Survey {
            agreed,
            nodes: views,
        })
    }

    fn holds(&mut self, token: &Token, budget: &Budget) -> Result<Option<u64>, BackendError> {
        let said = self.ask(&HOLDS, &[token.as_str().into()], budget);
        let mut fences = Vec::new();
        let mut answered = 0;
        let mut errors = Vec::new();
        for (i, reply) in said.into_iter().enumerate() {
            match reply {
                Ok(r) => {
                    answered += 1;
                    if let [Reply::Int(1), Reply::Int(fence)] = r.as_slice() {
                        fences.push(fence.unsigned_abs());
                    }
                }
                Err(e) => errors.push((i, e)),
            }
        }
        if fences.len() >= self.quorum() {
            return Ok(fences.into_iter().max());
        }
        if answered >= self.quorum() {
            return Ok(None);
        }
        Err(self.no_quorum(errors, answered))
    }

    fn extend(
        &mut self,
        token: &Token,
        ttl: Duration,
        budget: &Budget,
    ) -> Result<Extended, BackendError> {
        let anchor = Moment::now();
        let args = [
            token.as_str().as_bytes().to_vec(),
            millis(ttl).to_string().into_bytes(),
        ];
        let said = self.ask(&RENEW, &args, budget);
        let mut applied = Vec::new();
        let mut not_held = 0;
        let mut errors = Vec::new();
        for (i, reply) in said.into_iter().enumerate() {
            match reply.as_deref() {
                Ok([Reply::Int(1), Reply::Int(ms), ..]) => {
                    applied.push(Duration::from_millis(ms.unsigned_abs()))
                }
                Ok([Reply::Int(0)]) => not_held += 1,
                Ok(other) => errors.push((
                    i,
                    BackendError::Reply(format!("renew script returned {other:?}")),
                )),
                Err(e) => errors.push((i, e.clone())),
            }
        }
        let quorum = self.quorum();
        if applied.len() >= quorum {
            let ttl = applied.into_iter().min().unwrap_or(ttl);
            return Ok(Extended::Held(Validity {
                anchor,
                ttl: ttl.saturating_sub(drift(ttl)),
            }));
        }
        // More nodes without it than a Redlock can lose: no quorum can hold it any more.
        if not_held > self.nodes.len() - quorum {
            return Ok(Extended::NotHeld);
        }
        let answered = applied.len() + not_held;
        // A quorum answered, but too few of them still hold it (some lost it, e.g. nodes that
        // were down when it was acquired): say so, rather than "only 3 of 5 answered; a Redlock
        // needs 3", which the chaos test's lost locks printed.
        if answered >= quorum {
            return Err(BackendError::Lost(format!(
                "{} of {} Redis nodes still hold the lock, {not_held} do not and {} did not \
                 answer; a Redlock needs {quorum}",
                applied.len(),
                self.nodes.len(),
                errors.len()
            )));
        }
        Err(self.no_quorum(errors, answered))
    }

    fn release_after(
        &mut self,
        token: &Token,
        succeeded: bool,
        budget: &Budget,
    ) -> Result<Ownership, BackendError> {
        let released = self.release_all(token, succeeded, budget);
        // A minority claim of a token retired while we waited, whose acquire landed late.
        self.release_retired(budget);
        // Not held only when a quorum says so; held as soon as any node held it (a majority of
        // holders, or too few answers to rule it out).
        if released.answered - released.held >= self.quorum() {
            return Ok(Ownership::NotHeld);
        }
        if released.held > 0 {
            return Ok(Ownership::Held);
        }
        Err(self.no_quorum(released.errors, released.answered))
    }

    fn release_anywhere(&mut self, token: &Token, budget: &Budget) -> Result<usize, BackendError> {
        let released = self.release_all(token, false, budget);
        // Nowhere only when a majority answered (the others may hold it).
        if released.held == 0 && released.answered < self.quorum() {
            return Err(self.no_quorum(released.errors, released.answered));
        }
        Ok(released.held)
    }

    fn fresh(&self, timeout: Duration) -> Box<dyn super::Lock> {
        let connectors: Vec<Connector> = self
            .nodes
            .iter()
            .map(|w| w.connector().with_timeout(timeout))
            .collect();
        Box::new(Redlock::with_health(
            self.name.clone(),
            &connectors,
            self.node_timeout.min(timeout),
            Arc::clone(&self.health),
        ))
    }

    fn take_failures(&mut self) -> Vec<NodeFailure> {
        self.health
            .lock()
            .map(|mut health| std::mem::take(&mut health.pending))
            .unwrap_or_default()
    }

    fn answering(&self) -> Option<Answering> {
        let health = self.health.lock().ok()?;
        let (answered, silent): (Vec<usize>, Vec<usize>) =
            (0..self.nodes.len()).partition(|&i| health.answered.get(i) == Some(&true));
        Some(Answering {
            answered: answered.into_iter().map(|i| self.address(i)).collect(),
            silent: silent.into_iter().map(|i| self.address(i)).collect(),
            needed: self.quorum(),
        })
    }

    fn subscribe(
        &self,
        _token: &Token,
        notify: Box<dyn Fn(Notice) + Send>,
        budget: &Budget,
    ) -> Result<Subscription, BackendError> {
        // A release runs on every node, and each node that held the token publishes: hear them
        // all, so that a release is heard whichever nodes it reaches (others may be stopped).
        // Subscribed once a majority is: it shares a node with the holder's majority, so no
        // release is missed while those nodes are up. The others join when they can.
        let notify = Mutex::new(notify);
        let connectors: Vec<Connector> = self.nodes.iter().map(|w| w.connector().clone()).collect();
        crate::backend::subscribe_all(
            &connectors,
            self.name.channel(),
            move |notice| {
                if let Ok(notify) = notify.lock() {
                    notify(notice);
                }
            },
            self.quorum(),
            &Budget {
                deadline: budget.deadline.min(Instant::now() + self.node_timeout),
                cancel: budget.cancel.clone(),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_constants() {
        assert_eq!(drift(Duration::from_secs(10)), Duration::from_millis(102));
        let connector = |port: u16| {
            Connector::new(
                crate::backend::Endpoint::parse(&format!("redis://127.0.0.1:{port}")).unwrap(),
                Duration::from_millis(100),
                crate::backend::TlsFiles::default(),
            )
            .unwrap()
        };
        let name = LockName::new("distlock:", "k");
        for (n, quorum) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)] {
            let connectors: Vec<Connector> = (0..n).map(|i| connector(1 + i)).collect();
            let lock = Redlock::new(name.clone(), &connectors, Duration::from_millis(100));
            assert_eq!(lock.quorum(), quorum, "{n} nodes");
        }
    }
}
