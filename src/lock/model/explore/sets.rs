//! Lock sets in the explorer (issue 27; see `docs/verification.md`, "Lock sets"): two locks in
//! the one model Redis (keys `a` and `b`, each its own hash tag, its own 12 keys and its own
//! scripts run), clients that take a *set* of them as `lock/set.rs` does, and single-key
//! clients, explored breadth first with their own invariants: per key one holder, a set runs
//! its command only with every key, no cycle in the wait-for graph, every client ends, and a
//! set killed while waiting frees its keys within the claim.
//!
//! Kept apart from the one-key explorer (`mod.rs`), whose configurations and state counts it
//! leaves as they are. It shares its conventions: requests built by `protocol::acquire_args`,
//! `renew_args`, `release_args`, replies read by `decode_answer`, sleeps from
//! `wait::sleep::next_sleep` (jitter at the top), renewals and kill deadlines from
//! `renew::Deadlines`, time moving only to the next instant that matters.
//!
//! **What a set client restates** (`src/lock/set.rs`, the engine seeing one `Lock`):
//! * Its order: the keys sorted by their Redis key bytes (`LockSet::new`, set.rs:72-78),
//!   whatever order they were typed in.
//! * An attempt (`try_acquire`, set.rs:252-312) first renews each member it holds to the
//!   *claim* when less than two thirds of the claim is left (`keep_held`, set.rs:125-153; a
//!   member found gone gives everything back and answers `NoPlace`, set.rs:144-149 and
//!   257-260, on which the engine attempts again at once in `Join`, waiter.rs `run` `Again`);
//!   then tries the members not held, in order, one request each, stopping at the first busy
//!   one (set.rs:261-299), whose answer the engine sleeps on, cut to a third of the claim
//!   while a member is held (`bounded`, set.rs:180-206). Granted only with every member
//!   (set.rs:300-311), its validity the earliest of the members' (set.rs:208-213).
//! * The engine around it (waiter.rs `run`, as the one-key clients): a first attempt `Try`; a
//!   busy one subscribes (to every member's wake channel, set.rs:456-480) and joins at once;
//!   in line it sleeps `next_sleep`, a wake-up ending the sleep.
//! * Running: each renewal round extends every member to `--ttl` (`extend`, set.rs:340-374),
//!   one not held making the set lost (renew.rs: the child is killed, run.rs releases); the
//!   kill deadline follows the earliest member; the release releases every member
//!   (`release_after`, set.rs:376-406).
//!
//! Requests are atomic here (sent, run and answered in one step): with no lost request or
//! reply, a reply's delivery is a step of its client alone and commutes with every other
//! client's step, so this loses no interleaving of scripts. The one fault is a crash (the
//! client stops between two requests; what it holds expires).

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use super::{Keyspace, Patch, Redis, Resp, Runner, ScriptTime, T0_MS, jitter_max, moment, ms_of};
use crate::backend::Reply;
use crate::lock::Validity;
use crate::lock::model::{Entry, Value};
use crate::lock::protocol::{
    ACQUIRE, RELEASE, RENEW, acquire_args, decode_answer, millis, release_args, renew_args,
};
use crate::lock::{AfterRun, Answer, Holder, HolderTtl, LockName, Queueing, Request, Token};
use crate::renew::Deadlines;
use crate::wait::WaitMode;
use crate::wait::sleep::{Backoff, NO_EXPIRY_CAP, SPIN_BASE, SPIN_CAP, Seen, next_sleep};

/// The keys of the two locks (each `{KEY}` is its own hash tag).
pub const KEYS: [&str; 2] = ["a", "b"];

/// The set client's rules: distlock's, or a mutant of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// `lock/set.rs` as it is.
    Real,
    /// Mutant (a): the keys taken in the order typed, not sorted.
    TypedOrder,
    /// Mutant (b): the members held are not renewed while the set waits.
    NoKeepHeld,
    /// Mutant (c): the command starts with the first member alone.
    StartWithFirst,
    /// Mutant (d): the members held are renewed to `--ttl`, not to the claim, while waiting.
    KeepHeldToTtl,
    /// Mutant (e): giving back leaves the lines but keeps the members held (released by their
    /// expiry only).
    GiveBackSkipsHeld,
    /// Mutant (f): the sleep after a failed attempt is the error backoff alone, not cut to
    /// `look_again_within` (a third of the claim, set.rs) while members are held.
    ErrorSleepUncapped,
}

/// One client: the keys it names (indices into [`KEYS`], in the order typed; one key: a
/// single-key run).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetSpec {
    pub keys: Vec<usize>,
    /// It starts at any instant up to this one (ms after T0).
    pub start_by: u64,
    /// Its work may end at any instant (otherwise after its renewals).
    pub early_release: bool,
    /// Its `--wait` may run out at any instant it sleeps in line.
    pub give_up: bool,
    /// How many renewal rounds before its work ends (0: it ends when the first is due).
    pub renewals: u8,
}

#[derive(Clone, Debug)]
pub struct SetConfig {
    pub name: &'static str,
    pub clients: Vec<SetSpec>,
    pub ttl_ms: u64,
    pub grace_ms: u64,
    pub timeout_ms: u64,
    pub every_ms: u64,
    pub horizon_ms: u64,
    pub crashes: u8,
    /// Attempts on a member that may fail (a transient error, the request not applied: its
    /// server unreachable), in all, per trace.
    pub errors: u8,
    pub rule: Rule,
    /// Check the wait-for graph for cycles in every state (off: only progress at the horizon
    /// catches a deadlock).
    pub check_cycles: bool,
    pub max_states: usize,
    pub sometimes: Vec<SetSometimes>,
}

impl SetConfig {
    fn deadlines(&self) -> Deadlines {
        Deadlines {
            ttl: Duration::from_millis(self.ttl_ms),
            grace: Duration::from_millis(self.grace_ms),
        }
    }

    pub fn claim_ms(&self) -> u64 {
        millis(
            self.deadlines()
                .claim(Duration::from_millis(self.timeout_ms)),
        )
    }

    pub fn bounds(&self) -> String {
        let show = |s: &SetSpec| {
            s.keys
                .iter()
                .map(|&k| format!("-k {}", KEYS[k]))
                .collect::<Vec<_>>()
                .join(" ")
        };
        format!(
            "clients [{}], ttl {} ms, claim {} ms, horizon {} ms, crashes {}, errors {}, rule {:?}",
            self.clients.iter().map(show).collect::<Vec<_>>().join("; "),
            self.ttl_ms,
            self.claim_ms(),
            self.horizon_ms,
            self.crashes,
            self.errors,
            self.rule
        )
    }
}

/// An interesting state a set configuration must reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SetSometimes {
    /// A set waited in the line of a key while holding another.
    HeldWhileWaiting,
    /// A set renewed a member it holds to the claim while waiting for the next.
    KeptHeld,
    /// A set ran its command (with every key).
    SetRan,
    /// A key was handed to a waiter.
    HandOff,
    /// A set crashed while waiting, holding a key.
    CrashedHolding,
    /// A set's `--wait` ran out while it held a key.
    GaveUpHolding,
    /// A set's attempt on its next key failed while it held another.
    FailedHolding,
    /// A key of a set that crashed while waiting went to another client.
    FreedAfterCrash,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SetPhase {
    Idle,
    /// Answered busy: in a line (or about to join it).
    Waiting,
    /// Its command runs.
    Running {
        renewals: u8,
    },
    /// Releasing every member.
    Releasing,
    Done {
        crashed: bool,
    },
}

/// What the client does next (each request one step).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Todo {
    /// An attempt (`try_acquire`): keep-held renewals, then the members not held.
    Attempt,
    /// A renewal round, at member `from` (by position in the client's order).
    Renew {
        from: usize,
    },
    /// The release, at member `from`.
    Release {
        from: usize,
        succeeded: bool,
    },
    /// Giving every member back after a held one was lost (`give_back`), at member `from`.
    GiveBack {
        from: usize,
    },
    Nothing,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SetClient {
    pub token: String,
    pub phase: SetPhase,
    /// Per member (in the client's order): its validity while held (anchor, ttl; ms).
    pub held: Vec<Option<(u64, u64)>>,
    /// An attempt was sent to it (giving back must ask it).
    pub touched: Vec<bool>,
    /// The engine's queueing: `Join` once a first attempt found the set busy.
    pub join: bool,
    pub subscribed: bool,
    pub todo: Todo,
    pub due: u64,
    /// A member found not held in this renewal round.
    pub lost: bool,
    /// When it crashed, and whether its command had not started then.
    pub crashed: Option<(u64, bool)>,
    /// Its `--wait` ran out: it gives everything back and ends.
    pub gave_up: bool,
    spin: Backoff,
    no_expiry: Backoff,
    /// The error backoff (sleep.rs:19-20 `ERROR_BASE` 100 ms, `ERROR_CAP` 5 s; `Sleeps::
    /// after_error`, reset by `Sleeps::answered`).
    errors: Backoff,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SetState {
    pub redis: Redis,
    pub clients: Vec<SetClient>,
    pub crashes: u8,
    pub errors: u8,
}

impl SetState {
    pub fn now(&self) -> u64 {
        self.redis.now_ms() - T0_MS
    }

    fn fingerprint(&self) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut hasher);
        hasher.finish()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SetAction {
    /// The client's next request (due, or a start before its latest instant).
    Step(usize),
    /// Its work ends early: release.
    Release(usize),
    /// Its kill deadline passed: the child is killed, the set released.
    Kill(usize),
    /// Its `--wait` runs out while it sleeps in line.
    GiveUp(usize),
    /// Its due attempt on a member fails (a transient error; the request not applied).
    Fail(usize),
    Crash(usize),
    Tick(u64),
}

/// A request to one member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Req {
    /// Renew to `ttl` ms (keep-held: the claim; running: `--ttl`).
    Renew {
        ttl: u64,
    },
    Acquire {
        join: bool,
    },
    Release {
        succeeded: bool,
    },
}

pub struct SetWorld {
    pub config: SetConfig,
    runner: Runner,
    names: Vec<LockName>,
    keys: Vec<Vec<String>>,
    /// Each client's members (key indices) in the order it takes them.
    orders: Vec<Vec<usize>>,
    claim_ms: u64,
    holder: Holder,
    pub reached: BTreeSet<SetSometimes>,
}

use super::Violation;

fn fail<T>(invariant: &'static str, detail: String) -> Result<T, Violation> {
    Err(Violation { invariant, detail })
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl SetWorld {
    pub fn new(config: SetConfig, patches: Vec<Patch>) -> Result<SetWorld, String> {
        let names: Vec<LockName> = KEYS.iter().map(|k| LockName::new("", k)).collect();
        let keys = names.iter().map(|n| n.keys().to_vec()).collect();
        let orders = config
            .clients
            .iter()
            .map(|spec| {
                let mut order = spec.keys.clone();
                if config.rule != Rule::TypedOrder {
                    // set.rs:72-78: sorted by Redis key bytes.
                    order.sort_by(|&x, &y| {
                        names[x]
                            .lock_key()
                            .as_bytes()
                            .cmp(names[y].lock_key().as_bytes())
                    });
                }
                order
            })
            .collect();
        Ok(SetWorld {
            claim_ms: config.claim_ms(),
            config,
            runner: Runner::with_patches(patches)?,
            names,
            keys,
            orders,
            holder: Holder::default(),
            reached: BTreeSet::new(),
        })
    }

    pub fn initial(&self) -> SetState {
        let clients = self
            .config
            .clients
            .iter()
            .enumerate()
            .map(|(i, spec)| SetClient {
                token: format!("c{i}"),
                phase: SetPhase::Idle,
                held: vec![None; spec.keys.len()],
                touched: vec![false; spec.keys.len()],
                join: false,
                subscribed: false,
                todo: Todo::Attempt,
                due: spec.start_by,
                lost: false,
                crashed: None,
                gave_up: false,
                spin: Backoff::new(SPIN_BASE, SPIN_CAP),
                no_expiry: Backoff::new(SPIN_CAP, NO_EXPIRY_CAP),
                errors: Backoff::new(Duration::from_millis(100), Duration::from_secs(5)),
            })
            .collect();
        SetState {
            redis: Redis::at(T0_MS * 1000),
            clients,
            crashes: self.config.crashes,
            errors: self.config.errors,
        }
    }

    fn validity(v: (u64, u64)) -> Validity {
        Validity {
            anchor: moment(v.0),
            ttl: Duration::from_millis(v.1),
        }
    }

    /// The set's validity: the earliest of its members' (set.rs:208-213).
    fn earliest(c: &SetClient) -> Option<(u64, u64)> {
        c.held.iter().flatten().copied().min_by_key(|(a, t)| a + t)
    }

    fn kill_at(&self, v: (u64, u64)) -> u64 {
        ms_of(self.config.deadlines().kill_at(Self::validity(v)))
    }

    fn next_renewal(&self, v: (u64, u64)) -> u64 {
        ms_of(self.config.deadlines().next_renewal(
            Self::validity(v),
            Duration::from_millis(self.config.every_ms),
        ))
    }

    /// The member (position) the next step of client `i` asks, and what.
    fn plan(&self, s: &SetState, i: usize) -> Option<(usize, Req)> {
        let c = &s.clients[i];
        let now = s.now();
        match c.todo {
            Todo::Attempt => {
                // set.rs:125-153 `keep_held`: a held member with less than 2/3 of the claim
                // left is renewed to the claim.
                if self.config.rule != Rule::NoKeepHeld {
                    for (j, held) in c.held.iter().enumerate() {
                        let Some((anchor, ttl)) = held else { continue };
                        let left = (anchor + ttl).saturating_sub(now);
                        if left * 3 < self.claim_ms * 2 {
                            let ttl = if self.config.rule == Rule::KeepHeldToTtl {
                                self.config.ttl_ms
                            } else {
                                self.claim_ms
                            };
                            return Some((j, Req::Renew { ttl }));
                        }
                    }
                }
                // set.rs:261-272: the first member not held.
                let j = c.held.iter().position(Option::is_none)?;
                Some((j, Req::Acquire { join: c.join }))
            }
            Todo::Renew { from } => Some((
                from,
                Req::Renew {
                    ttl: self.config.ttl_ms,
                },
            )),
            Todo::Release { from, succeeded } => Some((from, Req::Release { succeeded })),
            // set.rs:156-178: a held member is released (`Lock::release`: `release_after`
            // with `succeeded` false), a touched one given up (single.rs `give_up`: the same
            // release, leaving the line), the others skipped.
            Todo::GiveBack { from } => (from..c.held.len())
                .find(|&j| self.gives_back(c, j))
                .map(|j| (j, Req::Release { succeeded: false })),
            Todo::Nothing => None,
        }
    }

    pub fn actions(&self, s: &SetState) -> Vec<SetAction> {
        let now = s.now();
        let mut out = Vec::new();
        let mut urgent = false;
        for (i, c) in s.clients.iter().enumerate() {
            if matches!(c.phase, SetPhase::Done { .. }) {
                continue;
            }
            let spec = &self.config.clients[i];
            let running = matches!(c.phase, SetPhase::Running { .. });
            if running
                && !matches!(c.todo, Todo::Release { .. })
                && let Some(v) = Self::earliest(c)
                && now >= self.kill_at(v)
                && c.due > now
            {
                urgent = true;
                out.push(SetAction::Kill(i));
            } else if c.todo != Todo::Nothing {
                if c.due <= now {
                    urgent = true;
                    out.push(SetAction::Step(i));
                    if s.errors > 0
                        && c.todo == Todo::Attempt
                        && matches!(self.plan(s, i), Some((_, Req::Acquire { .. })))
                    {
                        out.push(SetAction::Fail(i));
                    }
                } else if c.phase == SetPhase::Idle {
                    out.push(SetAction::Step(i));
                }
                if spec.early_release
                    && running
                    && c.due > now
                    && matches!(
                        c.todo,
                        Todo::Renew { from: 0 }
                            | Todo::Release {
                                from: 0,
                                succeeded: true
                            }
                    )
                {
                    out.push(SetAction::Release(i));
                }
            }
            // waiter.rs `sleep`: the end of the wait ends a sleep (`TimeUp`, `Ended::Busy`);
            // the session then gives the lock up (set.rs:314-316, `give_back`).
            if spec.give_up
                && c.phase == SetPhase::Waiting
                && c.todo == Todo::Attempt
                && c.due > now
            {
                out.push(SetAction::GiveUp(i));
            }
            if s.crashes > 0 {
                out.push(SetAction::Crash(i));
            }
        }
        if !urgent && let Some(t) = self.next_instant(s) {
            out.push(SetAction::Tick(t));
        }
        out
    }

    fn next_instant(&self, s: &SetState) -> Option<u64> {
        let now = s.now();
        let mut candidates = Vec::new();
        for c in &s.clients {
            // (The instant a set that crashed while waiting must have freed its keys by.)
            if let Some((at, true)) = c.crashed
                && c.held.iter().any(Option::is_some)
            {
                candidates.push(at + self.claim_ms + 1);
            }
            if matches!(c.phase, SetPhase::Done { .. }) {
                continue;
            }
            if c.todo != Todo::Nothing {
                candidates.push(c.due);
            }
            if matches!(c.phase, SetPhase::Running { .. })
                && let Some(v) = Self::earliest(c)
            {
                candidates.push(self.kill_at(v));
            }
        }
        let rel = |abs: u64| abs.saturating_sub(T0_MS);
        for (key, entry) in s.redis.keyspace.iter() {
            if let Some(e) = entry.expires_at {
                candidates.extend([rel(e), rel(e) + 1]);
            }
            if text(key).ends_with(":alive")
                && let Value::ZSet(members) = &entry.value
            {
                for (score, _) in members {
                    let at = rel(score.0 as u64);
                    candidates.extend([at, at + 1]);
                }
            }
        }
        candidates
            .into_iter()
            .filter(|&t| t > now && t <= self.config.horizon_ms)
            .min()
    }

    pub fn step(&mut self, s: &SetState, a: SetAction) -> Result<SetState, Violation> {
        let mut s = s.clone();
        let now = s.now();
        match a {
            SetAction::Step(i) => {
                let (j, req) = self.plan(&s, i).ok_or_else(|| Violation {
                    invariant: "every reply decodes",
                    detail: format!("c{i} has nothing to send in {:?}", s.clients[i].todo),
                })?;
                if s.clients[i].phase == SetPhase::Idle {
                    s.clients[i].phase = SetPhase::Waiting;
                }
                let replies = self.exec(&mut s, i, j, req)?;
                self.deliver(&mut s, i, j, req, &replies)?;
            }
            SetAction::Release(i) | SetAction::Kill(i) => {
                // The work ended (or renew.rs killed it at kill_at): run.rs releases every
                // member (set.rs:376-406).
                let c = &mut s.clients[i];
                c.phase = SetPhase::Releasing;
                c.todo = Todo::Release {
                    from: 0,
                    succeeded: matches!(a, SetAction::Release(_)),
                };
                c.due = now;
            }
            SetAction::Fail(i) => {
                // set.rs:271-272: the member is touched, its attempt fails (`?`): the set
                // answers the error, keeping what it holds. waiter.rs `after_failure`: a
                // transient error sleeps the error backoff (its ceiling: jitter at the top)
                // and attempts again; the sleep goes through `Waiter::sleep`, which cuts it to
                // `Lock::look_again_within` (a third of the claim, at least 100 ms, while a
                // member is held: set.rs `look_again_within`), as every sleep of the wait.
                let Some((j, _)) = self.plan(&s, i) else {
                    return fail("every reply decodes", format!("c{i} has nothing to fail"));
                };
                if s.clients[i].phase == SetPhase::Idle {
                    s.clients[i].phase = SetPhase::Waiting;
                }
                let cap = (self.claim_ms / 3).max(100);
                let c = &mut s.clients[i];
                c.touched[j] = true;
                let mut sleep = millis(c.errors.next_with(jitter_max));
                if self.config.rule != Rule::ErrorSleepUncapped
                    && c.held.iter().any(Option::is_some)
                {
                    sleep = sleep.min(cap);
                }
                c.due = now + sleep.max(1);
                s.errors -= 1;
                if c.held.iter().any(Option::is_some) {
                    self.reached.insert(SetSometimes::FailedHolding);
                }
            }
            SetAction::GiveUp(i) => {
                let gives_back =
                    (0..s.clients[i].held.len()).any(|j| self.gives_back(&s.clients[i], j));
                let c = &mut s.clients[i];
                if c.held.iter().any(Option::is_some) && c.held.len() > 1 {
                    self.reached.insert(SetSometimes::GaveUpHolding);
                }
                c.gave_up = true;
                c.due = now;
                if gives_back {
                    c.todo = Todo::GiveBack { from: 0 };
                } else {
                    c.phase = SetPhase::Done { crashed: false };
                    c.todo = Todo::Nothing;
                    c.subscribed = false;
                }
            }
            SetAction::Crash(i) => {
                let c = &mut s.clients[i];
                let before_command = matches!(c.phase, SetPhase::Idle | SetPhase::Waiting);
                if before_command && c.held.iter().any(Option::is_some) && c.held.len() > 1 {
                    self.reached.insert(SetSometimes::CrashedHolding);
                }
                c.crashed = Some((now, before_command));
                c.phase = SetPhase::Done { crashed: true };
                c.todo = Todo::Nothing;
                c.subscribed = false;
                s.crashes -= 1;
            }
            SetAction::Tick(t) => {
                s.redis.advance_to((T0_MS + t) * 1000);
            }
        }
        s.redis.keyspace.expire_all(s.redis.now_ms());
        self.check(&mut s)?;
        Ok(s)
    }

    /// Run client `i`'s request to its member `j` now.
    fn exec(
        &mut self,
        s: &mut SetState,
        i: usize,
        j: usize,
        req: Req,
    ) -> Result<Vec<Reply>, Violation> {
        let token = Token::from_text(&s.clients[i].token);
        let key = self.orders[i][j];
        let keys = &self.keys[key];
        let (script, keys, args) = match req {
            Req::Acquire { join } => {
                let queueing = if join { Queueing::Join } else { Queueing::Try };
                let request = Request {
                    token: &token,
                    claim: Duration::from_millis(self.claim_ms),
                    ttl: Duration::from_millis(self.config.ttl_ms),
                    holder: &self.holder,
                    limit: 1,
                    queueing,
                    polls: false,
                    after: AfterRun {
                        min_interval: None,
                        cooldown: None,
                    },
                    doorbell: false,
                };
                (&ACQUIRE, keys.clone(), acquire_args(&request, queueing))
            }
            // single.rs `Held::keys`: a mutex renews its key and owner hash.
            Req::Renew { ttl } => (
                &RENEW,
                vec![keys[0].clone(), keys[1].clone()],
                renew_args(&token, Duration::from_millis(ttl), None),
            ),
            Req::Release { succeeded } => (&RELEASE, keys.clone(), release_args(&token, succeeded)),
        };
        let before = s.redis.keyspace.clone();
        let outcome = self
            .runner
            .eval(&mut s.redis, ScriptTime::Frozen, script, &keys, &args);
        if let Resp::Error(e) = &outcome.reply {
            return fail(
                "no script ever errors",
                format!("{}'s {req:?} on {}: {e}", s.clients[i].token, KEYS[key]),
            );
        }
        for (channel, message) in &outcome.published {
            if message == "granted" {
                self.reached.insert(SetSometimes::HandOff);
            }
            // waiter.rs `sleep`: a message on one of our channels (every member's,
            // set.rs:456-480) ends the sleep.
            for name in &self.names {
                let Some(to) = channel.strip_prefix(&name.wake_channel("")) else {
                    continue;
                };
                if let Some(c) = s.clients.iter_mut().find(|c| c.token == to)
                    && c.subscribed
                    && c.phase == SetPhase::Waiting
                    && c.todo == Todo::Attempt
                    && c.due > s.redis.now_ms() - T0_MS
                {
                    c.due = s.redis.now_ms() - T0_MS;
                }
            }
        }
        self.after_exec(s, i, key, &before)?;
        outcome.reply.into_replies().map_err(|e| Violation {
            invariant: "no script ever errors",
            detail: e,
        })
    }

    /// Client `i` takes the reply to its request to member `j`.
    fn deliver(
        &mut self,
        s: &mut SetState,
        i: usize,
        j: usize,
        req: Req,
        replies: &[Reply],
    ) -> Result<(), Violation> {
        let now = s.now();
        let spec = self.config.clients[i].clone();
        let n = spec.keys.len();
        match (s.clients[i].todo, req) {
            // A keep-held renewal (set.rs:141-150).
            (Todo::Attempt, Req::Renew { .. }) => match replies {
                [Reply::Int(1), Reply::Int(ttl), ..] => {
                    s.clients[i].held[j] = Some((now, ttl.unsigned_abs()));
                    s.clients[i].due = now;
                    self.reached.insert(SetSometimes::KeptHeld);
                }
                [Reply::Int(0)] => {
                    let c = &mut s.clients[i];
                    c.todo = Todo::GiveBack { from: 0 };
                    c.due = now;
                }
                other => return fail("every reply decodes", format!("renew replied {other:?}")),
            },
            (Todo::Attempt, Req::Acquire { .. }) => {
                let claim = Duration::from_millis(self.claim_ms);
                let answer = decode_answer(replies, moment(now), claim).map_err(|e| Violation {
                    invariant: "every reply decodes",
                    detail: e.to_string(),
                })?;
                let holding = s.clients[i].held.iter().any(Option::is_some);
                let c = &mut s.clients[i];
                c.touched[j] = true;
                // waiter.rs `run`: Redis answered (`Sleeps::answered`).
                c.errors.reset();
                match answer {
                    Answer::Granted { validity, .. } => {
                        c.held[j] = Some((ms_of(validity.anchor), millis(validity.ttl)));
                        c.due = now;
                        let all = c.held.iter().all(Option::is_some);
                        if all || (self.config.rule == Rule::StartWithFirst && j == 0) {
                            // set.rs:300-311: granted with every member; the engine runs
                            // the command, renewing at the earliest member's schedule.
                            let v = Self::earliest(c).unwrap_or((now, 0));
                            c.phase = SetPhase::Running { renewals: 0 };
                            c.subscribed = false;
                            c.todo = if spec.renewals == 0 {
                                Todo::Release {
                                    from: 0,
                                    succeeded: true,
                                }
                            } else {
                                Todo::Renew { from: 0 }
                            };
                            c.due = self.next_renewal(v);
                            if n > 1 {
                                self.reached.insert(SetSometimes::SetRan);
                            }
                        }
                    }
                    Answer::Busy(holders) | Answer::Queued { holders, .. }
                        if !c.subscribed && !c.join =>
                    {
                        // waiter.rs `run`: a busy first attempt subscribes and joins at once.
                        let _ = holders;
                        c.phase = SetPhase::Waiting;
                        c.subscribed = true;
                        c.join = true;
                        c.due = now;
                    }
                    Answer::Busy(holders) => {
                        c.phase = SetPhase::Waiting;
                        let cap = self.cap(holding);
                        let ttl = bounded_ttl(holders.first.ttl, cap);
                        let seen = Seen {
                            mode: WaitMode::Notify,
                            ttl,
                            refresh_in: None,
                            position: None,
                            after_notice: false,
                        };
                        let sleep = next_sleep(&seen, &mut c.spin, &mut c.no_expiry, jitter_max);
                        c.due = now + millis(sleep).max(1);
                    }
                    Answer::Queued {
                        holders,
                        position,
                        refresh_in,
                    } => {
                        c.phase = SetPhase::Waiting;
                        if holding {
                            self.reached.insert(SetSometimes::HeldWhileWaiting);
                        }
                        // set.rs:182-206 `bounded`: cut to a third of the claim while a member
                        // is held.
                        let cap = self.cap(holding);
                        let seen = Seen {
                            mode: WaitMode::Notify,
                            ttl: bounded_ttl(holders.first.ttl, cap),
                            refresh_in: Some(cap.map_or(refresh_in, |cap| refresh_in.min(cap))),
                            position: Some(position),
                            after_notice: false,
                        };
                        let sleep = next_sleep(&seen, &mut c.spin, &mut c.no_expiry, jitter_max);
                        c.due = now + millis(sleep).max(1);
                    }
                    other => {
                        return fail(
                            "every reply decodes",
                            format!("{}: unexpected {other:?}", c.token),
                        );
                    }
                }
            }
            (Todo::Renew { from }, Req::Renew { .. }) => {
                let c = &mut s.clients[i];
                match replies {
                    [Reply::Int(1), Reply::Int(ttl), ..] => {
                        c.held[j] = Some((now, ttl.unsigned_abs()));
                    }
                    [Reply::Int(0)] => c.lost = true,
                    other => {
                        return fail("every reply decodes", format!("renew replied {other:?}"));
                    }
                }
                c.due = now;
                if from + 1 < n {
                    c.todo = Todo::Renew { from: from + 1 };
                } else if c.lost {
                    // renew.rs: a member gone: the child is killed at once, then run.rs
                    // releases every member.
                    c.phase = SetPhase::Releasing;
                    c.todo = Todo::Release {
                        from: 0,
                        succeeded: false,
                    };
                } else {
                    let SetPhase::Running { renewals } = c.phase else {
                        return Ok(());
                    };
                    let renewals = renewals + 1;
                    c.phase = SetPhase::Running { renewals };
                    let v = Self::earliest(c).unwrap_or((now, 0));
                    c.due = self.next_renewal(v);
                    c.todo = if renewals >= spec.renewals {
                        Todo::Release {
                            from: 0,
                            succeeded: true,
                        }
                    } else {
                        Todo::Renew { from: 0 }
                    };
                }
            }
            (Todo::Release { from, succeeded }, Req::Release { .. }) => {
                crate::lock::protocol::ownership(replies).map_err(|e| Violation {
                    invariant: "every reply decodes",
                    detail: e.to_string(),
                })?;
                let c = &mut s.clients[i];
                c.phase = SetPhase::Releasing;
                c.held[j] = None;
                c.touched[j] = false;
                c.due = now;
                if from + 1 < n {
                    c.todo = Todo::Release {
                        from: from + 1,
                        succeeded,
                    };
                } else {
                    c.phase = SetPhase::Done { crashed: false };
                    c.todo = Todo::Nothing;
                    c.subscribed = false;
                }
            }
            (Todo::GiveBack { .. }, Req::Release { .. }) => {
                let c = &mut s.clients[i];
                c.held[j] = None;
                c.touched[j] = false;
                c.due = now;
                let more = (j + 1..n).find(|&k| self.gives_back(c, k));
                c.todo = match more {
                    Some(k) => Todo::GiveBack { from: k },
                    // run.rs: a wait that ran out ends (75) once everything was given back.
                    None if c.gave_up => {
                        c.phase = SetPhase::Done { crashed: false };
                        c.subscribed = false;
                        Todo::Nothing
                    }
                    // waiter.rs `run`: `NoPlace` is `Again`: attempt again at once, joining.
                    None => {
                        c.join = true;
                        Todo::Attempt
                    }
                };
            }
            (todo, req) => {
                return fail(
                    "every reply decodes",
                    format!("{req:?} answered in {todo:?}"),
                );
            }
        }
        Ok(())
    }

    /// Whether giving back asks member `j` (set.rs:159-161: held, or an attempt was sent to
    /// it).
    fn gives_back(&self, c: &SetClient, j: usize) -> bool {
        if self.config.rule == Rule::GiveBackSkipsHeld {
            return c.held[j].is_none() && c.touched[j];
        }
        c.held[j].is_some() || c.touched[j]
    }

    fn cap(&self, holding: bool) -> Option<Duration> {
        holding.then(|| Duration::from_millis(self.claim_ms / 3).max(Duration::from_millis(100)))
    }

    /// The live entry of `key` at `now` (absolute ms).
    fn entry<'a>(ks: &'a Keyspace, key: &str, now: u64) -> Option<&'a Entry> {
        ks.iter()
            .find(|(k, _)| *k == key.as_bytes())
            .map(|(_, e)| e)
            .filter(|e| e.expires_at.is_none_or(|at| now <= at))
    }

    /// Who holds lock `key` in Redis.
    fn lock_holder(&self, ks: &Keyspace, key: usize, now: u64) -> Option<String> {
        match Self::entry(ks, &self.keys[key][0], now).map(|e| &e.value) {
            Some(Value::Str(t)) => Some(text(t)),
            _ => None,
        }
    }

    /// The head of lock `key`'s line.
    fn line_head(&self, ks: &Keyspace, key: usize, now: u64) -> Option<String> {
        match Self::entry(ks, &self.keys[key][3], now).map(|e| &e.value) {
            Some(Value::ZSet(members)) => members
                .iter()
                .min_by(|x, y| x.0.0.total_cmp(&y.0.0))
                .map(|(_, m)| text(m)),
            _ => None,
        }
    }

    /// Whether `token` is in lock `key`'s line.
    fn in_line(&self, ks: &Keyspace, key: usize, token: &str, now: u64) -> bool {
        match Self::entry(ks, &self.keys[key][3], now).map(|e| &e.value) {
            Some(Value::ZSet(members)) => members.iter().any(|(_, m)| m == token.as_bytes()),
            _ => false,
        }
    }

    /// After a script on `key`: every key but the fence expires; a key of a set that crashed
    /// while waiting going to another client.
    fn after_exec(
        &mut self,
        s: &SetState,
        i: usize,
        key: usize,
        before: &Keyspace,
    ) -> Result<(), Violation> {
        let now = s.redis.now_ms();
        for (k, entry) in s.redis.keyspace.iter() {
            let k = text(k);
            if entry.expires_at.is_none() && !k.ends_with(":fence") && !k.ends_with(":protocol") {
                return fail(
                    "every key but the fence has a TTL",
                    format!("after {}'s script, {k} has no expiry", s.clients[i].token),
                );
            }
        }
        let was = self.lock_holder(before, key, now);
        let is = self.lock_holder(&s.redis.keyspace, key, now);
        if is.is_some() && was != is {
            let lost_by_crash = s.clients.iter().enumerate().any(|(j, c)| {
                c.crashed.is_some_and(|(_, before_command)| before_command)
                    && Some(&c.token) != is.as_ref()
                    && self.orders[j].len() > 1
                    && self.orders[j].first() == Some(&key)
            });
            if lost_by_crash {
                self.reached.insert(SetSometimes::FreedAfterCrash);
            }
        }
        Ok(())
    }

    /// Checked in every state.
    fn check(&mut self, s: &mut SetState) -> Result<(), Violation> {
        let now = s.now();
        let abs = s.redis.now_ms();
        let ks = &s.redis.keyspace;
        let redis_holder: Vec<Option<String>> = (0..KEYS.len())
            .map(|k| self.lock_holder(ks, k, abs))
            .collect();
        // Per key, at most one client believes it holds it (within its validity), and each
        // such belief is backed by Redis.
        for (k, in_redis) in redis_holder.iter().enumerate() {
            let mut believers = Vec::new();
            for (i, c) in s.clients.iter().enumerate() {
                if matches!(c.phase, SetPhase::Done { .. }) {
                    continue;
                }
                let Some(j) = self.orders[i].iter().position(|&x| x == k) else {
                    continue;
                };
                let Some((anchor, ttl)) = c.held[j] else {
                    continue;
                };
                if now < anchor + ttl {
                    believers.push(c.token.clone());
                    if in_redis.as_deref() != Some(c.token.as_str()) {
                        return fail(
                            "a holder's belief is backed by Redis until its validity ends",
                            format!(
                                "{} believes it holds {} until {} but Redis holds it for {in_redis:?}",
                                c.token,
                                KEYS[k],
                                anchor + ttl
                            ),
                        );
                    }
                }
                // A waiting set keeps the members it took (renewed to the claim, set.rs:
                // 125-153): while it waits for the next, Redis holds them for it.
                if c.phase == SetPhase::Waiting && in_redis.as_deref() != Some(c.token.as_str()) {
                    return fail(
                        "a waiting set keeps its earlier keys",
                        format!(
                            "{} waits for its next key believing it holds {}, which Redis holds \
                             for {in_redis:?}",
                            c.token, KEYS[k]
                        ),
                    );
                }
            }
            if believers.len() > 1 {
                return fail(
                    "at most one holder per key",
                    format!("{believers:?} all hold {}", KEYS[k]),
                );
            }
        }
        // A set runs its command only with every key: until its kill deadline, Redis holds
        // each of its members for it.
        for (i, c) in s.clients.iter().enumerate() {
            if let SetPhase::Running { .. } = c.phase
                && Self::earliest(c).is_none_or(|v| now < self.kill_at(v))
            {
                for &k in &self.orders[i] {
                    if redis_holder[k].as_deref() != Some(c.token.as_str()) {
                        return fail(
                            "a set runs its command only with every key",
                            format!(
                                "{} runs its command while Redis holds {} for {:?}",
                                c.token, KEYS[k], redis_holder[k]
                            ),
                        );
                    }
                }
            }
        }
        // A set killed while waiting frees its keys within the claim: what it held was renewed
        // at most to the claim, before the crash.
        for (i, c) in s.clients.iter().enumerate() {
            let Some((at, true)) = c.crashed else {
                continue;
            };
            for (j, held) in c.held.iter().enumerate() {
                let k = self.orders[i][j];
                if held.is_some()
                    && now > at + self.claim_ms
                    && redis_holder[k].as_deref() == Some(c.token.as_str())
                {
                    return fail(
                        "a set killed while waiting frees its keys within the claim",
                        format!(
                            "{} crashed at {at} holding {}, still held for it at {now} (claim {} ms)",
                            c.token, KEYS[k], self.claim_ms
                        ),
                    );
                }
            }
        }
        // A run whose wait ran out gave everything back: once it ended, no key is held for it
        // and it is in no line.
        for c in &s.clients {
            if !(c.gave_up && matches!(c.phase, SetPhase::Done { .. })) {
                continue;
            }
            for k in 0..KEYS.len() {
                if redis_holder[k].as_deref() == Some(c.token.as_str())
                    || self.in_line(ks, k, &c.token, abs)
                {
                    return fail(
                        "a run that gave up leaves nothing behind",
                        format!(
                            "{} gave up, but Redis still holds {} for it or keeps its place in line",
                            c.token, KEYS[k]
                        ),
                    );
                }
            }
        }
        // No cycle in the wait-for graph: a client waiting for key k (the first of its members
        // it does not hold) waits for k's holder and for the head of k's line.
        let waits_for = |i: usize| -> Vec<usize> {
            let c = &s.clients[i];
            // (A client giving everything back waits for nobody: it is leaving.)
            if c.phase != SetPhase::Waiting || c.todo != Todo::Attempt {
                return Vec::new();
            }
            let Some(j) = c.held.iter().position(Option::is_none) else {
                return Vec::new();
            };
            let k = self.orders[i][j];
            // (Handed k, not yet taken up: it waits for nobody.)
            if redis_holder[k].as_deref() == Some(c.token.as_str()) {
                return Vec::new();
            }
            // (The head of the line only for a client in it, behind the head.)
            let head = self
                .line_head(ks, k, abs)
                .filter(|_| self.in_line(ks, k, &c.token, abs));
            let mut on = Vec::new();
            for t in [redis_holder[k].clone(), head].into_iter().flatten() {
                if let Some(d) = s.clients.iter().position(|c| c.token == t)
                    && d != i
                    && !matches!(s.clients[d].phase, SetPhase::Done { .. })
                {
                    on.push(d);
                }
            }
            on
        };
        let graph: Vec<Vec<usize>> = (0..s.clients.len()).map(waits_for).collect();
        if self.config.check_cycles
            && let Some(cycle) = find_cycle(&graph)
        {
            let names: Vec<String> = cycle.iter().map(|&i| s.clients[i].token.clone()).collect();
            return fail(
                "no cycle in the wait-for graph",
                format!(
                    "{} wait for each other: {}",
                    names.join(" -> "),
                    cycle
                        .iter()
                        .map(|&i| {
                            let c = &s.clients[i];
                            let held: Vec<&str> = c
                                .held
                                .iter()
                                .enumerate()
                                .filter(|(_, h)| h.is_some())
                                .map(|(j, _)| KEYS[self.orders[i][j]])
                                .collect();
                            format!("{} holds {held:?}", c.token)
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        Ok(())
    }

    /// A state with nothing left to do (the horizon reached): with no fault, every client
    /// ended.
    fn terminal(&self, s: &SetState) -> Result<(), Violation> {
        // (With no fault: a crash or a failed attempt may leave a client waiting longer.)
        if s.crashes < self.config.crashes || s.errors < self.config.errors {
            return Ok(());
        }
        let left: Vec<String> = s
            .clients
            .iter()
            .filter(|c| !matches!(c.phase, SetPhase::Done { .. }))
            .map(|c| format!("{} ({:?})", c.token, c.phase))
            .collect();
        if !left.is_empty() {
            return fail(
                "every client ends (no deadlock)",
                format!("at {} (the horizon), {} not done", s.now(), left.join(", ")),
            );
        }
        Ok(())
    }
}

/// The ttl the engine sleeps on, cut to `cap` (set.rs:188-193).
fn bounded_ttl(ttl: HolderTtl, cap: Option<Duration>) -> HolderTtl {
    match (ttl, cap) {
        (HolderTtl::Expires(d), Some(cap)) => HolderTtl::Expires(d.min(cap)),
        (HolderTtl::Never, Some(cap)) => HolderTtl::Expires(cap),
        (ttl, None) => ttl,
    }
}

/// A cycle in a directed graph (adjacency lists), if any.
fn find_cycle(graph: &[Vec<usize>]) -> Option<Vec<usize>> {
    fn visit(
        g: &[Vec<usize>],
        v: usize,
        color: &mut [u8],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        color[v] = 1;
        stack.push(v);
        for &w in &g[v] {
            if color[w] == 1 {
                let from = stack.iter().position(|&x| x == w).unwrap_or(0);
                return Some(stack[from..].to_vec());
            }
            if color[w] == 0
                && let Some(c) = visit(g, w, color, stack)
            {
                return Some(c);
            }
        }
        stack.pop();
        color[v] = 2;
        None
    }
    let mut color = vec![0u8; graph.len()];
    for v in 0..graph.len() {
        if color[v] == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(graph, v, &mut color, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

/// What a set run explored.
#[derive(Clone, Debug)]
pub struct SetExplored {
    pub states: usize,
    pub transitions: usize,
    pub depth: usize,
    pub elapsed: Duration,
    pub reached: BTreeSet<SetSometimes>,
}

#[derive(Clone, Debug)]
pub struct SetCounterexample {
    pub config: &'static str,
    pub trace: Vec<SetAction>,
    pub violation: Violation,
}

/// Explore every state of `config` breadth first: the first violation (at the fewest steps)
/// with its trace, or what was explored.
pub fn explore_sets(
    config: SetConfig,
    patches: Vec<Patch>,
) -> Result<SetExplored, Box<SetCounterexample>> {
    let started = Instant::now();
    let name = config.name;
    let mut world = SetWorld::new(config, patches).unwrap_or_else(|e| panic!("{e}"));
    let initial = world.initial();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut parents: Vec<(u32, Option<SetAction>)> = vec![(0, None)];
    let mut frontier: VecDeque<(u32, SetState, usize)> = VecDeque::new();
    seen.insert(initial.fingerprint());
    frontier.push_back((0, initial, 0));
    let mut transitions = 0usize;
    let mut depth = 0usize;
    let trace_to = |parents: &Vec<(u32, Option<SetAction>)>, mut at: u32| {
        let mut trace = Vec::new();
        while let (parent, Some(action)) = parents[at as usize] {
            trace.push(action);
            at = parent;
        }
        trace.reverse();
        trace
    };
    while let Some((index, state, d)) = frontier.pop_front() {
        depth = depth.max(d);
        let actions = world.actions(&state);
        if actions.is_empty()
            && let Err(violation) = world.terminal(&state)
        {
            return Err(Box::new(SetCounterexample {
                config: name,
                trace: trace_to(&parents, index),
                violation,
            }));
        }
        for action in actions {
            transitions += 1;
            match world.step(&state, action) {
                Ok(next) => {
                    if seen.insert(next.fingerprint()) {
                        let at = u32::try_from(parents.len()).expect("fewer than 2^32 states");
                        parents.push((index, Some(action)));
                        frontier.push_back((at, next, d + 1));
                        assert!(
                            parents.len() <= world.config.max_states,
                            "{name}: more than {} states",
                            world.config.max_states
                        );
                    }
                }
                Err(violation) => {
                    let mut trace = trace_to(&parents, index);
                    trace.push(action);
                    return Err(Box::new(SetCounterexample {
                        config: name,
                        trace,
                        violation,
                    }));
                }
            }
        }
    }
    Ok(SetExplored {
        states: parents.len(),
        transitions,
        depth,
        elapsed: started.elapsed(),
        reached: world.reached,
    })
}

/// Replay `trace`: the state it ends in, or the violation it reaches.
pub fn replay_sets(config: SetConfig, trace: &[SetAction]) -> Result<SetState, Box<Violation>> {
    let mut world = SetWorld::new(config, Vec::new()).unwrap_or_else(|e| panic!("{e}"));
    let mut state = world.initial();
    for (n, &action) in trace.iter().enumerate() {
        assert!(
            world.actions(&state).contains(&action),
            "step {}: {action:?} is not possible here",
            n + 1
        );
        state = world.step(&state, action).map_err(Box::new)?;
    }
    if world.actions(&state).is_empty() {
        world.terminal(&state).map_err(Box::new)?;
    }
    Ok(state)
}

/// A counterexample as numbered steps (who sent what to which key, what changed in Redis).
pub fn render_sets(config: SetConfig, cx: &SetCounterexample) -> String {
    let mut world = SetWorld::new(config, Vec::new()).unwrap_or_else(|e| panic!("{e}"));
    let mut state = world.initial();
    let mut out = format!(
        "counterexample in {} ({} steps; times in ms from the start):\n",
        cx.config,
        cx.trace.len()
    );
    for (n, &action) in cx.trace.iter().enumerate() {
        let who = |i: usize| state.clients[i].token.clone();
        let what = match action {
            SetAction::Step(i) => match world.plan(&state, i) {
                Some((j, req)) => format!(
                    "{} sends {req:?} to {} ({:?})",
                    who(i),
                    KEYS[world.orders[i][j]],
                    state.clients[i].todo
                ),
                None => format!("{} has nothing to send", who(i)),
            },
            SetAction::Release(i) => format!("{}'s work ends: release", who(i)),
            SetAction::Kill(i) => format!("{}'s kill deadline: the child is killed", who(i)),
            SetAction::GiveUp(i) => format!("{}'s --wait runs out: give everything back", who(i)),
            SetAction::Fail(i) => match world.plan(&state, i) {
                Some((j, _)) => format!(
                    "{}'s attempt on {} fails (not applied): it sleeps the error backoff",
                    who(i),
                    KEYS[world.orders[i][j]]
                ),
                None => format!("{} fails", who(i)),
            },
            SetAction::Crash(i) => format!("{} crashes", who(i)),
            SetAction::Tick(t) => format!("time passes to {t}"),
        };
        let before = state.redis.keyspace.clone();
        let result = world.step(&state, action);
        out.push_str(&format!("{:>3}. [{}] {what}\n", n + 1, state.now()));
        match result {
            Ok(next) => {
                for line in super::diff(&before, &next.redis.keyspace) {
                    out.push_str(&format!("       {line}\n"));
                }
                state = next;
            }
            Err(v) => {
                out.push_str(&format!("     BROKEN: {}: {}\n", v.invariant, v.detail));
                return out;
            }
        }
    }
    if let Err(v) = world.terminal(&state) {
        out.push_str(&format!("     BROKEN: {}: {}\n", v.invariant, v.detail));
    }
    out
}
