//! A Redlock's majority rules: how many nodes make one, what a majority of nodes agrees on, how
//! `list` counts the nodes, and the messages that tell an operator how many more failures the
//! lock survives.

use std::time::Duration;

use super::Redlock;
use crate::backend::{BackendError, Budget, Connector, NoQuorum};
use crate::lock::{
    Answering, Listing, Lock, LockName, LockState, NewerLock, NodeFailure, Survey, protocol,
};
use crate::text::sanitize;

/// How many of `nodes` make a majority.
pub fn quorum(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// The lock a majority of `states` (each node's, at least `quorum` of them) agrees on, by the
/// holder's token (free if a majority is free); `None` on a split.
pub(super) fn agree(states: &[&LockState], quorum: usize) -> Option<LockState> {
    let token_of = |s: &LockState| s.holders.first().and_then(|h| h.token.clone());
    let mut counts: Vec<(Option<String>, usize)> = Vec::new();
    for state in states {
        let token = token_of(state);
        match counts.iter_mut().find(|(t, _)| *t == token) {
            Some((_, n)) => *n += 1,
            None => counts.push((token, 1)),
        }
    }
    counts
        .iter()
        .find(|(_, n)| *n >= quorum)
        .and_then(|(token, _)| states.iter().find(|s| token_of(s) == *token))
        .map(|s| {
            // Each node stores the fence it granted; the holder was given the largest of a
            // quorum's (see the module docs). Show that one, as the holder sees it.
            let mut agreed = (*s).clone();
            for held in &mut agreed.holders {
                held.fence = states
                    .iter()
                    .flat_map(|s| &s.holders)
                    .filter(|h| h.token == held.token)
                    .filter_map(|h| h.fence)
                    .max();
            }
            agreed
        })
}

/// Every lock under `prefix` whose key matches the glob `pattern` on a Redlock over `nodes`
/// (each lock surveyed with `node_timeout` per node, within `timeout`): every key any node has,
/// surveyed (as a majority sees it, with each node's view; a lock in a split is listed as
/// one; `histories`: free ones too, when some node keeps their history), and the nodes that
/// did not answer. An error when too few answered.
pub fn list(
    nodes: &[Connector],
    node_timeout: Duration,
    timeout: Duration,
    (prefix, pattern): (&str, &str),
    histories: bool,
) -> Result<Listing, BackendError> {
    let mut names: Vec<LockName> = Vec::new();
    let mut newer: Vec<NewerLock> = Vec::new();
    let mut silent = Vec::new();
    for node in nodes {
        match protocol::list(node, prefix, pattern, histories) {
            Ok(found) => {
                for (name, _) in found.locks {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                // A lock of a newer protocol on any node: not ours to survey.
                for lock in found.newer {
                    if !newer.iter().any(|n| n.name == lock.name) {
                        newer.push(lock);
                    }
                }
            }
            Err(e) => silent.push((node.display().to_owned(), e)),
        }
    }
    let needed = quorum(nodes.len());
    let answered = nodes.len() - silent.len();
    if answered < needed {
        return Err(BackendError::NoQuorum(Box::new(NoQuorum {
            answered,
            nodes: nodes.len(),
            needed,
            failed: silent,
        })));
    }
    names.retain(|name| !newer.iter().any(|n| n.name == *name));
    names.sort_by(|a, b| a.key().cmp(b.key()));
    newer.sort_by(|a, b| a.name.key().cmp(b.name.key()));
    let mut locks = Vec::new();
    for name in names {
        let mut lock = Redlock::new(name.clone(), nodes, node_timeout);
        match lock.survey(&Budget::within(timeout)) {
            Ok(Survey {
                agreed: Some(state),
                ..
            }) if state.is_free() && state.waiters.is_empty() && !histories => {}
            Ok(survey) => locks.push((name, survey)),
            Err(BackendError::Reply(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Listing {
        locks,
        silent,
        newer,
    })
}

impl NodeFailure {
    /// The warning about this node: which node, why, and how many more failures the lock
    /// survives now (the one thing an operator who believes it survives one failure must learn).
    pub fn warning(&self) -> String {
        let margin = node_margin(self.answered, self.needed);
        // A node's time to answer is --node-timeout, not --redis-timeout.
        let hint = if self.error.is_timeout() {
            Some("raise --node-timeout if the node is just slow")
        } else {
            self.error.hint()
        };
        let hint = hint.map(|h| format!("; {h}")).unwrap_or_default();
        format!(
            "Redis node {} failed ({}); the lock goes on with the {} of {} nodes that answered (a \
             Redlock of {} needs {}), but {margin}{hint}",
            sanitize(&self.address),
            self.error,
            self.answered,
            self.nodes,
            self.nodes,
            self.needed
        )
    }
}

impl Answering {
    /// Which nodes answered, for `-v`: `2 of the 3 Redis nodes (a Redlock needs 2):
    /// redis://a redis://b; not redis://c`.
    pub fn summary(&self) -> String {
        let mut text = format!(
            "{} of the {} Redis nodes (a Redlock needs {}): {}",
            self.answered.len(),
            self.answered.len() + self.silent.len(),
            self.needed,
            self.answered.join(" ")
        );
        if !self.silent.is_empty() {
            text.push_str(&format!("; not {}", self.silent.join(" ")));
        }
        sanitize(&text)
    }
}

/// What a Redlock can still lose when `answered` of its nodes answer and it needs `needed`:
/// `one more node failure stops it`, `it survives 2 more node failures`.
pub fn node_margin(answered: usize, needed: usize) -> String {
    match answered.saturating_sub(needed) {
        0 => "one more node failure stops it".to_owned(),
        1 => "it survives one more node failure".to_owned(),
        n => format!("it survives {n} more node failures"),
    }
}
