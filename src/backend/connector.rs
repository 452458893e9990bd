//! Finding the server: a [`Connector`] turns the servers the user gave (one URL, Sentinel,
//! Cluster seeds, or one node of a Redlock) into connections to the server that requests go
//! to, with explicit timeouts, following the route (see [`super::route`]). What is sent on a
//! connection is [`super::Node`]'s business.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Connection;

use super::route::{self, Addr, ClusterRoute, Route, SentinelRoute, Server, TlsFiles};
use super::servers::Servers;
use super::{BackendError, Endpoint, Node};

/// Opens connections to the server that requests go to (see `route/`). Cheap to clone; every
/// thread that talks to Redis opens its own connection through it, and the clones share what
/// was learnt about the servers (the Cluster slot map, the primary the sentinels named).
#[derive(Clone)]
pub struct Connector {
    pub(super) route: Arc<Route>,
    /// The Cluster slot that requests are for (a lock's hash tag).
    slot: Option<u16>,
    display: Arc<str>,
    pub(super) timeout: Duration,
    /// `--replicas N` and its timeout: writes that grant or extend a lock wait for N replicas.
    replicas: Option<(u32, Duration)>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Connector").field(&self.display).finish()
    }
}

impl Connector {
    /// A connector for one URL: that server, or, once it answers MOVED, the Redis Cluster it
    /// is a node of. `timeout` bounds connect + TLS + handshake and every later read and write
    /// (redis-rs sets none by default, so a silent server would hang us forever).
    pub fn new(endpoint: Endpoint, timeout: Duration, tls: TlsFiles) -> Result<Self, BackendError> {
        let display = Arc::from(endpoint.display());
        let route = Route::Cluster(Box::new(ClusterRoute::new(&[endpoint], false, &tls)?));
        Ok(Connector {
            route: Arc::new(route),
            slot: None,
            display,
            timeout,
            replicas: None,
        })
    }

    /// A connector for exactly this server (a Redlock node: a MOVED reply is an error).
    pub fn fixed(
        endpoint: Endpoint,
        timeout: Duration,
        tls: TlsFiles,
    ) -> Result<Self, BackendError> {
        let display = Arc::from(endpoint.display());
        Ok(Connector {
            route: Arc::new(Route::Fixed(Arc::new(Server::new(endpoint, &tls)?))),
            slot: None,
            display,
            timeout,
            replicas: None,
        })
    }

    /// A connector for one server, a Sentinel deployment or a Redis Cluster. (Independent
    /// primaries are one connector each: [`Connector::fixed`].)
    pub fn for_servers(
        servers: &Servers,
        timeout: Duration,
        tls: TlsFiles,
    ) -> Result<Self, BackendError> {
        match servers {
            Servers::One(endpoint) => Connector::new(endpoint.clone(), timeout, tls),
            Servers::Cluster(seeds) => Ok(Connector {
                route: Arc::new(Route::Cluster(Box::new(ClusterRoute::new(
                    seeds, true, &tls,
                )?))),
                slot: None,
                display: Arc::from(servers.display()),
                timeout,
                replicas: None,
            }),
            Servers::Sentinel(s) => Ok(Connector {
                route: Arc::new(Route::Sentinel(Box::new(SentinelRoute::new(
                    &s.sentinels,
                    &s.service,
                    &s.data,
                    &tls,
                )?))),
                slot: None,
                display: Arc::from(servers.display()),
                timeout,
                replicas: None,
            }),
            Servers::Independent(_) => Err(BackendError::Connect(
                "independent primaries need one connector each".into(),
            )),
        }
    }

    /// The same servers, for requests on `key` (and the keys that share its hash tag): on a
    /// Redis Cluster, they go to the owner of its slot.
    pub fn for_key(&self, key: &str) -> Self {
        Connector {
            slot: Some(route::slot(key)),
            ..self.clone()
        }
    }

    /// The same server with another timeout.
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        Connector {
            timeout,
            ..self.clone()
        }
    }

    /// The same servers; writes that grant or extend a lock wait for `replicas` (N, within).
    pub fn with_replicas(self, replicas: Option<(u32, Duration)>) -> Self {
        Connector { replicas, ..self }
    }

    /// `--replicas`: how many replicas must acknowledge a grant or an extension, within what.
    pub fn replicas(&self) -> Option<(u32, Duration)> {
        self.replicas
    }

    /// The servers' address for messages (password redacted).
    pub fn display(&self) -> &str {
        &self.display
    }

    /// The servers' address and, once known, the server that requests go to: the primary the
    /// sentinels named, or the Cluster node that serves the slot (for messages).
    pub fn describe(&self) -> String {
        let now = match &*self.route {
            Route::Fixed(_) => None,
            Route::Cluster(cluster) => cluster
                .owner_display(self.slot)
                .map(|owner| format!("node {owner}")),
            Route::Sentinel(sentinel) => sentinel
                .primary_display()
                .map(|primary| format!("primary {primary}")),
        };
        match now {
            Some(now) => format!("{} ({now})", self.display),
            None => self.display.to_string(),
        }
    }

    /// The per-connect and per-command timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether this is a Redis Cluster (declared, or found out from a MOVED reply).
    pub fn is_cluster(&self) -> bool {
        matches!(&*self.route, Route::Cluster(c) if c.is_cluster())
    }

    /// A node handle that connects on first use.
    pub fn node(&self) -> Node {
        Node::new(self.clone())
    }

    /// One connector per primary, each for exactly that server (for `list`, which looks at
    /// every key): a Cluster's primaries, else the one server.
    pub fn primaries(&self) -> Result<Vec<Connector>, BackendError> {
        let deadline = Instant::now() + self.timeout;
        let servers = match &*self.route {
            Route::Cluster(cluster) => cluster.primaries(deadline, self.timeout)?,
            Route::Fixed(_) | Route::Sentinel(_) => return Ok(vec![self.clone()]),
        };
        Ok(servers
            .into_iter()
            .map(|server| Connector {
                display: Arc::from(server.display()),
                route: Arc::new(Route::Fixed(server)),
                slot: None,
                timeout: self.timeout,
                replicas: None,
            })
            .collect())
    }

    /// The time one socket operation may take now: the timeout, cut to what is left before
    /// `deadline`. An error when nothing is left (a zero socket timeout would mean "forever").
    pub(super) fn limit(&self, deadline: Instant, sent: bool) -> Result<Duration, BackendError> {
        route::limit(self.timeout, deadline, sent)
    }

    /// Open a connection to the server that requests go to, by `deadline`.
    pub(super) fn open(
        &self,
        deadline: Instant,
    ) -> Result<(Connection, Arc<Server>), BackendError> {
        let opened = match &*self.route {
            Route::Fixed(server) => server
                .open(deadline, self.timeout)
                .map(|conn| (conn, server.clone())),
            Route::Cluster(cluster) => {
                let server = cluster.target(self.slot, deadline, self.timeout)?;
                server
                    .open(deadline, self.timeout)
                    .map(|conn| (conn, server))
            }
            Route::Sentinel(sentinel) => sentinel.open(deadline, self.timeout),
        };
        if let Err(BackendError::Connect(_) | BackendError::Timeout { .. }) = &opened {
            self.failed();
        }
        opened
    }

    /// Open a connection to the Cluster node `addr` (an ASK redirection).
    pub(super) fn open_at(
        &self,
        addr: &Addr,
        deadline: Instant,
    ) -> Result<(Connection, Arc<Server>), BackendError> {
        match &*self.route {
            Route::Cluster(cluster) => {
                let server = cluster.server_at(addr)?;
                server
                    .open(deadline, self.timeout)
                    .map(|conn| (conn, server))
            }
            _ => Err(not_a_cluster(&self.display)),
        }
    }

    /// A MOVED reply: `slot` is served by `addr`.
    pub(super) fn moved(&self, slot: u16, addr: Addr) -> Result<(), BackendError> {
        match &*self.route {
            Route::Cluster(cluster) => {
                cluster.moved(slot, addr);
                Ok(())
            }
            _ => Err(not_a_cluster(&self.display)),
        }
    }

    /// The server that requests went to failed, or is no longer a primary: find it again
    /// before the next connection.
    pub(super) fn failed(&self) {
        match &*self.route {
            Route::Fixed(_) => {}
            Route::Cluster(cluster) => cluster.failed(),
            Route::Sentinel(sentinel) => sentinel.failed(),
        }
    }
}

fn not_a_cluster(display: &str) -> BackendError {
    BackendError::Mismatch(format!(
        "{display} is a Redis Cluster node; give it alone (or as redis+cluster://), not as one of \
         a Redlock's independent primaries or behind Sentinel"
    ))
}
