//! distlock's side of the way to its guard: the [`Line`] that distlock's threads share (the
//! main thread, the renewer), which remembers the latest deadline and whether distlock kills,
//! so that a replacement guard learns both first; and when the guard sends its kill signal
//! relative to distlock's ([`head_start`]).
//!
//! Boundary: what is written on the pipe and when; the pipe is made, and the guard started, in
//! `handle.rs`.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::sys::signal::Signal;

use super::message::{DISTLOCK_KILLS, Deadline, deadline_message};
use crate::clock::Moment;
use crate::lock::Validity;
use crate::renew::Deadlines;

/// How long after distlock's kill-signal deadline the guard sends the signal itself, given the
/// grace between the kill signal and SIGKILL: a healthy distlock sends it at the deadline and
/// tells the guard so within microseconds; a distlock that is stopped leaves the guard the rest
/// of the grace. Never past the SIGKILL deadline.
pub fn head_start(grace: std::time::Duration) -> std::time::Duration {
    (grace / 4).min(std::time::Duration::from_millis(50))
}

/// The way to the guard that is current, shared by distlock's threads: the main thread (the
/// grant's deadline, its own kills, replacements) and the renewer (each confirmed renewal).
/// It outlives any one guard: a replacement takes over the same line, with what was sent on it.
#[derive(Clone)]
pub struct Line(Arc<Mutex<Wire>>);

pub(super) struct Wire {
    /// The write end of the current guard's pipe (non-blocking); None without a guard, or once
    /// disarmed.
    pub(super) pipe: Option<OwnedFd>,
    /// Which guard the pipe belongs to (each start takes the next number), so that a guard that
    /// is dropped after its replacement started cannot disarm the replacement.
    pub(super) generation: u64,
    /// The latest deadline sent: a replacement gets it before anything else.
    pub(super) deadline: Option<Deadline>,
    /// The kill signal (`--kill-signal`).
    pub(super) signal: Signal,
    /// distlock has started killing the group itself.
    pub(super) distlock_kills: bool,
    /// A write found the pipe full: the guard has not read it for thousands of messages.
    pub(super) clogged: bool,
}

impl Line {
    /// A line for guards that end a command with `signal`, then SIGKILL.
    pub fn new(signal: Signal) -> Line {
        Line(Arc::new(Mutex::new(Wire {
            pipe: None,
            generation: 0,
            deadline: None,
            signal,
            distlock_kills: false,
            clogged: false,
        })))
    }

    pub(super) fn wire(&self) -> MutexGuard<'_, Wire> {
        // A thread that panicked while holding the lock left a consistent wire (every change is
        // one assignment): use it.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The lock is ours until at least the end of `validity` (a grant or a confirmed renewal):
    /// move the guard's deadlines to those `deadlines` derive from it (see [`head_start`]),
    /// unless it has later ones already. Called before the main thread learns of the validity.
    pub fn move_deadline(&self, deadlines: &Deadlines, validity: Validity) {
        let kill = deadlines.kill_at(validity);
        let term = (deadlines.term_at(validity) + head_start(deadlines.grace)).min(kill);
        self.move_to(term, kill);
    }

    /// Move the guard's deadlines to `term` and `kill`, unless it has later ones already.
    pub(super) fn move_to(&self, term: Moment, kill: Moment) {
        let mut wire = self.wire();
        let latest = match wire.deadline {
            Some(d) => Deadline {
                term: d.term.max(term),
                kill: d.kill.max(kill),
            },
            None => Deadline { term, kill },
        };
        if wire.deadline == Some(latest) {
            return;
        }
        wire.deadline = Some(latest);
        let message = deadline_message(latest, wire.signal);
        wire.send(&message);
    }

    /// distlock starts killing the group itself: the guard must not send a second kill signal.
    /// Called before the kill signal is sent.
    pub fn distlock_kills(&self) {
        let mut wire = self.wire();
        if !wire.distlock_kills {
            wire.distlock_kills = true;
            wire.send(&[DISTLOCK_KILLS]);
        }
    }

    /// Whether a write found the guard's pipe full since the last call: the guard has not read
    /// its pipe for thousands of messages (it is stopped), and, once continued, would read
    /// deadlines that are out of date and miss the latest, which did not fit. The caller kills
    /// it and starts another (which gets the latest deadline first).
    pub fn take_clogged(&self) -> bool {
        std::mem::take(&mut self.wire().clogged)
    }
}

impl Wire {
    pub(super) fn send(&mut self, message: &[u8]) {
        if let Some(pipe) = &self.pipe {
            // SAFETY: writing from a valid buffer to a descriptor we own.
            let sent =
                unsafe { libc::write(pipe.as_raw_fd(), message.as_ptr().cast(), message.len()) };
            if sent < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock {
                self.clogged = true;
            }
        }
    }
}

impl crate::renew::DeadlineWatch for Line {
    fn move_deadline(&self, deadlines: &Deadlines, validity: Validity) {
        Line::move_deadline(self, deadlines, validity);
    }
}
