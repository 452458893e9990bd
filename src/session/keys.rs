//! The keys a grant holds, as its command (or an `acquire --env-file`) is told: one key's
//! variables (`DISTLOCK_KEY`, ...) are `run`'s; these are every run's and every set's
//! (`DISTLOCK_KEYS`, `DISTLOCK_KEY<i>`, ...), numbered from 0 in the order the keys were typed.

use crate::config::TakeConfig;
use crate::lock::{self, Grant, Lock};
use crate::session::reenter;

/// One key a run holds, as its command is told.
pub struct HeldKey {
    /// The key, as typed.
    pub key: String,
    /// The token it is held with.
    pub token: lock::Token,
    /// Its fence.
    pub fence: u64,
    /// What names it across processes ([`reenter::lock_id`]).
    pub id: String,
    /// Its limit (0: held shared; see [`reenter::mode`]).
    pub limit: u32,
}

/// Every key a grant holds, in the order typed (a set's members come in key order).
pub fn held_keys(lock: &dyn Lock, grant: &Grant, take: &TakeConfig) -> Vec<HeldKey> {
    let members = lock.members();
    if members.is_empty() {
        return vec![HeldKey {
            key: take.name.key().to_owned(),
            token: grant.token.clone(),
            fence: grant.fence,
            id: reenter::lock_id(lock),
            limit: take.limit,
        }];
    }
    take.keys
        .iter()
        .filter_map(|name| {
            let member = members.iter().find(|m| m.name == *name)?;
            Some(HeldKey {
                key: name.key().to_owned(),
                token: member.token.clone().unwrap_or_else(|| grant.token.clone()),
                fence: member.fence.unwrap_or(grant.fence),
                id: member.id.clone(),
                limit: take.limit_of(name),
            })
        })
        .collect()
}

/// `DISTLOCK_KEYS` (space-separated, in the order typed) and, per key `i` from 0 in that
/// order, `DISTLOCK_KEY<i>`, `DISTLOCK_FENCE<i>`, `DISTLOCK_TOKEN<i>` and `DISTLOCK_MODE<i>`
/// (each key's mode: `shared` or `exclusive`, [`reenter::mode`]).
pub fn key_env(keys: &[HeldKey]) -> Vec<(String, String)> {
    let names: Vec<&str> = keys.iter().map(|k| k.key.as_str()).collect();
    let mut env = vec![("DISTLOCK_KEYS".to_owned(), names.join(" "))];
    for (i, k) in keys.iter().enumerate() {
        env.push((format!("DISTLOCK_KEY{i}"), k.key.clone()));
        env.push((format!("DISTLOCK_FENCE{i}"), k.fence.to_string()));
        env.push((format!("DISTLOCK_TOKEN{i}"), k.token.as_str().to_owned()));
        env.push((
            format!("DISTLOCK_MODE{i}"),
            reenter::mode(k.limit).to_owned(),
        ));
    }
    env
}
