//! How long a waiter sleeps between attempts: [`next_sleep`], a function of what the last
//! attempt saw (and of the backoffs it draws from), and the backoffs themselves.

use std::time::Duration;

use super::{FIRST_LOOK_MIN, WaitMode};
use crate::lock::HolderTtl;

/// After a release notification, a lock still found busy (its other servers have not applied
/// the release yet) is looked at again this soon, this many times (see
/// [`crate::lock::Lock::recheck_after_notice`]).
pub const AFTER_NOTICE: Duration = Duration::from_millis(20);
pub const AFTER_NOTICE_LOOKS: u32 = 3;

/// Spin-mode backoff: first ceiling, and cap.
pub(crate) const SPIN_BASE: Duration = Duration::from_millis(5);
pub(crate) const SPIN_CAP: Duration = Duration::from_millis(500);
/// Backoff while Redis fails.
const ERROR_BASE: Duration = Duration::from_millis(100);
const ERROR_CAP: Duration = Duration::from_secs(5);
/// Backoff while the holder's lock has no expiry (not ours to judge): polled slowly.
pub(crate) const NO_EXPIRY_CAP: Duration = Duration::from_secs(5);

/// What the last attempt saw that decides the next sleep.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    /// Notify or spin (spin also after a subscription failed).
    pub mode: WaitMode,
    /// The first holder's remaining time.
    pub ttl: HolderTtl,
    /// In line: attempt again within this long, or lose the place.
    pub refresh_in: Option<Duration>,
    /// In line: our place (1 = first).
    pub position: Option<u32>,
    /// A release notification came, and the lock asks to be looked at again soon after one.
    pub after_notice: bool,
}

/// The next sleep after a busy attempt. `jitter(max)` draws from `[0, max]` (random in use; a
/// fixed choice in tests), for the backoffs and for the spread past the holder's expiry.
pub fn next_sleep(
    seen: &Seen,
    spin: &mut Backoff,
    no_expiry: &mut Backoff,
    jitter: fn(Duration) -> Duration,
) -> Duration {
    let sleep = match (seen.mode, seen.ttl, seen.refresh_in) {
        // In line, polling: the lock may be handed to us at any time; the backoff (at most
        // SPIN_CAP) takes it up well within the take-up window.
        (WaitMode::Spin, _, Some(refresh)) => spin.next_with(jitter).min(refresh),
        // In line: woken when our turn comes; meanwhile keep the place alive. A holder that
        // died publishes nothing, and its lock, once expired, goes to the first in line at its
        // next attempt: so the first in line also looks just past the holder's expiry (at most
        // once per expiry it sees, which a live holder keeps pushing back by a renewal
        // interval), and the others only refresh. The line as a whole looks once per expiry,
        // not once per waiter.
        (_, HolderTtl::Expires(pttl), Some(refresh)) if seen.position == Some(1) => {
            refresh.min(past_expiry_with(pttl, jitter).max(FIRST_LOOK_MIN))
        }
        (_, _, Some(refresh)) => refresh,
        (_, HolderTtl::Never, None) => no_expiry.next_with(jitter),
        (WaitMode::Notify, HolderTtl::Expires(pttl), None) => past_expiry_with(pttl, jitter),
        (WaitMode::Spin, HolderTtl::Expires(pttl), None) => {
            spin.next_with(jitter).min(past_expiry_with(pttl, jitter))
        }
    };
    // A lock without a line whose release reaches its servers one by one (a Redlock): a
    // notification from one may arrive before the others have the release. Look again soon,
    // rather than sleep until the holder's expiry.
    if seen.after_notice {
        sleep.min(AFTER_NOTICE)
    } else {
        sleep
    }
}

/// The backoffs a waiter draws its sleeps from.
#[derive(Debug)]
pub struct Sleeps {
    spin: Backoff,
    errors: Backoff,
    no_expiry: Backoff,
}

impl Default for Sleeps {
    /// All at their first delay.
    fn default() -> Sleeps {
        Sleeps {
            spin: Backoff::new(SPIN_BASE, SPIN_CAP),
            errors: Backoff::new(ERROR_BASE, ERROR_CAP),
            no_expiry: Backoff::new(SPIN_CAP, NO_EXPIRY_CAP),
        }
    }
}

impl Sleeps {
    /// The sleep after a busy attempt.
    pub fn after_busy(&mut self, seen: &Seen) -> Duration {
        next_sleep(seen, &mut self.spin, &mut self.no_expiry, jitter)
    }

    /// The sleep after a failed attempt.
    pub fn after_error(&mut self) -> Duration {
        self.errors.next_delay()
    }

    /// Redis answered: the next failure starts the error backoff again.
    pub fn answered(&mut self) {
        self.errors.reset();
    }
}

/// How long to sleep so that we wake just after the holder's lock would expire: the remaining
/// time plus a little jitter, so that waiters woken by the same expiry do not all hit Redis in
/// the same millisecond.
pub fn past_expiry(pttl: Duration) -> Duration {
    past_expiry_with(pttl, jitter)
}

fn past_expiry_with(pttl: Duration, jitter: fn(Duration) -> Duration) -> Duration {
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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
        self.next_with(jitter)
    }

    /// The next delay, drawn by `jitter` below the ceiling.
    pub(crate) fn next_with(&mut self, jitter: fn(Duration) -> Duration) -> Duration {
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The next sleep with fresh backoffs, drawing the top of every range.
    fn top(mode: WaitMode, ttl: HolderTtl, refresh_in: Option<Duration>, notice: bool) -> Duration {
        let seen = Seen {
            mode,
            ttl,
            refresh_in,
            position: refresh_in.map(|_| 1),
            after_notice: notice,
        };
        let mut spin = Backoff::new(SPIN_BASE, SPIN_CAP);
        let mut no_expiry = Backoff::new(SPIN_CAP, NO_EXPIRY_CAP);
        next_sleep(&seen, &mut spin, &mut no_expiry, |max| max)
    }

    #[test]
    fn in_line_and_polling_a_waiter_backs_off_but_keeps_its_place() {
        let expires = HolderTtl::Expires(Duration::from_secs(10));
        assert_eq!(top(WaitMode::Spin, expires, Some(ms(40)), false), SPIN_BASE);
        assert_eq!(top(WaitMode::Spin, expires, Some(ms(2)), false), ms(2));
    }

    #[test]
    fn in_line_and_notified_only_the_first_looks_at_the_holders_expiry() {
        // The holder's lock expires long after the place must be refreshed.
        let far = HolderTtl::Expires(Duration::from_secs(20));
        assert_eq!(top_at(1, far, ms(2000)), ms(2000));
        assert_eq!(top_at(2, far, ms(2000)), ms(2000));
        // It expires sooner: the first in line looks just past it (233ms, 1ms past, and a
        // spread of at most 233/8 ms); the others keep to their refresh.
        let near = HolderTtl::Expires(ms(233));
        assert_eq!(
            top_at(1, near, ms(2000)),
            ms(234) + Duration::from_micros(29_125)
        );
        assert_eq!(top_at(2, near, ms(2000)), ms(2000));
        assert_eq!(top_at(7, near, ms(2000)), ms(2000));
        // About to expire: never more often than FIRST_LOOK_MIN.
        assert_eq!(
            top_at(1, HolderTtl::Expires(ms(3)), ms(2000)),
            FIRST_LOOK_MIN
        );
        // No expiry: only the refresh.
        assert_eq!(top_at(1, HolderTtl::Never, ms(700)), ms(700));
    }

    /// The next sleep of a notify waiter at `position` in line.
    fn top_at(position: u32, ttl: HolderTtl, refresh: Duration) -> Duration {
        let seen = Seen {
            mode: WaitMode::Notify,
            ttl,
            refresh_in: Some(refresh),
            position: Some(position),
            after_notice: false,
        };
        let mut spin = Backoff::new(SPIN_BASE, SPIN_CAP);
        let mut no_expiry = Backoff::new(SPIN_CAP, NO_EXPIRY_CAP);
        next_sleep(&seen, &mut spin, &mut no_expiry, |max| max)
    }

    #[test]
    fn out_of_line_a_notified_waiter_wakes_just_past_the_expiry() {
        // 300ms, 1ms past, and a spread of at most 300/8 ms.
        let expires = HolderTtl::Expires(ms(300));
        assert_eq!(
            top(WaitMode::Notify, expires, None, false),
            ms(301) + Duration::from_micros(37_500)
        );
        // Spinning: the backoff, unless the expiry comes first.
        assert_eq!(top(WaitMode::Spin, expires, None, false), SPIN_BASE);
        let seen = Seen {
            mode: WaitMode::Spin,
            ttl: HolderTtl::Expires(Duration::ZERO),
            refresh_in: None,
            position: None,
            after_notice: false,
        };
        let mut spin = Backoff::new(SPIN_BASE, SPIN_CAP);
        let mut no_expiry = Backoff::new(SPIN_CAP, NO_EXPIRY_CAP);
        assert_eq!(
            next_sleep(&seen, &mut spin, &mut no_expiry, |max| max),
            ms(2)
        );
    }

    #[test]
    fn a_holder_without_expiry_is_polled_slowly() {
        assert_eq!(
            top(WaitMode::Notify, HolderTtl::Never, None, false),
            SPIN_CAP
        );
        let seen = Seen {
            mode: WaitMode::Notify,
            ttl: HolderTtl::Never,
            refresh_in: None,
            position: None,
            after_notice: false,
        };
        let mut spin = Backoff::new(SPIN_BASE, SPIN_CAP);
        let mut no_expiry = Backoff::new(SPIN_CAP, NO_EXPIRY_CAP);
        let sleeps: Vec<Duration> = (0..6)
            .map(|_| next_sleep(&seen, &mut spin, &mut no_expiry, |max| max))
            .collect();
        assert_eq!(
            sleeps,
            [ms(500), ms(1000), ms(2000), ms(4000), ms(5000), ms(5000)]
        );
        // The spin backoff was not drawn from.
        assert_eq!(spin.ceiling(), SPIN_BASE);
    }

    #[test]
    fn after_a_notice_a_lock_that_asks_for_it_is_looked_at_again_soon() {
        let expires = HolderTtl::Expires(Duration::from_secs(10));
        assert_eq!(top(WaitMode::Notify, expires, None, true), AFTER_NOTICE);
        assert_eq!(top(WaitMode::Spin, expires, None, true), SPIN_BASE);
    }

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
