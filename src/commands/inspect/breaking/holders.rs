//! Breaking the holders of a lock: all that were shown, or the one `--holder` names, after
//! consent; each by the token that was shown.

use crate::backend::Budget;
use crate::error::Error;
use crate::exit::{Code, Exit};
use crate::lock::{Lock, Ownership, Token};
use crate::output::{Ev, Msg, Output};

use super::{Consent, plural, release};
use crate::commands::inspect::view::{Shown, View, who};

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
        out.notice(
            Ev::Free,
            Msg::new(format!("lock {key} is free; nothing to break")).exit(Code::Free.get()),
        );
        return Ok(Exit::from(Code::Free));
    }
    let targets: Vec<&Shown<'_>> = match holder {
        None => view.holders.iter().collect(),
        Some(prefix) => {
            let matching: Vec<&Shown<'_>> = view
                .holders
                .iter()
                .filter(|shown| shown.token().is_some_and(|t| t.starts_with(prefix)))
                .collect();
            let id = crate::text::quote(prefix);
            match matching.as_slice() {
                [] => {
                    out.notice(
                        Ev::NoSuchHolder,
                        Msg::new(format!(
                            "no holder of lock {key} has the id {id}; nothing was broken (its {}: {})",
                            plural(view.holders.len(), "holder is", "holders are"),
                            view.id_list()
                        ))
                        .exit(Code::Free.get()),
                    );
                    return Ok(Exit::from(Code::Free));
                }
                [_] => matching,
                several => {
                    let ids: Vec<String> = several
                        .iter()
                        .map(|shown| {
                            shown
                                .id
                                .as_deref()
                                .map_or("?".into(), crate::text::sanitize)
                        })
                        .collect();
                    return Err(Error::Usage(format!(
                        "the id {id} matches {} holders of lock {key} ({}); give more of the id",
                        several.len(),
                        ids.join(", ")
                    )));
                }
            }
        }
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
    match consent {
        Consent::Given => {}
        Consent::Impossible => {
            return Err(Error::Usage(format!(
                "refusing to break {what} without --yes: there is no terminal to ask on"
            )));
        }
        Consent::Ask(ask) => {
            let question = match (targets.as_slice(), semaphore) {
                ([_], false) => "Break it? Its holder loses it (distlock run terminates its \
                                 command at the next renewal)."
                    .to_owned(),
                ([one], true) => format!(
                    "Break {} ({})? It loses its slot (distlock run terminates its command at \
                     the next renewal).",
                    one.named(),
                    who(one.held)
                ),
                (all, _) => format!(
                    "Break all {} holders? Each loses its slot (distlock run terminates its \
                     command at the next renewal).",
                    all.len()
                ),
            };
            if !ask(&format!("{}{question} [y/N] ", view.text())) {
                out.notice(
                    Ev::Declined,
                    Msg::new(format!("lock {key} was not broken")).exit(Code::Free.get()),
                );
                return Ok(Exit::from(Code::Free));
            }
        }
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
        return match release(lock, token, budget, &key)? {
            Ownership::Held => {
                out.notice(
                    Ev::Broken,
                    Msg::new(format!("broke {named} ({}){next}", one.held.summary()))
                        .holder(one.held.who())
                        .exit(Code::Success.get()),
                );
                Ok(Exit::from(Code::Success))
            }
            Ownership::NotHeld => {
                let changed = if semaphore {
                    format!("{named} released its slot or lost it meanwhile")
                } else {
                    format!("lock {key} changed hands or was released meanwhile")
                };
                out.notice(
                    Ev::NotBroken,
                    Msg::new(format!("{changed}; nothing was broken")).exit(Code::Free.get()),
                );
                Ok(Exit::from(Code::Free))
            }
        };
    }
    let mut broken = 0;
    for (shown, token) in targets.iter().zip(&tokens) {
        match release(lock, token, budget, &key)? {
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
        out.notice(
            Ev::NotBroken,
            Msg::new(format!(
                "none of the {} holders shown still held lock {key}; nothing was broken",
                targets.len()
            ))
            .exit(Code::Free.get()),
        );
        return Ok(Exit::from(Code::Free));
    }
    let slots = if view.waiters.is_empty() {
        String::new()
    } else {
        "; the slots pass to the waiters in line".to_owned()
    };
    out.notice(
        Ev::Broken,
        Msg::new(format!(
            "broke {broken} of the {} holders of lock {key}{slots}",
            targets.len()
        ))
        .exit(Code::Success.get()),
    );
    Ok(Exit::from(Code::Success))
}
