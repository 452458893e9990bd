//! The messages background threads send to the main thread.
//!
//! distlock's main thread is a single event loop: while waiting for the lock and while the child
//! runs, it blocks on one channel fed by the signal thread, the release subscriber and the
//! renewer, with a timeout set to its next deadline. Nothing in the main thread ever blocks on a
//! signal or a Redis reply that another thread is waiting for, so a deadline is never late.

use std::sync::mpsc;
use std::time::Instant;

use crate::backend::{BackendError, Notice};

/// One thing that happened.
#[derive(Debug)]
pub enum Event {
    /// A signal was delivered to distlock.
    Signal(i32),
    /// The release channel reported something (see [`Notice`]).
    Subscriber(Notice),
    /// A renewal sent at `sent` was confirmed: the lock cannot expire before `sent + ttl`.
    Renewed {
        /// When the renewal was sent (monotonic clock).
        sent: Instant,
    },
    /// A renewal failed; the renewer keeps retrying.
    RenewFailed(BackendError),
    /// A renewal found that the lock is no longer ours (key gone or someone else's token).
    NotHeld,
}

/// The sending side, cloned into every background thread.
pub type Sender = mpsc::Sender<Event>;
/// The main thread's side.
pub type Receiver = mpsc::Receiver<Event>;

/// A new channel.
pub fn channel() -> (Sender, Receiver) {
    mpsc::channel()
}
