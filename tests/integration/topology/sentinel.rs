//! One primary, its replicas, and three sentinels with a quorum of 2, all on loopback.
//!
//! Data nodes are numbered in start order (node 0 is the first primary) and keep their index
//! across failovers: ask `primary()` which one is the primary now. The sentinels start knowing
//! each other and the replicas (`known-sentinel`, `known-replica` in their configuration): left
//! to discover them, they would need a hello round (2 s) and an INFO round (10 s) first. What
//! remains of the start (about 1.3 s) is a sentinel's first connection to a peer that was not
//! up yet: it tries again only after a second, and calls the peer down until it answers.

use std::collections::HashMap;

use super::{REPLICATION_ARGS, Role, host_list, poll, report_logs_if_panicking, role};
use crate::util::{Redis, RedisOptions, free_port};

/// The name the sentinels monitor the primary under.
pub const SERVICE: &str = "distlock-test";

/// How long a silent primary takes to be judged down; short, for quick failovers.
const DOWN_AFTER_MS: u32 = 1000;

/// Sentinel's bound on each failover step: too short, and a promotion on a busy machine is
/// aborted. A failed attempt also blocks the next one for twice this, so not long either (a
/// successful failover resets the clock: the next one may start at once).
const FAILOVER_TIMEOUT_MS: u32 = 3000;

pub struct Sentinel {
    nodes: Vec<Redis>,
    sentinels: Vec<Redis>,
}

impl Sentinel {
    /// A primary, `replicas` replicas of it (synced before the sentinels start), and three
    /// sentinels. Returns when every sentinel names the primary, sees every replica with its
    /// link up, and knows both other sentinels: a failover can start at once.
    pub fn start(replicas: usize) -> Sentinel {
        Sentinel::start_with(replicas, Redis::options(), Redis::options())
    }

    /// As `start`, with the data nodes started with `nodes` and the sentinels with `sentinels`
    /// (ACL users of their own, say). TLS must be the same on both: a sentinel that speaks TLS
    /// speaks it to the data nodes and the other sentinels too.
    pub fn start_with(replicas: usize, nodes: RedisOptions, sentinels: RedisOptions) -> Sentinel {
        assert_eq!(
            nodes.is_tls(),
            sentinels.is_tls(),
            "TLS on the data nodes and the sentinels, or on neither"
        );
        let primary = nodes.clone().args(&REPLICATION_ARGS).start();
        let port = primary.port().to_string();
        let mut data = vec![primary];
        for _ in 0..replicas {
            data.push(
                (nodes.clone())
                    .args(&REPLICATION_ARGS)
                    .args(&["--replicaof", "127.0.0.1", &port])
                    .start(),
            );
        }
        let mut topology = Sentinel {
            sentinels: Vec::new(),
            nodes: data,
        };
        topology.wait_replicas_synced();
        topology.sentinels = start_sentinels(
            &sentinels,
            topology.nodes[0].port(),
            &topology.replica_ports(),
        );
        topology.wait_sentinels_agree();
        topology
    }

    /// `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/SERVICE`
    /// (`rediss+sentinel://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.nodes[0].is_tls() {
            "rediss"
        } else {
            "redis"
        };
        format!(
            "{scheme}+sentinel://{}/{SERVICE}",
            host_list(&self.sentinels)
        )
    }

    pub fn service(&self) -> &'static str {
        SERVICE
    }

    /// Data node `i` (0 is the first primary; the rest are replicas in start order).
    pub fn node(&self, i: usize) -> &Redis {
        &self.nodes[i]
    }

    /// SIGSTOP data node `i`. A stopped primary is failed over after `DOWN_AFTER_MS` and a
    /// little more; on SIGCONT it still claims to be primary until the sentinels demote it.
    pub fn stop(&mut self, i: usize) {
        self.nodes[i].stop();
    }

    pub fn cont(&mut self, i: usize) {
        self.nodes[i].cont();
    }

    /// SIGKILL data node `i` (`kill_primary` kills the primary and waits for its successor).
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Start data node `i` again on its port, as it was configured at start: node 0 as a
    /// primary, the others as replicas of node 0, whoever is primary now. The sentinels
    /// reconfigure it within about 10 s; `settle_now` does it at once.
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].restart();
    }

    /// How many data nodes (primary and replicas).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn sentinel(&self, i: usize) -> &Redis {
        &self.sentinels[i]
    }

    /// The primary's address as the first running sentinel reports it, `127.0.0.1:PORT`.
    pub fn primary_addr(&self) -> String {
        let sentinel = self.running_sentinel();
        poll("a sentinel to name the primary", || {
            reported_primary(sentinel).map(|port| format!("127.0.0.1:{port}"))
        })
    }

    /// The index of the data node that the sentinels report as the primary.
    pub fn primary(&self) -> usize {
        let addr = self.primary_addr();
        self.index_of(&addr)
            .unwrap_or_else(|| panic!("the sentinels name {addr}, which is none of our nodes"))
    }

    /// `SENTINEL FAILOVER` (a failover without agreement, the primary alive) and wait until
    /// every running sentinel names another primary and that node answers `ROLE` as master.
    /// Returns the new primary's index. The old primary is demoted about 10 s later, when the
    /// sentinels notice it still claims to be a primary: until then two nodes answer as master
    /// (`wait_settled` waits for the demotion, `settle_now` does it).
    pub fn failover(&mut self) -> usize {
        let old = self.primary_addr();
        let sentinel = self.running_sentinel();
        poll("SENTINEL FAILOVER to be accepted", || {
            match sentinel.try_cmd::<()>(&["SENTINEL", "FAILOVER", SERVICE]) {
                // INPROG: a failover runs already (ours, if a slow reply made us ask twice).
                Err(e) if e.code() != Some("INPROG") => Err(e.to_string()),
                _ => Ok(()),
            }
        });
        self.wait_new_primary(&old)
    }

    /// SIGKILL the primary and wait until the sentinels have elected and promoted a replica
    /// (the automatic path: subjectively down after `DOWN_AFTER_MS`, objectively down with
    /// the quorum, a leader election, a promotion). Returns the new primary's index.
    pub fn kill_primary(&mut self) -> usize {
        let old = self.primary_addr();
        let i = self.primary();
        self.nodes[i].kill();
        self.wait_new_primary(&old)
    }

    /// Wait until every running data node but the primary replicates from it, synced (per
    /// `ROLE`), and every running sentinel names it with no failover of its own still under
    /// way. After `failover` this takes about 10 s: a sentinel demotes the old primary
    /// only once it has reported itself master for 8 s, and it asks a replica's role every
    /// 10 s. The sentinels' own view of the replicas may lag as much again; it is refreshed
    /// every second once a primary is down, which is when it matters.
    ///
    /// The sentinels' part matters to a fault that follows: a sentinel that still runs the
    /// previous failover (flag `failover_in_progress`, until its replicas are reconfigured or
    /// the failover timeout passes) takes no part in the next one and goes on naming the old
    /// primary; on a loaded machine it did so for more than 20 s after that primary was killed.
    pub fn wait_settled(&self) {
        poll(
            "the data nodes and the sentinels to follow the primary",
            || {
                let primary = self
                    .index_of(&self.primary_addr())
                    .ok_or("unknown primary")?;
                let port = self.nodes[primary].port();
                for (i, node) in self.nodes.iter().enumerate() {
                    if i == primary || !node.is_up() {
                        continue;
                    }
                    match role(node)? {
                        Role::Replica { of, synced: true } if of == port => {}
                        other => return Err(format!(":{} is {other:?}", node.port())),
                    }
                }
                for sentinel in self.sentinels.iter().filter(|s| s.is_up()) {
                    let reported = reported_primary(sentinel)?;
                    if reported != port {
                        return Err(format!(":{} names :{reported}", sentinel.port()));
                    }
                    let master = sentinel_map(sentinel, &["SENTINEL", "MASTER", SERVICE])?;
                    if master.get("flags").map(String::as_str) != Some("master") {
                        return Err(format!(":{} reports {master:?}", sentinel.port()));
                    }
                }
                Ok(())
            },
        );
    }

    /// Do at once what the sentinels would do some seconds later: point every running data
    /// node that is not the primary the sentinels name, and does not replicate from it, at
    /// it (an old primary that still claims the role, a restarted node that follows its
    /// start-time primary); then `wait_settled`. For tests that chain faults and do not study
    /// the window in which two nodes accept writes.
    pub fn settle_now(&self) {
        let primary = self.primary();
        let port = self.nodes[primary].port();
        for (i, node) in self.nodes.iter().enumerate() {
            if i == primary || !node.is_up() {
                continue;
            }
            if !matches!(role(node), Ok(Role::Replica { of, .. }) if of == port) {
                node.cmd::<()>(&["REPLICAOF", "127.0.0.1", &port.to_string()]);
            }
        }
        self.wait_settled();
    }

    /// SIGSTOP every sentinel: they keep their ports and answer nothing. Stopped for more than
    /// 2 s, they enter TILT mode on `cont_sentinels` (their timer ran late; `INFO sentinel`
    /// says `sentinel_tilt:1`): they answer queries but fail nothing over for the next 30 s.
    pub fn stop_sentinels(&mut self) {
        self.sentinels.iter_mut().for_each(Redis::stop);
    }

    pub fn cont_sentinels(&mut self) {
        self.sentinels.iter_mut().for_each(Redis::cont);
    }

    /// SIGKILL every sentinel: their ports refuse connections.
    pub fn kill_sentinels(&mut self) {
        self.sentinels.iter_mut().for_each(Redis::kill);
    }

    fn running_sentinel(&self) -> &Redis {
        (self.sentinels.iter().find(|s| s.is_up()))
            .expect("a running sentinel to ask (all are stopped or killed)")
    }

    fn index_of(&self, addr: &str) -> Option<usize> {
        (self.nodes.iter()).position(|node| addr == format!("127.0.0.1:{}", node.port()))
    }

    fn replica_ports(&self) -> Vec<u16> {
        self.nodes[1..].iter().map(Redis::port).collect()
    }

    fn wait_replicas_synced(&self) {
        let port = self.nodes[0].port();
        poll("the replicas to sync with the primary", || {
            for node in &self.nodes[1..] {
                match role(node)? {
                    Role::Replica { of, synced: true } if of == port => {}
                    other => return Err(format!(":{} is {other:?}", node.port())),
                }
            }
            Ok(())
        });
    }

    fn wait_sentinels_agree(&self) {
        let primary = self.nodes[0].port();
        let replicas = self.replica_ports();
        poll(
            "the sentinels to see the primary, its replicas and each other",
            || {
                for sentinel in &self.sentinels {
                    let reported = reported_primary(sentinel)?;
                    if reported != primary {
                        return Err(format!(":{} names :{reported}", sentinel.port()));
                    }
                    let master = sentinel_map(sentinel, &["SENTINEL", "MASTER", SERVICE])?;
                    if master.get("flags").map(String::as_str) != Some("master") {
                        return Err(format!(":{} reports {master:?}", sentinel.port()));
                    }
                    check_replicas(sentinel, &replicas)?;
                    let peers = sentinel_maps(sentinel, &["SENTINEL", "SENTINELS", SERVICE])?;
                    let linked = (peers.iter())
                        .filter(|p| p.get("flags").map(String::as_str) == Some("sentinel"))
                        .count();
                    if linked != self.sentinels.len() - 1 {
                        return Err(format!(":{} is linked to {peers:?}", sentinel.port()));
                    }
                }
                Ok(())
            },
        );
    }

    /// Wait until every running sentinel names a primary other than `old`, all the same one,
    /// and that node answers `ROLE` as master.
    fn wait_new_primary(&self, old: &str) -> usize {
        poll(&format!("the sentinels to replace primary {old}"), || {
            let mut named = None;
            for sentinel in self.sentinels.iter().filter(|s| s.is_up()) {
                let addr = format!("127.0.0.1:{}", reported_primary(sentinel)?);
                if addr == old {
                    return Err(format!(":{} still names {old}", sentinel.port()));
                }
                if named.as_ref().is_some_and(|n| *n != addr) {
                    return Err(format!("the sentinels disagree: {named:?} and {addr}"));
                }
                named = Some(addr);
            }
            let addr = named.ok_or("every sentinel is stopped or killed")?;
            let i = self.index_of(&addr).ok_or(format!("{addr} is not ours"))?;
            match role(&self.nodes[i])? {
                Role::Primary => Ok(i),
                other => Err(format!("{addr} is named but is {other:?}")),
            }
        })
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        report_logs_if_panicking("sentinel", self.nodes.iter().chain(&self.sentinels));
    }
}

/// The sentinels: each with its own directory and configuration, started knowing the others
/// and the replicas. Their ports are chosen before any starts (each configuration names the
/// others), so if one of them was taken meanwhile, all three start again on new ports.
fn start_sentinels(options: &RedisOptions, primary: u16, replicas: &[u16]) -> Vec<Redis> {
    for _ in 0..5 {
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let ids: Vec<String> = (0..3)
            .map(|_| (0..40).map(|_| fastrand::digit(16)).collect())
            .collect();
        let mut started = Vec::new();
        for i in 0..3 {
            let mut conf = format!(
                "sentinel resolve-hostnames no\n\
                 sentinel myid {id}\n\
                 sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n\
                 sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n",
                id = ids[i],
            );
            for replica in replicas {
                conf += &format!("sentinel known-replica {SERVICE} 127.0.0.1 {replica}\n");
            }
            for j in (0..3).filter(|&j| j != i) {
                conf += &format!(
                    "sentinel known-sentinel {SERVICE} 127.0.0.1 {} {}\n",
                    ports[j], ids[j]
                );
            }
            match options.clone().sentinel(&conf).start_on(ports[i]) {
                Some(sentinel) => started.push(sentinel),
                None => break,
            }
        }
        if started.len() == 3 {
            return started;
        }
    }
    panic!("could not start three sentinels on free ports");
}

/// The primary's port per `SENTINEL GET-MASTER-ADDR-BY-NAME`.
fn reported_primary(sentinel: &Redis) -> Result<u16, String> {
    let addr: Option<(String, u16)> = sentinel
        .try_cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE])
        .map_err(|e| format!("sentinel :{}: {e}", sentinel.port()))?;
    let (_, port) = addr.ok_or(format!(":{} knows no {SERVICE}", sentinel.port()))?;
    Ok(port)
}

/// Whether `sentinel` lists exactly `expected` as replicas, each flagged a plain replica (not
/// down, not disconnected) with its link to the primary up.
fn check_replicas(sentinel: &Redis, expected: &[u16]) -> Result<(), String> {
    let replicas = sentinel_maps(sentinel, &["SENTINEL", "REPLICAS", SERVICE])?;
    for port in expected {
        let found = replicas
            .iter()
            .find(|r| r.get("port") == Some(&port.to_string()));
        let healthy = found.is_some_and(|r| {
            r.get("flags").map(String::as_str) == Some("slave")
                && r.get("master-link-status").map(String::as_str) == Some("ok")
        });
        if !healthy {
            return Err(format!(
                "sentinel :{} sees replica :{port} as {found:?}",
                sentinel.port()
            ));
        }
    }
    Ok(())
}

fn sentinel_map(sentinel: &Redis, args: &[&str]) -> Result<HashMap<String, String>, String> {
    (sentinel.try_cmd(args)).map_err(|e| format!("sentinel :{} {args:?}: {e}", sentinel.port()))
}

fn sentinel_maps(sentinel: &Redis, args: &[&str]) -> Result<Vec<HashMap<String, String>>, String> {
    (sentinel.try_cmd(args)).map_err(|e| format!("sentinel :{} {args:?}: {e}", sentinel.port()))
}
