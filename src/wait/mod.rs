//! The acquire loop: try, and while the lock is busy, wait in line for our turn (notify mode, on
//! a lock that [`queues`](Lock::queues)), for a release notification (notify mode otherwise),
//! or a jittered backoff (spin mode), until the lock is ours, the wait limit passes, a newer
//! waiter supersedes us, or a signal asks us to stop.
//!
//! Rules that keep it correct:
//! * **No lost wake-up.** In notify mode the subscription is confirmed *before* the attempt that
//!   takes a place in line (or precedes any sleep), so a hand-off or release after it is never
//!   missed. (The very first attempt takes no place and no subscription: an uncontended lock
//!   costs neither; a busy one is subscribed to and tried again at once.) A wake-up lost anyway
//!   (a subscriber reconnecting) costs at most the refresh of our place.
//! * **Fair and quiet.** A waiter in line attempts again when woken (its turn came: the lock was
//!   handed to it, and its attempt takes it up) and to keep its place alive (the lock says how
//!   often: every 2s on one server). The first in line also attempts just past the holder's
//!   expiry (a holder that died publishes nothing; its expired lock goes to the first in line),
//!   at most once per expiry it sees: a live holder pushes it back by each renewal, so the
//!   first in line attempts once per `--ttl` minus the holder's renewal interval (no more than
//!   0.5 per second for a TTL of 3s or more with the default renewal; 0.75 for 2s), and never
//!   more often than [`FIRST_LOOK_MIN`]. The others attempt only to keep their place.
//! * **Bounded time.** Every attempt gets a [`Budget`]: one `--redis-timeout`, cut to the end of
//!   `--wait` plus one timeout, and cancelled by a termination signal. So `-n` ends within one
//!   timeout, `--wait D` within D plus one timeout, and a signal ends the wait within a second,
//!   whatever Redis does.
//! * **A server that never answered is a misconfiguration, not a wait.** Until Redis has
//!   answered once, an error that can only be a configuration problem (refused connection,
//!   TLS, authentication, protocol) ends the wait at once, and anything else (timeouts) ends it
//!   after `--unreachable-after` (30s by default): exit 69, not an endless wait.
//! * **Never silent.** While Redis fails after having answered, a line says so at least every
//!   `--report-every`.
//! * **No leaked lock.** An attempt whose reply was lost may have taken the lock. Later attempts
//!   use the same token (the acquire script recognises it); if we give up instead, we take it
//!   back, bounded in time, and report what may remain (a claim of seconds, see [`crate::lock`]).

//!
//! The parts: `waiter` (the loop, in steps), [`sleep`] (how long between attempts) and
//! [`display`] (what a waiter shows).

pub mod display;
pub mod sleep;
mod waiter;

use std::time::{Duration, Instant};

use crate::backend::{BackendError, Budget, Cancel};
use crate::events::{Events, Sender};
use crate::lock::{Conflict, Grant, Holder, Holders, Lock, Request, Residue};
use crate::output::{Ev, Output};
use display::WaitDisplay;
use waiter::{Ended, Waiter};

pub use sleep::{Backoff, past_expiry};

/// How a waiter learns that the lock may be free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    /// Sleep until woken (a release notification), or until the holder's lock would expire.
    Notify,
    /// Poll with capped, jittered exponential backoff.
    Spin,
}

/// How long to wait, and how.
#[derive(Clone, Copy, Debug)]
pub struct WaitPolicy {
    /// `None`: forever. `Some(ZERO)`: try once.
    pub limit: Option<Duration>,
    /// Notify or spin.
    pub mode: WaitMode,
}

/// After a signal, giving back what an attempt may have taken gets this long at most (with
/// the worker's leash before it, the exit comes within a second).
const GIVE_UP_AFTER_SIGNAL: Duration = Duration::from_millis(400);
/// Giving back gets at least this long (a write behind a lost reply needs no answer).
const GIVE_UP_MIN: Duration = Duration::from_millis(100);
/// The first in line looks at the holder's expiry at most this often, whatever the holder's
/// timing (a lock seen about to expire, a `--renew-every` close to the TTL). With the default
/// renewal (a third of the TTL) it never binds: a live holder's lock has at least two thirds of
/// its TTL (at least 667ms) left at any look.
pub const FIRST_LOOK_MIN: Duration = Duration::from_millis(100);

/// What to wait for.
pub struct Wait<'a> {
    /// What each attempt asks for (its `queueing` is the engine's business, except that
    /// `Supersede` asks for a place that cancels the older waiters).
    pub request: Request<'a>,
    /// How long and how to wait.
    pub policy: WaitPolicy,
    /// The Redis timeout: how long one attempt may take.
    pub timeout: Duration,
    /// Until Redis has answered once, failures that could be a slow or restarting server are
    /// retried for this long; then the wait ends (a server that never answered is most likely
    /// the wrong one).
    pub unreachable_after: Duration,
    /// Raised by termination signals.
    pub cancel: &'a Cancel,
}

/// How a wait ended.
#[derive(Debug)]
pub enum Waited {
    /// The lock is ours.
    Acquired {
        /// Our token, and until when the lock is certainly ours (the claim).
        grant: Grant,
        /// How long we waited.
        waited: Duration,
    },
    /// Still busy when the limit passed.
    Busy {
        /// How long we waited.
        waited: Duration,
        /// The holders as last seen.
        held: Option<Holders>,
        /// What an attempt may have left behind.
        residue: Residue,
    },
    /// A newer waiter superseded us (`--supersede`).
    Superseded {
        /// How long we waited.
        waited: Duration,
        /// Who did it.
        by: Option<Box<Holder>>,
        /// What an attempt may have left behind.
        residue: Residue,
    },
    /// The key is used in another way (a mutex and a semaphore, or another limit).
    Conflict(Conflict),
    /// A signal stopped the wait.
    Interrupted {
        /// The signal.
        signal: i32,
        /// What an attempt may have left behind.
        residue: Residue,
    },
    /// Redis failed in a way that waiting cannot fix (or was still failing at the limit).
    Failed {
        /// The last error.
        error: BackendError,
        /// Set when Redis never answered at all.
        unanswered: Option<Unanswered>,
        /// What an attempt may have left behind.
        residue: Residue,
    },
}

/// Redis never answered: how many attempts, over how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unanswered {
    /// Attempts made.
    pub attempts: u32,
    /// Since the first one.
    pub over: Duration,
}

/// Take the lock for `wait.request.token`, waiting according to `wait.policy`.
pub fn acquire(
    lock: &mut dyn Lock,
    wait: &Wait<'_>,
    events: (&Sender, &mut Events),
    display: &mut WaitDisplay,
    out: &Output,
) -> Waited {
    let start = Instant::now();
    let mut waiter = Waiter {
        lock,
        wait,
        display,
        out,
        start,
        hard_end: wait.policy.limit.map(|limit| start + limit + wait.timeout),
        maybe_ours: false,
        joined: false,
        last_held: None,
        notified: 0,
    };
    let ended = waiter.run(events);
    match &ended {
        Ended::Acquired(..) => waiter.display.acquired(start.elapsed()),
        _ => waiter.display.clear(),
    }
    let waited = start.elapsed();
    let residue = match &ended {
        Ended::Acquired(..) | Ended::Conflict(_) => Residue::Nothing,
        _ if waiter.maybe_ours || waiter.joined || waiter.lock.holds_part() => {
            // An attempt whose reply was lost may have taken the lock: give it back.
            let now = Instant::now();
            let limit = match &ended {
                Ended::Interrupted(_) => GIVE_UP_AFTER_SIGNAL.min(wait.timeout),
                _ => waiter
                    .hard_end
                    .map_or(wait.timeout, |end| end.saturating_duration_since(now))
                    .max(GIVE_UP_MIN)
                    .min(wait.timeout),
            };
            let residue = waiter.lock.give_up(
                wait.request.token,
                wait.request.claim,
                &Budget::within(limit),
            );
            match residue {
                Residue::Nothing if waiter.maybe_ours => {
                    out.verbose(
                        Ev::TakenBack,
                        "took back the lock that an attempt whose reply was lost may have taken",
                    );
                    Residue::TakenBack
                }
                other => other,
            }
        }
        _ => Residue::Nothing,
    };
    match ended {
        Ended::Acquired(validity, fence, slot, token) => Waited::Acquired {
            grant: Grant {
                token: token.unwrap_or_else(|| wait.request.token.clone()),
                fence,
                validity,
                slot,
            },
            waited,
        },
        Ended::Superseded(by) => Waited::Superseded {
            waited,
            by,
            residue,
        },
        Ended::Conflict(conflict) => Waited::Conflict(conflict),
        Ended::Busy(held) => Waited::Busy {
            waited,
            held,
            residue,
        },
        Ended::Interrupted(signal) => Waited::Interrupted { signal, residue },
        Ended::Failed(error, unanswered) => Waited::Failed {
            error,
            unanswered,
            residue,
        },
    }
}

#[cfg(test)]
mod tests;
