//! Starting the child: directly (no shell), in a process group of its own, tied to distlock's
//! life, and (when distlock owns the terminal) in the terminal's foreground.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::unistd::Pid;

/// Why the child could not be started.
#[derive(Debug)]
pub enum SpawnError {
    /// No such command (exit 127).
    NotFound(String),
    /// Found but not executable, or the system refused to run it (exit 126).
    CannotExecute(String),
}

/// How to start the child.
pub struct SpawnSpec<'a> {
    /// The program, as found by [`resolve`].
    pub program: &'a Path,
    /// The command and its arguments (`argv[0]` is passed as typed).
    pub argv: &'a [OsString],
    /// Extra environment variables.
    pub env: Vec<(&'static str, String)>,
    /// Make the child's group the terminal's foreground group before it can touch the terminal.
    pub take_terminal: bool,
    /// Give the child SIGTTOU at its default (distlock itself ignores it).
    pub restore_ttou: bool,
}

/// Find the command before anything else happens, so that a typo costs neither a Redis round
/// trip nor a wait for the lock, and so that exec needs no PATH search later. A name with a
/// slash is used as it is (exec reports the precise error if it cannot run it).
pub fn resolve(program: &OsStr) -> Result<PathBuf, SpawnError> {
    let path = Path::new(program);
    if path.components().count() > 1 || program.as_bytes().contains(&b'/') {
        if path.exists() {
            return Ok(path.to_path_buf());
        }
        return Err(SpawnError::NotFound(format!(
            "{}: no such file",
            crate::output::quote_os(program)
        )));
    }
    which::which(program).map_err(|_| {
        SpawnError::NotFound(format!(
            "command not found: {} (not in PATH)",
            crate::output::quote_os(program)
        ))
    })
}

/// Start the child and return its pid, which is also its process-group id.
///
/// Must be called from the main thread: PR_SET_PDEATHSIG fires when the *thread* that forked
/// the child exits, and only the main thread lives as long as the child.
pub fn spawn(spec: SpawnSpec<'_>) -> Result<Pid, SpawnError> {
    let (name, args) = match spec.argv.split_first() {
        Some(split) => split,
        None => return Err(SpawnError::NotFound("no command given".into())),
    };
    let mut command = Command::new(spec.program);
    command
        .arg0(name)
        .args(args)
        .envs(spec.env)
        .process_group(0);
    let parent = nix::unistd::getpid().as_raw();
    let take_terminal = spec.take_terminal;
    let restore_ttou = spec.restore_ttou;
    // SAFETY: the closure runs in the forked child before exec and makes only async-signal-safe
    // system calls (sigprocmask, prctl, getppid, raise, tcsetpgrp, getpid, signal); it allocates
    // nothing and takes no locks.
    unsafe {
        command.pre_exec(move || {
            // std hands the parent's signal mask to the child: start it with none blocked.
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            // Die with distlock, even when distlock is SIGKILLed...
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // ...including when it died before the line above ran.
            if libc::getppid() != parent {
                libc::raise(libc::SIGKILL);
            }
            // setpgid already ran (process_group(0)); take the terminal before exec so the
            // program can never read it as a background job. SIGTTOU is still ignored here.
            if take_terminal {
                libc::tcsetpgrp(0, libc::getpid());
            }
            if restore_ttou {
                libc::signal(libc::SIGTTOU, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    match command.spawn() {
        Ok(child) => {
            let pid = child.id();
            // `Child` neither waits nor kills on drop; distlock reaps with waitpid itself.
            drop(child);
            i32::try_from(pid)
                .map(Pid::from_raw)
                .map_err(|_| SpawnError::CannotExecute(format!("impossible pid {pid}")))
        }
        Err(e) => Err(classify(name, e)),
    }
}

fn classify(program: &OsString, err: io::Error) -> SpawnError {
    let name = crate::output::quote_os(program);
    match err.kind() {
        io::ErrorKind::NotFound => SpawnError::NotFound(format!("command not found: {name}")),
        io::ErrorKind::PermissionDenied => SpawnError::CannotExecute(format!(
            "cannot execute {name}: permission denied (is it executable, and not a directory?)"
        )),
        _ => SpawnError::CannotExecute(format!("cannot execute {name}: {err}")),
    }
}
