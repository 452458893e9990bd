//! The messages on the guard's pipe, as distlock writes them and the guard reads them: each
//! one `write`, shorter than PIPE_BUF, so that each arrives whole whichever thread makes it.
//!
//! The [`Mailbox`] at the bottom of the guard's stack is the other thing they share.
//!
//! Boundary: the bytes and the mailbox only; who sends what is `line.rs`'s and `handle.rs`'s, what the guard
//! does with them `process.rs`'s.

use std::sync::atomic::{AtomicI32, AtomicU32};

use nix::sys::signal::Signal;

use crate::clock::Moment;

/// Messages on the pipe, each one `write` shorter than PIPE_BUF (so each arrives whole):
/// * `t`, the two deadlines (8 bytes each: nanoseconds on CLOCK_BOOTTIME) and the kill signal
///   (4 bytes): the kill deadlines, moved;
/// * `k`: distlock is killing the group itself;
/// * `d`: disarmed.
///
/// The group is not a message: it is in the [`Mailbox`] (see [`Mailbox::group`]).
pub(super) const DEADLINE: u8 = b't';
pub(super) const DISTLOCK_KILLS: u8 = b'k';
pub(super) const DISARM: u8 = b'd';
pub(super) const DEADLINE_LEN: usize = 21;

/// The message "the kill deadlines are now `term` and `kill`, the kill signal `signal`".
pub(super) fn deadline_message(deadline: Deadline, signal: Signal) -> [u8; DEADLINE_LEN] {
    let mut message = [DEADLINE; DEADLINE_LEN];
    message[1..9].copy_from_slice(&deadline.term.as_nanos().to_ne_bytes());
    message[9..17].copy_from_slice(&deadline.kill.as_nanos().to_ne_bytes());
    message[17..].copy_from_slice(&(signal as i32).to_ne_bytes());
    message
}

/// The kill deadlines the guard holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Deadline {
    /// When to send the kill signal.
    pub(super) term: Moment,
    /// When to send SIGKILL.
    pub(super) kill: Moment,
}

/// What distlock and its guard share besides the pipe: the first 16 bytes of the guard's stack
/// allocation (the stack grows down from the other end, 16 KiB away). distlock writes it before
/// the guard exists; afterwards only atomics change: the guard raises `fired` (a plain store
/// instruction: no libc), the command and distlock set `group`.
#[repr(C, align(16))]
pub(super) struct Mailbox {
    /// Set by the guard when it ends the command itself (it sent the kill signal, or SIGKILL,
    /// before distlock said that it was killing the group).
    pub(super) fired: AtomicU32,
    /// The read end of the guard's pipe.
    pub(super) pipe: libc::c_int,
    /// The group to guard: [`NO_GROUP`] until the command names it (from its side of `vfork`,
    /// before exec: one atomic store, which wakes nobody), the group id then, [`GROUP_GONE`]
    /// once distlock has reaped it. The guard reads it whenever it wakes (a deadline, its pipe
    /// closing), never sooner than it needs it.
    pub(super) group: AtomicI32,
}

/// [`Mailbox::group`] before the command has named its group.
pub(super) const NO_GROUP: i32 = 0;
/// [`Mailbox::group`] once the group is gone: its id may be reused, never signal it.
pub(super) const GROUP_GONE: i32 = -1;
