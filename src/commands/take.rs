//! Taking a lock, as `run` and `acquire` both do: connect, wait (with the waiting display),
//! and turn every way a wait can end into either a [`Lease`] or how distlock should exit.

use crate::commands::Exit;
use crate::config::TakeConfig;
use crate::error::Error;
use crate::events::{Events, Sender};
use crate::lock::{Holder, Lease, Lock, SingleNode, Token};
use crate::output::progress::WaitDisplay;
use crate::output::{self, Output};
use crate::wait::{self, Request, Waited};

/// Connect, wait for the lock described by `cfg`, and return it, or how to exit instead (the
/// message is already printed).
pub fn take(
    cfg: &TakeConfig,
    holder: &Holder,
    events: (&Sender, &mut Events),
    out: &Output,
) -> Result<Result<(SingleNode, Lease), Exit>, Error> {
    let mut lock = SingleNode::new(cfg.name.clone(), cfg.connector.clone());
    let key = output::quote(cfg.name.key());
    lock.connect().map_err(|source| Error::Redis {
        context: "cannot connect to Redis".into(),
        server: lock.describe(),
        source,
    })?;
    out.verbose(format!("connected to {}", lock.describe()));

    let token = Token::generate();
    let request = Request {
        token: &token,
        ttl: cfg.ttl,
        holder,
        policy: cfg.wait,
    };
    let mut display = WaitDisplay::new(out, cfg.name.key(), cfg.wait.limit, cfg.report_every);
    match wait::acquire(&mut lock, &request, events, &mut display, out) {
        Waited::Acquired { sent, waited } => {
            out.verbose(format!(
                "acquired lock {key} ({}) after {}",
                cfg.name.lock_key(),
                output::duration(waited)
            ));
            Ok(Ok((lock, Lease { token, since: sent })))
        }
        Waited::Busy { waited, held } => {
            let after = if waited < std::time::Duration::from_millis(1) {
                String::new()
            } else {
                format!(" after waiting {}", output::duration(waited))
            };
            let who = held
                .map(|h| format!(" ({})", h.summary()))
                .unwrap_or_default();
            let message = format!(
                "lock {key} is busy{who}; gave up{after} (exit {})",
                cfg.busy_exit
            );
            // `-n -E 0` is the cron idiom for "skip quietly": busy is then not news (cron
            // mails any output), except with -v.
            if cfg.busy_exit == crate::exit::SUCCESS {
                out.verbose(message);
            } else {
                out.notice(message);
            }
            Ok(Err(Exit::Code(cfg.busy_exit)))
        }
        Waited::Interrupted(signal) => {
            out.error(format!(
                "interrupted by {} while waiting for lock {key}; nothing was acquired",
                crate::commands::signal_name(signal)
            ));
            Ok(Err(Exit::Signal(signal)))
        }
        Waited::Failed(source) => Err(Error::Redis {
            context: format!("cannot acquire lock {key}"),
            server: lock.describe(),
            source,
        }),
    }
}
