//! The one-server lock: the protocol of redis-py's Lock, redsync and node-redlock on one Redis.

use std::sync::LazyLock;
use std::time::Duration;

use super::{Attempt, HolderTtl, Lock, LockName, Ownership, Token};
use crate::backend::{BackendError, Connector, Node, Notice, Script, Subscription};

static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/acquire.lua")));
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/renew.lua")));
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/release.lua")));

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

    fn ttl_ms(ttl: Duration) -> String {
        ttl.as_millis().to_string()
    }

    fn eval(&mut self, script: &Script, args: &[&[u8]]) -> Result<Vec<i64>, BackendError> {
        self.node.eval_ints(script, &[self.name.lock_key()], args)
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

    fn try_acquire(&mut self, token: &Token, ttl: Duration) -> Result<Attempt, BackendError> {
        let ttl_ms = Self::ttl_ms(ttl);
        let args: [&[u8]; 2] = [token.as_str().as_bytes(), ttl_ms.as_bytes()];
        let reply = match self.eval(&ACQUIRE, &args) {
            // The reply was lost: the SET may have landed. The script is idempotent for our
            // token, so asking again on a fresh connection tells us (and takes the lock if it
            // is free). If this fails too, the caller still knows it may hold the lock.
            Err(e) if e.maybe_applied() => self.eval(&ACQUIRE, &args)?,
            other => other?,
        };
        match reply.as_slice() {
            [1] => Ok(Attempt::Acquired),
            [0, pttl] if *pttl >= 0 => Ok(Attempt::Busy(HolderTtl::Expires(
                Duration::from_millis(pttl.unsigned_abs()),
            ))),
            [0, -1] => Ok(Attempt::Busy(HolderTtl::Never)),
            // -2 (gone) cannot happen inside the atomic script; treat it as "try again now".
            [0, _] => Ok(Attempt::Busy(HolderTtl::Expires(Duration::ZERO))),
            other => Err(BackendError::Reply(format!(
                "acquire script returned {other:?}"
            ))),
        }
    }

    fn extend(&mut self, token: &Token, ttl: Duration) -> Result<Ownership, BackendError> {
        let ttl_ms = Self::ttl_ms(ttl);
        let reply = self.eval(&RENEW, &[token.as_str().as_bytes(), ttl_ms.as_bytes()])?;
        ownership(&reply, "renew")
    }

    fn release(&mut self, token: &Token) -> Result<Ownership, BackendError> {
        let channel = self.name.channel().to_owned();
        let args: [&[u8]; 2] = [token.as_str().as_bytes(), channel.as_bytes()];
        let reply = match self.eval(&RELEASE, &args) {
            // Releasing twice is harmless: the second finds the key gone (or someone else's
            // token) and changes nothing. Report the first answer we get.
            Err(e) if e.maybe_applied() => match self.eval(&RELEASE, &args)? {
                r if r == [0] => return Ok(Ownership::Held),
                r => r,
            },
            other => other?,
        };
        ownership(&reply, "release")
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

fn ownership(reply: &[i64], what: &str) -> Result<Ownership, BackendError> {
    match reply {
        [1] => Ok(Ownership::Held),
        [0] => Ok(Ownership::NotHeld),
        other => Err(BackendError::Reply(format!(
            "{what} script returned {other:?}"
        ))),
    }
}
