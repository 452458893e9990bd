//! The guard: what kills the command's whole process group when distlock itself dies without
//! a chance to do it (SIGKILL, the OOM killer, a crash).
//!
//! PR_SET_PDEATHSIG kills only the direct child; the processes it started (the common case:
//! `sh -c '...'` runs the real work in a grandchild) would run on without the lock, and once the
//! lock expires, beside the next holder. So beside the command distlock forks a minimal process,
//! the guard, in a session of its own (out of reach of the terminal and of signals to
//! distlock's job), with every signal blocked, holding the read end of a pipe whose only writer
//! is distlock. distlock tells it the command's process group as soon as the command exists;
//! when distlock is done it writes "disarmed" and the guard exits. When distlock dies instead,
//! the kernel closes the pipe, the guard reads end-of-file, and sends SIGKILL to the group.
//! (Between the command's start and the message naming its group, a few microseconds, a
//! distlock killed would leave the command's own children to themselves.)
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

/// A running guard. It learns the group to guard from [`Guard::watch`], and exits quietly after
/// [`Guard::disarm`] (or when distlock dies before anything was watched).
pub struct Guard {
    pipe: Option<OwnedFd>,
}

/// Messages on the pipe: `g` and the group as 4 native-endian bytes ("guard this group"), or
/// `d` ("disarmed"). Both are shorter than PIPE_BUF, so each write arrives whole.
const WATCH: u8 = b'g';
const DISARM: u8 = b'd';

impl Guard {
    /// Fork the guard. Done early (before waiting for the lock, while distlock is small and has
    /// one thread), so that the fork costs little and is not on the path from acquiring the
    /// lock to starting the command.
    pub fn start() -> io::Result<Guard> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let read_fd = read.as_raw_fd();
        // SAFETY: after fork in a possibly multi-threaded process, the child makes only
        // async-signal-safe system calls (prctl, setsid, close_range, read, kill, _exit) on
        // values computed before the fork and a stack buffer; it allocates nothing and never
        // returns. All signals are blocked in this thread across the fork, so no handler of ours
        // runs in the child, which keeps them blocked for good; the parent restores its mask at
        // once.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
            let pid = libc::fork();
            if pid == 0 {
                guard_main(read_fd);
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

    /// Guard the process group `group` from now on.
    pub fn watch(&self, group: Pid) {
        let mut message = [WATCH; 5];
        message[1..].copy_from_slice(&group.as_raw().to_ne_bytes());
        self.send(&message);
    }

    /// distlock is done with the group (it is gone, or distlock stopped it itself): the guard
    /// exits without doing anything.
    pub fn disarm(&mut self) {
        self.send(&[DISARM]);
        self.pipe = None;
    }

    fn send(&self, message: &[u8]) {
        if let Some(pipe) = &self.pipe {
            // SAFETY: writing from a valid buffer to a descriptor we own.
            unsafe { libc::write(pipe.as_raw_fd(), message.as_ptr().cast(), message.len()) };
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
unsafe fn guard_main(pipe: libc::c_int) -> ! {
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
        let mut group: libc::pid_t = 0;
        let mut buf = [0u8; 16];
        let mut have = 0usize;
        loop {
            // Every signal is blocked, so the read cannot fail with EINTR.
            let n = libc::read(pipe, buf.as_mut_ptr().add(have).cast(), buf.len() - have);
            if n == 0 {
                // distlock died: the kernel closed its end of the pipe.
                if group > 1 {
                    libc::kill(-group, libc::SIGKILL);
                }
                libc::_exit(0);
            }
            if n < 0 {
                // A pipe we cannot reason about: do nothing rather than kill a healthy command.
                libc::_exit(1);
            }
            have += n as usize;
            loop {
                match buf[..have] {
                    [DISARM, ..] => libc::_exit(0),
                    [WATCH, a, b, c, d, ..] => {
                        group = libc::pid_t::from_ne_bytes([a, b, c, d]);
                        buf.copy_within(5..have, 0);
                        have -= 5;
                    }
                    [WATCH, ..] | [] => break,
                    _ => libc::_exit(1),
                }
            }
        }
    }
}
