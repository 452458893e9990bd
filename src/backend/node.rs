//! One Redis server: a connector with explicit timeouts, and a lazily reconnecting connection.

use std::sync::Arc;
use std::time::Duration;

use redis::{Client, Connection};

use super::deferred::Deferred;
use super::{BackendError, Endpoint};

/// TLS material beyond the system's trust store, as PEM bytes.
#[derive(Clone, Default)]
pub struct TlsFiles {
    /// Trust only this CA bundle (instead of the system's roots).
    pub ca: Option<Vec<u8>>,
    /// Client certificate and key, for servers that require mutual TLS.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

/// Opens connections to one server. Cheap to clone; every thread that talks to Redis opens its
/// own connection through it.
#[derive(Clone)]
pub struct Connector {
    client: Client,
    display: Arc<str>,
    timeout: Duration,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Connector").field(&self.display).finish()
    }
}

impl Connector {
    /// A connector for `endpoint`. `timeout` bounds connect + TLS + handshake and every later
    /// read and write (redis-rs sets none by default, so a silent server would hang us forever).
    pub fn new(endpoint: Endpoint, timeout: Duration, tls: TlsFiles) -> Result<Self, BackendError> {
        // No CLIENT SETINFO: Redis < 7.2 rejects it, and redis-rs waits out a full timeout for
        // each ignored reply when the server is stalled (twice the timeout per connect).
        let info = endpoint.info.clone().set_redis_settings(
            endpoint
                .info
                .redis_settings()
                .clone()
                .set_skip_set_lib_name(),
        );
        let client = if endpoint.is_tls() {
            // rustls needs a process-wide crypto provider; installing it twice is harmless.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let certs = redis::TlsCertificates {
                client_tls: tls.client.map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert,
                    client_key: key,
                }),
                root_cert: tls.ca,
            };
            Client::build_with_tls(info, certs)
        } else {
            Client::open(info)
        }
        .map_err(BackendError::from_connect)?;
        Ok(Connector {
            client,
            display: Arc::from(endpoint.display()),
            timeout,
        })
    }

    /// The same server with another timeout.
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        Connector {
            timeout,
            ..self.clone()
        }
    }

    /// The server's address for messages (password redacted).
    pub fn display(&self) -> &str {
        &self.display
    }

    /// The command timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A node handle that connects on first use.
    pub fn node(&self) -> Node {
        Node {
            connector: self.clone(),
            conn: None,
        }
    }

    pub(super) fn open(&self) -> Result<Connection, BackendError> {
        let _deferred = Deferred::new();
        let conn = self
            .client
            .get_connection_with_timeout(self.timeout)
            .map_err(BackendError::from_connect)?;
        // get_connection_with_timeout removes its temporary timeouts once connected: set ours.
        conn.set_read_timeout(Some(self.timeout))
            .and_then(|()| conn.set_write_timeout(Some(self.timeout)))
            .map_err(BackendError::from_connect)?;
        Ok(conn)
    }
}

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
pub struct Script(redis::Script);

impl Script {
    /// Wrap Lua source.
    pub fn new(source: &str) -> Self {
        Script(redis::Script::new(source))
    }
}

/// One connection to one server, opened on first use and reopened after a failure.
pub struct Node {
    connector: Connector,
    conn: Option<Connection>,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Script").field(&self.0.get_hash()).finish()
    }
}

impl Node {
    /// Make sure a connection is open (reconnecting if needed).
    pub fn connect(&mut self) -> Result<(), BackendError> {
        self.conn().map(|_| ())
    }

    /// Drop the connection; the next command opens a new one.
    pub fn disconnect(&mut self) {
        self.conn = None;
    }

    /// Run `script` with `keys` and `args`; the script must return an array.
    pub fn eval(
        &mut self,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Vec<Reply>, BackendError> {
        let mut invocation = script.0.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        for arg in args {
            invocation.arg(*arg);
        }
        let _deferred = Deferred::new();
        let conn = self.conn()?;
        let result = invocation.invoke::<Vec<redis::Value>>(conn);
        self.finish(result)
            .map(|values| values.into_iter().map(Reply::from).collect())
    }

    /// Every key matching the glob `pattern` (SCAN, never KEYS: it does not block the server).
    pub fn scan(&mut self, pattern: &str) -> Result<Vec<String>, BackendError> {
        let _deferred = Deferred::new();
        let mut keys = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let conn = self.conn()?;
            let result = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query::<(u64, Vec<String>)>(conn);
            let (next, batch) = self.finish(result)?;
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    fn conn(&mut self) -> Result<&mut Connection, BackendError> {
        match &mut self.conn {
            Some(conn) => Ok(conn),
            slot => Ok(slot.insert(self.connector.open()?)),
        }
    }

    /// Map a command's result, dropping the connection after any error that may have left it in
    /// an unknown state (a late reply would otherwise be read as the answer to the next command).
    fn finish<T>(&mut self, result: redis::RedisResult<T>) -> Result<T, BackendError> {
        result.map_err(|err| {
            let err = match BackendError::from_command(err) {
                BackendError::Io {
                    timeout: true,
                    detail: _,
                } => BackendError::Io {
                    timeout: true,
                    detail: format!("within {}", crate::output::duration(self.connector.timeout)),
                },
                other => other,
            };
            if !matches!(err, BackendError::Server { .. }) {
                self.conn = None;
            }
            err
        })
    }
}
