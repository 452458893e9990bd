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
//!   handed to it, and its attempt takes it up), to keep its place alive (the lock says how
//!   often), or when the holder's lock would expire (a holder that crashed publishes nothing),
//!   but never more than once per [`MIN_POLL`].
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

use std::time::{Duration, Instant};

use crate::backend::{BackendError, Budget, Cancel, Notice};
use crate::events::{Event, Events, Sender};
use crate::lock::{
    Answer, Conflict, Grant, Holder, HolderTtl, Holders, Lock, Queueing, Request, Residue, Validity,
};
use crate::output::progress::WaitDisplay;
use crate::output::{Ev, Output};
use crate::signals;

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
/// A waiter in line attempts at most this often (besides its wake-ups): a waiting process sends
/// at most 0.5 requests per second, whatever the holder's expiry.
pub const MIN_POLL: Duration = Duration::from_secs(2);

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

/// After a release notification, a lock still found busy (its other servers have not applied
/// the release yet) is looked at again this soon, this many times.
const AFTER_NOTICE: Duration = Duration::from_millis(20);
const AFTER_NOTICE_LOOKS: u32 = 3;

/// Spin-mode backoff: first ceiling, and cap.
const SPIN_BASE: Duration = Duration::from_millis(5);
const SPIN_CAP: Duration = Duration::from_millis(500);
/// Backoff while Redis fails.
const ERROR_BASE: Duration = Duration::from_millis(100);
const ERROR_CAP: Duration = Duration::from_secs(5);
/// Backoff while the holder's lock has no expiry (not ours to judge): polled slowly.
const NO_EXPIRY_CAP: Duration = Duration::from_secs(5);

/// How the loop ended, before giving anything back.
enum Ended {
    Acquired(Validity, u64, Option<u32>, Option<crate::lock::Token>),
    Busy(Option<Holders>),
    Superseded(Option<Box<Holder>>),
    Conflict(Conflict),
    Interrupted(i32),
    Failed(BackendError, Option<Unanswered>),
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
        _ if waiter.maybe_ours || waiter.joined => {
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

struct Waiter<'a> {
    lock: &'a mut dyn Lock,
    wait: &'a Wait<'a>,
    display: &'a mut WaitDisplay,
    out: &'a Output,
    start: Instant,
    /// Nothing may run past this (the end of `--wait` plus one timeout).
    hard_end: Option<Instant>,
    /// An attempt's reply was lost: the lock may be ours.
    maybe_ours: bool,
    /// An attempt took a place in line.
    joined: bool,
    last_held: Option<Holders>,
    /// Quick looks left after a release notification (see [`AFTER_NOTICE`]).
    notified: u32,
}

/// Redis is failing.
struct Failing {
    last: BackendError,
}

/// How a sleep between attempts ended.
enum Slept {
    /// Attempt again.
    On,
    /// A termination signal came.
    Interrupted(i32),
    /// The wait's limit had passed.
    TimeUp,
}

impl Waiter<'_> {
    fn run(&mut self, (tx, rx): (&Sender, &mut Events)) -> Ended {
        let policy = self.wait.policy;
        let timeout = self.wait.timeout;
        let wait_end = policy.limit.map(|limit| self.start + limit);
        let once = policy.limit == Some(Duration::ZERO);
        // A lock that keeps a line: wait in it (notify mode: woken alone when our turn comes;
        // spin mode: polling for it), so that nobody is overtaken, whatever their mode.
        let in_line = self.lock.queues() && !once;
        let place = match self.wait.request.queueing {
            Queueing::Supersede => Queueing::Supersede,
            Queueing::Replace => Queueing::Replace,
            _ => Queueing::Join,
        };
        // The first attempt takes no place in line (and needs no subscription).
        let mut queueing = Queueing::Try;
        let mut subscription = None;
        let mut mode = policy.mode;
        let mut spin = Backoff::new(SPIN_BASE, SPIN_CAP);
        let mut errors = Backoff::new(ERROR_BASE, ERROR_CAP);
        let mut no_expiry = Backoff::new(SPIN_CAP, NO_EXPIRY_CAP);
        let mut failing: Option<Failing> = None;
        let mut answered = false;
        let mut attempts = 0u32;
        loop {
            if let Some(signal) = signals::take_termination(rx) {
                return Ended::Interrupted(signal);
            }
            let now = Instant::now();
            let deadline = self
                .hard_end
                .map_or(now + timeout, |end| end.min(now + timeout));
            let budget = Budget::until(deadline).cancellable(self.wait.cancel);
            attempts = attempts.saturating_add(1);
            let request = Request {
                queueing,
                polls: mode == WaitMode::Spin,
                ..self.wait.request.clone()
            };
            self.joined |= queueing != Queueing::Try;
            let attempt = self.lock.try_acquire(&request, &budget);
            if attempt.is_ok() && !answered {
                answered = true;
                if self.out.is_verbose() {
                    let to = match self.lock.answering() {
                        Some(nodes) => nodes.summary(),
                        None => self.lock.describe(),
                    };
                    self.out
                        .verbose(Ev::Connected, format!("connected to {to}"));
                }
            }
            // A node of a Redlock that failed while the others answered: said once per run.
            for failure in self.lock.take_failures() {
                self.display.warn(Ev::NodeFailed, failure.warning());
            }
            if attempt.is_ok() && failing.take().is_some() {
                self.display.recovered();
            }
            let (holders, position, refresh_in) = match attempt {
                Ok(Answer::Granted {
                    validity,
                    fence,
                    slot,
                    token,
                }) => {
                    return Ended::Acquired(validity, fence, slot, token);
                }
                Ok(Answer::Superseded(by)) => return Ended::Superseded(by),
                Ok(Answer::Conflict(conflict)) => return Ended::Conflict(conflict),
                Ok(Answer::Busy(holders)) => (holders, None, None),
                Ok(Answer::Queued {
                    holders,
                    position,
                    refresh_in,
                }) => (holders, Some(position), Some(refresh_in)),
                Err(BackendError::Interrupted { sent }) => {
                    self.maybe_ours |= sent;
                    return Ended::Interrupted(self.signal(rx));
                }
                Err(e) => {
                    self.maybe_ours |= e.maybe_applied();
                    let unanswered = (!answered).then(|| Unanswered {
                        attempts,
                        over: self.start.elapsed(),
                    });
                    if !e.is_transient() || (!answered && e.is_misconfiguration()) || once {
                        return Ended::Failed(e, unanswered);
                    }
                    if !answered && self.start.elapsed() >= self.wait.unreachable_after {
                        return Ended::Failed(e, unanswered);
                    }
                    self.display.failing(&e, wait_end);
                    failing = Some(Failing { last: e });
                    let sleep = errors.next_delay();
                    match self.sleep(sleep, wait_end, answered, rx) {
                        Slept::On => continue,
                        Slept::Interrupted(signal) => return Ended::Interrupted(signal),
                        Slept::TimeUp => {
                            let last = failing
                                .map_or(BackendError::Interrupted { sent: false }, |f| f.last);
                            return Ended::Failed(
                                last,
                                (!answered).then(|| Unanswered {
                                    attempts,
                                    over: self.start.elapsed(),
                                }),
                            );
                        }
                    }
                }
            };
            errors.reset();
            if once {
                return Ended::Busy(Some(holders));
            }
            if mode == WaitMode::Notify && subscription.is_none() {
                let tx = tx.clone();
                let budget = Budget::within(timeout).cancellable(self.wait.cancel);
                match self.lock.subscribe(
                    self.wait.request.token,
                    Box::new(move |notice| {
                        tx.send(Event::Subscriber(notice));
                    }),
                    &budget,
                ) {
                    // Subscribed: look again at once, taking our place in line if the lock
                    // keeps one (no lost wake-up).
                    Ok(sub) => {
                        subscription = Some(sub);
                        if in_line {
                            queueing = place;
                        }
                        continue;
                    }
                    Err(BackendError::Interrupted { .. }) => {
                        return Ended::Interrupted(self.signal(rx));
                    }
                    Err(e) => {
                        self.display.warn(
                            Ev::SubscribeFailed,
                            format!(
                                "cannot subscribe to release notifications ({e}); polling instead"
                            ),
                        );
                        mode = WaitMode::Spin;
                    }
                }
            }
            if mode == WaitMode::Spin && in_line && queueing == Queueing::Try {
                // Take our place in line at once (no subscription to wait for).
                queueing = place;
                continue;
            }
            self.display.busy(&holders, position);
            if self.out.is_verbose() {
                // (Formatted only when shown: every waiter passes here on every release.)
                self.out.verbose(
                    Ev::AttemptBusy,
                    format!(
                        "lock busy{}: {}",
                        crate::output::progress::in_line(position),
                        holders.summary()
                    ),
                );
            }
            let sleep = match (mode, holders.first.ttl, refresh_in) {
                // In line, polling: the lock may be handed to us at any time; the backoff (at
                // most SPIN_CAP) takes it up well within the take-up window.
                (WaitMode::Spin, _, Some(refresh)) => spin.next_delay().min(refresh),
                // In line: woken when our turn comes; meanwhile keep the place alive, and look
                // when the holder's lock would expire (a holder that crashed publishes nothing),
                // but not more often than MIN_POLL.
                (_, ttl, Some(refresh)) => {
                    let expiry = match ttl {
                        HolderTtl::Expires(pttl) => past_expiry(pttl).max(MIN_POLL),
                        HolderTtl::Never => refresh,
                    };
                    refresh.min(expiry)
                }
                (_, HolderTtl::Never, None) => no_expiry.next_delay(),
                (WaitMode::Notify, HolderTtl::Expires(pttl), None) => past_expiry(pttl),
                (WaitMode::Spin, HolderTtl::Expires(pttl), None) => {
                    spin.next_delay().min(past_expiry(pttl))
                }
            };
            // A lock without a line (a Redlock) is released on each node by its own request:
            // a notification from one node may arrive before the others have the release. Look
            // again soon, a few times, rather than sleep until the holder's expiry.
            let sleep = if self.notified > 0 && refresh_in.is_none() {
                self.notified -= 1;
                sleep.min(AFTER_NOTICE)
            } else {
                sleep
            };
            self.last_held = Some(holders);
            match self.sleep(sleep, wait_end, answered, rx) {
                Slept::On => {}
                Slept::Interrupted(signal) => return Ended::Interrupted(signal),
                Slept::TimeUp => return Ended::Busy(self.last_held.take()),
            }
        }
    }

    /// Sleep for `sleep`, cut to the end of the wait (one last attempt exactly at the limit)
    /// and, before Redis ever answered, to the end of the first-contact window.
    fn sleep(
        &mut self,
        sleep: Duration,
        wait_end: Option<Instant>,
        answered: bool,
        rx: &mut Events,
    ) -> Slept {
        let mut wake_at = Instant::now() + sleep;
        if !answered {
            wake_at = wake_at.min(self.start + self.wait.unreachable_after);
        }
        if let Some(end) = wait_end {
            if Instant::now() >= end {
                return Slept::TimeUp;
            }
            wake_at = wake_at.min(end);
        }
        match self.sleep_until(wake_at, rx) {
            Some(signal) => Slept::Interrupted(signal),
            None => Slept::On,
        }
    }

    /// The termination signal that cancelled a call (it is in the event pipe by now).
    fn signal(&self, rx: &mut Events) -> i32 {
        signals::take_termination(rx).unwrap_or(libc::SIGTERM)
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
                    self.notified = AFTER_NOTICE_LOOKS;
                    self.out
                        .verbose(Ev::Notified, "release notification received");
                    return None;
                }
                Some(Event::Subscriber(Notice::Resubscribed)) => {
                    self.out.verbose(
                        Ev::SubscriptionRestored,
                        "release notifications are back; looking at the lock again",
                    );
                    return None;
                }
                Some(Event::Subscriber(Notice::Down(e))) => {
                    self.out.verbose(
                        Ev::SubscriptionLost,
                        format!(
                            "release notifications lost ({e}); reconnecting (the wait stays bounded by the holder's expiry)"
                        ),
                    );
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

    /// The engine against the fake lock: its logic without Redis.
    mod engine {
        use super::*;
        use crate::backend::Cancel;
        use crate::events;
        use crate::lock::fake::{FakeLock, REFRESH};
        use crate::lock::{Holder, Token};
        use crate::output::{Format, Level, Output};
        use std::sync::{Arc, Mutex};
        use std::thread::JoinHandle;

        const CLAIM: Duration = Duration::from_secs(5);

        struct Waiter {
            token: Token,
            cancel: Cancel,
            signal: events::Sender,
            handle: JoinHandle<(Waited, Duration)>,
        }

        /// Run the engine for a new client of `lock`'s world on a thread of its own.
        fn waiter(
            lock: &FakeLock,
            limit: u32,
            wait: Option<Duration>,
            queueing: Queueing,
        ) -> Waiter {
            waiter_with(lock.client(), limit, wait, queueing, WaitMode::Notify)
        }

        fn waiter_with(
            mut lock: FakeLock,
            limit: u32,
            wait: Option<Duration>,
            queueing: Queueing,
            mode: WaitMode,
        ) -> Waiter {
            let token = Token::generate().unwrap();
            let cancel = Cancel::new();
            let (tx, mut rx) = events::channel().unwrap();
            let (t, c, s) = (token.clone(), cancel.clone(), tx.clone());
            let handle = std::thread::spawn(move || {
                let out = Output::new(Level::Quiet, Format::Text, Vec::new());
                let holder = Holder::default();
                let w = Wait {
                    request: Request {
                        token: &t,
                        claim: CLAIM,
                        ttl: Duration::from_secs(30),
                        holder: &holder,
                        limit,
                        queueing,
                        polls: false,
                        after: crate::lock::AfterRun::default(),
                    },
                    policy: WaitPolicy { limit: wait, mode },
                    timeout: Duration::from_millis(100),
                    unreachable_after: Duration::from_millis(300),
                    cancel: &c,
                };
                let mut display =
                    WaitDisplay::new(&out, "k", "fake://", wait, Duration::from_secs(30));
                let start = Instant::now();
                let waited = acquire(&mut lock, &w, (&tx, &mut rx), &mut display, &out);
                (waited, start.elapsed())
            });
            Waiter {
                token,
                cancel,
                signal: s,
                handle,
            }
        }

        fn in_line(lock: &FakeLock, token: &Token) -> bool {
            lock.world()
                .line
                .iter()
                .any(|(t, _, _)| t == token.as_str())
        }

        fn until(what: &str, mut condition: impl FnMut() -> bool) {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !condition() {
                assert!(Instant::now() < deadline, "timed out waiting for {what}");
                std::thread::sleep(Duration::from_millis(1));
            }
        }

        /// Poll `condition` every 2ms for at most 5s.
        fn wait_for(mut condition: impl FnMut() -> bool) {
            let end = Instant::now() + Duration::from_secs(5);
            while !condition() {
                assert!(Instant::now() < end, "condition not met within 5s");
                std::thread::sleep(Duration::from_millis(2));
            }
        }

        fn join(w: Waiter) -> (Waited, Duration) {
            w.handle.join().unwrap()
        }

        #[test]
        fn an_uncontended_lock_costs_one_attempt_without_a_place_in_line() {
            let lock = FakeLock::new();
            let (waited, _) = join(waiter(&lock, 1, None, Queueing::Join));
            let Waited::Acquired { grant, .. } = waited else {
                panic!("{waited:?}");
            };
            assert_eq!(grant.fence, 1);
            assert_eq!(grant.validity.ttl, CLAIM);
            let w = lock.world();
            assert_eq!(w.attempts.len(), 1);
            assert_eq!(w.attempts[0].1, Queueing::Try);
            assert!(w.gave_up.is_empty());
        }

        #[test]
        fn a_release_hands_the_lock_to_the_first_in_line() {
            let lock = FakeLock::new();
            lock.hold("holder", 1, Duration::from_secs(30));
            let w = waiter(&lock, 1, None, Queueing::Join);
            until("the waiter to take its place", || in_line(&lock, &w.token));
            lock.client()
                .release(
                    &Token::from_text("holder"),
                    &Budget::within(Duration::from_secs(1)),
                )
                .unwrap();
            let token = w.token.clone();
            let (waited, took) = join(w);
            assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
            assert!(
                took < Duration::from_secs(5),
                "{took:?}: woken, not by expiry"
            );
            let world = lock.world();
            let mine: Vec<Queueing> = world
                .attempts
                .iter()
                .filter(|(t, _)| t == token.as_str())
                .map(|(_, q)| *q)
                .collect();
            // Try, then (subscribed) join, then take up the lock handed over.
            assert_eq!(mine.first(), Some(&Queueing::Try));
            assert!(mine[1..].iter().all(|q| *q == Queueing::Join), "{mine:?}");
        }

        #[test]
        fn waiters_are_served_in_the_order_they_joined() {
            let lock = FakeLock::new();
            lock.hold("holder", 1, Duration::from_secs(30));
            let order = Arc::new(Mutex::new(Vec::new()));
            let mut waiters = Vec::new();
            for i in 0..5 {
                let w = waiter(&lock, 1, None, Queueing::Join);
                until("the waiter to take its place", || in_line(&lock, &w.token));
                waiters.push((i, w));
            }
            lock.client()
                .release(
                    &Token::from_text("holder"),
                    &Budget::within(Duration::from_secs(1)),
                )
                .unwrap();
            for (i, w) in waiters {
                let token = w.token.clone();
                let (waited, _) = join(w);
                assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
                order.lock().unwrap().push(i);
                lock.client()
                    .release(&token, &Budget::within(Duration::from_secs(1)))
                    .unwrap();
            }
            assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
        }

        #[test]
        fn a_lost_wake_up_costs_at_most_a_refresh() {
            let lock = FakeLock::new();
            lock.hold("holder", 1, Duration::from_secs(30));
            let w = waiter(&lock, 1, None, Queueing::Join);
            until("the waiter to take its place", || in_line(&lock, &w.token));
            lock.world().deaf.push(w.token.as_str().to_owned());
            let released = Instant::now();
            lock.client()
                .release(
                    &Token::from_text("holder"),
                    &Budget::within(Duration::from_secs(1)),
                )
                .unwrap();
            let (waited, _) = join(w);
            assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
            assert!(released.elapsed() < REFRESH * 5, "{:?}", released.elapsed());
        }

        #[test]
        fn the_wait_limit_ends_the_wait_and_leaves_the_line() {
            let lock = FakeLock::new();
            lock.hold("holder", 1, Duration::from_secs(30));
            let w = waiter(&lock, 1, Some(Duration::from_millis(200)), Queueing::Join);
            let token = w.token.clone();
            let (waited, took) = join(w);
            assert!(matches!(waited, Waited::Busy { .. }), "{waited:?}");
            assert!(took >= Duration::from_millis(200), "{took:?}");
            assert!(took < Duration::from_millis(600), "{took:?}");
            assert!(!in_line(&lock, &token));
            assert!(lock.world().gave_up.contains(&token.as_str().to_owned()));
        }

        #[test]
        fn a_signal_ends_the_wait_and_leaves_the_line() {
            let lock = FakeLock::new();
            lock.hold("holder", 1, Duration::from_secs(30));
            let w = waiter(&lock, 1, None, Queueing::Join);
            until("the waiter to take its place", || in_line(&lock, &w.token));
            // What the signal handler does.
            w.cancel.cancel();
            // SAFETY: writing one byte from a valid buffer to a valid fd.
            unsafe { libc::write(w.signal.raw_wake_fd(), [15u8].as_ptr().cast(), 1) };
            let token = w.token.clone();
            let (waited, _) = join(w);
            assert!(
                matches!(
                    waited,
                    Waited::Interrupted {
                        signal: 15,
                        residue: Residue::Nothing
                    }
                ),
                "{waited:?}"
            );
            assert!(!in_line(&lock, &token));
        }

        #[test]
        fn the_newest_waiter_supersedes_the_older_ones() {
            let lock = FakeLock::new();
            lock.hold("holder", 1, Duration::from_secs(30));
            let older = waiter(&lock, 1, None, Queueing::Join);
            until("the older waiter to take its place", || {
                in_line(&lock, &older.token)
            });
            let newer = waiter(&lock, 1, None, Queueing::Supersede);
            let (waited, _) = join(older);
            assert!(matches!(waited, Waited::Superseded { .. }), "{waited:?}");
            until("the newer waiter to take its place", || {
                in_line(&lock, &newer.token)
            });
            lock.client()
                .release(
                    &Token::from_text("holder"),
                    &Budget::within(Duration::from_secs(1)),
                )
                .unwrap();
            let (waited, _) = join(newer);
            assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
        }

        #[test]
        fn a_key_held_with_another_limit_is_a_conflict() {
            let lock = FakeLock::new();
            lock.hold("holder", 3, Duration::from_secs(30));
            let (waited, _) = join(waiter(&lock, 1, None, Queueing::Join));
            assert!(matches!(waited, Waited::Conflict(_)), "{waited:?}");
        }

        #[test]
        fn a_semaphore_slot_is_handed_to_the_next_in_line() {
            let lock = FakeLock::new();
            lock.hold("a", 2, Duration::from_secs(30));
            lock.hold("b", 2, Duration::from_secs(30));
            let w = waiter(&lock, 2, None, Queueing::Join);
            until("the waiter to take its place", || in_line(&lock, &w.token));
            lock.client()
                .release(
                    &Token::from_text("a"),
                    &Budget::within(Duration::from_secs(1)),
                )
                .unwrap();
            let (waited, _) = join(w);
            assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
            assert_eq!(lock.world().holders.len(), 2);
        }

        /// A lock without a line (a Redlock) notifies from one server before the others
        /// have the release: the waiter looks again soon, not at the holder's expiry.
        #[test]
        fn a_notice_before_the_release_lands_is_looked_at_again_soon() {
            let mut lock = FakeLock::new();
            lock.lineless = true;
            lock.hold("holder", 1, Duration::from_secs(30));
            let w = waiter_with(lock.client(), 1, None, Queueing::Join, WaitMode::Notify);
            wait_for(|| !lock.world().subscribed().is_empty());
            let notified = Instant::now();
            lock.notify_all();
            std::thread::sleep(Duration::from_millis(15));
            lock.drop_holder("holder");
            let (waited, _) = join(w);
            assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
            assert!(
                notified.elapsed() < Duration::from_secs(2),
                "{:?}",
                notified.elapsed()
            );
            assert!(lock.world().line.is_empty());
        }

        #[test]
        fn no_wait_tries_once_without_subscribing_or_a_place() {
            let lock = FakeLock::new();
            lock.hold("holder", 1, Duration::from_secs(30));
            let (waited, _) = join(waiter(&lock, 1, Some(Duration::ZERO), Queueing::Join));
            assert!(matches!(waited, Waited::Busy { .. }), "{waited:?}");
            let w = lock.world();
            assert_eq!(w.attempts.len(), 1);
            assert!(w.line.is_empty() && w.gave_up.is_empty());
        }

        #[test]
        fn spin_mode_takes_a_place_in_line_without_subscribing() {
            let lock = FakeLock::new();
            lock.hold("holder", 1, Duration::from_millis(150));
            let w = waiter_with(lock.client(), 1, None, Queueing::Join, WaitMode::Spin);
            let (waited, _) = join(w);
            assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
            let world = lock.world();
            // The first attempt only tries; every later one keeps (or takes) the place.
            assert_eq!(world.attempts[0].1, Queueing::Try);
            assert!(world.attempts.len() >= 2);
            assert!(
                world.attempts[1..]
                    .iter()
                    .all(|(_, q)| *q == Queueing::Join)
            );
            assert!(world.subscribed().is_empty());
        }

        #[test]
        fn a_server_that_never_answers_ends_the_wait() {
            let lock = FakeLock::new();
            let client = lock.client();
            *client.hang.lock().unwrap() = true;
            let w = waiter_with(client, 1, None, Queueing::Join, WaitMode::Notify);
            let (waited, took) = join(w);
            let Waited::Failed {
                unanswered,
                residue,
                ..
            } = waited
            else {
                panic!("{waited:?}");
            };
            assert!(unanswered.is_some_and(|u| u.attempts >= 2));
            // Every attempt may have been applied: what may remain is said.
            assert!(matches!(residue, Residue::MayRemain(CLAIM)), "{residue:?}");
            assert!(took >= Duration::from_millis(300), "{took:?}");
            assert!(took < Duration::from_secs(2), "{took:?}");
        }

        #[test]
        fn a_lost_reply_is_taken_back_when_the_wait_ends() {
            let lock = FakeLock::new();
            lock.hold("holder", 1, Duration::from_secs(30));
            let client = lock.client();
            client
                .failures
                .lock()
                .unwrap()
                .push_back(BackendError::Timeout {
                    sent: true,
                    after: Duration::from_millis(100),
                });
            let w = waiter_with(
                client,
                1,
                Some(Duration::from_millis(300)),
                Queueing::Join,
                WaitMode::Notify,
            );
            let (waited, _) = join(w);
            assert!(
                matches!(
                    waited,
                    Waited::Busy {
                        residue: Residue::TakenBack,
                        ..
                    }
                ),
                "{waited:?}"
            );
        }
    }
}
