//! The messages that reach the main thread, and the one place it waits for them.
//!
//! distlock's main thread is a single event loop: while waiting for the lock it blocks in
//! [`Events::recv_timeout`] with a timeout set to its next deadline, and while the child runs in
//! [`Events::recv_until`], until its next deadline on the clock of leases (CLOCK_BOOTTIME, see
//! [`crate::clock`]): a timer on that clock wakes it at once when the machine resumes from a
//! suspend during which a kill deadline passed (poll's own timeout would wait on, on the
//! monotonic clock, which stopped meanwhile). Two kinds of sources feed it, through one
//! self-pipe:
//!
//! * signal handlers write the signal's number (one byte, async-signal-safe `write`);
//! * background threads (the release subscriber, the renewer) put an [`Event`] on a channel and
//!   write a zero byte to wake the loop.
//!
//! Signals need no thread of their own this way. That matters beyond tidiness: a process that is
//! still single-threaded when it forks the child forks much faster (no TLB shoot-downs on other
//! CPUs), and the fork is on the path of every `distlock run`.
//!
//! Nothing in the main thread ever blocks on a Redis reply that another thread is waiting for, so
//! a deadline is never late.

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout};

use crate::backend::{BackendError, Notice};
use crate::clock::{KERNEL_CLOCK, Moment};
use crate::lock::{NodeFailure, Validity};

/// One thing that happened.
#[derive(Debug)]
pub enum Event {
    /// A signal was delivered to distlock.
    Signal(i32),
    /// The release channel reported something (see [`Notice`]).
    Subscriber(Notice),
    /// A renewal was confirmed: the lock cannot expire before the end of this validity.
    Renewed(Validity),
    /// A renewal failed; the renewer keeps retrying.
    RenewFailed(BackendError),
    /// A renewal found that the lock is no longer ours (key gone or someone else's token).
    NotHeld,
    /// A node of a Redlock failed while the others renewed the lock (once per node and run).
    NodeFailed(NodeFailure),
    /// A newer run asks us to stop the command and let it in (`--replace`): who, if it said.
    /// The renewals go on until the command is gone.
    Replaced(Option<Box<crate::lock::Holder>>),
}

/// The sending side, cloned into every background thread.
#[derive(Clone, Debug)]
pub struct Sender {
    tx: mpsc::Sender<Event>,
    wake: Arc<OwnedFd>,
}

impl Sender {
    /// Deliver `event` and wake the main loop. Returns false once the main loop is gone.
    pub fn send(&self, event: Event) -> bool {
        let delivered = self.tx.send(event).is_ok();
        // A full pipe already holds a wake-up; nothing is lost by failing to add one.
        let _ = nix::unistd::write(self.wake.as_fd(), &[0u8]);
        delivered
    }

    /// The pipe's write end, for signal handlers (which may only call `write`).
    pub(crate) fn raw_wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }
}

/// The main thread's side.
#[derive(Debug)]
pub struct Events {
    rx: mpsc::Receiver<Event>,
    pipe: OwnedFd,
    pending: VecDeque<Event>,
    /// A timerfd on [`KERNEL_CLOCK`] for [`Events::recv_until`], made on its first use (None
    /// until then, and if the system refused one: then poll's timeout serves).
    timer: Option<OwnedFd>,
}

/// A new event channel.
pub fn channel() -> std::io::Result<(Sender, Events)> {
    let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
    let (tx, rx) = mpsc::channel();
    Ok((
        Sender {
            tx,
            wake: Arc::new(write),
        },
        Events {
            rx,
            pipe: read,
            pending: VecDeque::new(),
            timer: None,
        },
    ))
}

impl Events {
    /// The next event if one is already there.
    pub fn try_recv(&mut self) -> Option<Event> {
        self.fill();
        self.pending.pop_front()
    }

    /// The first queued signal that `wanted` accepts, if any; every other event queued so far
    /// is dropped (callers use this at points where nothing else matters). Which signals end
    /// distlock is the signal policy's business: see [`crate::signals::take_termination`].
    pub fn take_signal(&mut self, wanted: impl Fn(i32) -> bool) -> Option<i32> {
        let mut found = None;
        while let Some(event) = self.try_recv() {
            if let Event::Signal(signal) = event {
                if wanted(signal) && found.is_none() {
                    found = Some(signal);
                }
            }
        }
        found
    }

    /// The next event, waiting at most `timeout` for it.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Event> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(event) = self.try_recv() {
                return Some(event);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            // Round up: waking a little late is harmless, spinning on a 0ms poll is not.
            let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            let mut fds = [PollFd::new(self.pipe.as_fd(), PollFlags::POLLIN)];
            let _ = nix::poll::poll(
                &mut fds,
                PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
            );
        }
    }

    /// The next event, waiting at most until `deadline` for it. The wait ends at the deadline
    /// even if the machine was suspended meanwhile (see the module docs).
    pub fn recv_until(&mut self, deadline: Moment) -> Option<Event> {
        loop {
            if let Some(event) = self.try_recv() {
                return Some(event);
            }
            let now = Moment::now();
            if now >= deadline {
                return None;
            }
            let (true, Some(timer)) = (self.arm_timer(deadline), self.timer.as_ref()) else {
                // No timer: poll's timeout, which a suspend stretches, is the best we have.
                return self.recv_timeout(deadline - now);
            };
            let mut fds = [
                PollFd::new(self.pipe.as_fd(), PollFlags::POLLIN),
                PollFd::new(timer.as_fd(), PollFlags::POLLIN),
            ];
            let _ = nix::poll::poll(&mut fds, PollTimeout::NONE);
            // Clear the timer's expiration (it is armed again, with a new deadline, next time).
            let mut ticks = [0u8; 8];
            let _ = nix::unistd::read(timer, &mut ticks);
        }
    }

    /// Arm the timer to expire at `deadline` (absolute, on [`KERNEL_CLOCK`]); false if there is
    /// no timer.
    fn arm_timer(&mut self, deadline: Moment) -> bool {
        if self.timer.is_none() {
            // SAFETY: timerfd_create takes a clock id and flags and returns a new descriptor,
            // which we own from here on, or -1.
            let fd = unsafe {
                libc::timerfd_create(KERNEL_CLOCK, libc::TFD_CLOEXEC | libc::TFD_NONBLOCK)
            };
            if fd < 0 {
                return false;
            }
            // SAFETY: `fd` is a fresh descriptor nobody else owns.
            self.timer = Some(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) });
        }
        let Some(timer) = &self.timer else {
            return false;
        };
        let nanos = deadline.as_nanos();
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: libc::time_t::try_from(nanos / 1_000_000_000).unwrap_or(libc::time_t::MAX),
                // Never all zeroes, which would disarm the timer (boot itself has passed anyway).
                tv_nsec: (nanos % 1_000_000_000).max(1) as libc::c_long,
            },
        };
        // SAFETY: `timer` is our timerfd; `spec` is a valid itimerspec; no old value asked for.
        let armed = unsafe {
            libc::timerfd_settime(
                timer.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        armed == 0
    }

    /// Move everything available into `pending`: signals (bytes in the pipe) first, then the
    /// threads' events.
    fn fill(&mut self) {
        let mut buf = [0u8; 64];
        while let Ok(n) = nix::unistd::read(&self.pipe, &mut buf) {
            if n == 0 {
                break;
            }
            for &byte in &buf[..n] {
                if byte != 0 {
                    self.pending.push_back(Event::Signal(i32::from(byte)));
                }
            }
        }
        while let Ok(event) = self.rx.try_recv() {
            self.pending.push_back(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_events_wake_the_loop() {
        let (tx, mut events) = channel().unwrap();
        let sender = tx.clone();
        let start = Instant::now();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            sender.send(Event::NotHeld);
        });
        assert!(matches!(
            events.recv_timeout(Duration::from_secs(5)),
            Some(Event::NotHeld)
        ));
        assert!(start.elapsed() < Duration::from_secs(4));
    }

    #[test]
    fn signal_bytes_become_signal_events_and_timeouts_expire() {
        let (tx, mut events) = channel().unwrap();
        // What a signal handler does:
        // SAFETY: writing one byte from a valid buffer to a valid fd.
        unsafe { libc::write(tx.raw_wake_fd(), [15u8].as_ptr().cast(), 1) };
        assert!(matches!(events.try_recv(), Some(Event::Signal(15))));
        assert!(events.try_recv().is_none());
        let start = Instant::now();
        assert!(events.recv_timeout(Duration::from_millis(30)).is_none());
        assert!(start.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn waits_until_a_moment_end_at_it_or_at_an_event() {
        let (tx, mut events) = channel().unwrap();
        let start = Moment::now();
        assert!(
            events
                .recv_until(start + Duration::from_millis(30))
                .is_none()
        );
        assert!(start.elapsed() >= Duration::from_millis(30));
        // A deadline already passed: no wait at all.
        assert!(events.recv_until(start).is_none());
        let sender = tx.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            sender.send(Event::NotHeld);
        });
        assert!(matches!(
            events.recv_until(Moment::now() + Duration::from_secs(5)),
            Some(Event::NotHeld)
        ));
        assert!(start.elapsed() < Duration::from_secs(4));
    }
}
