//! The plan: everything the seed decides, and nothing else. The fault schedules (the servers',
//! in one lane per server fault that may be under way at once, and the processes'), and each
//! contender's sequence of parameters, drawn from its own generator seeded from the run's
//! seed. Nothing here touches a process or a server ([`super::faults`] executes the schedules,
//! the contender loop in [`super`] runs the parameters), so a seed replays the same attack.

use std::fmt::Write as _;

/// A key the contenders share, and how every contender on it uses it.
pub(super) struct Key {
    pub(super) name: &'static str,
    /// 1: a mutex; N: a counting semaphore of N (`run --limit N`, the same N for everyone);
    /// 0: a shared key (`rw`).
    pub(super) limit: u32,
    /// A shared (reader/writer) key: readers (`run --shared`) hold it together, a writer (a
    /// plain run) alone.
    pub(super) rw: bool,
    /// How often a contender's iteration picks this key, in percent.
    weight: u32,
}

impl Key {
    pub(super) fn is_mutex(&self) -> bool {
        self.limit == 1 && !self.rw
    }

    pub(super) fn is_semaphore(&self) -> bool {
        self.limit > 1
    }
}

/// Three mutexes, whose sections share a read-modify-write counter each, a semaphore of 3,
/// whose sections only stamp, and a shared key, whose writers share a counter and whose readers
/// only stamp. The semaphore gets the largest share of iterations so that more than 3
/// contenders want it at once most of the time: its limit is under test only when saturated.
pub(super) const KEYS: [Key; 5] = [
    Key {
        name: "chaos-a",
        limit: 1,
        rw: false,
        weight: 18,
    },
    Key {
        name: "chaos-b",
        limit: 1,
        rw: false,
        weight: 18,
    },
    Key {
        name: "chaos-c",
        limit: 1,
        rw: false,
        weight: 18,
    },
    Key {
        name: "chaos-sem",
        limit: 3,
        rw: false,
        weight: 30,
    },
    Key {
        name: "chaos-rw",
        limit: 0,
        rw: true,
        weight: 16,
    },
];
pub(super) const CONTENDERS: usize = 10;
pub(super) const TTLS_MS: [u64; 3] = [1000, 1500, 2000];
pub(super) const MAX_TTL_MS: u64 = 2000;

/// What the contenders lock on, and what the server faults may do to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Topology {
    /// One server without persistence: a restart forgets every lock.
    Single,
    /// A Redlock over 5 independent primaries with `appendonly yes` + `appendfsync always`: a
    /// restart keeps every acknowledged write. Two fault lanes, so that at most 2 nodes (a
    /// minority) are stopped, paused or down at any instant, and a majority always has its data.
    Redlock,
    /// A primary and a replica behind three sentinels (`redis+sentinel://`), without
    /// persistence: failovers (`SENTINEL FAILOVER`, a SIGKILLed or a SIGSTOPped primary) while
    /// waiters are blocked on their doorbells, besides short stops and pauses of the primary.
    Sentinel,
    /// Redis Cluster, 3 primaries with a replica each (`redis+cluster://`), without
    /// persistence: migrations of a lock's slot by hand (`SETSLOT IMPORTING/MIGRATING`,
    /// `MIGRATE`, `SETSLOT NODE`) and coordinated shard failovers (`CLUSTER FAILOVER`) while
    /// waiters are blocked, besides pauses of a lock's primary.
    Cluster,
}

impl Topology {
    pub(super) fn nodes(self) -> usize {
        match self {
            Topology::Single => 1,
            Topology::Redlock => 5,
            Topology::Sentinel => 2,
            Topology::Cluster => 6,
        }
    }

    /// How many server faults may be under way at once, each on its own node.
    pub(super) fn lanes(self) -> usize {
        match self {
            Topology::Single | Topology::Sentinel | Topology::Cluster => 1,
            Topology::Redlock => 2,
        }
    }

    /// Whether a restarted server keeps its data.
    pub(super) fn persistent(self) -> bool {
        self == Topology::Redlock
    }

    /// Whether waiters take a place in a line (and `--supersede` exists): not on a Redlock.
    pub(super) fn queues(self) -> bool {
        self != Topology::Redlock
    }

    /// Whether `--limit N` and `--shared` are allowed: not on a Redlock, whose majority keeps
    /// mutex holders apart but not the L+1 holders of a semaphore of L (src/lock/redlock/mod.rs
    /// refuses both).
    pub(super) fn semaphores(self) -> bool {
        self != Topology::Redlock
    }

    /// Whether the servers are a Sentinel deployment or a Cluster, whose faults are
    /// failovers and migrations rather than the faults of independent servers.
    pub(super) fn replicated(self) -> bool {
        matches!(self, Topology::Sentinel | Topology::Cluster)
    }

    /// The test that runs it (for the replay line).
    pub(super) fn test_name(self) -> &'static str {
        match self {
            Topology::Single => "chaos::safety_contract_under_fire",
            Topology::Redlock => "chaos::redlock_safety_contract_under_fire",
            Topology::Sentinel => "chaos::sentinel_safety_contract_under_fire",
            Topology::Cluster => "chaos::cluster_safety_contract_under_fire",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Topology::Single => "one server without persistence",
            Topology::Redlock => "a Redlock over 5 persistent primaries (appendfsync always)",
            Topology::Sentinel => "a primary and a replica behind 3 sentinels, without persistence",
            Topology::Cluster => {
                "a Redis Cluster of 3 primaries with a replica each, without persistence"
            }
        }
    }
}

/// A fault of the server.
#[derive(Clone, Copy, Debug)]
pub(super) enum ServerFault {
    /// SIGSTOP the server, SIGCONT after `ms`.
    Stop { ms: u64 },
    /// SIGKILL the server, start it again after `down_ms` (empty without persistence, with
    /// every acknowledged write with it).
    Restart { down_ms: u64 },
    /// `CLIENT PAUSE ms WRITE`.
    Pause { ms: u64 },
    /// Sentinel: `SENTINEL FAILOVER` (the primary alive); the old primary, still a primary,
    /// lingers `linger_ms` after every sentinel names the new one (accepting the writes of
    /// whoever still talks to it), then is demoted. Cluster: `CLUSTER FAILOVER` on the replica of
    /// the primary of `key`'s slot (coordinated: nothing acknowledged is lost).
    Failover { key: usize, linger_ms: u64 },
    /// Sentinel: SIGKILL the primary, wait for the sentinels to promote the replica, start
    /// the old one again (empty) after `down_ms` and make it a replica at once.
    KillPrimary { down_ms: u64 },
    /// Sentinel: SIGSTOP the primary for at least `ms` and until the sentinels have promoted
    /// the replica (longer than their down-after time), then SIGCONT; it lingers as a primary
    /// `linger_ms` (as after a `Failover`), then is demoted.
    StopPrimary { ms: u64, linger_ms: u64 },
    /// Cluster: migrate `key`'s slot to another primary by hand: open it (IMPORTING,
    /// MIGRATING), leave it open `open_ms`, MIGRATE its keys, close it (SETSLOT NODE).
    Migrate { key: usize, open_ms: u64 },
}

impl ServerFault {
    /// Time the fault occupies the server-fault thread (a restart takes some time itself).
    pub(super) fn duration_ms(self) -> u64 {
        match self {
            ServerFault::Stop { ms } | ServerFault::Pause { ms } => ms,
            ServerFault::Restart { down_ms } => down_ms + 100,
            // What these take on an idle machine: the sentinels judge a primary down after
            // 3s, and a failover takes another second or two.
            ServerFault::Failover { linger_ms, .. } => 2500 + linger_ms,
            ServerFault::KillPrimary { down_ms } => 5000 + down_ms,
            ServerFault::StopPrimary { ms, linger_ms } => ms + 1500 + linger_ms,
            ServerFault::Migrate { open_ms, .. } => open_ms + 300,
        }
    }

    pub(super) fn describe(self, persistent: bool) -> String {
        match self {
            ServerFault::Stop { ms } => format!(
                "SIGSTOP for {ms}ms ({} every TTL)",
                if ms < TTLS_MS[0] {
                    "shorter than"
                } else {
                    "longer than"
                }
            ),
            ServerFault::Restart { down_ms } => format!(
                "SIGKILL, restart {} after {down_ms}ms",
                if persistent {
                    "with its data"
                } else {
                    "without its data"
                }
            ),
            ServerFault::Pause { ms } => format!("CLIENT PAUSE {ms} WRITE"),
            ServerFault::Failover { key, linger_ms } => format!(
                "failover (Sentinel: the old primary lingers {linger_ms}ms; Cluster: {}'s shard)",
                KEYS[key].name
            ),
            ServerFault::KillPrimary { down_ms } => {
                format!("SIGKILL the primary, failover, restart it empty after {down_ms}ms")
            }
            ServerFault::StopPrimary { ms, linger_ms } => format!(
                "SIGSTOP the primary for {ms}ms or until failed over; it lingers {linger_ms}ms"
            ),
            ServerFault::Migrate { key, open_ms } => format!(
                "migrate the slot of {} to another primary, open for {open_ms}ms",
                KEYS[key].name
            ),
        }
    }
}

/// A SIGKILL of one process.
#[derive(Clone, Copy, Debug)]
pub(super) enum ProcFault {
    /// SIGKILL the command of a holder (the leader of its process group).
    Child { pick: u64 },
    /// SIGKILL a distlock process (waiting or holding).
    Distlock { pick: u64 },
    /// SIGKILL the guard of a distlock (as `pkill distlock` would): distlock must replace it.
    Guard { pick: u64 },
    /// SIGKILL a distlock that waits in a line (its token is in `P{K}:queue`), preferably the
    /// first in line (`pick` odd): the next release hands the lock to a dead waiter, and the
    /// line must not stall for longer than the take-up window.
    Waiter { pick: u64 },
    /// SIGSTOP a holding distlock alone (its command and its guard run on), SIGCONT after `ms`,
    /// longer than every TTL: its guard must end the command before the lock can expire.
    StopDistlock { pick: u64, ms: u64 },
}

impl ProcFault {
    pub(super) fn describe(self) -> String {
        match self {
            ProcFault::Child { pick } => format!("SIGKILL a holder's command (pick {pick})"),
            ProcFault::Distlock { pick } => format!("SIGKILL a distlock (pick {pick})"),
            ProcFault::Guard { pick } => format!("SIGKILL a distlock's guard (pick {pick})"),
            ProcFault::Waiter { pick } => format!(
                "SIGKILL a distlock waiting in line{} (pick {pick})",
                if pick % 2 == 1 { ", the first one" } else { "" }
            ),
            ProcFault::StopDistlock { pick, ms } => format!(
                "SIGSTOP a holding distlock alone for {ms}ms, longer than every TTL (pick {pick})"
            ),
        }
    }
}

/// A server fault as scheduled: when (offset in ms), on which node, what.
#[derive(Clone, Copy, Debug)]
pub(super) struct Hit {
    pub(super) at: u64,
    pub(super) node: usize,
    pub(super) fault: ServerFault,
}

/// The fault schedules of a run.
pub(super) struct Plan {
    pub(super) seed: u64,
    pub(super) secs: u64,
    pub(super) topology: Topology,
    /// Per lane, sequential: each fault ends before the lane's next starts. The lanes run at
    /// once (on distinct nodes at any instant: see [`super::faults::server_faults`]).
    pub(super) server: Vec<Vec<Hit>>,
    pub(super) procs: Vec<(u64, ProcFault)>,
}

/// One lane of server faults, on random nodes of `nodes` (node 0 when there is one: the draw
/// is skipped, so the single server's schedules are those its seeds always gave).
fn server_lane(rng: &mut fastrand::Rng, end: u64, nodes: usize) -> Vec<Hit> {
    let mut server = Vec::new();
    let mut t = rng.u64(300..1000);
    loop {
        let fault = match rng.u32(0..100) {
            0..25 => ServerFault::Stop {
                ms: rng.u64(100..900),
            },
            25..45 => ServerFault::Stop {
                ms: rng.u64(2100..3500),
            },
            45..70 => ServerFault::Restart {
                down_ms: if rng.bool() { 0 } else { rng.u64(50..1500) },
            },
            _ => ServerFault::Pause {
                ms: rng.u64(200..2500),
            },
        };
        if t + fault.duration_ms() > end {
            break;
        }
        let node = if nodes > 1 { rng.usize(..nodes) } else { 0 };
        server.push(Hit { at: t, node, fault });
        t += fault.duration_ms() + rng.u64(300..1500);
    }
    server
}

/// The lane of a Sentinel deployment or a Cluster: its failovers and migrations, each aimed
/// at a moment when waiters are blocked (the executor waits a little for one), with stops
/// and pauses of the primary in between. The node is resolved when the fault is executed
/// (the primary, or the primary of a key's slot): node 0 here.
fn replicated_lane(rng: &mut fastrand::Rng, end: u64, topology: Topology) -> Vec<Hit> {
    let mut server = Vec::new();
    let mut t = rng.u64(1000..2000);
    loop {
        let key = rng.usize(..KEYS.len());
        let fault = match (topology, rng.u32(0..100)) {
            (Topology::Sentinel, 0..35) => ServerFault::Failover {
                key,
                linger_ms: rng.u64(0..3000),
            },
            (Topology::Sentinel, 35..55) => ServerFault::KillPrimary {
                down_ms: rng.u64(0..1500),
            },
            (Topology::Sentinel, 55..75) => ServerFault::StopPrimary {
                ms: rng.u64(3500..5000),
                linger_ms: rng.u64(0..3000),
            },
            (Topology::Sentinel, 75..88) => ServerFault::Stop {
                ms: rng.u64(100..900),
            },
            (Topology::Cluster, 0..55) => ServerFault::Migrate {
                key,
                open_ms: rng.u64(100..1500),
            },
            (Topology::Cluster, 55..85) => ServerFault::Failover { key, linger_ms: 0 },
            _ => ServerFault::Pause {
                ms: rng.u64(200..2000),
            },
        };
        if t + fault.duration_ms() > end {
            break;
        }
        server.push(Hit {
            at: t,
            node: 0,
            fault,
        });
        t += fault.duration_ms() + rng.u64(300..1200);
    }
    server
}

impl Plan {
    pub(super) fn new(seed: u64, secs: u64, topology: Topology) -> Plan {
        let mut rng = fastrand::Rng::with_seed(seed);
        let end = secs * 1000;
        let mut server = vec![if topology.replicated() {
            replicated_lane(&mut rng, end, topology)
        } else {
            server_lane(&mut rng, end, topology.nodes())
        }];
        let mut procs = Vec::new();
        let mut t = rng.u64(200..800);
        while t < end {
            let pick = rng.u64(..);
            let fault = match rng.u8(0..8) {
                0 | 1 => ProcFault::Child { pick },
                2 | 3 => ProcFault::Distlock { pick },
                4 => ProcFault::Guard { pick },
                5 => ProcFault::StopDistlock {
                    pick,
                    ms: rng.u64(MAX_TTL_MS + 100..MAX_TTL_MS + 1500),
                },
                _ if topology.queues() => ProcFault::Waiter { pick },
                // No line to kill a waiter in: any distlock, waiting or holding.
                _ => ProcFault::Distlock { pick },
            };
            procs.push((t, fault));
            t += rng.u64(200..900);
        }
        for _ in 1..topology.lanes() {
            server.push(server_lane(&mut rng, end, topology.nodes()));
        }
        Plan {
            seed,
            secs,
            topology,
            server,
            procs,
        }
    }

    pub(super) fn header(&self) -> String {
        let keys: Vec<String> = KEYS
            .iter()
            .filter(|k| k.is_mutex() || self.topology.semaphores())
            .map(|k| match k.limit {
                _ if k.rw => format!("{} (readers with --shared, writers)", k.name),
                1 => k.name.to_owned(),
                n => format!("{} (--limit {n})", k.name),
            })
            .collect();
        format!(
            "chaos: seed {seed}, {secs}s of faults on {topology}, {CONTENDERS} contenders on {keys}, TTLs {TTLS_MS:?}ms\n\
             chaos: replay with DISTLOCK_CHAOS_SEED={seed} DISTLOCK_CHAOS_SECS={secs} \
             cargo test --test integration {test} -- --exact --nocapture\n",
            seed = self.seed,
            secs = self.secs,
            topology = self.topology.describe(),
            test = self.topology.test_name(),
            keys = keys.join(", "),
        )
    }

    pub(super) fn describe(&self) -> String {
        let mut s = self.header();
        for (lane, hits) in self.server.iter().enumerate() {
            if self.server.len() > 1 {
                let _ = writeln!(s, "chaos: server fault schedule, lane {lane}:");
            } else {
                s.push_str("chaos: server fault schedule:\n");
            }
            for h in hits {
                let _ = writeln!(
                    s,
                    "  {:+.3}s {} {}",
                    h.at as f64 / 1e3,
                    if self.topology.replicated() {
                        "the primary:".to_owned()
                    } else {
                        node_name(self.topology, h.node)
                    },
                    h.fault.describe(self.topology.persistent())
                );
            }
        }
        let _ = writeln!(
            s,
            "chaos: process fault schedule ({} faults):",
            self.procs.len()
        );
        for (at, f) in &self.procs {
            let _ = writeln!(s, "  {:+.3}s {}", *at as f64 / 1e3, f.describe());
        }
        s
    }
}

/// How long a contender waits for the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WaitKind {
    Forever,
    Limit3s,
    NoWait,
}

/// How the critical section is started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Form {
    /// distlock runs the C program itself.
    Direct,
    /// `sh -c "trap '' TERM; exec cs ..."`: the program ignores SIGTERM (an ignored signal
    /// stays ignored across exec) and leads the group itself.
    StubbornExec,
    /// `sh -c "trap '' TERM; cs ..."`: the shell and the program (its child, a grandchild of
    /// distlock) ignore SIGTERM.
    Stubborn,
    /// `sh -c "cs ... & wait"`: the section runs in a background grandchild.
    Background,
}

/// One iteration of a contender, drawn from the contender's own seeded generator.
#[derive(Clone, Copy, Debug)]
pub(super) struct Params {
    pub(super) key: usize,
    pub(super) ttl_ms: u64,
    pub(super) wait: WaitKind,
    pub(super) spin: bool,
    /// `--supersede`: join the line and cancel every older waiter (with a wait).
    pub(super) supersede: bool,
    /// `--cooldown` [`COOLDOWN_MS`] (mutexes only): after this run succeeds, the lock stays
    /// taken that long after its end.
    pub(super) cooldown: bool,
    pub(super) form: Form,
    pub(super) hold_ms: u64,
    pub(super) gap_ms: u64,
    /// A lock set: a second mutex taken with `key` (`run -k KEY -k ALSO`, typed in that
    /// order, which is the sets' canonical order or not as the draw falls). Its command is a
    /// section on each key ([`super::RunRec`]s, one per key).
    pub(super) also: Option<usize>,
    /// On a shared key: a reader (`--shared`); otherwise a writer.
    pub(super) shared: bool,
}

/// The `--cooldown` of the runs that draw one: shorter than every TTL, so that a lock whose
/// release failed (kept until its expiry) is taken later still.
pub(super) const COOLDOWN_MS: u64 = 150;

/// How the events and the schedule name a server: `redis` when there is one, `node N` otherwise.
pub(super) fn node_name(topology: Topology, node: usize) -> String {
    match topology {
        Topology::Single => "redis".into(),
        Topology::Redlock => format!("node {node}"),
        Topology::Sentinel | Topology::Cluster => format!("node {node}"),
    }
}

impl Params {
    pub(super) fn draw(rng: &mut fastrand::Rng, topology: Topology) -> Params {
        let mut roll = rng.u32(..100);
        let key = KEYS
            .iter()
            .position(|k| {
                let hit = roll < k.weight;
                roll = roll.saturating_sub(k.weight);
                hit
            })
            .unwrap_or(0);
        // Without semaphores, the semaphore's share goes to the mutexes, evenly (a draw only
        // then: the single server's seeds replay as before).
        let key = if KEYS[key].is_mutex() || topology.semaphores() {
            key
        } else {
            let mutexes: Vec<usize> = (0..KEYS.len()).filter(|&k| KEYS[k].is_mutex()).collect();
            mutexes[rng.usize(..mutexes.len())]
        };
        let ttl_ms = TTLS_MS[rng.usize(..TTLS_MS.len())];
        let wait = match rng.u32(..100) {
            0..50 => WaitKind::Forever,
            50..85 => WaitKind::Limit3s,
            _ => WaitKind::NoWait,
        };
        // Spin waiters wait in the same line; they notice their turn by polling.
        let spin = rng.u32(..100) < 30;
        // Few enough that most lines are not cancelled wholesale. (Not over a Redlock, which
        // keeps no line and refuses it.)
        let supersede = topology.queues() && wait != WaitKind::NoWait && rng.u32(..100) < 12;
        let form = match rng.u32(..100) {
            0..45 => Form::Direct,
            45..60 => Form::StubbornExec,
            60..85 => Form::Stubborn,
            _ => Form::Background,
        };
        let hold_ms = match rng.u32(..100) {
            0..70 => rng.u64(5..80),
            70..90 => rng.u64(200..800),
            // Longer than the TTL: only renewals keep it.
            _ => ttl_ms * rng.u64(12..20) / 10,
        };
        Params {
            key,
            ttl_ms,
            wait,
            spin,
            supersede,
            form,
            hold_ms,
            gap_ms: rng.u64(0..100),
            // Drawn last, so that the other draws of a seed are what they were before.
            cooldown: KEYS[key].is_mutex() && rng.u32(..100) < 15,
            also: None,
            shared: false,
        }
        .with_set(rng)
        .with_mode(rng)
    }

    /// On the shared key, 3 runs in 5 are readers (never `--supersede`, which `--shared`
    /// refuses). Drawn after everything else, as `with_set`.
    fn with_mode(mut self, rng: &mut fastrand::Rng) -> Params {
        if KEYS[self.key].rw && rng.u32(..100) < 60 {
            self.shared = true;
            self.supersede = false;
        }
        self
    }

    /// One mutex run in 4 (not a `--supersede` one, which a set refuses, nor a `--cooldown`
    /// one) takes a second mutex with it. Drawn after everything else, so that the other draws of a seed are what they
    /// were before sets.
    fn with_set(mut self, rng: &mut fastrand::Rng) -> Params {
        if KEYS[self.key].is_mutex() && rng.u32(..100) < 25 && !self.supersede && !self.cooldown {
            let others: Vec<usize> = (0..KEYS.len())
                .filter(|&k| k != self.key && KEYS[k].is_mutex())
                .collect();
            self.also = Some(others[rng.usize(..others.len())]);
        }
        self
    }
}
