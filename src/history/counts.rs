//! A lock's counters, for `distlock metrics`: how many of each event its history recorded and
//! how long waits and holds took, as bucket counts, kept beside the history by the scripts
//! that record it (`lock/lua/history.lua`), so that they count every event, also the ones the
//! stream's cap dropped. Reading them from every server that may hold them, and a Redlock's
//! majority view, is here; turning them into the exposition format is `commands::metrics`'.

use std::time::Instant;

use crate::backend::{BackendError, Connector, Reply, Script};
use crate::lock::{LockName, Topology};

/// Read a lock's counters (see `lua/counts.lua`).
static COUNTS: Script = Script::new(include_str!("lua/counts.lua"));

/// The events counted, sorted (the history's event kinds).
pub const EVENTS: [&str; 7] = [
    "acquired",
    "broken",
    "expired",
    "gave-up",
    "lost",
    "released",
    "superseded",
];

/// The histograms' upper bounds in seconds, as `H_BUCKETS` in `lock/lua/history.lua` names
/// them, and the rest.
pub const BUCKETS: [&str; 10] = [
    "0.1", "1", "10", "60", "300", "900", "3600", "14400", "86400", "+Inf",
];

/// How long something took, counted per bucket (each bucket alone, not cumulative).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    /// How many took at most `BUCKETS[i]` and more than the bound before it.
    pub buckets: [u64; BUCKETS.len()],
    /// Their sum, in ms.
    pub sum_ms: u64,
}

/// A lock's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// How many of each of [`EVENTS`].
    pub events: [u64; EVENTS.len()],
    /// How long each `acquired` waited.
    pub wait: Histogram,
    /// How long each hold lasted (`released`, `lost`, `expired`, `broken`).
    pub hold: Histogram,
    /// When a run last succeeded (ms since the epoch, Redis clock); 0: never recorded.
    pub last_ok_ms: u64,
}

/// How many numbers a [`Counts`] holds (for a Redlock's majority, number by number).
const VALUES: usize = EVENTS.len() + 2 * (BUCKETS.len() + 1) + 1;

impl Counts {
    /// The counters among a history's hash fields (other fields are ignored).
    pub fn from_fields<'a>(fields: impl IntoIterator<Item = (&'a str, &'a str)>) -> Counts {
        let mut values = [0u64; VALUES];
        for (name, value) in fields {
            let index = if let Some(event) = name.strip_prefix("_n:") {
                EVENTS.iter().position(|e| *e == event)
            } else {
                let bucket = |prefix: &str, base: usize| {
                    let le = name.strip_prefix(prefix)?;
                    if le == "_ms" {
                        return Some(base + BUCKETS.len());
                    }
                    let le = le.strip_prefix(':')?;
                    Some(base + BUCKETS.iter().position(|b| *b == le)?)
                };
                bucket("_wait", EVENTS.len())
                    .or_else(|| bucket("_hold", EVENTS.len() + BUCKETS.len() + 1))
                    .or_else(|| (name == "_ok_ms").then_some(VALUES - 1))
            };
            if let (Some(i), Ok(n)) = (index, value.parse::<u64>()) {
                values[i] = n;
            }
        }
        Counts::from_values(&values)
    }

    fn values(&self) -> [u64; VALUES] {
        let mut values = [0u64; VALUES];
        let mut at = 0;
        let mut put = |v: &[u64]| {
            values[at..at + v.len()].copy_from_slice(v);
            at += v.len();
        };
        put(&self.events);
        put(&self.wait.buckets);
        put(&[self.wait.sum_ms]);
        put(&self.hold.buckets);
        put(&[self.hold.sum_ms, self.last_ok_ms]);
        values
    }

    fn from_values(values: &[u64; VALUES]) -> Counts {
        let mut counts = Counts::default();
        let (events, rest) = values.split_at(EVENTS.len());
        counts.events.copy_from_slice(events);
        let (wait, rest) = rest.split_at(BUCKETS.len());
        counts.wait.buckets.copy_from_slice(wait);
        counts.wait.sum_ms = rest[0];
        let (hold, rest) = rest[1..].split_at(BUCKETS.len());
        counts.hold.buckets.copy_from_slice(hold);
        counts.hold.sum_ms = rest[0];
        counts.last_ok_ms = rest[1];
        counts
    }

    /// What a majority of `nodes` reached (each number the largest that `needed` of them reach;
    /// fewer answers: the smallest): each node counted what it granted.
    pub fn majority(nodes: &[Counts], needed: usize) -> Counts {
        let per_node: Vec<[u64; VALUES]> = nodes.iter().map(Counts::values).collect();
        let mut values = [0u64; VALUES];
        for (i, value) in values.iter_mut().enumerate() {
            let mut seen: Vec<u64> = per_node.iter().map(|v| v[i]).collect();
            seen.sort_unstable_by(|a, b| b.cmp(a));
            *value = seen
                .get(needed.clamp(1, seen.len().max(1)) - 1)
                .copied()
                .unwrap_or(0);
        }
        Counts::from_values(&values)
    }
}

/// The counters of each lock of `names` that keeps a history (`None`: none), read from the
/// server that holds it (its Cluster primary), or from every node of a Redlock (a node that
/// does not answer is left out; the others give the majority view).
pub fn read(topology: &Topology, names: &[LockName]) -> Result<Vec<Option<Counts>>, BackendError> {
    match topology {
        Topology::Single(server) => read_server(server, names),
        Topology::Redlock { nodes, .. } => {
            let per_node: Vec<Vec<Option<Counts>>> = nodes
                .iter()
                .filter_map(|node| read_server(node, names).ok())
                .collect();
            let needed = nodes.len() / 2 + 1;
            Ok((0..names.len())
                .map(|i| {
                    let kept: Vec<Counts> = per_node.iter().filter_map(|n| n[i]).collect();
                    (!kept.is_empty()).then(|| {
                        let mut all = kept;
                        // A node without the history counted nothing.
                        all.resize(per_node.len(), Counts::default());
                        Counts::majority(&all, needed)
                    })
                })
                .collect())
        }
    }
}

/// The counters on one server (or Cluster).
fn read_server(
    server: &Connector,
    names: &[LockName],
) -> Result<Vec<Option<Counts>>, BackendError> {
    let cluster = server.is_cluster();
    let mut node = server.node();
    let mut all = Vec::with_capacity(names.len());
    for name in names {
        let key = &super::keys(name)[1];
        if cluster {
            node = server.for_key(key).node();
        }
        let deadline = Instant::now() + server.timeout();
        let reply = match node.eval(&COUNTS, &[key.as_str()], &[], deadline) {
            Ok(reply) => reply,
            // A key of another type that happens to match: no history.
            Err(e) if e.is_wrong_type() => Vec::new(),
            Err(e) => return Err(e),
        };
        let text: Vec<String> = reply.iter().filter_map(Reply::as_text).collect();
        all.push((!text.is_empty()).then(|| {
            Counts::from_fields(
                text.chunks(2)
                    .filter_map(|pair| Some((pair.first()?.as_str(), pair.get(1)?.as_str()))),
            )
        }));
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Counts {
        Counts::from_fields(pairs.iter().copied())
    }

    #[test]
    fn the_buckets_are_the_scripts() {
        let script = concat!(
            include_str!("../lock/lua/history.lua"),
            include_str!("../lock/lua/lost.lua")
        );
        for le in &BUCKETS[..BUCKETS.len() - 1] {
            assert!(script.contains(&format!("'{le}'}}")), "{le}");
        }
        for event in EVENTS {
            assert!(script.contains(&format!("'{event}'")), "{event}");
        }
    }

    #[test]
    fn counters_are_read_by_name_and_the_rest_ignored() {
        let counts = fields(&[
            ("_n:acquired", "1002"),
            ("_n:gave-up", "3"),
            ("_n:unknown", "9"),
            ("_wait:0.1", "1000"),
            ("_wait:+Inf", "2"),
            ("_wait:7", "5"),
            ("_wait_ms", "12345"),
            ("_hold:86400", "4"),
            ("_hold_ms", "99"),
            ("_ok_ms", "1764300000123"),
            ("_history_ms", "3600000"),
            ("_w:abc", "{}"),
            ("3f2a9c1e-token", "{\"acquired_at\":\"1\"}"),
            ("_n:lost", "not a number"),
        ]);
        assert_eq!(counts.events, [1002, 0, 0, 3, 0, 0, 0]);
        assert_eq!(counts.wait.buckets, [1000, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        assert_eq!(counts.wait.sum_ms, 12345);
        assert_eq!(counts.hold.buckets[8], 4);
        assert_eq!(counts.hold.sum_ms, 99);
        assert_eq!(counts.last_ok_ms, 1_764_300_000_123);
        assert_eq!(Counts::from_values(&counts.values()), counts);
    }

    #[test]
    fn a_majority_takes_what_enough_nodes_reached() {
        let node = |n: &str, ok: &str| fields(&[("_n:acquired", n), ("_ok_ms", ok)]);
        let nodes = [node("10", "500"), node("12", "400"), node("3", "600")];
        let agreed = Counts::majority(&nodes, 2);
        assert_eq!(agreed.events[0], 10);
        assert_eq!(agreed.last_ok_ms, 500);
        // Fewer answers than needed: what all of them reached.
        assert_eq!(Counts::majority(&nodes[..1], 2).events[0], 10);
        assert_eq!(Counts::majority(&[], 2), Counts::default());
    }
}
