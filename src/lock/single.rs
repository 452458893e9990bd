//! The one-server lock: the protocol of redis-py's Lock, redsync and node-redlock on one Redis,
//! plus distlock's holder metadata beside it.

use std::sync::LazyLock;
use std::time::Duration;

use super::{Attempt, HeldBy, Holder, HolderTtl, Lock, LockName, LockState, Ownership, Token};
use crate::backend::{BackendError, Connector, Node, Notice, Reply, Script, Subscription};

static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/acquire.lua")));
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/renew.lua")));
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/release.lua")));
static INSPECT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/inspect.lua")));

/// A lock on one Redis server.
pub struct SingleNode {
    name: LockName,
    connector: Connector,
    node: Node,
}

impl SingleNode {
    /// The lock `name` on the server behind `connector` (connects on first use).
    pub fn new(name: LockName, connector: Connector) -> Self {
        let node = connector.node();
        SingleNode {
            name,
            connector,
            node,
        }
    }

    fn eval(&mut self, script: &Script, args: &[&[u8]]) -> Result<Vec<Reply>, BackendError> {
        let keys = [self.name.lock_key(), self.name.owner_key()];
        self.node.eval(script, &keys, args)
    }

    fn eval_retrying_lost_reply(
        &mut self,
        script: &Script,
        args: &[&[u8]],
    ) -> Result<Vec<Reply>, BackendError> {
        match self.eval(script, args) {
            // The reply was lost: the script may have run. Ours are idempotent for our token,
            // so asking again on a fresh connection tells us where we stand.
            Err(e) if e.maybe_applied() => self.eval(script, args),
            other => other,
        }
    }
}

impl Lock for SingleNode {
    fn name(&self) -> &LockName {
        &self.name
    }

    fn describe(&self) -> String {
        self.connector.display().to_owned()
    }

    fn connect(&mut self) -> Result<(), BackendError> {
        self.node.connect()
    }

    fn try_acquire(
        &mut self,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Attempt, BackendError> {
        let ttl_ms = ttl.as_millis().to_string();
        let fields = holder.to_fields();
        let mut args: Vec<&[u8]> = vec![token.as_str().as_bytes(), ttl_ms.as_bytes()];
        args.extend([b"ttl_ms".as_slice(), ttl_ms.as_bytes()]);
        for (name, value) in &fields {
            args.push(name.as_bytes());
            args.push(value.as_bytes());
        }
        // If this fails too, the caller still knows (maybe_applied) that it may hold the lock.
        let reply = self.eval_retrying_lost_reply(&ACQUIRE, &args)?;
        match reply.as_slice() {
            [Reply::Int(1)] => Ok(Attempt::Acquired),
            [
                Reply::Int(0),
                Reply::Int(pttl),
                Reply::Int(now),
                Reply::Array(meta),
            ] => Ok(Attempt::Busy(held_by(None, *pttl, *now, meta))),
            other => Err(BackendError::Reply(format!(
                "acquire script returned {other:?}"
            ))),
        }
    }

    fn inspect(&mut self) -> Result<LockState, BackendError> {
        let reply = self.eval(&INSPECT, &[])?;
        match reply.as_slice() {
            [Reply::Nil, ..] => Ok(LockState::Free),
            [
                token @ Reply::Bytes(_),
                Reply::Int(pttl),
                Reply::Int(now),
                Reply::Array(meta),
            ] => Ok(LockState::Held(held_by(token.as_text(), *pttl, *now, meta))),
            other => Err(BackendError::Reply(format!(
                "inspect script returned {other:?}"
            ))),
        }
    }

    fn extend(&mut self, token: &Token, ttl: Duration) -> Result<Ownership, BackendError> {
        let ttl_ms = ttl.as_millis().to_string();
        let reply = self.eval(&RENEW, &[token.as_str().as_bytes(), ttl_ms.as_bytes()])?;
        ownership(&reply, "renew")
    }

    fn release(&mut self, token: &Token) -> Result<Ownership, BackendError> {
        let channel = self.name.channel().to_owned();
        let args: [&[u8]; 2] = [token.as_str().as_bytes(), channel.as_bytes()];
        match self.eval(&RELEASE, &args) {
            // Releasing twice is harmless: the second finds the key gone (or someone else's
            // token) and changes nothing. A lost first reply followed by "not ours" most likely
            // means the first one did it.
            Err(e) if e.maybe_applied() => {
                match ownership(&self.eval(&RELEASE, &args)?, "release")? {
                    Ownership::NotHeld => Ok(Ownership::Held),
                    held => Ok(held),
                }
            }
            other => ownership(&other?, "release"),
        }
    }

    fn fresh(&self, timeout: Duration) -> Box<dyn Lock> {
        Box::new(SingleNode::new(
            self.name.clone(),
            self.connector.with_timeout(timeout),
        ))
    }

    fn subscribe(&self, notify: Box<dyn Fn(Notice) + Send>) -> Result<Subscription, BackendError> {
        crate::backend::subscribe(&self.connector, self.name.channel().to_owned(), notify)
    }
}

/// Every lock under `prefix` whose key matches the glob `pattern`, with what is known about its
/// holder (SCAN, then one read-only script per lock; a lock released meanwhile is skipped).
pub fn list(
    connector: &Connector,
    prefix: &str,
    pattern: &str,
) -> Result<Vec<(LockName, HeldBy)>, BackendError> {
    let mut node = connector.node();
    let keys = node.scan(&LockName::scan_pattern(prefix, pattern))?;
    let mut locks = Vec::new();
    for redis_key in keys {
        let Some(key) = LockName::key_of(prefix, &redis_key) else {
            continue;
        };
        let name = LockName::new(prefix, key);
        let mut lock = SingleNode {
            name: name.clone(),
            connector: connector.clone(),
            node,
        };
        let state = lock.inspect();
        node = lock.node;
        match state {
            Ok(LockState::Held(mut held)) => {
                held.token = None;
                locks.push((name, held));
            }
            Ok(LockState::Free) => {}
            // A key of another type that happens to match: not a lock.
            Err(e) if e.is_wrong_type() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(locks)
}

/// Decode the holder part of a busy or inspect reply.
fn held_by(token: Option<String>, pttl: i64, now_ms: i64, meta: &[Reply]) -> HeldBy {
    let ttl = match pttl {
        -1 => HolderTtl::Never,
        // -2 (gone) cannot happen inside the atomic script; treat it as "about to be free".
        n if n < 0 => HolderTtl::Expires(Duration::ZERO),
        n => HolderTtl::Expires(Duration::from_millis(n.unsigned_abs())),
    };
    let fields: Vec<(String, String)> = meta
        .chunks(2)
        .filter_map(|pair| match pair {
            [name, value] => Some((name.as_text()?, value.as_text()?)),
            _ => None,
        })
        .collect();
    let (holder, acquired_at) = Holder::from_fields(&fields);
    let held_for = acquired_at.and_then(|at| {
        let now = u64::try_from(now_ms).ok()?;
        Some(Duration::from_millis(now.saturating_sub(at)))
    });
    HeldBy {
        ttl,
        holder,
        held_for,
        token,
    }
}

fn ownership(reply: &[Reply], what: &str) -> Result<Ownership, BackendError> {
    match reply {
        [Reply::Int(1)] => Ok(Ownership::Held),
        [Reply::Int(0)] => Ok(Ownership::NotHeld),
        other => Err(BackendError::Reply(format!(
            "{what} script returned {other:?}"
        ))),
    }
}
