//! `distlock acquire`: take a lock and print its token, for locks that span several steps.

use std::io::Write;

use crate::child::signals;
use crate::commands::take::take;
use crate::commands::{Exit, signal_name};
use crate::config::TakeConfig;
use crate::error::Error;
use crate::events;
use crate::exit;
use crate::lock::{Holder, Lock};
use crate::output::{self, Output};

/// Acquire, print the token on stdout (and nothing else there).
pub fn acquire(cfg: TakeConfig, out: &Output) -> Result<Exit, Error> {
    let (tx, mut rx) = events::channel()
        .map_err(|e| Error::Internal(format!("cannot create the event pipe: {e}")))?;
    signals::install(&tx)
        .map_err(|e| Error::Internal(format!("cannot install signal handlers: {e}")))?;
    // The lock belongs to whoever called us (a CI step's shell): name that process.
    let parent = nix::unistd::getppid().as_raw().unsigned_abs();
    let holder = Holder::this_process("acquire", parent, &cmdline(parent), cfg.note.as_deref());
    let (mut lock, lease) = match take(&cfg, &holder, (&tx, &mut rx), out)? {
        Ok(taken) => taken,
        Err(exit) => return Ok(exit),
    };
    let key = output::quote(cfg.name.key());
    // A signal that arrived while we took the lock, or a stdout nobody reads: nobody would ever
    // learn the token, so the lock must not stay behind.
    let interrupted = rx.take_termination();
    let printed = match interrupted {
        Some(_) => Ok(()),
        None => writeln!(std::io::stdout().lock(), "{}", lease.token.as_str()),
    };
    if interrupted.is_some() || printed.is_err() {
        let _ = lock.release(&lease.token);
        return match (interrupted, printed) {
            (Some(signal), _) => {
                out.error(format!(
                    "interrupted by {} just after acquiring lock {key}; it was released",
                    signal_name(signal)
                ));
                Ok(Exit::Signal(signal))
            }
            (None, Err(e)) => Err(Error::Internal(format!(
                "cannot print the token ({e}); lock {key} was released"
            ))),
            (None, Ok(())) => Ok(Exit::Code(exit::SOFTWARE)),
        };
    }
    out.verbose(format!(
        "lock {key} is held for {} unless renewed; release it with distlock release",
        output::duration(cfg.ttl)
    ));
    Ok(Exit::Code(exit::SUCCESS))
}

/// The command line of process `pid`, if readable.
fn cmdline(pid: u32) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| {
            bytes
                .split(|b| *b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| std::ffi::OsStr::from_bytes(w).to_owned())
                .collect()
        })
        .unwrap_or_default()
}
