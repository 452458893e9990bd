//! Reentrancy: a `run` (or `acquire`) of a lock that one of its ancestors holds.
//!
//! `deploy.sh` runs under `distlock run -k deploy` and calls `migrate.sh`, which takes the same
//! lock: without this, the nested run would wait for its own parent until its `--wait` ran out.
//! So `run` tells its command, in `DISTLOCK_HELD`, which locks it runs under: a JSON array of
//! `{"lock", "token", "fence", "limit"}`, where `lock` names the Redis deployment (the kind of
//! topology and the addresses, passwords redacted: [`Lock::deployment`]) and the lock's Redis
//! key, so that only the same lock on the same servers matches.
//! A nested run of a listed lock checks that the token still holds it (one read-only request),
//! then `exec`s its command in place: it stays in the outer run's process group, so the outer
//! run's renewals and kill deadline cover it, and nothing is taken or released twice. If the
//! lock is no longer held, the command does not start (exit 124). A nested `acquire` prints
//! the held token. Nested runs of other locks work as before, and add their own entry.
//!
//! A CI job's later steps hold a lock differently: `acquire --env-file` gave them
//! `DISTLOCK_KEY`, `DISTLOCK_TOKEN` (and `DISTLOCK_PREFIX`) as plain variables, which cannot
//! name the servers. A `run` or `acquire` of that key and prefix asks Redis whether that token
//! holds the lock here: if it does, it reenters; if not (another deployment, or the lock is
//! gone), it takes the lock as usual.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

use serde::{Deserialize, Serialize};

use crate::backend::Budget;
use crate::error::Error;
use crate::exit::{Code, Exit};
use crate::lock::{Lock, Token};
use crate::output::{Ev, Msg, Output};

/// The environment variable that lists the locks a command runs under.
pub const VAR: &str = "DISTLOCK_HELD";

/// Where an ancestor's lock was learned from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `DISTLOCK_HELD`, from a `run` that holds it: if it is gone, the nested run must not run.
    Run,
    /// `DISTLOCK_KEY`/`DISTLOCK_TOKEN`, from `acquire --env-file`: a candidate, checked.
    EnvFile,
}

/// A lock held by an ancestor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// The deployment and the Redis key: `redis://host:6379 distlock:{deploy}`.
    pub lock: String,
    /// Its holder's token.
    pub token: String,
    /// Its fence.
    pub fence: u64,
    /// Its limit (1: a mutex, or held exclusively; 0: held shared, `--shared`).
    pub limit: u32,
}

/// `DISTLOCK_MODE` for a lock held with `limit`: `shared` (a reader) or `exclusive`.
pub fn mode(limit: u32) -> &'static str {
    if limit == 0 { "shared" } else { "exclusive" }
}

/// What names a lock across processes: its deployment (the kind of topology and the servers'
/// addresses, passwords redacted: [`Lock::deployment`]) and the Redis key (prefix and key).
pub fn lock_id(lock: &dyn Lock) -> String {
    format!("{} {}", lock.deployment(), lock.name().lock_key())
}

/// The locks the environment says this process runs under (none if the variable is unset or
/// not ours to read).
pub fn inherited() -> Vec<Held> {
    std::env::var(VAR)
        .ok()
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default()
}

/// The entry for `lock`, if an ancestor holds it, and where that was learned.
pub fn held_by_ancestor(lock: &dyn Lock, prefix: &str) -> Option<(Held, Source)> {
    let id = lock_id(lock);
    if let Some(held) = inherited().into_iter().find(|held| held.lock == id) {
        return Some((held, Source::Run));
    }
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let same_prefix =
        var("DISTLOCK_PREFIX").map_or(prefix == crate::lock::DEFAULT_PREFIX, |p| p == prefix);
    match (var("DISTLOCK_KEY"), var("DISTLOCK_TOKEN")) {
        (Some(key), Some(token)) if key == lock.name().key() && same_prefix => Some((
            Held {
                lock: id,
                token,
                fence: 0,
                limit: 0,
            },
            Source::EnvFile,
        )),
        _ => None,
    }
}

/// The keys of `lock` that come before a key an ancestor holds on the same deployment (key
/// order, as a set takes its keys): `(ours, the ancestor's)`, each key as typed. Waiting for
/// such a key while the ancestor holds the later one inverts the order every set keeps, so
/// a run that takes both (`-k a -k b`) and holds the first can deadlock with this one.
pub fn inversions(lock: &dyn Lock) -> Vec<(String, String)> {
    let inherited = inherited();
    if inherited.is_empty() {
        return Vec::new();
    }
    let ours: Vec<(String, String)> = {
        let members = lock.members();
        if members.is_empty() {
            vec![(lock.name().key().to_owned(), lock_id(lock))]
        } else {
            (members.into_iter())
                .map(|m| (m.name.key().to_owned(), m.id))
                .collect()
        }
    };
    // "deployment lock-key": the lock key is the last word (keys hold no whitespace).
    let split = |id: &str| {
        id.rsplit_once(' ')
            .map(|(d, k)| (d.to_owned(), k.to_owned()))
    };
    let mut found = Vec::new();
    for (key, id) in &ours {
        let Some((deployment, lock_key)) = split(id) else {
            continue;
        };
        for held in &inherited {
            let Some((their_deployment, their_key)) = split(&held.lock) else {
                continue;
            };
            let ours_too = ours.iter().any(|(_, id)| *id == held.lock);
            if their_deployment == deployment
                && their_key.as_bytes() > lock_key.as_bytes()
                && !ours_too
            {
                // The key as typed: between the braces of its hash tag.
                let typed = (their_key.rsplit_once('{'))
                    .and_then(|(_, rest)| rest.strip_suffix('}'))
                    .unwrap_or(&their_key);
                found.push((key.clone(), typed.to_owned()));
            }
        }
    }
    found
}

/// `DISTLOCK_HELD` for the command of a run that holds `ours`: the inherited entries and ours.
pub fn with(ours: Held) -> String {
    let mut held: Vec<Held> = inherited()
        .into_iter()
        .filter(|h| h.lock != ours.lock)
        .collect();
    held.push(ours);
    serde_json::to_string(&held).unwrap_or_else(|_| "[]".into())
}

/// `DISTLOCK_HELD` for the command of a run that holds every lock of `ours` (one per key of a
/// set): the inherited entries and ours.
pub fn with_all(ours: Vec<Held>) -> String {
    let mut held: Vec<Held> = inherited()
        .into_iter()
        .filter(|h| ours.iter().all(|o| o.lock != h.lock))
        .collect();
    held.extend(ours);
    serde_json::to_string(&held).unwrap_or_else(|_| "[]".into())
}

/// What a nested run does.
pub enum Nested {
    /// Run under the ancestor's lock: its fence.
    Reenter(u64),
    /// Take the lock as usual (an env-file candidate that does not hold it here).
    Take,
    /// End with this (the ancestor's lock is gone).
    Exit(Exit),
}

/// Check that the ancestor's token still holds the lock (and that this run asked for the same
/// limit), and say what the nested run does.
pub fn check(
    lock: &mut dyn Lock,
    (held, source): &(Held, Source),
    limit: u32,
    timeout: std::time::Duration,
    out: &Output,
) -> Result<Nested, Error> {
    let key = crate::text::quote(lock.name().key());
    // Shared in shared, and anything in exclusive, reenter; exclusive in shared would wait
    // for itself (its own ancestor holds the key shared): refused at once.
    if *source == Source::Run && held.limit == 0 && limit == 1 {
        return Err(Error::Conflict(format!(
            "lock {key} is held shared by the run that started this one, and this run asked for \
             it exclusively: it would wait for itself; add --shared to this run, or take the lock \
             without --shared in the outer run"
        )));
    }
    if *source == Source::Run && held.limit != limit && !(held.limit == 1 && limit == 0) {
        return Err(Error::Conflict(format!(
            "lock {key} is held by the run that started this one with --limit {}, but this run \
             asked for --limit {limit}; a nested run must use the same --limit",
            held.limit
        )));
    }
    match lock.holds(&Token::from_text(&held.token), &Budget::within(timeout)) {
        Ok(Some(fence)) => Ok(Nested::Reenter(fence)),
        Ok(None) if *source == Source::EnvFile => Ok(Nested::Take),
        Ok(None) => {
            out.error(
                Ev::Lost,
                Msg::new(format!(
                    "lock {key} is no longer held by the run that started this one (it expired, \
                     was released or broken); the command was not started"
                ))
                .exit(Code::LockLost.get()),
            );
            Ok(Nested::Exit(Exit::from(Code::LockLost)))
        }
        Err(source) => Err(Error::redis(
            format!("cannot check lock {key}, held by the run that started this one"),
            lock.describe(),
            source,
        )),
    }
}

/// Replace this process with the command (it runs under the ancestor's lock, in its process
/// group), telling it the lock's key, token and fence as `run` does. Returns only if exec
/// failed.
pub fn exec(
    program: &std::path::Path,
    argv: &[OsString],
    key: &str,
    held: &Held,
    fence: u64,
) -> Error {
    let env = [
        ("DISTLOCK_KEY".to_owned(), key.to_owned()),
        ("DISTLOCK_TOKEN".to_owned(), held.token.clone()),
        ("DISTLOCK_FENCE".to_owned(), fence.to_string()),
        ("DISTLOCK_MODE".to_owned(), mode(held.limit).to_owned()),
        // The numbered variables of a run of one key, replacing an outer set's: its key 0
        // may be another key.
        ("DISTLOCK_KEYS".to_owned(), key.to_owned()),
        ("DISTLOCK_KEY0".to_owned(), key.to_owned()),
        ("DISTLOCK_TOKEN0".to_owned(), held.token.clone()),
        ("DISTLOCK_FENCE0".to_owned(), fence.to_string()),
        ("DISTLOCK_MODE0".to_owned(), mode(held.limit).to_owned()),
    ];
    let others: Vec<String> = (1..crate::config::MAX_KEYS)
        .flat_map(|i| ["KEY", "TOKEN", "FENCE", "MODE"].map(|name| format!("DISTLOCK_{name}{i}")))
        .collect();
    let unset: Vec<&str> = others.iter().map(String::as_str).collect();
    exec_with(program, argv, &env, &unset)
}

/// As [`exec`], with the variables `env` set and `unset` removed.
pub fn exec_with(
    program: &std::path::Path,
    argv: &[OsString],
    env: &[(String, String)],
    unset: &[&str],
) -> Error {
    let mut command = std::process::Command::new(program);
    for name in unset {
        command.env_remove(name);
    }
    command.envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(arg0) = argv.first() {
        command.arg0(arg0);
    }
    command.args(argv.iter().skip(1));
    let err = command.exec();
    let name = argv
        .first()
        .map_or_else(|| "the command".to_owned(), |a| crate::text::quote_os(a));
    match err.kind() {
        std::io::ErrorKind::NotFound => Error::NotFound(format!("command not found: {name}")),
        std::io::ErrorKind::PermissionDenied => Error::CannotExecute(format!(
            "cannot execute {name}: permission denied (is it executable, and not a directory?)"
        )),
        _ => Error::CannotExecute(format!("cannot execute {name}: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_replace_their_own_lock() {
        let a = Held {
            lock: "redis://h:6379 distlock:{a}".into(),
            token: "t1".into(),
            fence: 7,
            limit: 1,
        };
        let text = serde_json::to_string(&vec![a.clone()]).unwrap();
        let back: Vec<Held> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, vec![a]);
        assert!(text.contains("\"lock\":\"redis://h:6379 distlock:{a}\""));
    }
}
