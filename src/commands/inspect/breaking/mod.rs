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
//! This file holds what both kinds of break share (the consent, the release); `holders.rs`
//! breaks holders, `split.rs` a split.

mod holders;
mod split;
#[cfg(test)]
mod tests;

use crate::backend::Budget;
use crate::error::Error;
use crate::lock::{Lock, Ownership, Token};

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

/// Release `token`, compare-and-delete: a newer holder is never broken by mistake.
fn release(
    lock: &mut dyn Lock,
    token: &Token,
    budget: &dyn Fn() -> Budget,
    key: &str,
) -> Result<Ownership, Error> {
    lock.release(token, &budget())
        .map_err(|e| Error::redis(format!("cannot break lock {key}"), lock.describe(), e))
}

/// `1 holder is`, `2 holders are`.
fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}
