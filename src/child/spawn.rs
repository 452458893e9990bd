//! Starting the child: directly (no shell), in a process group of its own, tied to distlock's
//! life, and (when distlock owns the terminal) in the terminal's foreground.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

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
    /// Extra environment variables (each replaces an inherited one of its name).
    pub env: Vec<(String, String)>,
    /// Inherited environment variables the child must not see (a lock set's command must not
    /// read an outer run's `DISTLOCK_KEY` as its own).
    pub unset: &'a [&'a str],
    /// Make the child's group the terminal's foreground group before it can touch the terminal.
    pub take_terminal: bool,
    /// Signals to put back to SIG_DFL in the child before it unblocks signals (see
    /// [`crate::signals::Dispositions::reset_in_child`]).
    pub reset_signals: &'a [libc::c_int],
    /// The guard's group slot (see [`super::guard::Guard::group_slot`]): the child names its
    /// group there before exec, so that the guard knows the group before the command runs.
    pub guard: Option<&'static std::sync::atomic::AtomicI32>,
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
            crate::text::quote_os(program)
        )));
    }
    which::which(program).map_err(|_| {
        SpawnError::NotFound(format!(
            "command not found: {} (not in PATH)",
            crate::text::quote_os(program)
        ))
    })
}

/// Start the child and return its pid, which is also its process-group id.
///
/// Must be called from the main thread: PR_SET_PDEATHSIG fires when the *thread* that created
/// the child exits, and only the main thread lives as long as the child.
///
/// # Why not `std::process::Command`
///
/// The child must set PR_SET_PDEATHSIG itself, so std needs a `pre_exec` hook, and with one it
/// can only `fork()`: the whole address space is copied (and, with a second thread alive, TLB
/// shoot-downs sent to other CPUs) only to be thrown away by `exec` a moment later. Measured here,
/// that made `spawn` take 0.3-1.3 ms, more than the rest of a hand-off. So this does what
/// glibc's `posix_spawn` does: `clone(CLONE_VM | CLONE_VFORK)`, a child that runs a few
/// async-signal-safe system calls on a small stack of its own while the parent is suspended, then
/// `execve`. Everything the child needs (C strings, pointer arrays) is prepared beforehand; the
/// child allocates nothing, takes no lock, and writes only its own stack and the `errno` slot.
pub fn spawn(spec: SpawnSpec<'_>) -> Result<Pid, SpawnError> {
    let Some(name) = spec.argv.first() else {
        return Err(SpawnError::NotFound("no command given".into()));
    };
    let nul = |what: &str| {
        SpawnError::CannotExecute(format!(
            "cannot execute {}: its {what} contains a NUL byte",
            crate::text::quote_os(name)
        ))
    };
    let path = CString::new(spec.program.as_os_str().as_bytes()).map_err(|_| nul("path"))?;
    let argv: Vec<CString> = spec
        .argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| nul("arguments"))?;
    // A script without #! runs with /bin/sh, as execvp (and every shell) does.
    let sh_argv: Vec<&CStr> = [c"sh", path.as_c_str()]
        .into_iter()
        .chain(argv.iter().skip(1).map(CString::as_c_str))
        .collect();
    let ours: Vec<&str> = (spec.env.iter().map(|(k, _)| k.as_str()))
        .chain(spec.unset.iter().copied())
        .collect();
    let mut env: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| !ours.iter().any(|o| k == *o))
        .filter_map(|(k, v)| {
            let mut entry = k.into_vec();
            entry.push(b'=');
            entry.extend(v.into_vec());
            CString::new(entry).ok()
        })
        .collect();
    for (k, v) in &spec.env {
        env.push(CString::new(format!("{k}={v}")).map_err(|_| nul("environment"))?);
    }
    let argv_ptrs = null_terminated(argv.iter().map(CString::as_c_str));
    let sh_argv_ptrs = null_terminated(sh_argv.iter().copied());
    let env_ptrs = null_terminated(env.iter().map(CString::as_c_str));

    let mut args = ChildArgs {
        path: path.as_ptr(),
        argv: argv_ptrs.as_ptr(),
        sh_argv: sh_argv_ptrs.as_ptr(),
        envp: env_ptrs.as_ptr(),
        parent: nix::unistd::getpid().as_raw(),
        take_terminal: spec.take_terminal,
        reset_signals: spec.reset_signals.as_ptr(),
        reset_count: spec.reset_signals.len(),
        guard: spec.guard.map_or(std::ptr::null(), std::ptr::from_ref),
        errno: 0,
    };
    // Not zeroed: the child touches only the top page or two.
    let mut stack = Box::<[std::mem::MaybeUninit<u128>]>::new_uninit_slice(CHILD_STACK_BYTES / 16);
    // SAFETY: the stack grows down from the end of `stack`, which is 16-byte aligned (u128)
    // and outlives the child's use of it: CLONE_VFORK suspends us until the child has exec'd
    // or exited. `args` and every pointer in it stay valid for the same reason. All signals are
    // blocked in this thread around the clone, so no handler of ours can run in the child
    // before it has reset them; the previous mask is restored right after.
    let pid = unsafe {
        let stack_top = stack.as_mut_ptr().add(stack.len()).cast::<libc::c_void>();
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
        let pid = libc::clone(
            child_main,
            stack_top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut args).cast::<libc::c_void>(),
        );
        let clone_error = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        if pid < 0 {
            return Err(classify(name, clone_error));
        }
        pid
    };
    drop(stack);
    // SAFETY: the child is gone or has exec'd (CLONE_VFORK), so nothing else writes `errno`.
    let errno = unsafe { std::ptr::read_volatile(&raw const args.errno) };
    if errno != 0 {
        // The child could not exec and has exited: reap it, and report why.
        let _ = nix::sys::wait::waitpid(Pid::from_raw(pid), None);
        return Err(classify(name, std::io::Error::from_raw_os_error(errno)));
    }
    Ok(Pid::from_raw(pid))
}

/// The child's stack: it makes a handful of system calls and nothing else.
const CHILD_STACK_BYTES: usize = 64 * 1024;

/// What the child needs, prepared by the parent (the child may not allocate).
struct ChildArgs {
    path: *const libc::c_char,
    argv: *const *const libc::c_char,
    sh_argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    parent: libc::pid_t,
    take_terminal: bool,
    reset_signals: *const libc::c_int,
    reset_count: usize,
    /// The guard's group slot, or null.
    guard: *const std::sync::atomic::AtomicI32,
    /// Set by the child when it cannot exec (why, as an errno).
    errno: libc::c_int,
}

fn null_terminated<'a>(items: impl Iterator<Item = &'a CStr>) -> Vec<*const libc::c_char> {
    items
        .map(CStr::as_ptr)
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The child, between clone and exec. It shares the parent's memory (CLONE_VM) while the parent
/// is suspended, so it may only make async-signal-safe system calls, must not allocate or
/// unwind, and writes nothing but its own stack, `args.errno` and the guard's group slot (an
/// atomic). It has its own copy of the signal dispositions (no CLONE_SIGHAND), so resetting them
/// does not touch the parent's.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points to the parent's ChildArgs, alive until we exec or exit (CLONE_VFORK);
    // every call below is an async-signal-safe wrapper around one system call, or an atomic
    // store into the guard's mailbox (leaked: valid for the process's life); none of the pointers
    // passed is null except where the call allows it; `reset_signals` points to `reset_count`
    // signal numbers owned by the (suspended) parent.
    unsafe {
        let args = arg.cast::<ChildArgs>();
        // distlock's handlers write to its event pipe and must never run here: back to default
        // for every signal distlock handles (ignored ones stay ignored, as they would across
        // exec), SIGTTOU (ignored by distlock itself) and SIGPIPE, as std does for every child.
        // The list was made once at start-up: querying all 64 dispositions here cost ~30us on
        // the way from acquiring the lock to starting the command.
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        for i in 0..(*args).reset_count {
            libc::sigaction(
                *(*args).reset_signals.add(i),
                &default,
                std::ptr::null_mut(),
            );
        }
        // A process group of its own, so that distlock can signal the whole tree.
        if libc::setpgid(0, 0) != 0 {
            return fail(args);
        }
        // Name the group to the guard now, not after exec: from here on, a distlock killed at
        // any moment leaves no process of the command behind. An atomic store into the memory
        // the guard shares with distlock (and this side of the vfork): it wakes nobody, where a
        // message on the guard's pipe woke the guard to preempt this exec on a busy machine.
        // (A guard that died meanwhile reads nothing; distlock starts another, with the group.)
        if let Some(slot) = (*args).guard.as_ref() {
            slot.store(libc::getpid(), std::sync::atomic::Ordering::Release);
        }
        // Die with distlock, even when distlock is SIGKILLed...
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            return fail(args);
        }
        // ...including when it died before the line above ran (the rest of the group is the
        // guard's business; see super::guard).
        if libc::getppid() != (*args).parent {
            libc::_exit(127);
        }
        // Take the terminal before exec, so that the program can never read it as a
        // background job. SIGTTOU is still ignored here (unless restored above, in which case
        // it is blocked: every signal is blocked until the mask is cleared below).
        if (*args).take_terminal {
            libc::tcsetpgrp(0, libc::getpid());
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve((*args).path, (*args).argv, (*args).envp);
        if *libc::__errno_location() == libc::ENOEXEC {
            libc::execve(c"/bin/sh".as_ptr(), (*args).sh_argv, (*args).envp);
            *libc::__errno_location() = libc::ENOEXEC;
        }
        fail(args)
    }
}

/// Record errno for the parent and exit.
///
/// # Safety
/// `args` must point to the parent's live ChildArgs (see `child_main`).
unsafe fn fail(args: *mut ChildArgs) -> libc::c_int {
    // SAFETY: see the function's contract; errno is this (shared) thread's errno slot, read
    // just after the failed call.
    unsafe {
        std::ptr::write_volatile(&raw mut (*args).errno, (*libc::__errno_location()).max(1));
        libc::_exit(127)
    }
}

fn classify(program: &OsString, err: io::Error) -> SpawnError {
    let name = crate::text::quote_os(program);
    match err.kind() {
        io::ErrorKind::NotFound => SpawnError::NotFound(format!("command not found: {name}")),
        io::ErrorKind::PermissionDenied => SpawnError::CannotExecute(format!(
            "cannot execute {name}: permission denied (is it executable, and not a directory?)"
        )),
        _ => SpawnError::CannotExecute(format!("cannot execute {name}: {err}")),
    }
}
