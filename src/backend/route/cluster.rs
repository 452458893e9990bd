//! The Cluster route: one plain URL (used as it is until its server answers MOVED) or
//! `redis+cluster://` seeds, and from then on the owner of each slot, from `CLUSTER SLOTS` and
//! from every MOVED reply. Also the Cluster's arithmetic: the slot of a key and the owner a
//! redirection names.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Addr, Server, TlsFiles, limit, locked, set_timeouts};
use crate::backend::deferred::Deferred;
use crate::backend::{BackendError, Endpoint};

/// A Redis Cluster (or a server that may be one).
pub(in crate::backend) struct ClusterRoute {
    pub(super) seeds: Vec<Arc<Server>>,
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
    pub(in crate::backend) fn new(
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
    pub(in crate::backend) fn server_at(&self, addr: &Addr) -> Result<Arc<Server>, BackendError> {
        let mut state = locked(&self.state);
        self.server(&mut state, addr)
    }

    /// The server for `slot` (any node when `None`), reading the slot map first if needed.
    pub(in crate::backend) fn target(
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
    pub(in crate::backend) fn owner_display(&self, slot: Option<u16>) -> Option<String> {
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
    pub(in crate::backend) fn moved(&self, slot: u16, addr: Addr) {
        let mut state = locked(&self.state);
        state.cluster = true;
        state.moved.insert(slot, addr);
    }

    /// A node failed (connection refused, READONLY): read the map again before the next use.
    pub(in crate::backend) fn failed(&self) {
        let mut state = locked(&self.state);
        if state.cluster {
            state.stale = true;
        }
    }

    /// Whether this is known to be a cluster (for a plain URL: once it answered MOVED, or
    /// once [`ClusterRoute::primaries`] found out).
    pub(in crate::backend) fn is_cluster(&self) -> bool {
        locked(&self.state).cluster
    }

    /// Every primary (for `list`): the seed alone if it is not a cluster node.
    pub(in crate::backend) fn primaries(
        &self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Vec<Arc<Server>>, BackendError> {
        // A plain URL: ask its server what it is before asking it for a slot map, which a
        // user with the one-server ACL may not read (a denial is an entry in the ACL log).
        if !self.is_cluster() && mode(&self.seeds[0], deadline, timeout)? == Mode::Standalone {
            return Ok(vec![self.seeds[0].clone()]);
        }
        match self.refresh(deadline, timeout) {
            Ok(()) => {}
            // A server without cluster support (one too old to say so to HELLO): it is the
            // only one. (A Cluster node whose user may not read the map is not taken for one
            // server: the error says which right is missing.)
            Err(BackendError::Server { detail, .. })
                if !self.is_cluster() && detail.contains("cluster support disabled") =>
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

/// What a server says it is.
#[derive(Debug, PartialEq)]
enum Mode {
    /// Not a Cluster node (`HELLO` says `standalone`).
    Standalone,
    /// A Cluster node, or a server that could not say (older than Redis 6, which has no
    /// `HELLO`): its slot map decides.
    Unknown,
}

/// Whether `server` is a Cluster node, from the `mode` field of `HELLO 2`'s reply (the
/// connection speaks RESP2 already, so nothing changes on it). `HELLO` is one of the commands
/// Redis lets every user run, whatever the ACL (like `AUTH`), so it is never denied, where
/// `CLUSTER SLOTS` or `INFO` would be for a user with the one-server ACL of docs/protocol.md;
/// and a Cluster's keys cannot be found from what that user may send (`SCAN` answers for the
/// node alone, and only a key of a slot served elsewhere draws a `MOVED`).
fn mode(server: &Server, deadline: Instant, timeout: Duration) -> Result<Mode, BackendError> {
    let mut conn = server.open(deadline, timeout)?;
    let _deferred = Deferred::new();
    set_timeouts(&conn, limit(timeout, deadline, true)?)?;
    let reply = redis::cmd("HELLO").arg(2).query::<redis::Value>(&mut conn);
    match reply.map_err(|e| BackendError::from_command(e, timeout)) {
        Ok(redis::Value::Array(fields)) => {
            let text = |v: &redis::Value| match v {
                redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                redis::Value::SimpleString(s) => s.clone(),
                _ => String::new(),
            };
            let standalone = fields
                .chunks(2)
                .any(|pair| matches!(pair, [name, value] if text(name) == "mode" && text(value) == "standalone"));
            Ok(if standalone {
                Mode::Standalone
            } else {
                Mode::Unknown
            })
        }
        Ok(_) | Err(BackendError::Server { .. }) => Ok(Mode::Unknown),
        Err(e) => Err(e),
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
pub(in crate::backend) fn redirect(detail: &str) -> Option<(u16, Addr)> {
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
