//! `distlock renew` and `distlock release`: the later steps of a lock taken with `acquire`.

use std::time::Duration;

use crate::backend::Budget;
use crate::error::Error;
use crate::exit::{Code, Exit};
use crate::lock::{self, Extended, Lock, LockName, Ownership, Token, Topology};
use crate::output::{Ev, Msg, Output};

/// The lock of `renew` or `release`: one key and its token, or a set's keys and tokens (then
/// not empty); how messages name it; and the lock.
type Held = (LockName, Token, Vec<(LockName, Token)>);

fn open((name, token, set): Held, topology: &Topology) -> (String, Token, Box<dyn Lock>) {
    if set.is_empty() {
        return (
            crate::text::quote(name.key()),
            token,
            lock::open(name, topology),
        );
    }
    let keys: Vec<&str> = set.iter().map(|(n, _)| n.key()).collect();
    let what = format!("set {}", crate::text::quote(&keys.join(" ")));
    (what, token, lock::open_held(set, topology))
}

/// Extend the lock to `ttl` from now (`None`: the TTL it was acquired with).
pub fn renew(
    topology: Topology,
    held: Held,
    ttl: Option<Duration>,
    out: &Output,
) -> Result<Exit, Error> {
    let budget = Budget::within(topology.timeout());
    let (key, token, mut lock) = open(held, &topology);
    let result = lock
        .extend(&token, ttl.unwrap_or(Duration::ZERO), &budget)
        .map(|extended| match extended {
            Extended::Held(_) | Extended::Replaced(..) => Ownership::Held,
            Extended::NotHeld => Ownership::NotHeld,
        })
        .and_then(|ownership| match ownership {
            // A renewal reads no more than the lock it holds (so that it goes through a
            // Cluster slot migration) and does not look at the layout's version: a lock it
            // does not hold may be one of a newer layout, which an inspection names.
            Ownership::NotHeld => match lock.inspect(&budget) {
                Err(e) if e.is_newer_protocol() => Err(e),
                _ => Ok(Ownership::NotHeld),
            },
            held => Ok(held),
        });
    crate::commands::warn_failed_nodes(lock.as_mut(), out);
    finish(
        result,
        lock.as_ref(),
        &key,
        ("renew", "renewed", Ev::Renewed),
        out,
    )
}

/// Release the lock: the work done under it is over, and succeeded unless `failed` (a lock
/// acquired with `--min-interval` or `--cooldown` then stays taken until the interval has
/// passed).
pub fn release(topology: Topology, held: Held, failed: bool, out: &Output) -> Result<Exit, Error> {
    let (key, token, mut lock) = open(held, &topology);
    if failed {
        // Recorded with the `released` event, so that the history (and `check
        // --crit-since-success`) does not count it as a success.
        crate::history::set_outcome("failed");
    }
    let budget = Budget::within(topology.timeout());
    let result = lock.release_after(&token, !failed, &budget);
    crate::commands::warn_failed_nodes(lock.as_mut(), out);
    finish(
        result,
        lock.as_ref(),
        &key,
        ("release", "released", Ev::Released),
        out,
    )
}

fn finish(
    result: Result<Ownership, crate::backend::BackendError>,
    lock: &dyn Lock,
    key: &str,
    (verb, done, ev): (&str, &str, Ev),
    out: &Output,
) -> Result<Exit, Error> {
    match result {
        Ok(Ownership::Held) => {
            out.verbose(ev, format!("{done} lock {key}"));
            Ok(Exit::from(Code::Success))
        }
        Ok(Ownership::NotHeld) => {
            // A set names the key it found gone (the others were acted on).
            let key = match lock.busy_key() {
                Some(gone) => format!("{} of {key}", crate::text::quote(&gone)),
                None => key.to_owned(),
            };
            out.error(
                Ev::NotHeld,
                Msg::new(format!(
                    "cannot {verb} lock {key}: it is not held with this token (it expired, was \
                     released or broken, or another process holds it now)"
                ))
                .exit(Code::NotHeld.get()),
            );
            Ok(Exit::from(Code::NotHeld))
        }
        Err(source) => Err(Error::redis(
            format!("cannot {verb} lock {key}"),
            lock.describe(),
            source,
        )),
    }
}
