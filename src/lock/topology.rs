//! Where locks live ([`Topology`]: one primary, or the independent primaries of a Redlock),
//! and what is asked of a whole deployment rather than of one lock: opening a lock there,
//! listing its locks, what it refuses, how it is named in messages. It only dispatches: what
//! each algorithm can do is said by its own module ([`super::single`], [`super::redlock`]).

use std::time::Duration;

use super::redlock::{self, Redlock};
use super::{Lock, LockName, Survey, protocol, single};
use crate::backend::{BackendError, Connector};

/// Where locks live: everything [`open`] needs besides the lock's name.
#[derive(Clone, Debug)]
pub enum Topology {
    /// One primary (addressed directly, or through Sentinel or Cluster: finding it is the
    /// connector's business).
    Single(Box<Connector>),
    /// Independent primaries: a Redlock over them.
    Redlock {
        /// One connector per primary.
        nodes: Vec<Connector>,
        /// Each node's time to answer one request.
        node_timeout: Duration,
    },
}

impl Topology {
    /// The servers, for messages (passwords redacted).
    pub fn describe(&self) -> String {
        match self {
            Topology::Single(server) => server.display().to_owned(),
            Topology::Redlock { nodes, .. } => describe_servers(nodes),
        }
    }

    /// What this deployment cannot keep of what a take asks (`supersede`: a place in line that
    /// cancels the waiters ahead; `limit`: a semaphore's), as a usage error's text; `None` when
    /// it keeps both. Each algorithm says for itself (`Redlock::refuses`).
    pub fn refuses(&self, supersede: bool, limit: u32) -> Option<String> {
        match self {
            Topology::Single(_) => None,
            Topology::Redlock { nodes, .. } => Redlock::refuses(nodes.len(), supersede, limit),
        }
    }

    /// The per-request timeout (`--redis-timeout`).
    pub fn timeout(&self) -> Duration {
        match self {
            Topology::Single(server) => server.timeout(),
            Topology::Redlock { nodes, .. } => nodes
                .iter()
                .map(Connector::timeout)
                .max()
                .unwrap_or(Duration::from_secs(2)),
        }
    }
}

/// The lock `name` on `topology`. Connects on first use.
pub fn open(name: LockName, topology: &Topology) -> Box<dyn Lock> {
    match topology {
        Topology::Single(server) => Box::new(single::SingleNode::new(name, (**server).clone())),
        Topology::Redlock {
            nodes,
            node_timeout,
        } => Box::new(Redlock::new(name, nodes, *node_timeout)),
    }
}

/// The lock over every key of `names` on `topology` (a [`super::set::LockSet`] for several,
/// taken in key order; the lock of that key for one). Connects on first use.
/// Each name comes with its own limit when it differs from the request's (a set of mixed
/// modes: a shared key, 0, among exclusive ones); one key never has one.
pub fn open_set(names: &[(LockName, Option<u32>)], topology: &Topology) -> Box<dyn Lock> {
    match names {
        [(one, _)] => open(one.clone(), topology),
        _ => Box::new(super::set::LockSet::with_limits(
            names
                .iter()
                .map(|(n, limit)| (open(n.clone(), topology), *limit))
                .collect(),
        )),
    }
}

/// The set of `held` keys on `topology`, each held with its token (`renew` and `release` of
/// what `acquire --env-file` wrote).
pub fn open_held(held: Vec<(LockName, super::Token)>, topology: &Topology) -> Box<dyn Lock> {
    Box::new(super::set::LockSet::held_with(
        held.into_iter()
            .map(|(name, token)| (open(name, topology), token))
            .collect(),
    ))
}

/// What `list` found.
#[derive(Debug, Default)]
pub struct Listing {
    /// Every lock under the prefix whose key matches, held or waited for, with what is known
    /// about it.
    pub locks: Vec<(LockName, Survey)>,
    /// Each node of a Redlock that did not answer (a majority did): its address (passwords
    /// redacted) and why.
    pub silent: Vec<(String, BackendError)>,
    /// The locks stored in a newer protocol than this distlock speaks (on a Redlock: on any
    /// node), which it cannot read: only their names and protocols.
    pub newer: Vec<NewerLock>,
}

/// A lock whose protocol marker names a newer protocol (see `lua/protocol.lua`).
#[derive(Clone, Debug, PartialEq)]
pub struct NewerLock {
    pub name: LockName,
    /// The protocol its marker names, as the script reported it (sanitised there).
    pub protocol: String,
}

/// Every lock under `prefix` whose key matches the glob `pattern` and that is held or waited
/// for (`histories`: or that keeps a history), with what is known about it. On a Redlock:
/// every key any node has, surveyed (as a majority sees it, with each node's view; a lock in a
/// split is listed as one), and the nodes that did not answer.
pub fn list(
    topology: &Topology,
    prefix: &str,
    pattern: &str,
    histories: bool,
) -> Result<Listing, BackendError> {
    match topology {
        Topology::Single(server) => {
            let found = protocol::list(server, prefix, pattern, histories)?;
            Ok(Listing {
                locks: (found.locks.into_iter())
                    .map(|(name, state)| {
                        let survey = Survey {
                            agreed: Some(state),
                            nodes: Vec::new(),
                        };
                        (name, survey)
                    })
                    .collect(),
                silent: Vec::new(),
                newer: found.newer,
            })
        }
        Topology::Redlock {
            nodes,
            node_timeout,
        } => redlock::list(
            nodes,
            *node_timeout,
            topology.timeout(),
            (prefix, pattern),
            histories,
        ),
    }
}

/// Servers for messages: each one's address (passwords redacted), separated by spaces. The
/// one rendering of a Redlock's nodes, for its topology and for the lock alike.
pub(super) fn describe_servers<'a>(servers: impl IntoIterator<Item = &'a Connector>) -> String {
    servers
        .into_iter()
        .map(Connector::display)
        .collect::<Vec<_>>()
        .join(" ")
}
