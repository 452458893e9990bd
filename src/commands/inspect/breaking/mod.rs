//! `distlock break`: which holders to break (all that were shown, or the one `--holder` names),
//! whether the operator agreed, and the releases, one per holder, each by the token that was
//! shown. Talks only to a `dyn Lock` and to [`Output`](crate::output::Output); reading the lock and the terminal is the
//! caller's business.
//!
//! A break is `lock.release(token)` with the token of a holder as it was shown: the release
//! compares tokens, so a holder that left meanwhile (or a newer one in its place) is never
//! broken, and the lock or the slot goes to the next waiter in line, as after any release.
//!
//! A Redlock's split (no token on a majority of its nodes, after partial acquires or a node
//! that lost its data) has no holder, and nobody can take the lock until the nodes' locks
//! expire: [`break_split`] releases every token that some node holds, each by the same
//! token-compare release on every node, so that the lock is free now.
//!
//! This file holds what both kinds of break share (the choice by id, the consent, the last
//! word); `holders.rs` breaks holders, `split.rs` a split.

mod holders;
mod split;
#[cfg(test)]
mod tests;

use std::ops::ControlFlow;

use crate::backend::BackendError;
use crate::commands::inspect::view::View;
use crate::error::Error;
use crate::exit::{Code, Exit};
use crate::lock::Lock;
use crate::output::{Ev, Msg, Output};

pub use holders::break_holders;
pub use split::break_split;

/// Whether the operator agreed to the break.
pub enum Consent<'a> {
    /// `--yes`.
    Given,
    /// Ask this question (the status of the lock, then the question itself); true is yes.
    Ask(&'a mut dyn FnMut(&str) -> bool),
    /// Nobody can be asked (stdin is not a terminal) and `--yes` is missing.
    Impossible,
}

/// What a break releases: a holder of the lock, or a token that nodes of a split hold.
trait Target {
    /// Its whole token, when it could be read.
    fn token(&self) -> Option<&str>;
    /// Its short id, as shown (None when it has none).
    fn id(&self) -> Option<&str>;

    /// Its id for messages: sanitised, `?` when it has none.
    fn shown_id(&self) -> String {
        self.id().map_or("?".into(), crate::text::sanitize)
    }
}

/// The one of `all` whose token starts with `prefix` (what `--holder` gave), `None` when none
/// does. An id that several start with is the operator's mistake: the error lists their ids
/// (`noun` names them: `holders`, `tokens`).
fn by_id<'a, T: Target>(
    all: &'a [T],
    prefix: &str,
    noun: &str,
    key: &str,
) -> Result<Option<&'a T>, Error> {
    let matching: Vec<&T> = all
        .iter()
        .filter(|t| t.token().is_some_and(|t| t.starts_with(prefix)))
        .collect();
    match matching.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        several => {
            let ids: Vec<String> = several.iter().map(|t| t.shown_id()).collect();
            Err(Error::Usage(format!(
                "the id {} matches {} {noun} of lock {key} ({}); give more of the id",
                crate::text::quote(prefix),
                several.len(),
                ids.join(", ")
            )))
        }
    }
}

/// Whether the break of `what` goes on: `--yes`, or the operator, asked `question` below the
/// lock as `view` shows it, said yes. Without a terminal to ask on it is refused; a no is said,
/// and the break ends with [`Code::Free`] (`Break`).
fn agreed(
    consent: Consent<'_>,
    what: &str,
    question: impl FnOnce() -> String,
    view: &View<'_>,
    key: &str,
    out: &Output,
) -> Result<ControlFlow<Exit>, Error> {
    match consent {
        Consent::Given => Ok(ControlFlow::Continue(())),
        Consent::Impossible => Err(Error::Usage(format!(
            "refusing to break {what} without --yes: there is no terminal to ask on"
        ))),
        Consent::Ask(ask) => {
            if ask(&format!("{}{} [y/N] ", view.text(), question())) {
                Ok(ControlFlow::Continue(()))
            } else {
                let declined = Msg::new(format!("lock {key} was not broken"));
                Ok(ControlFlow::Break(end(
                    out,
                    Ev::Declined,
                    declined,
                    Code::Free,
                )))
            }
        }
    }
}

/// A release that failed (compare-and-delete, so a newer holder is never broken by mistake;
/// but Redis did not answer).
fn failed(lock: &dyn Lock, key: &str, e: BackendError) -> Error {
    Error::redis(format!("cannot break lock {key}"), lock.describe(), e)
}

/// Say `msg`, the last word of the break, and end with `code`.
fn end(out: &Output, ev: Ev, msg: Msg, code: Code) -> Exit {
    out.notice(ev, msg.exit(code.get()));
    Exit::from(code)
}

/// `1 holder is`, `2 holders are`.
fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}
