//! Issue 4: the safety contract under fire.
//!
//! Eight contender loops run `distlock run` over and over on three keys while two seeded fault
//! schedules hit the system: one for the server (SIGSTOP/SIGCONT shorter and longer than every
//! TTL, SIGKILL + restart without persistence, `CLIENT PAUSE ms WRITE`) and one for processes
//! (SIGKILL of a holder's command, SIGKILL of a distlock, waiting or holding, SIGKILL of a
//! distlock's guard process, as `pkill distlock` would do). Some commands
//! ignore SIGTERM (`trap '' TERM`), some run the critical section as a background grandchild.
//! Afterwards a checker proves, from timestamps taken on one clock, that the contract held.
//!
//! # The critical section
//!
//! The command is a tiny C program (`CS_SOURCE`), compiled with `cc` at test time. It stamps
//! every step with `clock_gettime(CLOCK_MONOTONIC)` — the clock behind Rust's `Instant` and
//! behind this test's [`now_ns`], so the command's stamps, distlock's exit times and the fault
//! times are directly comparable — and appends one line per stamp to a shared log with a single
//! `write(2)` on an `O_APPEND` descriptor (lines of concurrent writers never mix). The stamp is
//! taken in the very process that does the work it brackets. Why not a shell or python3: a shell
//! cannot read CLOCK_MONOTONIC, python3 costs ~20ms of CPU per start on a 2-core machine, and
//! any helper process adds a gap between the stamp and the work. The C program starts in ~1ms.
//!
//! Stamps: `S` (start, with pid, process group and DISTLOCK_TOKEN), `R n` (read the per-key
//! counter), `H` (heartbeat every 10ms while it holds), `P` (about to write), `W n+1` (the new
//! value is in place: written to a temporary file and renamed), `E` (end). The read-modify-write
//! is deliberately not atomic: only the lock keeps two sections from losing an update.
//!
//! A section's interval is [S, last stamp]. Both ends are conservative in the right direction
//! for finding violations: the command did run at every stamp, so two intervals that intersect
//! prove two commands ran their critical sections at the same time. (What a killed command did
//! after its last stamp is invisible, which is why it stamps every 10ms and right before its
//! write.)
//!
//! # Replaying
//!
//! The seed (printed first, and again on failure) fixes both fault schedules and every
//! contender's sequence of parameters (key, TTL, wait mode, hold time, whether the command ignores
//! SIGTERM). `DISTLOCK_CHAOS_SEED=<n>` replays it; the OS scheduler's interleaving is of course
//! not replayable, so a replay re-runs the same attack, not the same microsecond history.
//! `DISTLOCK_CHAOS_SECS=<n>` sets the length of the attack (default 20s: about 22s of wall time
//! alone, 30s alongside the other integration tests; 600 for the long variant).
//!
//! # What is checked (details at each check in [`Checker::check`])
//!
//! 1. No two critical sections on a key overlap, except across a Redis restart (which forgets
//!    locks by design), and there only within the TTL of the restart.
//! 2. A lost lock's process group (exit 124) was dead before the next holder started; no
//!    command ran after its distlock had exited.
//! 3. No command ran after a monitor sample had seen its key gone or taken; no lock key without
//!    an expiry; no key re-created after it was gone.
//! 4. Only documented exit codes, consistent with what the command did; no panic.
//! 5. No counter update lost, outside the restart windows.
//! 6. After the run: no process left (every process carries `CHAOS_RUN_ID` in its
//!    environment), no key left once the TTL has passed.

use std::collections::{BTreeMap, HashMap};
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

use crate::util::{Redis, Scratch, bare_distlock, lock_key};

const KEYS: [&str; 3] = ["chaos-a", "chaos-b", "chaos-c"];
const CONTENDERS: usize = 8;
const DEFAULT_SECS: u64 = 20;
const TTLS_MS: [u64; 3] = [1000, 1500, 2000];
const MAX_TTL_MS: u64 = 2000;
/// Every process the test starts carries `CHAOS_RUN_ID=<unique id>`, so that any survivor can be
/// found in /proc at the end, whatever its parent.
const MARKER: &str = "CHAOS_RUN_ID";
/// A distlock that runs longer than this is killed and reported (liveness, and a bound on the
/// test's own waits: every `waitid` below ends by then).
const RUN_LIMIT_NS: u64 = 30_000 * MS;
const MS: u64 = 1_000_000;

/// The critical section (see the module documentation).
const CS_SOURCE: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int log_fd = -1;
static const char *id;

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* One stamp, one write(2) on an O_APPEND descriptor. */
static void stamp(const char *kind, const char *rest) {
    char line[512];
    int n = snprintf(line, sizeof line, "%llu %s %s %s\n", now_ns(), id, kind, rest);
    if (n <= 0 || n >= (int)sizeof line || write(log_fd, line, (size_t)n) != n) {
        perror("chaos-cs: log");
        _exit(3);
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: cs LOG ID COUNTER HOLD_MS\n");
        return 2;
    }
    id = argv[2];
    const char *counter = argv[3];
    long hold_ms = atol(argv[4]);
    log_fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        perror("chaos-cs: open log");
        return 3;
    }
    const char *token = getenv("DISTLOCK_TOKEN");
    char rest[256];
    snprintf(rest, sizeof rest, "%d %d %s", (int)getpid(), (int)getpgrp(), token ? token : "-");
    stamp("S", rest);

    char buf[64];
    int fd = open(counter, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        perror("chaos-cs: open counter");
        return 3;
    }
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) {
        fprintf(stderr, "chaos-cs: empty counter\n");
        return 3;
    }
    buf[got] = 0;
    long n = strtol(buf, NULL, 10);
    snprintf(rest, sizeof rest, "%ld", n);
    stamp("R", rest);

    unsigned long long end = now_ns() + (unsigned long long)hold_ms * 1000000ull;
    for (;;) {
        unsigned long long t = now_ns();
        if (t >= end) break;
        unsigned long long left = end - t;
        unsigned long long slice = left < 10000000ull ? left : 10000000ull;
        struct timespec ts = { (time_t)(slice / 1000000000ull), (long)(slice % 1000000000ull) };
        nanosleep(&ts, NULL);
        stamp("H", "");
    }

    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.%d", counter, (int)getpid());
    stamp("P", "");
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror("chaos-cs: open tmp");
        return 3;
    }
    int len = snprintf(buf, sizeof buf, "%ld\n", n + 1);
    if (write(fd, buf, (size_t)len) != len) {
        perror("chaos-cs: write");
        return 3;
    }
    close(fd);
    if (rename(tmp, counter) != 0) {
        perror("chaos-cs: rename");
        return 3;
    }
    snprintf(rest, sizeof rest, "%ld", n + 1);
    stamp("W", rest);
    stamp("E", "");
    return 0;
}
"#;

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
// The plan: everything the seed decides.

#[derive(Clone, Copy, Debug)]
enum ServerFault {
    /// SIGSTOP the server, SIGCONT after `ms`.
    Stop { ms: u64 },
    /// SIGKILL the server, start it again (empty: no persistence) after `down_ms`.
    Restart { down_ms: u64 },
    /// `CLIENT PAUSE ms WRITE`.
    Pause { ms: u64 },
}

impl ServerFault {
    /// Time the fault occupies the server-fault thread (a restart takes some time itself).
    fn duration_ms(self) -> u64 {
        match self {
            ServerFault::Stop { ms } | ServerFault::Pause { ms } => ms,
            ServerFault::Restart { down_ms } => down_ms + 100,
        }
    }

    fn describe(self) -> String {
        match self {
            ServerFault::Stop { ms } => format!(
                "SIGSTOP redis for {ms}ms ({} every TTL)",
                if ms < TTLS_MS[0] {
                    "shorter than"
                } else {
                    "longer than"
                }
            ),
            ServerFault::Restart { down_ms } => {
                format!("SIGKILL redis, restart it without its data after {down_ms}ms")
            }
            ServerFault::Pause { ms } => format!("CLIENT PAUSE {ms} WRITE"),
        }
    }
}

#[derive(Clone, Copy, Debug)]
/// A SIGKILL of one process.
enum ProcFault {
    /// SIGKILL the command of a holder (the leader of its process group).
    Child { pick: u64 },
    /// SIGKILL a distlock process (waiting or holding).
    Distlock { pick: u64 },
    /// SIGKILL the guard of a distlock (as `pkill distlock` would): distlock must replace it.
    Guard { pick: u64 },
}

impl ProcFault {
    fn describe(self) -> String {
        match self {
            ProcFault::Child { pick } => format!("SIGKILL a holder's command (pick {pick})"),
            ProcFault::Distlock { pick } => format!("SIGKILL a distlock (pick {pick})"),
            ProcFault::Guard { pick } => format!("SIGKILL a distlock's guard (pick {pick})"),
        }
    }
}

struct Plan {
    seed: u64,
    secs: u64,
    /// (offset in ms, fault), sequential: each ends before the next starts.
    server: Vec<(u64, ServerFault)>,
    procs: Vec<(u64, ProcFault)>,
}

impl Plan {
    fn new(seed: u64, secs: u64) -> Plan {
        let mut rng = fastrand::Rng::with_seed(seed);
        let end = secs * 1000;
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
            server.push((t, fault));
            t += fault.duration_ms() + rng.u64(300..1500);
        }
        let mut procs = Vec::new();
        let mut t = rng.u64(200..800);
        while t < end {
            let pick = rng.u64(..);
            let fault = match rng.u8(0..5) {
                0 | 1 => ProcFault::Child { pick },
                2 | 3 => ProcFault::Distlock { pick },
                _ => ProcFault::Guard { pick },
            };
            procs.push((t, fault));
            t += rng.u64(200..900);
        }
        Plan {
            seed,
            secs,
            server,
            procs,
        }
    }

    fn header(&self) -> String {
        format!(
            "chaos: seed {seed}, {secs}s of faults, {CONTENDERS} contenders on {KEYS:?}, TTLs {TTLS_MS:?}ms\n\
             chaos: replay with DISTLOCK_CHAOS_SEED={seed} DISTLOCK_CHAOS_SECS={secs} \
             cargo test --test integration chaos -- --nocapture\n",
            seed = self.seed,
            secs = self.secs,
        )
    }

    fn describe(&self) -> String {
        let mut s = self.header();
        s.push_str("chaos: server fault schedule:\n");
        for (at, f) in &self.server {
            let _ = writeln!(s, "  {:+.3}s {}", *at as f64 / 1e3, f.describe());
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WaitKind {
    Forever,
    Limit3s,
    NoWait,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
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
struct Params {
    key: usize,
    ttl_ms: u64,
    wait: WaitKind,
    spin: bool,
    form: Form,
    hold_ms: u64,
    gap_ms: u64,
}

impl Params {
    fn draw(rng: &mut fastrand::Rng) -> Params {
        let key = rng.usize(..KEYS.len());
        let ttl_ms = TTLS_MS[rng.usize(..TTLS_MS.len())];
        let wait = match rng.u32(..100) {
            0..50 => WaitKind::Forever,
            50..85 => WaitKind::Limit3s,
            _ => WaitKind::NoWait,
        };
        let spin = rng.u32(..100) < 30;
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
            form,
            hold_ms,
            gap_ms: rng.u64(0..100),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The run.

/// A distlock that is running, as the fault threads see it. While it is in the table it has not
/// been reaped, so its pid cannot be recycled under a fault's feet.
struct Live {
    pid: Pid,
    id: String,
    spawned: u64,
    killed_distlock: Option<u64>,
    killed_child: Option<u64>,
    hung: Option<u64>,
}

/// One finished iteration.
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
    killed_child: Option<u64>,
    hung: Option<u64>,
}

impl RunRec {
    fn exit(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit {c}"),
            (_, Some(s)) => format!("signal {s}"),
            _ => "?".into(),
        }
    }
}

struct Restart {
    kill_sent: u64,
    /// The old server was reaped: its data (every lock) is gone by then.
    dead: u64,
    up: u64,
}

struct Ctx {
    url: String,
    run_id: String,
    cs: PathBuf,
    log: PathBuf,
    counters: Vec<PathBuf>,
    errdir: PathBuf,
    t0: u64,
    launch_until: u64,
    live: Mutex<Vec<Option<Live>>>,
    contenders_done: AtomicUsize,
    events: Mutex<Vec<(u64, String)>>,
    restarts: Mutex<Vec<Restart>>,
    /// (start, end) of every server fault: stop, pause or restart.
    outages: Mutex<Vec<(u64, u64)>>,
}

impl Ctx {
    fn event(&self, at: u64, what: String) {
        self.events.lock().unwrap().push((at, what));
    }
}

fn contender(ci: usize, seed: u64, ctx: &Ctx) -> Vec<RunRec> {
    let mut rng =
        fastrand::Rng::with_seed(seed ^ (ci as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut runs = Vec::new();
    let mut iter = 0;
    while now_ns() < ctx.launch_until {
        let p = Params::draw(&mut rng);
        let id = format!("c{ci}i{iter}");
        iter += 1;
        let err_path = ctx.errdir.join(format!("{id}.txt"));
        let err_file = fs::File::create(&err_path).unwrap();
        let mut cmd = bare_distlock();
        cmd.env("DISTLOCK_REDIS_URL", &ctx.url)
            .env(MARKER, &ctx.run_id)
            .args(["-v", "run", "-k", KEYS[p.key], "--ttl"])
            .arg(format!("{}ms", p.ttl_ms));
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
            .arg(&ctx.counters[p.key])
            .arg(p.hold_ms.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::from(err_file));
        let spawned = now_ns();
        let mut child = cmd.spawn().expect("spawn distlock");
        let pid = Pid::from_raw(child.id() as i32);
        ctx.live.lock().unwrap()[ci] = Some(Live {
            pid,
            id: id.clone(),
            spawned,
            killed_distlock: None,
            killed_child: None,
            hung: None,
        });
        // Wait for the exit without reaping (WNOWAIT): the pid stays ours until it leaves the
        // table. Bounded: the watchdog SIGKILLs a distlock older than RUN_LIMIT_NS.
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
        runs.push(RunRec {
            id,
            params: p,
            spawned,
            exited,
            code: status.code(),
            signal: status.signal(),
            stderr,
            killed_distlock: live.killed_distlock,
            killed_child: live.killed_child,
            hung: live.hung,
        });
        // Loop pacing.
        std::thread::sleep(Duration::from_millis(p.gap_ms));
    }
    ctx.contenders_done.fetch_add(1, Ordering::SeqCst);
    runs
}

fn server_faults(redis: &mut Redis, plan: &Plan, ctx: &Ctx) {
    for &(at, fault) in &plan.server {
        sleep_until(ctx.t0 + at * MS);
        match fault {
            ServerFault::Stop { ms } => {
                redis.signal(Signal::SIGSTOP);
                let stopped = now_ns();
                ctx.event(stopped, format!("redis SIGSTOP ({ms}ms)"));
                sleep_until(stopped + ms * MS);
                redis.signal(Signal::SIGCONT);
                let resumed = now_ns();
                ctx.event(resumed, "redis SIGCONT".into());
                ctx.outages.lock().unwrap().push((stopped, resumed));
            }
            ServerFault::Restart { down_ms } => {
                let kill_sent = now_ns();
                redis.kill();
                let dead = now_ns();
                ctx.event(dead, "redis SIGKILLed (every lock forgotten)".into());
                sleep_until(dead + down_ms * MS);
                redis.restart();
                let up = now_ns();
                ctx.event(up, "redis restarted, empty".into());
                ctx.outages.lock().unwrap().push((kill_sent, up));
                ctx.restarts.lock().unwrap().push(Restart {
                    kill_sent,
                    dead,
                    up,
                });
            }
            ServerFault::Pause { ms } => {
                let paused = now_ns();
                redis.cmd::<String>(&["CLIENT", "PAUSE", &ms.to_string(), "WRITE"]);
                ctx.event(paused, format!("CLIENT PAUSE {ms} WRITE"));
                sleep_until(paused + ms * MS);
                redis.cmd::<String>(&["CLIENT", "UNPAUSE"]);
                let unpaused = now_ns();
                ctx.event(unpaused, "CLIENT UNPAUSE".into());
                ctx.outages.lock().unwrap().push((paused, unpaused));
            }
        }
    }
}

/// `(ppid, pgrp, session)` of a process.
fn ppid_pgrp_sid(pid: i32) -> Option<(i32, i32, i32)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit(')').next()?.split_whitespace().skip(1);
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let sid = fields.next()?.parse().ok()?;
    Some((ppid, pgrp, sid))
}

/// Whether `pid` is the command of distlock `parent`: its child that leads a process group of
/// its own in distlock's session. (The guard, distlock's other child, leads a session of its
/// own: killing it instead of the command is not the fault this test means to inject.)
fn is_command_of(pid: i32, parent: Pid) -> bool {
    let session = ppid_pgrp_sid(parent.as_raw()).map(|(_, _, sid)| sid);
    matches!(ppid_pgrp_sid(pid), Some((ppid, pgrp, sid))
        if ppid == parent.as_raw() && pgrp == pid && Some(sid) == session)
}

/// The child of `distlock` that `is_it` recognises.
fn child_of(distlock: Pid, is_it: fn(i32, Pid) -> bool) -> Option<Pid> {
    let children = fs::read_to_string(format!("/proc/{distlock}/task/{distlock}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|c| c.parse::<i32>().ok())
        .find(|&c| is_it(c, distlock))
        .map(Pid::from_raw)
}

/// The command of a holding distlock.
fn command_of(distlock: Pid) -> Option<Pid> {
    child_of(distlock, is_command_of)
}

/// Whether `pid` is the guard of distlock `parent`.
fn is_guard_of(pid: i32, parent: Pid) -> bool {
    fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c == "distlock-guard\n")
        && ppid_pgrp_sid(pid).is_some_and(|(ppid, _, _)| ppid == parent.as_raw())
}

/// The guard of a distlock.
fn guard_of(distlock: Pid) -> Option<Pid> {
    child_of(distlock, is_guard_of)
}

/// SIGKILL `pid` through a pidfd, after checking (on the pidfd's process) that it is still what
/// `is_it` says: pids are recycled quickly here (pid_max can be 32768).
fn kill_checked(pid: Pid, is_it: impl Fn(i32) -> bool) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if fd < 0 {
        return false;
    }
    let fd = fd as libc::c_int;
    let ours = is_it(pid.as_raw());
    // SAFETY: `fd` is a pidfd we own; a null siginfo is allowed and means SI_USER.
    let sent = ours
        && unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        } == 0;
    // SAFETY: `fd` is ours and closed exactly once.
    unsafe { libc::close(fd) };
    sent
}

fn process_faults(plan: &Plan, ctx: &Ctx) {
    for &(at, fault) in &plan.procs {
        sleep_until(ctx.t0 + at * MS);
        let mut live = ctx.live.lock().unwrap();
        let now = now_ns();
        match fault {
            ProcFault::Distlock { pick } => {
                let candidates: Vec<usize> = (0..live.len())
                    .filter(|&i| {
                        live[i]
                            .as_ref()
                            .is_some_and(|l| l.killed_distlock.is_none())
                    })
                    .collect();
                if candidates.is_empty() {
                    drop(live);
                    ctx.event(now, "no distlock to SIGKILL".into());
                    continue;
                }
                let ci = candidates[(pick % candidates.len() as u64) as usize];
                let l = live[ci].as_mut().unwrap();
                let _ = kill(l.pid, Signal::SIGKILL);
                l.killed_distlock = Some(now);
                let what = format!("SIGKILL distlock {} ({})", l.pid, l.id);
                drop(live);
                ctx.event(now, what);
            }
            ProcFault::Child { pick } => {
                let Some((ci, command)) = pick_child(&live, pick, command_of) else {
                    drop(live);
                    ctx.event(now, "no holder's command to SIGKILL".into());
                    continue;
                };
                let l = live[ci].as_mut().unwrap();
                let what = if kill_checked(command, |c| is_command_of(c, l.pid)) {
                    l.killed_child = Some(now);
                    format!("SIGKILL command {command} of {} (distlock {})", l.id, l.pid)
                } else {
                    format!("command {command} of {} was gone already", l.id)
                };
                drop(live);
                ctx.event(now, what);
            }
            ProcFault::Guard { pick } => {
                let Some((ci, guard)) = pick_child(&live, pick, guard_of) else {
                    drop(live);
                    ctx.event(now, "no guard to SIGKILL".into());
                    continue;
                };
                let l = live[ci].as_ref().unwrap();
                let what = if kill_checked(guard, |g| is_guard_of(g, l.pid)) {
                    format!("SIGKILL guard {guard} of {} (distlock {})", l.id, l.pid)
                } else {
                    format!("guard {guard} of {} was gone already", l.id)
                };
                drop(live);
                ctx.event(now, what);
            }
        }
    }
}

/// One of the live distlocks' children that `find` finds (their commands, or their guards),
/// chosen by `pick`: the contender's index and the child's pid.
fn pick_child(
    live: &[Option<Live>],
    pick: u64,
    find: fn(Pid) -> Option<Pid>,
) -> Option<(usize, Pid)> {
    let candidates: Vec<(usize, Pid)> = live
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let l = l.as_ref()?;
            if l.killed_distlock.is_some() {
                return None;
            }
            find(l.pid).map(|c| (i, c))
        })
        .collect();
    (!candidates.is_empty()).then(|| candidates[(pick % candidates.len() as u64) as usize])
}

fn watchdog(ctx: &Ctx) {
    while ctx.contenders_done.load(Ordering::SeqCst) < CONTENDERS {
        {
            let mut live = ctx.live.lock().unwrap();
            let now = now_ns();
            for l in live.iter_mut().flatten() {
                if l.hung.is_none() && now.saturating_sub(l.spawned) > RUN_LIMIT_NS {
                    let _ = kill(l.pid, Signal::SIGKILL);
                    l.hung = Some(now);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One look at every lock key: (token, PTTL) per key, read in one MULTI (allowed during
/// `CLIENT PAUSE WRITE`), sent at `sent` and answered at `recv`.
struct Sample {
    sent: u64,
    recv: u64,
    keys: Vec<(Option<String>, i64)>,
}

fn monitor(url: &str, stop: &AtomicBool) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut con: Option<redis::Connection> = None;
    while !stop.load(Ordering::SeqCst) {
        if con.is_none() {
            con = redis::Client::open(url).ok().and_then(|c| {
                c.get_connection_with_timeout(Duration::from_millis(300))
                    .ok()
            });
            if let Some(c) = &con {
                // Longer than the longest SIGSTOP: a sample sent into a stopped server is
                // answered when it resumes.
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = c.set_write_timeout(Some(Duration::from_secs(5)));
            }
        }
        if let Some(c) = con.as_mut() {
            let mut pipe = redis::pipe();
            pipe.atomic();
            for k in KEYS {
                pipe.cmd("GET")
                    .arg(lock_key(k))
                    .cmd("PTTL")
                    .arg(lock_key(k));
            }
            let sent = now_ns();
            match pipe.query::<Vec<redis::Value>>(c) {
                Ok(values) if values.len() == 2 * KEYS.len() => {
                    let recv = now_ns();
                    let mut keys = Vec::new();
                    let mut values = values.into_iter();
                    while let (Some(token), Some(pttl)) = (values.next(), values.next()) {
                        let token = redis::from_redis_value::<Option<String>>(token).ok();
                        let pttl = redis::from_redis_value::<i64>(pttl).ok();
                        if let (Some(token), Some(pttl)) = (token, pttl) {
                            keys.push((token, pttl));
                        }
                    }
                    if keys.len() == KEYS.len() {
                        samples.push(Sample { sent, recv, keys });
                    }
                }
                _ => con = None,
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    samples
}

// ---------------------------------------------------------------------------------------------
// The log and the checker.

#[derive(Default, Debug)]
struct Section {
    token: String,
    start: u64,
    last: u64,
    read: Option<i64>,
    pre_write: bool,
    wrote: Option<i64>,
    ended: bool,
}

fn parse_log(text: &str) -> HashMap<String, Section> {
    let mut sections: HashMap<String, Section> = HashMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(ns), Some(id), Some(kind)) = (f.next(), f.next(), f.next()) else {
            panic!("bad log line {line:?}");
        };
        let ns: u64 = ns.parse().unwrap();
        let s = sections.entry(id.to_owned()).or_default();
        s.last = s.last.max(ns);
        match kind {
            "S" => {
                s.start = ns;
                let _pid = f.next();
                let _pgid = f.next();
                s.token = f.next().unwrap_or("-").to_owned();
            }
            "R" => s.read = f.next().and_then(|v| v.parse().ok()),
            "P" => s.pre_write = true,
            "W" => s.wrote = f.next().and_then(|v| v.parse().ok()),
            "E" => s.ended = true,
            _ => {}
        }
    }
    sections
}

struct Checker<'a> {
    t0: u64,
    runs: HashMap<&'a str, &'a RunRec>,
    sections: &'a HashMap<String, Section>,
    restarts: &'a [Restart],
    outages: &'a [(u64, u64)],
    samples: &'a [Sample],
    violations: Vec<String>,
    notes: Vec<String>,
}

impl<'a> Checker<'a> {
    fn t(&self, t: u64) -> String {
        rel(self.t0, t)
    }

    fn describe(&self, id: &str) -> String {
        let r = self.runs[id];
        let mut s = format!(
            "{id}: key {} ttl {}ms wait {:?}{} form {:?} hold {}ms; spawned {} exited {} ({})",
            KEYS[r.params.key],
            r.params.ttl_ms,
            r.params.wait,
            if r.params.spin { " spin" } else { "" },
            r.params.form,
            r.params.hold_ms,
            self.t(r.spawned),
            self.t(r.exited),
            r.exit(),
        );
        if let Some(x) = self.sections.get(id) {
            let _ = write!(
                s,
                "; section {}..{} read {:?} wrote {:?}{} token {}",
                self.t(x.start),
                self.t(x.last),
                x.read,
                x.wrote,
                if x.ended { " ended" } else { "" },
                x.token
            );
        }
        if let Some(k) = r.killed_distlock {
            let _ = write!(s, "; distlock SIGKILLed by the test at {}", self.t(k));
        }
        if let Some(k) = r.killed_child {
            let _ = write!(s, "; command SIGKILLed by the test at {}", self.t(k));
        }
        if !r.stderr.is_empty() {
            let _ = write!(
                s,
                "\n      stderr: {}",
                r.stderr.trim_end().replace('\n', "\n              ")
            );
        }
        s
    }

    /// The restart that explains an overlap between the section `x` and a section that started
    /// at `y_start`, if any.
    ///
    /// A restart without persistence forgets every lock by design (README, "What distlock
    /// guarantees"). The overlap it allows, and nothing more: `x`'s lock was taken from the old
    /// server (its distlock was started before that server was dead), the other section started
    /// after the old server was dead (so its lock came from the new one), and `x` ended within
    /// its TTL of the restart. That last bound is sound: `x`'s last confirmed renewal T was sent
    /// to the old server, so T < `dead`, and distlock SIGKILLs the group at T + ttl - margin at
    /// the latest (a "not held" reply only brings the kill forward); the margin (>= 110ms) covers
    /// the time the SIGKILL takes. (One hole, documented: a lock taken from the old server in
    /// the last instant before the kill whose command started only after the old server was
    /// reaped would be excused too; that needs a real bug to coincide with a restart within a
    /// millisecond.)
    fn restart_excuse(&self, x_id: &str, x: &Section, y_start: u64) -> Option<&'a Restart> {
        let xr = self.runs[x_id];
        let ttl = xr.params.ttl_ms * MS;
        self.restarts
            .iter()
            .find(|r| xr.spawned < r.dead && y_start > r.dead && x.last <= r.dead + ttl)
    }

    fn check(&mut self, counters: &[i64]) {
        // Sections per key, by start.
        let mut per_key: Vec<Vec<&str>> = vec![Vec::new(); KEYS.len()];
        for (id, x) in self.sections.iter() {
            if x.start == 0 {
                self.violations
                    .push(format!("section {id} logged without a start stamp"));
                continue;
            }
            per_key[self.runs[id.as_str()].params.key].push(id.as_str());
        }
        for list in &mut per_key {
            list.sort_by_key(|id| self.sections[*id].start);
        }

        // 1. Mutual exclusion: no two sections on a key overlap, except across a restart.
        let mut excused_pairs = vec![0i64; KEYS.len()];
        for (k, list) in per_key.iter().enumerate() {
            for (i, &xi) in list.iter().enumerate() {
                let x = &self.sections[xi];
                for &yi in &list[i + 1..] {
                    let y = &self.sections[yi];
                    if y.start > x.last {
                        break;
                    }
                    match self.restart_excuse(xi, x, y.start) {
                        Some(r) => {
                            excused_pairs[k] += 1;
                            self.notes.push(format!(
                                "overlap {xi}/{yi} on {} excused by the restart (server dead at {}, up at {}): {xi} ended at {}",
                                KEYS[k],
                                self.t(r.dead),
                                self.t(r.up),
                                self.t(x.last)
                            ));
                        }
                        None => self.violations.push(format!(
                            "OVERLAP on {}: {yi} started at {} while {xi} ran until at least {} ({:.1}ms of overlap)\n    {}\n    {}",
                            KEYS[k],
                            self.t(y.start),
                            self.t(x.last),
                            (x.last - y.start) as f64 / 1e6,
                            self.describe(xi),
                            self.describe(yi)
                        )),
                    }
                }
            }
        }

        // 2. A lost lock's command was dead before the lock could pass on.
        //
        // Which bound is sound. The command's last stamp is a *lower* bound of its death: a
        // stamp after a moment proves it ran then, so "last stamp < next holder's first stamp"
        // is the part of check 1 that can only fail on a real violation, and it is asserted for
        // every section there. To *prove* the lost holder harmless we need an *upper* bound of
        // the death of its whole process group (grandchildren do not stamp): distlock's exit as
        // seen by `waitid`. On a loss distlock exits 124 right after `kill(-group, 0)` fails (no
        // Redis call in between: it leaves the key alone), and waitid sees the exit after it
        // happened. The next holder's first stamp comes after its acquire, which comes after the
        // lost lock expired. So "distlock's exit < next holder's start" proves that nothing of
        // the lost holder ran once the lock had passed on. There is slack by design: distlock
        // SIGKILLs by T + ttl - margin, the key expires at T + ttl at the earliest (T: send time
        // of the last confirmed renewal), so at least the margin (>= 110ms; more with SIGTERM's
        // grace) plus the next acquire's latency; the smallest slack seen is printed.
        //
        // Not for the other 124, "no longer held when the command ended": there the command had
        // ended and its group was empty *before* distlock sent the release, and the release is
        // a Redis round trip that a stopped or paused server holds up for seconds: distlock's
        // exit bounds nothing useful, and the stamps (checks 1 and 3) carry the proof.
        let mut min_slack: Option<(u64, String)> = None;
        for (k, list) in per_key.iter().enumerate() {
            for (i, &xi) in list.iter().enumerate() {
                let xr = self.runs[xi];
                if xr.code != Some(124) || xr.stderr.contains("no longer held") {
                    continue;
                }
                let x = &self.sections[xi];
                let Some(&yi) = list.get(i + 1) else { continue };
                let y = &self.sections[yi];
                if self.restart_excuse(xi, x, y.start).is_some() {
                    // The lock was forgotten: the next holder may start at once (check 1).
                    continue;
                }
                if xr.exited < y.start {
                    let slack = y.start - xr.exited;
                    if min_slack.as_ref().is_none_or(|(s, _)| slack < *s) {
                        min_slack = Some((slack, format!("{xi} -> {yi}")));
                    }
                } else {
                    self.violations.push(format!(
                        "LOST LOCK NOT PROVEN DEAD on {}: {xi} lost its lock (exit 124) and its distlock was seen exiting at {}, after {yi} started at {}\n    {}\n    {}",
                        KEYS[k],
                        self.t(xr.exited),
                        self.t(y.start),
                        self.describe(xi),
                        self.describe(yi)
                    ));
                }
            }
        }
        if let Some((slack, pair)) = min_slack {
            let why = pair
                .split(" -> ")
                .next()
                .and_then(|x| {
                    self.runs[x]
                        .stderr
                        .lines()
                        .find(|l| l.contains("lost lock"))
                })
                .unwrap_or("")
                .to_owned();
            self.notes.push(format!(
                "lost locks: smallest slack between a lost holder's exit and the next holder's start: {:.1}ms ({pair}: {why})",
                slack as f64 / 1e6
            ));
        }

        // 2b. No command outlives its distlock: distlock waits for the whole group before it
        // exits, and when it is SIGKILLed the README promises the command dies with it. A stamp
        // later than distlock's exit (an upper bound, see above) proves a process of the command
        // ran with nobody left to kill it on a loss. The 2ms allow for a SIGKILL queued by the
        // dying distlock (PR_SET_PDEATHSIG) that has not reached a process running on the other
        // CPU yet: it can read the (vDSO) clock in that window, but not for milliseconds.
        for (id, x) in self.sections.iter() {
            let r = self.runs[id.as_str()];
            if x.last > r.exited + 2 * MS {
                self.violations.push(format!(
                    "OUTLIVED ITS DISTLOCK on {}: {id}'s command ran until at least {}, {:.1}ms after its distlock exited ({}){}\n    {}",
                    KEYS[r.params.key],
                    self.t(x.last),
                    (x.last - r.exited) as f64 / 1e6,
                    r.exit(),
                    if matches!(r.params.form, Form::Direct | Form::StubbornExec) {
                        ""
                    } else {
                        "; the section ran in a grandchild of distlock, which PR_SET_PDEATHSIG does not reach"
                    },
                    self.describe(id)
                ));
            }
        }

        // 3. Against the key itself (the monitor): once a sample sent after a section started
        // shows the key without the section's token, the lock was not the section's any more
        // no later than that sample's answer; a stamp after that answer proves the command ran
        // without its lock. Also: a key never lacks an expiry, and a token never comes back
        // once gone after its command started (renewals never re-create a key).
        for (id, x) in self.sections.iter() {
            if x.token == "-" || x.start == 0 {
                continue;
            }
            let r = self.runs[id.as_str()];
            let k = r.params.key;
            let first_after = self.samples.partition_point(|s| s.sent < x.start);
            let gone = self.samples[first_after..]
                .iter()
                .position(|s| s.keys[k].0.as_deref() != Some(x.token.as_str()))
                .map(|j| first_after + j);
            let Some(j) = gone else { continue };
            let g = &self.samples[j];
            if x.last > g.recv {
                let ttl = r.params.ttl_ms * MS;
                let excused = self.restarts.iter().any(|rs| {
                    rs.kill_sent < g.recv && r.spawned < rs.dead && x.last <= rs.dead + ttl
                });
                if !excused {
                    self.violations.push(format!(
                        "RAN WITHOUT THE LOCK on {}: the key no longer held {id}'s token in the sample answered at {} (holder {:?}), but {id} ran until at least {}\n    {}",
                        KEYS[k],
                        self.t(g.recv),
                        g.keys[k].0,
                        self.t(x.last),
                        self.describe(id)
                    ));
                }
            }
            if let Some(back) = self.samples[j..]
                .iter()
                .find(|s| s.keys[k].0.as_deref() == Some(x.token.as_str()))
            {
                self.violations.push(format!(
                    "RE-CREATED: {id}'s token was gone from {} at {} and back at {}\n    {}",
                    KEYS[k],
                    self.t(g.recv),
                    self.t(back.sent),
                    self.describe(id)
                ));
            }
        }
        for s in self.samples {
            for (k, (token, pttl)) in s.keys.iter().enumerate() {
                if token.is_some() && *pttl == -1 {
                    self.violations.push(format!(
                        "NO EXPIRY: {} held {token:?} without a TTL at {}",
                        KEYS[k],
                        self.t(s.sent)
                    ));
                }
            }
        }

        // 4. Exit codes: only documented ones, and consistent with what the command did.
        let mut ids: Vec<&str> = self.runs.keys().copied().collect();
        ids.sort();
        for id in ids {
            let r = self.runs[id];
            let x = self.sections.get(id);
            let killed = r.killed_distlock.is_some() || r.killed_child.is_some();
            let bad = |why: &str| format!("EXIT: {why}\n    {}", self.describe(id));
            let mut found = Vec::new();
            if r.hung.is_some() {
                found.push(bad("distlock ran longer than the 30s limit and was killed"));
            }
            if r.stderr.contains("panicked") {
                found.push(bad("distlock panicked"));
            }
            if r.stderr.contains("survived SIGKILL") {
                found.push(bad("a process survived SIGKILL"));
            }
            match (r.code, r.signal) {
                (Some(0), _) => {
                    if !x.is_some_and(|x| x.ended) {
                        found.push(bad("exit 0 but the command did not complete"));
                    }
                }
                (Some(124), _) => {
                    // "no longer held when the command ended": the key vanished before the
                    // release ran. With a healthy server the release follows the end of the
                    // group at once, well before T + ttl; only a server fault (a restart, or a
                    // stop or pause that holds the release up past the expiry) explains it.
                    if r.stderr.contains("no longer held")
                        && !self
                            .outages
                            .iter()
                            .any(|&(from, to)| from < r.exited && to > r.spawned)
                    {
                        found.push(bad(
                            "the lock vanished before the release, with no server fault to explain it",
                        ));
                    }
                }
                (Some(75), _) => {
                    if x.is_some() {
                        found.push(bad("exit 75 (busy) but the command ran"));
                    }
                    if r.params.wait == WaitKind::Forever {
                        found.push(bad("exit 75 (busy) without --wait or --no-wait"));
                    }
                }
                (Some(69), _) => {
                    if x.is_some() {
                        found.push(bad("exit 69 (Redis unreachable) but the command ran"));
                    }
                }
                (_, Some(9)) if killed || r.hung.is_some() => {}
                _ => found.push(bad("undocumented exit for this run")),
            }
            self.violations.extend(found);
        }

        // 5. Counters. W = sections that logged W (their write is in place), U = sections
        // that logged P but not W (killed around the write: it may or may not have landed).
        // Without overlap the counter is exactly the number of writes, so W <= counter <= W+U;
        // every overlapping pair may lose at most one update, so across restarts the lower
        // bound is W - (excused overlapping pairs). A lost update outside those windows breaks
        // the lower bound.
        for (k, list) in per_key.iter().enumerate() {
            let w = list
                .iter()
                .filter(|id| self.sections[**id].wrote.is_some())
                .count() as i64;
            let u = list
                .iter()
                .filter(|id| {
                    let x = &self.sections[**id];
                    x.pre_write && x.wrote.is_none()
                })
                .count() as i64;
            let m = excused_pairs[k];
            let c = counters[k];
            self.notes.push(format!(
                "counter {}: {c} (writes logged {w}, possibly landed {u}, excused overlaps {m})",
                KEYS[k]
            ));
            if c < w - m || c > w + u {
                self.violations.push(format!(
                    "LOST UPDATE on {}: counter {c}, but {w} writes were logged, {u} more may have landed, and only {m} overlaps are excused by restarts",
                    KEYS[k]
                ));
            }
        }
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
    let seed = env_u64("DISTLOCK_CHAOS_SEED").unwrap_or_else(|| fastrand::u64(..));
    let secs = env_u64("DISTLOCK_CHAOS_SECS")
        .unwrap_or(DEFAULT_SECS)
        .max(1);
    let plan = Plan::new(seed, secs);
    let schedule = plan.describe();
    print!("{schedule}");

    let scratch = Scratch::new();
    let cs = compile_cs(scratch.0.path());
    let errdir = scratch.path("stderr");
    fs::create_dir(&errdir).unwrap();
    let counters: Vec<PathBuf> = KEYS
        .iter()
        .map(|k| {
            let p = scratch.path(&format!("counter-{k}"));
            fs::write(&p, "0\n").unwrap();
            p
        })
        .collect();
    let mut redis = Redis::start();
    let t0 = now_ns();
    let ctx = Ctx {
        url: redis.url(),
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
        restarts: Mutex::new(Vec::new()),
        outages: Mutex::new(Vec::new()),
    };
    let stop_monitor = AtomicBool::new(false);

    let (runs, samples) = std::thread::scope(|s| {
        let server = s.spawn(|| server_faults(&mut redis, &plan, &ctx));
        let procs = s.spawn(|| process_faults(&plan, &ctx));
        let dog = s.spawn(|| watchdog(&ctx));
        let mon = s.spawn(|| monitor(&ctx.url, &stop_monitor));
        let contenders: Vec<_> = (0..CONTENDERS)
            .map(|ci| {
                let ctx = &ctx;
                s.spawn(move || contender(ci, seed, ctx))
            })
            .collect();
        let runs: Vec<RunRec> = contenders
            .into_iter()
            .flat_map(|h| h.join().expect("contender thread"))
            .collect();
        server.join().expect("server fault thread");
        procs.join().expect("process fault thread");
        dog.join().expect("watchdog thread");
        stop_monitor.store(true, Ordering::SeqCst);
        (runs, mon.join().expect("monitor thread"))
    });
    // Every loop has stopped and every fault has ended (the server is running, not paused).
    let all_stopped = now_ns();

    let mut violations = Vec::new();

    // No orphan: every process the test started (distlock, sh, the C program) carries the
    // marker. A command whose distlock was SIGKILLed dies of PDEATHSIG asynchronously, so give
    // the kernel a bounded moment.
    let orphans_deadline = now_ns() + 3000 * MS;
    loop {
        let left = marked_processes(&ctx.run_id);
        if left.is_empty() {
            break;
        }
        if now_ns() > orphans_deadline {
            for (pid, cmdline) in &left {
                violations.push(format!(
                    "ORPHAN: process {pid} ({cmdline}) outlived the run"
                ));
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    // No key left: a key of a SIGKILLed distlock (or one whose release could not reach the
    // server) was last renewed before every loop stopped, so it expires within the TTL.
    let keys_deadline = all_stopped + (MAX_TTL_MS + 1000) * MS;
    loop {
        let keys: Vec<String> = redis.cmd(&["KEYS", "*"]);
        if keys.is_empty() {
            break;
        }
        let mut described = Vec::new();
        let mut immortal = false;
        for k in &keys {
            let pttl = redis.pttl(k);
            immortal |= pttl == -1;
            described.push(format!("{k} (PTTL {pttl})"));
        }
        if immortal || now_ns() > keys_deadline {
            violations.push(format!(
                "KEYS LEFT {} after all loops stopped: {}",
                rel(all_stopped, now_ns()),
                described.join(", ")
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    let log = fs::read_to_string(&ctx.log).unwrap_or_default();
    let sections = parse_log(&log);
    let counters: Vec<i64> = ctx
        .counters
        .iter()
        .map(|p| fs::read_to_string(p).unwrap().trim().parse().unwrap())
        .collect();
    let restarts = ctx.restarts.into_inner().unwrap();
    let outages = ctx.outages.into_inner().unwrap();
    let mut checker = Checker {
        t0,
        runs: runs.iter().map(|r| (r.id.as_str(), r)).collect(),
        sections: &sections,
        restarts: &restarts,
        outages: &outages,
        samples: &samples,
        violations,
        notes: Vec::new(),
    };
    checker.check(&counters);

    // Summary.
    let mut exits: BTreeMap<String, usize> = BTreeMap::new();
    for r in &runs {
        *exits.entry(r.exit()).or_default() += 1;
    }
    let mut events = ctx.events.into_inner().unwrap();
    events.sort_by_key(|e| e.0);
    let mut summary = String::new();
    let _ = writeln!(
        summary,
        "chaos: {} runs, {} sections ({} completed), {} monitor samples, {} restarts, wall {:.1}s; exits {exits:?}",
        runs.len(),
        sections.len(),
        sections.values().filter(|x| x.ended).count(),
        samples.len(),
        restarts.len(),
        (now_ns() - t0) as f64 / 1e9
    );
    for n in &checker.notes {
        let _ = writeln!(summary, "chaos: {n}");
    }
    print!("{summary}");
    if !checker.violations.is_empty() {
        let mut report = plan.header();
        let _ = writeln!(
            report,
            "{} violation(s) of the safety contract",
            checker.violations.len()
        );
        for v in checker.violations.iter().take(40) {
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
