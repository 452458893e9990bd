//! A lock over several keys (`run -k db -k deploy`): a [`LockSet`] of member locks, one per key,
//! each the lock the topology gives one key (its own hash tag, line, scripts and servers), as a
//! Redlock is a lock over nodes. The engine (wait, renew, release) sees one [`Lock`].
//!
//! * **One order.** The members are taken in the order of their Redis keys (bytes), whatever
//!   order the keys were typed in: a run waits for a key only while holding keys below it, so
//!   runs that name the same keys in other orders never wait for each other in a cycle.
//! * **Hold and wait.** Each attempt ([`Lock::try_acquire`]) tries the members not held yet, in
//!   that order, and stops at the first busy one (in its line, with a place when the engine
//!   asks for one): the members below it stay held. It never sleeps; the engine waits.
//! * **Held keys on the claim.** While the set waits, every attempt first renews the members it
//!   holds to the short claim (not to `--ttl`), when less than two thirds of it is left: a
//!   distlock killed while waiting blocks them for one claim at most. The engine attempts
//!   again within a third of the claim ([`Lock::look_again_within`]), before they lapse.
//! * **All or nothing.** Granted only with every member; its validity is the earliest of the
//!   members'. Giving up (busy, `--wait` ran out, a signal, a conflict) gives every member
//!   back; the key that was busy is [`Lock::busy_key`]. A held member lost while waiting gives
//!   everything back and starts again from the first key.
//! * **Running.** A renewal extends every member; one that is no longer held makes the set not
//!   held, naming that key ([`Lock::busy_key`], shared with the handles [`Lock::fresh`] makes),
//!   while the others are still extended. A release releases every member (each hands its own
//!   line on).
//! * **One token** for every key, unless a member retired it (a Redlock's may): each member
//!   then answers with its own ([`Lock::members`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{
    Answer, Extended, Lock, LockName, LockState, LostWhileWaiting, Member, NodeFailure, Ownership,
    Request, Residue, Token, Validity,
};
use crate::backend::{BackendError, Budget, Notice, Subscription};
use crate::clock::Moment;

/// Where a waiter's wake-ups go.
type Notify = Box<dyn Fn(Notice) + Send>;

/// A lock over several keys.
pub struct LockSet {
    /// In key order.
    members: Vec<Slot>,
    /// The first member's name (the set's name for messages and the engine); a placeholder
    /// for a set of no member, which the configuration never builds.
    name: LockName,
    /// What every handle on this set shares (the renewer's too).
    shared: Arc<Mutex<Shared>>,
    /// The claim of the last attempt: what held keys are renewed to while waiting.
    claim: Duration,
}

/// One member and what the set knows of it.
struct Slot {
    lock: Box<dyn Lock>,
    /// Its grant, while held.
    held: Option<(u64, Validity)>,
    /// The token it holds with, when not the set's (a Redlock member retired it).
    token: Option<Token>,
    /// An attempt was sent to it: giving up must ask it.
    touched: bool,
    /// Its own limit, when not the request's (a shared key in a set of mixed modes).
    limit: Option<u32>,
}

impl Slot {
    fn token(&self, set: &Token) -> Token {
        self.token.clone().unwrap_or_else(|| set.clone())
    }
}

#[derive(Debug, Default)]
struct Shared {
    /// The key the last attempt found busy, or that a renewal or release found lost.
    noted: Option<String>,
    /// Keys lost while the set waited, not yet told ([`Lock::take_lost_while_waiting`]).
    lost: Vec<LostWhileWaiting>,
}

impl LockSet {
    /// The set of `members` (one lock per key, in any order; at least one).
    pub fn new(members: Vec<Box<dyn Lock>>) -> Self {
        LockSet::with_limits(members.into_iter().map(|m| (m, None)).collect())
    }

    /// The set of `members`, each with its own limit when it is not the request's (`Some(0)`:
    /// a key held shared in a set whose other keys are exclusive).
    pub fn with_limits(mut members: Vec<(Box<dyn Lock>, Option<u32>)>) -> Self {
        members.sort_by(|(a, _), (b, _)| {
            a.name()
                .lock_key()
                .as_bytes()
                .cmp(b.name().lock_key().as_bytes())
        });
        let name = members
            .first()
            .map_or_else(|| LockName::new("", ""), |(m, _)| m.name().clone());
        LockSet {
            name,
            members: members
                .into_iter()
                .map(|(lock, limit)| Slot {
                    lock,
                    held: None,
                    token: None,
                    touched: false,
                    limit,
                })
                .collect(),
            shared: Arc::new(Mutex::new(Shared::default())),
            claim: Duration::ZERO,
        }
    }

    /// The set of `members`, each held with its own token (what an `acquire --env-file`
    /// wrote), for `renew` and `release`.
    pub fn held_with(members: Vec<(Box<dyn Lock>, Token)>) -> Self {
        let mut set = LockSet::new(Vec::new());
        let mut slots: Vec<Slot> = members
            .into_iter()
            .map(|(lock, token)| Slot {
                lock,
                held: None,
                token: Some(token),
                touched: true,
                limit: None,
            })
            .collect();
        slots.sort_by(|a, b| {
            a.lock
                .name()
                .lock_key()
                .as_bytes()
                .cmp(b.lock.name().lock_key().as_bytes())
        });
        if let Some(first) = slots.first() {
            set.name = first.lock.name().clone();
        }
        set.members = slots;
        set
    }

    fn note(&self, key: Option<&LockName>) {
        if let Ok(mut shared) = self.shared.lock() {
            shared.noted = key.map(|k| k.key().to_owned());
        }
    }

    /// Renew the members held while the set waits to the claim, when less than two thirds of
    /// it is left. `Ok(false)`: one of them is gone (everything was given back).
    fn keep_held(
        &mut self,
        token: &Token,
        claim: Duration,
        budget: &Budget,
    ) -> Result<bool, BackendError> {
        let now = Moment::now();
        for i in 0..self.members.len() {
            let slot = &mut self.members[i];
            let Some((fence, validity)) = slot.held else {
                continue;
            };
            let left = validity.earliest_expiry().saturating_duration_since(now);
            if left * 3 >= claim * 2 {
                continue;
            }
            let tok = slot.token(token);
            match slot.lock.extend(&tok, claim, budget)? {
                Extended::Held(v) | Extended::Replaced(v, _) => slot.held = Some((fence, v)),
                Extended::NotHeld => {
                    let name = slot.lock.name().clone();
                    self.give_back(token, claim, budget);
                    if let Ok(mut shared) = self.shared.lock() {
                        let waiting_for = shared.noted.take();
                        shared.lost.push(LostWhileWaiting {
                            key: name.key().to_owned(),
                            waiting_for,
                        });
                    }
                    self.note(Some(&name));
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Give every member back (leave the lines, release what is held), worst residue first.
    fn give_back(&mut self, token: &Token, claim: Duration, budget: &Budget) -> Residue {
        let mut residue = Residue::Nothing;
        for slot in &mut self.members {
            if !slot.touched && slot.held.is_none() {
                continue;
            }
            let tok = slot.token(token);
            // A member's `give_up` takes back what an attempt may have taken, not a grant it
            // answered: a held member is released.
            let r = if slot.held.is_some() {
                match slot.lock.release(&tok, budget) {
                    Ok(_) => Residue::Nothing,
                    Err(_) => Residue::MayRemain(claim),
                }
            } else {
                slot.lock.give_up(&tok, claim, budget)
            };
            slot.held = None;
            slot.touched = false;
            residue = worse(residue, r);
        }
        residue
    }

    fn validity(&self) -> Option<Validity> {
        self.members
            .iter()
            .filter_map(|s| s.held.map(|(_, v)| v))
            .min_by_key(Validity::earliest_expiry)
    }
}

/// The worse of two residues (what may remain longest).
fn worse(a: Residue, b: Residue) -> Residue {
    match (a, b) {
        (Residue::MayRemain(x), Residue::MayRemain(y)) => Residue::MayRemain(x.max(y)),
        (Residue::MayRemain(x), _) | (_, Residue::MayRemain(x)) => Residue::MayRemain(x),
        (Residue::TakenBack, _) | (_, Residue::TakenBack) => Residue::TakenBack,
        _ => Residue::Nothing,
    }
}

impl Lock for LockSet {
    fn name(&self) -> &LockName {
        &self.name
    }

    fn describe(&self) -> String {
        self.members
            .first()
            .map_or_else(String::new, |s| s.lock.describe())
    }

    fn queues(&self) -> bool {
        self.members.iter().all(|s| s.lock.queues())
    }

    fn recheck_after_notice(&self) -> bool {
        self.members.iter().any(|s| s.lock.recheck_after_notice())
    }

    fn deployment(&self) -> String {
        self.members
            .first()
            .map_or_else(String::new, |s| s.lock.deployment())
    }

    fn try_acquire(
        &mut self,
        request: &Request<'_>,
        budget: &Budget,
    ) -> Result<Answer, BackendError> {
        self.claim = request.claim;
        if !self.keep_held(request.token, request.claim, budget)? {
            // A held key was lost while waiting: everything was given back; start again.
            return Ok(Answer::NoPlace);
        }
        for i in 0..self.members.len() {
            if self.members[i].held.is_some() {
                continue;
            }
            let slot = &mut self.members[i];
            let token = slot.token(request.token);
            let member_request = Request {
                token: &token,
                limit: slot.limit.unwrap_or(request.limit),
                ..request.clone()
            };
            slot.touched = true;
            let answer = slot.lock.try_acquire(&member_request, budget)?;
            match answer {
                Answer::Granted {
                    validity,
                    fence,
                    token: retired,
                    ..
                } => {
                    slot.held = Some((fence, validity));
                    if retired.is_some() {
                        slot.token = retired;
                    }
                }
                Answer::Busy(_) | Answer::Queued { .. } => {
                    let name = slot.lock.name().clone();
                    self.note(Some(&name));
                    return Ok(answer);
                }
                Answer::Conflict(_) | Answer::Superseded(_) => {
                    // The engine gives nothing back after these: do it here.
                    let name = slot.lock.name().clone();
                    self.give_back(request.token, request.claim, budget);
                    self.note(Some(&name));
                    return Ok(answer);
                }
                Answer::NoPlace => return Ok(Answer::NoPlace),
            }
        }
        self.note(None);
        let validity = self.validity().unwrap_or(Validity {
            anchor: Moment::now(),
            ttl: Duration::ZERO,
        });
        let fence = (self.members.first())
            .and_then(|s| s.held)
            .map_or(0, |(fence, _)| fence);
        Ok(Answer::Granted {
            validity,
            fence,
            slot: None,
            token: None,
        })
    }

    fn give_up(&mut self, token: &Token, claim: Duration, budget: &Budget) -> Residue {
        self.give_back(token, claim, budget)
    }

    fn look_again_within(&self) -> Option<Duration> {
        // Held keys are renewed when less than two thirds of the claim is left: an attempt
        // every third of it keeps them.
        self.members
            .iter()
            .any(|s| s.held.is_some())
            .then(|| (self.claim / 3).max(Duration::from_millis(100)))
    }

    fn holds_part(&self) -> bool {
        self.members.iter().any(|s| s.held.is_some() || s.touched)
    }

    fn inspect(&mut self, budget: &Budget) -> Result<LockState, BackendError> {
        match self.members.first_mut() {
            Some(first) => first.lock.inspect(budget),
            None => Ok(LockState::default()),
        }
    }

    fn holds(&mut self, token: &Token, budget: &Budget) -> Result<Option<u64>, BackendError> {
        let mut first = None;
        for slot in &mut self.members {
            let tok = slot.token(token);
            match slot.lock.holds(&tok, budget)? {
                Some(fence) => {
                    first.get_or_insert(fence);
                }
                None => return Ok(None),
            }
        }
        Ok(first)
    }

    fn extend(
        &mut self,
        token: &Token,
        ttl: Duration,
        budget: &Budget,
    ) -> Result<Extended, BackendError> {
        let mut lost = None;
        let mut error = None;
        for slot in &mut self.members {
            let tok = slot.token(token);
            match slot.lock.extend(&tok, ttl, budget) {
                Ok(Extended::Held(v) | Extended::Replaced(v, _)) => {
                    let fence = slot.held.map_or(0, |(f, _)| f);
                    slot.held = Some((fence, v));
                }
                Ok(Extended::NotHeld) => {
                    lost.get_or_insert_with(|| slot.lock.name().clone());
                }
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
        if let Some(name) = lost {
            self.note(Some(&name));
            return Ok(Extended::NotHeld);
        }
        if let Some(e) = error {
            return Err(e);
        }
        Ok(match self.validity() {
            Some(v) => Extended::Held(v),
            None => Extended::NotHeld,
        })
    }

    fn release_after(
        &mut self,
        token: &Token,
        succeeded: bool,
        budget: &Budget,
    ) -> Result<Ownership, BackendError> {
        let mut lost = None;
        let mut error = None;
        for slot in &mut self.members {
            let tok = slot.token(token);
            match slot.lock.release_after(&tok, succeeded, budget) {
                Ok(Ownership::Held) => {}
                Ok(Ownership::NotHeld) => {
                    lost.get_or_insert_with(|| slot.lock.name().clone());
                }
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
            slot.held = None;
            slot.touched = false;
        }
        if let Some(name) = lost {
            self.note(Some(&name));
            return Ok(Ownership::NotHeld);
        }
        match error {
            Some(e) => Err(e),
            None => Ok(Ownership::Held),
        }
    }

    fn release_anywhere(&mut self, token: &Token, budget: &Budget) -> Result<usize, BackendError> {
        let mut released = 0;
        for slot in &mut self.members {
            let tok = slot.token(token);
            released += slot.lock.release_anywhere(&tok, budget)?;
        }
        Ok(released)
    }

    fn fresh(&self, timeout: Duration) -> Box<dyn Lock> {
        Box::new(LockSet {
            name: self.name.clone(),
            members: self
                .members
                .iter()
                .map(|s| Slot {
                    lock: s.lock.fresh(timeout),
                    held: s.held,
                    token: s.token.clone(),
                    touched: s.touched,
                    limit: s.limit,
                })
                .collect(),
            shared: Arc::clone(&self.shared),
            claim: self.claim,
        })
    }

    fn take_failures(&mut self) -> Vec<NodeFailure> {
        self.members
            .iter_mut()
            .flat_map(|s| s.lock.take_failures())
            .collect()
    }

    fn take_lost_while_waiting(&mut self) -> Vec<LostWhileWaiting> {
        self.shared
            .lock()
            .map(|mut s| std::mem::take(&mut s.lost))
            .unwrap_or_default()
    }

    fn busy_key(&self) -> Option<String> {
        self.shared.lock().ok().and_then(|s| s.noted.clone())
    }

    fn members(&self) -> Vec<Member> {
        self.members
            .iter()
            .map(|s| Member {
                name: s.lock.name().clone(),
                token: s.token.clone(),
                fence: s.held.map(|(fence, _)| fence),
                id: format!("{} {}", s.lock.deployment(), s.lock.name().lock_key()),
            })
            .collect()
    }

    fn subscribe(
        &self,
        token: &Token,
        notify: Box<dyn Fn(Notice) + Send>,
        budget: &Budget,
    ) -> Result<Subscription, BackendError> {
        // Every member's wake-ups: the turn may come on any line the set is in.
        let notify: Arc<Mutex<Notify>> = Arc::new(Mutex::new(notify));
        let mut all = Subscription::detached();
        for slot in &self.members {
            let notify = Arc::clone(&notify);
            let tok = slot.token(token);
            let sub = slot.lock.subscribe(
                &tok,
                Box::new(move |notice| {
                    if let Ok(notify) = notify.lock() {
                        notify(notice);
                    }
                }),
                budget,
            )?;
            all = all.with(sub);
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests;
