//! WHAT a lock is: its Redis keys, its token, its Lua scripts, and the [`Lock`] interface that
//! the engine (wait, renew, release) drives.
//!
//! Every command gets its lock from [`open`] and sees only `dyn Lock`: a lock algorithm is an
//! implementation of the trait. The modules:
//!
//! * `topology`: where locks live ([`Topology`]), [`open`], [`list`], and what a deployment
//!   refuses (asked of each algorithm);
//! * `protocol`: what every lock says to one Redis server (scripts, arguments, replies, the
//!   line's timing), on top of `lua/*.lua`;
//! * `single`: the lock on one primary (addressed directly, or through Sentinel or Cluster:
//!   finding it is the backend's business);
//! * `redlock`: the lock over N independent primaries, its majority rules and what it refuses;
//! * `set`: the lock over several keys (`-k a -k b`), taken one at a time in key order, each
//!   key a lock of its own;
//! * [`holder`] and `name`: what a holder says about itself, and the key-name rules;
//! * `model` (tests only): a Redis in memory that runs the real scripts, and `ScriptLock`, the
//!   lock over it that the engine's unit tests run on (`docs/verification.md`).
//!
//! This module and those below it import nothing above them (no output, config, commands or
//! engine): they speak in types and [`crate::text`], and the callers decide what to print.
//!
//! # What a grant promises
//!
//! A lock is never "held until further notice": every answer that says "ours" comes with a
//! [`Validity`], a [`Moment`] on our own clock (CLOCK_BOOTTIME, see [`crate::clock`]) and a
//! duration, such that the lock cannot expire in Redis before `anchor + ttl`. The anchor is the send time of the request that set
//! the expiry (Redis applied it no earlier than we sent it). The kill deadlines of `run` are
//! computed from the latest validity, and nothing else.
//!
//! # Claims
//!
//! An acquire attempt asks for a short *claim*, not the full TTL: an attempt whose reply is lost
//! (Redis stopped, the network cut) and that distlock cannot take back then blocks the key for
//! seconds, not for a TTL that may be hours. Once the grant is in, the lock is extended to the
//! full TTL like any renewal (in the background for `run`, whose kill deadlines cover the claim
//! meanwhile; before printing the token for `acquire`).
//!
//! # Redis layout (a protocol other clients depend on: keep it stable)
//!
//! For key `K` and prefix `P` (default `distlock:`):
//!
//! | Redis key / channel | what |
//! |---|---|
//! | `P{K}` | the lock: a string holding the holder's token (a uuid v4), with a PX expiry |
//! | `P{K}:owner` | hash of holder metadata (see [`holder`]), same expiry, written with the lock |
//! | `P{K}:released` | pub/sub channel; the release script publishes on it |
//! | `P{K}:protocol` | `2` while a shared key has readers (protocol [`PROTOCOL`]; a distlock of protocol 1 then refuses the key), absent otherwise; a newer, incompatible layout keeps its number there, and every script refuses such a lock (`lua/protocol.lua`) |
//! | `P{K}:history`, `P{K}:history:held` | the lock's history (a stream of at most 1000 events) and the holds and waiters in line it knows, only once a client asked for one (`--history`; [`history`], `lua/history.lua`) |
//!
//! (`lua/common.lua` lists every key; `docs/protocol.md` is the reference for other clients.)
//!
//! The braces make `K` a Cluster hash tag, so every companion key `P{K}:...` lives in the same
//! slot as the lock.

pub mod history;
pub mod holder;
#[cfg(test)]
pub mod model;
mod name;
mod protocol;
mod redlock;
mod set;
mod single;
mod topology;

use std::time::Duration;

use crate::backend::{BackendError, Budget, Notice, Subscription};
use crate::clock::Moment;

pub use holder::{CoolDown, HeldBy, Holder};
pub use name::{DEFAULT_PREFIX, LockName, validate_key, validate_pattern, validate_prefix};
pub use redlock::{drift as redlock_drift, node_margin};
pub use topology::{Listing, NewerLock, Topology, list, open, open_held, open_set};

/// The version of the Redis key layout this distlock speaks (`docs/protocol.md`). A lock whose
/// `P{K}:protocol` key names another version is refused (exit 65), never read or changed.
pub const PROTOCOL: u32 = 2;

/// A holder's secret: a fresh uuid v4 per acquisition. Only the holder can extend or release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A token given by the user (`release --token`).
    pub fn from_text(text: &str) -> Self {
        Token(text.to_owned())
    }

    /// A fresh random token: a uuid v4 made of 16 bytes from the kernel (`getrandom(2)`). An
    /// error when the kernel gives none (a kernel older than 3.17, or a seccomp filter that
    /// forbids the call): the caller reports it with an exit code, never a panic.
    pub fn generate() -> std::io::Result<Self> {
        let mut bytes = [0u8; 16];
        getrandom(&mut bytes)?;
        Ok(Token(
            uuid::Builder::from_random_bytes(bytes)
                .into_uuid()
                .to_string(),
        ))
    }

    /// The token's text, as stored in Redis and given to the child.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Fill `buf` from the kernel's random source with the `getrandom(2)` system call.
///
/// Called directly, not through the `getrandom` crate that `uuid` would use: that crate finds
/// the C library's `getrandom` with `dlsym`, which a statically linked binary cannot do, and
/// then falls back to reading `/dev/urandom`, which a `FROM scratch` image or a minimal chroot
/// lacks (a static build panicked there). The system call needs no file and no device; it
/// blocks only until the kernel's pool is first initialised, early at boot.
fn getrandom(buf: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: `rest` is a valid, writable buffer of `rest.len()` bytes for the whole call;
        // the kernel writes at most that many bytes into it.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        match usize::try_from(n) {
            Ok(n) => filled += n,
            Err(_) => {
                let err = std::io::Error::last_os_error();
                if err.kind() != std::io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
    Ok(())
}

/// A lower bound for a lock's expiry: it cannot expire in Redis before `anchor + ttl`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    /// Send time (CLOCK_BOOTTIME: a suspend counts) of the request that set the expiry.
    pub anchor: Moment,
    /// The expiry that request set, from the moment Redis applied it.
    pub ttl: Duration,
}

impl Validity {
    /// The earliest instant at which the lock may expire.
    pub fn earliest_expiry(&self) -> Moment {
        self.anchor + self.ttl
    }
}

/// A lock we hold.
#[derive(Clone, Debug)]
pub struct Grant {
    /// Our token.
    pub token: Token,
    /// The fencing token: greater than every earlier grant's for the same key (see
    /// [`Answer::Granted`]).
    pub fence: u64,
    /// Until when it is certainly ours.
    pub validity: Validity,
    /// A semaphore slot's index (see [`Answer::Granted`]).
    pub slot: Option<u32>,
}

/// How an attempt relates to the line of waiters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queueing {
    /// Take the lock if it is free and nobody waits for it; take no place in line (`-n`, spin
    /// mode, and the first attempt of every wait).
    Try,
    /// Take the lock when our turn comes; join the line, or keep our place in it.
    Join,
    /// As `Join`, and cancel every waiter that joined before us (`--supersede`).
    Supersede,
    /// As `Supersede`, and ask the mutex holder to stop its command and release (`--replace`).
    Replace,
    /// Keep our place and take up our turn, never more: no new place, and no grant to a token
    /// without one ([`Answer::NoPlace`]). A waiter's attempts after the one that joined, so
    /// that an attempt still queued on a connection the waiter dropped (behind a blocking wait
    /// on its doorbell, [`Lock::await_turn`]) cannot put it back in line or take the lock.
    Refresh,
}

/// How long a mutex stays taken after a run that succeeded (`--min-interval`, `--cooldown`):
/// the later of its start plus `min_interval` and its end plus `cooldown` (see
/// `lua/common.lua`). Stored with the lock, so that whoever releases it applies it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AfterRun {
    /// Counted from the start of the run.
    pub min_interval: Option<Duration>,
    /// Counted from its end.
    pub cooldown: Option<Duration>,
}

/// What to ask for in one acquire attempt.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// Our token (the same for every attempt of one wait).
    pub token: &'a Token,
    /// The claim: the expiry an attempt sets (see the module docs).
    pub claim: Duration,
    /// The full TTL, stored with the lock (`renew` without `--ttl` reuses it).
    pub ttl: Duration,
    /// What to store about us beside the lock.
    pub holder: &'a Holder,
    /// 1: a mutex (or a shared lock's writer); N: a counting semaphore of N slots; 0: a shared
    /// lock's reader (`--shared`), which holds the key with other readers, never with a writer.
    pub limit: u32,
    /// Whether to take a place in line.
    pub queueing: Queueing,
    /// The waiter polls (spin mode, or notifications failed): it cannot be woken, so nobody
    /// hands it the lock; it takes a free lock when it finds one, after every waiter ahead of
    /// it that waits to be handed the lock.
    pub polls: bool,
    /// How long the lock stays taken after a run that succeeded.
    pub after: AfterRun,
    /// The waiter waits on its doorbell ([`Lock::await_turn`]): its turn is pushed there, not
    /// published.
    pub doorbell: bool,
}

/// Who holds a busy lock, as an attempt sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holders {
    /// The mutex holder, or the semaphore holder whose slot expires first, or the reader whose
    /// lease ends last.
    pub first: HeldBy,
    /// How many hold it (1 for a mutex).
    pub count: u32,
    /// The limit (1 for a mutex, 0 for a shared lock's readers).
    pub limit: u32,
    /// How many wait in line.
    pub waiting: u32,
}

impl Holders {
    /// One line for humans: who holds it, for how long, until when.
    pub fn summary(&self) -> String {
        if self.limit == 0 {
            return format!(
                "held shared by {}; the last lease is {}",
                self.count,
                self.first.summary()
            );
        }
        if self.limit <= 1 {
            return self.first.summary();
        }
        format!(
            "{} of {} slots held; the first to expire is {}",
            self.count,
            self.limit,
            self.first.summary()
        )
    }
}

/// The outcome of one acquisition attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// We hold the lock (or a slot) now, until at least the validity's end. The fence is an
    /// integer strictly greater than every earlier grant's for the same key, for as long as
    /// Redis keeps its data (and beyond, while the server's clock does not go back: see
    /// `lua/common.lua`).
    Granted {
        /// Until when it is certainly ours.
        validity: Validity,
        /// The fencing token.
        fence: u64,
        /// A semaphore slot's index, from 0 to N-1: no other holder has it while we do
        /// (`DISTLOCK_SLOT`); `None` for a mutex.
        slot: Option<u32>,
        /// The token the lock was granted to, when it is not the request's: a Redlock retires
        /// a token whose release may still land (see `redlock/mod.rs`), and goes on with another.
        token: Option<Token>,
    },
    /// Someone else holds it; we took no place in line.
    Busy(Holders),
    /// Someone else holds it, or others wait before us: we are in line.
    Queued {
        /// Who holds it.
        holders: Holders,
        /// Our place (1: next).
        position: u32,
        /// Attempt again within this long, or lose the place.
        refresh_in: Duration,
    },
    /// A waiter that joined after us with `--supersede` cancelled our place.
    Superseded(Option<Box<Holder>>),
    /// The key is used in another way than this attempt's (a mutex and a semaphore, or
    /// semaphores of different limits): refused, whatever the wait.
    Conflict(Conflict),
    /// A [`Queueing::Refresh`] attempt found no place of ours to keep (it lapsed, or a
    /// failover lost it): join again.
    NoPlace,
}

/// How a wait on the doorbell ([`Lock::await_turn`]) ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    /// What the attempt sent with the wait found: granted when our turn came (taken up in the
    /// same breath), queued when the wait timed out, ...
    pub answer: Answer,
    /// The doorbell rang: our turn came (or we were superseded) during the wait.
    pub rang: bool,
    /// The server waited on the doorbell. False when it answered at once (a Cluster slot on
    /// the move, a failover): pause before waiting again.
    pub waited: bool,
    /// The server refused the doorbell (an ACL user without `+blpop`): wait for release
    /// notifications from now on.
    pub refused: bool,
}

/// How a key is used, when an attempt wanted another use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// What the key is now.
    pub use_: Use,
    /// Its limit (1: a mutex).
    pub limit: u32,
    /// How many hold it (or wait for it, for [`Use::Queue`]).
    pub count: u32,
    /// One of them.
    pub holder: Option<Box<Holder>>,
}

/// How a key is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Held as a mutex.
    Mutex,
    /// Held as a semaphore.
    Semaphore,
    /// Held shared by readers (`--shared`).
    Shared,
    /// Free, with waiters in line for another limit.
    Queue,
}

/// A waiter in line, as `status` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// What it says about itself.
    pub holder: Option<Box<Holder>>,
    /// How long it has waited (on the Redis server's clock).
    pub waited: Option<Duration>,
    /// The limit it waits for.
    pub limit: u32,
}

/// What an inspection found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockState {
    /// Who holds it (empty: free): one mutex holder, or the semaphore's holders.
    pub holders: Vec<HeldBy>,
    /// 1 for a mutex, N for a semaphore, 0 when free.
    pub limit: u32,
    /// Who waits, first in line first.
    pub waiters: Vec<Waiting>,
    /// The Redis server's clock when it was inspected (ms since the epoch; 0 when unknown):
    /// what `held_for` and `waited` count to, so that `now_ms - held_for` is exactly when a
    /// holder took the lock on that clock.
    pub now_ms: u64,
}

impl LockState {
    /// Whether nobody holds the lock.
    pub fn is_free(&self) -> bool {
        self.holders.is_empty()
    }
}

/// What an inspection of every node found: `status` and `list` show it.
///
/// One server answers for itself: its survey is its inspection, without per-node views. A
/// Redlock's nodes answer each for itself, and the lock is what a majority of them agree on;
/// when they answered but no token (nor "free") is on a majority, that is a *split* (after
/// partial acquires, or a node that lost its data), which is an answer to show, not an error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Survey {
    /// The lock as a majority sees it; `None` on a split.
    pub agreed: Option<LockState>,
    /// Each node's view, in the order the nodes were given; empty for one server.
    pub nodes: Vec<NodeView>,
}

/// One node's view of a lock, as a [`Survey`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    /// The node's address, for people (passwords redacted).
    pub address: String,
    /// What the node holds for the lock, or why it did not say (the error's text).
    pub state: Result<LockState, String>,
}

/// A node of a lock over several servers (a Redlock) that failed while a majority answered:
/// the lock goes on without it, one failure closer to unusable. Reported once per run.
#[derive(Clone, Debug)]
pub struct NodeFailure {
    /// The node's address, for people (passwords redacted).
    pub address: String,
    /// Its error (the first of the run).
    pub error: BackendError,
    /// How many nodes answered the request it failed.
    pub answered: usize,
    /// How many nodes there are.
    pub nodes: usize,
    /// How many make a majority.
    pub needed: usize,
}

/// Which nodes of a lock over several servers answered its last request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answering {
    /// The addresses of those that answered (passwords redacted), in the order given.
    pub answered: Vec<String>,
    /// The addresses of the others.
    pub silent: Vec<String>,
    /// How many make a majority.
    pub needed: usize,
}

/// How long the current holder's lock has left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HolderTtl {
    /// The lock expires in this long unless renewed.
    Expires(Duration),
    /// The holder set no expiry (another client's lock): not ours to judge.
    Never,
}

/// Whether a release found our token in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// It was ours; the operation was done.
    Held,
    /// It was not ours (expired, deleted, or taken by someone else); nothing was changed.
    NotHeld,
}

/// What an extend found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Extended {
    /// It was ours, and now is until at least this validity's end.
    Held(Validity),
    /// As `Held`, and a newer run asks us to stop our command and let it in (`--replace`):
    /// who it is, if it said.
    Replaced(Validity, Option<Box<Holder>>),
    /// It was not ours (expired, deleted, or taken by someone else); nothing was changed.
    NotHeld,
}

/// What giving up a wait left behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Residue {
    /// Nothing of ours can be in Redis, now or later.
    Nothing,
    /// An attempt whose answer was lost may have taken the lock; it was given back (or its
    /// release was queued right behind it), so nothing of ours can remain.
    TakenBack,
    /// Something of ours may remain and could not be taken back (Redis did not answer): a lock
    /// that a lost attempt may have taken (or may still take, if Redis has it queued), or our
    /// place in line. It expires by itself at most this long after Redis applies it.
    MayRemain(Duration),
}

/// A key a lock over several keys held and lost while it waited for a later one
/// ([`Lock::take_lost_while_waiting`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostWhileWaiting {
    /// The key that was lost.
    pub key: String,
    /// The key the set was waiting for then, if known.
    pub waiting_for: Option<String>,
}

/// One key of a lock over several keys ([`Lock::members`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its name.
    pub name: LockName,
    /// The token it is held with, when it is not the set's (a Redlock member retired it).
    pub token: Option<Token>,
    /// Its fence, while held.
    pub fence: Option<u64>,
    /// What names it across processes (deployment and Redis key, as
    /// [`crate::session::reenter::lock_id`]).
    pub id: String,
}

/// A lock algorithm over one or more Redis servers.
///
/// Every method makes one attempt that ends by the budget's deadline (or at once when its cancel
/// flag is raised), whatever the servers do; it never sleeps. Waiting and retrying are the
/// engine's business ([`crate::wait`]).
pub trait Lock: Send {
    /// The lock's name and keys.
    fn name(&self) -> &LockName;

    /// Where the lock lives, for messages (passwords redacted).
    fn describe(&self) -> String;

    /// Whether this lock keeps a line of waiters (and wakes them one by one), so that
    /// [`Queueing::Join`] means something; a lock that does not answers every attempt with
    /// `Busy`, and its waiters are woken by every release.
    fn queues(&self) -> bool;

    /// Whether this lock has a doorbell per waiter ([`Lock::await_turn`]).
    fn has_doorbell(&self) -> bool {
        false
    }

    /// Wait in line for up to `block` on our doorbell, on the one connection of our attempts,
    /// and attempt again (`request.queueing` should be [`Queueing::Refresh`]) the moment it
    /// rings or the time is up: the turn and its take-up come back together. Only for a lock
    /// with [`Lock::has_doorbell`]; the others refuse it.
    fn await_turn(
        &mut self,
        request: &Request<'_>,
        block: Duration,
        budget: &Budget,
    ) -> Result<Turn, BackendError> {
        let _ = (request, block, budget);
        Err(BackendError::Mismatch("this lock has no doorbell".into()))
    }

    /// Try once to take the lock for `request.token` with the claim as its expiry. A lost reply
    /// is an error whose [`BackendError::maybe_applied`] is true: the lock may now be ours, so
    /// the caller must use the same token again, or [`Lock::give_up`].
    fn try_acquire(
        &mut self,
        request: &Request<'_>,
        budget: &Budget,
    ) -> Result<Answer, BackendError>;

    /// Stop trying: leave the line, and take back whatever an attempt of `token` may have taken
    /// or may still take (a lost reply, or a lock handed to us meanwhile).
    fn give_up(&mut self, token: &Token, claim: Duration, budget: &Budget) -> Residue;

    /// Look at the lock without changing it.
    fn inspect(&mut self, budget: &Budget) -> Result<LockState, BackendError>;

    /// As [`Lock::inspect`], with each node's view, and a split (no majority agrees on a
    /// holder) as an answer instead of an error. A lock on one server has no per-node view:
    /// this default is its inspection.
    fn survey(&mut self, budget: &Budget) -> Result<Survey, BackendError> {
        Ok(Survey {
            agreed: Some(self.inspect(budget)?),
            nodes: Vec::new(),
        })
    }

    /// Whether `token` still holds the lock (or a slot), and its fence if so: a nested run of
    /// the same lock checks its holder's lock this way before running its command.
    fn holds(&mut self, token: &Token, budget: &Budget) -> Result<Option<u64>, BackendError>;

    /// Extend our lock to `ttl` from now, only if it still holds `token` (a zero `ttl`: the TTL
    /// it was acquired with).
    fn extend(
        &mut self,
        token: &Token,
        ttl: Duration,
        budget: &Budget,
    ) -> Result<Extended, BackendError>;

    /// Release the lock (or our slot), only if `token` holds it, and hand it to the next in
    /// line or wake the waiters. (`break` passes the token it saw when it showed the holder, so
    /// that it never breaks a newer holder.)
    fn release(&mut self, token: &Token, budget: &Budget) -> Result<Ownership, BackendError> {
        self.release_after(token, false, budget)
    }

    /// As [`Lock::release`], after the work done under the lock: when it `succeeded`, a
    /// mutex taken with an [`AfterRun`] stays taken (by `token`, with `ended_at` and
    /// `cooldown_until` in its owner hash) until the interval has passed.
    fn release_after(
        &mut self,
        token: &Token,
        succeeded: bool,
        budget: &Budget,
    ) -> Result<Ownership, BackendError>;

    /// Release `token` on every node that holds it, whatever the others say, and return on
    /// how many it was held (and so released). [`Lock::release`] answers for the lock (not
    /// held unless a majority holds it); this answers for the nodes: `break` uses it on a
    /// Redlock's split, where no majority holds any token. One server: 1 or 0.
    fn release_anywhere(&mut self, token: &Token, budget: &Budget) -> Result<usize, BackendError> {
        Ok(match self.release(token, budget)? {
            Ownership::Held => 1,
            Ownership::NotHeld => 0,
        })
    }

    /// Another handle on the same lock with its own connection(s), for a background thread
    /// that does its own waiting (calls run on that thread), whose Redis commands time out
    /// after `timeout`.
    fn fresh(&self, timeout: Duration) -> Box<dyn Lock>;

    /// The nodes that failed, while a majority answered, since this was last asked, each named
    /// once per run (by this handle and every handle [`Lock::fresh`] made from it): a Redlock
    /// that goes on without a node must say so. A lock on one server has none.
    fn take_failures(&mut self) -> Vec<NodeFailure> {
        Vec::new()
    }

    /// A lock over several keys: each key it held and lost while it waited for a later one
    /// (broken, expired, or Redis lost it), since this was last asked, with the key it was
    /// waiting for then. It gave every key back and starts again from the first: nothing ran.
    fn take_lost_while_waiting(&mut self) -> Vec<LostWhileWaiting> {
        Vec::new()
    }

    /// Which nodes answered the last request, for a lock over several servers; `None` for one
    /// server.
    fn answering(&self) -> Option<Answering> {
        None
    }

    /// The servers this lock lives on, as configured: the kind of topology and the addresses
    /// (passwords redacted). What tells two locks of one key apart across processes
    /// (reentrancy, see [`crate::session::reenter`]); unlike [`Lock::describe`], it does not
    /// change once the primary or Cluster node that serves the lock is known.
    fn deployment(&self) -> String {
        self.describe()
    }

    /// Whether a lock found still busy just after a release notification is looked at again
    /// soon (a few times) rather than at its holder's expiry: for a lock whose release reaches
    /// its servers one request each (a Redlock), where the notification from one server may
    /// come before the others have the release. (A lock that keeps a line hands over instead.)
    fn recheck_after_notice(&self) -> bool {
        false
    }

    /// A lock over several keys (`set.rs`): its keys in the order it takes them, with what
    /// each holds; empty for a lock of one key.
    fn members(&self) -> Vec<Member> {
        Vec::new()
    }

    /// A lock over several keys: the key its last attempt found busy, or that a renewal or
    /// release found no longer held (messages name it); `None` for a lock of one key.
    fn busy_key(&self) -> Option<String> {
        None
    }

    /// Whether some of the lock may be ours after a wait that ended without it (a set that
    /// holds its lower keys while it waits for the next): the engine then gives it back, as
    /// it does after a lost reply.
    fn holds_part(&self) -> bool {
        false
    }

    /// The longest the engine may wait before its next attempt, when the lock holds part of
    /// itself while it waits (a set renews the keys it holds at each attempt); `None`: no
    /// bound of its own.
    fn look_again_within(&self) -> Option<Duration> {
        None
    }

    /// Subscribe to the wake-ups of the waiter `token`: its own (its turn came, it was
    /// superseded) when the lock [`queues`](Lock::queues), or every release otherwise. Returns
    /// once subscribed: a wake-up published after this returns is reported through `notify`.
    fn subscribe(
        &self,
        token: &Token,
        notify: Box<dyn Fn(Notice) + Send>,
        budget: &Budget,
    ) -> Result<Subscription, BackendError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_uuid_v4() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert_ne!(a, b);
        let uuid = uuid::Uuid::parse_str(a.as_str()).unwrap();
        assert_eq!(uuid.get_version_num(), 4, "{a:?}");
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122, "{a:?}");
        assert_eq!(a.as_str().len(), 36);
    }

    #[test]
    fn the_scripts_check_the_protocol_this_client_speaks() {
        let check = include_str!("lua/protocol.lua");
        assert!(
            check.contains(&format!("protocol ~= '{PROTOCOL}'")),
            "{check}"
        );
        assert!(check.contains(&format!("' {PROTOCOL}')")), "{check}");
    }

    #[test]
    fn getrandom_fills_the_whole_buffer() {
        // More than the 256 bytes the kernel always gives in one call.
        let mut buf = vec![0u8; 4096];
        getrandom(&mut buf).unwrap();
        assert!(buf.iter().filter(|b| **b == 0).count() < 100);
        getrandom(&mut []).unwrap();
    }
}
