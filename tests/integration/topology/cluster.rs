//! Redis Cluster on loopback: three or more primaries, optionally a replica each, created with
//! `redis-cli --cluster create`, with the faults of a cluster (failover, a killed primary, slot
//! migration).
//!
//! Nodes are numbered in start order and keep their index (and their id) for the fixture's
//! life; `redis-cli` makes the first `primaries` of them primaries and gives each a replica
//! among the rest, not in order: ask `replicas_of`. Roles come from `ROLE` (the truth of
//! replication), slot ownership from the node that claims the slot (the one that serves it
//! without a redirect).

use std::process::{Command, Stdio};
use std::time::Instant;

use super::{REPLICATION_ARGS, Role, host_list, poll, report_logs_if_panicking, role};
use crate::util::{self, BOUND, Redis, RedisOptions};

/// How long a silent node takes to be suspected (PFAIL); a failover follows within a few
/// times this.
const NODE_TIMEOUT_MS: &str = "1000";

pub const SLOTS: u16 = 16384;

pub struct Cluster {
    nodes: Vec<Redis>,
    /// `CLUSTER MYID` of each node; a node keeps it across restarts (`nodes.conf`).
    ids: Vec<String>,
}

/// One line of `CLUSTER NODES`: what one node believes about one node.
#[derive(Debug)]
struct View {
    id: String,
    flags: Vec<String>,
    /// Slot ranges it serves, inclusive (open migrations, `[slot->-id]`, left out).
    slots: Vec<(u16, u16)>,
}

impl View {
    fn flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }
}

impl Cluster {
    /// Start `primaries` primaries (at least 3: redis-cli refuses fewer) with
    /// `replicas_per_primary` replicas each. Returns when every node reports `cluster_state:ok`
    /// with all 16384 slots served, every node sees every other with the roles they have, and
    /// every replica has synced. A primary reports `ok` at the earliest 2 s after it started
    /// (Redis waits before it lets a primary serve), which bounds how fast this can be.
    pub fn start(primaries: usize, replicas_per_primary: usize) -> Cluster {
        Cluster::start_with(primaries, replicas_per_primary, Redis::options())
    }

    /// As `start`, every node started with `options` (TLS, which then covers the cluster bus
    /// and replication too; ACL users).
    pub fn start_with(
        primaries: usize,
        replicas_per_primary: usize,
        options: RedisOptions,
    ) -> Cluster {
        assert!(primaries >= 3, "Redis Cluster needs at least 3 primaries");
        let nodes: Vec<Redis> = (0..primaries * (1 + replicas_per_primary))
            .map(|_| {
                (options.clone().cluster_node())
                    .args(&["--cluster-node-timeout", NODE_TIMEOUT_MS])
                    .args(&REPLICATION_ARGS)
                    .start()
            })
            .collect();
        let ids = nodes
            .iter()
            .map(|node| node.cmd::<String>(&["CLUSTER", "MYID"]))
            .collect();
        let cluster = Cluster { nodes, ids };
        let mut create = Command::new("redis-cli");
        create
            .args(cluster.nodes[0].cli_tls_args())
            .args(["--cluster", "create"])
            .args((cluster.nodes.iter()).map(|node| format!("127.0.0.1:{}", node.port())))
            .args(["--cluster-replicas", &replicas_per_primary.to_string()])
            .arg("--cluster-yes")
            .stdin(Stdio::null());
        let created = util::run(&mut create);
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed ({}):\n{}{}",
            created.status,
            String::from_utf8_lossy(&created.stdout),
            String::from_utf8_lossy(&created.stderr),
        );
        cluster.wait_ok();
        cluster
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn node(&self, i: usize) -> &Redis {
        &self.nodes[i]
    }

    pub fn id(&self, i: usize) -> &str {
        &self.ids[i]
    }

    /// `redis://127.0.0.1:PORT` of node `i` (`rediss://` with TLS), a single-node connection:
    /// keys of other nodes' slots answer MOVED.
    pub fn url_of_node(&self, i: usize) -> String {
        self.nodes[i].url()
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...` (`rediss+cluster://` with TLS), every
    /// node a seed.
    pub fn seeds_url(&self) -> String {
        let scheme = if self.nodes[0].is_tls() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}+cluster://{}", host_list(&self.nodes))
    }

    /// The hash slot of `key`: CRC16 (XMODEM) of its hash tag (the text between the first `{`
    /// and the next `}`, when not empty) or of the whole key, modulo 16384; what
    /// `CLUSTER KEYSLOT` answers, without asking a node.
    pub fn slot_of(key: &str) -> u16 {
        let bytes = key.as_bytes();
        let tag = bytes.iter().position(|&b| b == b'{').and_then(|open| {
            let rest = &bytes[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        });
        crc16(tag.unwrap_or(bytes)) % SLOTS
    }

    /// The node that serves `slot` now: the one running node that claims it. Polls while no
    /// node or two nodes claim it (in the middle of a failover).
    pub fn node_for_slot(&self, slot: u16) -> usize {
        poll(&format!("one node to serve slot {slot}"), || {
            let mut claimants = Vec::new();
            for (i, node) in self.up() {
                if self.own_view(node)?.serves(slot) {
                    claimants.push(i);
                }
            }
            match claimants[..] {
                [i] => Ok(i),
                _ => Err(format!("nodes {claimants:?} claim it")),
            }
        })
    }

    /// The slot ranges node `i` serves, inclusive, as it claims them.
    pub fn slots_of(&self, i: usize) -> Vec<(u16, u16)> {
        poll(&format!("node {i}'s slots"), || {
            Ok(self.own_view(&self.nodes[i])?.slots)
        })
    }

    /// A key, `prefix` and a number, whose slot node `i` serves now.
    pub fn key_on(&self, i: usize, prefix: &str) -> String {
        let slots = self.slots_of(i);
        assert!(!slots.is_empty(), "node {i} serves no slot");
        (0..)
            .map(|n| format!("{prefix}{n}"))
            .find(|key| {
                let slot = Cluster::slot_of(key);
                slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
            })
            .expect("some key hashes to a slot of the node")
    }

    /// A key, `prefix` and a number, whose slot is `slot`.
    pub fn key_in_slot(prefix: &str, slot: u16) -> String {
        (0..)
            .map(|n| format!("{prefix}{n}"))
            .find(|key| Cluster::slot_of(key) == slot)
            .expect("some key hashes to every slot")
    }

    /// The lowest slot node `i` serves: the one `redis-cli --cluster reshard` moves first
    /// when it takes slots from that node.
    pub fn first_slot_of(&self, i: usize) -> u16 {
        let slots = self.slots_of(i);
        (slots.iter().map(|&(first, _)| first).min()).expect("the node serves a slot")
    }

    /// Whether `key` is on node `i` while its slot may be migrating: a source answers ASK for
    /// a key it no longer has, and a target serves a key of an importing slot only after
    /// `ASKING` (to anyone else it answers MOVED).
    pub fn holds_key(&self, i: usize, key: &str) -> bool {
        let mut con = self.nodes[i].client();
        let _: () = redis::cmd("ASKING").query(&mut con).expect("ASKING");
        match redis::cmd("EXISTS").arg(key).query::<i64>(&mut con) {
            Ok(n) => n == 1,
            Err(e) if matches!(e.code(), Some("ASK" | "MOVED")) => false,
            Err(e) => panic!("EXISTS {key} on node {i}: {e}"),
        }
    }

    /// `PTTL key` on node `i`, answered even while its slot is being imported there (after
    /// `ASKING`); -2 when the node does not have it.
    pub fn pttl_on(&self, i: usize, key: &str) -> i64 {
        let mut con = self.nodes[i].client();
        let _: () = redis::cmd("ASKING").query(&mut con).expect("ASKING");
        match redis::cmd("PTTL").arg(key).query::<i64>(&mut con) {
            Ok(ms) => ms,
            Err(e) if matches!(e.code(), Some("ASK" | "MOVED")) => -2,
            Err(e) => panic!("PTTL {key} on node {i}: {e}"),
        }
    }

    /// `MIGRATE` exactly `keys` (of one slot) from node `from` to node `to`, as one batch.
    pub fn migrate_these(&self, from: usize, to: usize, keys: &[String]) {
        let mut migrate = redis::cmd("MIGRATE");
        migrate.arg("127.0.0.1").arg(self.nodes[to].port());
        migrate.arg("").arg(0).arg(5000).arg("KEYS").arg(keys);
        migrate
            .query::<()>(&mut self.nodes[from].client())
            .unwrap_or_else(|e| panic!("MIGRATE {keys:?} to node {to}: {e}"));
    }

    /// How many TRYAGAIN replies node `i` has given (INFO errorstats).
    pub fn tryagain_count(&self, i: usize) -> u64 {
        let info: String = self.nodes[i].cmd(&["INFO", "errorstats"]);
        (info.lines())
            .find_map(|l| l.strip_prefix("errorstat_TRYAGAIN:count="))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// `redis-cli --cluster reshard`: move `slots` slots (the lowest first) from node `from`
    /// to node `to`, `pipeline` keys per MIGRATE (redis-cli's default is 10; 1 makes a slot
    /// of many keys take seconds, like one of large values), and wait until the cluster is
    /// settled again. redis-cli refuses to start while the nodes disagree about the slot map
    /// (just after an earlier reshard): it is asked again until it accepts.
    pub fn reshard(&self, from: usize, to: usize, slots: u16, pipeline: u32) {
        let port = self.nodes[from].port().to_string();
        poll(
            &format!("redis-cli to reshard from node {from} to node {to}"),
            || {
                let mut reshard = Command::new("redis-cli");
                reshard
                    .args(self.nodes[0].cli_tls_args())
                    .args(["--cluster", "reshard", &format!("127.0.0.1:{port}")])
                    .args([
                        "--cluster-from",
                        &self.ids[from],
                        "--cluster-to",
                        &self.ids[to],
                    ])
                    .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"])
                    .args(["--cluster-pipeline", &pipeline.to_string()])
                    .stdin(Stdio::null());
                let done = util::run(&mut reshard);
                let said = String::from_utf8_lossy(&done.stdout).into_owned();
                if done.status.success() && !said.contains("[ERR]") {
                    Ok(())
                } else {
                    Err(format!("{said}{}", String::from_utf8_lossy(&done.stderr)))
                }
            },
        );
        self.wait_ok();
    }

    /// The running nodes that answer `ROLE` as primaries.
    pub fn primaries(&self) -> Vec<usize> {
        self.up()
            .filter(|(_, node)| role(node) == Ok(Role::Primary))
            .map(|(i, _)| i)
            .collect()
    }

    /// The running nodes that replicate from node `primary`, per their `ROLE`.
    pub fn replicas_of(&self, primary: usize) -> Vec<usize> {
        let port = self.nodes[primary].port();
        self.up()
            .filter(|(_, node)| matches!(role(node), Ok(Role::Replica { of, .. }) if of == port))
            .map(|(i, _)| i)
            .collect()
    }

    /// Open the migration of `slot` from node `from` to node `to`: `IMPORTING` on the
    /// target, then `MIGRATING` on the source (that order, so no ASK can point at a target
    /// that would refuse it). From here, the source answers ASK for keys it no longer has.
    pub fn begin_migration(&self, slot: u16, from: usize, to: usize) {
        let slot = slot.to_string();
        let target = &self.nodes[to];
        target.cmd::<()>(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &self.ids[from]]);
        let source = &self.nodes[from];
        source.cmd::<()>(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &self.ids[to]]);
    }

    /// `MIGRATE` every key of `slot` from node `from` to node `to`, 100 at a time (with their
    /// TTLs; without REPLACE, so a key that already exists on the target fails the test).
    /// Returns how many keys moved.
    pub fn migrate_keys(&self, slot: u16, from: usize, to: usize) -> usize {
        let deadline = Instant::now() + BOUND;
        let source = &self.nodes[from];
        let mut con = source.client();
        let mut moved = 0;
        loop {
            let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut con)
                .unwrap_or_else(|e| panic!("CLUSTER GETKEYSINSLOT {slot}: {e}"));
            if keys.is_empty() {
                return moved;
            }
            let mut migrate = redis::cmd("MIGRATE");
            migrate.arg("127.0.0.1").arg(self.nodes[to].port());
            migrate.arg("").arg(0).arg(5000).arg("KEYS").arg(&keys);
            migrate
                .query::<()>(&mut con)
                .unwrap_or_else(|e| panic!("MIGRATE of slot {slot} to node {to}: {e}"));
            moved += keys.len();
            assert!(
                Instant::now() < deadline,
                "slot {slot} still has keys after {BOUND:?} of MIGRATE"
            );
        }
    }

    /// Close the migration: `SETSLOT NODE` on the target, the source, then every other
    /// primary, and wait until every running node sees node `to` serve `slot`.
    pub fn end_migration(&self, slot: u16, from: usize, to: usize) {
        let setslot = [
            "CLUSTER",
            "SETSLOT",
            &slot.to_string(),
            "NODE",
            &self.ids[to],
        ];
        self.nodes[to].cmd::<()>(&setslot);
        self.nodes[from].cmd::<()>(&setslot);
        for i in self.primaries() {
            if i != to && i != from {
                self.nodes[i].cmd::<()>(&setslot);
            }
        }
        let to_id = &self.ids[to];
        poll(
            &format!("every node to see slot {slot} on node {to}"),
            || {
                for (i, node) in self.up() {
                    let views = cluster_nodes(node)?;
                    if !views.iter().any(|v| v.id == *to_id && v.serves(slot)) {
                        return Err(format!("node {i} does not see it yet"));
                    }
                }
                Ok(())
            },
        );
    }

    /// Move `slot` and its keys from node `from` to node `to`, the way `redis-cli --cluster
    /// reshard` does: `begin_migration`, `migrate_keys`, `end_migration`. Returns how many
    /// keys moved.
    pub fn migrate_slot(&self, slot: u16, from: usize, to: usize) -> usize {
        self.begin_migration(slot, from, to);
        let moved = self.migrate_keys(slot, from, to);
        self.end_migration(slot, from, to);
        moved
    }

    /// `CLUSTER FAILOVER` on a replica of node `primary` (a coordinated failover: the primary
    /// pauses its clients until the replica has caught up, so no acknowledged write is lost),
    /// and wait until the roles are swapped and the cluster is settled (`wait_ok`). Returns
    /// the index of the new primary.
    pub fn failover(&mut self, primary: usize) -> usize {
        let replica = *self
            .replicas_of(primary)
            .first()
            .unwrap_or_else(|| panic!("node {primary} has no running replica to fail over to"));
        poll("CLUSTER FAILOVER to be accepted", || {
            (self.nodes[replica].try_cmd::<()>(&["CLUSTER", "FAILOVER"])).map_err(|e| e.to_string())
        });
        let new_port = self.nodes[replica].port();
        poll(
            &format!("node {replica} to take over from node {primary}"),
            || match (role(&self.nodes[replica])?, role(&self.nodes[primary])?) {
                (Role::Primary, Role::Replica { of, .. }) if of == new_port => Ok(()),
                roles => Err(format!("roles are {roles:?}")),
            },
        );
        self.wait_ok();
        replica
    }

    /// SIGKILL node `primary` and wait until one of its replicas has been elected in its
    /// place and the cluster is settled again (`wait_ok`). Returns the new primary's index.
    pub fn kill_primary(&mut self, primary: usize) -> usize {
        let replicas = self.replicas_of(primary);
        assert!(
            !replicas.is_empty(),
            "node {primary} has no running replica"
        );
        self.nodes[primary].kill();
        let promoted = poll(
            &format!("a replica of node {primary} to be promoted"),
            || {
                (replicas.iter())
                    .find(|&&r| role(&self.nodes[r]) == Ok(Role::Primary))
                    .copied()
                    .ok_or_else(|| format!("replicas {replicas:?} are not primaries yet"))
            },
        );
        self.wait_ok();
        promoted
    }

    /// SIGSTOP node `i`. A stopped primary with a replica is failed over after a few node
    /// timeouts; on SIGCONT it learns it lost and becomes a replica.
    pub fn stop(&mut self, i: usize) {
        self.nodes[i].stop();
    }

    pub fn cont(&mut self, i: usize) {
        self.nodes[i].cont();
    }

    pub fn kill(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Start node `i` again on its port with its `nodes.conf`: it rejoins with its id.
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].restart();
    }

    /// Wait until the running nodes form a settled cluster: each reports `cluster_state:ok`
    /// with all slots served, sees every running node without a failure flag and in the role
    /// it has, and every running replica has synced with its primary.
    pub fn wait_ok(&self) {
        poll("the cluster to be ok on every node", || {
            let mut roles = Vec::new();
            for (i, node) in self.up() {
                let role = role(node)?;
                if matches!(role, Role::Replica { synced: false, .. }) {
                    return Err(format!("node {i} has not synced"));
                }
                roles.push((self.ids[i].as_str(), role));
            }
            for (i, node) in self.up() {
                let info: String = (node.try_cmd(&["CLUSTER", "INFO"]))
                    .map_err(|e| format!("CLUSTER INFO on node {i}: {e}"))?;
                for expected in ["cluster_state:ok", "cluster_slots_ok:16384"] {
                    if !info.lines().any(|l| l.trim() == expected) {
                        return Err(format!("node {i} lacks {expected}:\n{info}"));
                    }
                }
                let views = cluster_nodes(node)?;
                for (id, role) in &roles {
                    let view = (views.iter().find(|v| v.id == *id))
                        .ok_or(format!("node {i} does not know {id}"))?;
                    let as_primary = view.flag("master");
                    let failing = view.flag("fail") || view.flag("fail?");
                    if failing || as_primary != (*role == Role::Primary) {
                        return Err(format!("node {i} sees {view:?}, its role is {role:?}"));
                    }
                }
            }
            Ok(())
        });
    }

    fn up(&self) -> impl Iterator<Item = (usize, &Redis)> {
        self.nodes.iter().enumerate().filter(|(_, n)| n.is_up())
    }

    /// What `node` says about itself.
    fn own_view(&self, node: &Redis) -> Result<View, String> {
        (cluster_nodes(node)?.into_iter())
            .find(|v| v.flag("myself"))
            .ok_or(format!(":{} has no myself line", node.port()))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        report_logs_if_panicking("cluster", &self.nodes);
    }
}

/// `CLUSTER NODES` of `node`, parsed:
/// `id ip:port@bus[,hostname] flags primary ping pong epoch link slot...`, where a slot is
/// `n`, `a-b`, or an open migration in brackets.
fn cluster_nodes(node: &Redis) -> Result<Vec<View>, String> {
    let text: String = (node.try_cmd(&["CLUSTER", "NODES"]))
        .map_err(|e| format!("CLUSTER NODES on :{}: {e}", node.port()))?;
    let mut views = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("unexpected CLUSTER NODES line: {line}");
        let mut slots = Vec::new();
        for range in fields.iter().skip(8).filter(|r| !r.starts_with('[')) {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            slots.push((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?));
        }
        views.push(View {
            id: fields[0].to_string(),
            flags: fields
                .get(2)
                .ok_or_else(bad)?
                .split(',')
                .map(String::from)
                .collect(),
            slots,
        });
    }
    Ok(views)
}

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), the hash of Redis Cluster's key slots.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}
