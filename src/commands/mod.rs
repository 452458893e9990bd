//! The subcommands. Each reads its decided configuration and returns how distlock should exit.

pub mod acquire;
pub mod generate;
pub mod inspect;
pub mod reenter;
pub mod run;
pub mod take;
pub mod token;

/// How distlock ends.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// Exit with this code.
    Code(u8),
    /// Die of this signal (the child did, or we were interrupted).
    Signal(i32),
}

/// Warn about each node of a Redlock that failed while the others went on (once per run: the
/// lock hands each node out once).
pub fn warn_failed_nodes(lock: &mut dyn crate::lock::Lock, out: &crate::output::Output) {
    for failure in lock.take_failures() {
        out.warn(crate::output::Ev::NodeFailed, failure.warning());
    }
}

/// `SIGINT`, or `signal 42`.
pub fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned())
}
