//! `distlock run`: THE pipeline, top to bottom.
//!
//! ```text
//! lock::open (connects in the background)
//!   -> session::reentry: an ancestor holds this lock? -> exec the command under it (or 124)
//!   -> Session::start (signals become events) -> check command -> guard process
//!   -> Session::take (wait::acquire) -> Session::interrupted? -> release, 128+N
//!   -> spawn child -> renew thread (started by the supervisor)
//!   -> supervise (signals, reaping, kill deadlines) -> Session::release (always, bounded)
//!   -> exit (the child's code, or 124 / 79 / 75 / 128+N)
//! ```
//!
//! [`run`] opens the lock; [`run_with`] is the rest, on any lock (the tests use one over the
//! model Redis).

use std::time::Duration;

use nix::unistd::Pid;

use crate::child::guard::{Guard, Line};
use crate::child::spawn::{self, SpawnSpec};
use crate::child::supervise::{Ending, Loss, Supervisor};
use crate::child::terminal::Terminal;
use crate::clock::Moment;
use crate::config::RunConfig;
use crate::error::Error;
use crate::exit::{Code, Exit};
use crate::hook::Hooks;
use crate::lock::{self, Grant, Holder, Lock, Ownership, Validity};
use crate::output::{Ev, Msg, Output};
use crate::renew::{RenewSpec, Renewer};
use crate::session::keys::{HeldKey, held_keys, key_env};
use crate::session::reenter::{self, Held};
use crate::session::{self, Reentry, Session, Taken, signal_name};

/// Run the pipeline.
pub fn run(cfg: RunConfig, out: &Output) -> Result<Exit, Error> {
    // The connection opens in the background while the rest gets ready.
    let lock = lock::open_set(&cfg.take.members(), &cfg.take.topology);
    run_with(cfg, lock, out)
}

/// Run the pipeline on `lock` (opened by [`run`], or the model Redis's in tests), then wait
/// for the hooks it started (bounded by `--hook-timeout`; they never change the exit).
pub fn run_with(cfg: RunConfig, lock: Box<dyn Lock>, out: &Output) -> Result<Exit, Error> {
    let (hooks, out) = Hooks::new(cfg.hook.clone(), cfg.take.name.key(), out);
    let result = pipeline(cfg, lock, &out, &hooks);
    hooks.finish();
    result
}

fn pipeline(
    cfg: RunConfig,
    mut lock: Box<dyn Lock>,
    out: &Output,
    hooks: &Hooks,
) -> Result<Exit, Error> {
    // A run of a lock that the run that started us holds: run the command under that lock.
    let resolve = || spawn::resolve(&cfg.argv[0]).map(drop).map_err(Error::from);
    if cfg.take.is_set() {
        if let Some(exit) = set_reentry(&cfg, lock.as_ref(), out)? {
            return Ok(exit);
        }
    } else {
        match session::reentry(lock.as_mut(), &cfg.take, resolve, out)? {
            Some(Reentry::Reenter { held, fence }) => {
                out.verbose(
                    Ev::Reentered,
                    format!(
                        "lock {} is held by the process that started this one (fence {fence}); \
                     running the command under it",
                        crate::text::quote(cfg.take.name.key())
                    ),
                );
                let program = spawn::resolve(&cfg.argv[0])?;
                return Err(reenter::exec(
                    &program,
                    &cfg.argv,
                    cfg.take.name.key(),
                    &held,
                    fence,
                ));
            }
            Some(Reentry::Exit(exit)) => return Ok(exit),
            None => {}
        }
    }
    // Signals next: from here on, INT/TERM/HUP/QUIT are events, not deaths.
    let mut session = Session::start(lock)?;
    let mut prepared = Prepared {
        // A missing command costs neither a Redis round trip nor a wait.
        program: spawn::resolve(&cfg.argv[0])?,
        // The guard that kills the command's group if distlock dies, or fails to kill it in
        // time: started now, rather than on the path from acquiring the lock to starting the
        // command.
        guard: match Guard::start(&Line::new(cfg.kill_signal)) {
            Ok(guard) => Some(guard),
            Err(e) => {
                out.warn(
                    Ev::GuardFailed,
                    format!(
                        "cannot start the guard process ({e}); if distlock is killed, processes started by the command would survive it"
                    ),
                );
                None
            }
        },
    };

    let mut holder = Holder::this_process(
        "run",
        std::process::id(),
        &cfg.argv,
        cfg.take.note.as_deref(),
    );
    holder.set = cfg.take.set_field();
    holder.warn_after_ms = cfg
        .warn_after
        .map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX));
    let grant = match session.take(&cfg.take, &holder, out)? {
        Taken::Granted(grant) => grant,
        Taken::Exit(exit) => return Ok(exit),
    };
    hooks.holding(grant.token.as_str());
    let key = cfg.take.quoted();
    // From here the lock is ours: every path below releases it, except a loss, where the key
    // is left alone because it may be someone else's by now.
    let outcome = match session.interrupted() {
        // A termination signal arrived while we took the lock: do not start the command.
        Some(signal) => Ok(Started::Interrupted(signal)),
        None => run_locked(&cfg, &mut prepared, &mut session, &grant, out, hooks),
    };
    let (exit, validity) = match outcome {
        Err(e) => {
            session.release(&grant, &cfg.take, false, out);
            return Err(e);
        }
        Ok(Started::Interrupted(signal)) => {
            crate::history::set_outcome(format!("interrupted by {}", signal_name(signal)));
            session.release(&grant, &cfg.take, false, out);
            let name = signal_name(signal);
            out.error(
                Ev::Interrupted,
                Msg::new(format!(
                    "interrupted by {name} just after acquiring lock {key}; the command was not started and the lock was released"
                ))
                .signal(name),
            );
            return Ok(Exit::Signal(signal));
        }
        Ok(Started::Ended(Ending::Lost(loss), _)) => {
            // Into the lock's history, if it has one (after the kill: nothing waits on this);
            // a set's goes into every key's, naming the key it lost.
            let lost = session.lock_ref().busy_key();
            let why = match lost.as_deref().filter(|_| cfg.take.is_set()) {
                Some(key) => format!(
                    "key {} of the set: {}",
                    crate::text::quote(key),
                    describe_loss(&loss, &cfg)
                ),
                None => describe_loss(&loss, &cfg),
            };
            crate::history::report_lost(&grant.token, &why, grant.validity.anchor.elapsed());
            // A set that lost one key releases the others now that the group is dead (the
            // lost one's release finds another token, or none, and changes nothing).
            let (what, released) = if cfg.take.is_set() {
                session.release(&grant, &cfg.take, false, out);
                let what = match lost {
                    Some(lost) => format!("lock {} of {key}", crate::text::quote(&lost)),
                    None => format!("lock {key}"),
                };
                (what, "; the other keys were released")
            } else {
                (format!("lock {key}"), "")
            };
            out.error(
                Ev::Lost,
                Msg::new(format!(
                    "lost {what} while the command ran ({}); the command's process group was terminated{released}",
                    describe_loss(&loss, &cfg)
                ))
                .exit(Code::LockLost.get())
                .reason(match loss {
                    Loss::NotHeld => "not-held",
                    Loss::RenewalsFailed { .. } => "renewals-failed",
                    Loss::GuardFired { .. } => "guard",
                }),
            );
            return Ok(Exit::from(Code::LockLost));
        }
        Ok(Started::Ended(Ending::TimedOut, _)) => {
            // Stopped while the lock was held: release it for the next run.
            crate::history::set_outcome("timed out");
            session.release(&grant, &cfg.take, false, out);
            let limit = cfg.timeout.map(crate::text::duration).unwrap_or_default();
            out.error(
                Ev::TimedOut,
                Msg::new(format!(
                    "the command ran past --timeout {limit}; its process group was stopped and \
                     lock {key} released (exit {})",
                    Code::TimedOut.get()
                ))
                .exit(Code::TimedOut.get()),
            );
            return Ok(Exit::from(Code::TimedOut));
        }
        Ok(Started::Ended(Ending::Replaced(by), _)) => {
            // The newer run waits first in line: the release hands the lock to it.
            crate::history::set_outcome("replaced");
            session.release(&grant, &cfg.take, false, out);
            let who = by.map_or_else(|| "a newer run".to_owned(), |by| by.summary_with_job());
            out.notice(
                Ev::Replaced,
                Msg::new(format!(
                    "replaced by {who}: the command was stopped and lock {key} handed over (exit {})",
                    cfg.take.busy_exit
                ))
                .exit(cfg.take.busy_exit),
            );
            return Ok(Exit::Code(cfg.take.busy_exit));
        }
        Ok(Started::Ended(Ending::Signaled(signal), validity)) => (Exit::Signal(signal), validity),
        Ok(Started::Ended(Ending::Exited(code), validity)) => (
            Exit::Code(u8::try_from(code).unwrap_or(Code::Software.get())),
            validity,
        ),
    };
    // A run that succeeded keeps the lock taken for --min-interval/--cooldown; a failed one
    // leaves it free at once, so that the next host can retry.
    let succeeded = matches!(exit, Exit::Code(0));
    crate::history::set_outcome(match exit {
        Exit::Code(code) => format!("exit {code}"),
        Exit::Signal(signal) => format!("killed by {}", signal_name(signal)),
    });
    if session.release(&grant, &cfg.take, succeeded, out) == Some(Ownership::NotHeld) {
        // The lock cannot have expired before kill_at(validity). An answer that came before
        // that means the key was deleted or overwritten (an operator, or Redis lost its data)
        // while it was ours: the command may have run without the lock, so do not report its
        // success. A later answer is explained by expiry during a slow release (Redis paused or
        // away at the end), after the command, and everything it started, had finished under
        // the lock.
        let key = match session.lock_ref().busy_key().filter(|_| cfg.take.is_set()) {
            Some(lost) => format!("{} of {key}", crate::text::quote(&lost)),
            None => key,
        };
        if Moment::now() < cfg.deadlines.kill_at(validity) {
            crate::history::report_lost(
                &grant.token,
                "the key was deleted or overwritten while the command ran",
                grant.validity.anchor.elapsed(),
            );
            out.error(
                Ev::Lost,
                Msg::new(format!(
                    "lock {key} was no longer held when the command ended ({}); the key was deleted \
                     or overwritten meanwhile, so the command may not have run exclusively",
                    describe_exit(&exit)
                ))
                .exit(Code::LockLost.get())
                .reason("gone-at-release"),
            );
            return Ok(Exit::from(Code::LockLost));
        }
        out.warn(
            Ev::ExpiredAtRelease,
            format!(
                "lock {key} had expired by the time Redis answered the release (the command ended \
                 while it was held)"
            ),
        );
    }
    // The group is gone: the guard can go (after the release, which is on the hand-off path).
    drop(prepared);
    Ok(exit)
}

/// What is ready before the lock is taken.
struct Prepared {
    /// The command's path.
    program: std::path::PathBuf,
    /// The guard (None if it could not be started).
    guard: Option<Guard>,
}

/// What happened after the lock was acquired.
enum Started {
    /// The child ran; this is how it ended, and the validity of the last confirmed renewal.
    Ended(Ending, Validity),
    /// A signal arrived before the child was started.
    Interrupted(i32),
}

/// Spawn the child, start the renewer, and supervise the child while the lock is held.
fn run_locked(
    cfg: &RunConfig,
    prepared: &mut Prepared,
    session: &mut Session,
    grant: &Grant,
    out: &Output,
    hooks: &Hooks,
) -> Result<Started, Error> {
    let lock = session.lock_ref();
    crate::child::become_subreaper();
    let terminal = Terminal::detect();
    // The grant's deadlines reach the guard before the command exists: it never watches the
    // group without one. (Renewals move them from the renewer's thread.)
    if let Some(guard) = &prepared.guard {
        guard.line().move_deadline(&cfg.deadlines, grant.validity);
    }
    // The renewer thread is started by the supervisor when the first renewal comes near.
    let keys = held_keys(lock, grant, &cfg.take);
    let mode = reenter::mode(cfg.take.limit);
    let mut env = key_env(&keys);
    let held = keys.iter().map(|k| Held {
        lock: k.id.clone(),
        token: k.token.as_str().to_owned(),
        fence: k.fence,
        limit: k.limit,
    });
    env.push((reenter::VAR.to_owned(), reenter::with_all(held.collect())));
    env.push((
        "DISTLOCK_TTL_MS".to_owned(),
        cfg.take.ttl.as_millis().to_string(),
    ));
    if !cfg.take.is_set() {
        // One key: today's variables, unchanged.
        env.push(("DISTLOCK_KEY".to_owned(), cfg.take.name.key().to_owned()));
        env.push(("DISTLOCK_TOKEN".to_owned(), grant.token.as_str().to_owned()));
        env.push(("DISTLOCK_FENCE".to_owned(), grant.fence.to_string()));
        env.push(("DISTLOCK_MODE".to_owned(), mode.to_owned()));
        if let Some(slot) = grant.slot {
            env.push(("DISTLOCK_SLOT".to_owned(), slot.to_string()));
        }
    }
    let started = crate::clock::Moment::now();
    let group: Pid = spawn::spawn(SpawnSpec {
        program: &prepared.program,
        argv: &cfg.argv,
        env,
        // A set's command gets no single-key variables: not even an outer run's.
        unset: if cfg.take.is_set() {
            SINGLE_KEY_VARS
        } else {
            &[]
        },
        take_terminal: terminal.is_some(),
        reset_signals: &session.dispositions().reset_in_child,
        guard: prepared.guard.as_ref().and_then(Guard::group_slot),
    })?;
    if let Some(terminal) = &terminal {
        // Again from the parent, like shells do: the hand-off is done whichever side runs first.
        terminal.give_to(group);
    }
    let timeout = renewal_timeout(cfg);
    let fresh = lock.fresh(timeout);
    let (tx, rx) = session.events();
    let renewer = Renewer::new(RenewSpec {
        lock: fresh,
        token: grant.token.clone(),
        ttl: cfg.take.ttl,
        every: cfg.renew_every,
        deadlines: cfg.deadlines,
        validity: grant.validity,
        timeout,
        events: tx.clone(),
        guard: prepared
            .guard
            .as_ref()
            .map(|g| Box::new(g.line().clone()) as Box<dyn crate::renew::DeadlineWatch>),
    });
    out.verbose(
        Ev::Started,
        format!(
            "started {} (process group {group})",
            crate::text::quote_os(&cfg.argv[0])
        ),
    );
    let (ending, validity) = Supervisor {
        group,
        terminal,
        deadlines: cfg.deadlines,
        kill_signal: cfg.kill_signal,
        granted: grant.validity,
        renewer,
        guard: &mut prepared.guard,
        time_limit: cfg.timeout.map(|limit| started + limit),
        // Held since the grant (its request's send time: never later than Redis's count).
        warn_at: cfg
            .warn_after
            .map(|after| (grant.validity.anchor + after, after)),
        hooks,
        out,
    }
    .run(rx);
    Ok(Started::Ended(ending, validity))
}

/// The variables of a run of one key, which a set's command does not get (one fence check
/// against the wrong key would pass).
const SINGLE_KEY_VARS: &[&str] = &[
    "DISTLOCK_KEY",
    "DISTLOCK_TOKEN",
    "DISTLOCK_FENCE",
    "DISTLOCK_SLOT",
];

/// A set every key of which an ancestor run holds (`DISTLOCK_HELD`): check that each is still
/// held, then run the command in place under them, as a nested run of one key does. `None`:
/// no key is an ancestor's, take the set as usual. Some but not all: refused (64), since
/// waiting for a key the parent holds would wait for ever.
fn set_reentry(cfg: &RunConfig, lock: &dyn Lock, out: &Output) -> Result<Option<Exit>, Error> {
    let inherited = reenter::inherited();
    let members = lock.members();
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for member in &members {
        match inherited.iter().find(|h| h.lock == member.id) {
            Some(held) => found.push((member, held.clone())),
            None => missing.push(member.name.key()),
        }
    }
    if found.is_empty() {
        return Ok(None);
    }
    if !missing.is_empty() {
        let held: Vec<&str> = found.iter().map(|(m, _)| m.name.key()).collect();
        return Err(Error::Usage(format!(
            "the run that started this one holds {} but not {}: a nested run takes all of its \
             keys from its parent or none (it would wait for its parent for ever); take {} alone \
             here, or add it to the outer run's keys",
            crate::text::quote(&held.join(" ")),
            crate::text::quote(&missing.join(" ")),
            crate::text::quote(&missing.join(" ")),
        )));
    }
    // Per key: shared in shared and anything in exclusive reenter; exclusive in shared would
    // wait for itself: refused at once, before any request.
    for (member, held) in &found {
        if held.limit == 0 && cfg.take.limit_of(&member.name) != 0 {
            let key = crate::text::quote(member.name.key());
            return Err(Error::Conflict(format!(
                "lock {key} is held shared by the run that started this one, and this run asked \
                 for it exclusively: it would wait for itself; add --shared-key {} (or \
                 --shared) to this run, or take {key} exclusively in the outer run",
                member.name.key()
            )));
        }
    }
    let program = spawn::resolve(&cfg.argv[0])?;
    let timeout = cfg.take.topology.timeout();
    let mut keys = Vec::new();
    for name in &cfg.take.keys {
        let Some((member, held)) = found.iter().find(|(m, _)| m.name == *name) else {
            return Ok(None);
        };
        let mut one = lock::open(member.name.clone(), &cfg.take.topology);
        let token = lock::Token::from_text(&held.token);
        let quoted = crate::text::quote(name.key());
        match one.holds(&token, &crate::backend::Budget::within(timeout)) {
            Ok(Some(fence)) => keys.push(HeldKey {
                key: name.key().to_owned(),
                token,
                fence,
                id: member.id.clone(),
                limit: held.limit,
            }),
            Ok(None) => {
                out.error(
                    Ev::Lost,
                    Msg::new(format!(
                        "lock {quoted} is no longer held by the run that started this one (it \
                         expired, was released or broken); the command was not started"
                    ))
                    .exit(Code::LockLost.get()),
                );
                return Ok(Some(Exit::from(Code::LockLost)));
            }
            Err(source) => {
                return Err(Error::redis(
                    format!("cannot check lock {quoted}, held by the run that started this one"),
                    one.describe(),
                    source,
                ));
            }
        }
    }
    out.verbose(
        Ev::Reentered,
        format!(
            "every key of {} is held by the process that started this one; running the command \
             under them",
            cfg.take.quoted()
        ),
    );
    let mut env = key_env(&keys);
    env.push((
        "DISTLOCK_TTL_MS".to_owned(),
        cfg.take.ttl.as_millis().to_string(),
    ));
    // An outer set's numbered variables beyond this set's keys go too.
    let others: Vec<String> = (keys.len()..crate::config::MAX_KEYS)
        .flat_map(|i| ["KEY", "TOKEN", "FENCE", "MODE"].map(|name| format!("DISTLOCK_{name}{i}")))
        .collect();
    let mut unset: Vec<&str> = SINGLE_KEY_VARS.to_vec();
    unset.extend(others.iter().map(String::as_str));
    Err(reenter::exec_with(&program, &cfg.argv, &env, &unset))
}

/// The renewer's Redis timeout: short enough to leave room for retries before the kill signal.
fn renewal_timeout(cfg: &RunConfig) -> Duration {
    let window = cfg
        .deadlines
        .retry_window(cfg.renew_every)
        .unwrap_or(cfg.renew_every);
    cfg.take
        .topology
        .timeout()
        .min(window / 2)
        .max(Duration::from_millis(10))
}

fn describe_loss(loss: &Loss, cfg: &RunConfig) -> String {
    match loss {
        Loss::NotHeld => {
            "the key was deleted, overwritten or had expired; another process may hold it now"
                .into()
        }
        Loss::RenewalsFailed {
            last_error,
            since_anchor,
            ttl,
        } => {
            let of = of_ttl(*ttl, cfg);
            match last_error {
                Some(e) => format!(
                    "no renewal succeeded for {} {of}; last error: {e}",
                    crate::text::duration(*since_anchor)
                ),
                None => format!(
                    "no renewal was confirmed for {} {of} (Redis did not answer, or distlock was stopped)",
                    crate::text::duration(*since_anchor)
                ),
            }
        }
        Loss::GuardFired {
            last_error,
            since_anchor,
            ttl,
        } => format!(
            "distlock's guard process ended the command because no renewal was confirmed in time: none for {} {}{}, while distlock itself was stopped or could not run",
            crate::text::duration(*since_anchor),
            of_ttl(*ttl, cfg),
            last_error
                .as_ref()
                .map_or_else(String::new, |e| format!(" (last error: {e})"))
        ),
    }
}

/// The expiry a loss is told against, in the user's words (`--ttl`, never the "claim" or
/// "validity" of the design notes): see [`expiry_words`].
fn of_ttl(ttl: Duration, cfg: &RunConfig) -> String {
    let redlock = matches!(cfg.take.topology, lock::Topology::Redlock { .. });
    expiry_words(ttl, cfg.take.ttl, cfg.take.claim, redlock)
}

/// "of its --ttl 3s", for the validity `counted` of the last confirmed grant or renewal of a
/// lock taken with `--ttl ttl`. Before the first renewal the lock has only the shorter expiry
/// an acquire sets, `claim` (see [`crate::lock`]): said as such, with the `--ttl` the first
/// renewal extends it to. A Redlock counts each expiry less the allowance for its nodes' clocks
/// drifting apart (1% + 2ms, [`lock::redlock_drift`]): said too, so that the number shown adds
/// up.
fn expiry_words(counted: Duration, ttl: Duration, claim: Duration, redlock: bool) -> String {
    let drift = if redlock {
        lock::redlock_drift(ttl)
    } else {
        Duration::ZERO
    };
    let flag = format!("--ttl {}", crate::text::duration(ttl));
    let counts = if redlock {
        format!(
            " (a Redlock counts {} of it, allowing for its nodes' clocks drifting apart)",
            crate::text::duration(counted)
        )
    } else {
        String::new()
    };
    if counted + drift >= ttl {
        // Renewed (or acquired with the whole TTL: a short --ttl).
        format!("of its {flag}{counts}")
    } else {
        format!(
            "of the {} an acquire sets before the first renewal extends the lock to its {flag}{counts}",
            crate::text::duration(claim)
        )
    }
}

fn describe_exit(exit: &Exit) -> String {
    match exit {
        Exit::Code(code) => format!("the command exited with {code}"),
        Exit::Signal(signal) => format!("the command was killed by {}", signal_name(*signal)),
    }
}

#[cfg(test)]
mod tests;
