//! Finding the server a request goes to: one fixed server, the primary that the sentinels name
//! for a service, or the primary that owns a lock's slot in a Redis Cluster.
//!
//! * **Fixed**: a Redlock node. It must be a primary of its own: a MOVED reply is an error.
//! * **Cluster**: one plain URL, or `redis+cluster://` seeds. A plain URL is used as it is until
//!   its server answers MOVED: then it is a Cluster node, and from there on requests go to the
//!   owner of their slot, from `CLUSTER SLOTS` (asked of the seeds, then of the known
//!   primaries) and from every MOVED reply (which names the owner of one slot). ASK is
//!   followed for one request, with `ASKING` (see [`super::Node`]).
//! * **Sentinel**: the sentinels are asked in turn (`SENTINEL GET-MASTER-ADDR-BY-NAME`); the
//!   node one of them names is used only if `ROLE` says it is a primary (a sentinel with a
//!   stale view may name a demoted one: the next sentinel is asked). The answer is kept until a
//!   connection to it fails or it turns out to be a replica (`READONLY`, or `ROLE` on a new
//!   connection), then asked again.
//!
//! Every step ends by the caller's deadline: a stopped sentinel or seed costs its share of the
//! time, never a hang (redis-rs's own Sentinel and Cluster clients connect without timeouts or
//! retry on their own, which is why they are not used).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use redis::{Client, Connection, ConnectionAddr};

use super::deferred::Deferred;
use super::servers::DataNodes;
use super::{BackendError, Endpoint, TlsFiles, probe};

/// A host and port.
pub(super) type Addr = (String, u16);

/// One server: a redis-rs client (which holds no connection) and what messages show.
pub(super) struct Server {
    client: Client,
    endpoint: Endpoint,
    /// Host and port of a TCP server (for the mismatch probes), and whether it is TLS.
    pub(super) tcp: Option<(Arc<str>, u16, bool)>,
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
pub(super) fn limit(
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

pub(super) fn set_timeouts(conn: &Connection, limit: Duration) -> Result<(), BackendError> {
    conn.set_read_timeout(Some(limit))
        .and_then(|()| conn.set_write_timeout(Some(limit)))
        .map_err(|e| BackendError::from_connect(e, limit))
}

impl Server {
    pub(super) fn new(endpoint: Endpoint, tls: &TlsFiles) -> Result<Self, BackendError> {
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
    pub(super) fn display(&self) -> &str {
        self.endpoint.display()
    }

    /// Open a connection, by `deadline`, each step within `timeout`. With TLS, the handshake is
    /// completed here (by a PING), so that a handshake that fails or hangs is a failure to
    /// connect (nothing of ours was sent), never a request that "may have been applied".
    pub(super) fn open(
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
            let pong = redis::cmd("PING")
                .query::<String>(&mut conn)
                .map_err(|e| BackendError::from_connect(e, limit));
            match pong {
                // Any reply from Redis proves the handshake done: an ACL user without `+ping`
                // (the minimal ACL has none) gets NOPERM, and must not be refused for it.
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

/// How requests find their server.
pub(super) enum Route {
    /// Always this server (a Redlock node).
    Fixed(Arc<Server>),
    /// One URL (which may turn out to be a Cluster node) or Cluster seeds.
    Cluster(Box<ClusterRoute>),
    /// The primary that the sentinels name.
    Sentinel(Box<SentinelRoute>),
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Route::Fixed(server) => f.debug_tuple("Fixed").field(server).finish(),
            Route::Cluster(c) => f.debug_tuple("Cluster").field(&c.seeds).finish(),
            Route::Sentinel(s) => f.debug_tuple("Sentinel").field(&s.sentinels).finish(),
        }
    }
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A thread that panicked while holding it left a map, which is still a valid map.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A Redis Cluster (or a server that may be one).
pub(super) struct ClusterRoute {
    seeds: Vec<Arc<Server>>,
    /// Scheme, credentials and TLS of the seeds: those of every node they lead to.
    template: Endpoint,
    tls: TlsFiles,
    state: Mutex<ClusterState>,
}

#[derive(Default)]
struct ClusterState {
    /// Known to be a cluster: declared (`redis+cluster://`), or a MOVED reply seen.
    cluster: bool,
    /// Slot ranges (first, last) and their primaries, from CLUSTER SLOTS.
    ranges: Vec<(u16, u16, Addr)>,
    /// Owners named by MOVED replies since the last CLUSTER SLOTS.
    moved: HashMap<u16, Addr>,
    /// The map must be read again before its next use (a node failed).
    stale: bool,
    servers: HashMap<Addr, Arc<Server>>,
}

impl ClusterRoute {
    pub(super) fn new(
        seeds: &[Endpoint],
        declared: bool,
        tls: &TlsFiles,
    ) -> Result<Self, BackendError> {
        let template = seeds
            .first()
            .cloned()
            .ok_or_else(|| BackendError::Connect("no seed node".into()))?;
        Ok(ClusterRoute {
            seeds: seeds
                .iter()
                .map(|e| Server::new(e.clone(), tls).map(Arc::new))
                .collect::<Result<_, _>>()?,
            template,
            tls: tls.clone(),
            state: Mutex::new(ClusterState {
                cluster: declared,
                stale: declared,
                ..ClusterState::default()
            }),
        })
    }

    fn server(&self, state: &mut ClusterState, addr: &Addr) -> Result<Arc<Server>, BackendError> {
        if let Some(server) = state.servers.get(addr) {
            return Ok(server.clone());
        }
        let server = Arc::new(Server::new(self.template.at(&addr.0, addr.1), &self.tls)?);
        state.servers.insert(addr.clone(), server.clone());
        Ok(server)
    }

    /// The node at `addr` (an ASK redirection names it).
    pub(super) fn server_at(&self, addr: &Addr) -> Result<Arc<Server>, BackendError> {
        let mut state = locked(&self.state);
        self.server(&mut state, addr)
    }

    /// The server for `slot` (any node when `None`), reading the slot map first if needed.
    pub(super) fn target(
        &self,
        slot: Option<u16>,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Arc<Server>, BackendError> {
        let (cluster, stale) = {
            let state = locked(&self.state);
            (state.cluster, state.stale || state.ranges.is_empty())
        };
        if !cluster {
            return Ok(self.seeds[0].clone());
        }
        if stale {
            // A map that cannot be read now is not fatal while MOVED replies or an older map
            // still name the owner.
            if let Err(e) = self.refresh(deadline, timeout) {
                let state = locked(&self.state);
                if state.ranges.is_empty() && slot.is_none_or(|s| !state.moved.contains_key(&s)) {
                    return Err(e);
                }
            }
        }
        let mut state = locked(&self.state);
        let owner = slot.and_then(|s| {
            state.moved.get(&s).cloned().or_else(|| {
                state
                    .ranges
                    .iter()
                    .find(|(first, last, _)| (*first..=*last).contains(&s))
                    .map(|(_, _, addr)| addr.clone())
            })
        });
        match owner.or_else(|| state.ranges.first().map(|(_, _, a)| a.clone())) {
            Some(addr) => self.server(&mut state, &addr),
            None => Err(BackendError::Server {
                code: "CLUSTERDOWN".into(),
                detail: format!("no node serves slot {}", slot.unwrap_or_default()),
            }),
        }
    }

    /// The node serving `slot` as last known, for messages (`None` before the map was read).
    pub(super) fn owner_display(&self, slot: Option<u16>) -> Option<String> {
        let state = locked(&self.state);
        if !state.cluster {
            return None;
        }
        let slot = slot?;
        let addr = state.moved.get(&slot).cloned().or_else(|| {
            state
                .ranges
                .iter()
                .find(|(first, last, _)| (*first..=*last).contains(&slot))
                .map(|(_, _, addr)| addr.clone())
        })?;
        Some(format!("{}:{}", addr.0, addr.1))
    }

    /// A MOVED reply: `slot` is served by `addr` (and this is a cluster).
    pub(super) fn moved(&self, slot: u16, addr: Addr) {
        let mut state = locked(&self.state);
        state.cluster = true;
        state.moved.insert(slot, addr);
    }

    /// A node failed (connection refused, READONLY): read the map again before the next use.
    pub(super) fn failed(&self) {
        let mut state = locked(&self.state);
        if state.cluster {
            state.stale = true;
        }
    }

    /// Whether this is known to be a cluster (for a plain URL: once it answered MOVED, or
    /// once [`ClusterRoute::primaries`] found out).
    pub(super) fn is_cluster(&self) -> bool {
        locked(&self.state).cluster
    }

    /// Every primary (for `list`): the seed alone if it is not a cluster node.
    pub(super) fn primaries(
        &self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Vec<Arc<Server>>, BackendError> {
        match self.refresh(deadline, timeout) {
            Ok(()) => {}
            // A server without cluster support: it is the only one. (Nor can a user whom the
            // ACL denies CLUSTER SLOTS learn otherwise: such a server is taken as it is.)
            Err(BackendError::Server { code, detail })
                if !self.is_cluster()
                    && (detail.contains("cluster support disabled") || code == "NOPERM") =>
            {
                return Ok(vec![self.seeds[0].clone()]);
            }
            Err(e) => return Err(e),
        }
        let mut state = locked(&self.state);
        let mut addrs: Vec<Addr> = state.ranges.iter().map(|(_, _, a)| a.clone()).collect();
        addrs.sort();
        addrs.dedup();
        addrs.iter().map(|a| self.server(&mut state, a)).collect()
    }

    /// Read the slot map (CLUSTER SLOTS) from the first node that answers: the seeds, then
    /// the primaries of the last map. Each node gets a share of the time left.
    fn refresh(&self, deadline: Instant, timeout: Duration) -> Result<(), BackendError> {
        let mut candidates: Vec<Arc<Server>> = self.seeds.clone();
        {
            let mut state = locked(&self.state);
            let known: Vec<Addr> = state.ranges.iter().map(|(_, _, a)| a.clone()).collect();
            for addr in known {
                let server = self.server(&mut state, &addr)?;
                if !candidates.iter().any(|c| c.display() == server.display()) {
                    candidates.push(server);
                }
            }
        }
        let mut last = None;
        for (i, server) in candidates.iter().enumerate() {
            let left = deadline.saturating_duration_since(Instant::now());
            let share = (left / u32::try_from(candidates.len() - i).unwrap_or(1)).min(timeout);
            if share < Duration::from_millis(1) {
                break;
            }
            let by = Instant::now() + share;
            match cluster_slots(server, by, share) {
                Ok(ranges) => {
                    let mut state = locked(&self.state);
                    state.cluster = true;
                    state.stale = false;
                    state.moved.clear();
                    state.ranges = ranges;
                    return Ok(());
                }
                // Not a cluster node: no other seed will say otherwise about this one.
                Err(e @ BackendError::Server { .. }) if !self.is_cluster() => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(BackendError::Timeout {
            sent: false,
            after: timeout,
        }))
    }
}

/// `CLUSTER SLOTS` of `server`: each range's first and last slot and its primary.
fn cluster_slots(
    server: &Server,
    deadline: Instant,
    timeout: Duration,
) -> Result<Vec<(u16, u16, Addr)>, BackendError> {
    let mut conn = server.open(deadline, timeout)?;
    let _deferred = Deferred::new();
    set_timeouts(&conn, limit(timeout, deadline, true)?)?;
    let reply: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut conn)
        .map_err(|e| BackendError::from_command(e, timeout))?;
    let host_of_server = server.tcp.as_ref().map(|(h, _, _)| h.to_string());
    let mut ranges = Vec::new();
    for range in reply {
        let redis::Value::Array(items) = range else {
            continue;
        };
        let (Some(first), Some(last), Some(redis::Value::Array(primary))) =
            (int(items.first()), int(items.get(1)), items.get(2))
        else {
            continue;
        };
        let host = match primary.first() {
            Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(redis::Value::SimpleString(s)) => s.clone(),
            _ => String::new(),
        };
        // An empty or unknown host means "the node you asked" (cluster-preferred-endpoint-type).
        let host = if host.is_empty() || host == "?" {
            match &host_of_server {
                Some(h) => h.clone(),
                None => continue,
            }
        } else {
            host
        };
        let Some(port) = int(primary.get(1)) else {
            continue;
        };
        if let (Ok(first), Ok(last), Ok(port)) = (
            u16::try_from(first),
            u16::try_from(last),
            u16::try_from(port),
        ) {
            ranges.push((first, last, (host, port)));
        }
    }
    if ranges.is_empty() {
        return Err(BackendError::Server {
            code: "CLUSTERDOWN".into(),
            detail: "the cluster serves no slots yet".into(),
        });
    }
    Ok(ranges)
}

fn int(value: Option<&redis::Value>) -> Option<i64> {
    match value {
        Some(redis::Value::Int(n)) => Some(*n),
        _ => None,
    }
}

/// A Sentinel deployment.
pub(super) struct SentinelRoute {
    sentinels: Vec<Arc<Server>>,
    service: String,
    data: DataNodes,
    tls: TlsFiles,
    /// The primary last named and confirmed.
    primary: Mutex<Option<Arc<Server>>>,
}

impl SentinelRoute {
    pub(super) fn new(
        sentinels: &[Endpoint],
        service: &str,
        data: &DataNodes,
        tls: &TlsFiles,
    ) -> Result<Self, BackendError> {
        Ok(SentinelRoute {
            sentinels: sentinels
                .iter()
                .map(|e| Server::new(e.clone(), tls).map(Arc::new))
                .collect::<Result<_, _>>()?,
            service: service.to_owned(),
            data: data.clone(),
            tls: tls.clone(),
            primary: Mutex::new(None),
        })
    }

    /// A connection to the primary, confirmed by ROLE: the one named last if it still is the
    /// primary, else the one the sentinels name now.
    pub(super) fn open(
        &self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(Connection, Arc<Server>), BackendError> {
        let known = locked(&self.primary).clone();
        if let Some(server) = known {
            match self.confirm(&server, deadline, timeout) {
                Ok(conn) => return Ok((conn, server)),
                Err(_) => self.failed(),
            }
        }
        self.resolve(deadline, timeout)
    }

    /// Whether the sentinels now name another primary than `current` (asked of the first
    /// sentinel that answers; `false` when none does). A failover may leave a connection on
    /// the old primary, which goes on accepting writes until the sentinels demote it, writes
    /// that are then lost: a renewal asks first.
    pub(super) fn moved_from(
        &self,
        current: &Server,
        deadline: Instant,
        timeout: Duration,
    ) -> bool {
        let Some((host, port, _)) = &current.tcp else {
            return false;
        };
        let n = self.sentinels.len();
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            let left = deadline.saturating_duration_since(Instant::now());
            let share = (left / u32::try_from(n - i + 1).unwrap_or(1)).min(timeout);
            if share < Duration::from_millis(1) {
                break;
            }
            match ask_sentinel(sentinel, &self.service, Instant::now() + share, share) {
                Ok(Some((h, p))) => {
                    let moved = h != **host || p != *port;
                    if moved {
                        self.failed();
                    }
                    return moved;
                }
                Ok(None) | Err(_) => continue,
            }
        }
        false
    }

    /// The primary named last, for messages.
    pub(super) fn primary_display(&self) -> Option<String> {
        locked(&self.primary)
            .as_ref()
            .map(|s| s.display().to_owned())
    }

    /// The primary failed or was demoted: ask the sentinels again next time.
    pub(super) fn failed(&self) {
        *locked(&self.primary) = None;
    }

    fn resolve(
        &self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(Connection, Arc<Server>), BackendError> {
        let started = Instant::now();
        let mut unreachable = None;
        let mut demoted = None;
        let mut unknown = false;
        let mut timed_out = false;
        let n = self.sentinels.len();
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            // Each sentinel gets a share of the time left (and the primary one more share).
            let left = deadline.saturating_duration_since(Instant::now());
            let share = (left / u32::try_from(n - i + 1).unwrap_or(1)).min(timeout);
            if share < Duration::from_millis(1) {
                timed_out = true;
                break;
            }
            let named = match ask_sentinel(sentinel, &self.service, Instant::now() + share, share) {
                Ok(Some(addr)) => addr,
                Ok(None) => {
                    unknown = true;
                    continue;
                }
                Err(e) if refused_us(&e) => {
                    return Err(blame(e, &format!("sentinel {}", sentinel.display())));
                }
                Err(e) => {
                    timed_out |= e.is_timeout();
                    unreachable = Some(format!("{}: {e}", sentinel.display()));
                    continue;
                }
            };
            let endpoint = self
                .data
                .endpoint(&named.0, named.1)
                .map_err(BackendError::Connect)?;
            let server = Arc::new(Server::new(endpoint, &self.tls)?);
            match self.confirm(&server, deadline, timeout) {
                Ok(conn) => {
                    *locked(&self.primary) = Some(server.clone());
                    return Ok((conn, server));
                }
                Err(e) if refused_us(&e) => {
                    let who = format!("the primary {} (named by the sentinels)", server.display());
                    return Err(blame(e, &who));
                }
                Err(e) if e.is_timeout() => timed_out = true,
                Err(e) => {
                    demoted = Some(format!(
                        "{} (named by {}): {e}",
                        server.display(),
                        sentinel.display()
                    ))
                }
            }
        }
        if let Some(detail) = demoted {
            return Err(BackendError::Connect(format!(
                "the primary the sentinels name for \"{}\" is not usable: {detail}",
                self.service
            )));
        }
        if unknown {
            return Err(BackendError::Mismatch(format!(
                "the sentinels do not know the service \"{}\"; check the name after the hosts in the URL",
                crate::text::sanitize(&self.service)
            )));
        }
        if timed_out {
            // Slow or stopped, not refused: a timeout, as from one server, which the caller may
            // try again with more time. (The first attempt of a `run` has a short leash, whose
            // shares for three sentinels are too short for a TLS handshake on a busy machine;
            // "cannot connect" would end it at once.)
            return Err(BackendError::Timeout {
                sent: false,
                after: deadline.saturating_duration_since(started),
            });
        }
        Err(BackendError::Connect(format!(
            "no sentinel answered{}",
            unreachable
                .map(|d| format!(" (last: {d})"))
                .unwrap_or_default()
        )))
    }

    /// Open a connection to `server` and check with ROLE that it is a primary.
    fn confirm(
        &self,
        server: &Server,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Connection, BackendError> {
        let mut conn = server.open(deadline, timeout)?;
        let _deferred = Deferred::new();
        set_timeouts(&conn, limit(timeout, deadline, false)?)?;
        let role: Vec<redis::Value> = redis::cmd("ROLE")
            .query(&mut conn)
            .map_err(|e| BackendError::from_connect(e, timeout))?;
        match role.first() {
            Some(redis::Value::BulkString(b)) if b.as_slice() == b"master" => Ok(conn),
            Some(redis::Value::SimpleString(s)) if s == "master" => Ok(conn),
            _ => Err(BackendError::Connect("it is not a primary (ROLE)".into())),
        }
    }
}

/// Whether a sentinel or the primary it named refused *us*, whoever else is asked: our
/// credentials, our TLS settings, or our ACL user's rights (`NOPERM`, which the hint for it
/// explains; not "no sentinel answered").
fn refused_us(err: &BackendError) -> bool {
    match err {
        BackendError::Auth(_) | BackendError::Tls(_) | BackendError::Mismatch(_) => true,
        BackendError::Server { code, .. } => code == "NOPERM",
        _ => false,
    }
}

/// An authentication failure says who refused: the sentinels and the data nodes may have
/// credentials of their own.
fn blame(err: BackendError, who: &str) -> BackendError {
    match err {
        BackendError::Auth(detail) => BackendError::Auth(format!("{who}: {detail}")),
        other => other,
    }
}

/// What `sentinel` says SERVICE's primary is (`None`: it does not know the service).
fn ask_sentinel(
    sentinel: &Server,
    service: &str,
    deadline: Instant,
    timeout: Duration,
) -> Result<Option<Addr>, BackendError> {
    let mut conn = sentinel.open(deadline, timeout)?;
    let _deferred = Deferred::new();
    set_timeouts(&conn, limit(timeout, deadline, false)?)?;
    let reply: Option<(String, String)> = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(service)
        .query(&mut conn)
        .map_err(|e| BackendError::from_connect(e, timeout))?;
    Ok(reply.and_then(|(host, port)| port.parse().ok().map(|port| (host, port))))
}

/// The Cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the part between the first `{`
/// and the next `}`, when not empty), else of the whole key, modulo 16384.
pub fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = match bytes.iter().position(|&b| b == b'{') {
        Some(open) => match bytes[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &bytes[open + 1..open + 1 + len],
            _ => bytes,
        },
        None => bytes,
    };
    const CRC: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    CRC.checksum(hashed) % 16384
}

/// The owner named by a MOVED or ASK reply's detail (`SLOT HOST:PORT`).
pub(super) fn redirect(detail: &str) -> Option<(u16, Addr)> {
    let mut words = detail.split_whitespace();
    let slot = words.next()?.parse().ok()?;
    let target = words.next()?;
    let (host, port) = target.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((slot, (host.to_owned(), port.parse().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_hash_tag() {
        // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(slot("123456789"), 12739);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("user1000"));
        assert_eq!(slot("distlock:{deploy}"), slot("distlock:{deploy}:queue"));
        assert_eq!(slot("distlock:{deploy}:wake:abc"), slot("deploy"));
        // An empty tag does not count: the whole key is hashed.
        assert_eq!(
            slot("foo{}{bar}"),
            crc::Crc::<u16>::new(&crc::CRC_16_XMODEM).checksum(b"foo{}{bar}") % 16384
        );
        assert_eq!(slot("foo{{bar}}zap"), slot("{bar"));
    }

    #[test]
    fn redirects_name_the_owner() {
        assert_eq!(
            redirect("3999 127.0.0.1:6381"),
            Some((3999, ("127.0.0.1".into(), 6381)))
        );
        assert_eq!(redirect("12 [::1]:7000"), Some((12, ("::1".into(), 7000))));
        assert_eq!(redirect("garbage"), None);
    }
}
