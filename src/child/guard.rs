//! The guard: what kills the command's whole process group when distlock itself dies without
//! a chance to do it (SIGKILL, a crash).
//!
//! PR_SET_PDEATHSIG kills only the direct child; the processes it started (the common case:
//! `sh -c '...'` runs the real work in a grandchild) would run on without the lock, and once the
//! lock expires, beside the next holder. So beside the command distlock starts a minimal process,
//! the guard, in a session of its own (out of reach of the terminal and of signals to
//! distlock's job), with every signal blocked, holding the read end of a pipe whose only writer
//! is distlock. distlock tells it the command's process group as soon as the command exists;
//! when distlock is done it writes "disarmed" and the guard exits. When distlock dies instead,
//! the kernel closes the pipe, the guard reads end-of-file, and sends SIGKILL to the group.
//! The command names its own group to the guard, between clone and exec (see
//! [`super::spawn`]): the guard knows the group before the command runs its first instruction.
//! (When distlock sent that message after the spawn, a loaded machine could run the command
//! for milliseconds before distlock was scheduled again; a distlock SIGKILLed then left the
//! command's background processes running, which the test suite caught under load.)
//!
//! How it is started matters, because every `distlock run` pays for it: re-executing distlock
//! as the guard cost about 0.7 ms of CPU; a `fork()` cost a page-table copy and then a
//! copy-on-write fault for every page distlock wrote afterwards (224 page faults per run
//! instead of 174; 1.57x flock instead of 1.46x). So the guard is a `clone(CLONE_VM)`: a
//! process of its own (its own pid, session, fd table and signal mask) that shares distlock's
//! memory, like a thread that is not one. It runs on a small stack of its own, touches no
//! memory but that stack, and makes its few system calls directly (`syscall` instruction), so
//! that it never touches libc's thread-local state (errno) — which it shares with distlock's
//! main thread. Measured: 162 page faults per run, 1.41x flock. When distlock dies, the guard
//! keeps the address space alive for the microseconds it needs.
//!
//! The group cannot be recycled under the guard: a process-group id stays taken while any
//! member lives, and a group with no members has nothing left to kill.
//!
//! Limits. Sharing distlock's memory has one cost: the OOM killer kills every process that
//! shares its victim's memory, so a distlock chosen by the OOM killer takes its guard along
//! (the command itself still dies of PR_SET_PDEATHSIG; its own children do not). A guard
//! killed on its own (`pkill distlock` matches `distlock-guard`) is reaped by distlock, which
//! starts another (see `supervise`); both killed within the same moment leave the command's
//! children to themselves.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::fcntl::OFlag;
use nix::unistd::Pid;

/// The guard's process name (what `ps` and /proc/PID/comm show).
pub const NAME: &[u8] = b"distlock-guard\0";

/// A running guard. It learns the group to guard from the command itself (see
/// [`Guard::pipe_fd`]), and exits quietly after
/// [`Guard::disarm`] (or when distlock dies before anything was watched).
pub struct Guard {
    pipe: Option<OwnedFd>,
    pid: Pid,
}

/// Messages on the pipe: `g` and the group as 4 native-endian bytes ("guard this group"), or
/// `d` ("disarmed"). Both are shorter than PIPE_BUF, so each write arrives whole.
const WATCH: u8 = b'g';
const DISARM: u8 = b'd';

/// The message "guard the group `group`", as the guard reads it.
pub fn watch_message(group: libc::pid_t) -> [u8; 5] {
    let mut message = [WATCH; 5];
    message[1..].copy_from_slice(&group.to_ne_bytes());
    message
}

impl Guard {
    /// Start the guard. Done early (before waiting for the lock), so that it is not on the path
    /// from acquiring the lock to starting the command.
    pub fn start() -> io::Result<Guard> {
        Guard::launch(None)
    }

    /// Start a guard that guards `group` from its first instruction: the message naming the
    /// group is in its pipe before it exists, so that a distlock killed right after it started
    /// (a replacement for a guard that was killed) cannot leave it guarding nothing.
    pub fn start_watching(group: Pid) -> io::Result<Guard> {
        Guard::launch(Some(group))
    }

    fn launch(group: Option<Pid>) -> io::Result<Guard> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let read_fd = read.as_raw_fd();
        if let Some(group) = group {
            nix::unistd::write(&write, &watch_message(group.as_raw()))?;
        }
        // The guard's stack: never freed (the guard may outlive this process's use of it),
        // never zeroed (pages are touched only as the guard uses them, about one).
        let stack: &'static mut [std::mem::MaybeUninit<u128>] =
            Box::leak(Box::new_uninit_slice(GUARD_STACK_BYTES / 16));
        // SAFETY: the stack is 16-byte aligned, 16 KiB, leaked (so valid for the guard's whole
        // life), and grows down from its end. `guard_entry` touches only that stack and makes
        // raw system calls: it never reads or writes distlock's memory or libc's state, which
        // it shares (CLONE_VM). All signals are blocked in this thread across the clone, so the
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
                read_fd as isize as *mut libc::c_void,
            );
            let clone_error = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
            if pid < 0 {
                return Err(clone_error);
            }
            pid
        };
        drop(read);
        Ok(Guard {
            pipe: Some(write),
            pid: Pid::from_raw(pid),
        })
    }

    /// The guard's pid (it is distlock's child: its death is reaped by the supervisor, which
    /// then starts another, see [`crate::child::supervise`]).
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The write end of the guard's pipe, for a child to name its own group on (it is
    /// close-on-exec: the command never holds it). None once disarmed.
    pub fn pipe_fd(&self) -> Option<std::os::fd::RawFd> {
        self.pipe.as_ref().map(AsRawFd::as_raw_fd)
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

/// The guard's stack.
const GUARD_STACK_BYTES: usize = 16 * 1024;

/// The guard process. `arg` is the read end of the pipe (a small integer in a pointer). Never
/// returns.
///
/// It shares distlock's memory and thread-local storage, so it must not call libc (errno), must
/// not allocate, and must not panic (the panic machinery uses thread-local state): every step
/// below is a raw system call or arithmetic on its own stack, with indexes kept in bounds by
/// construction.
extern "C" fn guard_entry(arg: *mut libc::c_void) -> libc::c_int {
    let pipe = arg as isize as libc::c_int;
    // SAFETY: raw system calls with integer arguments and pointers into this stack frame.
    unsafe {
        syscall3(
            libc::SYS_prctl,
            libc::PR_SET_NAME as usize,
            NAME.as_ptr() as usize,
            0,
        );
        // Out of distlock's job: no terminal signals, no signals sent to distlock's group.
        syscall3(libc::SYS_setsid, 0, 0, 0);
        // Hold nothing of distlock's but the pipe (its fd table is a copy): not the pipe's write
        // end (or end-of-file would never come), not the pipes of a shell pipeline that waits
        // for end-of-file, not its stdio.
        if pipe > 0 {
            syscall3(libc::SYS_close_range, 0, (pipe - 1) as usize, 0);
        }
        syscall3(
            libc::SYS_close_range,
            (pipe + 1) as usize,
            u32::MAX as usize,
            0,
        );
        let mut group: i32 = 0;
        let mut buf = [0u8; 16];
        let mut have = 0usize;
        loop {
            // Every signal is blocked, so the read cannot fail with EINTR.
            let room = buf.len() - have;
            let n = syscall3(
                libc::SYS_read,
                pipe as usize,
                buf.as_mut_ptr().add(have) as usize,
                room,
            );
            if n == 0 {
                // distlock died: the kernel closed its end of the pipe.
                if group > 1 {
                    syscall3(
                        libc::SYS_kill,
                        (-group) as isize as usize,
                        libc::SIGKILL as usize,
                        0,
                    );
                }
                exit(0);
            }
            if n < 0 || n as usize > room {
                // A pipe we cannot reason about: do nothing rather than kill a healthy command.
                exit(1);
            }
            have += n as usize;
            // Messages: DISARM, or WATCH and four bytes.
            while have > 0 {
                if buf[0] == DISARM {
                    exit(0);
                }
                if buf[0] != WATCH {
                    exit(1);
                }
                if have < 5 {
                    break;
                }
                group = i32::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]);
                let mut i = 5;
                while i < have {
                    buf[i - 5] = buf[i];
                    i += 1;
                }
                have -= 5;
            }
        }
    }
}

/// End the guard.
fn exit(code: usize) -> ! {
    // SAFETY: exit_group ends this process (the guard is a thread group of its own).
    unsafe {
        syscall3(libc::SYS_exit_group, code, 0, 0);
    }
    // exit_group does not return; spin rather than reach for anything that could unwind.
    #[allow(clippy::empty_loop)]
    loop {}
}

/// A system call with up to three arguments, without libc (no errno).
///
/// # Safety
/// The arguments must be valid for system call `number`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn syscall3(number: libc::c_long, a: usize, b: usize, c: usize) -> isize {
    let ret: isize;
    // SAFETY: the Linux x86_64 system call convention; rcx and r11 are clobbered.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") number as isize => ret,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// A system call with up to three arguments, without libc (no errno).
///
/// # Safety
/// The arguments must be valid for system call `number`.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
unsafe fn syscall3(number: libc::c_long, a: usize, b: usize, c: usize) -> isize {
    let ret: isize;
    // SAFETY: the Linux aarch64 system call convention (number in x8, result in x0).
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") number,
            inlateout("x0") a as isize => ret,
            in("x1") b,
            in("x2") c,
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

    use nix::sys::signal::Signal;
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};

    use super::*;
    use crate::child::spawn::{SpawnSpec, resolve, spawn};

    impl Guard {
        /// What distlock's death does to the guard: its end of the pipe closes, unannounced.
        fn orphan(&mut self) {
            self.pipe = None;
        }
    }

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

    /// The guard knows the command's group from the command itself, before distlock says
    /// anything: when distlock dies the moment the command has started (here: its pipe end is
    /// closed right after the spawn, no message sent), the whole group dies, background
    /// processes included.
    #[test]
    fn the_guard_knows_the_group_before_distlock_speaks() {
        let mut guard = Guard::start().unwrap();
        let sh = resolve(std::ffi::OsStr::new("sh")).unwrap();
        let argv: Vec<OsString> = ["sh", "-c", "sleep 30 & wait"]
            .iter()
            .map(OsString::from)
            .collect();
        let group = spawn(SpawnSpec {
            program: &sh,
            argv: &argv,
            env: vec![],
            take_terminal: false,
            reset_signals: &[],
            guard: guard.pipe_fd(),
        })
        .unwrap();
        guard.orphan();
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            match waitpid(group, Some(WaitPidFlag::WNOHANG)).unwrap() {
                WaitStatus::StillAlive if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                WaitStatus::StillAlive => {
                    let _ = nix::sys::signal::killpg(group, Signal::SIGKILL);
                    panic!("the guard did not kill the command's group");
                }
                other => break other,
            }
        };
        assert_eq!(status, WaitStatus::Signaled(group, Signal::SIGKILL, false));
        while group_alive(group.as_raw()) {
            assert!(
                Instant::now() < deadline,
                "the command's background process outlived the guard's kill"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = waitpid(guard.pid(), None);
    }

    /// A guard that died before the spawn (its pipe has no reader) does not take the command
    /// down with it: the SIGPIPE of the child's message is taken back before exec.
    #[test]
    fn a_dead_guard_does_not_kill_the_command() {
        let guard = Guard::start().unwrap();
        nix::sys::signal::kill(guard.pid(), Signal::SIGKILL).unwrap();
        let _ = waitpid(guard.pid(), None);
        let sh = resolve(std::ffi::OsStr::new("sh")).unwrap();
        let argv: Vec<OsString> = ["sh", "-c", "exit 7"].iter().map(OsString::from).collect();
        let pid = spawn(SpawnSpec {
            program: &sh,
            argv: &argv,
            env: vec![],
            take_terminal: false,
            reset_signals: &[libc::SIGPIPE],
            guard: guard.pipe_fd(),
        })
        .unwrap();
        assert_eq!(waitpid(pid, None).unwrap(), WaitStatus::Exited(pid, 7));
    }
}
