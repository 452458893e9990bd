//! Hand-made surveys, for the tests of the view and of `break`.

use crate::lock::{HeldBy, LockState, NodeView, Survey};

/// What one server (or a majority) says of a lock in `state`.
pub fn agreed(state: LockState) -> Survey {
    Survey {
        agreed: Some(state),
        nodes: Vec::new(),
    }
}

/// A lock over several nodes that agree on nothing (a split): each node's address and what it
/// said (its state, or the error's text).
pub fn split(nodes: Vec<(&str, Result<LockState, String>)>) -> Survey {
    Survey {
        agreed: None,
        nodes: nodes
            .into_iter()
            .map(|(address, state)| NodeView {
                address: address.into(),
                state,
            })
            .collect(),
    }
}

/// What a node says that holds `holders` as a mutex, nobody waiting.
pub fn holding(holders: Vec<HeldBy>) -> LockState {
    LockState {
        holders,
        limit: 1,
        waiters: Vec::new(),
        now_ms: 0,
    }
}
