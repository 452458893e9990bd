//! What a Redlock answers to the engine: the [`Lock`] interface over its nodes. Each method
//! asks every node (through [`Redlock::ask`]) and decides by a majority, as the module docs of
//! [`super`] describe; the counting rules themselves are [`super::majority`]'s.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::majority::agree;
use super::{Redlock, drift, fence_floor};
use crate::backend::{BackendError, Budget, Connector, Notice, Reply, Subscription, Worker};
use crate::clock::Moment;
use crate::lock::protocol::{
    ACQUIRE, HOLDS, INSPECT, RENEW, acquire_args, decode_answer, decode_state, renew_args,
};
use crate::lock::topology::describe_servers;
use crate::lock::{
    Answer, Answering, Extended, Lock, LockName, LockState, NodeFailure, NodeView, Ownership,
    Queueing, Request, Residue, Survey, Token, Validity,
};

impl Lock for Redlock {
    fn name(&self) -> &LockName {
        &self.name
    }

    fn describe(&self) -> String {
        describe_servers(self.nodes.iter().map(Worker::connector))
    }

    fn queues(&self) -> bool {
        false
    }

    fn recheck_after_notice(&self) -> bool {
        true
    }

    fn deployment(&self) -> String {
        format!("redlock {}", self.describe())
    }

    fn try_acquire(
        &mut self,
        request: &Request<'_>,
        budget: &Budget,
    ) -> Result<Answer, BackendError> {
        // `--supersede` and `--limit N>1` never get here: the configuration asks
        // `Redlock::refuses` (see the module docs), before anything is sent.
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
                Ok(Answer::Superseded(_) | Answer::NoPlace) => {}
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
                let args = renew_args(request.token, claim, Some(fence));
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
                "{granted} of {} Redis nodes granted the lock, but too late (the {} expiry an \
                 attempt sets, less the allowance for the nodes' clocks drifting apart, had run \
                 out by the time a majority answered), or their fences could not be brought \
                 level; it was given back",
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
        Ok(Survey {
            agreed: agree(&states, quorum),
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
        let args = renew_args(token, ttl, None);
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

    fn fresh(&self, timeout: Duration) -> Box<dyn Lock> {
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
