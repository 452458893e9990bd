//! Issues 4 and 9: the safety contract under fire; and its Redlock variant (below). The tests
//! and the orchestration of a run; the parts are [`plan`] (what the seed decides), [`faults`]
//! (executing it), [`monitor`] (sampling the keys in Redis), [`checker`] (the invariants, one
//! method each) and `cs.c` (the critical section). Both variants share all of them: what
//! differs is a [`Topology`] that the plan, the fault threads and the checker are given.
//!
//! Ten contender loops run `distlock run` over and over on five keys — three mutexes, a
//! semaphore of 3 (`--limit 3`, the same for everyone on it) and a shared key (`chaos-rw`:
//! readers with `--shared`, stamp-only, and writers, a read-modify-write counter) — and one
//! mutex run in 4 takes a second mutex with it (a lock set, `-k chaos-b -k chaos-a`, typed in
//! either order; its command is a section on each key, checked against every other section
//! there) — while two seeded fault schedules
//! hit the system: one for the server (SIGSTOP/SIGCONT shorter and longer than every TTL,
//! SIGKILL + restart without persistence, `CLIENT PAUSE ms WRITE`) and one for processes
//! (SIGKILL of a holder's command, SIGKILL of a distlock, waiting or holding, SIGKILL of a
//! distlock waiting in line, often the first one, SIGKILL of a distlock's guard process, as
//! `pkill distlock` would do, and SIGSTOP of a holding distlock alone, its command running on,
//! for longer than every TTL: only its guard can end the command in time). Waiters in notify mode (the default) wait in the fair line and get
//! the lock handed over; spin waiters wait in the same line and notice their turn by polling;
//! some use `--supersede` (and cancel the older waiters, who exit 75), some `--cooldown 150ms` on a mutex (the lock then stays taken after the run succeeds, and the checker proves no section of the key started within the cool-down). Some commands ignore SIGTERM (`trap '' TERM`), some run
//! the critical section as a background grandchild. Afterwards a checker proves, from
//! timestamps taken on one clock, that the contract held.
//!
//! # The Redlock variant
//!
//! `redlock_safety_contract_under_fire` runs the same attack on a Redlock over 5 independent
//! primaries (`Primaries::start_persistent(5)`: `appendonly yes` + `appendfsync always`); every
//! contender gets the five URLs (`DISTLOCK_REDIS_URL`, separated by spaces). What changes:
//!
//! * **Server faults hit a random node each**, drawn by the seed, in two lanes that run at once
//!   (each lane sequential, as the single server's schedule is): SIGSTOP/SIGCONT shorter and
//!   longer than every TTL, SIGKILL + restart **with its data** (never empty), `CLIENT PAUSE ms
//!   WRITE`. A lane waits while the other one is still on its node, so at most 2 of the 5
//!   nodes are stopped, paused or down at any instant: a majority always answers and keeps
//!   its data, which is Redlock's assumption. Hence no restart excuses anything: every check
//!   holds without exemption (the restart excuses apply only to the single server, which
//!   forgets its locks).
//! * **Keys: the three mutexes only.** A Redlock refuses `--limit N` (src/lock/redlock/mod.rs): a
//!   majority keeps two mutex holders apart, but not L+1 holders of a semaphore of L. (Found
//!   while writing this variant: with 5 persistent nodes and only minority outages, 4 holders
//!   got into a `--limit 3`.) The semaphore's share of the iterations goes to the mutexes.
//! * **Waits: no line.** A Redlock keeps none; waiters (notify: woken by a release on any node;
//!   spin: polling) race for a majority. `--supersede` is refused there, so it is never drawn,
//!   and the process fault "SIGKILL a waiter in line" becomes "SIGKILL a distlock".
//! * **The monitor** samples every node on a connection of its own, and the checker reads them
//!   per node (no lock without an expiry, no more holders than the limit: each node's state is
//!   one server's) or as a majority (a command ran without its lock only once its token was gone
//!   for good from a majority of the nodes: see [`Checker`]'s `runs_only_while_the_key_is_its`).
//!   Leftover keys are looked for on every node.
//!
//! The default length is the same 20s (22-30s of wall time); `DISTLOCK_CHAOS_SECS` and
//! `DISTLOCK_CHAOS_SEED` apply to both variants. The two never run at once (a lock in
//! [`chaos`]): each loads both CPUs of the CI machine, and an attack that shares them with the
//! other would measure the scheduler more than distlock.
//!
//! # The Sentinel and Cluster variants
//!
//! `sentinel_safety_contract_under_fire` and `cluster_safety_contract_under_fire` run the same
//! contenders (lines, semaphore and all) behind Sentinel (`Sentinel::start(1)`) and on a Cluster
//! (`Cluster::start(3, 1)`), without persistence. Their server faults ([`plan::Topology`] and
//! `faults::replicated_fault`): failovers of every kind and slot migrations by hand, each
//! started once a waiter is blocked on the node (bounded: 2s), counted with and without one;
//! stops and pauses of the primary besides. A Sentinel failover may lose writes: it is recorded
//! as a [`faults::Restart`] from its start to the old primary's death or demotion, and the
//! checker excuses exactly what a restart excuses over that window (see CONTRIBUTING.md,
//! "Chaos test"). A Cluster's migrations and coordinated failovers lose nothing and excuse
//! nothing, but the monitor's samples read during a coordinated failover are left out (the
//! old primary answers reads with what it had until it hears of the new one). The monitor
//! follows the sentinels' primary, or each key's slot ([`monitor::Source`]).
//!
//! # The history mode
//!
//! `DISTLOCK_CHAOS_HISTORY=1` (either variant) gives every contender a lock history
//! (`DISTLOCK_HISTORY`, kept for the attack's length plus 120s). Afterwards [`history`] reads each
//! mutex's history back with `distlock log --json` and checks that the recorded holds never
//! overlap (each from its `acquired` to its `released`, or to the `expired` or `lost` that ended
//! it); the key-leak check then lets history keys stay only with an expiry no longer than asked.
//!
//! # The critical section
//!
//! The command is a tiny C program (`cs.c`, loaded with `include_str!`), compiled with `cc` at
//! test time. It stamps every step with `clock_gettime(CLOCK_MONOTONIC)` — the clock behind
//! Rust's `Instant` and behind this test's [`now_ns`], so the command's stamps, distlock's exit
//! times and the fault times are directly comparable — and appends one line per stamp to a
//! shared log with a single `write(2)` on an `O_APPEND` descriptor (lines of concurrent writers
//! never mix). The stamp is taken in the very process that does the work it brackets. Why not a
//! shell or python3: a shell cannot read CLOCK_MONOTONIC, python3 costs ~20ms of CPU per start
//! on a 2-core machine, and any helper process adds a gap between the stamp and the work. The C
//! program starts in ~1ms.
//!
//! Stamps: `S` (start, with pid, process group, DISTLOCK_TOKEN and DISTLOCK_FENCE), `R n` (read
//! the per-key counter), `H` (heartbeat every 10ms while it holds), `P` (about to write), `W
//! n+1` (the new value is in place: written to a temporary file and renamed), `E` (end). On a
//! mutex the read-modify-write is deliberately not atomic: only the lock keeps two sections from
//! losing an update. On the semaphore, up to 3 sections run at once by design, so a shared
//! counter would lose updates without anything being wrong, and a counter per slot would need
//! the section to pick a slot (distlock's slots are a set of tokens, not numbered), itself a
//! race outside the lock: its sections only stamp (S, H..., E), and the checker counts how many
//! intervals overlap.
//!
//! A section's interval is [S, last stamp]. Both ends are conservative in the right direction
//! for finding violations: the command did run at every stamp, so two intervals that intersect
//! prove two commands ran their critical sections at the same time. (What a killed command did
//! after its last stamp is invisible, which is why it stamps every 10ms and right before its
//! write.)
//!
//! # Replaying
//!
//! The seed (printed first, and again on failure) fixes the fault schedules and every
//! contender's sequence of parameters (key, TTL, wait mode, `--supersede`, hold time, whether
//! the command ignores SIGTERM). `DISTLOCK_CHAOS_SEED=<n>` replays it; the OS scheduler's
//! interleaving is of course not replayable, so a replay re-runs the same attack, not the same
//! microsecond history. `DISTLOCK_CHAOS_SECS=<n>` sets the length of the attack (default 20s:
//! 22-30s of wall time, up to 10s more when a waiter killed near the end leaves a place in line
//! to lapse; 600 for the long variant).
//!
//! # What is checked (the rationale of each check is at its method of [`Checker`])
//!
//! 1. No two critical sections on a mutex overlap, and never more than 3 at once on the
//!    semaphore (nor more than 3 live slots in Redis), except across a Redis restart (which
//!    forgets locks by design), and there only within the TTL of the restart. On the Redlock,
//!    with no exception.
//! 2. A lost lock's process group (exit 124) was dead before the next holder started (for the
//!    semaphore: before it could make more than 3), whether distlock or its guard killed it (a
//!    distlock stopped by the test exits only after the SIGCONT: the test watches its command's
//!    group meanwhile); no command ran after its distlock had exited.
//! 3. No command ran after a monitor sample had seen its key (or slot) gone or taken (on the
//!    Redlock: gone for good from a majority of the nodes); no lock, semaphore or line without
//!    an expiry; no token back after it was gone (not checked on the Redlock, where a node
//!    that was stopped during an acquire may apply it late).
//! 4. Fences: every command got one; on a mutex they strictly increase in the order the
//!    sections started, across restarts too (fences are built from the server's clock as well
//!    as the lost counter); on the semaphore they are unique and increase in grant order.
//! 5. Only documented exit codes, consistent with what the command did (75 for a superseded
//!    waiter, when a `--supersede` run waited on its key); no panic.
//! 6. No counter update lost on a mutex, outside the restart windows.
//! 7. After the run: no process left (every process carries `CHAOS_RUN_ID` in its
//!    environment); every line empty and no key left but the fence counters, once the TTLs,
//!    the take-up window and the place lease have passed (a waiter killed in line does not
//!    stall it).

mod checker;
mod faults;
mod history;
mod monitor;
mod plan;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;

use checker::{Checker, Evidence, Leftovers, parse_log};
use faults::Restart;
use plan::{CONTENDERS, Form, KEYS, MAX_TTL_MS, Params, Plan, Topology, WaitKind, node_name};

use crate::fixtures::topology::{Cluster, Nodes, Primaries, Sentinel};
use crate::fixtures::{Scratch, bare_distlock};

/// The servers of a run, whatever the topology: their data nodes by index (`Deref` to
/// [`Nodes`]), and the topology's own faults.
pub(super) enum Servers {
    Primaries(Primaries),
    Sentinel(Sentinel),
    Cluster(Cluster),
}

impl Servers {
    fn start(topology: Topology) -> Servers {
        match topology {
            Topology::Single => Servers::Primaries(Primaries::start(1)),
            Topology::Redlock => Servers::Primaries(Primaries::start_persistent(5)),
            Topology::Sentinel => Servers::Sentinel(Sentinel::start(1)),
            Topology::Cluster => Servers::Cluster(Cluster::start(3, 1)),
        }
    }

    /// What the contenders are given (several, separated by spaces: a Redlock).
    fn urls(&self) -> Vec<String> {
        match self {
            Servers::Primaries(p) => p.urls(),
            Servers::Sentinel(s) => vec![s.url()],
            Servers::Cluster(c) => vec![c.seeds_url()],
        }
    }

    /// What the monitors sample: one per server, or the one that follows the primary.
    fn sources(&self) -> Vec<monitor::Source> {
        match self {
            Servers::Primaries(p) => p.urls().into_iter().map(monitor::Source::Url).collect(),
            Servers::Sentinel(s) => vec![monitor::Source::Sentinel {
                sentinels: (0..3).map(|i| s.sentinel(i).url()).collect(),
                service: s.service().to_owned(),
            }],
            Servers::Cluster(c) => vec![monitor::Source::Cluster {
                nodes: c.iter().map(|n| (n.port(), n.url())).collect(),
            }],
        }
    }
}

impl std::ops::Deref for Servers {
    type Target = Nodes;

    fn deref(&self) -> &Nodes {
        match self {
            Servers::Primaries(p) => p,
            Servers::Sentinel(s) => s,
            Servers::Cluster(c) => c,
        }
    }
}

impl std::ops::DerefMut for Servers {
    fn deref_mut(&mut self) -> &mut Nodes {
        match self {
            Servers::Primaries(p) => p,
            Servers::Sentinel(s) => s,
            Servers::Cluster(c) => c,
        }
    }
}

const DEFAULT_SECS: u64 = 20;
/// Every process the test starts carries `CHAOS_RUN_ID=<unique id>`, so that any survivor can be
/// found in /proc at the end, whatever its parent.
const MARKER: &str = "CHAOS_RUN_ID";
/// A distlock that runs longer than this is killed and reported (liveness, and a bound on the
/// test's own waits: every `waitid` below ends by then).
const RUN_LIMIT_NS: u64 = 30_000 * MS;
/// The same for a lock set, which waits in two lines one after the other, and starts again
/// from its first key when a failover or a restart loses a key it held while waiting (seen
/// behind Sentinel: 29.7s of waiting through three failovers, seed 7733947535369708410).
const SET_RUN_LIMIT_NS: u64 = 60_000 * MS;
const MS: u64 = 1_000_000;
/// How long a place in line lasts without another attempt, and how long a lock handed to a
/// waiter waits for it to take it up, on the server's clock (`PLACE` and `TAKEUP` in
/// src/lock/protocol.rs, which the tests cannot import).
const PLACE_MS: u64 = 8000;
const TAKEUP_MS: u64 = 5000;

/// The critical section (see the module documentation).
const CS_SOURCE: &str = include_str!("cs.c");

/// CLOCK_MONOTONIC in nanoseconds: the clock of the command's stamps.
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec owned by this frame; clock_gettime only
    // writes into it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleep until `t` (fault durations and schedule times only, never synchronisation).
fn sleep_until(t: u64) {
    let now = now_ns();
    if t > now {
        std::thread::sleep(Duration::from_nanos(t - now));
    }
}

/// `+12.345s` relative to the start of the run.
fn rel(t0: u64, t: u64) -> String {
    format!("{:+.3}s", (t as i128 - t0 as i128) as f64 / 1e9)
}

// ---------------------------------------------------------------------------------------------
// The run.

/// A distlock that is running, as the fault threads see it. While it is in the table it has not
/// been reaped, so its pid cannot be recycled under a fault's feet.
struct Live {
    pid: Pid,
    id: String,
    spawned: u64,
    /// How long its command holds (a fault that needs a command that runs on prefers long ones).
    hold_ms: u64,
    /// How long it may run before the watchdog kills it.
    limit_ns: u64,
    killed_distlock: Option<u64>,
    /// Where it was when the test SIGKILLed it waiting in line (`#2 in line for chaos-a`).
    killed_in_line: Option<String>,
    killed_child: Option<u64>,
    hung: Option<u64>,
    /// The test SIGSTOPped it (holding), and SIGCONTed it.
    stopped: Option<u64>,
    resumed: Option<u64>,
    /// While it was stopped, the test saw its command's process group without a live process
    /// from this instant on.
    group_dead: Option<u64>,
}

/// One finished iteration (a lock set's: one per key).
#[derive(Clone)]
struct RunRec {
    id: String,
    params: Params,
    /// Just before spawn: a lower bound of everything this distlock did.
    spawned: u64,
    /// When `waitid` saw it exit: an upper bound of its exit, and (distlock exits only once the
    /// command's process group is empty) of the death of its whole group.
    exited: u64,
    code: Option<i32>,
    signal: Option<i32>,
    stderr: String,
    killed_distlock: Option<u64>,
    killed_in_line: Option<String>,
    killed_child: Option<u64>,
    hung: Option<u64>,
    stopped: Option<u64>,
    resumed: Option<u64>,
    group_dead: Option<u64>,
}

impl RunRec {
    /// An upper bound of the death of its command's whole process group: distlock's exit (it
    /// exits only once the group is empty), or, for a distlock that the test stopped, the
    /// moment the test saw the group without a live process, if earlier.
    fn group_dead_by(&self) -> u64 {
        self.group_dead.map_or(self.exited, |d| d.min(self.exited))
    }

    fn exit(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit {c}"),
            (_, Some(s)) => format!("signal {s}"),
            _ => "?".into(),
        }
    }
}

struct Ctx {
    topology: Topology,
    /// One URL per server (a Redlock's nodes, in order).
    urls: Vec<String>,
    run_id: String,
    cs: PathBuf,
    log: PathBuf,
    /// Per key, the file of the mutex sections' counter (None: the semaphore's stamp-only
    /// sections).
    counters: Vec<Option<PathBuf>>,
    errdir: PathBuf,
    t0: u64,
    launch_until: u64,
    live: Mutex<Vec<Option<Live>>>,
    contenders_done: AtomicUsize,
    events: Mutex<Vec<(u64, String)>>,
    /// How many faults of each kind were executed (and how many found no victim).
    tally: Mutex<BTreeMap<&'static str, usize>>,
    /// Restarts that forgot every lock (none on a Redlock's persistent nodes).
    restarts: Mutex<Vec<Restart>>,
    /// (start, end) of every server fault, on any node: stop, pause or restart.
    outages: Mutex<Vec<(u64, u64)>>,
    /// (start, end) of every Cluster failover (`CLUSTER FAILOVER` until the old primary says it
    /// is a replica of the new one): two nodes may both answer for the slot then, the old one
    /// with what it had before the new one took over, so the monitor's samples read in such a
    /// window are no evidence of what the key held (see `chaos`).
    ambiguous: Mutex<Vec<(u64, u64)>>,
    /// `DISTLOCK_CHAOS_HISTORY=1`: how long (s) the contenders keep a lock history.
    history: Option<u64>,
}

impl Ctx {
    fn event(&self, at: u64, what: String) {
        self.events.lock().unwrap().push((at, what));
    }

    fn count(&self, kind: &'static str) {
        *self.tally.lock().unwrap().entry(kind).or_default() += 1;
    }
}

fn contender(ci: usize, seed: u64, ctx: &Ctx) -> Vec<RunRec> {
    let mut rng =
        fastrand::Rng::with_seed(seed ^ (ci as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut runs = Vec::new();
    let mut iter = 0;
    while now_ns() < ctx.launch_until {
        let p = Params::draw(&mut rng, ctx.topology);
        let id = format!("c{ci}i{iter}");
        iter += 1;
        let err_path = ctx.errdir.join(format!("{id}.txt"));
        let err_file = fs::File::create(&err_path).unwrap();
        let mut cmd = bare_distlock();
        // Several URLs separated by spaces: a Redlock over them.
        if let Some(secs) = ctx.history {
            cmd.env("DISTLOCK_HISTORY", format!("{secs}s"));
        }
        cmd.env("DISTLOCK_REDIS_URL", ctx.urls.join(" "))
            .env(MARKER, &ctx.run_id)
            .args(["-v", "run", "-k", KEYS[p.key].name]);
        if let Some(also) = p.also {
            cmd.args(["-k", KEYS[also].name]);
        }
        cmd.arg("--ttl").arg(format!("{}ms", p.ttl_ms));
        if KEYS[p.key].is_semaphore() {
            cmd.arg("--limit").arg(KEYS[p.key].limit.to_string());
        }
        if p.shared {
            cmd.arg("--shared");
        }
        match p.wait {
            WaitKind::Forever => {}
            WaitKind::Limit3s => {
                cmd.args(["--wait", "3s"]);
            }
            WaitKind::NoWait => {
                cmd.arg("--no-wait");
            }
        }
        if p.spin {
            cmd.args(["--wait-mode", "spin"]);
        }
        if p.cooldown {
            cmd.arg("--cooldown")
                .arg(format!("{}ms", plan::COOLDOWN_MS));
        }
        if p.supersede {
            cmd.arg("--supersede");
        }
        cmd.arg("--");
        match p.form {
            Form::Direct => {}
            Form::StubbornExec => {
                cmd.args(["sh", "-c", "trap '' TERM; exec \"$0\" \"$@\""]);
            }
            Form::Stubborn => {
                cmd.args(["sh", "-c", "trap '' TERM; \"$0\" \"$@\""]);
            }
            Form::Background => {
                cmd.args(["sh", "-c", "\"$0\" \"$@\" & wait"]);
            }
        }
        cmd.arg(&ctx.cs)
            .arg(&ctx.log)
            .arg(&id)
            .arg(match &ctx.counters[p.key] {
                // (A reader only stamps: readers run together by design.)
                Some(counter) if !p.shared => counter.as_os_str(),
                _ => "-".as_ref(),
            })
            .arg(p.hold_ms.to_string());
        // A lock set's command is a section on its second key too, under its own id.
        let also_id = p.also.map(|_| format!("{id}.2"));
        if let (Some(also), Some(also_id)) = (p.also, &also_id) {
            let counter = ctx.counters[also]
                .as_ref()
                .expect("sets are drawn on mutexes, which have counters");
            cmd.arg(also_id).arg(counter);
        }
        cmd.stdout(Stdio::null()).stderr(Stdio::from(err_file));
        let spawned = now_ns();
        let mut child = cmd.spawn().expect("spawn distlock");
        let pid = Pid::from_raw(child.id() as i32);
        ctx.live.lock().unwrap()[ci] = Some(Live {
            pid,
            id: id.clone(),
            spawned,
            hold_ms: p.hold_ms,
            limit_ns: if p.also.is_some() {
                SET_RUN_LIMIT_NS
            } else {
                RUN_LIMIT_NS
            },
            killed_distlock: None,
            killed_in_line: None,
            killed_child: None,
            hung: None,
            stopped: None,
            resumed: None,
            group_dead: None,
        });
        // Wait for the exit without reaping (WNOWAIT): the pid stays ours until it leaves the
        // table. Bounded: the watchdog SIGKILLs a distlock older than RUN_LIMIT_NS (a set:
        // SET_RUN_LIMIT_NS).
        loop {
            match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
                Ok(_) => break,
                Err(Errno::EINTR) => continue,
                Err(e) => panic!("waitid({pid}): {e}"),
            }
        }
        let exited = now_ns();
        let live = ctx.live.lock().unwrap()[ci]
            .take()
            .expect("our entry in the table");
        let status = child.wait().unwrap();
        let stderr = String::from_utf8_lossy(&fs::read(&err_path).unwrap_or_default()).into_owned();
        let rec = RunRec {
            id,
            params: p,
            spawned,
            exited,
            code: status.code(),
            signal: status.signal(),
            stderr,
            killed_distlock: live.killed_distlock,
            killed_in_line: live.killed_in_line,
            killed_child: live.killed_child,
            hung: live.hung,
            stopped: live.stopped,
            resumed: live.resumed,
            group_dead: live.group_dead,
        };
        // A lock set: the same run, seen from its second key (the checker checks every key's
        // sections against every other section on that key).
        if let (Some(also), Some(also_id)) = (p.also, also_id) {
            runs.push(RunRec {
                id: also_id,
                params: Params {
                    key: also,
                    also: Some(p.key),
                    ..p
                },
                ..rec.clone()
            });
        }
        runs.push(rec);
        // Loop pacing.
        std::thread::sleep(Duration::from_millis(p.gap_ms));
    }
    ctx.contenders_done.fetch_add(1, Ordering::SeqCst);
    runs
}

fn watchdog(ctx: &Ctx) {
    while ctx.contenders_done.load(Ordering::SeqCst) < CONTENDERS {
        {
            let mut live = ctx.live.lock().unwrap();
            let now = now_ns();
            for l in live.iter_mut().flatten() {
                if l.hung.is_none() && now.saturating_sub(l.spawned) > l.limit_ns {
                    let _ = kill(l.pid, Signal::SIGKILL);
                    l.hung = Some(now);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Processes carrying `MARKER=run_id` in their environment, with their command lines.
fn marked_processes(run_id: &str) -> Vec<(i32, String)> {
    let needle = format!("{MARKER}={run_id}");
    let mut found = Vec::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            let cmdline = fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            found.push((pid, cmdline));
        }
    }
    found
}

fn compile_cs(dir: &Path) -> PathBuf {
    let src = dir.join("cs.c");
    let bin = dir.join("cs");
    fs::write(&src, CS_SOURCE).unwrap();
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("a C compiler (cc) is needed for the chaos test's critical section");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
    )
}

#[test]
fn safety_contract_under_fire() {
    chaos(Topology::Single);
}

/// The same attack on a Redlock over 5 persistent primaries (see the module documentation).
#[test]
fn redlock_safety_contract_under_fire() {
    chaos(Topology::Redlock);
}

/// The same attack behind Sentinel, with failovers while waiters are blocked (see
/// [`Topology::Sentinel`]).
#[test]
fn sentinel_safety_contract_under_fire() {
    chaos(Topology::Sentinel);
}

/// The same attack on a Redis Cluster, with slot migrations and shard failovers while waiters
/// are blocked (see [`Topology::Cluster`]).
#[test]
fn cluster_safety_contract_under_fire() {
    chaos(Topology::Cluster);
}

/// Held for a whole run: the variants take turns (see the module documentation).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn chaos(topology: Topology) {
    // A variant that failed poisons the lock; the other still runs.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let seed = env_u64("DISTLOCK_CHAOS_SEED").unwrap_or_else(|| fastrand::u64(..));
    let secs = env_u64("DISTLOCK_CHAOS_SECS")
        .unwrap_or(DEFAULT_SECS)
        .max(1);
    let plan = Plan::new(seed, secs, topology);
    let schedule = plan.describe();
    print!("{schedule}");

    let scratch = Scratch::new();
    let cs = compile_cs(scratch.0.path());
    let errdir = scratch.path("stderr");
    fs::create_dir(&errdir).unwrap();
    let counters: Vec<Option<PathBuf>> = KEYS
        .iter()
        .map(|k| {
            (k.is_mutex() || k.rw).then(|| {
                let p = scratch.path(&format!("counter-{}", k.name));
                fs::write(&p, "0\n").unwrap();
                p
            })
        })
        .collect();
    let servers = Mutex::new(Servers::start(topology));
    let sources = servers.lock().unwrap().sources();
    let busy: Vec<Mutex<()>> = (0..topology.nodes()).map(|_| Mutex::new(())).collect();
    let t0 = now_ns();
    let ctx = Ctx {
        topology,
        urls: servers.lock().unwrap().urls(),
        run_id: format!("{seed}-{}-{t0}", std::process::id()),
        cs,
        log: scratch.path("sections.log"),
        counters,
        errdir,
        t0,
        launch_until: t0 + secs * 1000 * MS,
        live: Mutex::new((0..CONTENDERS).map(|_| None).collect()),
        contenders_done: AtomicUsize::new(0),
        events: Mutex::new(Vec::new()),
        tally: Mutex::new(BTreeMap::new()),
        restarts: Mutex::new(Vec::new()),
        outages: Mutex::new(Vec::new()),
        ambiguous: Mutex::new(Vec::new()),
        // Not on a Sentinel deployment or a Cluster (the history is read from one URL).
        history: (history::enabled() && !topology.replicated())
            .then_some(secs + history::KEEP_AFTER_SECS),
    };
    if let Some(secs) = ctx.history {
        println!("chaos: history mode: every run keeps a lock history for {secs}s");
    }
    let stop_monitor = AtomicBool::new(false);

    let (runs, samples, collected) = std::thread::scope(|s| {
        let (servers, busy, plan, ctx) = (&servers, &busy, &plan, &ctx);
        let lanes: Vec<_> = (0..plan.server.len())
            .map(|lane| s.spawn(move || faults::server_faults(servers, busy, lane, plan, ctx)))
            .collect();
        let procs = s.spawn(|| faults::process_faults(plan, ctx));
        let dog = s.spawn(|| watchdog(ctx));
        // One monitor per node: each samples its own server's view.
        let monitors: Vec<_> = sources
            .iter()
            .map(|source| s.spawn(|| monitor::monitor(source, &stop_monitor)))
            .collect();
        // History mode on one server, which restarts empty: read the histories as they grow.
        let collector = (ctx.history.is_some() && !topology.persistent())
            .then(|| s.spawn(|| history::collect(&ctx.urls[0], &stop_monitor)));
        let contenders: Vec<_> = (0..CONTENDERS)
            .map(|ci| s.spawn(move || contender(ci, seed, ctx)))
            .collect();
        let runs: Vec<RunRec> = contenders
            .into_iter()
            .flat_map(|h| h.join().expect("contender thread"))
            .collect();
        for lane in lanes {
            lane.join().expect("server fault thread");
        }
        procs.join().expect("process fault thread");
        dog.join().expect("watchdog thread");
        stop_monitor.store(true, Ordering::SeqCst);
        let samples: Vec<_> = monitors
            .into_iter()
            .map(|m| m.join().expect("monitor thread"))
            .collect();
        let collected = collector.map(|c| c.join().expect("history collector thread"));
        (runs, samples, collected)
    });
    // Every loop has stopped and every fault has ended (the servers are running, not paused).
    let all_stopped = now_ns();
    let servers = servers.into_inner().unwrap();
    let leftovers = leftovers(&ctx.run_id, topology, &servers, all_stopped, ctx.history);

    let log = fs::read_to_string(&ctx.log).unwrap_or_default();
    let sections = parse_log(&log);
    let counters: Vec<Option<i64>> = ctx
        .counters
        .iter()
        .map(|p| {
            p.as_ref()
                .map(|p| fs::read_to_string(p).unwrap().trim().parse().unwrap())
        })
        .collect();
    let restarts = ctx.restarts.into_inner().unwrap();
    let outages = ctx.outages.into_inner().unwrap();
    // A sample read during a Cluster failover may come from the old primary, which answers
    // for the slot with what it had until it hears that the new one took over (seed
    // 8396912377602387006: a token granted on the new primary "gone" in a sample of the old
    // one, then "back"). Such samples are left out; the sections' own stamps are not.
    let ambiguous = ctx.ambiguous.into_inner().unwrap();
    let read = samples.iter().map(Vec::len).sum::<usize>();
    let samples: Vec<Vec<_>> = samples
        .into_iter()
        .map(|per_source| {
            per_source
                .into_iter()
                .filter(|s| {
                    !ambiguous
                        .iter()
                        .any(|&(from, to)| s.recv >= from && s.sent <= to)
                })
                .collect()
        })
        .collect();
    if !ambiguous.is_empty() {
        println!(
            "chaos: {} monitor samples read during {} Cluster failovers left out",
            read - samples.iter().map(Vec::len).sum::<usize>(),
            ambiguous.len()
        );
    }
    let mut verdict = Checker::check(Evidence {
        t0,
        runs: &runs,
        sections: &sections,
        restarts: &restarts,
        outages: &outages,
        samples: &samples,
        // A majority of the monitor's sources (one per node of a Redlock; one for the whole
        // deployment otherwise): it was `topology.nodes() / 2 + 1`, 2 behind Sentinel and 4 on
        // a Cluster, with one source each, so "ran without the lock" was never checked there.
        quorum: sources.len() / 2 + 1,
        counters: &counters,
        leftovers,
    });

    if ctx.history.is_some() {
        // The servers' clock (the events') against the monotonic one (the faults').
        let offset = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
            - (now_ns() / MS) as i64;
        let (violations, notes) =
            history::check(&ctx.urls, collected.as_deref(), &restarts, |mono_ns| {
                ((mono_ns / MS) as i64 + offset).max(0) as u64
            });
        verdict.violations.extend(violations);
        verdict.notes.extend(notes);
    }

    // Summary.
    let mut exits: BTreeMap<String, usize> = BTreeMap::new();
    // (A lock set's second record is the same run.)
    for r in runs.iter().filter(|r| !r.id.ends_with(".2")) {
        let mut exit = r.exit();
        if r.stderr.contains("superseded by") {
            exit.push_str(" (superseded)");
        }
        *exits.entry(exit).or_default() += 1;
    }
    let mut events = ctx.events.into_inner().unwrap();
    events.sort_by_key(|e| e.0);
    let mut summary = String::new();
    let _ = writeln!(
        summary,
        "chaos: {} runs ({} of them lock sets of two mutexes), {} sections ({} completed; a set's command counts once per key), {} monitor samples, {} restarts forgetting the locks, wall {:.1}s; exits {exits:?}",
        runs.iter().filter(|r| !r.id.ends_with(".2")).count(),
        runs.iter().filter(|r| r.id.ends_with(".2")).count(),
        sections.len(),
        sections.values().filter(|x| x.ended).count(),
        samples.iter().map(Vec::len).sum::<usize>(),
        restarts.len(),
        (now_ns() - t0) as f64 / 1e9
    );
    let _ = writeln!(
        summary,
        "chaos: faults executed: {:?}; at most {} server(s) stopped, paused or down at once",
        ctx.tally.into_inner().unwrap(),
        most_at_once(&outages)
    );
    for n in &verdict.notes {
        let _ = writeln!(summary, "chaos: {n}");
    }
    print!("{summary}");
    if !verdict.violations.is_empty() {
        let mut report = plan.header();
        let _ = writeln!(
            report,
            "{} violation(s) of the safety contract",
            verdict.violations.len()
        );
        for v in verdict.violations.iter().take(40) {
            let _ = writeln!(report, "  - {v}");
        }
        let _ = writeln!(report, "faults as executed:");
        for (at, what) in &events {
            let _ = writeln!(report, "  {} {what}", rel(t0, *at));
        }
        let _ = write!(report, "{summary}{schedule}");
        panic!("{report}");
    }
}

/// The most outages under way at one instant: with one node per lane at a time, how many
/// servers were faulted at once (a Redlock's must stay a minority).
fn most_at_once(outages: &[(u64, u64)]) -> usize {
    let mut edges: Vec<(u64, i32)> = outages
        .iter()
        .flat_map(|&(from, to)| [(from, 1), (to, -1)])
        .collect();
    // An end sorts before a start at the same instant.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}

/// What the run left behind once every loop had stopped, with bounded waits for what is
/// allowed to go away by itself.
fn leftovers(
    run_id: &str,
    topology: Topology,
    servers: &Servers,
    all_stopped: u64,
    history: Option<u64>,
) -> Leftovers {
    // Processes: a command whose distlock was SIGKILLed dies of PDEATHSIG asynchronously, so
    // give the kernel a bounded moment. Whatever is left then is killed (and reported).
    let mut orphans = Vec::new();
    let orphans_deadline = now_ns() + 3000 * MS;
    loop {
        let left = marked_processes(run_id);
        if left.is_empty() {
            break;
        }
        if now_ns() > orphans_deadline {
            for (pid, _) in &left {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            orphans = left;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    // Keys: every key but the fence counters goes by itself once nobody uses the lock, and
    // the last use came before every loop stopped: a lock or a slot expires within its TTL of
    // its last renewal, a lock handed to a waiter that died within the take-up window, a line
    // (`:queue`, `:waiters`, `:alive`) and `:superseded` within the place lease of the last
    // attempt (their keys expire 1s after the last place's deadline). Poll until they are
    // gone, or one has no expiry, or the bound passes.
    let keys_deadline = all_stopped + (MAX_TTL_MS.max(TAKEUP_MS).max(PLACE_MS + 1000) + 1000) * MS;
    // A Cluster's replicas are left out: their keys are copies of their primaries', and a
    // replica answers a key's command with MOVED (a failover leaves the old primary a replica
    // holding the lock keys it had: CI failed on that, seed unknown, and seed
    // 7192784466953876319 here).
    let scanned: Vec<usize> = match servers {
        Servers::Cluster(cluster) => cluster.primaries(),
        _ => (0..servers.len()).collect(),
    };
    loop {
        // (node, key) on every node scanned.
        let keys: Vec<(usize, String)> = scanned
            .iter()
            .flat_map(|&i| {
                let keys: Vec<String> = servers.node(i).cmd(&["KEYS", "*"]);
                keys.into_iter()
                    .filter(|k| !k.ends_with(":fence"))
                    // In history mode, a history stays for as long as it was asked to, and no
                    // longer: one without an expiry, or with a longer one, is left behind.
                    .filter(move |k| {
                        !(history.is_some_and(|secs| {
                            history::is_history_key(k)
                                && (0..=secs as i64 * 1000).contains(&servers.node(i).pttl(k))
                        }))
                    })
                    .map(move |k| (i, k))
            })
            .collect();
        if keys.is_empty() {
            return Leftovers {
                orphans,
                lines: Vec::new(),
                keys: Vec::new(),
                keys_after: rel(all_stopped, now_ns()),
            };
        }
        let (mut lines, mut described) = (Vec::new(), Vec::new());
        let mut immortal = false;
        for (i, k) in &keys {
            let redis = servers.node(*i);
            let pttl = redis.pttl(k);
            immortal |= pttl == -1;
            let on = if servers.len() > 1 {
                format!(" on {}", node_name(topology, *i))
            } else {
                String::new()
            };
            if k.ends_with(":queue") {
                let waiting: i64 = redis.cmd(&["ZCARD", k]);
                lines.push(format!("{k}{on} ({waiting} waiting, PTTL {pttl})"));
            } else {
                described.push(format!("{k}{on} (PTTL {pttl})"));
            }
        }
        if immortal || now_ns() > keys_deadline {
            return Leftovers {
                orphans,
                lines,
                keys: described,
                keys_after: rel(all_stopped, now_ns()),
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
