//! A lock in memory, for unit tests of the engine ([`crate::wait`]), as hyperfine tests its
//! executor: the rules of the Lua scripts (a fair line, direct hand-off, personal wake-ups,
//! places that lapse, supersede, limits that must agree) without Redis, and knobs to make it
//! fail the ways a server does (lost replies, hangs, lost wake-ups).
//!
//! Every handle made by [`FakeLock::new`] or [`FakeLock::client`] shares one [`World`]; each
//! handle is one client (its own failures, its own wake-ups).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{
    Answer, Conflict, Extended, HeldBy, HolderTtl, Holders, Lock, LockName, LockState, Ownership,
    Queueing, Request, Residue, Token, Use, Validity,
};
use crate::backend::{BackendError, Budget, Notice, Subscription};
use crate::clock::Moment;

/// How often a waiter must refresh its place (short, for tests).
pub const REFRESH: Duration = Duration::from_millis(40);
/// How long a place lasts without a refresh.
pub const PLACE: Duration = Duration::from_millis(150);

/// What the server knows.
#[derive(Default)]
pub struct World {
    /// Holders: token -> (expiry, fence).
    pub holders: HashMap<String, (Instant, u64)>,
    /// The limit of the holders (0 when none).
    pub limit: u32,
    /// The line: (token, limit, place lapses at).
    pub line: VecDeque<(String, u32, Instant)>,
    /// Superseded waiters.
    pub superseded: Vec<String>,
    /// Subscribers by token.
    subscribers: HashMap<String, Arc<dyn Fn(Notice) + Send + Sync>>,
    /// Wake-ups not delivered (a lost message), by token.
    pub deaf: Vec<String>,
    /// The last fence handed out.
    pub fence: u64,
    /// Every attempt, in order: (token, queueing).
    pub attempts: Vec<(String, Queueing)>,
    /// Tokens that gave up.
    pub gave_up: Vec<String>,
    /// Releases fail (Redis does not answer them); the key stays until it expires.
    pub releases_fail: bool,
    /// Called during each attempt, before it is answered (a signal that comes meanwhile).
    pub during_attempt: Option<Box<dyn FnMut() + Send>>,
}

impl World {
    /// The tokens that subscribed to their wake-ups.
    pub fn subscribed(&self) -> Vec<&str> {
        self.subscribers.keys().map(String::as_str).collect()
    }
}

/// One client of the shared [`World`].
pub struct FakeLock {
    name: LockName,
    world: Arc<Mutex<World>>,
    /// Errors the next attempts return instead of an answer (front first).
    pub failures: Arc<Mutex<VecDeque<BackendError>>>,
    /// Attempts never answer: they wait out their budget (or its cancel flag).
    pub hang: Arc<Mutex<bool>>,
    /// A lock without a line (as a Redlock): nobody takes a place, nothing is handed over.
    pub lineless: bool,
}

impl Default for FakeLock {
    fn default() -> Self {
        FakeLock::new()
    }
}

impl FakeLock {
    /// A new world, and its first client.
    pub fn new() -> FakeLock {
        FakeLock {
            name: LockName::new("fake:", "k"),
            world: Arc::new(Mutex::new(World::default())),
            failures: Arc::default(),
            hang: Arc::default(),
            lineless: false,
        }
    }

    /// Another client of the same world.
    pub fn client(&self) -> FakeLock {
        FakeLock {
            name: self.name.clone(),
            world: Arc::clone(&self.world),
            failures: Arc::default(),
            hang: Arc::default(),
            lineless: self.lineless,
        }
    }

    /// The world, locked.
    pub fn world(&self) -> MutexGuard<'_, World> {
        match self.world.lock() {
            Ok(w) => w,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// `token` stops holding the lock, silently (no hand-off, no notification).
    pub fn drop_holder(&self, token: &str) {
        let mut w = self.world();
        w.holders.remove(token);
        if w.holders.is_empty() {
            w.limit = 0;
        }
    }

    /// Send every subscriber a release notification (whatever the lock's state).
    pub fn notify_all(&self) {
        let w = self.world();
        for notify in w.subscribers.values() {
            notify(Notice::Message);
        }
    }

    /// Make `token` hold the lock for `ttl` (a holder outside the engine under test).
    pub fn hold(&self, token: &str, limit: u32, ttl: Duration) {
        let mut w = self.world();
        w.fence += 1;
        let fence = w.fence;
        w.holders
            .insert(token.to_owned(), (Instant::now() + ttl, fence));
        w.limit = limit;
    }
}

impl World {
    fn purge(&mut self, now: Instant) {
        self.holders.retain(|_, (expiry, _)| *expiry > now);
        if self.holders.is_empty() {
            self.limit = 0;
        }
        self.line.retain(|(_, _, lapses)| *lapses > now);
    }

    fn wake(&self, token: &str, notice: Notice) {
        if self.deaf.iter().any(|t| t == token) {
            return;
        }
        if let Some(notify) = self.subscribers.get(token) {
            notify(notice);
        }
    }

    /// Hand free room to the first in line (they take it up with their next attempt).
    fn hand_off(&mut self, now: Instant) {
        self.purge(now);
        while let Some((token, limit, _)) = self.line.front().cloned() {
            let full = self.holders.len() as u32 >= limit.max(1);
            if full || (self.limit != 0 && self.limit != limit) {
                break;
            }
            self.line.pop_front();
            self.fence += 1;
            self.holders.insert(
                token.clone(),
                (now + Duration::from_millis(500), self.fence),
            );
            self.limit = limit;
            self.wake(&token, Notice::Message);
        }
    }

    fn holders_view(&self, now: Instant) -> Holders {
        let soonest = self.holders.values().map(|(e, _)| *e).min();
        Holders {
            first: HeldBy {
                ttl: soonest.map_or(HolderTtl::Expires(Duration::ZERO), |e| {
                    HolderTtl::Expires(e.saturating_duration_since(now))
                }),
                holder: None,
                held_for: None,
                token: None,
                fence: None,
                slot: None,
                cooldown: None,
            },
            count: self.holders.len() as u32,
            limit: self.limit.max(1),
            waiting: self.line.len() as u32,
        }
    }

    fn release(&mut self, token: &str, now: Instant) -> bool {
        let held = self.holders.remove(token).is_some();
        if self.holders.is_empty() {
            self.limit = 0;
        }
        if held {
            self.hand_off(now);
        }
        held
    }
}

impl Lock for FakeLock {
    fn name(&self) -> &LockName {
        &self.name
    }

    fn describe(&self) -> String {
        "fake://".into()
    }

    fn queues(&self) -> bool {
        !self.lineless
    }

    fn recheck_after_notice(&self) -> bool {
        // A lock without a line stands for a Redlock.
        self.lineless
    }

    fn try_acquire(
        &mut self,
        request: &Request<'_>,
        budget: &Budget,
    ) -> Result<Answer, BackendError> {
        let hang = self.hang.lock().map(|h| *h).unwrap_or(false);
        if hang {
            while Instant::now() < budget.deadline {
                if budget.is_cancelled() {
                    return Err(BackendError::Interrupted { sent: true });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            return Err(BackendError::Timeout {
                sent: true,
                after: Duration::from_millis(1),
            });
        }
        if let Some(e) = self.failures.lock().ok().and_then(|mut f| f.pop_front()) {
            return Err(e);
        }
        let anchor = Moment::now();
        let token = request.token.as_str();
        let limit = request.limit.max(1);
        let queueing = if self.lineless {
            Queueing::Try
        } else {
            request.queueing
        };
        let request = &Request {
            queueing,
            ..request.clone()
        };
        let mut w = self.world();
        if let Some(during) = w.during_attempt.as_mut() {
            during();
        }
        let now = Instant::now();
        w.attempts.push((token.to_owned(), request.queueing));
        w.purge(now);
        if let Some((_, fence)) = w.holders.get(token).copied() {
            w.holders
                .insert(token.to_owned(), (now + request.claim, fence));
            w.line.retain(|(t, _, _)| t != token);
            return Ok(Answer::Granted {
                validity: Validity {
                    anchor,
                    ttl: request.claim,
                },
                fence,
                slot: (limit > 1).then_some(0),
                token: None,
            });
        }
        if w.superseded.iter().any(|t| t == token) {
            return Ok(Answer::Superseded(None));
        }
        if w.limit != 0 && w.limit != limit {
            return Ok(Answer::Conflict(Conflict {
                use_: if w.limit == 1 {
                    Use::Mutex
                } else {
                    Use::Semaphore
                },
                limit: w.limit,
                count: w.holders.len() as u32,
                holder: None,
            }));
        }
        let position = w.line.iter().position(|(t, _, _)| t == token);
        let free = limit as usize - w.holders.len().min(limit as usize);
        if free > 0 && position.map_or(w.line.len() < free, |p| p < free) {
            w.line.retain(|(t, _, _)| t != token);
            w.fence += 1;
            let fence = w.fence;
            w.holders
                .insert(token.to_owned(), (now + request.claim, fence));
            w.limit = limit;
            return Ok(Answer::Granted {
                validity: Validity {
                    anchor,
                    ttl: request.claim,
                },
                fence,
                slot: (limit > 1).then_some(0),
                token: None,
            });
        }
        if request.queueing == Queueing::Try {
            return Ok(Answer::Busy(w.holders_view(now)));
        }
        match w.line.iter_mut().find(|(t, _, _)| t == token) {
            Some(entry) => entry.2 = now + PLACE,
            None => w.line.push_back((token.to_owned(), limit, now + PLACE)),
        }
        if matches!(request.queueing, Queueing::Supersede | Queueing::Replace) {
            let older: Vec<String> = w
                .line
                .iter()
                .map(|(t, _, _)| t.clone())
                .take_while(|t| t != token)
                .collect();
            for t in older {
                w.line.retain(|(x, _, _)| *x != t);
                w.superseded.push(t.clone());
                w.wake(&t, Notice::Message);
            }
        }
        let position = w.line.iter().position(|(t, _, _)| t == token).unwrap_or(0) as u32 + 1;
        Ok(Answer::Queued {
            holders: w.holders_view(now),
            position,
            refresh_in: REFRESH,
        })
    }

    fn give_up(&mut self, token: &Token, claim: Duration, _budget: &Budget) -> Residue {
        if self.hang.lock().map(|h| *h).unwrap_or(false) {
            return Residue::MayRemain(claim);
        }
        let mut w = self.world();
        let now = Instant::now();
        w.gave_up.push(token.as_str().to_owned());
        w.line.retain(|(t, _, _)| t != token.as_str());
        w.release(token.as_str(), now);
        Residue::Nothing
    }

    fn inspect(&mut self, _budget: &Budget) -> Result<LockState, BackendError> {
        let w = self.world();
        Ok(LockState {
            holders: w
                .holders
                .keys()
                .map(|t| HeldBy {
                    ttl: HolderTtl::Never,
                    holder: None,
                    held_for: None,
                    token: Some(t.clone()),
                    fence: None,
                    slot: None,
                    cooldown: None,
                })
                .collect(),
            limit: w.limit,
            waiters: Vec::new(),
        })
    }

    fn holds(&mut self, token: &Token, _budget: &Budget) -> Result<Option<u64>, BackendError> {
        let mut w = self.world();
        w.purge(Instant::now());
        Ok(w.holders.get(token.as_str()).map(|(_, fence)| *fence))
    }

    fn extend(
        &mut self,
        token: &Token,
        ttl: Duration,
        _budget: &Budget,
    ) -> Result<Extended, BackendError> {
        let anchor = Moment::now();
        let now = Instant::now();
        let mut w = self.world();
        w.purge(now);
        match w.holders.get_mut(token.as_str()) {
            Some(entry) => {
                entry.0 = now + ttl;
                Ok(Extended::Held(Validity { anchor, ttl }))
            }
            None => Ok(Extended::NotHeld),
        }
    }

    fn release_after(
        &mut self,
        token: &Token,
        _succeeded: bool,
        _budget: &Budget,
    ) -> Result<Ownership, BackendError> {
        let mut w = self.world();
        if w.releases_fail {
            return Err(BackendError::Timeout {
                sent: true,
                after: Duration::from_millis(1),
            });
        }
        Ok(if w.release(token.as_str(), Instant::now()) {
            Ownership::Held
        } else {
            Ownership::NotHeld
        })
    }

    fn fresh(&self, _timeout: Duration) -> Box<dyn Lock> {
        Box::new(self.client())
    }

    fn subscribe(
        &self,
        token: &Token,
        notify: Box<dyn Fn(Notice) + Send>,
        _budget: &Budget,
    ) -> Result<Subscription, BackendError> {
        let notify = Mutex::new(notify);
        self.world().subscribers.insert(
            token.as_str().to_owned(),
            Arc::new(move |notice| {
                if let Ok(notify) = notify.lock() {
                    notify(notice);
                }
            }),
        );
        Ok(Subscription::detached())
    }
}
