//! Which signals distlock catches, and why: the process-wide signal policy (signals reach
//! distlock whether it waits for a lock or runs a command; the child only inherits the result,
//! see [`crate::child::spawn`]).
//!
//! # Signal policy
//!
//! * **INT, TERM, HUP, QUIT** (and USR1, USR2, whose default action would also kill distlock
//!   without releasing anything) are caught from the very start. While waiting for the lock they
//!   end the wait cleanly (nothing left in Redis; exit 128+N). While the child runs, each one that
//!   reaches distlock is forwarded once to the child's process group (a supervisor's USR1 "reopen
//!   your logs" reaches the command), and distlock goes on renewing until the child exits. When distlock handed the terminal to the child, the
//!   terminal's own Ctrl-C/Ctrl-\ go to the child's group only and never to distlock, so the
//!   child sees each keypress exactly once; when it did not (cron, CI, pipes), the child's group
//!   is not the terminal's, and distlock's forwarding is the only delivery.
//! * A signal that distlock inherited as *ignored* (e.g. HUP under `nohup`) stays ignored and is
//!   not caught, so the child inherits the same disposition (SIG_IGN survives exec, handlers do
//!   not).
//! * **CHLD** drives reaping. **TSTP** and **CONT** drive job control (see the supervisor).
//! * **TTOU** is ignored by distlock itself, so that taking the terminal back with `tcsetpgrp`
//!   from the background, or writing a warning while the child owns the terminal, can never stop
//!   distlock (and its renewals). The child gets TTOU back to its default in `pre_exec`.

use nix::sys::signal::{SigHandler, Signal};

use crate::backend::Cancel;
use crate::events::{Events, Sender};

/// Signals forwarded to the child (and that end a wait): INT, TERM, HUP, QUIT, USR1, USR2. The
/// set is defined beside the wait on a doorbell, which lets exactly these through (the backend
/// sits below this module).
pub const FORWARDED: [i32; 6] = crate::backend::WAIT_ENDERS;

/// Whether `signal` asks distlock to stop (forwarded while the child runs).
pub fn is_termination(signal: i32) -> bool {
    FORWARDED.contains(&signal)
}

/// A terminating signal already queued on `events`, if any (other events queued so far are
/// dropped).
pub fn take_termination(events: &mut Events) -> Option<i32> {
    events.take_signal(is_termination)
}

/// What the signal set-up found and did.
#[derive(Clone, Debug)]
pub struct Dispositions {
    /// The signals whose disposition the child must get back to SIG_DFL before it may unblock
    /// signals: every one distlock (or Rust's runtime) set a handler for, SIGTTOU if distlock
    /// set it to ignored, and SIGPIPE (ignored by Rust's runtime; children get it back at its
    /// default, as `std::process::Command` does). Signals distlock *inherited* as ignored are
    /// not in it: they stay ignored across exec, as they would without distlock.
    pub reset_in_child: Vec<libc::c_int>,
}

/// Start catching signals; each one becomes an [`crate::events::Event::Signal`] on `events`, and
/// a terminating one also raises `cancel`, so that a Redis call in progress stops waiting at once
/// (the main thread may be waiting for one when the signal comes).
pub fn install(events: &Sender, cancel: &Cancel) -> std::io::Result<Dispositions> {
    let mut caught: Vec<i32> = FORWARDED
        .iter()
        .copied()
        .filter(|&s| !is_ignored(s))
        .collect();
    caught.push(libc::SIGCHLD);
    caught.push(libc::SIGCONT);
    if !is_ignored(libc::SIGTSTP) {
        caught.push(libc::SIGTSTP);
    }
    let fd = events.raw_wake_fd();
    let mut reset_in_child = caught.clone();
    for signal in caught {
        let byte = u8::try_from(signal).unwrap_or(0);
        let flag = is_termination(signal).then(|| cancel.flag());
        // SAFETY: the action only stores to an atomic and calls write(2), both async-signal-safe,
        // on a pipe that lives as long as the process (the Sender holding it is never dropped
        // before exit); signal-hook-registry saves and restores errno around it.
        unsafe {
            signal_hook::low_level::register(signal, move || {
                if let Some(flag) = &flag {
                    flag.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                libc::write(fd, (&byte as *const u8).cast(), 1);
            })?;
        }
    }
    if !is_ignored(libc::SIGTTOU) {
        reset_in_child.push(libc::SIGTTOU);
    }
    // SAFETY: installing SIG_IGN runs no code of ours in signal context.
    unsafe { nix::sys::signal::signal(Signal::SIGTTOU, SigHandler::SigIgn) }
        .map_err(std::io::Error::from)?;
    // Rust's runtime: a stack-overflow handler on SEGV and BUS (unless they were ignored), and
    // SIGPIPE ignored.
    for signal in [libc::SIGSEGV, libc::SIGBUS, libc::SIGPIPE] {
        if disposition(signal).is_some_and(|d| d != libc::SIG_DFL)
            && (signal == libc::SIGPIPE || !is_ignored(signal))
        {
            reset_in_child.push(signal);
        }
    }
    Ok(Dispositions { reset_in_child })
}

/// The current disposition of `signal` (SIG_DFL, SIG_IGN or a handler's address).
fn disposition(signal: i32) -> Option<libc::sighandler_t> {
    // SAFETY: a zeroed sigaction is a valid out-parameter, and passing a null new action only
    // queries the current one.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(signal, std::ptr::null(), &mut old) == 0).then_some(old.sa_sigaction)
    }
}

/// Whether `signal` is currently ignored (SIG_IGN) in this process.
fn is_ignored(signal: i32) -> bool {
    disposition(signal) == Some(libc::SIG_IGN)
}

/// Die of `signal`, the way the child did, so that a calling shell sees a death by signal (and,
/// for INT, stops its loop). Falls back to `exit(128 + signal)` if the signal does not kill us.
pub fn die_of(signal: i32) -> ! {
    let core_dumping = matches!(
        signal,
        libc::SIGQUIT
            | libc::SIGILL
            | libc::SIGTRAP
            | libc::SIGABRT
            | libc::SIGBUS
            | libc::SIGFPE
            | libc::SIGSEGV
            | libc::SIGSYS
            | libc::SIGXCPU
            | libc::SIGXFSZ
    );
    if core_dumping {
        // The child's crash is not ours: do not leave a core file of distlock behind.
        let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
    }
    if let Ok(sig) = Signal::try_from(signal) {
        if !matches!(
            sig,
            Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU
        ) {
            // SAFETY: restoring the default disposition runs no code of ours in signal context.
            let _ = unsafe { nix::sys::signal::signal(sig, SigHandler::SigDfl) };
            let mut set = nix::sys::signal::SigSet::empty();
            set.add(sig);
            let _ = set.thread_unblock();
            let _ = nix::sys::signal::raise(sig);
        }
    }
    std::process::exit(i32::from(crate::exit::for_signal(signal)))
}
