//! One waiter, in small steps: [`Waiter::attempt`] (one request), [`Waiter::ring`] (a wait on
//! the doorbell with the next attempt behind it), [`Waiter::subscribe`] (to release
//! notifications, where there is no doorbell), the next sleep ([`super::sleep::next_sleep`])
//! and the sleep itself, tied together by [`Waiter::run`]. The rules they keep are in
//! [`super`].

use std::time::{Duration, Instant};

use super::display::{self, WaitDisplay};
use super::sleep::{AFTER_NOTICE_LOOKS, Seen, Sleeps};
use super::{Unanswered, Wait, WaitMode};
use crate::backend::{BackendError, Budget, Notice, Subscription};
use crate::events::{Event, Events, Sender};
use crate::lock::{
    Answer, Conflict, Holder, Holders, Lock, Queueing, Request, Token, Turn, Validity,
};
use crate::output::{Ev, Output};
use crate::signals;

/// How the loop ended, before giving anything back.
pub(super) enum Ended {
    Acquired(Validity, u64, Option<u32>, Option<Token>),
    Busy(Option<Holders>),
    Superseded(Option<Box<Holder>>),
    Conflict(Conflict),
    Interrupted(i32),
    Failed(BackendError, Option<Unanswered>),
}

pub(super) struct Waiter<'a> {
    pub(super) lock: &'a mut dyn Lock,
    pub(super) wait: &'a Wait<'a>,
    pub(super) display: &'a mut WaitDisplay,
    pub(super) out: &'a Output,
    pub(super) start: Instant,
    /// Nothing may run past this (the end of `--wait` plus one timeout).
    pub(super) hard_end: Option<Instant>,
    /// An attempt's reply was lost: the lock may be ours.
    pub(super) maybe_ours: bool,
    /// An attempt took a place in line.
    pub(super) joined: bool,
    pub(super) last_held: Option<Holders>,
    /// Quick looks left after a release notification (see [`super::sleep::AFTER_NOTICE`]).
    pub(super) notified: u32,
}

/// Where the loop stands between attempts.
struct Progress {
    /// What the next attempt asks for (`Try` until it is time to take a place in line).
    queueing: Queueing,
    subscription: Option<Subscription>,
    /// Notify, or spin (also after a subscription failed).
    mode: WaitMode,
    sleeps: Sleeps,
    /// Redis is failing: the last error.
    failing: Option<BackendError>,
    /// Redis has answered at least once.
    answered: bool,
    attempts: u32,
    /// Wait on the doorbell (one connection, the take-up behind each wait): a lock that has
    /// one, in notify mode, until the server refuses it.
    doorbell: bool,
    /// The last wait on the doorbell was answered at once (a slot on the move, a failover):
    /// pause before the next.
    pause: bool,
}

/// What one attempt found.
enum Attempted {
    /// The wait is over.
    Over(Ended),
    /// Redis failed.
    Failed(BackendError),
    /// The lock is busy: its holders, our place in line and how soon to refresh it.
    Busy(Holders, Option<u32>, Option<Duration>),
    /// Our place in line was gone: attempt again at once (joining again).
    Again,
}

/// A wait on the doorbell shorter than this is a plain pause, then an attempt (`BLPOP 0` would
/// wait for ever).
const MIN_BLOCK: Duration = Duration::from_millis(10);
/// The pause after a wait on the doorbell that the server answered at once (see
/// [`Progress::pause`]).
const MOVING_PAUSE: Duration = Duration::from_millis(250);

/// How a subscription to release notifications went.
enum Subscribed {
    Yes(Subscription),
    /// A signal cancelled it.
    Interrupted,
    /// It failed (said): poll instead.
    No,
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
    pub(super) fn run(&mut self, (tx, rx): (&Sender, &mut Events)) -> Ended {
        let policy = self.wait.policy;
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
        let doorbell = in_line && policy.mode == WaitMode::Notify && self.lock.has_doorbell();
        let mut st = Progress {
            // The first attempt takes no place in line (and needs no subscription), except on
            // a doorbell: the turn waits there as data, so there is no wake-up to lose by
            // joining first.
            queueing: if doorbell { place } else { Queueing::Try },
            subscription: None,
            mode: policy.mode,
            sleeps: Sleeps::default(),
            failing: None,
            answered: false,
            attempts: 0,
            doorbell,
            pause: false,
        };
        let mut ring: Option<Duration> = None;
        loop {
            if let Some(signal) = self.pending(rx) {
                return Ended::Interrupted(signal);
            }
            let attempted = match ring.take() {
                Some(block) => self.ring(&mut st, block, rx),
                None => self.attempt(&mut st, rx),
            };
            let (holders, position, refresh_in) = match attempted {
                Attempted::Over(ended) => return ended,
                Attempted::Failed(e) => match self.after_failure(e, &mut st, once, wait_end, rx) {
                    Some(ended) => return ended,
                    None => continue,
                },
                Attempted::Again => {
                    st.queueing = place;
                    continue;
                }
                Attempted::Busy(holders, position, refresh_in) => (holders, position, refresh_in),
            };
            st.sleeps.answered();
            if once {
                return Ended::Busy(Some(holders));
            }
            if st.doorbell && refresh_in.is_some() {
                // In line: wait on the doorbell until the next look is due (the same schedule
                // as a sleep), the next attempt sent behind the wait.
                st.queueing = Queueing::Refresh;
                self.show_busy(&holders, position);
                let sleep = st.sleeps.after_busy(&Seen {
                    mode: st.mode,
                    ttl: holders.first.ttl,
                    refresh_in,
                    position,
                    after_notice: false,
                });
                self.last_held = Some(holders);
                let now = Instant::now();
                if wait_end.is_some_and(|end| now >= end) {
                    return Ended::Busy(self.last_held.take());
                }
                if st.pause {
                    st.pause = false;
                    match self.sleep(sleep.min(MOVING_PAUSE), wait_end, true, rx) {
                        Slept::On => {}
                        Slept::Interrupted(signal) => return Ended::Interrupted(signal),
                        Slept::TimeUp => return Ended::Busy(self.last_held.take()),
                    }
                }
                if self
                    .display
                    .next_wakeup()
                    .is_some_and(|tick| tick <= Instant::now())
                {
                    self.display.tick();
                }
                let block = self.block_until(Instant::now() + sleep, wait_end);
                if block < MIN_BLOCK {
                    match self.sleep(block, wait_end, true, rx) {
                        Slept::On => {}
                        Slept::Interrupted(signal) => return Ended::Interrupted(signal),
                        Slept::TimeUp => return Ended::Busy(self.last_held.take()),
                    }
                } else {
                    ring = Some(block);
                }
                continue;
            }
            if st.mode == WaitMode::Notify && st.subscription.is_none() {
                match self.subscribe(tx) {
                    // Subscribed: look again at once, taking our place in line if the lock
                    // keeps one (no lost wake-up).
                    Subscribed::Yes(sub) => {
                        st.subscription = Some(sub);
                        if in_line {
                            st.queueing = place;
                        }
                        continue;
                    }
                    Subscribed::Interrupted => return Ended::Interrupted(self.signal(rx)),
                    Subscribed::No => st.mode = WaitMode::Spin,
                }
            }
            if st.mode == WaitMode::Spin && in_line && st.queueing == Queueing::Try {
                // Take our place in line at once (no subscription to wait for).
                st.queueing = place;
                continue;
            }
            self.show_busy(&holders, position);
            let after_notice =
                self.notified > 0 && refresh_in.is_none() && self.lock.recheck_after_notice();
            if after_notice {
                self.notified -= 1;
            }
            let sleep = st.sleeps.after_busy(&Seen {
                mode: st.mode,
                ttl: holders.first.ttl,
                refresh_in,
                position,
                after_notice,
            });
            self.last_held = Some(holders);
            match self.sleep(sleep, wait_end, st.answered, rx) {
                Slept::On => {}
                Slept::Interrupted(signal) => return Ended::Interrupted(signal),
                Slept::TimeUp => return Ended::Busy(self.last_held.take()),
            }
        }
    }

    /// One attempt, bounded by one timeout (and the end of the wait), cancelled by a signal.
    fn attempt(&mut self, st: &mut Progress, rx: &mut Events) -> Attempted {
        let now = Instant::now();
        let timeout = self.wait.timeout;
        let deadline = self
            .hard_end
            .map_or(now + timeout, |end| end.min(now + timeout));
        let budget = Budget::until(deadline).cancellable(self.wait.cancel);
        st.attempts = st.attempts.saturating_add(1);
        let request = Request {
            queueing: st.queueing,
            polls: st.mode == WaitMode::Spin,
            ..self.wait.request.clone()
        };
        let request = Request {
            doorbell: st.doorbell,
            ..request
        };
        self.joined |= st.queueing != Queueing::Try;
        let attempt = self.lock.try_acquire(&request, &budget);
        if attempt.is_ok() && !st.answered {
            st.answered = true;
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
        // A set that lost a key it held while it waited: said once per loss.
        for lost in self.lock.take_lost_while_waiting() {
            self.display.lost_while_waiting(&lost);
        }
        if attempt.is_ok() && st.failing.take().is_some() {
            self.display.recovered();
        }
        self.found(attempt, rx)
    }

    /// One wait on the doorbell for up to `block`, with an attempt behind it (see
    /// [`Lock::await_turn`]); bounded by `block` plus one timeout (and the end of the wait),
    /// ended by a termination signal.
    fn ring(&mut self, st: &mut Progress, block: Duration, rx: &mut Events) -> Attempted {
        let now = Instant::now();
        let end = now + block + self.wait.timeout;
        let deadline = self.hard_end.map_or(end, |hard| hard.min(end));
        let budget = Budget::until(deadline).cancellable(self.wait.cancel);
        st.attempts = st.attempts.saturating_add(1);
        let request = Request {
            queueing: Queueing::Refresh,
            polls: false,
            doorbell: true,
            ..self.wait.request.clone()
        };
        let turn = self.lock.await_turn(&request, block, &budget);
        if turn.is_ok() && st.failing.take().is_some() {
            self.display.recovered();
        }
        let attempt = match turn {
            Ok(Turn {
                answer,
                rang,
                waited,
                refused,
            }) => {
                st.pause = !waited;
                if rang {
                    self.out.verbose(
                        Ev::Notified,
                        "release notification received (the doorbell rang)",
                    );
                }
                if refused {
                    // Wait for release notifications instead (the next attempt says so in
                    // our place's metadata).
                    st.doorbell = false;
                    self.out.verbose(
                        Ev::DoorbellRefused,
                        "the server refuses the doorbell (BLPOP); waiting for release notifications instead",
                    );
                }
                Ok(answer)
            }
            Err(e) => Err(e),
        };
        self.found(attempt, rx)
    }

    /// The next time a wait may end: `wake_at`, cut to the end of the wait and to the
    /// display's next tick; as a duration from now.
    fn block_until(&self, wake_at: Instant, wait_end: Option<Instant>) -> Duration {
        let mut until = wake_at;
        if let Some(end) = wait_end {
            until = until.min(end);
        }
        if let Some(tick) = self.display.next_wakeup() {
            until = until.min(tick);
        }
        until.saturating_duration_since(Instant::now())
    }

    /// What an attempt's answer means for the wait.
    fn found(&mut self, attempt: Result<Answer, BackendError>, rx: &mut Events) -> Attempted {
        match attempt {
            Ok(Answer::Granted {
                validity,
                fence,
                slot,
                token,
            }) => Attempted::Over(Ended::Acquired(validity, fence, slot, token)),
            Ok(Answer::Superseded(by)) => Attempted::Over(Ended::Superseded(by)),
            Ok(Answer::Conflict(conflict)) => Attempted::Over(Ended::Conflict(conflict)),
            Ok(Answer::Busy(holders)) => Attempted::Busy(holders, None, None),
            Ok(Answer::Queued {
                holders,
                position,
                refresh_in,
            }) => Attempted::Busy(holders, Some(position), Some(refresh_in)),
            Ok(Answer::NoPlace) => Attempted::Again,
            Err(BackendError::Interrupted { sent }) => {
                self.maybe_ours |= sent;
                Attempted::Over(Ended::Interrupted(self.signal(rx)))
            }
            Err(e) => {
                self.maybe_ours |= e.maybe_applied();
                Attempted::Failed(e)
            }
        }
    }

    /// After a failed attempt: the end of the wait (an error waiting cannot fix, a server that
    /// never answered, the limit), or `None` after a pause, to attempt again.
    fn after_failure(
        &mut self,
        e: BackendError,
        st: &mut Progress,
        once: bool,
        wait_end: Option<Instant>,
        rx: &mut Events,
    ) -> Option<Ended> {
        let unanswered = |start: Instant, attempts| {
            (!st.answered).then(|| Unanswered {
                attempts,
                over: start.elapsed(),
            })
        };
        if !e.is_transient() || (!st.answered && e.is_misconfiguration()) || once {
            return Some(Ended::Failed(e, unanswered(self.start, st.attempts)));
        }
        if !st.answered && self.start.elapsed() >= self.wait.unreachable_after {
            return Some(Ended::Failed(e, unanswered(self.start, st.attempts)));
        }
        self.display.failing(&e, wait_end);
        st.failing = Some(e);
        let sleep = st.sleeps.after_error();
        match self.sleep(sleep, wait_end, st.answered, rx) {
            Slept::On => None,
            Slept::Interrupted(signal) => Some(Ended::Interrupted(signal)),
            Slept::TimeUp => {
                let last = st
                    .failing
                    .take()
                    .unwrap_or(BackendError::Interrupted { sent: false });
                Some(Ended::Failed(last, unanswered(self.start, st.attempts)))
            }
        }
    }

    /// Subscribe to the release notifications of our token (bounded by one timeout).
    fn subscribe(&mut self, tx: &Sender) -> Subscribed {
        let tx = tx.clone();
        let budget = Budget::within(self.wait.timeout).cancellable(self.wait.cancel);
        match self.lock.subscribe(
            self.wait.request.token,
            Box::new(move |notice| {
                tx.send(Event::Subscriber(notice));
            }),
            &budget,
        ) {
            Ok(sub) => Subscribed::Yes(sub),
            Err(BackendError::Interrupted { .. }) => Subscribed::Interrupted,
            Err(e) => {
                self.display.warn(
                    Ev::SubscribeFailed,
                    format!("cannot subscribe to release notifications ({e}); polling instead"),
                );
                Subscribed::No
            }
        }
    }

    /// Show that the lock is busy (and, with -v, say who holds it).
    fn show_busy(&mut self, holders: &Holders, position: Option<u32>) {
        if let Some(key) = self.lock.busy_key() {
            self.display.waiting_for(&key);
        }
        self.display.busy(holders, position);
        if self.out.is_verbose() {
            // (Formatted only when shown: every waiter passes here on every release.)
            self.out.verbose(
                Ev::AttemptBusy,
                format!(
                    "lock busy{}: {}",
                    display::in_line(position),
                    holders.summary()
                ),
            );
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
        // A lock that holds part of itself while it waits (a set) must be looked at again
        // before what it holds lapses.
        let sleep = self
            .lock
            .look_again_within()
            .map_or(sleep, |most| sleep.min(most));
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

    /// The signals that came while Redis was asked (held back during a request, or a wait on
    /// the doorbell): a terminating one is returned; Ctrl-Z stops distlock now (nothing is held
    /// while waiting); the rest, and release notifications, are dropped (the next attempt looks
    /// at the lock anyway).
    fn pending(&mut self, rx: &mut Events) -> Option<i32> {
        let mut stop = false;
        while let Some(event) = rx.try_recv() {
            match event {
                Event::Signal(signal) if signals::is_termination(signal) => return Some(signal),
                Event::Signal(libc::SIGTSTP) => stop = true,
                _ => {}
            }
        }
        if stop {
            self.display.clear();
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
            return signals::take_termination(rx);
        }
        None
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
