//! Signals wait while a thread waits for Redis.
//!
//! Every connection has SO_RCVTIMEO/SO_SNDTIMEO, and on Linux a socket read or write with a
//! timeout is never restarted after a signal handler, whatever SA_RESTART says: it fails with
//! EINTR, which redis-rs reports as a broken connection — a lost reply, "maybe applied". A
//! SIGCHLD arriving during a release (the guard exiting, an orphan reaped) then turned a clean
//! release into a retry that could not tell what the first attempt had done. distlock's
//! handlers only note that a signal came, so holding signals back until the call returns loses
//! nothing: they are delivered (to this thread or another) as soon as the mask is restored.

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

/// Signals blocked in the current thread until dropped.
pub(crate) struct Deferred {
    previous: Option<SigSet>,
}

impl Deferred {
    /// Block every signal that can be blocked and is not a synchronous fault.
    pub(crate) fn new() -> Self {
        Self::except(&[])
    }

    /// As [`Deferred::new`], leaving `open` as they were: for a read that one of them may cut
    /// short on purpose (a wait on a doorbell that a termination signal must end at once: it
    /// then fails with EINTR, and the caller drops the connection).
    pub(crate) fn except(open: &[i32]) -> Self {
        let mut set = SigSet::all();
        for signal in open {
            if let Ok(signal) = Signal::try_from(*signal) {
                set.remove(signal);
            }
        }
        for fault in [
            Signal::SIGSEGV,
            Signal::SIGBUS,
            Signal::SIGFPE,
            Signal::SIGILL,
            Signal::SIGTRAP,
            Signal::SIGSYS,
            Signal::SIGABRT,
        ] {
            set.remove(fault);
        }
        let mut previous = SigSet::empty();
        let previous = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut previous))
            .ok()
            .map(|()| previous);
        Deferred { previous }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if let Some(previous) = &self.previous {
            let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(previous), None);
        }
    }
}
