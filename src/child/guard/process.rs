//! The guard process itself, from its first instruction: it reads its pipe, watches the
//! deadlines on a timerfd, kills the group when distlock dies or a deadline passes, and exits
//! with one of the guard's exit codes.
//!
//! Boundary: the code that runs in the guard, and only there. It shares distlock's memory, so
//! it calls no libc, allocates nothing and cannot panic: raw system calls (`syscall.rs`) and
//! arithmetic on its own stack.

use std::sync::atomic::Ordering;

use super::message::{DEADLINE, DEADLINE_LEN, DISARM, DISTLOCK_KILLS};
use super::message::{Mailbox, NO_GROUP};
use super::syscall::syscall;
use super::{BACKED_UP, CONFUSED, DISARMED, FIRED, NAME, ORPHANED};
use crate::clock::KERNEL_CLOCK;

/// What the guard knows, on its own stack.
struct Watch {
    /// The deadlines, in nanoseconds on CLOCK_BOOTTIME (0: none yet).
    term: u64,
    kill: u64,
    signal: i32,
    /// distlock is killing the group itself.
    distlock_kills: bool,
    /// The guard has sent the kill signal itself: its SIGKILL follows, whatever comes.
    fired: bool,
}

impl Watch {
    /// The deadline to wake at next: SIGKILL's once the kill signal is sent (or distlock sends
    /// it), else the kill signal's.
    fn next(&self) -> u64 {
        if self.fired || self.distlock_kills {
            self.kill
        } else {
            self.term
        }
    }
}

/// The guard process. `arg` is its [`Mailbox`] (the read end of its pipe, and the flag it
/// raises when it fires). Never returns.
///
/// It shares distlock's memory and thread-local storage, so it must not call libc (errno), must
/// not allocate, and must not panic (the panic machinery uses thread-local state): every step
/// below is a raw system call or arithmetic on its own stack, with every index checked
/// (`get`), and a failed check ends the guard quietly.
pub(super) extern "C" fn guard_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the mailbox at the bottom of this stack's allocation, written before the
    // clone and alive as long as this process (leaked).
    let mailbox: &Mailbox = unsafe { &*arg.cast::<Mailbox>() };
    let pipe = mailbox.pipe;
    let fire = || mailbox.fired.store(1, Ordering::Release);
    // The group, as the command named it (see `Mailbox::group`).
    let group = || mailbox.group.load(Ordering::Acquire);
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
                // distlock died: the kernel closed its end of the pipe (and the command's copy
                // closed on its exec: whatever group it named is in the mailbox by now).
                kill_group(group(), libc::SIGKILL);
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
        let group = group();
        if group == NO_GROUP && watch.kill != 0 {
            // Deadlines, and no group named yet: the command is between vfork and exec (a few
            // microseconds, unless distlock is stopped right there), and names it without waking
            // the guard. Look at the first deadline, and every millisecond after it.
            wake_at = watch.next().max(now_nanos().saturating_add(1_000_000));
        } else if group > 1 && watch.kill != 0 {
            let now = now_nanos();
            if now >= watch.kill {
                let fired = watch.fired || !watch.distlock_kills;
                if fired {
                    fire();
                }
                kill_group(group, libc::SIGKILL);
                exit(if fired { FIRED } else { BACKED_UP });
            }
            if now >= watch.term && !watch.fired && !watch.distlock_kills {
                watch.fired = true;
                fire();
                if watch.signal == libc::SIGKILL {
                    kill_group(group, libc::SIGKILL);
                    exit(FIRED);
                }
                kill_group(group, watch.signal);
                // Members that are stopped must run to handle it.
                kill_group(group, libc::SIGCONT);
            }
            wake_at = watch.next();
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
            DISTLOCK_KILLS => 1,
            DEADLINE => DEADLINE_LEN,
            _ => exit(CONFUSED),
        };
        let Some(message) = buf.get(at..at + len).filter(|_| at + len <= have) else {
            break;
        };
        match kind {
            DISTLOCK_KILLS => watch.distlock_kills = true,
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
