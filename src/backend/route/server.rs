//! One server: its redis-rs client, with the TLS material it trusts ([`TlsFiles`]), and the
//! opening of a connection by a deadline (the TLS handshake included, and a plain-text server
//! behind `rediss://` told apart from a dead one). Which server a request goes to is the
//! routes' business (`cluster.rs`, `sentinel.rs`); this file knows one address.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Client, Connection, ConnectionAddr};

use crate::backend::deferred::Deferred;
use crate::backend::{BackendError, Endpoint, probe};

/// TLS material beyond the system's trust store, as PEM bytes.
#[derive(Clone, Default)]
pub struct TlsFiles {
    /// Trust only this CA bundle (instead of the system's roots).
    pub ca: Option<Vec<u8>>,
    /// Client certificate and key, for servers that require mutual TLS.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

/// One server: a redis-rs client (which holds no connection) and what messages show.
pub(in crate::backend) struct Server {
    client: Client,
    endpoint: Endpoint,
    /// Host and port of a TCP server (for the mismatch probes), and whether it is TLS.
    pub(in crate::backend) tcp: Option<(Arc<str>, u16, bool)>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Server")
            .field(&self.endpoint.display())
            .finish()
    }
}

/// The time one socket operation may take now: `timeout`, cut to what is left before
/// `deadline`. An error when nothing is left (a zero socket timeout would mean "forever").
pub(in crate::backend) fn limit(
    timeout: Duration,
    deadline: Instant,
    sent: bool,
) -> Result<Duration, BackendError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let limit = timeout.min(left);
    if limit < Duration::from_millis(1) {
        return Err(BackendError::Timeout {
            sent,
            after: timeout,
        });
    }
    Ok(limit)
}

pub(in crate::backend) fn set_timeouts(
    conn: &Connection,
    limit: Duration,
) -> Result<(), BackendError> {
    conn.set_read_timeout(Some(limit))
        .and_then(|()| conn.set_write_timeout(Some(limit)))
        .map_err(|e| BackendError::from_connect(e, limit))
}

impl Server {
    pub(in crate::backend) fn new(
        endpoint: Endpoint,
        tls: &TlsFiles,
    ) -> Result<Self, BackendError> {
        // No CLIENT SETINFO: Redis < 7.2 rejects it, and redis-rs waits out a full timeout for
        // each ignored reply when the server is stalled (twice the timeout per connect).
        let info = endpoint.info.clone().set_redis_settings(
            endpoint
                .info
                .redis_settings()
                .clone()
                .set_skip_set_lib_name(),
        );
        let tcp = match info.addr() {
            ConnectionAddr::Tcp(host, port) => Some((Arc::from(host.as_str()), *port, false)),
            ConnectionAddr::TcpTls { host, port, .. } => {
                Some((Arc::from(host.as_str()), *port, true))
            }
            _ => None,
        };
        let client = if endpoint.is_tls() {
            // rustls needs a process-wide crypto provider; installing it twice is harmless.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let certs = redis::TlsCertificates {
                client_tls: tls
                    .client
                    .clone()
                    .map(|(cert, key)| redis::ClientTlsConfig {
                        client_cert: cert,
                        client_key: key,
                    }),
                root_cert: tls.ca.clone(),
            };
            Client::build_with_tls(info, certs)
        } else {
            Client::open(info)
        }
        .map_err(|e| BackendError::from_connect(e, Duration::ZERO))?;
        Ok(Server {
            client,
            endpoint,
            tcp,
        })
    }

    /// The address for messages (password redacted).
    pub(in crate::backend) fn display(&self) -> &str {
        self.endpoint.display()
    }

    /// Open a connection, by `deadline`, each step within `timeout`. With TLS, the handshake is
    /// completed here (by a PING), so that a handshake that fails or hangs is a failure to
    /// connect (nothing of ours was sent), never a request that "may have been applied".
    pub(in crate::backend) fn open(
        &self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Connection, BackendError> {
        let _deferred = Deferred::new();
        let limit = limit(timeout, deadline, false)?;
        let tls = self.tcp.as_ref().is_some_and(|(_, _, tls)| *tls);
        // With TLS, keep a little time for telling a plain-text server from a dead one.
        let reserve = if tls {
            (limit / 10).min(Duration::from_millis(200))
        } else {
            Duration::ZERO
        };
        let handshake_by = deadline.min(Instant::now() + limit) - reserve;
        let connected = self
            .client
            .get_connection_with_timeout(limit - reserve)
            .map_err(|e| BackendError::from_connect(e, limit));
        let mut conn = match connected {
            Ok(conn) => conn,
            Err(e) => return Err(self.diagnose_tls(e, deadline)),
        };
        // get_connection_with_timeout removes its temporary timeouts once connected: set ours.
        set_timeouts(&conn, self::limit(timeout, handshake_by, false)?)?;
        if tls {
            // HELLO, not PING: Redis lets every user run it whatever the ACL (as AUTH), where
            // PING would be denied to the documented ACL user (an entry in the ACL log on every
            // connection). The connection speaks RESP2 already: `HELLO 2` changes nothing.
            let hello = redis::cmd("HELLO")
                .arg(2)
                .query::<redis::Value>(&mut conn)
                .map_err(|e| BackendError::from_connect(e, limit));
            match hello {
                // Any reply from Redis proves the handshake done, an error too (a server older
                // than Redis 6 does not know HELLO).
                Ok(_) | Err(BackendError::Server { .. }) => {}
                Err(e) => return Err(self.diagnose_tls(e, deadline)),
            }
        }
        Ok(conn)
    }

    /// A TLS handshake that timed out or saw garbage: is the server speaking plain text?
    fn diagnose_tls(&self, err: BackendError, deadline: Instant) -> BackendError {
        let Some((host, port, true)) = &self.tcp else {
            return err;
        };
        let suspicious = match &err {
            BackendError::Timeout { .. } => true,
            BackendError::Tls(detail) => !detail.contains("certificate"),
            _ => false,
        };
        if suspicious && probe::plain_redis_answers(host, *port, deadline) {
            return BackendError::Mismatch(
                "this server does not speak TLS; use redis:// instead of rediss://".into(),
            );
        }
        err
    }
}
