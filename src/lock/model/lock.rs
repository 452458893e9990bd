//! [`ScriptLock`]: a [`Lock`] over the model Redis, for the engine's unit tests (the wait
//! engine, sessions, `run`, `acquire`, `break`). Every request runs distlock's real script on a
//! model Redis shared by every handle of one [`World`], at the real clock's time, with the
//! argument builders and reply decoders `SingleNode` uses, and the same client rules as
//! `single.rs` (a retry after a lost reply, the claim, validity anchored at the send time,
//! what giving up leaves, the keys a renewal declares). The messages a script publishes reach
//! the handles subscribed to their channel, as the pub/sub subscriber delivers them.
//!
//! The knobs make a request fail the ways a server does, around the script call and never
//! inside it: errors instead of a reply (a request that may have been applied is run and its
//! reply lost; any other is not sent), a server that never answers, releases that fail, lost
//! wake-ups, and a hook that runs while an attempt is on its way.
//!
//! The doorbell ([`Lock::await_turn`], on a client made with [`ScriptLock::ringing`]) is
//! `SingleNode`'s: a blocking pop of the waiter's list with the take-up (mode `refresh`)
//! queued behind it. The pop is served inside the run of the script that pushed, as Redis
//! serves a blocked client right after the command that fed its key, or when the block's time
//! is up; the take-up then runs as a request of its own, so other clients' requests may come
//! between (Redis runs it in `beforeSleep`, after the commands already read). A waiter that
//! abandons the wait before its pop is served drops its connection, and with it the take-up
//! (unless [`ScriptLock::straggle`]: then it arrives late, when the test says, see
//! [`ScriptLock::run_stragglers`]).
//!
//! Time: the model's clock is the wall clock at the world's creation plus the monotonic time
//! since then (`TIME` answers it in seconds and µs), read inside the mutex so that it never
//! goes back; scripts see one frozen instant each (Redis 7.2).

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use super::{Redis, Runner, ScriptTime, Value};
use crate::backend::{BackendError, Budget, Notice, Reply, Script, Subscription};
use crate::clock::Moment;
use crate::lock::holder::Holder;
use crate::lock::protocol::{
    ACQUIRE, HOLDS, INSPECT, PLACE, RELEASE, RENEW, TAKEUP, acquire_args, decode_answer,
    decode_state, ownership, release_args, renew_args, unexpected,
};
use crate::lock::single::Held;
use crate::lock::{
    AfterRun, Answer, Extended, Lock, LockName, LockState, Ownership, Queueing, Request, Residue,
    Token, Turn, Validity,
};

thread_local! {
    /// The Lua VM of this thread (a Lua state cannot move between threads): every thread that
    /// drives a handle compiles the scripts once.
    static RUNNER: RefCell<Runner> = RefCell::new(Runner::new());
}

type Notify = Arc<dyn Fn(Notice) + Send + Sync>;

/// Called during an attempt, after the script ran and before its reply is read.
pub type Hook = Box<dyn FnMut() + Send>;

/// The server and what the tests watch of it.
pub struct World {
    /// The model Redis.
    pub redis: Redis,
    /// The monotonic instant at which the model's clock read `base_us`.
    base: Instant,
    base_us: u64,
    /// Subscribers by channel.
    subscribers: HashMap<String, Vec<Notify>>,
    /// Channels whose messages are lost.
    deaf: Vec<String>,
    /// Every acquire request that reached the server, in order: (token, queueing).
    pub attempts: Vec<(String, Queueing)>,
    /// The tokens that gave up a wait.
    pub gave_up: Vec<String>,
    /// Release requests fail without reaching the server (it does not answer them); the key
    /// stays until it expires.
    pub releases_fail: bool,
    /// Called during each acquire request (a signal that comes meanwhile).
    during_attempt: Option<Hook>,
    /// Blocked pops (a waiter on its doorbell), in the order they blocked: (id, list key).
    blocked: Vec<(u64, String)>,
    /// Pops served while blocked: id -> the element popped.
    served: HashMap<u64, Vec<u8>>,
    next_pop: u64,
    /// Every wait on a doorbell that ended: what it popped, if anything.
    pub rings: Vec<Rung>,
    /// Take-ups left behind by a waiter that abandoned its wait (see [`ScriptLock::straggle`]):
    /// keys and arguments.
    stragglers: Vec<(Vec<String>, Vec<Vec<u8>>)>,
}

/// One wait on a doorbell, as the world saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rung {
    pub token: String,
    /// How long it could block.
    pub block: Duration,
    /// The send time of the pop and the take-up behind it.
    pub anchor: Moment,
    /// What the pop took ('granted', 'superseded'), None when its time was up.
    pub popped: Option<String>,
    /// The take-up was sent behind the pop (with the claim plus the block), not after it.
    pub behind: bool,
}

impl World {
    fn new() -> World {
        let base_us = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        World {
            redis: Redis::at(base_us),
            base: Instant::now(),
            base_us,
            subscribers: HashMap::new(),
            deaf: Vec::new(),
            attempts: Vec::new(),
            gave_up: Vec::new(),
            releases_fail: false,
            during_attempt: None,
            blocked: Vec::new(),
            served: HashMap::new(),
            next_pop: 0,
            rings: Vec::new(),
            stragglers: Vec::new(),
        }
    }

    /// `BLPOP key`: served at once if the list has an element (Some(id) with it in `served`),
    /// otherwise blocked until a push (see [`World::serve_blocked`]).
    fn block_on(&mut self, key: &str) -> u64 {
        self.tick();
        let id = self.next_pop;
        self.next_pop += 1;
        let now = self.redis.now_ms();
        match self.redis.keyspace.lpop(key.as_bytes(), now) {
            Some(item) => {
                self.served.insert(id, item);
            }
            None => self.blocked.push((id, key.to_owned())),
        }
        id
    }

    /// Serve the blocked pops whose list has an element now, oldest first (what Redis does
    /// right after the command that pushed).
    fn serve_blocked(&mut self) {
        let now = self.redis.now_ms();
        let mut still = Vec::new();
        for (id, key) in std::mem::take(&mut self.blocked) {
            match self.redis.keyspace.lpop(key.as_bytes(), now) {
                Some(item) => {
                    self.served.insert(id, item);
                }
                None => still.push((id, key)),
            }
        }
        self.blocked = still;
    }

    /// The pop `id` ends: what it took, or None (its time was up, or its client left); no
    /// longer blocked either way.
    fn unblock(&mut self, id: u64) -> Option<Vec<u8>> {
        self.blocked.retain(|(i, _)| *i != id);
        self.served.remove(&id)
    }

    /// Move the model's clock to now.
    fn tick(&mut self) {
        let now = self.base_us + self.base.elapsed().as_micros() as u64;
        if now > self.redis.now_us {
            self.redis.advance_to(now);
        }
    }

    /// Run `script` now; the subscribers to notify of what it published.
    fn run(
        &mut self,
        script: &Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> (Result<Vec<Reply>, BackendError>, Vec<Notify>) {
        self.tick();
        let outcome = RUNNER.with(|runner| {
            runner
                .borrow_mut()
                .eval(&mut self.redis, ScriptTime::Frozen, script, keys, args)
        });
        self.serve_blocked();
        let mut notify = Vec::new();
        for (channel, _) in &outcome.published {
            if self.deaf.contains(channel) {
                continue;
            }
            if let Some(subs) = self.subscribers.get(channel) {
                notify.extend(subs.iter().cloned());
            }
        }
        let reply = outcome.reply.into_replies().map_err(|e| {
            let (code, detail) = e.split_once(' ').unwrap_or((&e, ""));
            BackendError::Server {
                code: code.to_owned(),
                detail: detail.to_owned(),
            }
        });
        (reply, notify)
    }
}

/// One client of a shared [`World`] (its own failures, its own connection state).
pub struct ScriptLock {
    name: LockName,
    world: Arc<Mutex<World>>,
    /// Errors the next requests get instead of their reply, front first. One that may have
    /// been applied ([`BackendError::maybe_applied`]) is: the script runs and its reply is
    /// lost; any other reaches no server.
    pub failures: Arc<Mutex<VecDeque<BackendError>>>,
    /// Requests are never answered (and never run): each waits out its budget (or its cancel
    /// flag).
    pub hang: Arc<AtomicBool>,
    /// A lock without a line (a Redlock stands for it): every attempt only tries, waiters are
    /// woken by every release and look again soon after a notice.
    pub lineless: bool,
    /// What our last grant holds (as `SingleNode`).
    held: Option<Held>,
    /// A request was lost on a broken connection (as `SingleNode`).
    uncovered: bool,
    /// An attempt took a place in line (as `SingleNode`).
    joined: bool,
    /// A request that got no answer ([`ScriptLock::hang`]) may still be applied, and nothing
    /// can be written behind it (as a `Worker` that left a request in flight).
    left_behind: bool,
    /// The client waits on its doorbell ([`Lock::has_doorbell`], as `SingleNode`). Off by
    /// default, so that the engine's tests of the subscribing wait (a Redlock's, an older
    /// server's) keep running it; see [`ScriptLock::ringing`].
    pub doorbell: bool,
    /// The server refuses the doorbell's pop (an ACL user without `+blpop`); the take-up
    /// behind it runs all the same.
    pub refuse_doorbell: Arc<AtomicBool>,
    /// A take-up queued behind a wait that the client abandons is not dropped with its
    /// connection but arrives late: the test runs it with [`ScriptLock::run_stragglers`].
    pub straggle: Arc<AtomicBool>,
}

impl Default for ScriptLock {
    fn default() -> Self {
        ScriptLock::new()
    }
}

impl ScriptLock {
    /// A new world (an empty Redis), and its first client.
    pub fn new() -> ScriptLock {
        ScriptLock {
            name: LockName::new("model:", "k"),
            world: Arc::new(Mutex::new(World::new())),
            failures: Arc::default(),
            hang: Arc::default(),
            lineless: false,
            held: None,
            uncovered: false,
            joined: false,
            left_behind: false,
            doorbell: false,
            refuse_doorbell: Arc::default(),
            straggle: Arc::default(),
        }
    }

    /// Another client of the same world, with knobs of its own, that waits on its doorbell.
    pub fn ringing(&self) -> ScriptLock {
        ScriptLock {
            doorbell: true,
            ..self.client()
        }
    }

    /// Another client of the same world, with knobs of its own.
    pub fn client(&self) -> ScriptLock {
        ScriptLock {
            name: self.name.clone(),
            world: Arc::clone(&self.world),
            failures: Arc::default(),
            hang: Arc::default(),
            lineless: self.lineless,
            held: None,
            uncovered: false,
            joined: false,
            left_behind: false,
            doorbell: false,
            refuse_doorbell: Arc::default(),
            straggle: Arc::default(),
        }
    }

    /// The world, locked.
    pub fn world(&self) -> MutexGuard<'_, World> {
        match self.world.lock() {
            Ok(w) => w,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Run `script` with `keys` and `args` on the server and deliver what it published.
    fn call(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Vec<Reply>, BackendError> {
        let (reply, notify) = self.world().run(script, keys, args);
        for n in notify {
            n(Notice::Message);
        }
        reply
    }

    /// As `SingleNode::eval_keys`: one request, through the knobs.
    fn eval_keys(
        &mut self,
        script: &'static Script,
        keys: Vec<String>,
        args: Vec<Vec<u8>>,
        budget: &Budget,
    ) -> Result<Vec<Reply>, BackendError> {
        if budget.is_cancelled() {
            return Err(BackendError::Interrupted { sent: false });
        }
        if self.hang.load(Ordering::Relaxed) {
            let begun = Instant::now();
            while Instant::now() < budget.deadline {
                if budget.is_cancelled() {
                    return Err(BackendError::Interrupted { sent: true });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            self.left_behind = true;
            return Err(BackendError::Timeout {
                sent: true,
                after: begun.elapsed(),
            });
        }
        if std::ptr::eq(script, &RELEASE) && self.world().releases_fail {
            return Err(BackendError::Timeout {
                sent: true,
                after: budget.remaining(),
            });
        }
        let failure = self.failures.lock().ok().and_then(|mut f| f.pop_front());
        if std::ptr::eq(script, &ACQUIRE) {
            let mut w = self.world();
            w.attempts.push((
                String::from_utf8_lossy(&args[0]).into_owned(),
                match args[3].as_slice() {
                    b"try" => Queueing::Try,
                    b"join" => Queueing::Join,
                    b"supersede" => Queueing::Supersede,
                    b"refresh" => Queueing::Refresh,
                    _ => Queueing::Replace,
                },
            ));
        }
        let reply = match failure {
            Some(e) if !e.maybe_applied() => return Err(e),
            Some(e) => {
                let _ = self.call(script, &keys, &args);
                Err(e)
            }
            None => self.call(script, &keys, &args),
        };
        if std::ptr::eq(script, &ACQUIRE) {
            // Outside the world's lock: the hook may raise a signal, whose handler runs here.
            let hook = self.world().during_attempt.take();
            if let Some(mut hook) = hook {
                hook();
                self.world().during_attempt = Some(hook);
            }
        }
        reply
    }

    /// As `SingleNode::eval`: every key of the lock.
    fn eval(
        &mut self,
        script: &'static Script,
        args: Vec<Vec<u8>>,
        budget: &Budget,
    ) -> Result<Vec<Reply>, BackendError> {
        self.eval_keys(script, self.name.keys().to_vec(), args, budget)
    }

    /// As `SingleNode::release_everywhere`. A request whose reply is lost ran at once, so
    /// only one that got no answer may still be applied (the model never runs it, but the
    /// client cannot know that): a release cannot be written behind it.
    fn release_everywhere(
        &mut self,
        token: &Token,
        (live, succeeded): (bool, bool),
        budget: &Budget,
    ) -> Result<(bool, Option<Ownership>), BackendError> {
        let args = release_args(token, succeeded);
        let behind = !self.left_behind;
        if !live {
            return Ok((behind, None));
        }
        match self.eval(&RELEASE, args.clone(), budget) {
            Err(e) if e.maybe_applied() && !budget.remaining().is_zero() => {
                let again = self.eval(&RELEASE, args, budget)?;
                Ok((
                    behind,
                    Some(match ownership(&again)? {
                        Ownership::NotHeld => Ownership::Held,
                        held => held,
                    }),
                ))
            }
            other => Ok((behind, Some(ownership(&other?)?))),
        }
    }

    /// What a grant holds from now on (as `SingleNode`).
    fn granted(&mut self, answer: Answer, limit: u32) -> Answer {
        if let Answer::Granted { .. } = answer {
            self.held = Some(if limit > 1 { Held::Slot } else { Held::Mutex });
        }
        answer
    }

    // What a test does to the world from outside the engine.

    /// `token` takes the lock (a slot of `limit`) for `ttl` with a `try` of its own: a holder
    /// outside the engine under test. Panics unless it was granted.
    pub fn hold(&self, token: &str, limit: u32, ttl: Duration) {
        let token = Token::from_text(token);
        let holder = Holder::default();
        let request = Request {
            token: &token,
            claim: ttl,
            ttl,
            holder: &holder,
            limit,
            queueing: Queueing::Try,
            polls: false,
            after: AfterRun::default(),
            doorbell: false,
        };
        let reply = self
            .call(
                &ACQUIRE,
                &self.name.keys(),
                &acquire_args(&request, Queueing::Try),
            )
            .unwrap();
        let answer = decode_answer(&reply, Moment::now(), ttl).unwrap();
        assert!(matches!(answer, Answer::Granted { .. }), "{answer:?}");
    }

    /// The mutex key and its owner hash are deleted (`DEL`, which publishes nothing: no
    /// hand-off, no wake-up) if `token` holds the mutex.
    pub fn drop_holder(&self, token: &str) {
        let mut w = self.world();
        w.tick();
        let now = w.redis.now_ms();
        let [lock, owner, ..] = self.name.keys();
        let ks = &mut w.redis.keyspace;
        let ours = ks
            .lookup(lock.as_bytes(), now)
            .is_some_and(|e| matches!(&e.value, Value::Str(t) if t.as_slice() == token.as_bytes()));
        if ours {
            ks.remove(lock.as_bytes(), now);
            ks.remove(owner.as_bytes(), now);
        }
    }

    /// Every subscriber hears a message (whatever the lock's state): a notice from a node
    /// whose release the others do not have yet.
    pub fn notify_all(&self) {
        let subs: Vec<Notify> = self
            .world()
            .subscribers
            .values()
            .flatten()
            .cloned()
            .collect();
        for n in subs {
            n(Notice::Message);
        }
    }

    /// The wake-ups of `token` are lost.
    pub fn deafen(&self, token: &Token) {
        let channel = self.name.wake_channel(token.as_str());
        self.world().deaf.push(channel);
    }

    /// Call `hook` during every acquire request, after the script ran and before its reply
    /// is read.
    pub fn during_attempt(&self, hook: Hook) {
        self.world().during_attempt = Some(hook);
    }

    /// Run the take-ups left behind by abandoned waits (see [`ScriptLock::straggle`]), now,
    /// in the order they were sent; their answers.
    pub fn run_stragglers(&self) -> Vec<Answer> {
        let late = std::mem::take(&mut self.world().stragglers);
        late.into_iter()
            .map(|(keys, args)| {
                let reply = self.call(&ACQUIRE, &keys, &args).unwrap();
                decode_answer(&reply, Moment::now(), Duration::from_secs(1)).unwrap()
            })
            .collect()
    }

    /// The doorbell of `token` (its list), if it has one now: its elements, head first, and
    /// whether it expires.
    pub fn doorbell_of(&self, token: &Token) -> Option<(Vec<String>, bool)> {
        let mut w = self.world();
        w.tick();
        let now = w.redis.now_ms();
        let bell = self.name.wake_channel(token.as_str());
        w.redis
            .keyspace
            .lookup(bell.as_bytes(), now)
            .map(|e| match &e.value {
                Value::List(items) => (
                    items
                        .iter()
                        .map(|i| String::from_utf8_lossy(i).into_owned())
                        .collect(),
                    e.expires_at.is_some(),
                ),
                other => panic!("the doorbell is {other:?}"),
            })
    }

    /// How many pops are blocked now.
    pub fn blocked(&self) -> usize {
        self.world().blocked.len()
    }

    /// The lock as `INSPECT` sees it now.
    pub fn state(&self) -> LockState {
        decode_state(&self.call(&INSPECT, &self.name.keys(), &[]).unwrap()).unwrap()
    }

    /// The tokens holding the lock now, sorted.
    pub fn holders(&self) -> Vec<String> {
        let mut tokens: Vec<String> = self
            .state()
            .holders
            .into_iter()
            .filter_map(|h| h.token)
            .collect();
        tokens.sort();
        tokens
    }

    /// Whether `token` has a place in line now (as the line's keys hold it: a place that
    /// lapsed stays until a script purges it).
    pub fn in_line(&self, token: &Token) -> bool {
        let mut w = self.world();
        w.tick();
        let now = w.redis.now_ms();
        let queue = &self.name.keys()[3];
        w.redis
            .keyspace
            .lookup(queue.as_bytes(), now)
            .is_some_and(|e| match &e.value {
                Value::ZSet(members) => members
                    .iter()
                    .any(|(_, m)| m.as_slice() == token.as_str().as_bytes()),
                _ => false,
            })
    }

    /// The channels someone subscribed to.
    pub fn subscribed(&self) -> Vec<String> {
        self.world().subscribers.keys().cloned().collect()
    }

    /// The last number the fence counter handed out.
    pub fn fence(&self) -> u64 {
        let mut w = self.world();
        let now = w.redis.now_ms();
        let fence = &self.name.keys()[2];
        match w.redis.keyspace.lookup(fence.as_bytes(), now) {
            Some(e) => match &e.value {
                Value::Str(n) => String::from_utf8_lossy(n).parse().unwrap(),
                other => panic!("the fence counter is {other:?}"),
            },
            None => 0,
        }
    }
}

impl Lock for ScriptLock {
    fn name(&self) -> &LockName {
        &self.name
    }

    fn describe(&self) -> String {
        "model://".into()
    }

    fn queues(&self) -> bool {
        !self.lineless
    }

    fn recheck_after_notice(&self) -> bool {
        self.lineless
    }

    fn try_acquire(
        &mut self,
        request: &Request<'_>,
        budget: &Budget,
    ) -> Result<Answer, BackendError> {
        let queueing = if self.lineless {
            Queueing::Try
        } else {
            request.queueing
        };
        let args = acquire_args(request, queueing);
        if queueing != Queueing::Try {
            self.joined = true;
        }
        let mut anchor = Moment::now();
        let first = self.eval(&ACQUIRE, args.clone(), budget);
        if let Err(BackendError::Lost(_)) = &first {
            self.uncovered = true;
        }
        let reply = match first {
            // As SingleNode: the script is idempotent for our token, ask again.
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
        Ok(self.granted(answer, request.limit))
    }

    fn has_doorbell(&self) -> bool {
        self.doorbell && !self.lineless
    }

    /// As `SingleNode::await_turn`: the take-up rides behind the pop with the claim plus the
    /// block when that fits under the TTL (validity anchored at the send time), otherwise it
    /// is sent after the pop with the claim; a refused pop answers at once, the take-up
    /// behind it runs all the same, and the waiter subscribes from then on.
    fn await_turn(
        &mut self,
        request: &Request<'_>,
        block: Duration,
        budget: &Budget,
    ) -> Result<Turn, BackendError> {
        if !self.has_doorbell() {
            return Err(BackendError::Mismatch("this lock has no doorbell".into()));
        }
        let plain = Request {
            queueing: Queueing::Refresh,
            doorbell: true,
            ..request.clone()
        };
        let longer = Request {
            claim: plain.claim + block,
            ..plain.clone()
        };
        let behind = longer.claim <= plain.ttl;
        if budget.is_cancelled() {
            return Err(BackendError::Interrupted { sent: false });
        }
        let token = request.token.as_str().to_owned();
        let sent = if behind { &longer } else { &plain };
        let args = acquire_args(sent, Queueing::Refresh);
        let anchor = Moment::now();
        if self.refuse_doorbell.load(Ordering::Relaxed) {
            let answer = if behind {
                let reply = self.eval(&ACQUIRE, args, budget)?;
                decode_answer(&reply, anchor, longer.claim)?
            } else {
                self.try_acquire(&plain, budget)?
            };
            let answer = self.granted(answer, request.limit);
            return Ok(Turn {
                answer,
                rang: false,
                waited: false,
                refused: true,
            });
        }
        let bell = self.name.wake_channel(&token);
        let id = self.world().block_on(&bell);
        let end = Instant::now() + block;
        let popped = loop {
            {
                let mut w = self.world();
                w.tick();
                if w.served.contains_key(&id) || Instant::now() >= end {
                    break w.unblock(id);
                }
            }
            if budget.is_cancelled() || Instant::now() >= budget.deadline {
                // The connection is dropped: Redis frees the blocked client and never runs
                // what was queued behind it (unless it was served meanwhile: then it ran).
                let served = self.world().unblock(id).is_some();
                if served && behind {
                    let _ = self.call(&ACQUIRE, &self.name.keys(), &args);
                } else if !served && behind && self.straggle.load(Ordering::Relaxed) {
                    let keys = self.name.keys().to_vec();
                    self.world().stragglers.push((keys, args));
                }
                return Err(if budget.is_cancelled() {
                    BackendError::Interrupted { sent: true }
                } else {
                    BackendError::Timeout {
                        sent: true,
                        after: anchor.elapsed(),
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        self.world().rings.push(Rung {
            token,
            block,
            anchor,
            popped: popped
                .as_ref()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            behind,
        });
        let answer = if behind {
            let reply = self.eval(&ACQUIRE, args, budget)?;
            decode_answer(&reply, anchor, longer.claim)?
        } else {
            self.try_acquire(&plain, budget)?
        };
        Ok(Turn {
            answer: self.granted(answer, request.limit),
            rang: popped.is_some(),
            waited: true,
            refused: false,
        })
    }

    fn give_up(&mut self, token: &Token, claim: Duration, budget: &Budget) -> Residue {
        self.world().gave_up.push(token.as_str().to_owned());
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
        let args = renew_args(token, ttl, None);
        let kind = self.held.unwrap_or(Held::Mutex);
        let mut reply = self.eval_keys(&RENEW, kind.keys(&self.name), args.clone(), budget)?;
        if self.held.is_none() && reply.as_slice() == [Reply::Int(0)] {
            anchor = Moment::now();
            reply = self.eval_keys(&RENEW, Held::Slot.keys(&self.name), args, budget)?;
        }
        match reply.as_slice() {
            [Reply::Int(1), Reply::Int(applied), replacer @ ..] => {
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

    fn fresh(&self, _timeout: Duration) -> Box<dyn Lock> {
        Box::new(ScriptLock {
            held: self.held,
            ..self.client()
        })
    }

    fn subscribe(
        &self,
        token: &Token,
        notify: Box<dyn Fn(Notice) + Send>,
        _budget: &Budget,
    ) -> Result<Subscription, BackendError> {
        let channel = if self.lineless {
            self.name.channel().to_owned()
        } else {
            self.name.wake_channel(token.as_str())
        };
        let notify = Mutex::new(notify);
        self.world()
            .subscribers
            .entry(channel)
            .or_default()
            .push(Arc::new(move |notice| {
                if let Ok(notify) = notify.lock() {
                    notify(notice);
                }
            }));
        Ok(Subscription::detached())
    }
}

#[cfg(test)]
mod tests {
    //! ScriptLock's own promises: what the engine's tests rely on.

    use std::sync::mpsc;

    use super::*;
    use crate::lock::HolderTtl;

    fn budget() -> Budget {
        Budget::within(Duration::from_secs(1))
    }

    fn request<'a>(token: &'a Token, holder: &'a Holder, queueing: Queueing) -> Request<'a> {
        Request {
            token,
            claim: Duration::from_secs(5),
            ttl: Duration::from_secs(30),
            holder,
            limit: 1,
            queueing,
            polls: false,
            after: AfterRun::default(),
            doorbell: false,
        }
    }

    #[test]
    fn a_release_hands_the_lock_over_for_takeup_and_wakes_only_the_head() {
        let lock = ScriptLock::new();
        lock.hold("holder", 1, Duration::from_secs(30));
        let holder = Holder::default();
        let (first, second) = (Token::from_text("first"), Token::from_text("second"));
        let (tx, rx) = mpsc::channel();
        let mut waiters = Vec::new();
        for token in [&first, &second] {
            let mut client = lock.client();
            let tx = tx.clone();
            let name = token.as_str().to_owned();
            client
                .subscribe(
                    token,
                    Box::new(move |_| tx.send(name.clone()).unwrap()),
                    &budget(),
                )
                .unwrap();
            let answer = client
                .try_acquire(&request(token, &holder, Queueing::Join), &budget())
                .unwrap();
            assert!(matches!(answer, Answer::Queued { .. }), "{answer:?}");
            waiters.push(client);
        }
        assert!(lock.in_line(&first) && lock.in_line(&second));
        let released = lock
            .client()
            .release(&Token::from_text("holder"), &budget())
            .unwrap();
        assert_eq!(released, Ownership::Held);
        assert_eq!(rx.try_recv(), Ok("first".to_owned()));
        assert!(rx.try_recv().is_err(), "only the head is woken");
        // Handed over: the key holds the head's token for TAKEUP, until it takes it up.
        let state = lock.state();
        assert_eq!(state.holders.len(), 1);
        assert_eq!(state.holders[0].token.as_deref(), Some("first"));
        let HolderTtl::Expires(left) = state.holders[0].ttl else {
            panic!("{state:?}");
        };
        assert!(
            left <= TAKEUP && left > TAKEUP - Duration::from_secs(1),
            "{left:?}"
        );
        let answer = waiters[0]
            .try_acquire(&request(&first, &holder, Queueing::Join), &budget())
            .unwrap();
        let Answer::Granted { validity, .. } = answer else {
            panic!("{answer:?}");
        };
        assert_eq!(validity.ttl, Duration::from_secs(5));
    }

    #[test]
    fn a_lost_reply_was_applied_and_an_unsent_request_was_not() {
        let lock = ScriptLock::new();
        let holder = Holder::default();
        let token = Token::from_text("t");
        let mut client = lock.client();
        // Lost twice (the attempt asks again once): the lock was taken all the same.
        for _ in 0..2 {
            client
                .failures
                .lock()
                .unwrap()
                .push_back(BackendError::Lost("cut".into()));
        }
        let answer = client.try_acquire(&request(&token, &holder, Queueing::Try), &budget());
        assert!(matches!(answer, Err(BackendError::Lost(_))), "{answer:?}");
        assert_eq!(lock.holders(), ["t"]);
        // A request never sent changes nothing.
        client
            .failures
            .lock()
            .unwrap()
            .push_back(BackendError::Connect("refused".into()));
        assert!(client.release(&token, &budget()).is_err());
        assert_eq!(lock.holders(), ["t"]);
        // Lost on a broken connection: giving up needs (and makes) a live release.
        assert_eq!(
            client.give_up(&token, Duration::from_secs(5), &budget()),
            Residue::Nothing
        );
        assert!(lock.holders().is_empty());
    }
}
