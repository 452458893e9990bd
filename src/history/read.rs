//! Reading histories: from the server that holds a lock (its Cluster primary, its Sentinel
//! primary), from every primary when no lock is named, and from every node of a Redlock, where
//! each node recorded what it granted and an event counts once a majority recorded it.

use std::collections::HashMap;
use std::time::Instant;

use crate::backend::{BackendError, Connector, NoQuorum, Reply, Script};
use crate::lock::{LockName, Topology};

use super::event::Event;

/// Read a history stream (see `lua/read.lua`).
static READ: Script = Script::new(include_str!("lua/read.lua"));
/// Delete a history (see `lua/clear.lua`).
static CLEAR: Script = Script::new(include_str!("lua/clear.lua"));

/// Copies of one event on different nodes of a Redlock are this close in time (ms) at most.
const SAME_EVENT_WITHIN_MS: u64 = 10_000;

/// What to read.
#[derive(Clone, Copy, Debug)]
pub struct Query<'a> {
    /// Where.
    pub topology: &'a Topology,
    /// The key prefix.
    pub prefix: &'a str,
    /// One lock, or every lock under the prefix.
    pub name: Option<&'a LockName>,
    /// Only events at or after this time (ms since the epoch).
    pub since_ms: Option<u64>,
    /// Only the newest this many (of each lock, as read; the caller keeps the newest overall).
    pub last: Option<usize>,
}

/// What was read, oldest first.
#[derive(Debug, Default)]
pub struct Found {
    /// The events (on a Redlock, each once, as a majority recorded it).
    pub events: Vec<Event>,
    /// On a Redlock: events that fewer than a majority of the nodes recorded (left out).
    pub minority: usize,
    /// On a Redlock: the nodes that did not answer (a majority did), and why.
    pub silent: Vec<(String, BackendError)>,
}

/// Every event the query selects, oldest first.
pub fn fetch(query: &Query<'_>) -> Result<Found, BackendError> {
    let mut found = match query.topology {
        Topology::Single(server) => Found {
            events: read_server(server, query)?,
            ..Found::default()
        },
        Topology::Redlock { nodes, .. } => {
            let mut per_node = Vec::new();
            let mut silent = Vec::new();
            for node in nodes {
                match read_server(node, query) {
                    Ok(events) => per_node.push(events),
                    Err(e) => silent.push((node.display().to_owned(), e)),
                }
            }
            let needed = nodes.len() / 2 + 1;
            if per_node.len() < needed {
                return Err(BackendError::NoQuorum(Box::new(NoQuorum {
                    answered: per_node.len(),
                    nodes: nodes.len(),
                    needed,
                    failed: silent,
                })));
            }
            let (events, minority) = majority(per_node, needed, nodes.len());
            Found {
                events,
                minority,
                silent,
            }
        }
    };
    sort(&mut found.events);
    if let Some(last) = query.last {
        let skip = found.events.len().saturating_sub(last);
        found.events.drain(..skip);
    }
    Ok(found)
}

/// Oldest first: by time, then by the order within one server's millisecond.
pub fn sort(events: &mut [Event]) {
    events.sort_by_key(|e| {
        let seq: u64 =
            e.id.split_once('-')
                .and_then(|(_, s)| s.parse().ok())
                .unwrap_or(0);
        (e.at_ms, seq)
    });
}

/// The history keys on one server (a Cluster: on each primary) that the query selects.
fn history_keys(
    server: &Connector,
    query: &Query<'_>,
) -> Result<Vec<(Connector, String)>, BackendError> {
    if let Some(name) = query.name {
        let key = super::keys(name)[0].clone();
        return Ok(vec![(server.for_key(&key), key)]);
    }
    let pattern = format!("{}:history", LockName::scan_pattern(query.prefix, "*"));
    let mut keys = Vec::new();
    for primary in server.primaries()? {
        for key in primary.node().scan(&pattern)? {
            if LockName::split(query.prefix, &key).is_some_and(|(_, rest)| rest == ":history") {
                let at = if server.is_cluster() {
                    server.for_key(&key)
                } else {
                    primary.clone()
                };
                keys.push((at, key));
            }
        }
    }
    Ok(keys)
}

/// Every selected event on one server (or Cluster).
fn read_server(server: &Connector, query: &Query<'_>) -> Result<Vec<Event>, BackendError> {
    let from = query
        .since_ms
        .map_or_else(|| "-".to_owned(), |ms| ms.to_string());
    // A Redlock keeps what a majority recorded: read more than asked, so that events only a
    // minority recorded do not crowd out the newest ones.
    let count = query.last.map_or(0, |n| match query.topology {
        Topology::Redlock { .. } => n.saturating_mul(2).saturating_add(20),
        Topology::Single(_) => n,
    });
    let count = count.to_string();
    let mut events = Vec::new();
    for (at, key) in history_keys(server, query)? {
        let deadline = Instant::now() + at.timeout();
        let reply = at.node().eval(
            &READ,
            &[key.as_str()],
            &[from.as_bytes(), count.as_bytes()],
            deadline,
        );
        let reply = match reply {
            Ok(reply) => reply,
            // A key of another type that happens to match: not a history.
            Err(e) if e.is_wrong_type() => continue,
            Err(e) => return Err(e),
        };
        events.extend(reply.iter().filter_map(Event::decode));
    }
    Ok(events)
}

/// The events a majority of the nodes recorded (each once, at the earliest time a node
/// recorded it, with how many nodes did), and how many events were left out.
fn majority(per_node: Vec<Vec<Event>>, needed: usize, nodes: usize) -> (Vec<Event>, usize) {
    // Groups of copies: the event (the first copy) and the nodes that recorded it.
    let mut groups: Vec<(Event, Vec<usize>)> = Vec::new();
    let mut by_identity: HashMap<(String, String, String, String), Vec<usize>> = HashMap::new();
    for (node, mut events) in per_node.into_iter().enumerate() {
        sort(&mut events);
        for event in events {
            let candidates = by_identity.entry(event.identity()).or_default();
            let joined = candidates.iter().copied().find(|&g| {
                let (first, seen) = &groups[g];
                !seen.contains(&node) && first.at_ms.abs_diff(event.at_ms) <= SAME_EVENT_WITHIN_MS
            });
            match joined {
                Some(g) => {
                    let group = &mut groups[g];
                    group.1.push(node);
                    let last = group.0.last_at_ms.unwrap_or(group.0.at_ms);
                    group.0.last_at_ms = Some(last.max(event.at_ms));
                    group.0.at_ms = group.0.at_ms.min(event.at_ms);
                }
                None => {
                    candidates.push(groups.len());
                    groups.push((event, vec![node]));
                }
            }
        }
    }
    let mut minority = 0;
    let mut kept = Vec::new();
    for (mut event, seen) in groups {
        if seen.len() >= needed {
            event.recorded_by = Some((seen.len(), nodes));
            event.last_at_ms = Some(event.last_at_ms.unwrap_or(event.at_ms));
            kept.push(event);
        } else {
            minority += 1;
        }
    }
    (kept, minority)
}

/// Delete the history of `name` everywhere it may be; returns how many servers had one.
pub fn clear(topology: &Topology, name: &LockName) -> Result<usize, BackendError> {
    let keys = super::keys(name);
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let servers = match topology {
        Topology::Single(server) => vec![server.for_key(name.lock_key())],
        Topology::Redlock { nodes, .. } => nodes.clone(),
    };
    let mut had = 0;
    for server in servers {
        let deadline = Instant::now() + server.timeout();
        let reply = server.node().eval(&CLEAR, &keys, &[], deadline)?;
        if reply.first().and_then(Reply::as_int).unwrap_or(0) > 0 {
            had += 1;
        }
    }
    Ok(had)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn event(at_ms: u64, kind: &str, token: &str) -> Event {
        let mut fields = BTreeMap::new();
        fields.insert("token".to_owned(), token.to_owned());
        Event {
            at_ms,
            id: format!("{at_ms}-0"),
            kind: kind.to_owned(),
            key: "k".to_owned(),
            fields,
            recorded_by: None,
            last_at_ms: None,
        }
    }

    #[test]
    fn a_majority_keeps_an_event_once_and_says_who_disagreed() {
        let nodes = vec![
            vec![
                event(1000, "acquired", "aaaa"),
                event(2000, "released", "aaaa"),
            ],
            vec![
                event(1003, "acquired", "aaaa"),
                event(2001, "released", "aaaa"),
            ],
            // The third node granted only a failed attempt of another token.
            vec![
                event(1500, "acquired", "bbbb"),
                event(1501, "released", "bbbb"),
            ],
        ];
        let (mut events, minority) = majority(nodes, 2, 3);
        sort(&mut events);
        assert_eq!(minority, 2);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].kind, "acquired");
        assert_eq!(events[0].at_ms, 1000);
        assert_eq!(events[0].last_at_ms, Some(1003));
        assert_eq!(events[0].recorded_by, Some((2, 3)));
        assert!(events[0].line(false).contains("recorded by 2 of 3 nodes"));
    }

    #[test]
    fn the_same_token_twice_is_two_events() {
        let nodes = vec![
            vec![
                event(1000, "acquired", "aaaa"),
                event(60_000, "acquired", "aaaa"),
            ],
            vec![
                event(1001, "acquired", "aaaa"),
                event(60_001, "acquired", "aaaa"),
            ],
        ];
        let (events, minority) = majority(nodes, 2, 2);
        assert_eq!((events.len(), minority), (2, 0));
        assert!(!events[0].line(false).contains("recorded by"));
    }
}
