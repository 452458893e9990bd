//! Topologies of several Redis servers for the multi-server tests (issue 10): independent
//! primaries for Redlock (`Primaries`), one primary with replicas watched by three sentinels
//! (`Sentinel`), and Redis Cluster (`Cluster`). Every process listens on a loopback port of our
//! own, is started by the test and dies with its fixture, also when the test panics; every wait
//! polls a condition and fails the test after `BOUND` with what it saw last.
//!
//! Boundary: plain Redis, driven with plain commands on single-node connections. Nothing here
//! knows distlock beyond the URL forms it accepts (`redis+sentinel://`, `redis+cluster://`).
//! The faults are the real ones: SIGSTOP/SIGCONT, SIGKILL, restarts with and without the data,
//! `SENTINEL FAILOVER`, `CLUSTER FAILOVER`, slot migration.

use std::time::{Duration, Instant};

use crate::util::{BOUND, Redis};

mod cluster;
mod primaries;
mod sentinel;
mod tests;

pub use cluster::Cluster;
pub use primaries::Primaries;
pub use sentinel::Sentinel;

/// Poll `probe` until it returns `Ok`, and return that. The `Err` says why not yet; after
/// `BOUND` the test fails with `what` and the last reason. Every 20 ms: the probes open
/// connections to several servers, and on a 2-CPU machine a tighter loop would steal the time
/// that sentinels and cluster nodes need for their own timers (a sentinel whose timer runs 2 s
/// late enters TILT mode and stops failing over for 30 s).
fn poll<T>(what: &str, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let start = Instant::now();
    loop {
        match probe() {
            Ok(value) => return value,
            Err(why) => assert!(
                start.elapsed() < BOUND,
                "timed out after {BOUND:?} waiting for {what}; last seen: {why}"
            ),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server's replication role, from `ROLE` (not from what sentinels or gossip believe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Primary,
    /// A replica of the server on `of` (a port on 127.0.0.1); `synced` once its link is up
    /// and the initial sync is done (`ROLE` state `connected`).
    Replica {
        of: u16,
        synced: bool,
    },
}

/// Ask `node` for its role.
pub fn role(node: &Redis) -> Result<Role, String> {
    let reply: Vec<redis::Value> = node
        .try_cmd(&["ROLE"])
        .map_err(|e| format!("ROLE on :{}: {e}", node.port()))?;
    let field = |i: usize| -> Result<String, String> {
        let value = reply.get(i).ok_or("short ROLE reply")?;
        redis::from_redis_value_ref(value).map_err(|e| format!("ROLE reply: {e}"))
    };
    match field(0)?.as_str() {
        "master" => Ok(Role::Primary),
        "slave" => Ok(Role::Replica {
            of: field(2)?.parse().map_err(|e| format!("ROLE port: {e}"))?,
            synced: field(3)? == "connected",
        }),
        other => Err(format!(":{} has role {other}", node.port())),
    }
}

/// Arguments for every replicating node: a replica that needs a full sync gets it at once.
/// Redis 7.0 streams the snapshot straight to replicas (`repl-diskless-sync yes`) but first
/// waits `repl-diskless-sync-delay` (5 s) for more replicas to join the same transfer: five
/// seconds of every start and of every failover that ends in a full resync.
const REPLICATION_ARGS: [&str; 2] = ["--repl-diskless-sync-delay", "0"];

/// When a test fails with a topology up, print the end of every server's log (the harness shows
/// it with the failure): what the sentinels or the cluster bus decided is the usual clue.
fn report_logs_if_panicking<'a>(topology: &str, servers: impl IntoIterator<Item = &'a Redis>) {
    if !std::thread::panicking() {
        return;
    }
    for server in servers {
        eprintln!(
            "--- {topology}: log of :{} ---\n{}",
            server.port(),
            server.log_tail(40)
        );
    }
}

/// `127.0.0.1:PORT` for every node, comma-separated (the host list of a multi-host URL).
fn host_list<'a>(nodes: impl IntoIterator<Item = &'a Redis>) -> String {
    nodes
        .into_iter()
        .map(|node| format!("127.0.0.1:{}", node.port()))
        .collect::<Vec<_>>()
        .join(",")
}
