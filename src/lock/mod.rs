//! WHAT a lock is: its Redis keys, its token, its Lua scripts, and the [`Lock`] interface that
//! the engine (wait, renew, release) drives.
//!
//! A lock algorithm implements [`Lock`]: today [`SingleNode`] (one Redis server); Redlock over N
//! independent servers, Sentinel and Cluster plug in behind the same trait. The engine never
//! assumes a single connection: a thread that needs its own calls [`Lock::fresh`].
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
//!
//! The braces make `K` a Cluster hash tag, so every companion key `P{K}:...` lives in the same
//! slot as the lock.

pub mod holder;
mod name;
mod single;

use std::time::Duration;

use crate::backend::{BackendError, Notice, Subscription};

pub use holder::{HeldBy, Holder};
pub use name::{LockName, validate_key, validate_pattern, validate_prefix};
pub use single::{SingleNode, list};

/// A holder's secret: a fresh uuid v4 per acquisition. Only the holder can extend or release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A token given by the user (`release --token`).
    pub fn from_text(text: &str) -> Self {
        Token(text.to_owned())
    }

    /// A fresh random token.
    pub fn generate() -> Self {
        Token(uuid::Uuid::new_v4().to_string())
    }

    /// The token's text, as stored in Redis and given to the child.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A lock we hold: our token, and the send time of the attempt that took it (the lock cannot
/// expire before `since + ttl`).
#[derive(Clone, Debug)]
pub struct Lease {
    /// Our token.
    pub token: Token,
    /// Send time of the successful acquire attempt (monotonic clock).
    pub since: std::time::Instant,
}

/// The outcome of one acquisition attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the lock now.
    Acquired,
    /// Someone else holds it.
    Busy(HeldBy),
}

/// What an inspection found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockState {
    /// Nobody holds the lock.
    Free,
    /// Somebody does.
    Held(HeldBy),
}

/// How long the current holder's lock has left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HolderTtl {
    /// The lock expires in this long unless renewed.
    Expires(Duration),
    /// The holder set no expiry (another client's lock): not ours to judge.
    Never,
}

/// Whether an extend or a release found our token in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// It was ours; the operation was done.
    Held,
    /// It was not ours (expired, deleted, or taken by someone else); nothing was changed.
    NotHeld,
}

/// A lock algorithm over one or more Redis servers.
///
/// Every method makes one bounded attempt (bounded by the backend's timeouts) and never sleeps;
/// waiting and retrying are the engine's business.
pub trait Lock: Send {
    /// The lock's name and keys.
    fn name(&self) -> &LockName;

    /// Where the lock lives, for messages (passwords redacted).
    fn describe(&self) -> String;

    /// Connect now, so that an unreachable server is reported before anything else happens.
    fn connect(&mut self) -> Result<(), BackendError>;

    /// Try once to take the lock for `token` with `ttl`. An error whose
    /// [`BackendError::maybe_applied`] is true means the lock may now be ours: the caller must
    /// either retry with the same token or release it.
    fn try_acquire(
        &mut self,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Attempt, BackendError>;

    /// Look at the lock without changing it.
    fn inspect(&mut self) -> Result<LockState, BackendError>;

    /// Extend our lock to `ttl` from now, only if it still holds `token`.
    fn extend(&mut self, token: &Token, ttl: Duration) -> Result<Ownership, BackendError>;

    /// Release the lock, only if it still holds `token`, and wake the waiters. (`break` passes
    /// the token it saw when it showed the holder, so that it never breaks a newer holder.)
    fn release(&mut self, token: &Token) -> Result<Ownership, BackendError>;

    /// Another handle on the same lock with its own connection(s), for another thread, whose
    /// Redis commands time out after `timeout`.
    fn fresh(&self, timeout: Duration) -> Box<dyn Lock>;

    /// Subscribe to release notifications. Returns once subscribed: a release published after
    /// this returns is reported through `notify`.
    fn subscribe(&self, notify: Box<dyn Fn(Notice) + Send>) -> Result<Subscription, BackendError>;
}
