//! The acquire loop: try, and while the lock is busy, wait for a release notification (notify
//! mode) or a jittered backoff (spin mode), never sleeping past the holder's expiry, until the
//! lock is ours, the wait limit passes, or a signal asks us to stop.
//!
//! Two rules keep it correct:
//! * **No lost wake-up.** In notify mode the subscription is confirmed *before* the attempt that
//!   precedes any sleep, so a release between a failed attempt and the sleep is never missed.
//!   (The very first attempt goes without a subscription: an uncontended lock costs no
//!   subscription at all; a busy one is subscribed to and tried again at once.)
//! * **No leaked lock.** An attempt whose reply was lost may have taken the lock. Later attempts
//!   use the same token (the acquire script recognises it); if we give up instead, we release
//!   that token on the way out.

use std::time::{Duration, Instant};

use crate::backend::{BackendError, Notice};
use crate::child::signals;
use crate::cli::WaitMode;
use crate::events::{Event, Events, Sender};
use crate::lock::{Attempt, HeldBy, Holder, HolderTtl, Lock, Token};
use crate::output::progress::WaitDisplay;
use crate::output::{self, Output};

/// How long to wait, and how.
#[derive(Clone, Copy, Debug)]
pub struct WaitPolicy {
    /// `None`: forever. `Some(ZERO)`: try once.
    pub limit: Option<Duration>,
    /// Notify or spin.
    pub mode: WaitMode,
}

/// How a wait ended.
#[derive(Debug)]
pub enum Waited {
    /// The lock is ours; the successful attempt was sent at `sent`.
    Acquired {
        /// Send time of the attempt that took the lock: the lock cannot expire before
        /// `sent + ttl`.
        sent: Instant,
        /// How long we waited.
        waited: Duration,
    },
    /// Still busy when the limit passed.
    Busy {
        /// How long we waited.
        waited: Duration,
        /// The holder as last seen.
        held: Option<HeldBy>,
    },
    /// A signal stopped the wait; nothing of ours is left in Redis.
    Interrupted(i32),
    /// Redis failed in a way that waiting cannot fix (or was still failing at the limit).
    Failed(BackendError),
}

/// Spin-mode backoff: first ceiling, and cap.
const SPIN_BASE: Duration = Duration::from_millis(5);
const SPIN_CAP: Duration = Duration::from_millis(500);
/// Backoff while Redis fails.
const ERROR_BASE: Duration = Duration::from_millis(100);
const ERROR_CAP: Duration = Duration::from_secs(5);
/// Backoff while the holder's lock has no expiry (not ours to judge): polled slowly.
const NO_EXPIRY_CAP: Duration = Duration::from_secs(5);

/// What to acquire, and how long to wait for it.
pub struct Request<'a> {
    /// Our token (the same for every attempt).
    pub token: &'a Token,
    /// The lock's TTL.
    pub ttl: Duration,
    /// What to store about us beside the lock.
    pub holder: &'a Holder,
    /// How long and how to wait.
    pub policy: WaitPolicy,
}

/// Take the lock for `request.token`, waiting according to `request.policy`.
pub fn acquire(
    lock: &mut dyn Lock,
    request: &Request<'_>,
    events: (&Sender, &mut Events),
    display: &mut WaitDisplay,
    out: &Output,
) -> Waited {
    let mut waiter = Waiter {
        lock,
        request,
        display,
        out,
        start: Instant::now(),
        maybe_ours: false,
        last_held: None,
    };
    let result = waiter.run(events);
    match &result {
        Waited::Acquired { waited, .. } => waiter.display.acquired(*waited),
        _ => waiter.display.clear(),
    }
    if !matches!(result, Waited::Acquired { .. }) && waiter.maybe_ours {
        // An attempt whose reply was lost may have taken the lock: give it back.
        match waiter.lock.release(request.token) {
            Ok(_) => out.verbose("released a lock taken by an attempt whose reply was lost"),
            Err(e) => out.warn(format!(
                "an acquire attempt may have taken the lock and releasing it failed ({e}); it expires within {}",
                output::duration(request.ttl)
            )),
        }
    }
    result
}

struct Waiter<'a> {
    lock: &'a mut dyn Lock,
    request: &'a Request<'a>,
    display: &'a mut WaitDisplay,
    out: &'a Output,
    start: Instant,
    maybe_ours: bool,
    last_held: Option<HeldBy>,
}

impl Waiter<'_> {
    fn run(&mut self, (tx, rx): (&Sender, &mut Events)) -> Waited {
        let policy = self.request.policy;
        let deadline = policy.limit.map(|limit| self.start + limit);
        let mut subscription = None;
        let mut mode = policy.mode;
        let mut spin = Backoff::new(SPIN_BASE, SPIN_CAP);
        let mut errors = Backoff::new(ERROR_BASE, ERROR_CAP);
        let mut no_expiry = Backoff::new(SPIN_CAP, NO_EXPIRY_CAP);
        let mut last_error: Option<BackendError> = None;
        // Until Redis has answered once, a failure other than a timeout is a misconfiguration
        // (wrong port, plain text to a TLS port, ...), not a blip: report it at once.
        let mut answered = false;
        loop {
            if let Some(signal) = rx.take_termination() {
                return Waited::Interrupted(signal);
            }
            let sent = Instant::now();
            let attempt =
                self.lock
                    .try_acquire(self.request.token, self.request.ttl, self.request.holder);
            let sleep = match attempt {
                Ok(Attempt::Acquired) => {
                    if last_error.is_some() {
                        self.out.notice("Redis answers again");
                    }
                    return Waited::Acquired {
                        sent,
                        waited: sent.duration_since(self.start),
                    };
                }
                Ok(Attempt::Busy(held)) => {
                    answered = true;
                    self.maybe_ours = false;
                    if last_error.take().is_some() {
                        self.out.notice("Redis answers again");
                    }
                    errors.reset();
                    if policy.limit == Some(Duration::ZERO) {
                        return Waited::Busy {
                            waited: sent.duration_since(self.start),
                            held: Some(held),
                        };
                    }
                    if mode == WaitMode::Notify && subscription.is_none() {
                        let tx = tx.clone();
                        match self.lock.subscribe(Box::new(move |notice| {
                            tx.send(Event::Subscriber(notice));
                        })) {
                            // Subscribed: look again before sleeping (no lost wake-up).
                            Ok(sub) => {
                                subscription = Some(sub);
                                continue;
                            }
                            Err(e) => {
                                self.display.warn(format!(
                                    "cannot subscribe to release notifications ({e}); polling instead"
                                ));
                                mode = WaitMode::Spin;
                            }
                        }
                    }
                    self.display.busy(&held);
                    if self.out.is_verbose() {
                        // (Formatted only when shown: every waiter passes here on every release.)
                        self.out.verbose(format!("lock busy: {}", held.summary()));
                    }
                    let sleep = match (mode, held.ttl) {
                        (_, HolderTtl::Never) => no_expiry.next_delay(),
                        (WaitMode::Notify, HolderTtl::Expires(pttl)) => past_expiry(pttl),
                        (WaitMode::Spin, HolderTtl::Expires(pttl)) => {
                            spin.next_delay().min(past_expiry(pttl))
                        }
                    };
                    self.last_held = Some(held);
                    sleep
                }
                Err(e) => {
                    if e.maybe_applied() {
                        self.maybe_ours = true;
                    }
                    let first_contact = !answered && !e.is_timeout();
                    if first_contact || !e.is_transient() || policy.limit == Some(Duration::ZERO) {
                        return Waited::Failed(e);
                    }
                    if last_error.is_none() {
                        self.display.warn(format!(
                            "Redis failed while waiting for the lock ({e}); retrying"
                        ));
                    } else {
                        self.out
                            .verbose(format!("acquire attempt failed again: {e}"));
                    }
                    last_error = Some(e);
                    errors.next_delay()
                }
            };
            let mut wake_at = Instant::now() + sleep;
            if let Some(deadline) = deadline {
                if Instant::now() >= deadline {
                    return match last_error {
                        Some(e) => Waited::Failed(e),
                        None => Waited::Busy {
                            waited: self.start.elapsed(),
                            held: self.last_held.take(),
                        },
                    };
                }
                // One last attempt exactly at the limit.
                wake_at = wake_at.min(deadline);
            }
            if let Some(signal) = self.sleep_until(wake_at, rx) {
                return Waited::Interrupted(signal);
            }
        }
    }

    /// Sleep until `wake_at` or a wake-up, keeping the display alive. Returns a terminating
    /// signal if one arrived.
    fn sleep_until(&mut self, wake_at: Instant, rx: &mut Events) -> Option<i32> {
        loop {
            let now = Instant::now();
            if now >= wake_at {
                return None;
            }
            let display_at = self.display.next_wakeup().unwrap_or(wake_at);
            if now >= display_at {
                self.display.tick();
                continue;
            }
            match rx.recv_timeout(wake_at.min(display_at) - now) {
                Some(Event::Signal(signal)) if signals::is_termination(signal) => {
                    return Some(signal);
                }
                Some(Event::Signal(libc::SIGTSTP)) => {
                    // Nothing is held while waiting: stop like the default action would.
                    self.display.clear();
                    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
                }
                Some(Event::Subscriber(Notice::Message)) => {
                    self.out.verbose("release notification received");
                    return None;
                }
                Some(Event::Subscriber(Notice::Resubscribed)) => {
                    self.out
                        .verbose("release notifications are back; looking at the lock again");
                    return None;
                }
                Some(Event::Subscriber(Notice::Down(e))) => {
                    self.out.verbose(format!(
                        "release notifications lost ({e}); reconnecting (the wait stays bounded by the holder's expiry)"
                    ));
                }
                Some(_) | None => {}
            }
        }
    }
}

/// How long to sleep so that we wake just after the holder's lock would expire: the remaining
/// time plus a little jitter, so that waiters woken by the same expiry do not all hit Redis in
/// the same millisecond.
pub fn past_expiry(pttl: Duration) -> Duration {
    let spread = (pttl / 8).clamp(Duration::from_millis(1), Duration::from_millis(50));
    pttl + Duration::from_millis(1) + jitter(spread)
}

/// A uniformly random duration in `[0, max]`.
fn jitter(max: Duration) -> Duration {
    let max_us = u64::try_from(max.as_micros()).unwrap_or(u64::MAX);
    Duration::from_micros(fastrand::u64(0..=max_us))
}

/// Capped exponential backoff with full jitter: the n-th delay is uniform in
/// `[0, min(cap, base * 2^n)]`.
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Backoff {
    /// Start at `base`, never above `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Backoff {
            base,
            cap,
            attempt: 0,
        }
    }

    /// The ceiling of the next delay (before jitter).
    pub fn ceiling(&self) -> Duration {
        self.base
            .checked_mul(1u32 << self.attempt.min(20))
            .unwrap_or(self.cap)
            .min(self.cap)
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        jitter(ceiling)
    }

    /// Back to the first delay.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_its_cap() {
        let mut b = Backoff::new(Duration::from_millis(5), Duration::from_millis(500));
        let mut ceilings = vec![];
        for _ in 0..10 {
            ceilings.push(b.ceiling().as_millis());
            let d = b.next_delay();
            assert!(d <= Duration::from_millis(500));
        }
        assert_eq!(ceilings, [5, 10, 20, 40, 80, 160, 320, 500, 500, 500]);
        b.reset();
        assert_eq!(b.ceiling(), Duration::from_millis(5));
        for _ in 0..1000 {
            b.next_delay();
        }
        assert_eq!(b.ceiling(), Duration::from_millis(500));
    }

    #[test]
    fn full_jitter_spreads_over_the_whole_range() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(100));
        let samples: Vec<Duration> = (0..2000).map(|_| b.next_delay()).collect();
        assert!(samples.iter().all(|d| *d <= Duration::from_millis(100)));
        assert!(samples.iter().any(|d| *d < Duration::from_millis(10)));
        assert!(samples.iter().any(|d| *d > Duration::from_millis(90)));
    }

    #[test]
    fn sleeps_end_just_past_the_holders_expiry() {
        for _ in 0..1000 {
            let d = past_expiry(Duration::from_secs(20));
            assert!(d > Duration::from_secs(20));
            assert!(d <= Duration::from_millis(20_051));
            let d = past_expiry(Duration::ZERO);
            assert!(d >= Duration::from_millis(1) && d <= Duration::from_millis(2));
        }
    }
}
