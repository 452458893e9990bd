//! The explorer: every interleaving, within bounds, of a few distlock clients running the real
//! scripts on the model Redis (tests only; see `docs/verification.md`, "The explorer").
//!
//! A breadth-first search over states (the model Redis, each client's state machine, the fault
//! budget), each state hashed to be visited once; the first violation found is so at the
//! fewest steps, and its trace (a list of [`Action`]s) replays from the start ([`replay`]) and
//! prints as numbered steps a person can follow ([`render`]).
//!
//! The clients are explicit state machines, not the engine (`Waiter::run` and `renew_loop`
//! block on real clocks and threads): they build their requests with distlock's own functions
//! (`protocol::acquire_args`, `renew_args`, `release_args`), decode replies with
//! `protocol::decode_answer`, time their attempts with `wait::sleep::next_sleep` (its jitter
//! fixed at the top of each range) and their renewals and kill deadline with
//! `renew::Deadlines`. The control rules between these calls are restated here, each citing
//! the line it restates.
//!
//! Time moves only by [`Action::Tick`], to the next instant that matters (a client's due
//! attempt, renewal or kill deadline, a key's expiry and the millisecond after it, a place in
//! line or a semaphore slot ending and the millisecond after it), and never past a live,
//! unpaused client's mandatory action (a request in flight, a reply or a wake-up to take, an
//! attempt or renewal that is due): requests take no time, unless lost.

mod check;
mod doorbell;
pub mod sets;
#[cfg(test)]
mod sets_tests;
mod symmetry;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

pub use check::Sometimes;

use super::{Keyspace, Patch, Redis, Resp, Runner, ScriptTime};
use crate::backend::Reply;
use crate::clock::Moment;
use crate::lock::protocol::{
    ACQUIRE, RELEASE, RENEW, acquire_args, decode_answer, millis, release_args, renew_args,
};
use crate::lock::{AfterRun, Answer, Holder, LockName, Queueing, Request, Token, Validity};
use crate::renew::Deadlines;
use crate::wait::WaitMode;
use crate::wait::sleep::{Backoff, NO_EXPIRY_CAP, SPIN_BASE, SPIN_CAP, Seen, next_sleep};

/// The model's epoch on the server's clock (ms): 2026-11-28 00:00:00 UTC. Times in traces are
/// counted from it.
pub const T0_MS: u64 = 1_795_824_000_000;

/// How an attempt takes a place in line (`lock::Queueing`, which is not hashable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    Try,
    Join,
    Supersede,
    Replace,
    /// A doorbell waiter's later attempt (see `doorbell.rs`): sent behind a pop that blocks
    /// up to `block` ms, asking for the claim plus `block`; 0: a plain attempt.
    Refresh {
        block: u64,
    },
}

impl Mode {
    fn queueing(self) -> Queueing {
        match self {
            Mode::Try => Queueing::Try,
            Mode::Join => Queueing::Join,
            Mode::Supersede => Queueing::Supersede,
            Mode::Replace => Queueing::Replace,
            Mode::Refresh { .. } => Queueing::Refresh,
        }
    }
}

/// What one client does: one wait, one hold, one release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientSpec {
    /// 1: a mutex (a shared lock's writer); N: a semaphore of N; 0: a shared lock's reader.
    pub limit: u32,
    /// Spin mode (polls, is never handed the lock) instead of notify.
    pub polls: bool,
    /// How it waits once its first `try` found the lock busy: join, supersede or replace.
    pub place: Mode,
    /// `--min-interval`, `--cooldown` (ms).
    pub min_interval_ms: Option<u64>,
    pub cooldown_ms: Option<u64>,
    /// It starts at any instant up to this one (ms after T0).
    pub start_by: u64,
    /// Its work may end at any instant (otherwise only after its renewals).
    pub early_release: bool,
    /// It may give up waiting at any instant.
    pub give_up: bool,
    /// How many renewals before its work ends.
    pub renewals: u8,
    /// It waits on its doorbell (`wake = list`; see `doorbell.rs`).
    pub doorbell: bool,
    /// A doorbell waiter that is told of its turn ONLY by its doorbell, as distlock's is
    /// (waiter.rs:159-201: in line with a doorbell, `run` waits on it and `continue`s before
    /// the `subscribe` at waiter.rs:203-204; it subscribes only once the server refused the
    /// pop, waiter.rs:319-322, which the model never does). Without it a doorbell waiter is also
    /// subscribed to its wake channel (an older model, kept by C7): a grant published instead
    /// of pushed would still reach it.
    pub bell_only: bool,
}

impl ClientSpec {
    /// A notified mutex waiter that joins the line, starts at T0, holds through one renewal or
    /// releases earlier.
    pub fn mutex() -> ClientSpec {
        ClientSpec {
            limit: 1,
            polls: false,
            place: Mode::Join,
            min_interval_ms: None,
            cooldown_ms: None,
            start_by: 0,
            early_release: true,
            give_up: false,
            renewals: 1,
            doorbell: false,
            bell_only: false,
        }
    }

    /// A doorbell waiter that joins at once, woken by its doorbell only (`bell_only`).
    pub fn bell_only() -> ClientSpec {
        ClientSpec {
            doorbell: true,
            bell_only: true,
            ..ClientSpec::mutex()
        }
    }
}

/// One configuration: the clients, the timing, the faults, the horizon, and the interesting
/// states it must reach.
#[derive(Clone, Debug)]
pub struct Config {
    pub name: &'static str,
    pub clients: Vec<ClientSpec>,
    /// `--ttl`, `--grace`, `--redis-timeout`, `--renew-every` (ms).
    pub ttl_ms: u64,
    pub grace_ms: u64,
    pub timeout_ms: u64,
    pub every_ms: u64,
    /// No state later than this (ms after T0) is explored.
    pub horizon_ms: u64,
    /// Faults: lost requests or replies per client, crashes, pauses (SIGSTOP), lost wake-ups.
    pub losses: u8,
    pub crashes: u8,
    pub pauses: u8,
    pub lost_wakes: u8,
    /// At most this many faults of any kind (lost requests, replies and wake-ups, crashes,
    /// pauses) in one trace, on top of the budgets above (`None`: only those).
    pub max_faults: Option<u8>,
    /// Clients with the same spec are interchangeable: states that differ only by a renaming of
    /// such clients (their tokens, in the keyspace and everywhere else) are visited once (see
    /// `symmetry.rs`).
    pub symmetry: bool,
    /// Stop (and fail) past this many states.
    pub max_states: usize,
    /// What the run must reach to be more than vacuous.
    pub sometimes: Vec<Sometimes>,
}

impl Config {
    /// The most holders at once (a shared lock's readers, limit 0, are not counted: see
    /// [`Config::shared`]).
    pub fn limit(&self) -> u32 {
        self.clients.iter().map(|c| c.limit).max().unwrap_or(1)
    }

    /// Some clients are readers of a shared lock (limit 0; the others its writers, limit 1).
    pub fn shared(&self) -> bool {
        self.clients.iter().any(|c| c.limit == 0)
    }

    fn deadlines(&self) -> Deadlines {
        Deadlines {
            ttl: Duration::from_millis(self.ttl_ms),
            grace: Duration::from_millis(self.grace_ms),
        }
    }

    /// The claim an attempt asks for (`Deadlines::claim`).
    pub fn claim_ms(&self) -> u64 {
        millis(
            self.deadlines()
                .claim(Duration::from_millis(self.timeout_ms)),
        )
    }

    /// A one-line summary of the bounds (printed with every run).
    pub fn bounds(&self) -> String {
        let polls = self.clients.iter().filter(|c| c.polls).count();
        format!(
            "{} clients (limit {}, {} polling), ttl {} ms, claim {} ms, horizon {} ms, \
             losses {}/client, crashes {}, pauses {}, lost wake-ups {}, {}{}",
            self.clients.len(),
            self.limit(),
            polls,
            self.ttl_ms,
            self.claim_ms(),
            self.horizon_ms,
            self.losses,
            self.crashes,
            self.pauses,
            self.lost_wakes,
            match self.max_faults {
                Some(f) => format!("at most {f} faults per trace"),
                None => "no fault budget".into(),
            },
            if self.symmetry {
                ", symmetry reduction"
            } else {
                ""
            }
        )
    }
}

/// A request a client sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Acquire(Mode),
    Renew,
    Release { succeeded: bool },
}

/// A request and when it was sent (ms after T0): the anchor of the validity it may confirm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Req {
    pub kind: Kind,
    pub sent: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not started, or waiting before its first reply.
    Idle,
    /// In line at `position`.
    Waiting {
        position: u32,
    },
    /// Holding since a grant or renewal sent at `anchor`, set to `ttl` ms.
    Holding {
        anchor: u64,
        ttl: u64,
        renewals: u8,
    },
    /// Its release is due or in flight (work done, gave up, lost the lock or killed).
    Releasing,
    Done(End),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum End {
    Released,
    Superseded,
    Crashed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    pub token: String,
    pub phase: Phase,
    /// The next request, and when it is due (ms after T0).
    pub next: Option<(Kind, u64)>,
    /// A request sent, and its reply once the script ran.
    pub inflight: Option<(Req, Option<Resp>)>,
    /// A request whose client gave up on it (a lost request, or one sent before a crash) and
    /// that may still run at any later step.
    pub orphan: Option<Req>,
    /// A message on its wake channel, not yet taken.
    pub wake: Option<String>,
    pub subscribed: bool,
    pub paused: bool,
    pub losses_left: u8,
    /// Its release ran (for "an orphan landing after a release").
    pub released: bool,
    /// Its doorbell pipeline (see `doorbell.rs`).
    pub bell: Option<doorbell::Bell>,
    spin: Backoff,
    no_expiry: Backoff,
}

/// Fields that do not make two states different (not hashed, not compared).
#[derive(Clone, Debug, Default)]
pub struct Extra {
    pub last_exec_ms: Option<u64>,
}

impl Hash for Extra {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

impl PartialEq for Extra {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Extra {}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub redis: Redis,
    pub clients: Vec<Client>,
    pub crashes: u8,
    pub pauses: u8,
    pub lost_wakes: u8,
    /// What is left of the fault budget (`Config::max_faults`).
    pub faults: u8,
    /// Every grant seen in the keyspace (token, fence), and the largest fence.
    pub grants: BTreeSet<(String, u64)>,
    pub max_fence: u64,
    /// Since when a free lock has had a live notified waiter at the head of its line.
    pub stuck_since: Option<u64>,
    /// The latest grant, when it was a hand-off not yet taken up: the waiter handed the lock and
    /// when (ms after T0). Cleared by its take-up or by the next grant.
    pub handoff: Option<(String, u64)>,
    pub extra: Extra,
}

impl State {
    /// Now, in ms after T0.
    pub fn now(&self) -> u64 {
        self.redis.now_ms() - T0_MS
    }

    fn fingerprint(&self) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut hasher);
        hasher.finish()
    }
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Send the next request (due, or a start before its latest instant).
    Send(usize),
    /// The work ends early: release.
    Release(usize),
    /// Give up waiting: release the place.
    GiveUp(usize),
    /// The kill deadline passed without a renewal: the child is killed, the lock released.
    Kill(usize),
    /// The script of the request in flight runs.
    Exec(usize),
    /// The client's orphaned request runs.
    ExecOrphan(usize),
    /// The reply reaches the client.
    Deliver(usize),
    /// The request is lost on its way (it may still run later: an orphan); the client times out.
    LoseRequest(usize),
    /// The reply is lost (the script ran); the client times out.
    LoseReply(usize),
    /// A message on the client's wake channel reaches it.
    Wake(usize),
    LoseWake(usize),
    Crash(usize),
    Pause(usize),
    Resume(usize),
    /// Time moves to this instant (ms after T0).
    Tick(u64),
}

/// What broke, and where.
#[derive(Clone, Debug)]
pub struct Violation {
    pub invariant: &'static str,
    pub detail: String,
}

/// A violation and the shortest steps to it.
#[derive(Clone, Debug)]
pub struct Counterexample {
    pub config: &'static str,
    pub trace: Vec<Action>,
    pub violation: Violation,
}

/// What a run that found no violation explored.
#[derive(Clone, Debug)]
pub struct Explored {
    pub states: usize,
    pub transitions: usize,
    pub depth: usize,
    pub elapsed: Duration,
    pub reached: BTreeSet<Sometimes>,
}

/// The configuration's world: the runner (one Lua VM), the keys, the timing.
pub struct World {
    pub config: Config,
    runner: Runner,
    pub name: LockName,
    keys: Vec<String>,
    claim_ms: u64,
    holder: Holder,
    /// The groups of interchangeable clients (`Config::symmetry`).
    groups: Vec<Vec<usize>>,
    pub reached: BTreeSet<Sometimes>,
}

fn moment(ms: u64) -> Moment {
    Moment::from_nanos(ms * 1_000_000)
}

fn ms_of(m: Moment) -> u64 {
    m.as_nanos().div_ceil(1_000_000)
}

/// The top of every jitter range (a fixed choice: the search explores one schedule of sleeps).
fn jitter_max(max: Duration) -> Duration {
    max
}

impl World {
    pub fn new(config: Config, patches: Vec<Patch>) -> Result<World, String> {
        let name = LockName::new("", "k");
        let keys = name.keys().to_vec();
        if config.symmetry && (config.limit() > 1 || config.shared()) {
            // A waiter's reply names the soonest-expiring slot's holder, ties broken by token:
            // renaming is not a symmetry there (see symmetry.rs).
            return Err(format!("{}: no symmetry reduction with slots", config.name));
        }
        if let Some(c) = config.clients.iter().find(|c| c.bell_only && !c.doorbell) {
            return Err(format!(
                "{}: bell_only without a doorbell: {c:?}",
                config.name
            ));
        }
        if config.symmetry && config.clients.iter().any(|c| c.doorbell) {
            // A doorbell's key names its waiter's token: symmetry.rs renames values, not keys.
            return Err(format!(
                "{}: no symmetry reduction with doorbells",
                config.name
            ));
        }
        let mut world = World {
            claim_ms: config.claim_ms(),
            config,
            runner: Runner::with_patches(patches)?,
            name,
            keys,
            holder: Holder::default(),
            groups: Vec::new(),
            reached: BTreeSet::new(),
        };
        world.groups = world.symmetric_groups();
        Ok(world)
    }

    pub fn initial(&self) -> State {
        let clients = self
            .config
            .clients
            .iter()
            .enumerate()
            .map(|(i, spec)| Client {
                token: format!("c{i}"),
                phase: Phase::Idle,
                // waiter.rs `run`: a doorbell waiter joins at once.
                next: Some((
                    Kind::Acquire(if spec.doorbell { spec.place } else { Mode::Try }),
                    spec.start_by,
                )),
                inflight: None,
                orphan: None,
                wake: None,
                // (A doorbell waiter can be woken: its turn is pushed to it; unless it is
                // `bell_only`, the model also subscribes it to its wake channel.)
                subscribed: spec.doorbell && !spec.bell_only,
                paused: false,
                losses_left: self.config.losses,
                released: false,
                bell: None,
                spin: Backoff::new(SPIN_BASE, SPIN_CAP),
                no_expiry: Backoff::new(SPIN_CAP, NO_EXPIRY_CAP),
            })
            .collect();
        State {
            redis: Redis::at(T0_MS * 1000),
            clients,
            crashes: self.config.crashes,
            pauses: self.config.pauses,
            lost_wakes: self.config.lost_wakes,
            faults: self.config.max_faults.unwrap_or(u8::MAX),
            grants: BTreeSet::new(),
            max_fence: 0,
            stuck_since: None,
            handoff: None,
            extra: Extra::default(),
        }
    }

    /// The holder's kill deadline (`Deadlines::kill_at`, renew.rs).
    pub fn kill_at(&self, anchor: u64, ttl: u64) -> u64 {
        ms_of(self.config.deadlines().kill_at(Validity {
            anchor: moment(anchor),
            ttl: Duration::from_millis(ttl),
        }))
    }

    fn next_renewal(&self, anchor: u64, ttl: u64) -> u64 {
        ms_of(self.config.deadlines().next_renewal(
            Validity {
                anchor: moment(anchor),
                ttl: Duration::from_millis(ttl),
            },
            Duration::from_millis(self.config.every_ms),
        ))
    }

    /// Every step possible from `s`.
    pub fn actions(&self, s: &State) -> Vec<Action> {
        let now = s.now();
        let mut out = Vec::new();
        let mut urgent = false;
        let fault = s.faults > 0;
        for (i, c) in s.clients.iter().enumerate() {
            let spec = &self.config.clients[i];
            if c.orphan.is_some() {
                out.push(Action::ExecOrphan(i));
            }
            if matches!(c.phase, Phase::Done(_)) {
                continue;
            }
            if c.paused {
                out.push(Action::Resume(i));
                continue;
            }
            if let Some((_, reply)) = &c.inflight {
                urgent = true;
                if reply.is_none() {
                    out.push(Action::Exec(i));
                    if fault && c.losses_left > 0 {
                        out.push(Action::LoseRequest(i));
                    }
                } else {
                    out.push(Action::Deliver(i));
                    if fault && c.losses_left > 0 {
                        out.push(Action::LoseReply(i));
                    }
                }
            } else if c.wake.is_some() {
                urgent = true;
                out.push(Action::Wake(i));
                if fault && s.lost_wakes > 0 {
                    out.push(Action::LoseWake(i));
                }
            } else if let Phase::Holding { anchor, ttl, .. } = c.phase
                && now >= self.kill_at(anchor, ttl)
            {
                urgent = true;
                out.push(Action::Kill(i));
            } else if let Some((kind, due)) = c.next {
                if due <= now {
                    urgent = true;
                    out.push(Action::Send(i));
                } else if c.phase == Phase::Idle {
                    out.push(Action::Send(i));
                }
                if spec.early_release
                    && kind == Kind::Renew
                    && matches!(c.phase, Phase::Holding { .. })
                {
                    out.push(Action::Release(i));
                }
                if spec.give_up && matches!(c.phase, Phase::Waiting { .. }) {
                    out.push(Action::GiveUp(i));
                }
            } else if spec.give_up && doorbell::blocked(c) {
                out.push(Action::GiveUp(i));
            }
            if fault && s.crashes > 0 {
                out.push(Action::Crash(i));
            }
            if fault && s.pauses > 0 && c.inflight.is_none() && c.phase != Phase::Idle {
                out.push(Action::Pause(i));
            }
        }
        if !urgent && let Some(t) = self.next_instant(s) {
            out.push(Action::Tick(t));
        }
        out
    }

    /// The next instant that matters after now, within the horizon.
    fn next_instant(&self, s: &State) -> Option<u64> {
        let now = s.now();
        let mut candidates: Vec<u64> = Vec::new();
        for c in &s.clients {
            if matches!(c.phase, Phase::Done(_)) {
                continue;
            }
            if let Some((_, due)) = c.next {
                candidates.push(due);
            }
            if let Phase::Holding { anchor, ttl, .. } = c.phase {
                candidates.push(self.kill_at(anchor, ttl));
            }
        }
        candidates.extend(doorbell::instants(s));
        let rel = |abs: u64| abs.saturating_sub(T0_MS);
        for (key, entry) in s.redis.keyspace.iter() {
            if let Some(e) = entry.expires_at {
                candidates.extend([rel(e), rel(e) + 1]);
            }
            let key = String::from_utf8_lossy(key);
            if (key.ends_with(":alive") || key.ends_with(":slots"))
                && let super::Value::ZSet(members) = &entry.value
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

    /// The state after `a` from `s`, or the invariant it breaks.
    pub fn step(&mut self, s: &State, a: Action) -> Result<State, Violation> {
        let mut s = s.clone();
        let now = s.now();
        match a {
            Action::Send(i) => {
                let c = &mut s.clients[i];
                let (kind, _) = c.next.take().expect("a due request");
                if let Kind::Acquire(Mode::Refresh { block }) = kind
                    && block > 0
                {
                    doorbell::ring(self, &mut s, i, block);
                    s.redis.keyspace.expire_all(s.redis.now_ms());
                    check::state(self, &mut s)?;
                    return Ok(s);
                }
                c.inflight = Some((Req { kind, sent: now }, None));
                if let Kind::Release { .. } = kind {
                    c.phase = Phase::Releasing;
                }
            }
            Action::Release(i) | Action::GiveUp(i) => {
                doorbell::abandon(&mut s, i, false);
                let c = &mut s.clients[i];
                c.next = None;
                c.phase = Phase::Releasing;
                let succeeded = matches!(a, Action::Release(_));
                c.inflight = Some((
                    Req {
                        kind: Kind::Release { succeeded },
                        sent: now,
                    },
                    None,
                ));
            }
            Action::Kill(i) => {
                // renew.rs: at kill_at the child is killed (the guard does it even if distlock
                // is stopped); run.rs then releases, the work having failed.
                let c = &mut s.clients[i];
                c.phase = Phase::Releasing;
                c.next = Some((Kind::Release { succeeded: false }, now));
            }
            Action::Exec(i) => {
                let req = s.clients[i].inflight.as_ref().expect("in flight").0;
                let reply = self.exec(&mut s, i, req)?;
                doorbell::after_exec(self, &mut s, i, req, &reply, false)?;
                s.clients[i].inflight = Some((req, Some(reply)));
            }
            Action::ExecOrphan(i) => {
                let req = s.clients[i].orphan.take().expect("an orphan");
                if matches!(req.kind, Kind::Acquire(_)) && s.clients[i].released {
                    self.reached.insert(Sometimes::OrphanAfterRelease);
                }
                let reply = self.exec(&mut s, i, req)?;
                doorbell::after_exec(self, &mut s, i, req, &reply, true)?;
            }
            Action::Deliver(i) => {
                let (req, reply) = s.clients[i].inflight.take().expect("in flight");
                self.deliver(&mut s, i, req, reply.expect("a reply"))?;
            }
            Action::LoseRequest(i) | Action::LoseReply(i) => {
                let c = &mut s.clients[i];
                let (req, _) = c.inflight.take().expect("in flight");
                c.losses_left -= 1;
                s.faults -= 1;
                if matches!(a, Action::LoseRequest(_)) {
                    c.orphan = Some(req);
                }
                self.timed_out(&mut s, i, req);
            }
            Action::Wake(i) => {
                let c = &mut s.clients[i];
                let message = c.wake.take().expect("a message");
                match (&c.phase, message.as_str()) {
                    // waiter.rs `sleep`: a message on our channel ends the sleep: attempt now.
                    (Phase::Waiting { .. }, _) => {
                        if let Some((_, due)) = c.next.as_mut() {
                            *due = now;
                        }
                    }
                    // --replace: the holder stops its command and releases (run.rs).
                    (Phase::Holding { .. }, "replaced") => {
                        c.phase = Phase::Releasing;
                        c.next = Some((Kind::Release { succeeded: false }, now));
                    }
                    _ => {}
                }
            }
            Action::LoseWake(i) => {
                s.clients[i].wake = None;
                s.lost_wakes -= 1;
                s.faults -= 1;
            }
            Action::Crash(i) => {
                doorbell::abandon(&mut s, i, true);
                let c = &mut s.clients[i];
                if let Some((req, None)) = c.inflight.take()
                    && c.orphan.is_none()
                {
                    c.orphan = Some(req);
                }
                c.phase = Phase::Done(End::Crashed);
                c.next = None;
                c.wake = None;
                c.subscribed = false;
                c.paused = false;
                s.crashes -= 1;
                s.faults -= 1;
            }
            Action::Pause(i) => {
                s.clients[i].paused = true;
                s.pauses -= 1;
                s.faults -= 1;
            }
            Action::Resume(i) => s.clients[i].paused = false,
            Action::Tick(t) => {
                let before = s.redis.keyspace.clone();
                let then = s.redis.now_ms();
                s.redis.advance_to((T0_MS + t) * 1000);
                s.redis.keyspace.expire_all(T0_MS + t);
                doorbell::after_tick(&mut s);
                check::after_tick(self, &s, &before, then)?;
            }
        }
        s.redis.keyspace.expire_all(s.redis.now_ms());
        check::state(self, &mut s)?;
        Ok(s)
    }

    /// Run `req`'s script for client `i` now; check what it did.
    fn exec(&mut self, s: &mut State, i: usize, req: Req) -> Result<Resp, Violation> {
        let token = Token::from_text(&s.clients[i].token);
        let spec = &self.config.clients[i];
        let (script, keys, args) = match req.kind {
            Kind::Acquire(mode) => {
                let block = match mode {
                    Mode::Refresh { block } => block,
                    _ => 0,
                };
                let request = Request {
                    token: &token,
                    claim: Duration::from_millis(self.claim_ms + block),
                    ttl: Duration::from_millis(self.config.ttl_ms),
                    holder: &self.holder,
                    limit: spec.limit,
                    queueing: mode.queueing(),
                    polls: spec.polls,
                    after: AfterRun {
                        min_interval: spec.min_interval_ms.map(Duration::from_millis),
                        cooldown: spec.cooldown_ms.map(Duration::from_millis),
                    },
                    doorbell: spec.doorbell,
                };
                (
                    &ACQUIRE,
                    self.keys.clone(),
                    acquire_args(&request, mode.queueing()),
                )
            }
            Kind::Renew => {
                // single.rs `Held::keys`: a mutex renews its key and owner hash, a slot its
                // slots and holders.
                let keys = match spec.limit {
                    1 => vec![self.keys[0].clone(), self.keys[1].clone()],
                    // A reader: its slot and the marks that follow it.
                    0 => vec![
                        self.keys[6].clone(),
                        self.keys[7].clone(),
                        self.keys[0].clone(),
                        self.keys[9].clone(),
                    ],
                    _ => vec![self.keys[6].clone(), self.keys[7].clone()],
                };
                (
                    &RENEW,
                    keys,
                    renew_args(&token, Duration::from_millis(self.config.ttl_ms), None),
                )
            }
            Kind::Release { succeeded } => {
                (&RELEASE, self.keys.clone(), release_args(&token, succeeded))
            }
        };
        let before = s.redis.keyspace.clone();
        let same_ms = s.extra.last_exec_ms == Some(s.now());
        s.extra.last_exec_ms = Some(s.now());
        if same_ms {
            self.reached.insert(Sometimes::SameMillisecond);
        }
        doorbell::before_exec(s, i);
        let outcome = self
            .runner
            .eval(&mut s.redis, ScriptTime::Frozen, script, &keys, &args);
        if let Kind::Release { .. } = req.kind {
            s.clients[i].released = true;
        }
        for (channel, message) in &outcome.published {
            if message == "granted" {
                self.reached.insert(Sometimes::HandOff);
            }
            if message == "superseded" {
                self.reached.insert(Sometimes::Superseded);
            }
            if message == "replaced" {
                self.reached.insert(Sometimes::Replaced);
            }
            let Some(to) = channel.strip_prefix(&self.name.wake_channel("")) else {
                continue;
            };
            if let Some(c) = s.clients.iter_mut().find(|c| c.token == to)
                && c.subscribed
                && !matches!(c.phase, Phase::Done(_))
            {
                c.wake = Some(message.clone());
            }
        }
        doorbell::serve(self, s);
        check::after_exec(self, s, i, req, &before, &outcome.reply)?;
        Ok(outcome.reply)
    }

    /// Client `i` takes the reply to `req`.
    fn deliver(&mut self, s: &mut State, i: usize, req: Req, reply: Resp) -> Result<(), Violation> {
        let now = s.now();
        let replies = reply.into_replies().map_err(|e| Violation {
            invariant: "no script ever errors",
            detail: e,
        })?;
        let spec = self.config.clients[i].clone();
        let c = &mut s.clients[i];
        match req.kind {
            Kind::Acquire(mode) => {
                let claim_ms = match mode {
                    Mode::Refresh { block } => self.claim_ms + block,
                    _ => self.claim_ms,
                };
                let claim = Duration::from_millis(claim_ms);
                let answer =
                    decode_answer(&replies, moment(req.sent), claim).map_err(|e| Violation {
                        invariant: "every reply decodes",
                        detail: e.to_string(),
                    })?;
                match answer {
                    Answer::Granted { .. } => {
                        c.phase = Phase::Holding {
                            anchor: req.sent,
                            ttl: claim_ms,
                            renewals: 0,
                        };
                        c.next = Some((Kind::Renew, self.next_renewal(req.sent, claim_ms)));
                        doorbell::check_grant(self, c, req)?;
                    }
                    // waiter.rs `run`: a busy first attempt subscribes (notify) and takes its
                    // place in line at once (both modes).
                    // (A bell-only waiter joins at once and is never answered busy; were it, it
                    // would still not subscribe.)
                    Answer::Busy(_) => {
                        c.subscribed = !spec.polls && !spec.bell_only;
                        c.next = Some((Kind::Acquire(spec.place), now));
                    }
                    Answer::Queued {
                        holders,
                        position,
                        refresh_in,
                    } => {
                        let seen = Seen {
                            mode: if spec.polls {
                                WaitMode::Spin
                            } else {
                                WaitMode::Notify
                            },
                            ttl: holders.first.ttl,
                            refresh_in: Some(refresh_in),
                            position: Some(position),
                            after_notice: false,
                        };
                        let sleep = next_sleep(&seen, &mut c.spin, &mut c.no_expiry, jitter_max);
                        let sleep = millis(sleep).max(1);
                        c.phase = Phase::Waiting { position };
                        c.next = Some((Kind::Acquire(spec.place), now + sleep));
                        // waiter.rs `run`: in line, a doorbell waiter waits on it for the
                        // sleep, the refresh behind (when the claim plus the wait fits under
                        // the TTL: otherwise, here, a plain refresh after the sleep).
                        if spec.doorbell {
                            c.next = Some(if self.claim_ms + sleep <= self.config.ttl_ms {
                                (Kind::Acquire(Mode::Refresh { block: sleep }), now)
                            } else {
                                (Kind::Acquire(Mode::Refresh { block: 0 }), now + sleep)
                            });
                        }
                    }
                    // waiter.rs `found`: our place was gone: join again at once.
                    Answer::NoPlace if spec.doorbell => {
                        c.next = Some((Kind::Acquire(spec.place), now));
                    }
                    // (The other clients never refresh: they join on every attempt.)
                    Answer::NoPlace => {
                        return Err(Violation {
                            invariant: "every reply decodes",
                            detail: "no place, for an attempt that joins".into(),
                        });
                    }
                    Answer::Superseded(_) => {
                        c.phase = Phase::Done(End::Superseded);
                        c.next = None;
                        c.subscribed = false;
                    }
                    Answer::Conflict(conflict) => {
                        return Err(Violation {
                            invariant: "every reply decodes",
                            detail: format!("a conflict between clients of one use: {conflict:?}"),
                        });
                    }
                }
            }
            Kind::Renew => match replies.as_slice() {
                [Reply::Int(1), Reply::Int(ttl), rest @ ..] => {
                    let Phase::Holding { renewals, .. } = c.phase else {
                        return Ok(());
                    };
                    let ttl = ttl.unsigned_abs();
                    let renewals = renewals + 1;
                    c.phase = Phase::Holding {
                        anchor: req.sent,
                        ttl,
                        renewals,
                    };
                    self.reached.insert(Sometimes::Renewed);
                    let at = self.next_renewal(req.sent, ttl);
                    c.next = Some(if !rest.is_empty() {
                        // renew.rs: a renewal that reports a replacer stops the command; run.rs
                        // releases once it is dead.
                        c.phase = Phase::Releasing;
                        (Kind::Release { succeeded: false }, now)
                    } else if renewals >= spec.renewals {
                        (Kind::Release { succeeded: true }, at)
                    } else {
                        (Kind::Renew, at)
                    });
                }
                [Reply::Int(0)] => {
                    // renew.rs: the lock is gone: the child is killed at once, then released.
                    c.phase = Phase::Releasing;
                    c.next = Some((Kind::Release { succeeded: false }, now));
                }
                other => {
                    return Err(Violation {
                        invariant: "every reply decodes",
                        detail: format!("renew replied {other:?}"),
                    });
                }
            },
            Kind::Release { .. } => {
                crate::lock::protocol::ownership(&replies).map_err(|e| Violation {
                    invariant: "every reply decodes",
                    detail: e.to_string(),
                })?;
                c.phase = Phase::Done(End::Released);
                c.next = None;
                c.subscribed = false;
            }
        }
        Ok(())
    }

    /// Client `i`'s request timed out (its request or its reply was lost).
    fn timed_out(&self, s: &mut State, i: usize, req: Req) {
        let now = s.now();
        let c = &mut s.clients[i];
        match req.kind {
            // waiter.rs `after_failure`: the attempt is made again after the error backoff
            // (its first ceiling, 100 ms), with the same token (the lost one may still land).
            // (A doorbell waiter's: a plain refresh, waiter.rs `attempt`.)
            Kind::Acquire(Mode::Refresh { .. }) => {
                c.next = Some((Kind::Acquire(Mode::Refresh { block: 0 }), now + 100))
            }
            Kind::Acquire(mode) => c.next = Some((Kind::Acquire(mode), now + 100)),
            // renew.rs `renew_loop`: a failed renewal is retried at once, until the kill.
            Kind::Renew => c.next = Some((Kind::Renew, now)),
            // A release is sent once (single.rs `release`): what it leaves expires.
            Kind::Release { .. } => {
                c.phase = Phase::Done(End::Released);
                c.next = None;
                c.subscribed = false;
            }
        }
    }
}

/// Explore every state of `config` (with `patches` applied to the scripts): the first
/// violation found, with the shortest trace to it, or what was explored.
pub fn explore(config: Config, patches: Vec<Patch>) -> Result<Explored, Box<Counterexample>> {
    let started = Instant::now();
    let name = config.name;
    let mut world = World::new(config, patches).unwrap_or_else(|e| panic!("{e}"));
    let initial = world.initial();
    let mut seen: HashSet<u64> = HashSet::new();
    // Each visited state's parent and the action that led to it (for the trace).
    let mut parents: Vec<(u32, Option<Action>)> = vec![(0, None)];
    let mut frontier: VecDeque<(u32, State, usize)> = VecDeque::new();
    seen.insert(world.fingerprint(&initial));
    frontier.push_back((0, initial, 0));
    let mut transitions = 0usize;
    let mut depth = 0usize;
    let trace_to = |parents: &Vec<(u32, Option<Action>)>, mut at: u32| {
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
            && let Err(violation) = check::terminal(&world, &state)
        {
            return Err(Box::new(Counterexample {
                config: name,
                trace: trace_to(&parents, index),
                violation,
            }));
        }
        for action in actions {
            transitions += 1;
            match world.step(&state, action) {
                Ok(next) => {
                    if seen.insert(world.fingerprint(&next)) {
                        let at = u32::try_from(parents.len()).expect("fewer than 2^32 states");
                        parents.push((index, Some(action)));
                        frontier.push_back((at, next, d + 1));
                        assert!(
                            parents.len() <= world.config.max_states,
                            "{name}: more than {} states: raise max_states or lower the bounds",
                            world.config.max_states
                        );
                    }
                }
                Err(violation) => {
                    let mut trace = trace_to(&parents, index);
                    trace.push(action);
                    return Err(Box::new(Counterexample {
                        config: name,
                        trace,
                        violation,
                    }));
                }
            }
        }
    }
    Ok(Explored {
        states: parents.len(),
        transitions,
        depth,
        elapsed: started.elapsed(),
        reached: world.reached,
    })
}

/// Replay `trace` from the start: the state it ends in, or the violation it reaches.
pub fn replay(
    config: Config,
    patches: Vec<Patch>,
    trace: &[Action],
) -> Result<State, Box<Violation>> {
    let mut world = World::new(config, patches).unwrap_or_else(|e| panic!("{e}"));
    let mut state = world.initial();
    for &action in trace {
        assert!(
            world.actions(&state).contains(&action),
            "{action:?} is not possible here"
        );
        state = world.step(&state, action).map_err(Box::new)?;
    }
    Ok(state)
}

/// A counterexample as numbered steps: who did what, the reply, what changed in Redis, and at
/// the end the invariant broken.
pub fn render(config: Config, patches: Vec<Patch>, cx: &Counterexample) -> String {
    let mut world = World::new(config, patches).unwrap_or_else(|e| panic!("{e}"));
    let mut state = world.initial();
    let mut out = format!(
        "counterexample in {} ({} steps; times in ms from the start):\n",
        cx.config,
        cx.trace.len()
    );
    for (n, &action) in cx.trace.iter().enumerate() {
        let who = |i: usize| state.clients[i].token.clone();
        let what = match action {
            Action::Send(i) | Action::Release(i) | Action::GiveUp(i) => {
                let kind = match action {
                    Action::Send(_) => state.clients[i].next.map(|(k, _)| k),
                    Action::Release(_) => Some(Kind::Release { succeeded: true }),
                    _ => Some(Kind::Release { succeeded: false }),
                };
                format!("{} sends {:?}", who(i), kind.expect("a request"))
            }
            Action::Exec(i) => format!(
                "{}'s {:?} runs",
                who(i),
                state.clients[i].inflight.expect_kind()
            ),
            Action::ExecOrphan(i) => format!(
                "{}'s orphaned {:?} (sent at {}) runs",
                who(i),
                state.clients[i].orphan.map(|r| r.kind),
                state.clients[i].orphan.map_or(0, |r| r.sent)
            ),
            Action::Deliver(i) => format!(
                "{} gets the reply {}",
                who(i),
                state.clients[i]
                    .inflight
                    .as_ref()
                    .and_then(|(_, r)| r.as_ref())
                    .map(show_resp)
                    .unwrap_or_default()
            ),
            Action::LoseRequest(i) => format!("{}'s request is lost (it may run later)", who(i)),
            Action::LoseReply(i) => format!("{}'s reply is lost", who(i)),
            Action::Wake(i) => format!(
                "{} gets the wake-up {:?}",
                who(i),
                state.clients[i].wake.clone().unwrap_or_default()
            ),
            Action::LoseWake(i) => format!("{}'s wake-up is lost", who(i)),
            Action::Kill(i) => format!("{}'s kill deadline: the child is killed", who(i)),
            Action::Crash(i) => format!("{} crashes", who(i)),
            Action::Pause(i) => format!("{} is paused (SIGSTOP)", who(i)),
            Action::Resume(i) => format!("{} resumes", who(i)),
            Action::Tick(t) => format!("time passes to {t}"),
        };
        let before = state.redis.keyspace.clone();
        let result = world.step(&state, action);
        out.push_str(&format!("{:>3}. [{}] {what}\n", n + 1, state.now()));
        match result {
            Ok(next) => {
                for line in diff(&before, &next.redis.keyspace) {
                    out.push_str(&format!("       {line}\n"));
                }
                state = next;
            }
            Err(v) => {
                out.push_str(&format!("     BROKEN: {}: {}\n", v.invariant, v.detail));
                break;
            }
        }
    }
    out
}

trait ExpectKind {
    fn expect_kind(&self) -> Option<Kind>;
}

impl ExpectKind for Option<(Req, Option<Resp>)> {
    fn expect_kind(&self) -> Option<Kind> {
        self.as_ref().map(|(r, _)| r.kind)
    }
}

fn show_resp(r: &Resp) -> String {
    match r {
        Resp::Int(n) => n.to_string(),
        Resp::Bulk(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Resp::Status(s) => s.clone(),
        Resp::Error(e) => format!("ERROR {e}"),
        Resp::Nil => "nil".into(),
        Resp::Array(items) => format!(
            "[{}]",
            items.iter().map(show_resp).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn show_entry(e: &super::Entry) -> String {
    let value = match &e.value {
        super::Value::Str(s) => format!("{:?}", String::from_utf8_lossy(s)),
        super::Value::Hash(fields) => format!(
            "{{{}}}",
            fields
                .iter()
                .map(|(k, v)| format!(
                    "{}={}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v)
                ))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        super::Value::ZSet(members) => format!(
            "{{{}}}",
            members
                .iter()
                .map(|(s, m)| format!("{}:{}", String::from_utf8_lossy(m), show_score(s.0)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        super::Value::List(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|i| String::from_utf8_lossy(i).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        ),
    };
    match e.expires_at {
        Some(at) => format!("{value} expires at {}", at as i64 - T0_MS as i64),
        None => format!("{value} (no expiry)"),
    }
}

/// A score that is a time on the server's clock, from the start; a ticket as it is.
fn show_score(score: f64) -> String {
    let ms = score as u64;
    if (T0_MS..T0_MS + 10_000_000).contains(&ms) {
        format!("@{}", ms - T0_MS)
    } else {
        format!("{score}")
    }
}

/// What changed between two keyspaces, key by key.
fn diff(before: &Keyspace, after: &Keyspace) -> Vec<String> {
    let a: BTreeMap<&[u8], &super::Entry> = before.iter().collect();
    let b: BTreeMap<&[u8], &super::Entry> = after.iter().collect();
    let mut out = Vec::new();
    for (key, entry) in &b {
        if a.get(key) != Some(entry) {
            out.push(format!(
                "{} = {}",
                String::from_utf8_lossy(key),
                show_entry(entry)
            ));
        }
    }
    for key in a.keys() {
        if !b.contains_key(key) {
            out.push(format!("{} gone", String::from_utf8_lossy(key)));
        }
    }
    out
}
