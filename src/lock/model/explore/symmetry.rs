//! Symmetry reduction: clients with the same spec are interchangeable, so a state and the
//! state with such clients renamed (their places in `State::clients` swapped and their tokens
//! renamed to match, in the keyspace and everywhere else) are one state, visited once.
//!
//! Why it is sound: the explorer treats clients alike but for their spec (`World::actions` and
//! `World::step` take a client by index and find one by its token; the invariants and the
//! `Sometimes` are the same for every client), the tokens (`c0`, `c1`, ...) have the same
//! length, and the scripts only compare tokens for equality: they never order them, and where
//! Redis orders by member (sorted-set members with the same score: places in line ending in the
//! same millisecond, slots expiring together) they treat every member alike (purge them all,
//! or read the score only). The one exception is a semaphore's first holder in a waiter's reply
//! (`holders_view`, the soonest-expiring slot, ties broken by member): configurations with
//! slots do not use the reduction. So the states reachable from a renamed state are the
//! renamed states reachable from it, and an invariant broken in one is broken in the other.
//!
//! How: each client gets a signature, a hash of its own state (without its token) and of every
//! place its token appears (the lock's value, a sorted set's score, a hash's field with its
//! position and value, its grants, the pending hand-off). Within each group of clients with the
//! same spec, the clients are ordered by signature, and the state is rebuilt in that order with
//! the tokens renamed (`c{new index}`), sorted sets re-sorted (ties by member); its hash is the
//! fingerprint. Symmetric states have the same signatures, so the same canonical form. Two
//! clients with the same signature are in the same place everywhere, so swapping them changes
//! nothing. Only the visited set uses the canonical form: the search keeps and extends the
//! states it actually reached, so a trace is a real run that replays as it is.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use super::{Client, State, World};
use crate::lock::model::{Entry, Keyspace, Score, Value};

/// A hash of `c`'s own state, without its token.
fn hash_client(c: &Client, h: &mut DefaultHasher) {
    c.phase.hash(h);
    c.next.hash(h);
    c.inflight.hash(h);
    c.orphan.hash(h);
    c.wake.hash(h);
    c.subscribed.hash(h);
    c.paused.hash(h);
    c.losses_left.hash(h);
    c.released.hash(h);
    c.spin.hash(h);
    c.no_expiry.hash(h);
}

/// The signature of the client with `token`: its own state and every place its token appears.
fn signature(s: &State, c: &Client) -> u64 {
    let token = c.token.as_bytes();
    let mut h = DefaultHasher::new();
    hash_client(c, &mut h);
    for (key, entry) in s.redis.keyspace.iter() {
        match &entry.value {
            Value::Str(v) => {
                if v == token {
                    (key, 0u8).hash(&mut h);
                }
            }
            Value::Hash(fields) => {
                for (at, (field, value)) in fields.iter().enumerate() {
                    if field == token {
                        (key, 1u8, at, value).hash(&mut h);
                    }
                    // No script stores a token as a hash's value: if one did, the renaming
                    // below would miss it.
                    debug_assert!(value != token, "a token stored as a value in {key:?}");
                }
            }
            Value::ZSet(members) => {
                for (score, member) in members {
                    if member == token {
                        (key, 2u8, score).hash(&mut h);
                    }
                }
            }
            // Doorbells hold messages, never tokens (and a world with doorbells has no
            // symmetry reduction: their keys name tokens).
            Value::List(_) => {}
        }
    }
    for (t, fence) in &s.grants {
        if t == &c.token {
            fence.hash(&mut h);
        }
    }
    if let Some((t, at)) = &s.handoff
        && t == &c.token
    {
        at.hash(&mut h);
    }
    h.finish()
}

/// The keyspace with its tokens renamed (`rename` maps old to new).
fn rename_keyspace(ks: &Keyspace, rename: &BTreeMap<Vec<u8>, Vec<u8>>) -> Keyspace {
    let name = |b: &Vec<u8>| rename.get(b).cloned().unwrap_or_else(|| b.clone());
    let mut out = Keyspace::default();
    for (key, entry) in ks.iter() {
        let value = match &entry.value {
            Value::Str(v) => Value::Str(name(v)),
            Value::Hash(fields) => {
                Value::Hash(fields.iter().map(|(f, v)| (name(f), v.clone())).collect())
            }
            Value::ZSet(members) => {
                let mut members: Vec<(Score, Vec<u8>)> =
                    members.iter().map(|(s, m)| (*s, name(m))).collect();
                members.sort();
                Value::ZSet(members)
            }
            Value::List(items) => Value::List(items.clone()),
        };
        out.insert(
            key,
            Entry {
                value,
                expires_at: entry.expires_at,
            },
        );
    }
    out
}

impl World {
    /// The groups of clients with the same spec (each in index order).
    pub(super) fn symmetric_groups(&self) -> Vec<Vec<usize>> {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (i, spec) in self.config.clients.iter().enumerate() {
            match groups
                .iter_mut()
                .find(|g| self.config.clients[g[0]] == *spec)
            {
                Some(g) => g.push(i),
                None => groups.push(vec![i]),
            }
        }
        groups
    }

    /// The hash of `s` for the set of visited states: of its canonical form under renaming of
    /// interchangeable clients (with `Config::symmetry`), or of `s` itself.
    pub(super) fn fingerprint(&self, s: &State) -> u64 {
        if !self.config.symmetry {
            return s.fingerprint();
        }
        // order[new index] = old index.
        let mut order: Vec<usize> = (0..s.clients.len()).collect();
        let signatures: Vec<u64> = s.clients.iter().map(|c| signature(s, c)).collect();
        for group in &self.groups {
            let mut sorted = group.clone();
            sorted.sort_by_key(|&i| signatures[i]);
            for (&at, &i) in group.iter().zip(&sorted) {
                order[at] = i;
            }
        }
        if order.iter().enumerate().all(|(new, &old)| new == old) {
            return s.fingerprint();
        }
        let rename: BTreeMap<Vec<u8>, Vec<u8>> = order
            .iter()
            .enumerate()
            .map(|(new, &old)| {
                (
                    s.clients[old].token.as_bytes().to_vec(),
                    s.clients[new].token.as_bytes().to_vec(),
                )
            })
            .collect();
        let name = |t: &String| -> String {
            rename
                .get(t.as_bytes())
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_else(|| t.clone())
        };
        let mut canonical = s.clone();
        canonical.clients = order
            .iter()
            .enumerate()
            .map(|(new, &old)| Client {
                token: s.clients[new].token.clone(),
                ..s.clients[old].clone()
            })
            .collect();
        canonical.redis.keyspace = rename_keyspace(&s.redis.keyspace, &rename);
        canonical.grants = s
            .grants
            .iter()
            .map(|(t, f)| (name(t), *f))
            .collect::<BTreeSet<_>>();
        canonical.handoff = s.handoff.as_ref().map(|(t, at)| (name(t), *at));
        canonical.fingerprint()
    }
}
