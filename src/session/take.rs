//! Taking a lock, as `run` and `acquire` both do: wait (with the waiting display), and turn
//! every way a wait can end into either a [`Grant`] or how distlock should exit ([`Taken`]),
//! with a message that says what may remain in Redis.

use crate::backend::Cancel;
use crate::config::TakeConfig;
use crate::error::Error;
use crate::events::{Events, Sender};
use crate::exit::Exit;
use crate::lock::{Conflict, Grant, Holder, Lock, Queueing, Request, Residue, Token, Use};
use crate::output::{Ev, Msg, Output};
use crate::wait::display::WaitDisplay;
use crate::wait::{self, Wait, Waited};

/// How a take ended, short of an error.
#[derive(Debug)]
pub enum Taken {
    /// The lock is ours.
    Granted(Grant),
    /// It is not: end with this (the message is printed).
    Exit(Exit),
}

/// Wait for the lock described by `cfg` on `lock`, and return the grant, or how to exit
/// instead (the message is already printed, or is in the error).
pub fn take(
    cfg: &TakeConfig,
    lock: &mut dyn Lock,
    holder: &Holder,
    events: (&Sender, &mut Events),
    cancel: &Cancel,
    out: &Output,
) -> Result<Taken, Error> {
    let key = cfg.quoted();
    let token = Token::generate().map_err(|e| {
        Error::Internal(format!(
            "cannot get random bytes for the lock's token from the kernel (getrandom): {e}"
        ))
    })?;
    let wait = Wait {
        request: Request {
            token: &token,
            claim: cfg.claim,
            ttl: cfg.ttl,
            holder,
            limit: cfg.limit,
            queueing: if cfg.replace {
                Queueing::Replace
            } else if cfg.supersede {
                Queueing::Supersede
            } else {
                Queueing::Join
            },
            polls: false,
            after: cfg.after,
            doorbell: false,
        },
        policy: cfg.wait,
        timeout: cfg.topology.timeout(),
        unreachable_after: cfg.unreachable_after,
        cancel,
    };
    let mut display = WaitDisplay::new(
        out,
        cfg.name.key(),
        &lock.describe(),
        cfg.wait.limit,
        cfg.report_every,
    );
    display.warn_after(cfg.warn_wait);
    display.warn_on_inversion(super::reenter::inversions(lock));
    if cfg.is_set() {
        let keys: Vec<&str> = cfg.keys.iter().map(|k| k.key()).collect();
        display.for_set(&keys.join(" "));
    }
    match wait::acquire(lock, &wait, events, &mut display, out) {
        Waited::Acquired { grant, waited } => {
            out.verbose(
                Ev::Acquired,
                Msg::new(format!(
                    "acquired lock {key} ({}) after {}",
                    cfg.name.lock_key(),
                    crate::text::duration(waited)
                ))
                .waited(waited),
            );
            Ok(Taken::Granted(grant))
        }
        Waited::Busy {
            waited,
            held,
            residue,
        } => {
            let after = if waited < std::time::Duration::from_millis(1) {
                String::new()
            } else {
                format!(" after waiting {}", crate::text::duration(waited))
            };
            let what = match &held {
                // Kept taken after a run that succeeded (--min-interval, --cooldown).
                Some(h) if h.first.cooldown.is_some() => h.summary(),
                Some(h) => format!("is busy ({})", h.summary()),
                None => "is busy".to_owned(),
            };
            let mut message = match lock.busy_key().filter(|_| cfg.is_set()) {
                // A set names the key that was busy, and says the others went back.
                Some(busy) => format!(
                    "lock {} {what}; gave up{after} on {key} and gave back every key of it \
                     (exit {})",
                    crate::text::quote(&busy),
                    cfg.busy_exit
                ),
                None => format!("lock {key} {what}; gave up{after} (exit {})", cfg.busy_exit),
            };
            if let Some(left) = left_behind(residue, &key) {
                message.push_str("; ");
                message.push_str(&left);
            }
            // `-n -E 0` is the cron idiom for "skip quietly": busy is then not news (cron
            // mails any output), except with -v.
            let mut message = Msg::new(message).exit(cfg.busy_exit).waited(waited);
            if let Some(held) = &held {
                message = message.holder(held.first.who());
            }
            if cfg.busy_exit == crate::exit::Code::Success.get()
                && !matches!(residue, Residue::MayRemain(_))
            {
                out.verbose(Ev::Busy, message);
            } else {
                out.notice(Ev::Busy, message);
            }
            Ok(Taken::Exit(Exit::Code(cfg.busy_exit)))
        }
        Waited::Superseded {
            waited,
            by,
            residue,
        } => {
            let who = by.map_or_else(|| "a newer waiter".to_owned(), |by| by.summary_with_job());
            let mut message = format!(
                "superseded by {who} after waiting {} for lock {key}: a newer run replaces this one \
                 (exit {})",
                crate::text::duration(waited),
                cfg.busy_exit
            );
            if let Some(left) = left_behind(residue, &key) {
                message.push_str("; ");
                message.push_str(&left);
            }
            out.notice(
                Ev::Superseded,
                Msg::new(message).exit(cfg.busy_exit).waited(waited),
            );
            Ok(Taken::Exit(Exit::Code(cfg.busy_exit)))
        }
        Waited::Conflict(conflict) => {
            // A set names the key, and what this run asked of that key (its own mode).
            let (key, asked) = match lock.busy_key().filter(|_| cfg.is_set()) {
                Some(busy) => {
                    let asked = (cfg.keys.iter().find(|k| k.key() == busy))
                        .map_or(cfg.limit, |name| cfg.limit_of(name));
                    (crate::text::quote(&busy), asked)
                }
                None => (key, cfg.limit),
            };
            Err(Error::Conflict(conflict_message(&conflict, &key, asked)))
        }
        Waited::Interrupted { signal, residue } => {
            let what = left_behind(residue, &key).unwrap_or_else(|| {
                if cfg.is_set() {
                    "every key was given back".into()
                } else {
                    "nothing was acquired".into()
                }
            });
            let name = super::signal_name(signal);
            out.error(
                Ev::Interrupted,
                Msg::new(format!(
                    "interrupted by {name} while waiting for lock {key}; {what}"
                ))
                .signal(name),
            );
            Ok(Taken::Exit(Exit::Signal(signal)))
        }
        Waited::Failed {
            error,
            unanswered,
            residue,
        } => {
            // Redis never answered any attempt: say how hard we tried (the cause follows).
            let context = match unanswered {
                Some(u) if u.attempts > 1 => format!(
                    "cannot acquire lock {key} after {} attempts over {}",
                    u.attempts,
                    crate::text::duration(u.over)
                ),
                _ => format!("cannot acquire lock {key}"),
            };
            Err(Error::Redis {
                context,
                server: lock.describe(),
                source: error,
                note: left_behind(residue, &key),
            })
        }
    }
}

/// A key used in another way than `asked` (the --limit of this run), in words.
fn conflict_message(conflict: &Conflict, key: &str, asked: u32) -> String {
    let what = |limit: u32| match limit {
        0 => "a shared lock (--shared)".to_owned(),
        1 => "a mutex".to_owned(),
        _ => format!("a semaphore of --limit {limit}"),
    };
    let who = conflict
        .holder
        .as_ref()
        .map(|h| format!(", e.g. {}", h.summary()))
        .unwrap_or_default();
    let now = match conflict.use_ {
        Use::Mutex => format!("is held as a mutex{who}"),
        Use::Shared => format!("is held shared ({} readers{who})", conflict.count),
        Use::Semaphore => format!(
            "is held as {} ({} holders{who})",
            what(conflict.limit),
            conflict.count
        ),
        Use::Queue => format!(
            "is waited for as {} ({} waiting{who})",
            what(conflict.limit),
            conflict.count
        ),
    };
    format!(
        "lock {key} {now}, but this run asked for {}; everyone who uses one key must give the \
         same --limit (or use another key)",
        what(asked)
    )
}

/// What an ended wait left behind, in words, when there is something to say.
pub fn left_behind(residue: Residue, key: &str) -> Option<String> {
    match residue {
        Residue::Nothing => None,
        Residue::TakenBack => Some("nothing is held (the last attempt was taken back)".to_owned()),
        Residue::MayRemain(claim) => Some(format!(
            "the last attempt could not be taken back: if Redis applies it, lock {key} stays held \
             for at most {} after that (the short expiry an attempt sets, not the --ttl), then \
             expires by itself",
            crate::text::duration(claim)
        )),
    }
}
