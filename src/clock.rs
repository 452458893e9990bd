//! The clock of leases: every lock validity's anchor, every kill deadline, and the renewal
//! schedule are [`Moment`]s on CLOCK_BOOTTIME, which counts the time the machine was
//! suspended. Timeouts of Redis calls and waits for a lock stay on `std::time::Instant`: they are
//! about patience, not about when a lock can expire.
//!
//! Why not `Instant` (CLOCK_MONOTONIC): it stops while the machine is suspended. Redis, on
//! another machine (or measuring with its own clock on this one after the resume), does not: a
//! lock renewed just before a laptop lid closed expires during the night, while a monotonic
//! deadline still lies in the future in the morning. The command would run on, beside the next
//! holder, until the next renewal attempt found the lock gone: up to a third of the TTL of
//! overlap. On CLOCK_BOOTTIME the deadline has passed when the machine wakes up, and both
//! distlock (whose event loop waits on a timer on this clock, see
//! [`crate::events::Events::recv_until`]) and its guard (see [`crate::child::guard`]) kill the
//! command at once.
//!
//! The rate of CLOCK_BOOTTIME is that of CLOCK_MONOTONIC (both are slewed by NTP alike), so the
//! margin for clock-rate differences (see [`crate::renew::Deadlines::margin_for`]) is unchanged.
//!
//! Which kernel clock is read goes through one seam ([`Clocks`]), so that a unit test can play a
//! suspend (which CI cannot do) and check that a lease that lapsed meanwhile is seen as lapsed.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// The kernel clock of every [`Moment`], and of the guard's timer (they must agree).
pub const KERNEL_CLOCK: libc::clockid_t = libc::CLOCK_BOOTTIME;

/// An instant on [`KERNEL_CLOCK`] (CLOCK_BOOTTIME): time since boot, suspend included.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Moment {
    since_boot: Duration,
}

impl Moment {
    /// Now.
    pub fn now() -> Moment {
        Moment::read(&Kernel)
    }

    /// Now, as `clocks` tell it (the seam: [`Kernel`] outside tests).
    fn read(clocks: &impl Clocks) -> Moment {
        Moment {
            since_boot: clocks.read(KERNEL_CLOCK),
        }
    }

    /// The moment `nanos` nanoseconds after boot (as the guard's messages carry it).
    pub fn from_nanos(nanos: u64) -> Moment {
        Moment {
            since_boot: Duration::from_nanos(nanos),
        }
    }

    /// Nanoseconds since boot (saturating: 584 years of uptime).
    pub fn as_nanos(self) -> u64 {
        u64::try_from(self.since_boot.as_nanos()).unwrap_or(u64::MAX)
    }

    /// The time from `earlier` to this moment, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Moment) -> Duration {
        self.since_boot.saturating_sub(earlier.since_boot)
    }

    /// The time since this moment (zero if it lies in the future).
    pub fn elapsed(self) -> Duration {
        Moment::now().saturating_duration_since(self)
    }

    /// This moment less `d`, or boot itself.
    pub fn saturating_sub(self, d: Duration) -> Moment {
        Moment {
            since_boot: self.since_boot.saturating_sub(d),
        }
    }
}

impl Add<Duration> for Moment {
    type Output = Moment;

    /// Saturating: a moment past 2^64 seconds of uptime is as good as never.
    fn add(self, d: Duration) -> Moment {
        Moment {
            since_boot: self.since_boot.saturating_add(d),
        }
    }
}

impl Sub<Moment> for Moment {
    type Output = Duration;

    /// Saturating, like [`Moment::saturating_duration_since`] (never a panic on a user's path).
    fn sub(self, earlier: Moment) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Moment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Moment({:?} since boot)", self.since_boot)
    }
}

/// The kernel's clocks, as far as distlock reads them.
trait Clocks {
    /// The time on kernel clock `clock`.
    fn read(&self, clock: libc::clockid_t) -> Duration;
}

/// The real clocks: `clock_gettime` (the vDSO: no system call).
struct Kernel;

impl Clocks for Kernel {
    fn read(&self, clock: libc::clockid_t) -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec owned by this frame; clock_gettime only
        // writes into it. It cannot fail for CLOCK_BOOTTIME (Linux >= 2.6.39) with a valid
        // pointer; a failure would leave zero, "boot", which makes every deadline look passed
        // (kill early, never late).
        unsafe { libc::clock_gettime(clock, &mut ts) };
        Duration::new(
            u64::try_from(ts.tv_sec).unwrap_or(0),
            u32::try_from(ts.tv_nsec).unwrap_or(0),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::lock::Validity;
    use crate::renew::Deadlines;

    /// A machine that can be suspended: CLOCK_MONOTONIC stops meanwhile, CLOCK_BOOTTIME does
    /// not (what the kernel does, see clock_gettime(2)).
    #[derive(Default)]
    struct Laptop {
        running: Cell<Duration>,
        suspended: Cell<Duration>,
    }

    impl Laptop {
        fn run(&self, d: Duration) {
            self.running.set(self.running.get() + d);
        }
        fn suspend(&self, d: Duration) {
            self.suspended.set(self.suspended.get() + d);
        }
    }

    impl Clocks for Laptop {
        fn read(&self, clock: libc::clockid_t) -> Duration {
            match clock {
                libc::CLOCK_MONOTONIC => self.running.get(),
                libc::CLOCK_BOOTTIME => self.running.get() + self.suspended.get(),
                other => panic!("distlock read clock {other}"),
            }
        }
    }

    /// The lid closes a second after a renewal of a 3s lock and opens 10s later: Redis expired
    /// the lock meanwhile, and distlock's clock says the kill deadline has passed. (On
    /// CLOCK_MONOTONIC, the seam's other clock, it would still lie 1.87s ahead.)
    #[test]
    fn a_lease_that_lapsed_during_a_suspend_is_seen_as_lapsed() {
        let laptop = Laptop::default();
        laptop.run(Duration::from_secs(100));
        let deadlines = Deadlines {
            ttl: Duration::from_secs(3),
            grace: Duration::from_millis(500),
        };
        let renewed = Validity {
            anchor: Moment::read(&laptop),
            ttl: Duration::from_secs(3),
        };
        let monotonic_then = laptop.read(libc::CLOCK_MONOTONIC);
        laptop.run(Duration::from_secs(1));
        laptop.suspend(Duration::from_secs(10));
        let now = Moment::read(&laptop);
        assert!(now >= deadlines.kill_at(renewed), "{now:?}");
        assert!(now >= renewed.earliest_expiry());
        assert_eq!(
            now - deadlines.kill_at(renewed),
            Duration::from_millis(8_130)
        );
        let monotonic_left = Duration::from_millis(2_870)
            .checked_sub(laptop.read(libc::CLOCK_MONOTONIC) - monotonic_then);
        assert_eq!(monotonic_left, Some(Duration::from_millis(1_870)));
    }

    /// The real clock is CLOCK_BOOTTIME, which never lags CLOCK_MONOTONIC.
    #[test]
    fn moments_are_read_on_clock_boottime() {
        assert_eq!(KERNEL_CLOCK, libc::CLOCK_BOOTTIME);
        let before = Kernel.read(libc::CLOCK_BOOTTIME);
        let now = Moment::now();
        let after = Kernel.read(libc::CLOCK_BOOTTIME);
        assert!(before <= now.since_boot && now.since_boot <= after);
        assert!(Kernel.read(libc::CLOCK_MONOTONIC) <= Kernel.read(libc::CLOCK_BOOTTIME));
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Moment::from_nanos(5_000);
        assert_eq!(t.as_nanos(), 5_000);
        assert_eq!(t - (t + Duration::from_nanos(1)), Duration::ZERO);
        assert_eq!((t + Duration::from_nanos(7)) - t, Duration::from_nanos(7));
        assert_eq!(
            t.saturating_sub(Duration::from_secs(1)),
            Moment::from_nanos(0)
        );
        assert_eq!(
            Moment::from_nanos(u64::MAX) + Duration::MAX,
            Moment {
                since_boot: Duration::MAX
            }
        );
    }
}
