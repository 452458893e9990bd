//! The guard: a dead-man's switch on the command's process group. It kills the group when
//! distlock dies without a chance to do it (SIGKILL, a crash), and when distlock lives but fails
//! to act in time: no confirmed renewal moved the kill deadline before it passed (distlock
//! stopped by SIGSTOP, held by a debugger or a tracer, its threads starved or wedged).
//!
//! # Why a process of its own
//!
//! PR_SET_PDEATHSIG kills only the direct child; the processes it started (the common case:
//! `sh -c '...'` runs the real work in a grandchild) would run on without the lock, and once the
//! lock expires, beside the next holder. And a distlock that is stopped, not dead, kills nothing
//! at all: its command runs on past the lock. So beside the command distlock starts a minimal
//! process, the guard, in a session of its own (out of reach of the terminal and of signals to
//! distlock's job, `kill -STOP` of distlock included), with every signal blocked, holding the
//! read end of a pipe whose only writers are distlock's threads. When distlock is done it writes
//! "disarmed" and the guard exits. When distlock dies instead, the kernel closes the pipe, the
//! guard reads end-of-file, and sends SIGKILL to the group.
//!
//! The command names its own group to the guard, between clone and exec (see
//! [`super::spawn`]): the guard knows the group before the command runs its first instruction.
//! (When distlock sent that message after the spawn, a loaded machine could run the command
//! for milliseconds before distlock was scheduled again; a distlock SIGKILLed then left the
//! command's background processes running, which the test suite caught under load.)
//!
//! # The deadline
//!
//! The guard holds distlock's own kill deadlines ([`crate::renew::Deadlines`]: `--kill-signal`
//! at T + ttl − grace − margin, SIGKILL at T + ttl − margin, T the send time of the last
//! confirmed renewal), as absolute times on CLOCK_BOOTTIME (see [`crate::clock`]):
//!
//! * the grant's deadlines are in the pipe before the command is spawned, so the guard never
//!   watches a group without a deadline;
//! * every confirmed renewal moves them: the thread that confirms it (the renewer) writes the new
//!   deadlines to the pipe *before* it tells distlock's main thread, so the guard's deadline is
//!   never earlier than distlock's own (and the guard takes the later of what it has and what it
//!   reads: it never moves a deadline earlier);
//! * when a deadline passes without a move, the guard does what distlock would have done: the
//!   kill signal (and SIGCONT, so that stopped members handle it) to the group, SIGKILL at the
//!   second deadline (at once, if that has passed too), and then it exits with [`FIRED`]. It
//!   also raises a flag at the bottom of its own stack as it fires (see [`Guard::has_fired`]),
//!   for a distlock that runs again before the guard is done. distlock, once it runs again, ends
//!   the run with the lock-lost exit code, saying that the guard ended the command;
//! * when distlock starts a kill sequence itself (a lost lock, processes left behind), it says so
//!   first: the guard then sends no kill signal of its own (the command would get two) and only
//!   backs up the SIGKILL at its deadline. To keep the two from crossing when both are awake
//!   (their timers fire at the same instant, on two CPUs), distlock gets a head start on the
//!   kill signal ([`head_start`]: a quarter of the grace, at most 50ms); the guard's SIGKILL
//!   deadline is distlock's, to the nanosecond.
//!
//! The guard waits in `ppoll` on its pipe and on a timerfd on CLOCK_BOOTTIME armed at its next
//! deadline (absolute), so that a deadline that passed while the machine was suspended fires as
//! soon as it resumes. It reads everything waiting in its pipe before it looks at the clock: a
//! guard that was stopped and continued acts on the latest deadline, never on one that a renewal
//! has moved meanwhile. Every message is shorter than PIPE_BUF, so each `write` arrives whole
//! whichever thread makes it; the pipe is non-blocking, so that a guard that does not read (it
//! is stopped) never blocks a renewal: once its pipe is full, after thousands of renewals, the
//! supervisor replaces it (see [`Line::take_clogged`]). A replacement (for a guard that died or
//! clogged) finds the latest deadline, and the group, in its pipe before it runs.
//!
//! # How it is started
//!
//! Every `distlock run` pays for it: re-executing distlock as the guard cost about 0.7 ms of
//! CPU; a `fork()` cost a page-table copy and then a copy-on-write fault for every page distlock
//! wrote afterwards (224 page faults per run instead of 174; 1.57x flock instead of 1.46x). So
//! the guard is a `clone(CLONE_VM)`: a process of its own (its own pid, session, fd table and
//! signal mask) that shares distlock's memory, like a thread that is not one. It runs on a
//! small stack of its own, touches no memory but that stack, and makes its few system calls
//! directly (`syscall` instruction), so that it never touches libc's thread-local state (errno)
//! — which it shares with distlock's main thread. Measured: 162 page faults per run, 1.41x
//! flock. When distlock dies, the guard keeps the address space alive for the microseconds it
//! needs.
//!
//! The group id cannot be recycled under the guard while the command runs: a process-group id
//! stays taken while any member lives. Once distlock has seen the group empty it tells the guard
//! to forget it ([`Guard::group_gone`]), so that a deadline passing later (distlock stopped
//! during the release) cannot reach a new group that took the same id.
//!
//! # Limits
//!
//! Sharing distlock's memory has one cost: the OOM killer kills every process that shares its
//! victim's memory, so a distlock chosen by the OOM killer takes its guard along (the command
//! itself still dies of PR_SET_PDEATHSIG; its own children do not). A guard killed on its own
//! (`pkill distlock` matches `distlock-guard`) is reaped by distlock, which starts another (see
//! `supervise`); both killed within the same moment leave the command's children to themselves.
//! A guard stopped on its own is covered by distlock, which keeps its deadlines as before. A
//! distlock and its guard *both* stopped (`pkill -STOP distlock` matches both) leave the command
//! unwatched until one of them runs again; the first to run kills it at once, its deadline
//! having passed.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::fcntl::OFlag;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::clock::{KERNEL_CLOCK, Moment};
use crate::lock::Validity;
use crate::renew::Deadlines;

/// The guard's process name (what `ps` and /proc/PID/comm show).
pub const NAME: &[u8] = b"distlock-guard\0";

/// The guard's exit status when distlock disarmed it.
pub const DISARMED: i32 = 0;
/// The guard's exit status when it found its pipe in a state it cannot reason about (it then
/// does nothing, rather than kill a healthy command).
pub const CONFUSED: i32 = 1;
/// The guard's exit status when distlock died (its pipe closed) and it killed the group.
pub const ORPHANED: i32 = 2;
/// The guard's exit status when a kill deadline passed without a confirmed renewal and the
/// guard ended the command itself (kill signal, then SIGKILL).
pub const FIRED: i32 = 3;
/// The guard's exit status when distlock had started killing the group itself, and the guard
/// sent SIGKILL at its deadline as a backup.
pub const BACKED_UP: i32 = 4;

/// Messages on the pipe, each one `write` shorter than PIPE_BUF (so each arrives whole):
/// * `g` and the group (4 native-endian bytes): guard this group;
/// * `t`, the two deadlines (8 bytes each: nanoseconds on CLOCK_BOOTTIME) and the kill signal
///   (4 bytes): the kill deadlines, moved;
/// * `k`: distlock is killing the group itself;
/// * `f`: the group is gone: forget it;
/// * `d`: disarmed.
const WATCH: u8 = b'g';
const DEADLINE: u8 = b't';
const DISTLOCK_KILLS: u8 = b'k';
const FORGET: u8 = b'f';
const DISARM: u8 = b'd';
const WATCH_LEN: usize = 5;
const DEADLINE_LEN: usize = 21;

/// The message "guard the group `group`", as the guard reads it.
pub fn watch_message(group: libc::pid_t) -> [u8; WATCH_LEN] {
    let mut message = [WATCH; WATCH_LEN];
    message[1..].copy_from_slice(&group.to_ne_bytes());
    message
}

/// The message "the kill deadlines are now `term` and `kill`, the kill signal `signal`".
fn deadline_message(deadline: Deadline, signal: Signal) -> [u8; DEADLINE_LEN] {
    let mut message = [DEADLINE; DEADLINE_LEN];
    message[1..9].copy_from_slice(&deadline.term.as_nanos().to_ne_bytes());
    message[9..17].copy_from_slice(&deadline.kill.as_nanos().to_ne_bytes());
    message[17..].copy_from_slice(&(signal as i32).to_ne_bytes());
    message
}

/// The kill deadlines the guard holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Deadline {
    /// When to send the kill signal.
    term: Moment,
    /// When to send SIGKILL.
    kill: Moment,
}

/// How long after distlock's kill-signal deadline the guard sends the signal itself, given the
/// grace between the kill signal and SIGKILL: a healthy distlock sends it at the deadline and
/// tells the guard so within microseconds; a distlock that is stopped leaves the guard the rest
/// of the grace. Never past the SIGKILL deadline.
pub fn head_start(grace: std::time::Duration) -> std::time::Duration {
    (grace / 4).min(std::time::Duration::from_millis(50))
}

/// The way to the guard that is current, shared by distlock's threads: the main thread (the
/// grant's deadline, its own kills, replacements) and the renewer (each confirmed renewal).
/// It outlives any one guard: a replacement takes over the same line, with what was sent on it.
#[derive(Clone)]
pub struct Line(Arc<Mutex<Wire>>);

struct Wire {
    /// The write end of the current guard's pipe (non-blocking); None without a guard, or once
    /// disarmed.
    pipe: Option<OwnedFd>,
    /// Which guard the pipe belongs to (each start takes the next number), so that a guard that
    /// is dropped after its replacement started cannot disarm the replacement.
    generation: u64,
    /// The latest deadline sent: a replacement gets it before anything else.
    deadline: Option<Deadline>,
    /// The kill signal (`--kill-signal`).
    signal: Signal,
    /// distlock has started killing the group itself.
    distlock_kills: bool,
    /// A write found the pipe full: the guard has not read it for thousands of messages.
    clogged: bool,
}

impl Line {
    /// A line for guards that end a command with `signal`, then SIGKILL.
    pub fn new(signal: Signal) -> Line {
        Line(Arc::new(Mutex::new(Wire {
            pipe: None,
            generation: 0,
            deadline: None,
            signal,
            distlock_kills: false,
            clogged: false,
        })))
    }

    fn wire(&self) -> MutexGuard<'_, Wire> {
        // A thread that panicked while holding the lock left a consistent wire (every change is
        // one assignment): use it.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The lock is ours until at least the end of `validity` (a grant or a confirmed renewal):
    /// move the guard's deadlines to those `deadlines` derive from it (see [`head_start`]),
    /// unless it has later ones already. Called before the main thread learns of the validity.
    pub fn move_deadline(&self, deadlines: &Deadlines, validity: Validity) {
        let kill = deadlines.kill_at(validity);
        let term = (deadlines.term_at(validity) + head_start(deadlines.grace)).min(kill);
        self.move_to(term, kill);
    }

    /// Move the guard's deadlines to `term` and `kill`, unless it has later ones already.
    fn move_to(&self, term: Moment, kill: Moment) {
        let mut wire = self.wire();
        let latest = match wire.deadline {
            Some(d) => Deadline {
                term: d.term.max(term),
                kill: d.kill.max(kill),
            },
            None => Deadline { term, kill },
        };
        if wire.deadline == Some(latest) {
            return;
        }
        wire.deadline = Some(latest);
        let message = deadline_message(latest, wire.signal);
        wire.send(&message);
    }

    /// distlock starts killing the group itself: the guard must not send a second kill signal.
    /// Called before the kill signal is sent.
    pub fn distlock_kills(&self) {
        let mut wire = self.wire();
        if !wire.distlock_kills {
            wire.distlock_kills = true;
            wire.send(&[DISTLOCK_KILLS]);
        }
    }

    /// Whether a write found the guard's pipe full since the last call: the guard has not read
    /// its pipe for thousands of messages (it is stopped), and, once continued, would read
    /// deadlines that are out of date and miss the latest, which did not fit. The caller kills
    /// it and starts another (which gets the latest deadline first).
    pub fn take_clogged(&self) -> bool {
        std::mem::take(&mut self.wire().clogged)
    }
}

impl Wire {
    fn send(&mut self, message: &[u8]) {
        if let Some(pipe) = &self.pipe {
            // SAFETY: writing from a valid buffer to a descriptor we own.
            let sent =
                unsafe { libc::write(pipe.as_raw_fd(), message.as_ptr().cast(), message.len()) };
            if sent < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock {
                self.clogged = true;
            }
        }
    }
}

/// A running guard. It learns the group to guard from the command itself (see
/// [`Guard::pipe_fd`]), its deadlines from the [`Line`], and exits quietly after
/// [`Guard::disarm`] (or when distlock dies before anything was watched).
pub struct Guard {
    line: Line,
    generation: u64,
    pid: Pid,
    /// The guard's mailbox, at the bottom of its stack.
    mailbox: &'static Mailbox,
}

/// What distlock and its guard share besides the pipe: the first 16 bytes of the guard's stack
/// allocation (the stack grows down from the other end, 16 KiB away). distlock writes it before
/// the guard exists; afterwards the guard only raises `fired`, with an atomic store (a plain
/// store instruction: no libc).
#[repr(C, align(16))]
struct Mailbox {
    /// Set by the guard when it ends the command itself (it sent the kill signal, or SIGKILL,
    /// before distlock said that it was killing the group).
    fired: AtomicU32,
    /// The read end of the guard's pipe.
    pipe: libc::c_int,
}

impl Guard {
    /// Start the guard on `line`. Done early (before waiting for the lock), so that it is not on
    /// the path from acquiring the lock to starting the command.
    pub fn start(line: &Line) -> io::Result<Guard> {
        Guard::launch(line, None)
    }

    /// Start a guard that guards `group` from its first instruction, with the latest deadline:
    /// both are in its pipe before it exists, so that a distlock stopped or killed right after
    /// it started (a replacement for a guard that died) cannot leave it guarding nothing.
    pub fn start_watching(line: &Line, group: Pid) -> io::Result<Guard> {
        Guard::launch(line, Some(group))
    }

    fn launch(line: &Line, group: Option<Pid>) -> io::Result<Guard> {
        let mut wire = line.wire();
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let read_fd = read.as_raw_fd();
        if let Some(deadline) = wire.deadline {
            nix::unistd::write(&write, &deadline_message(deadline, wire.signal))?;
        }
        if wire.distlock_kills {
            nix::unistd::write(&write, &[DISTLOCK_KILLS])?;
        }
        if let Some(group) = group {
            nix::unistd::write(&write, &watch_message(group.as_raw()))?;
        }
        // The guard's stack: never freed (the guard may outlive this process's use of it),
        // never zeroed (pages are touched only as the guard uses them, about one), its first
        // 16 bytes the mailbox.
        let stack: &'static mut [std::mem::MaybeUninit<Mailbox>] =
            Box::leak(Box::new_uninit_slice(GUARD_STACK_BYTES / 16));
        let (bottom, stack) = stack.split_at_mut(1);
        let mailbox: &'static Mailbox = bottom[0].write(Mailbox {
            fired: AtomicU32::new(0),
            pipe: read_fd,
        });
        // SAFETY: the stack is 16-byte aligned, 16 KiB less the mailbox, leaked (so valid for
        // the guard's whole life), and grows down from its end, away from the mailbox.
        // `guard_entry` touches only that stack and the mailbox (given as its argument; it only
        // reads `pipe` and raises `fired` atomically) and makes raw system calls: it never reads
        // or writes distlock's memory or libc's state, which it shares (CLONE_VM). All signals
        // are blocked in this thread across the clone, so the guard starts with every signal
        // blocked (its mask is its own) and no handler of ours can run in it; this thread's mask
        // is restored right after.
        let pid = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
            let top = stack.as_mut_ptr().add(stack.len()).cast::<libc::c_void>();
            let pid = libc::clone(
                guard_entry,
                top,
                libc::CLONE_VM | libc::SIGCHLD,
                std::ptr::from_ref(mailbox)
                    .cast_mut()
                    .cast::<libc::c_void>(),
            );
            let clone_error = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
            if pid < 0 {
                return Err(clone_error);
            }
            pid
        };
        drop(read);
        wire.generation += 1;
        wire.pipe = Some(write);
        wire.clogged = false;
        Ok(Guard {
            line: line.clone(),
            generation: wire.generation,
            pid: Pid::from_raw(pid),
            mailbox,
        })
    }

    /// Whether the guard has ended the command itself (a deadline passed before distlock said
    /// it was killing the group): known from the moment it sent the first signal, before it
    /// exits with [`FIRED`].
    pub fn has_fired(&self) -> bool {
        self.mailbox.fired.load(Ordering::Acquire) != 0
    }

    /// The guard's pid (it is distlock's child: its death is reaped by the supervisor, which
    /// then starts another, see [`crate::child::supervise`]).
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The line this guard listens on (a replacement takes it over).
    pub fn line(&self) -> &Line {
        &self.line
    }

    /// The write end of the guard's pipe, for a child to name its own group on (it is
    /// close-on-exec: the command never holds it). None once disarmed. (The descriptor stays
    /// open until the guard is replaced or disarmed, which only the main thread does: the
    /// thread that spawns the child with it.)
    pub fn pipe_fd(&self) -> Option<std::os::fd::RawFd> {
        let wire = self.line.wire();
        if wire.generation != self.generation {
            return None;
        }
        wire.pipe.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The command's group is gone (distlock has reaped it): the guard must not signal its id
    /// any more, whatever the deadlines say (another group may take the id).
    pub fn group_gone(&self) {
        let mut wire = self.line.wire();
        if wire.generation == self.generation {
            wire.send(&[FORGET]);
        }
    }

    /// distlock is done with the group (it is gone, or distlock stopped it itself): the guard
    /// exits without doing anything.
    pub fn disarm(&mut self) {
        let mut wire = self.line.wire();
        if wire.generation == self.generation {
            wire.send(&[DISARM]);
            wire.pipe = None;
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // A panic is distlock dying without having stopped the group: leave the guard armed.
        if !std::thread::panicking() {
            self.disarm();
        }
    }
}

/// The guard's stack.
const GUARD_STACK_BYTES: usize = 16 * 1024;

/// What the guard knows, on its own stack.
struct Watch {
    /// The command's process group (0: not known yet, or gone).
    group: i32,
    /// The deadlines, in nanoseconds on CLOCK_BOOTTIME (0: none yet).
    term: u64,
    kill: u64,
    signal: i32,
    /// distlock is killing the group itself.
    distlock_kills: bool,
    /// The guard has sent the kill signal itself: its SIGKILL follows, whatever comes.
    fired: bool,
}

/// The guard process. `arg` is its [`Mailbox`] (the read end of its pipe, and the flag it
/// raises when it fires). Never returns.
///
/// It shares distlock's memory and thread-local storage, so it must not call libc (errno), must
/// not allocate, and must not panic (the panic machinery uses thread-local state): every step
/// below is a raw system call or arithmetic on its own stack, with every index checked
/// (`get`), and a failed check ends the guard quietly.
extern "C" fn guard_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the mailbox at the bottom of this stack's allocation, written before the
    // clone and alive as long as this process (leaked).
    let mailbox: &Mailbox = unsafe { &*arg.cast::<Mailbox>() };
    let pipe = mailbox.pipe;
    let fire = || mailbox.fired.store(1, Ordering::Release);
    // SAFETY: raw system calls with integer arguments and pointers into this stack frame.
    unsafe {
        syscall(
            libc::SYS_prctl,
            [libc::PR_SET_NAME as usize, NAME.as_ptr() as usize, 0, 0, 0],
        );
        // Out of distlock's job: no terminal signals, no signals sent to distlock's group.
        syscall(libc::SYS_setsid, [0; 5]);
        // Hold nothing of distlock's but the pipe (its fd table is a copy): not the pipe's write
        // end (or end-of-file would never come), not the pipes of a shell pipeline that waits
        // for end-of-file, not its stdio.
        if pipe > 0 {
            syscall(libc::SYS_close_range, [0, (pipe - 1) as usize, 0, 0, 0]);
        }
        syscall(
            libc::SYS_close_range,
            [(pipe + 1) as usize, u32::MAX as usize, 0, 0, 0],
        );
    }
    // A timer on the clock of deadlines; without one (the system refused), ppoll's own timeout
    // serves, which a suspend stretches.
    // SAFETY: timerfd_create takes two integers.
    let timer = unsafe {
        syscall(
            libc::SYS_timerfd_create,
            [KERNEL_CLOCK as usize, libc::TFD_CLOEXEC as usize, 0, 0, 0],
        )
    } as libc::c_int;
    let mut watch = Watch {
        group: 0,
        term: 0,
        kill: 0,
        signal: libc::SIGTERM,
        distlock_kills: false,
        fired: false,
    };
    let mut buf = [0u8; 64];
    let mut have = 0usize;
    loop {
        // Everything in the pipe first: the latest deadline, not a stale one.
        loop {
            let Some(room) = buf.get_mut(have..) else {
                exit(CONFUSED);
            };
            // SAFETY: reading into `room`, a slice of this stack frame, at most its length.
            let n = unsafe {
                syscall(
                    libc::SYS_read,
                    [pipe as usize, room.as_mut_ptr() as usize, room.len(), 0, 0],
                )
            };
            if n == -(libc::EAGAIN as isize) {
                break;
            }
            if n == 0 {
                // distlock died: the kernel closed its end of the pipe.
                if watch.group > 1 {
                    kill_group(watch.group, libc::SIGKILL);
                }
                exit(ORPHANED);
            }
            if n < 0 || n as usize > room.len() {
                // A pipe we cannot reason about: do nothing rather than kill a healthy command.
                exit(CONFUSED);
            }
            have += n as usize;
            let used = read_messages(&buf, have, &mut watch);
            // Keep the start of a message that has not arrived whole yet.
            let mut i = used;
            while i < have {
                let Some(&byte) = buf.get(i) else {
                    exit(CONFUSED);
                };
                let Some(slot) = buf.get_mut(i - used) else {
                    exit(CONFUSED);
                };
                *slot = byte;
                i += 1;
            }
            have -= used;
        }
        // Then the clock.
        let mut wake_at = 0u64;
        if watch.group > 1 && watch.kill != 0 {
            let now = now_nanos();
            if now >= watch.kill {
                let fired = watch.fired || !watch.distlock_kills;
                if fired {
                    fire();
                }
                kill_group(watch.group, libc::SIGKILL);
                exit(if fired { FIRED } else { BACKED_UP });
            }
            if now >= watch.term && !watch.fired && !watch.distlock_kills {
                watch.fired = true;
                fire();
                if watch.signal == libc::SIGKILL {
                    kill_group(watch.group, libc::SIGKILL);
                    exit(FIRED);
                }
                kill_group(watch.group, watch.signal);
                // Members that are stopped must run to handle it.
                kill_group(watch.group, libc::SIGCONT);
            }
            wake_at = if watch.fired || watch.distlock_kills {
                watch.kill
            } else {
                watch.term
            };
        }
        wait(pipe, timer, wake_at);
    }
}

/// Apply the whole messages at the start of `buf[..have]` to `watch`; return how many bytes
/// they took. A message the guard does not know ends it (quietly: better nothing than a wrong
/// kill); `d` ends it too, disarmed.
fn read_messages(buf: &[u8; 64], have: usize, watch: &mut Watch) -> usize {
    let mut at = 0;
    while let Some(&kind) = buf.get(at).filter(|_| at < have) {
        let len = match kind {
            DISARM => exit(DISARMED),
            DISTLOCK_KILLS | FORGET => 1,
            WATCH => WATCH_LEN,
            DEADLINE => DEADLINE_LEN,
            _ => exit(CONFUSED),
        };
        let Some(message) = buf.get(at..at + len).filter(|_| at + len <= have) else {
            break;
        };
        match kind {
            DISTLOCK_KILLS => watch.distlock_kills = true,
            FORGET => watch.group = 0,
            WATCH => watch.group = i32::from_ne_bytes(bytes(message, 1)),
            _ => {
                // Deadlines only ever move later; once the guard has fired, they do not move.
                if !watch.fired {
                    watch.term = watch.term.max(u64::from_ne_bytes(bytes(message, 1)));
                    watch.kill = watch.kill.max(u64::from_ne_bytes(bytes(message, 9)));
                    watch.signal = i32::from_ne_bytes(bytes(message, 17));
                }
            }
        }
        at += len;
    }
    at
}

/// `N` bytes of `message` from `from` (zeroes past its end: the callers' lengths are constants
/// that fit).
fn bytes<const N: usize>(message: &[u8], from: usize) -> [u8; N] {
    let mut out = [0u8; N];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = message.get(from + i).copied().unwrap_or(0);
    }
    out
}

/// Signal the process group `group` (never a pid of its own: `group` > 1 is checked).
fn kill_group(group: i32, signal: i32) {
    if group > 1 {
        // SAFETY: kill takes integers.
        unsafe {
            syscall(
                libc::SYS_kill,
                [(-group) as isize as usize, signal as usize, 0, 0, 0],
            );
        }
    }
}

/// Now, in nanoseconds on the clock of deadlines (0 if it cannot be read: every deadline then
/// looks far away; the pipe's end-of-file still works).
fn now_nanos() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into this stack frame.
    unsafe {
        syscall(
            libc::SYS_clock_gettime,
            [KERNEL_CLOCK as usize, (&raw mut ts) as usize, 0, 0, 0],
        );
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Wait until the pipe has something to read, or (if `wake_at` is not 0) until `wake_at`.
fn wait(pipe: libc::c_int, timer: libc::c_int, wake_at: u64) {
    let mut fds = [
        libc::pollfd {
            fd: pipe,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: timer,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let at = |nanos: u64| libc::timespec {
        tv_sec: (nanos / 1_000_000_000) as libc::time_t,
        tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
    };
    // Absolute on the timer (re-arming also clears its expiration); relative for ppoll when
    // there is no timer. Zero disarms.
    let spec = libc::itimerspec {
        it_interval: at(0),
        it_value: at(wake_at),
    };
    let mut timeout = at(0);
    let mut use_timeout = false;
    if timer >= 0 {
        // SAFETY: settime reads one itimerspec from this stack frame; no old value asked for.
        unsafe {
            syscall(
                libc::SYS_timerfd_settime,
                [
                    timer as usize,
                    libc::TFD_TIMER_ABSTIME as usize,
                    (&raw const spec) as usize,
                    0,
                    0,
                ],
            );
        }
    } else if wake_at != 0 {
        timeout = at(wake_at.saturating_sub(now_nanos()).max(1));
        use_timeout = true;
    }
    let timeout_ptr = if use_timeout {
        (&raw const timeout) as usize
    } else {
        0
    };
    // SAFETY: ppoll reads and writes `fds` and reads `timeout` (or waits without one), all in
    // this stack frame; no signal mask. Every signal is blocked: it cannot fail with EINTR,
    // and a spurious return only costs another look at the pipe and the clock.
    unsafe {
        syscall(
            libc::SYS_ppoll,
            [fds.as_mut_ptr() as usize, 2, timeout_ptr, 0, 0],
        );
    }
}

/// End the guard.
fn exit(code: i32) -> ! {
    // SAFETY: exit_group ends this process (the guard is a thread group of its own).
    unsafe {
        syscall(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0]);
    }
    // exit_group does not return; spin rather than reach for anything that could unwind.
    #[allow(clippy::empty_loop)]
    loop {}
}

/// A system call with up to five arguments, without libc (no errno): the result, or minus the
/// error number.
///
/// # Safety
/// The arguments must be valid for system call `number`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn syscall(number: libc::c_long, args: [usize; 5]) -> isize {
    let ret: isize;
    // SAFETY: the Linux x86_64 system call convention (arguments in rdi, rsi, rdx, r10, r8);
    // rcx and r11 are clobbered.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") number as isize => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// A system call with up to five arguments, without libc (no errno): the result, or minus the
/// error number.
///
/// # Safety
/// The arguments must be valid for system call `number`.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
unsafe fn syscall(number: libc::c_long, args: [usize; 5]) -> isize {
    let ret: isize;
    // SAFETY: the Linux aarch64 system call convention (number in x8, arguments in x0-x4,
    // result in x0).
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") number,
            inlateout("x0") args[0] as isize => ret,
            in("x1") args[1],
            in("x2") args[2],
            in("x3") args[3],
            in("x4") args[4],
            options(nostack),
        );
    }
    ret
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("distlock's guard makes raw system calls for x86_64 and aarch64 Linux only");

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::time::{Duration, Instant};

    use nix::sys::signal::kill;
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};

    use super::*;
    use crate::child::spawn::{SpawnSpec, resolve, spawn};

    impl Guard {
        /// What distlock's death does to the guard: its end of the pipe closes, unannounced.
        fn orphan(&mut self) {
            self.line.wire().pipe = None;
        }
    }

    /// The longest any wait in these tests may take.
    const BOUND: Duration = Duration::from_secs(10);

    /// Whether any live (not zombie) process is in process group `group`.
    fn group_alive(group: i32) -> bool {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
            .any(|stat| {
                // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
                let Some((_, rest)) = stat.rsplit_once(')') else {
                    return false;
                };
                let fields: Vec<&str> = rest.split_whitespace().collect();
                fields.first() != Some(&"Z") && fields.get(2) == Some(&group.to_string().as_str())
            })
    }

    /// `sh -c script` in a group of its own that names itself to `guard`.
    fn spawn_sh(guard: &Guard, script: &str) -> Pid {
        let sh = resolve(std::ffi::OsStr::new("sh")).unwrap();
        let argv: Vec<OsString> = ["sh", "-c", script].iter().map(OsString::from).collect();
        spawn(SpawnSpec {
            program: &sh,
            argv: &argv,
            env: vec![],
            take_terminal: false,
            reset_signals: &[libc::SIGPIPE],
            guard: guard.pipe_fd(),
        })
        .unwrap()
    }

    /// How `pid` (a child of this process) ends, within `BOUND`; `cleanup` is killed on failure.
    fn ended(pid: Pid, cleanup: Pid) -> WaitStatus {
        let deadline = Instant::now() + BOUND;
        loop {
            match waitpid(pid, Some(WaitPidFlag::WNOHANG)).unwrap() {
                WaitStatus::StillAlive if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                WaitStatus::StillAlive => {
                    let _ = nix::sys::signal::killpg(cleanup, Signal::SIGKILL);
                    panic!("process {pid} did not end");
                }
                other => return other,
            }
        }
    }

    fn still_running(pid: Pid) -> bool {
        waitpid(pid, Some(WaitPidFlag::WNOHANG)).unwrap() == WaitStatus::StillAlive
    }

    /// The guard knows the command's group from the command itself, before distlock says
    /// anything: when distlock dies the moment the command has started (here: its pipe end is
    /// closed right after the spawn, no message sent), the whole group dies, background
    /// processes included.
    #[test]
    fn the_guard_knows_the_group_before_distlock_speaks() {
        let mut guard = Guard::start(&Line::new(Signal::SIGTERM)).unwrap();
        let group = spawn_sh(&guard, "sleep 30 & wait");
        guard.orphan();
        let status = ended(group, group);
        assert_eq!(status, WaitStatus::Signaled(group, Signal::SIGKILL, false));
        let deadline = Instant::now() + BOUND;
        while group_alive(group.as_raw()) {
            assert!(
                Instant::now() < deadline,
                "the command's background process outlived the guard's kill"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(
            ended(guard.pid(), group),
            WaitStatus::Exited(guard.pid(), ORPHANED)
        );
    }

    /// A guard that died before the spawn (its pipe has no reader) does not take the command
    /// down with it: the SIGPIPE of the child's message is taken back before exec.
    #[test]
    fn a_dead_guard_does_not_kill_the_command() {
        let guard = Guard::start(&Line::new(Signal::SIGTERM)).unwrap();
        kill(guard.pid(), Signal::SIGKILL).unwrap();
        let _ = waitpid(guard.pid(), None);
        let pid = spawn_sh(&guard, "exit 7");
        assert_eq!(waitpid(pid, None).unwrap(), WaitStatus::Exited(pid, 7));
    }

    /// A deadline that passes without a move: the guard sends the kill signal to the whole
    /// group, then SIGKILL at the second deadline to what ignored it, and says so in its exit
    /// status. Neither comes before its deadline.
    #[test]
    fn a_passed_deadline_ends_the_group_with_the_kill_signal_then_sigkill() {
        let line = Line::new(Signal::SIGTERM);
        let guard = Guard::start(&line).unwrap();
        let term = Moment::now() + Duration::from_millis(200);
        line.move_to(term, term + Duration::from_millis(300));
        // sh and its background sleep ignore SIGTERM.
        let group = spawn_sh(&guard, "trap '' TERM; sleep 30 & wait");
        assert_eq!(
            ended(group, group),
            WaitStatus::Signaled(group, Signal::SIGKILL, false)
        );
        assert!(Moment::now() >= term + Duration::from_millis(300));
        assert_eq!(
            ended(guard.pid(), group),
            WaitStatus::Exited(guard.pid(), FIRED)
        );
        // A group that takes the kill signal dies of it.
        let line = Line::new(Signal::SIGTERM);
        let guard = Guard::start(&line).unwrap();
        let term = Moment::now() + Duration::from_millis(100);
        line.move_to(term, term + Duration::from_secs(5));
        let group = spawn_sh(&guard, "sleep 30");
        assert_eq!(
            ended(group, group),
            WaitStatus::Signaled(group, Signal::SIGTERM, false)
        );
        assert!(Moment::now() >= term);
        assert!(Moment::now() < term + Duration::from_secs(5));
        // Its flag says so at once, before it is done with the group (its SIGKILL is due later).
        assert!(guard.has_fired());
        assert!(still_running(guard.pid()));
        drop(guard);
    }

    /// Every move of the deadline before it passes spares the command; so does a move that
    /// waits in the pipe of a guard that was stopped past the old deadline (it reads its pipe
    /// before it looks at the clock).
    #[test]
    fn a_moved_deadline_spares_the_command_even_when_the_guard_was_stopped() {
        let line = Line::new(Signal::SIGTERM);
        let mut guard = Guard::start(&line).unwrap();
        let first = Moment::now() + Duration::from_millis(300);
        line.move_to(first, first + Duration::from_millis(100));
        let group = spawn_sh(&guard, "sleep 30");
        kill(guard.pid(), Signal::SIGSTOP).unwrap();
        let later = Moment::now() + Duration::from_secs(60);
        line.move_to(later, later + Duration::from_secs(1));
        // Earlier deadlines never move it back.
        line.move_to(first, first);
        while Moment::now() < first + Duration::from_millis(200) {
            // The stop's length is what is under test, not a synchronisation.
            std::thread::sleep(Duration::from_millis(10));
        }
        kill(guard.pid(), Signal::SIGCONT).unwrap();
        // Give a guard that would (wrongly) fire the time to do it.
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            still_running(group),
            "the guard killed a command whose deadline had moved"
        );
        assert!(still_running(guard.pid()));
        guard.disarm();
        assert_eq!(
            ended(guard.pid(), group),
            WaitStatus::Exited(guard.pid(), DISARMED)
        );
        nix::sys::signal::killpg(group, Signal::SIGKILL).unwrap();
        let _ = waitpid(group, None);
    }

    /// When distlock kills the group itself, the guard sends no second kill signal: it only
    /// backs up the SIGKILL at its deadline.
    #[test]
    fn when_distlock_kills_the_guard_only_backs_up_its_sigkill() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("term");
        let line = Line::new(Signal::SIGTERM);
        let guard = Guard::start(&line).unwrap();
        let term = Moment::now() + Duration::from_millis(100);
        line.move_to(term, term + Duration::from_millis(300));
        let group = spawn_sh(
            &guard,
            &format!(
                "trap 'echo TERM >> {}' TERM; while :; do sleep 0.01; done",
                log.display()
            ),
        );
        line.distlock_kills();
        assert_eq!(
            ended(group, group),
            WaitStatus::Signaled(group, Signal::SIGKILL, false)
        );
        assert!(!log.exists(), "the guard sent the kill signal too");
        assert!(!guard.has_fired());
        assert_eq!(
            ended(guard.pid(), group),
            WaitStatus::Exited(guard.pid(), BACKED_UP)
        );
    }

    /// A replacement guard gets the group and the latest deadline before it runs: it fires on
    /// that deadline without a word from anyone after its start.
    #[test]
    fn a_replacement_gets_the_group_and_the_latest_deadline_first() {
        let line = Line::new(Signal::SIGTERM);
        let first = Guard::start(&line).unwrap();
        let group = spawn_sh(&first, "sleep 30");
        let term = Moment::now() + Duration::from_millis(300);
        line.move_to(term, term + Duration::from_secs(5));
        kill(first.pid(), Signal::SIGKILL).unwrap();
        let _ = waitpid(first.pid(), None);
        let second = Guard::start_watching(&line, group).unwrap();
        // The first guard's end does not disarm its replacement.
        drop(first);
        assert_eq!(
            ended(group, group),
            WaitStatus::Signaled(group, Signal::SIGTERM, false)
        );
        assert!(Moment::now() >= term);
        assert_eq!(
            ended(second.pid(), group),
            WaitStatus::Exited(second.pid(), FIRED)
        );
    }

    /// A guard that does not read its pipe (stopped) for thousands of messages is reported,
    /// and never blocks the writer.
    #[test]
    fn a_guard_that_does_not_read_clogs_its_line_without_blocking_it() {
        let line = Line::new(Signal::SIGTERM);
        let guard = Guard::start(&line).unwrap();
        kill(guard.pid(), Signal::SIGSTOP).unwrap();
        let start = Moment::now() + Duration::from_secs(60);
        let mut n = 0;
        while !line.take_clogged() {
            n += 1;
            assert!(n < 100_000, "a 64 KiB pipe took {n} messages");
            let at = start + Duration::from_millis(n);
            line.move_to(at, at);
        }
        assert!(n > 3000, "clogged after {n} messages");
        kill(guard.pid(), Signal::SIGKILL).unwrap();
        let _ = waitpid(guard.pid(), None);
    }

    /// The guard's deadlines are distlock's own, but for a head start on the kill signal (so
    /// that a healthy distlock is the one to send it): never earlier, and the SIGKILL deadline
    /// to the instant. Later validities move them; earlier ones never move them back.
    #[test]
    fn the_guard_holds_distlocks_deadlines_with_a_head_start_on_the_kill_signal() {
        let line = Line::new(Signal::SIGTERM);
        let deadlines = Deadlines {
            ttl: Duration::from_secs(3),
            grace: Duration::from_millis(600),
        };
        let t0 = Moment::now();
        let v = Validity {
            anchor: t0,
            ttl: Duration::from_secs(3),
        };
        line.move_deadline(&deadlines, v);
        let held = line.wire().deadline.unwrap();
        assert_eq!(held.kill, deadlines.kill_at(v));
        assert_eq!(held.term, deadlines.term_at(v) + Duration::from_millis(50));
        let later = Validity {
            anchor: t0 + Duration::from_secs(1),
            ..v
        };
        line.move_deadline(&deadlines, later);
        line.move_deadline(&deadlines, v);
        assert_eq!(line.wire().deadline.unwrap().kill, deadlines.kill_at(later));
        // A short grace: a quarter of it; none: none.
        assert_eq!(
            head_start(Duration::from_millis(100)),
            Duration::from_millis(25)
        );
        assert_eq!(head_start(Duration::ZERO), Duration::ZERO);
    }

    /// A group forgotten (distlock saw it empty) is never signalled, whatever the deadline.
    #[test]
    fn a_forgotten_group_is_not_signalled() {
        let line = Line::new(Signal::SIGTERM);
        let mut guard = Guard::start(&line).unwrap();
        let term = Moment::now() + Duration::from_millis(100);
        line.move_to(term, term);
        let group = spawn_sh(&guard, "sleep 30");
        guard.group_gone();
        while Moment::now() < term + Duration::from_millis(200) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(still_running(group));
        assert!(still_running(guard.pid()));
        guard.disarm();
        assert_eq!(
            ended(guard.pid(), group),
            WaitStatus::Exited(guard.pid(), DISARMED)
        );
        nix::sys::signal::killpg(group, Signal::SIGKILL).unwrap();
        let _ = waitpid(group, None);
    }
}
