//! The Sentinel route: the sentinels are asked in turn for the service's primary, which is
//! used only once `ROLE` confirms it, and asked again when a connection to it fails or it
//! turns out to be a replica.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Connection;

use super::{Addr, Server, TlsFiles, limit, locked, set_timeouts};
use crate::backend::deferred::Deferred;
use crate::backend::servers::DataNodes;
use crate::backend::{BackendError, Endpoint};

/// A Sentinel deployment.
pub(in crate::backend) struct SentinelRoute {
    pub(super) sentinels: Vec<Arc<Server>>,
    service: String,
    data: DataNodes,
    tls: TlsFiles,
    /// The primary last named and confirmed.
    primary: Mutex<Option<Arc<Server>>>,
}

impl SentinelRoute {
    pub(in crate::backend) fn new(
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
    pub(in crate::backend) fn open(
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
    /// sentinel that answers; `None` when none does in time: the caller cannot tell). A
    /// failover may leave a connection on the old primary, which goes on accepting writes
    /// until the sentinels demote it, writes that are then lost: a renewal asks first.
    pub(in crate::backend) fn moved_from(
        &self,
        current: &Server,
        deadline: Instant,
        timeout: Duration,
    ) -> Option<bool> {
        let Some((host, port, _)) = &current.tcp else {
            return Some(false);
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
                    return Some(moved);
                }
                Ok(None) | Err(_) => continue,
            }
        }
        None
    }

    /// The primary named last and confirmed, which the next connection goes to (after ROLE
    /// confirms it) without asking the sentinels.
    pub(in crate::backend) fn known(&self) -> Option<Arc<Server>> {
        locked(&self.primary).clone()
    }

    /// The primary named last, for messages.
    pub(in crate::backend) fn primary_display(&self) -> Option<String> {
        locked(&self.primary)
            .as_ref()
            .map(|s| s.display().to_owned())
    }

    /// The primary failed or was demoted: ask the sentinels again next time.
    pub(in crate::backend) fn failed(&self) {
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
