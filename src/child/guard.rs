//! The guard: what kills the command's whole process group when distlock itself dies without
//! a chance to do it (SIGKILL, the OOM killer, a crash).
//!
//! PR_SET_PDEATHSIG kills only the direct child; the processes it started (the common case:
//! `sh -c '...'` runs the real work in a grandchild) would run on without the lock, and once the
//! lock expires, beside the next holder. So beside the command distlock starts a second,
//! minimal process — itself, re-executed as `distlock __guard PGID` — in a session of its own
//! (out of reach of the terminal and of signals to distlock's job), holding the read end of a
//! pipe whose only writer is distlock. When distlock is done it writes one byte ("disarmed") and
//! the guard exits. When distlock dies instead, the kernel closes the pipe, the guard reads
//! end-of-file, and sends SIGKILL to the command's process group.
//!
//! The group cannot be recycled under the guard: a process-group id stays taken while any
//! member lives, and a group with no members has nothing left to kill.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};

use nix::fcntl::OFlag;
use nix::unistd::Pid;

use super::spawn::{self, Role, SpawnSpec};

/// The argument that turns a distlock process into a guard (not a user-facing subcommand).
pub const ARG: &str = "__guard";

/// A running guard, armed until [`Guard::disarm`].
pub struct Guard {
    pipe: Option<OwnedFd>,
}

impl Guard {
    /// Start a guard for the process group `group`.
    pub fn start(group: Pid) -> io::Result<Guard> {
        let exe = std::fs::read_link("/proc/self/exe")?;
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let argv = [
            std::ffi::OsString::from("distlock"),
            ARG.into(),
            group.to_string().into(),
        ];
        spawn::spawn(SpawnSpec {
            program: &exe,
            argv: &argv,
            env: Vec::new(),
            role: Role::Guard {
                stdin: read.as_raw_fd(),
            },
        })
        .map_err(|e| io::Error::other(format!("{e:?}")))?;
        drop(read);
        Ok(Guard { pipe: Some(write) })
    }

    /// distlock is done with the group (it is gone, or is being killed by distlock itself):
    /// the guard exits without doing anything.
    pub fn disarm(&mut self) {
        if let Some(pipe) = self.pipe.take() {
            let _ = std::fs::File::from(pipe).write_all(b"d");
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

/// The guard process itself: `distlock __guard PGID`. Never returns.
pub fn run(args: &[std::ffi::OsString]) -> ! {
    // Only distlock starts guards; anything else is a misuse.
    let group = args
        .get(2)
        .and_then(|g| g.to_str())
        .and_then(|g| g.parse::<i32>().ok())
        .filter(|g| *g > 1);
    let Some(group) = group else {
        std::process::exit(i32::from(crate::exit::USAGE));
    };
    // Deaf to everything but SIGKILL: a Ctrl-C or `pkill distlock` must not disarm the guard.
    for signal in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGHUP,
        nix::sys::signal::Signal::SIGQUIT,
        nix::sys::signal::Signal::SIGUSR1,
        nix::sys::signal::Signal::SIGUSR2,
        nix::sys::signal::Signal::SIGPIPE,
        nix::sys::signal::Signal::SIGTSTP,
        nix::sys::signal::Signal::SIGTTIN,
        nix::sys::signal::Signal::SIGTTOU,
    ] {
        // SAFETY: installing SIG_IGN runs no code in signal context.
        let _ = unsafe { nix::sys::signal::signal(signal, nix::sys::signal::SigHandler::SigIgn) };
    }
    let mut byte = [0u8; 1];
    let disarmed = loop {
        match io::stdin().lock().read(&mut byte) {
            Ok(0) => break false,
            Ok(_) => break true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break false,
        }
    };
    if !disarmed {
        let _ = nix::sys::signal::killpg(Pid::from_raw(group), nix::sys::signal::Signal::SIGKILL);
    }
    std::process::exit(0)
}
