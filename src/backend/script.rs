//! What a connection carries for a lock: a Lua [`Script`] (sent by its hash, loaded on
//! `NOSCRIPT`), and its [`Reply`] in our own terms, so that no redis-rs type leaves the backend.

/// One element of a script's reply, in our own terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// An integer.
    Int(i64),
    /// A string (Lua strings are bytes).
    Bytes(Vec<u8>),
    /// Lua `false` / nil.
    Nil,
    /// A nested array.
    Array(Vec<Reply>),
}

impl Reply {
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// The text, if this is a string (lossily decoded).
    pub fn as_text(&self) -> Option<String> {
        match self {
            Reply::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

impl From<redis::Value> for Reply {
    fn from(value: redis::Value) -> Self {
        match value {
            redis::Value::Int(n) => Reply::Int(n),
            redis::Value::BulkString(b) => Reply::Bytes(b),
            redis::Value::SimpleString(s) => Reply::Bytes(s.into_bytes()),
            redis::Value::Okay => Reply::Bytes(b"OK".to_vec()),
            redis::Value::Array(items) | redis::Value::Set(items) => {
                Reply::Array(items.into_iter().map(Reply::from).collect())
            }
            _ => Reply::Nil,
        }
    }
}

/// A Lua script, sent with EVALSHA (falling back to loading it on NOSCRIPT).
pub struct Script {
    pub(super) script: redis::Script,
    pub(super) source: &'static str,
}

impl Script {
    /// Wrap Lua source.
    pub fn new(source: &'static str) -> Self {
        Script {
            script: redis::Script::new(source),
            source,
        }
    }
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Script")
            .field(&self.script.get_hash())
            .finish()
    }
}
