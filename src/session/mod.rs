//! One session: what `run` and `acquire` share, from an open lock to its release.
//!
//! ```text
//! lock (opened by the caller, or the model Redis's `ScriptLock` in tests)
//!   -> reentry: does an ancestor hold this lock? (reenter.rs; one read-only request)
//!   -> Session::start: the event channel, and signals become events
//!   -> Session::take: wait for the lock (take.rs) -> Taken::Granted | Taken::Exit
//!   -> Session::interrupted: a termination signal that came while taking
//!   -> (the caller's work: run a command, or hand a token over; keys.rs: every key the
//!      grant holds, and the variables that tell them)
//!   -> Session::release (always, bounded; a failure is a warning)
//! ```
//!
//! The lock is passed in, so the pipeline of `run` can be driven with `ScriptLock`, the lock
//! over the model Redis of `lock::model` (see the tests of `commands::run`). This module knows locks, the engine
//! ([`crate::wait`]) and output; it knows no subcommand.

pub mod keys;
pub mod reenter;
pub mod take;
#[cfg(test)]
pub(crate) mod testing;

use crate::backend::{Budget, Cancel};
use crate::config::TakeConfig;
use crate::error::Error;
use crate::events::{self, Events, Sender};
use crate::exit::Exit;
use crate::lock::{self, Grant, Holder, Lock, Ownership};
use crate::output::{Ev, Output};
use crate::signals::{self, Dispositions};

pub use reenter::Held;
pub use take::{Taken, left_behind};

/// What a run or acquire of a lock that an ancestor holds does instead of taking it.
pub enum Reentry {
    /// Use the ancestor's lock: what it holds, and the lock's fence.
    Reenter {
        /// The ancestor's entry.
        held: Held,
        /// The fence of the lock it holds.
        fence: u64,
    },
    /// End with this (the ancestor's lock is gone; the message is printed).
    Exit(Exit),
}

/// Whether an ancestor holds the lock of `cfg` on `lock` (checked with Redis), and what to do
/// then; `None`: take it as usual. `before_check` runs once an ancestor is found, before the
/// request that checks it (`run`: a missing command costs no request).
pub fn reentry(
    lock: &mut dyn Lock,
    cfg: &TakeConfig,
    before_check: impl FnOnce() -> Result<(), Error>,
    out: &Output,
) -> Result<Option<Reentry>, Error> {
    let Some(found) = reenter::held_by_ancestor(lock, cfg.name.prefix()) else {
        return Ok(None);
    };
    before_check()?;
    let timeout = cfg.topology.timeout();
    Ok(
        match reenter::check(lock, &found, cfg.limit, timeout, out)? {
            reenter::Nested::Reenter(fence) => Some(Reentry::Reenter {
                held: found.0,
                fence,
            }),
            reenter::Nested::Exit(exit) => Some(Reentry::Exit(exit)),
            reenter::Nested::Take => None,
        },
    )
}

/// A lock with the process set up to take it: events, signals and a cancel flag.
pub struct Session {
    lock: Box<dyn Lock>,
    tx: Sender,
    rx: Events,
    cancel: Cancel,
    dispositions: Dispositions,
}

impl Session {
    /// Set up for `lock`: from here on, INT/TERM/HUP/QUIT are events, not deaths.
    pub fn start(lock: Box<dyn Lock>) -> Result<Session, Error> {
        let (tx, rx) = events::channel()
            .map_err(|e| Error::Internal(format!("cannot create the event pipe: {e}")))?;
        let cancel = Cancel::new();
        let dispositions = signals::install(&tx, &cancel)
            .map_err(|e| Error::Internal(format!("cannot install signal handlers: {e}")))?;
        Ok(Session {
            lock,
            tx,
            rx,
            cancel,
            dispositions,
        })
    }

    /// The lock.
    pub fn lock(&mut self) -> &mut dyn Lock {
        self.lock.as_mut()
    }

    /// The lock, to read.
    pub fn lock_ref(&self) -> &dyn Lock {
        self.lock.as_ref()
    }

    /// The event channel (signals, renewals, notifications).
    pub fn events(&mut self) -> (&Sender, &mut Events) {
        (&self.tx, &mut self.rx)
    }

    /// Raised by termination signals.
    pub fn cancel(&self) -> &Cancel {
        &self.cancel
    }

    /// What the signal set-up found (for the child).
    pub fn dispositions(&self) -> &Dispositions {
        &self.dispositions
    }

    /// Wait for the lock as `holder` (see [`take::take`]).
    pub fn take(
        &mut self,
        cfg: &TakeConfig,
        holder: &Holder,
        out: &Output,
    ) -> Result<Taken, Error> {
        take::take(
            cfg,
            self.lock.as_mut(),
            holder,
            (&self.tx, &mut self.rx),
            &self.cancel,
            out,
        )
    }

    /// A termination signal that arrived while the lock was taken, if any: the lock must then
    /// be given back.
    pub fn interrupted(&mut self) -> Option<i32> {
        signals::take_termination(&mut self.rx)
    }

    /// Release the lock, bounded by the Redis timeout; a failure is a warning (the key expires
    /// by itself). After a run that `succeeded`, a lock taken with an interval stays taken
    /// until it has passed. Returns what the release found, if it got an answer.
    pub fn release(
        &mut self,
        grant: &Grant,
        cfg: &TakeConfig,
        succeeded: bool,
        out: &Output,
    ) -> Option<Ownership> {
        let key = cfg.quoted();
        let budget = Budget::within(cfg.topology.timeout());
        let released = self.lock.release_after(&grant.token, succeeded, &budget);
        warn_failed_nodes(self.lock.as_mut(), out);
        match released {
            Ok(ownership) => {
                let after = cfg.after;
                if succeeded && (after.min_interval.is_some() || after.cooldown.is_some()) {
                    out.verbose(
                        Ev::Released,
                        format!(
                            "released lock {key}; it stays taken until {} has passed",
                            interval_words(after)
                        ),
                    );
                } else {
                    out.verbose(Ev::Released, format!("released lock {key}"));
                }
                Some(ownership)
            }
            Err(e) => {
                out.warn(
                    Ev::ReleaseFailed,
                    format!(
                        "cannot release lock {key} ({e}); it expires by itself within {}",
                        crate::text::duration(cfg.ttl.max(cfg.claim))
                    ),
                );
                None
            }
        }
    }
}

/// `--min-interval 1h (from the start of the run)`, in words.
fn interval_words(after: lock::AfterRun) -> String {
    let mut words = Vec::new();
    if let Some(d) = after.min_interval {
        words.push(format!(
            "--min-interval {} from the start of the run",
            crate::text::duration(d)
        ));
    }
    if let Some(d) = after.cooldown {
        words.push(format!(
            "--cooldown {} from its end",
            crate::text::duration(d)
        ));
    }
    words.join(" and ")
}

/// Warn about each node of a Redlock that failed while the others went on (once per run: the
/// lock hands each node out once).
pub fn warn_failed_nodes(lock: &mut dyn Lock, out: &Output) {
    for failure in lock.take_failures() {
        out.warn(Ev::NodeFailed, failure.warning());
    }
}

/// `SIGINT`, or `signal 42`.
pub fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned())
}
