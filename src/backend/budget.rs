//! How long a call to Redis may take, and whether somebody asked it to stop.
//!
//! Every call into the backend carries a [`Budget`]: an instant after which the caller stops
//! waiting, whatever the server does, and optionally a [`Cancel`] flag that a signal handler
//! raises (a termination signal while waiting for a lock must end distlock within a second, even
//! when Redis hangs). The per-connection `--redis-timeout` still bounds each connect and each
//! command; the budget bounds the whole call, which may consist of several.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A flag that asks calls in progress to stop waiting. Raised from a signal handler (an atomic
/// store is async-signal-safe), checked by whoever waits for a reply.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A lowered flag.
    pub fn new() -> Self {
        Cancel::default()
    }

    /// Raise the flag.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the flag is raised.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Lower the flag (the cancellation was handled).
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }

    /// The flag itself, for a signal handler.
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

/// Until when a call may run, and what may stop it earlier.
#[derive(Clone, Debug)]
pub struct Budget {
    /// The caller stops waiting at this instant.
    pub deadline: Instant,
    /// Stop earlier when this is raised.
    pub cancel: Option<Cancel>,
}

impl Budget {
    /// A budget that ends at `deadline`.
    pub fn until(deadline: Instant) -> Self {
        Budget {
            deadline,
            cancel: None,
        }
    }

    /// A budget that ends `d` from now.
    pub fn within(d: Duration) -> Self {
        Budget::until(Instant::now() + d)
    }

    /// The same budget, also ended by `cancel`.
    pub fn cancellable(mut self, cancel: &Cancel) -> Self {
        self.cancel = Some(cancel.clone());
        self
    }

    /// Time left.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Whether the call was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(Cancel::is_cancelled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_count_down_and_cancel() {
        let cancel = Cancel::new();
        let budget = Budget::within(Duration::from_secs(5)).cancellable(&cancel);
        assert!(budget.remaining() > Duration::from_secs(4));
        assert!(!budget.is_cancelled());
        cancel.flag().store(true, Ordering::SeqCst);
        assert!(budget.is_cancelled());
        cancel.reset();
        assert!(!budget.is_cancelled());
        assert_eq!(
            Budget::until(Instant::now() - Duration::from_secs(1)).remaining(),
            Duration::ZERO
        );
    }
}
