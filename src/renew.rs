//! Keeping the lock: the renewal thread, and the deadlines that decide when a child must die.
//!
//! The renewer runs on its own thread with its own connection and only *reports* (renewed at
//! send time T, failed, not ours any more). It never decides anything: the main thread owns the
//! [`Deadlines`] and drives them from a timer that never waits on Redis, so a renewal stuck on a
//! paused server cannot delay a kill. One report goes elsewhere first: each confirmed renewal
//! moves the guard's copy of the deadlines (see [`crate::child::guard`]) before the main thread
//! hears of it, so that the guard's deadline is never earlier than the main thread's.
//!
//! The lock's expiry in Redis is at least `T + ttl` after the send time T of the last confirmed
//! renewal (the server applied it no earlier than we sent it). So the child's process group gets
//! `--kill-signal` at `T + ttl - grace - margin` and SIGKILL at `T + ttl - margin`, on
//! CLOCK_BOOTTIME (see [`crate::clock`]: a suspend counts), and is dead before anyone else can
//! take the lock.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::backend::Budget;
use crate::clock::Moment;
use crate::events::{Event, Sender};
use crate::lock::{Extended, Lock, Token, Validity};

/// When to stop the child if renewals stop succeeding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    /// The lock's TTL.
    pub ttl: Duration,
    /// Time between the kill signal and SIGKILL.
    pub grace: Duration,
}

impl Deadlines {
    /// The safety margin before the expiry of a lock set with `ttl`: 100ms plus 1% of it
    /// (Redis and our clock may tick at slightly different rates, by an amount that
    /// grows with the time measured; Redlock's analysis uses the same 1%), and the time a
    /// SIGKILL takes to land.
    pub fn margin_for(ttl: Duration) -> Duration {
        Duration::from_millis(100) + ttl / 100
    }

    /// The margin for the full TTL.
    pub fn margin(&self) -> Duration {
        Self::margin_for(self.ttl)
    }

    /// When to send the kill signal, given the validity of the last confirmed grant or renewal.
    pub fn term_at(&self, v: Validity) -> Moment {
        v.anchor + v.ttl.saturating_sub(self.grace + Self::margin_for(v.ttl))
    }

    /// When to send SIGKILL at the latest.
    pub fn kill_at(&self, v: Validity) -> Moment {
        v.anchor + v.ttl.saturating_sub(Self::margin_for(v.ttl))
    }

    /// When to renew a lock whose last confirmed validity is `v`: every `every`; sooner when
    /// `v` is a short claim: a quarter of the way to the kill signal, which leaves time for a
    /// whole Redis timeout and a retry before it.
    ///
    /// A validity a little short of the TTL (a Redlock's: the TTL minus the drift and the time
    /// its round took) is not a claim: it is renewed every `every` as long as that leaves at
    /// least as much time again before the kill signal.
    pub fn next_renewal(&self, v: Validity, every: Duration) -> Moment {
        let room = v.ttl.saturating_sub(self.grace + Self::margin_for(v.ttl));
        if v.ttl >= self.ttl || room >= every * 2 {
            return v.anchor + every;
        }
        v.anchor + every.min(room / 4)
    }

    /// The time left, after a renewal was due, to retry it before the kill signal: what a blip
    /// of Redis may last without costing the child its life.
    pub fn retry_window(&self, renew_every: Duration) -> Option<Duration> {
        self.ttl
            .checked_sub(self.grace + self.margin() + renew_every)
            .filter(|d| !d.is_zero())
    }

    /// The claim an acquire attempt asks for (see [`crate::lock`]): long enough that, after
    /// the grant, the kill schedule (`grace` and the margin) still leaves room to extend the
    /// lock to its full TTL, and never longer than the TTL. The room is what the first extension
    /// may take, retries included: two Redis timeouts, at least 2s. With the defaults (30s TTL,
    /// 5s grace, 2s timeout) the claim is 9.2s; for `acquire` (no grace), 4.2s.
    pub fn claim(&self, redis_timeout: Duration) -> Duration {
        let room = Duration::from_secs(2).max(redis_timeout * 2);
        // claim - grace - margin_for(claim) = room, with margin_for(c) = 100ms + c/100.
        let claim = (room + self.grace + Duration::from_millis(100)).mul_f64(100.0 / 99.0);
        let claim = Duration::from_millis(u64::try_from(claim.as_millis()).unwrap_or(u64::MAX) + 1);
        claim.min(self.ttl)
    }
}

enum Command {
    Now,
    Stop,
}

/// Who must hear of each confirmed renewal before the main thread does: the guard's line
/// ([`crate::child::guard::Line`]), whose kill deadlines must never be earlier than the main
/// thread's. A trait, so that renewal sits below the child module that implements it.
pub trait DeadlineWatch: Send {
    /// The lock is confirmed valid until `validity`: move the kill deadlines accordingly.
    fn move_deadline(&self, deadlines: &Deadlines, validity: Validity);
}

/// What the renewal thread needs; kept until the thread is started.
pub struct RenewSpec {
    /// A handle on the lock with its own connection.
    pub lock: Box<dyn Lock>,
    /// Our token.
    pub token: Token,
    /// The TTL to extend to.
    pub ttl: Duration,
    /// The renewal interval.
    pub every: Duration,
    /// The kill schedule (renewals are timed so that a failed one can be retried before it).
    pub deadlines: Deadlines,
    /// The validity of the grant (a claim) or of the last confirmed renewal.
    pub validity: Validity,
    /// Each attempt's Redis budget.
    pub timeout: Duration,
    /// Where to report.
    pub events: Sender,
    /// The guard's line, to move its deadline on each confirmed renewal (None: no guard).
    pub guard: Option<Box<dyn DeadlineWatch>>,
}

/// The renewal thread, started only when the first renewal comes near, or after [`LISTEN_AFTER`]
/// on a lock that keeps a line: a command that ends within a quarter of a second (most short
/// cron jobs) never pays for a thread and a connection. Dropping it stops the thread (after any
/// call in flight).
///
/// On a lock that keeps a line, the thread also listens on the holder's own wake channel: a
/// newer run with `--replace` publishes there, and the thread renews at once, whose reply says
/// who asks us to stop ([`Event::Replaced`]). Without the message (lost, or published before we
/// listened), the next renewal says it anyway.
pub struct Renewer {
    state: State,
}

enum State {
    Pending(Box<RenewSpec>),
    Running(mpsc::Sender<Command>),
    Stopped,
}

impl Renewer {
    /// A renewer for `spec`, not started yet.
    pub fn new(spec: RenewSpec) -> Renewer {
        Renewer {
            state: State::Pending(Box::new(spec)),
        }
    }

    /// When the thread should be started (half-way to the first renewal, or after
    /// [`LISTEN_AFTER`] on a lock that keeps a line), if it is not yet.
    pub fn start_at(&self) -> Option<Moment> {
        match &self.state {
            State::Pending(spec) => {
                let first = spec.deadlines.next_renewal(spec.validity, spec.every);
                let half_way = spec.validity.anchor + (first - spec.validity.anchor) / 2;
                Some(if spec.lock.queues() {
                    half_way.min(spec.validity.anchor + LISTEN_AFTER)
                } else {
                    half_way
                })
            }
            _ => None,
        }
    }

    /// Start the thread if it is pending. An error leaves the lock unrenewed: the caller's kill
    /// deadline then takes care of the child.
    pub fn start(&mut self) -> std::io::Result<()> {
        let State::Pending(_) = self.state else {
            return Ok(());
        };
        let State::Pending(spec) = std::mem::replace(&mut self.state, State::Stopped) else {
            return Ok(());
        };
        let (commands, rx) = mpsc::channel();
        let nudge = commands.clone();
        thread::Builder::new()
            .name("distlock-renewer".into())
            .stack_size(256 * 1024)
            .spawn(move || renew_loop(*spec, &rx, nudge))?;
        self.state = State::Running(commands);
        Ok(())
    }

    /// Renew now (after distlock was stopped and resumed), starting the thread if needed.
    pub fn renew_now(&mut self) -> std::io::Result<()> {
        self.start()?;
        if let State::Running(commands) = &self.state {
            let _ = commands.send(Command::Now);
        }
        Ok(())
    }

    /// Stop renewing.
    pub fn stop(&mut self) {
        if let State::Running(commands) = &self.state {
            let _ = commands.send(Command::Stop);
        }
        self.state = State::Stopped;
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How long after the grant the holder of a lock that keeps a line starts listening for a newer
/// run that replaces it (`--replace`): short commands never pay for it, long ones are stopped
/// within a round trip of the request.
pub const LISTEN_AFTER: Duration = Duration::from_millis(250);

fn renew_loop(spec: RenewSpec, commands: &mpsc::Receiver<Command>, nudge: mpsc::Sender<Command>) {
    let RenewSpec {
        mut lock,
        token,
        ttl,
        every,
        deadlines,
        validity,
        timeout,
        events,
        guard,
    } = spec;
    let mut next = deadlines.next_renewal(validity, every);
    let mut failures = 0u32;
    // Our own wake channel: a message there (or a lost subscription come back) means a newer run
    // may ask us to stop; the renewal says. A subscription that fails leaves the renewals to
    // say it.
    let _listening = lock.queues().then(|| {
        let notify = move |notice: crate::backend::Notice| {
            if !matches!(notice, crate::backend::Notice::Down(_)) {
                let _ = nudge.send(Command::Now);
            }
        };
        // Whatever was published before we listened: the first renewal reads it.
        next = Moment::now();
        lock.subscribe(&token, Box::new(notify), &Budget::within(timeout))
            .ok()
    });
    loop {
        if let Command::Stop = wait_for_turn(commands, next) {
            return;
        }
        let extended = lock.extend(&token, ttl, &Budget::within(timeout));
        for failure in lock.take_failures() {
            events.send(Event::NodeFailed(failure));
        }
        let event = match extended {
            Ok(Extended::Held(validity)) => {
                failures = 0;
                next = deadlines.next_renewal(validity, every);
                // The guard first: its deadline must never be earlier than the main thread's.
                if let Some(line) = &guard {
                    line.move_deadline(&deadlines, validity);
                }
                Event::Renewed(validity)
            }
            Ok(Extended::Replaced(validity, by)) => {
                failures = 0;
                next = deadlines.next_renewal(validity, every);
                if let Some(line) = &guard {
                    line.move_deadline(&deadlines, validity);
                }
                // The lock stays ours while the command stops: go on renewing.
                if !events.send(Event::Replaced(by)) {
                    return;
                }
                Event::Renewed(validity)
            }
            Ok(Extended::NotHeld) => {
                events.send(Event::NotHeld);
                return;
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                next = Moment::now() + retry_delay(failures, every);
                Event::RenewFailed(e)
            }
        };
        if !events.send(event) {
            return;
        }
    }
}

/// How long a renewal may come late after the machine was suspended: the renewer sleeps in
/// slices of at most this, because a sleep is measured on CLOCK_MONOTONIC, which stops during a
/// suspend, while renewals are due on CLOCK_BOOTTIME, which does not. (Without the slices, a
/// renewal due during a suspend would come a whole interval late after the resume, and could
/// cost a healthy command its life.)
const SUSPEND_CHECK: Duration = Duration::from_secs(1);

/// Wait until `due` (on [`Moment`]'s clock) or a command from the main thread, whichever comes
/// first: `Now` when it is time to renew, `Stop` when the main thread says so or is gone.
fn wait_for_turn(commands: &mpsc::Receiver<Command>, due: Moment) -> Command {
    loop {
        let left = due.saturating_duration_since(Moment::now());
        if left.is_zero() {
            return Command::Now;
        }
        match commands.recv_timeout(left.min(SUSPEND_CHECK)) {
            Ok(command) => return command,
            Err(mpsc::RecvTimeoutError::Disconnected) => return Command::Stop,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}

/// Delay before retrying a failed renewal: quick at first (a blip should cost milliseconds),
/// doubling, and never more than a quarter of the renewal interval.
pub fn retry_delay(failures: u32, every: Duration) -> Duration {
    let delay = Duration::from_millis(25)
        .checked_mul(1u32 << failures.min(16))
        .unwrap_or(Duration::MAX);
    delay.min(every / 4).max(Duration::from_millis(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadlines(ttl_ms: u64, grace_ms: u64) -> Deadlines {
        Deadlines {
            ttl: Duration::from_millis(ttl_ms),
            grace: Duration::from_millis(grace_ms),
        }
    }

    fn valid(anchor: Moment, ms: u64) -> Validity {
        Validity {
            anchor,
            ttl: Duration::from_millis(ms),
        }
    }

    #[test]
    fn kill_sequence_ends_before_expiry() {
        let d = deadlines(30_000, 5_000);
        let t0 = Moment::now();
        let v = valid(t0, 30_000);
        assert_eq!(d.margin(), Duration::from_millis(400));
        assert_eq!(d.term_at(v) - t0, Duration::from_millis(24_600));
        assert_eq!(d.kill_at(v) - t0, Duration::from_millis(29_600));
        assert!(d.kill_at(v) < v.earliest_expiry());
    }

    #[test]
    fn a_claim_leaves_room_to_extend_it_before_the_kill_signal() {
        let d = deadlines(30_000, 5_000);
        let claim = d.claim(Duration::from_secs(2));
        assert_eq!(claim, Duration::from_millis(9_192));
        let t0 = Moment::now();
        let v = valid(t0, u64::try_from(claim.as_millis()).unwrap());
        // Two Redis timeouts to extend it before the kill signal; killed before it can expire.
        let room = d.term_at(v) - t0;
        assert!(room >= Duration::from_secs(4), "{room:?}");
        assert!(room < Duration::from_millis(4_050), "{room:?}");
        assert!(d.kill_at(v) < v.earliest_expiry());
        // The first renewal comes a quarter of the way, not after the usual third of the TTL.
        assert_eq!(d.next_renewal(v, Duration::from_secs(10)) - t0, room / 4);
        // A slow Redis gets two of its timeouts.
        let slow = d.claim(Duration::from_secs(5));
        assert!(slow < Duration::from_secs(16), "{slow:?}");
        assert!(
            d.term_at(valid(t0, u64::try_from(slow.as_millis()).unwrap())) - t0
                >= Duration::from_secs(10)
        );
        // Never longer than the TTL; acquire (no grace) claims little.
        assert_eq!(
            deadlines(1_000, 200).claim(Duration::from_secs(2)),
            Duration::from_secs(1)
        );
        assert_eq!(
            deadlines(30_000, 0).claim(Duration::from_secs(2)),
            Duration::from_millis(4_142)
        );
    }

    #[test]
    fn renewals_of_a_full_ttl_come_every_interval() {
        let d = deadlines(30_000, 5_000);
        let t0 = Moment::now();
        assert_eq!(
            d.next_renewal(valid(t0, 30_000), Duration::from_secs(10)) - t0,
            Duration::from_secs(10)
        );
        // A Redlock's validity: the TTL less the drift (1% + 2ms) and its round's time.
        assert_eq!(
            d.next_renewal(valid(t0, 29_650), Duration::from_secs(10)) - t0,
            Duration::from_secs(10)
        );
        // Short of twice the interval before the kill signal: sooner.
        let tight = deadlines(10_000, 2_000);
        let v = valid(t0, 9_850);
        let room = tight.term_at(v) - t0;
        assert_eq!(tight.next_renewal(v, Duration::from_secs(5)) - t0, room / 4);
    }

    #[test]
    fn retry_window() {
        let d = deadlines(30_000, 5_000);
        assert_eq!(
            d.retry_window(Duration::from_secs(10)),
            Some(Duration::from_millis(14_600))
        );
        let d = deadlines(1_000, 200);
        assert_eq!(
            d.retry_window(Duration::from_millis(333)),
            Some(Duration::from_millis(357))
        );
        let d = deadlines(5_000, 5_000);
        assert_eq!(d.retry_window(Duration::from_secs(1)), None);
    }

    #[test]
    fn retries_are_quick_then_bounded() {
        let every = Duration::from_secs(10);
        assert_eq!(retry_delay(1, every), Duration::from_millis(50));
        assert_eq!(retry_delay(2, every), Duration::from_millis(100));
        assert_eq!(retry_delay(30, every), Duration::from_millis(2500));
        assert_eq!(
            retry_delay(1, Duration::from_millis(20)),
            Duration::from_millis(10)
        );
    }
}
