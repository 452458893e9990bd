//! Breaking the holders of a lock: all that were shown, or the one `--holder` names, after
//! consent; each by the token that was shown.

use std::ops::ControlFlow;

use crate::backend::Budget;
use crate::error::Error;
use crate::exit::{Code, Exit};
use crate::lock::{Lock, Ownership, Token};
use crate::output::{Ev, Msg, Output};

use super::{Consent, Target, agreed, by_id, end, failed, plural};
use crate::commands::inspect::view::{Shown, View, who};

impl Target for Shown<'_> {
    fn token(&self) -> Option<&str> {
        Shown::token(self)
    }

    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
}

/// Break the holders of `view` that `holder` (an id prefix) selects, or all of them.
pub fn break_holders(
    lock: &mut dyn Lock,
    view: &View<'_>,
    holder: Option<&str>,
    consent: Consent<'_>,
    budget: &dyn Fn() -> Budget,
    out: &Output,
) -> Result<Exit, Error> {
    let key = crate::text::quote(view.name.key());
    if view.holders.is_empty() {
        let free = Msg::new(format!("lock {key} is free; nothing to break"));
        return Ok(end(out, Ev::Free, free, Code::Free));
    }
    let targets: Vec<&Shown<'_>> = match holder {
        None => view.holders.iter().collect(),
        Some(prefix) => match by_id(&view.holders, prefix, "holders", &key)? {
            Some(one) => vec![one],
            None => {
                let nobody = Msg::new(format!(
                    "no holder of lock {key} has the id {}; nothing was broken (its {}: {})",
                    crate::text::quote(prefix),
                    plural(view.holders.len(), "holder is", "holders are"),
                    view.id_list()
                ));
                return Ok(end(out, Ev::NoSuchHolder, nobody, Code::Free));
            }
        },
    };
    let mut tokens = Vec::with_capacity(targets.len());
    for shown in &targets {
        match shown.token() {
            Some(token) => tokens.push(Token::from_text(token)),
            None => return Err(Error::Internal("the lock's token could not be read".into())),
        }
    }
    let semaphore = view.is_semaphore();
    let what = match (targets.as_slice(), semaphore) {
        ([_], false) => format!("lock {key} ({})", targets[0].held.summary()),
        ([one], true) => format!("{} of lock {key} ({})", one.named(), one.held.summary()),
        (all, _) => format!(
            "the {} holders of lock {key} ({})",
            all.len(),
            view.id_list()
        ),
    };
    let question = || match (targets.as_slice(), semaphore) {
        ([_], false) => "Break it? Its holder loses it (distlock run terminates its command at \
                         the next renewal)."
            .to_owned(),
        ([one], true) => format!(
            "Break {} ({})? It loses its slot (distlock run terminates its command at the next \
             renewal).",
            one.named(),
            who(one.held)
        ),
        (all, _) => format!(
            "Break all {} holders? Each loses its slot (distlock run terminates its command at \
             the next renewal).",
            all.len()
        ),
    };
    if let ControlFlow::Break(declined) = agreed(consent, &what, question, view, &key, out)? {
        return Ok(declined);
    }
    let it = if semaphore { "its slot" } else { "it" };
    let next = match view.waiters.len() {
        0 => String::new(),
        1 => format!("; {it} passes to the waiter in line"),
        n => format!("; {it} passes to the first of the {n} waiters in line"),
    };
    // One holder: one line, as for a mutex. Several: a line per holder, then the outcome.
    if let ([one], [token]) = (targets.as_slice(), tokens.as_slice()) {
        let named = if semaphore {
            format!("{} of lock {key}", one.named())
        } else {
            format!("lock {key}")
        };
        let release = lock.release(token, &budget());
        return Ok(match release.map_err(|e| failed(lock, &key, e))? {
            Ownership::Held => {
                let broke = Msg::new(format!("broke {named} ({}){next}", one.held.summary()));
                end(out, Ev::Broken, broke.holder(one.held.who()), Code::Success)
            }
            Ownership::NotHeld => {
                let changed = if semaphore {
                    format!("{named} released its slot or lost it meanwhile")
                } else {
                    format!("lock {key} changed hands or was released meanwhile")
                };
                let kept = Msg::new(format!("{changed}; nothing was broken"));
                end(out, Ev::NotBroken, kept, Code::Free)
            }
        });
    }
    let mut broken = 0;
    for (shown, token) in targets.iter().zip(&tokens) {
        let release = lock.release(token, &budget());
        match release.map_err(|e| failed(lock, &key, e))? {
            Ownership::Held => {
                broken += 1;
                out.notice(
                    Ev::HolderBroken,
                    Msg::new(format!(
                        "broke {} of lock {key} ({})",
                        shown.named(),
                        shown.held.summary()
                    ))
                    .holder(shown.held.who()),
                );
            }
            Ownership::NotHeld => out.notice(
                Ev::HolderNotBroken,
                Msg::new(format!(
                    "{} of lock {key} released its slot or lost it meanwhile; not broken",
                    shown.named()
                )),
            ),
        }
    }
    if broken == 0 {
        let none = Msg::new(format!(
            "none of the {} holders shown still held lock {key}; nothing was broken",
            targets.len()
        ));
        return Ok(end(out, Ev::NotBroken, none, Code::Free));
    }
    let slots = if view.waiters.is_empty() {
        String::new()
    } else {
        "; the slots pass to the waiters in line".to_owned()
    };
    let broke = Msg::new(format!(
        "broke {broken} of the {} holders of lock {key}{slots}",
        targets.len()
    ));
    Ok(end(out, Ev::Broken, broke, Code::Success))
}
