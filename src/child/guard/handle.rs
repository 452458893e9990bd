//! distlock's handle on one running guard: its start (a `clone(CLONE_VM)` onto a small stack
//! of its own, with its pipe already holding what it must know), the mailbox it shares with
//! distlock, and what distlock tells it about the group (gone, disarmed).
//!
//! Boundary: distlock's side of one guard; the line it listens on is `line.rs`'s, the code it
//! runs `process.rs`'s.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use nix::fcntl::OFlag;
use nix::unistd::Pid;

use super::line::Line;
use super::message::{DISARM, DISTLOCK_KILLS, deadline_message};
use super::message::{GROUP_GONE, Mailbox, NO_GROUP};
use super::process::guard_entry;

/// A running guard. It learns the group to guard from the command itself (see
/// [`Guard::group_slot`]), its deadlines from the [`Line`], and exits quietly after
/// [`Guard::disarm`] (or when distlock dies before anything was watched).
pub struct Guard {
    pub(super) line: Line,
    generation: u64,
    pid: Pid,
    /// The guard's mailbox, at the bottom of its stack.
    mailbox: &'static Mailbox,
}

impl Guard {
    /// Start the guard on `line`. Done early (before waiting for the lock), so that it is not on
    /// the path from acquiring the lock to starting the command.
    pub fn start(line: &Line) -> io::Result<Guard> {
        Guard::launch(line, None)
    }

    /// Start a guard that guards `group` from its first instruction, with the latest deadline:
    /// both are in its mailbox and its pipe before it exists, so that a distlock stopped or
    /// killed right after it started (a replacement for a guard that died) cannot leave it
    /// guarding nothing.
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
        // The guard's stack: never freed (the guard may outlive this process's use of it),
        // never zeroed (pages are touched only as the guard uses them, about one), its first
        // 16 bytes the mailbox.
        let stack: &'static mut [std::mem::MaybeUninit<Mailbox>] =
            Box::leak(Box::new_uninit_slice(GUARD_STACK_BYTES / 16));
        let (bottom, stack) = stack.split_at_mut(1);
        let mailbox: &'static Mailbox = bottom[0].write(Mailbox {
            fired: AtomicU32::new(0),
            pipe: read_fd,
            group: AtomicI32::new(group.map_or(NO_GROUP, Pid::as_raw)),
        });
        // SAFETY: the stack is 16-byte aligned, 16 KiB less the mailbox, leaked (so valid for
        // the guard's whole life), and grows down from its end, away from the mailbox.
        // `guard_entry` touches only that stack and the mailbox (given as its argument; it only
        // reads `pipe` and `group` and raises `fired`, the last two atomically) and makes raw
        // system calls: it never reads or writes distlock's memory or libc's state, which it
        // shares (CLONE_VM). All signals are blocked in this thread across the clone, so the
        // guard starts with every signal blocked (its mask is its own) and no handler of ours
        // can run in it; this thread's mask is restored right after.
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
    /// exits with [`FIRED`](super::FIRED).
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

    /// Where a child names its own group to the guard, between `vfork` and exec (an atomic
    /// store into memory the guard shares: unlike a message on its pipe, it wakes nobody on the
    /// way from acquiring the lock to starting the command, where the guard's wake-up used to
    /// preempt the command's exec on a busy machine). None once this guard is disarmed or
    /// replaced. (The mailbox is never freed: the pointer stays valid.)
    pub fn group_slot(&self) -> Option<&'static AtomicI32> {
        let wire = self.line.wire();
        (wire.generation == self.generation && wire.pipe.is_some()).then_some(&self.mailbox.group)
    }

    /// The command's group is gone (distlock has reaped it): the guard must not signal its id
    /// any more, whatever the deadlines say (another group may take the id). Nothing to wake
    /// the guard for: it reads the group only when a deadline or distlock's death wakes it.
    pub fn group_gone(&self) {
        self.mailbox.group.store(GROUP_GONE, Ordering::Release);
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
pub(super) const GUARD_STACK_BYTES: usize = 16 * 1024;
