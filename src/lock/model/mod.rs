//! A model Redis that runs distlock's real scripts, for checking the protocol by machine (tests
//! only; see `docs/verification.md`).
//!
//! It runs the exact text distlock sends (`protocol::ACQUIRE` and the others, by their
//! [`Script`](crate::backend::Script)) in an embedded Lua 5.1, the Lua of Redis, over an
//! in-memory keyspace with a clock the caller sets: exactly the commands the scripts call, with
//! Redis' replies and errors, lazy expiry, and the script-time rules of Redis 7.0 and 7.2
//! ([`ScriptTime`]). A differential test (`differential.rs`) runs seeded sequences of the calls
//! distlock makes against a real `redis-server` and the model, step by step, and requires the
//! same replies and keyspaces, so that the model cannot quietly drift from Redis.
//!
//! Boundary: it imports the scripts, their argument builders and reply decoders from
//! [`crate::lock`] and nothing from the engine; nothing but tests imports it. What it does not
//! model: streams (a lock's history; a script that records one panics), pub/sub delivery (a
//! run returns what it published; [`ScriptLock`] delivers it to its handles), replication, eviction, and every command the scripts do not
//! call (they panic).
//!
//! * `keyspace.rs`: strings, hashes, sorted sets, expiry ([`Keyspace`]);
//! * `commands.rs`: the commands ([`Resp`], the reply);
//! * `lua.rs`: the sandbox, the conversions, the [`Runner`], [`Patch`] (a script changed at
//!   load time, for mutants);
//! * `cjson.rs`: the `cjson` table;
//! * `lock.rs`: [`ScriptLock`], a [`Lock`](crate::lock::Lock) over the model (pub/sub
//!   delivered to its subscribed handles), which the engine's unit tests run on.

mod cjson;
mod commands;
mod differential;
mod explore;
mod keyspace;
mod lock;
mod lua;
mod tests;

use std::hash::{Hash, Hasher};

use crate::backend::Reply;

pub use crate::lock::protocol::{PLACE, REFRESH, TAKEUP};
pub use commands::Resp;
pub use keyspace::{Entry, Keyspace, Score, Value};
pub use lock::{Hook, ScriptLock, World};
pub use lua::{Outcome, Patch, Runner, ScriptTime, scripts};

/// One Redis server's state: its keys and its clock (µs since the epoch, as `TIME` gives it),
/// which only the caller moves. Clone it to branch, hash it to recognise a state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Redis {
    pub keyspace: Keyspace,
    pub now_us: u64,
}

impl Redis {
    /// An empty server whose clock reads `now_us`.
    pub fn at(now_us: u64) -> Redis {
        Redis {
            keyspace: Keyspace::default(),
            now_us,
        }
    }

    /// The clock in ms (what the scripts call NOW).
    pub fn now_ms(&self) -> u64 {
        self.now_us / 1000
    }

    /// Move the clock to `now_us` (never back).
    pub fn advance_to(&mut self, now_us: u64) {
        assert!(now_us >= self.now_us, "the model's clock never goes back");
        self.now_us = now_us;
    }

    /// A hash of the logical state at the current time (expired keys dropped first), for an
    /// explorer's set of visited states.
    pub fn fingerprint(&mut self) -> u64 {
        self.keyspace.expire_all(self.now_ms());
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut hasher);
        hasher.finish()
    }
}

impl Resp {
    /// The reply as distlock's backend hands a script's reply to the decoders
    /// (`protocol::decode_answer` and the others): the elements of the top-level array, a
    /// status as its text (as redis-rs gives it); an error reply is the `Err`.
    pub fn into_replies(self) -> Result<Vec<Reply>, String> {
        fn convert(r: Resp) -> Reply {
            match r {
                Resp::Int(n) => Reply::Int(n),
                Resp::Bulk(b) => Reply::Bytes(b),
                Resp::Status(s) => Reply::Bytes(s.into_bytes()),
                Resp::Nil | Resp::Error(_) => Reply::Nil,
                Resp::Array(items) => Reply::Array(items.into_iter().map(convert).collect()),
            }
        }
        match self {
            Resp::Error(e) => Err(e),
            Resp::Array(items) => Ok(items.into_iter().map(convert).collect()),
            other => Ok(vec![convert(other)]),
        }
    }
}
