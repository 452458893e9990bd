//! `distlock renew` and `distlock release`: the later steps of a lock taken with `acquire`.

use std::time::Duration;

use crate::backend::Connector;
use crate::commands::Exit;
use crate::error::Error;
use crate::exit;
use crate::lock::{Lock, LockName, Ownership, SingleNode, Token};
use crate::output::{self, Output};

/// Extend the lock to `ttl` from now (`None`: the TTL it was acquired with).
pub fn renew(
    connector: Connector,
    name: LockName,
    token: Token,
    ttl: Option<Duration>,
    out: &Output,
) -> Result<Exit, Error> {
    let key = output::quote(name.key());
    let mut lock = SingleNode::new(name, connector);
    let result = lock.extend(&token, ttl.unwrap_or(Duration::ZERO));
    finish(result, &lock, &key, ("renew", "renewed"), out)
}

/// Release the lock.
pub fn release(
    connector: Connector,
    name: LockName,
    token: Token,
    out: &Output,
) -> Result<Exit, Error> {
    let key = output::quote(name.key());
    let mut lock = SingleNode::new(name, connector);
    let result = lock.release(&token);
    finish(result, &lock, &key, ("release", "released"), out)
}

fn finish(
    result: Result<Ownership, crate::backend::BackendError>,
    lock: &SingleNode,
    key: &str,
    (verb, done): (&str, &str),
    out: &Output,
) -> Result<Exit, Error> {
    match result {
        Ok(Ownership::Held) => {
            out.verbose(format!("{done} lock {key}"));
            Ok(Exit::Code(exit::SUCCESS))
        }
        Ok(Ownership::NotHeld) => {
            out.error(format!(
                "cannot {verb} lock {key}: it is not held with this token (it expired, was released \
                 or broken, or another process holds it now)"
            ));
            Ok(Exit::Code(exit::NOT_HELD))
        }
        Err(source) => Err(Error::Redis {
            context: format!("cannot {verb} lock {key}"),
            server: lock.describe(),
            source,
        }),
    }
}
