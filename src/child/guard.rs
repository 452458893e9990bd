//! The guard: what kills the command's whole process group when distlock itself dies without
//! a chance to do it (SIGKILL, the OOM killer, a crash).
//!
//! PR_SET_PDEATHSIG kills only the direct child; the processes it started (the common case:
//! `sh -c '...'` runs the real work in a grandchild) would run on without the lock, and once the
//! lock expires, beside the next holder. So beside the command distlock forks a minimal process,
//! the guard, in a session of its own (out of reach of the terminal and of signals to
//! distlock's job), with every signal blocked, holding the read end of a pipe whose only writer
//! is distlock. When distlock is done it writes one byte ("disarmed") and the guard exits. When
//! distlock dies instead, the kernel closes the pipe, the guard reads end-of-file, and sends
//! SIGKILL to the command's process group.
//!
//! A plain `fork()` without `exec`: the guard only needs `read`, `kill` and `_exit`, all
//! async-signal-safe, so it can run in the copy of distlock (which may have other threads) that
//! fork gives it. That costs a page-table copy; re-executing distlock as the guard cost about
//! 0.7 ms of CPU per run, which a busy machine pays in throughput.
//!
//! The group cannot be recycled under the guard: a process-group id stays taken while any
//! member lives, and a group with no members has nothing left to kill.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::fcntl::OFlag;
use nix::unistd::Pid;

/// The guard's process name (what `ps` and /proc/PID/comm show).
pub const NAME: &[u8] = b"distlock-guard\0";

/// A running guard, armed until [`Guard::disarm`].
pub struct Guard {
    pipe: Option<OwnedFd>,
}

impl Guard {
    /// Start a guard for the process group `group`.
    pub fn start(group: Pid) -> io::Result<Guard> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let read_fd = read.as_raw_fd();
        let group = group.as_raw();
        // SAFETY: after fork in a possibly multi-threaded process, the child makes only
        // async-signal-safe system calls (prctl, setsid, close_range, read, kill, _exit) on
        // values computed before the fork; it allocates nothing and never returns. All signals
        // are blocked in this thread across the fork, so no handler of ours runs in the child,
        // which keeps them blocked for good; the parent restores its mask at once.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
            let pid = libc::fork();
            if pid == 0 {
                guard_main(read_fd, group);
            }
            let fork_error = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
            if pid < 0 {
                return Err(fork_error);
            }
        }
        drop(read);
        Ok(Guard { pipe: Some(write) })
    }

    /// distlock is done with the group (it is gone, or distlock stopped it itself): the guard
    /// exits without doing anything.
    pub fn disarm(&mut self) {
        if let Some(pipe) = self.pipe.take() {
            // SAFETY: writing one byte from a valid buffer to a descriptor we own.
            unsafe { libc::write(pipe.as_raw_fd(), b"d".as_ptr().cast(), 1) };
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

/// The guard process, right after fork. Never returns.
///
/// # Safety
/// Must be called only in the child of a fork, with every signal blocked; see `Guard::start`.
unsafe fn guard_main(pipe: libc::c_int, group: libc::pid_t) -> ! {
    // SAFETY: async-signal-safe system calls on plain integers and a stack buffer.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, NAME.as_ptr(), 0, 0, 0);
        // Out of distlock's job: no terminal signals, no signals sent to distlock's group.
        libc::setsid();
        // Hold nothing of distlock's but the pipe: not its Redis connections, not the pipes
        // of a shell pipeline that waits for end-of-file, not its stdio.
        if pipe > 0 {
            libc::close_range(0, (pipe - 1) as libc::c_uint, 0);
        }
        libc::close_range((pipe + 1) as libc::c_uint, libc::c_uint::MAX, 0);
        let mut byte = 0u8;
        // Every signal is blocked, so the read cannot fail with EINTR.
        match libc::read(pipe, (&raw mut byte).cast(), 1) {
            // distlock died: the kernel closed its end of the pipe.
            0 => {
                libc::kill(-group, libc::SIGKILL);
                libc::_exit(0)
            }
            // Disarmed.
            n if n > 0 => libc::_exit(0),
            // A pipe we cannot reason about: do nothing rather than kill a healthy command.
            _ => libc::_exit(1),
        }
    }
}
