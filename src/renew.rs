//! Keeping the lock: the renewal thread, and the deadlines that decide when a child must die.
//!
//! The renewer runs on its own thread with its own connection and only *reports* (renewed at
//! send time T, failed, not ours any more). It never decides anything: the main thread owns the
//! [`Deadlines`] and drives them from a timer that never waits on Redis, so a renewal stuck on a
//! paused server cannot delay a kill.
//!
//! The lock's expiry in Redis is at least `T + ttl` after the send time T of the last confirmed
//! renewal (the server applied it no earlier than we sent it). So the child's process group gets
//! `--kill-signal` at `T + ttl - grace - margin` and SIGKILL at `T + ttl - margin`, on the
//! monotonic clock, and is dead before anyone else can take the lock.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::events::{Event, Sender};
use crate::lock::{Lock, Ownership, Token};

/// When to stop the child if renewals stop succeeding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    /// The lock's TTL.
    pub ttl: Duration,
    /// Time between the kill signal and SIGKILL.
    pub grace: Duration,
    /// Safety margin before expiry: clock-rate drift between us and Redis, and the time a
    /// SIGKILL takes to land.
    pub margin: Duration,
}

impl Deadlines {
    /// The safety margin for `ttl`: 100ms plus 1% of the TTL (Redis and our monotonic clock may
    /// tick at slightly different rates; Redlock's analysis uses the same 1%).
    pub fn margin_for(ttl: Duration) -> Duration {
        Duration::from_millis(100) + ttl / 100
    }

    /// When to send the kill signal, given the send time of the last confirmed renewal.
    pub fn term_at(&self, last_ok: Instant) -> Instant {
        last_ok + self.ttl.saturating_sub(self.grace + self.margin)
    }

    /// When to send SIGKILL at the latest.
    pub fn kill_at(&self, last_ok: Instant) -> Instant {
        last_ok + self.ttl.saturating_sub(self.margin)
    }

    /// The time left, after a renewal was due, to retry it before the kill signal: what a blip
    /// of Redis may last without costing the child its life.
    pub fn retry_window(&self, renew_every: Duration) -> Option<Duration> {
        self.ttl
            .checked_sub(self.grace + self.margin + renew_every)
            .filter(|d| !d.is_zero())
    }
}

enum Command {
    Now,
    Stop,
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
    /// Send time of the last confirmed acquire or renewal.
    pub last_ok: Instant,
    /// Where to report.
    pub events: Sender,
}

/// The renewal thread, started only when the first renewal comes near: a command that ends
/// within a third of the TTL (most short cron jobs) never pays for a thread and a connection.
/// Dropping it stops the thread (after any call in flight).
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

    /// When the thread should be started (half-way to the first renewal), if it is not yet.
    pub fn start_at(&self) -> Option<Instant> {
        match &self.state {
            State::Pending(spec) => Some(spec.last_ok + spec.every / 2),
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
        thread::Builder::new()
            .name("distlock-renewer".into())
            .stack_size(256 * 1024)
            .spawn(move || renew_loop(*spec, &rx))?;
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

fn renew_loop(spec: RenewSpec, commands: &mpsc::Receiver<Command>) {
    let RenewSpec {
        mut lock,
        token,
        ttl,
        every,
        last_ok,
        events,
    } = spec;
    let mut next = last_ok + every;
    let mut failures = 0u32;
    loop {
        match commands.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Ok(Command::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
            Ok(Command::Now) | Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let sent = Instant::now();
        let event = match lock.extend(&token, ttl) {
            Ok(Ownership::Held) => {
                failures = 0;
                next = sent + every;
                Event::Renewed { sent }
            }
            Ok(Ownership::NotHeld) => {
                events.send(Event::NotHeld);
                return;
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                next = Instant::now() + retry_delay(failures, every);
                Event::RenewFailed(e)
            }
        };
        if !events.send(event) {
            return;
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
        let ttl = Duration::from_millis(ttl_ms);
        Deadlines {
            ttl,
            grace: Duration::from_millis(grace_ms),
            margin: Deadlines::margin_for(ttl),
        }
    }

    #[test]
    fn kill_sequence_ends_before_expiry() {
        let d = deadlines(30_000, 5_000);
        let t0 = Instant::now();
        assert_eq!(d.margin, Duration::from_millis(400));
        assert_eq!(d.term_at(t0) - t0, Duration::from_millis(24_600));
        assert_eq!(d.kill_at(t0) - t0, Duration::from_millis(29_600));
        assert!(d.kill_at(t0) < t0 + d.ttl);
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
