//! The supervisor: the main thread's event loop while the child runs.
//!
//! It reaps (distlock is a child subreaper, so orphaned grandchildren are reaped here too),
//! forwards signals, runs job control (Ctrl-Z / fg), tracks the last confirmed renewal, and owns
//! the kill deadlines. It returns once the child *and every process left in its group* are gone:
//! a child never outlives the lock, and neither do the background processes it leaves behind.
//!
//! Order of operations where it matters: kill first, log after (a blocked stderr must not delay
//! a kill), and never let a Redis call stand between a deadline and its signal (the renewer is
//! another thread; this loop only waits on its channel with a timeout).
//!
//! The guard enforces the same deadlines from outside (see [`super::guard`]): when this loop
//! cannot run (distlock stopped, its threads starved), the guard ends the command, and this loop
//! learns it from the guard's exit status once it runs again. When this loop starts a kill
//! itself, it tells the guard first, so that the command gets one kill signal, not two.

use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::guard::{self, Guard};
use super::terminal::Terminal;
use crate::backend::BackendError;
use crate::clock::Moment;
use crate::events::{Event, Events};
use crate::lock::Validity;
use crate::output::{Ev, Msg, Output};
use crate::renew::{Deadlines, Renewer};
use crate::signals;

/// How the lock was lost.
#[derive(Debug)]
pub enum Loss {
    /// A renewal found the key gone or holding another token.
    NotHeld,
    /// distlock's guard ended the command: a kill deadline passed without a confirmed renewal
    /// while distlock itself did not act (it was stopped, or its threads could not run).
    GuardFired {
        /// The last renewal error distlock had seen, if any.
        last_error: Option<BackendError>,
        /// Time from the last confirmed grant or renewal's send time until distlock noticed.
        since_anchor: Duration,
        /// The expiry that one set.
        ttl: Duration,
    },
    /// Renewals failed (or hung) until the deadline.
    RenewalsFailed {
        /// The last error seen, if any reply came back at all.
        last_error: Option<BackendError>,
        /// Time since the last confirmed grant or renewal was sent.
        since_anchor: Duration,
        /// The expiry that one set.
        ttl: Duration,
    },
}

/// How the supervised run ended.
#[derive(Debug)]
pub enum Ending {
    /// The child exited with this code while the lock was held.
    Exited(i32),
    /// The child was killed by this signal (not ours) while the lock was held.
    Signaled(i32),
    /// The lock was lost; the child's group was killed.
    Lost(Loss),
    /// The command ran past `--timeout`; its group was stopped while the lock was held.
    TimedOut,
    /// A newer run asked for the lock (`--replace`; who, if it said); the command's group was
    /// stopped while the lock was held.
    Replaced(Option<Box<crate::lock::Holder>>),
}

/// Why distlock itself stopped a command that still held its lock.
#[derive(Debug)]
enum Stop {
    /// `--timeout` passed.
    TimedOut,
    /// A newer run replaces this one.
    Replaced(Option<Box<crate::lock::Holder>>),
}

/// What the supervisor needs.
pub struct Supervisor<'a> {
    /// The child's pid, which is also its process-group id.
    pub group: Pid,
    /// The terminal, when it was handed to the child.
    pub terminal: Option<Terminal>,
    /// The kill deadlines.
    pub deadlines: Deadlines,
    /// The signal that starts the kill sequence.
    pub kill_signal: Signal,
    /// The validity of the grant (a claim, until the first renewal).
    pub granted: Validity,
    /// The renewal thread (started when its first renewal comes near).
    pub renewer: Renewer,
    /// The guard that kills the group if distlock dies or fails to act in time; replaced if it
    /// dies first.
    pub guard: &'a mut Option<Guard>,
    /// When the command must be stopped whatever the lock (`--timeout`), if ever.
    pub time_limit: Option<Moment>,
    /// When the hold is worth one warning (`--warn-after`, also given), if ever.
    pub warn_at: Option<(Moment, Duration)>,
    /// The hooks (`--hook`): the ones this loop reaps are handed back.
    pub hooks: &'a crate::hook::Hooks,
    /// Messages.
    pub out: &'a Output,
}

/// After SIGKILL, how long to wait for the group to disappear before giving up on it.
const AFTER_SIGKILL: Duration = Duration::from_secs(2);
/// How often to look at the group while it is being emptied (grandchildren do not always send
/// us SIGCHLD: their parent, not distlock, reaps them).
const GROUP_POLL: Duration = Duration::from_millis(10);

struct State {
    /// The validity of the last confirmed grant or renewal.
    validity: Validity,
    status: Option<WaitStatus>,
    loss: Option<Loss>,
    /// The guard ended the command (its exit status said so).
    guard_fired: bool,
    /// When distlock first noticed a loss, or the guard's firing.
    noticed_at: Option<Moment>,
    /// distlock stopped the command while the lock was still held (`--timeout`, `--replace`).
    stop: Option<Stop>,
    /// When SIGKILL is due (a kill sequence is under way).
    kill_at: Option<Moment>,
    killed_at: Option<Moment>,
    /// The child is stopped.
    stopped: bool,
    /// We stopped ourselves after the child stopped (job control); resuming waits for a renewal.
    job_stopped: bool,
    /// We forwarded a SIGTSTP and will stop ourselves when the child stops.
    stop_requested: bool,
    /// A renewal sent after this instant must succeed before the child may continue.
    resume_after: Option<Moment>,
    renew_failing_since: Option<Moment>,
    last_error: Option<BackendError>,
    leftovers_reported: bool,
}

impl State {
    fn new(validity: Validity) -> State {
        State {
            validity,
            status: None,
            loss: None,
            guard_fired: false,
            noticed_at: None,
            stop: None,
            kill_at: None,
            killed_at: None,
            stopped: false,
            job_stopped: false,
            stop_requested: false,
            resume_after: None,
            renew_failing_since: None,
            last_error: None,
            leftovers_reported: false,
        }
    }
}

impl Supervisor<'_> {
    /// Supervise until the child and its group are gone.
    /// Returns how it ended and the validity of the last confirmed grant or renewal.
    pub fn run(mut self, events: &mut Events) -> (Ending, Validity) {
        let mut st = State::new(self.granted);
        // The child may have exited before we got here; its SIGCHLD is queued, but reap now too.
        self.reap(&mut st);
        loop {
            let now = Moment::now();
            if self.renewer.start_at().is_some_and(|at| now >= at) {
                if let Err(e) = self.renewer.start() {
                    // No renewals: the kill deadline below will stop the command in time.
                    self.out.warn(
                        Ev::RenewerFailed,
                        format!("cannot start the renewal thread: {e}"),
                    );
                }
            }
            if self.guard.as_ref().is_some_and(|g| g.line().take_clogged()) {
                // The guard has not read its pipe for thousands of renewals (it is stopped):
                // once continued, it would act on deadlines that are out of date. Replace it
                // (`reap` starts another, which gets the latest deadline first).
                if let Some(guard) = self.guard.as_ref() {
                    let _ = nix::sys::signal::kill(guard.pid(), Signal::SIGKILL);
                }
            }
            let validity = st.validity;
            if st.loss.is_none() && now >= self.deadlines.term_at(validity) {
                self.start_kill(&mut st, now, self.deadlines.kill_at(validity));
                let loss = Loss::RenewalsFailed {
                    last_error: st.last_error.take(),
                    since_anchor: now - validity.anchor,
                    ttl: validity.ttl,
                };
                self.lose(&mut st, now, loss);
            }
            if st.loss.is_none()
                && st.stop.is_none()
                && st.status.is_none()
                && self.time_limit.is_some_and(|limit| now >= limit)
            {
                self.stop_command(&mut st, now, Stop::TimedOut);
            }
            if let Some((at, after)) = self.warn_at {
                if now >= at && st.loss.is_none() && st.stop.is_none() && st.status.is_none() {
                    self.warn_at = None;
                    self.out.warn(
                        Ev::HeldTooLong,
                        format!(
                            "the command has held the lock for {} (--warn-after {}) and still runs",
                            crate::text::duration(now - at + after),
                            crate::text::duration(after)
                        ),
                    );
                }
            }
            if let Some(at) = st.kill_at {
                if st.killed_at.is_none() && now >= at {
                    let _ = killpg(self.group, Signal::SIGKILL);
                    st.killed_at = Some(now);
                }
            }
            if st.status.is_some() {
                self.reap(&mut st);
                if group_is_empty(self.group) {
                    // From now on the group's id may be taken by another group: the guard must
                    // not signal it, whatever its deadline says.
                    if let Some(guard) = self.guard.as_ref() {
                        guard.group_gone();
                    }
                    break;
                }
                if st.loss.is_none() && st.kill_at.is_none() {
                    // The command exited but left processes in its group: they would run on
                    // without the lock. Stop them the same way as on loss, then release.
                    let kill_by = now + self.deadlines.grace;
                    self.start_kill(&mut st, now, kill_by.min(self.deadlines.kill_at(validity)));
                }
                if !st.leftovers_reported && st.loss.is_none() {
                    st.leftovers_reported = true;
                    self.out.warn(
                        Ev::LeftProcesses,
                        format!(
                            "the command exited but left processes in its process group; sent them {} before releasing the lock",
                            signal_name(self.kill_signal)
                        ),
                    );
                }
                if let Some(killed) = st.killed_at {
                    if now - killed >= AFTER_SIGKILL {
                        self.out.warn(
                            Ev::KillStuck,
                            "processes of the command's group survived SIGKILL for 2s (stuck in the kernel?); giving up on them",
                        );
                        break;
                    }
                }
            }
            if let Some(event) = events.recv_until(self.next_deadline(&st, now)) {
                self.handle(&mut st, event);
            }
        }
        if let Some(terminal) = &mut self.terminal {
            if terminal.we_are_foreground() || st.status.is_some() {
                terminal.take_back();
            }
        }
        let validity = st.validity;
        // When the guard fired, it is what ended the command, whatever distlock noticed once it
        // ran again (its deadline passed, or the renewer found the lock gone): the guard sends
        // the kill signal only if distlock has not said by then (its head start after
        // distlock's own deadline) that it is killing the group, so distlock was late. (The
        // guard may still be waiting for its SIGKILL deadline: its flag says it fired.)
        st.guard_fired |= self.guard.as_ref().is_some_and(Guard::has_fired);
        let since_anchor = st.noticed_at.unwrap_or_else(Moment::now) - validity.anchor;
        let loss = match st.loss {
            Some(Loss::RenewalsFailed { last_error, .. }) if st.guard_fired => {
                Some(Loss::GuardFired {
                    last_error,
                    since_anchor,
                    ttl: validity.ttl,
                })
            }
            Some(Loss::NotHeld) | None if st.guard_fired => Some(Loss::GuardFired {
                last_error: st.last_error,
                since_anchor,
                ttl: validity.ttl,
            }),
            other => other,
        };
        let ending = match (loss, st.stop, st.status) {
            (Some(loss), _, _) => Ending::Lost(loss),
            (None, Some(Stop::TimedOut), _) => Ending::TimedOut,
            (None, Some(Stop::Replaced(by)), _) => Ending::Replaced(by),
            (None, None, status) => match status {
                Some(WaitStatus::Signaled(_, signal, _)) => Ending::Signaled(signal as i32),
                Some(WaitStatus::Exited(_, code)) => Ending::Exited(code),
                _ => Ending::Exited(i32::from(crate::exit::Code::Software.get())),
            },
        };
        (ending, validity)
    }

    /// When the loop must look again, at the latest.
    fn next_deadline(&self, st: &State, now: Moment) -> Moment {
        let mut next = None::<Moment>;
        let mut consider = |at: Moment| next = Some(next.map_or(at, |n: Moment| n.min(at)));
        if st.loss.is_none() {
            consider(self.deadlines.term_at(st.validity));
        }
        if let (None, None, Some(limit)) = (&st.loss, &st.stop, self.time_limit) {
            consider(limit);
        }
        if let Some(at) = self.renewer.start_at() {
            consider(at);
        }
        if let (None, None, Some((at, _))) = (&st.loss, &st.stop, self.warn_at) {
            consider(at);
        }
        if let (Some(at), None) = (st.kill_at, st.killed_at) {
            consider(at);
        }
        if st.status.is_some() {
            consider(now + GROUP_POLL);
        }
        next.unwrap_or(now + Duration::from_secs(3600))
    }

    /// The lock is lost (`loss`), noticed `now`: stop renewing.
    fn lose(&mut self, st: &mut State, now: Moment, loss: Loss) {
        st.noticed_at.get_or_insert(now);
        st.loss = Some(loss);
        self.renewer.stop();
    }

    /// distlock stops the command although the lock is held (`why`): the kill signal now,
    /// SIGKILL after the grace (sooner if the lock's own deadline comes first). The renewals go
    /// on, so the lock stays ours until the group is gone and released.
    fn stop_command(&self, st: &mut State, now: Moment, why: Stop) {
        let kill_by = (now + self.deadlines.grace).min(self.deadlines.kill_at(st.validity));
        self.start_kill(st, now, kill_by);
        st.stop = Some(why);
    }

    /// Send the kill signal to the group now and schedule SIGKILL at `kill_by`.
    fn start_kill(&self, st: &mut State, now: Moment, kill_by: Moment) {
        // The guard first: it must not send a kill signal of its own (the command would get
        // two); it keeps its SIGKILL deadline as a backup.
        if let Some(guard) = self.guard.as_ref() {
            guard.line().distlock_kills();
        }
        if st.stopped || now >= kill_by {
            // A stopped child must not run another instruction without the lock, nor may a
            // child whose SIGKILL is due (distlock was stopped past it): SIGKILL needs no
            // continuing.
            let _ = killpg(self.group, Signal::SIGKILL);
            st.killed_at = Some(now);
        } else if self.kill_signal == Signal::SIGKILL {
            let _ = killpg(self.group, Signal::SIGKILL);
            st.killed_at = Some(now);
        } else {
            let _ = killpg(self.group, self.kill_signal);
            // Processes of the group that are stopped need to run to handle the signal.
            let _ = killpg(self.group, Signal::SIGCONT);
        }
        st.kill_at = Some(kill_by);
    }

    fn handle(&mut self, st: &mut State, event: Event) {
        match event {
            Event::Signal(libc::SIGCHLD) => self.reap(st),
            Event::Signal(signal) if signals::is_termination(signal) => {
                if st.status.is_none() {
                    if let Ok(sig) = Signal::try_from(signal) {
                        let _ = killpg(self.group, sig);
                        if st.stopped {
                            let _ = killpg(self.group, Signal::SIGCONT);
                        }
                    }
                    let name = signal_name_raw(signal);
                    self.out.verbose(
                        Ev::Forwarded,
                        Msg::new(format!("forwarded {name} to the command")).signal(name),
                    );
                } else if st.killed_at.is_none() {
                    // Interrupted while we empty the group: no more patience.
                    let _ = killpg(self.group, Signal::SIGKILL);
                    st.killed_at = Some(Moment::now());
                }
            }
            Event::Signal(libc::SIGTSTP) => {
                // Someone asked *distlock* to stop (the terminal is not the child's, or a
                // `kill -TSTP`): stop the child first, then ourselves once it has stopped.
                if st.status.is_none() && !st.stopped {
                    st.stop_requested = true;
                    let _ = killpg(self.group, Signal::SIGTSTP);
                }
            }
            Event::Signal(libc::SIGCONT) => {
                if st.job_stopped {
                    // We were stopped, so renewals were too: the lock may have expired. Let the
                    // child continue only after a renewal sent from now on succeeds.
                    st.job_stopped = false;
                    st.resume_after = Some(Moment::now());
                    if let Err(e) = self.renewer.renew_now() {
                        self.out.warn(
                            Ev::RenewerFailed,
                            format!("cannot start the renewal thread: {e}"),
                        );
                    }
                }
            }
            Event::Signal(_) => {}
            Event::Renewed(validity) => {
                if validity.earliest_expiry() > st.validity.earliest_expiry() {
                    st.validity = validity;
                }
                let sent = validity.anchor;
                if let Some(since) = st.renew_failing_since.take() {
                    self.out.notice(
                        Ev::RenewRecovered,
                        format!(
                            "renewal succeeded again after {}",
                            crate::text::duration(since.elapsed())
                        ),
                    );
                }
                st.last_error = None;
                if st.resume_after.is_some_and(|after| sent >= after) && st.loss.is_none() {
                    st.resume_after = None;
                    if let Some(terminal) = &mut self.terminal {
                        if terminal.we_are_foreground() {
                            terminal.resume(self.group);
                        }
                    }
                    let _ = killpg(self.group, Signal::SIGCONT);
                }
                self.out.verbose(Ev::Renewed, "lock renewed");
            }
            Event::RenewFailed(e) => {
                if st.loss.is_none() {
                    if st.renew_failing_since.is_none() {
                        st.renew_failing_since = Some(Moment::now());
                        self.out.warn(
                            Ev::RenewFailed,
                            format!(
                                "renewing the lock failed ({e}); retrying; the command will be stopped in {} if no renewal succeeds",
                                crate::text::duration(
                                    self.deadlines
                                        .term_at(st.validity)
                                        .saturating_duration_since(Moment::now())
                                )
                            ),
                        );
                    } else {
                        self.out
                            .verbose(Ev::RenewFailed, format!("renewal failed again: {e}"));
                    }
                }
                st.last_error = Some(e);
            }
            Event::NotHeld => {
                if st.loss.is_none() {
                    let now = Moment::now();
                    self.start_kill(st, now, now + self.deadlines.grace);
                    self.lose(st, now, Loss::NotHeld);
                }
            }
            Event::NodeFailed(failure) => {
                self.out.warn(Ev::NodeFailed, failure.warning());
            }
            Event::Replaced(by) => {
                if st.loss.is_none() && st.stop.is_none() && st.status.is_none() {
                    self.stop_command(st, Moment::now(), Stop::Replaced(by));
                }
            }
            Event::Subscriber(_) => {}
        }
    }

    /// Reap every child that changed state. The direct child's end is recorded; orphans
    /// reparented to us (we are a subreaper) are reaped silently.
    fn reap(&mut self, st: &mut State) {
        let flags = WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED | WaitPidFlag::WCONTINUED;
        loop {
            match waitpid(Pid::from_raw(-1), Some(flags)) {
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(status) if status.pid() == Some(self.group) => match status {
                    WaitStatus::Exited(..) | WaitStatus::Signaled(..) => {
                        st.stopped = false;
                        st.status = Some(status);
                    }
                    WaitStatus::Stopped(..) => {
                        st.stopped = true;
                        self.child_stopped(st);
                    }
                    WaitStatus::Continued(_) => st.stopped = false,
                    _ => {}
                },
                Ok(status @ (WaitStatus::Exited(..) | WaitStatus::Signaled(..)))
                    if status.pid() == self.guard.as_ref().map(Guard::pid) =>
                {
                    self.guard_ended(st, status);
                }
                // An orphan of the group, reparented to us, or a hook.
                Ok(status) => self.hooks.reaped(status),
            }
        }
    }

    /// The guard ended with `status`. When a deadline had passed (distlock did not act in time:
    /// it was stopped, or could not run), the guard has ended the command with SIGKILL: so much
    /// for the group, and the run is lost. Otherwise it died for another reason, and is
    /// replaced.
    fn guard_ended(&mut self, st: &mut State, status: WaitStatus) {
        let now = Moment::now();
        match status {
            WaitStatus::Exited(_, guard::FIRED) => {
                self.guard.take();
                st.guard_fired = true;
                st.noticed_at.get_or_insert(now);
                st.killed_at.get_or_insert(now);
                st.kill_at.get_or_insert(now);
                if st.loss.is_none() {
                    let validity = st.validity;
                    let loss = Loss::GuardFired {
                        last_error: st.last_error.take(),
                        since_anchor: now - validity.anchor,
                        ttl: validity.ttl,
                    };
                    self.lose(st, now, loss);
                }
            }
            WaitStatus::Exited(_, guard::BACKED_UP) => {
                // distlock's own kill sequence, which the guard backed up with its SIGKILL.
                self.guard.take();
                st.killed_at.get_or_insert(now);
            }
            _ => self.replace_guard(st),
        }
    }

    /// The guard died (someone killed it: `pkill distlock` matches `distlock-guard` too; or it
    /// clogged). Without it, a distlock killed or stopped next would leave the command's
    /// processes running without the lock: start another while the group is still ours to
    /// guard.
    fn replace_guard(&mut self, st: &State) {
        let Some(dead) = self.guard.take() else {
            return;
        };
        if st.status.is_some() || st.killed_at.is_some() {
            // Nothing left worth guarding: the command has ended or SIGKILL is under way.
            return;
        }
        match Guard::start_watching(dead.line(), self.group) {
            Ok(guard) => {
                *self.guard = Some(guard);
                self.out.warn(
                    Ev::GuardReplaced,
                    format!("the guard process {} died; started another", dead.pid()),
                );
            }
            Err(e) => self.out.warn(
                Ev::GuardFailed,
                format!(
                    "the guard process died and no other could be started ({e}); if distlock is killed, processes started by the command would survive it"
                ),
            ),
        }
    }

    /// The child stopped. If that was job control (Ctrl-Z on the terminal we handed over, or a
    /// SIGTSTP we forwarded), take the terminal back and stop ourselves, like a shell's job.
    fn child_stopped(&mut self, st: &mut State) {
        let job_control = self.terminal.is_some() || st.stop_requested;
        st.stop_requested = false;
        if !job_control || st.loss.is_some() {
            return;
        }
        if let Some(terminal) = &mut self.terminal {
            terminal.take_back();
        }
        st.job_stopped = true;
        // Stop our whole process group (the job the shell knows); we continue here on SIGCONT.
        let _ = nix::sys::signal::kill(Pid::from_raw(0), Signal::SIGSTOP);
    }
}

/// Whether no process of `group` is left. (Zombies count as members, but as a subreaper we reap
/// every orphan, so a non-empty group here means a live process or one about to be reaped.)
fn group_is_empty(group: Pid) -> bool {
    matches!(killpg(group, None), Err(Errno::ESRCH))
}

fn signal_name(signal: Signal) -> &'static str {
    signal.as_str()
}

fn signal_name_raw(signal: i32) -> String {
    Signal::try_from(signal).map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned())
}
