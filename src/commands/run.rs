//! `distlock run`: THE pipeline, top to bottom.
//!
//! ```text
//! signals -> check command -> connect -> wait::acquire -> spawn child -> renew thread
//!         -> supervise (signals, reaping, kill deadlines) -> release (always, bounded) -> exit
//! ```

use std::time::Instant;

use nix::unistd::Pid;

use crate::child::guard::Guard;
use crate::child::signals::{self, Dispositions};
use crate::child::spawn::{self, SpawnSpec};
use crate::child::supervise::{Ending, Loss, Supervisor};
use crate::child::terminal::Terminal;
use crate::commands::take::take;
use crate::commands::{Exit, signal_name};
use crate::config::RunConfig;
use crate::error::Error;
use crate::events::{self, Events};
use crate::exit;
use crate::lock::{Holder, Lease, Lock, Ownership, SingleNode, Token};
use crate::output::{self, Output};
use crate::renew::{RenewSpec, Renewer};

/// Run the pipeline.
pub fn run(cfg: RunConfig, out: &Output) -> Result<Exit, Error> {
    // Signals first: from here on, INT/TERM/HUP/QUIT are events, not deaths.
    let (tx, mut rx) = events::channel()
        .map_err(|e| Error::Internal(format!("cannot create the event pipe: {e}")))?;
    let dispositions = signals::install(&tx)
        .map_err(|e| Error::Internal(format!("cannot install signal handlers: {e}")))?;
    let mut prepared = Prepared {
        // A missing command costs neither a Redis round trip nor a wait.
        program: spawn::resolve(&cfg.argv[0])?,
        dispositions,
        // The guard that kills the command's group if distlock dies: forked now, while
        // distlock is small and single-threaded, rather than on the path from acquiring the
        // lock to starting the command.
        guard: match Guard::start() {
            Ok(guard) => Some(guard),
            Err(e) => {
                out.warn(format!(
                    "cannot start the guard process ({e}); if distlock is killed, processes started by the command would survive it"
                ));
                None
            }
        },
    };

    let holder = Holder::this_process(
        "run",
        std::process::id(),
        &cfg.argv,
        cfg.take.note.as_deref(),
    );
    let (mut lock, lease) = match take(&cfg.take, &holder, (&tx, &mut rx), out)? {
        Ok(taken) => taken,
        Err(exit) => return Ok(exit),
    };
    let key = output::quote(cfg.take.name.key());
    // From here the lock is ours: every path below releases it, except a loss, where the key
    // is left alone because it may be someone else's by now.
    let outcome = match rx.take_termination() {
        // A termination signal arrived while we took the lock: do not start the command.
        Some(signal) => Ok(Started::Interrupted(signal)),
        None => run_locked(&cfg, &mut prepared, &lock, &lease, (&tx, &mut rx), out),
    };
    let (exit, last_ok) = match outcome {
        Err(e) => {
            release(&mut lock, &lease.token, &cfg, out);
            return Err(e);
        }
        Ok(Started::Interrupted(signal)) => {
            release(&mut lock, &lease.token, &cfg, out);
            out.error(format!(
                "interrupted by {} just after acquiring lock {key}; the command was not started and the lock was released",
                signal_name(signal)
            ));
            return Ok(Exit::Signal(signal));
        }
        Ok(Started::Ended(Ending::Lost(loss), _)) => {
            out.error(format!(
                "lost lock {key} while the command ran ({}); the command's process group was terminated",
                describe_loss(&loss, &cfg)
            ));
            return Ok(Exit::Code(exit::LOCK_LOST));
        }
        Ok(Started::Ended(Ending::Signaled(signal), last_ok)) => (Exit::Signal(signal), last_ok),
        Ok(Started::Ended(Ending::Exited(code), last_ok)) => (
            Exit::Code(u8::try_from(code).unwrap_or(exit::SOFTWARE)),
            last_ok,
        ),
    };
    if release(&mut lock, &lease.token, &cfg, out) == Some(Ownership::NotHeld) {
        // The lock cannot have expired before kill_at(last_ok). An answer that came before that
        // means the key was deleted or overwritten (an operator, or Redis lost its data) while it
        // was ours: the command may have run without the lock, so do not report its success.
        // A later answer is explained by expiry during a slow release (Redis paused or away at
        // the end), after the command, and everything it started, had finished under the lock.
        if Instant::now() < cfg.deadlines.kill_at(last_ok) {
            out.error(format!(
                "lock {key} was no longer held when the command ended ({}); the key was deleted \
                 or overwritten meanwhile, so the command may not have run exclusively",
                describe_exit(&exit)
            ));
            return Ok(Exit::Code(exit::LOCK_LOST));
        }
        out.warn(format!(
            "lock {key} had expired by the time Redis answered the release (the command ended \
             while it was held)"
        ));
    }
    // The group is gone: the guard can go (after the release, which is on the hand-off path).
    drop(prepared);
    Ok(exit)
}

/// What is ready before the lock is taken.
struct Prepared {
    /// The command's path.
    program: std::path::PathBuf,
    /// Signal dispositions found at start-up.
    dispositions: Dispositions,
    /// The guard (None if it could not be started).
    guard: Option<Guard>,
}

/// What happened after the lock was acquired.
enum Started {
    /// The child ran; this is how it ended.
    Ended(Ending, Instant),
    /// A signal arrived before the child was started.
    Interrupted(i32),
}

/// Spawn the child, start the renewer, and supervise the child while the lock is held.
fn run_locked(
    cfg: &RunConfig,
    prepared: &mut Prepared,
    lock: &SingleNode,
    lease: &Lease,
    (tx, rx): (&events::Sender, &mut Events),
    out: &Output,
) -> Result<Started, Error> {
    crate::child::become_subreaper();
    let terminal = Terminal::detect();
    // The renewer thread is started by the supervisor when the first renewal comes near.
    let group: Pid = spawn::spawn(SpawnSpec {
        program: &prepared.program,
        argv: &cfg.argv,
        env: vec![
            ("DISTLOCK_KEY", cfg.take.name.key().to_owned()),
            ("DISTLOCK_TOKEN", lease.token.as_str().to_owned()),
            ("DISTLOCK_TTL_MS", cfg.take.ttl.as_millis().to_string()),
        ],
        take_terminal: terminal.is_some(),
        reset_signals: &prepared.dispositions.reset_in_child,
    })?;
    if let Some(terminal) = &terminal {
        // Again from the parent, like shells do: the hand-off is done whichever side runs first.
        terminal.give_to(group);
    }
    // If distlock dies without stopping the group itself, the guard does.
    if let Some(guard) = &prepared.guard {
        guard.watch(group);
    }
    let renewer = Renewer::new(RenewSpec {
        lock: lock.fresh(renewal_timeout(cfg)),
        token: lease.token.clone(),
        ttl: cfg.take.ttl,
        every: cfg.renew_every,
        last_ok: lease.since,
        events: tx.clone(),
    });
    out.verbose(format!(
        "started {} (process group {group})",
        output::quote_os(&cfg.argv[0])
    ));
    let supervised = Supervisor {
        group,
        terminal,
        deadlines: cfg.deadlines,
        kill_signal: cfg.kill_signal,
        acquired: lease.since,
        renewer,
        guard: &mut prepared.guard,
        out,
    }
    .run(rx);
    let (ending, last_ok) = supervised;
    Ok(Started::Ended(ending, last_ok))
}

/// Release the lock, bounded by the Redis timeout; a failure is a warning (the key expires by
/// itself). Returns what the release found, if it got an answer.
fn release(
    lock: &mut SingleNode,
    token: &Token,
    cfg: &RunConfig,
    out: &Output,
) -> Option<Ownership> {
    let key = output::quote(cfg.take.name.key());
    match lock.release(token) {
        Ok(ownership) => {
            out.verbose(format!("released lock {key}"));
            Some(ownership)
        }
        Err(e) => {
            out.warn(format!(
                "cannot release lock {key} ({e}); it expires by itself within {}",
                output::duration(cfg.take.ttl)
            ));
            None
        }
    }
}

/// The renewer's Redis timeout: short enough to leave room for retries before the kill signal.
fn renewal_timeout(cfg: &RunConfig) -> std::time::Duration {
    let window = cfg
        .deadlines
        .retry_window(cfg.renew_every)
        .unwrap_or(cfg.renew_every);
    cfg.take
        .connector
        .timeout()
        .min(window / 2)
        .max(std::time::Duration::from_millis(10))
}

fn describe_loss(loss: &Loss, cfg: &RunConfig) -> String {
    match loss {
        Loss::NotHeld => {
            "the key was deleted, overwritten or had expired; another process may hold it now"
                .into()
        }
        Loss::RenewalsFailed {
            last_error: Some(e),
            since_last_ok,
        } => format!(
            "no renewal succeeded for {} of its {} TTL; last error: {e}",
            output::duration(*since_last_ok),
            output::duration(cfg.take.ttl)
        ),
        Loss::RenewalsFailed {
            last_error: None,
            since_last_ok,
        } => format!(
            "no renewal was confirmed for {} of its {} TTL (Redis did not answer, or distlock was stopped)",
            output::duration(*since_last_ok),
            output::duration(cfg.take.ttl)
        ),
    }
}

fn describe_exit(exit: &Exit) -> String {
    match exit {
        Exit::Code(code) => format!("the command exited with {code}"),
        Exit::Signal(signal) => format!("the command was killed by {}", signal_name(*signal)),
    }
}
