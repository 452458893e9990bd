//! Faults, as the plan schedules them: the servers' (SIGSTOP/SIGCONT, SIGKILL and a restart,
//! without persistence on one server, with it on a Redlock's nodes, `CLIENT PAUSE WRITE`) on one
//! thread per lane, and the processes' (SIGKILL of a holder's command, a distlock, a distlock
//! waiting in line, a distlock's guard; SIGSTOP of a holding distlock alone, continued later on
//! a thread of its own) on another. Each executed fault is logged as an event with its time;
//! server faults are also recorded as outages, and restarts that forget the locks as restarts,
//! the windows the checker excuses. Processes are found through /proc and killed through a
//! pidfd after checking what they are, since pids are recycled quickly (a distlock in the
//! table of live ones is not reaped yet: its pid is safe to signal while the table is locked).
//!
//! A stopped distlock exits only after its SIGCONT, long after its lock passed on: its exit
//! bounds nothing. So while it is stopped, the test watches its command's process group and
//! records when no live process was left in it (see [`group_death`]): the checker's upper
//! bound of the group's death for that run.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::Servers;
use super::plan::{KEYS, MAX_TTL_MS, Plan, ProcFault, ServerFault, TTLS_MS, node_name};
use super::{Ctx, Live, MS, now_ns, sleep_until};
use crate::fixtures::topology::{Cluster, Sentinel};
use crate::fixtures::{Redis, lock_key};

/// A restart of a server that forgets its locks, as executed: SIGKILL sent, server reaped, new
/// server answering. Or, on a Sentinel deployment, a failover that may lose writes (see
/// `what`): the same window, read as below.
pub(super) struct Restart {
    pub(super) kill_sent: u64,
    /// From this instant on, a lock may be granted by a server that lacks an older grant (a
    /// restarted server; a promoted replica): the restart's `dead`, a failover's start.
    pub(super) from: u64,
    /// The old server was reaped: its data (every lock) is gone by then. For a failover: the
    /// old primary was dead or demoted (`REPLICAOF` answered), so no write to it can have been
    /// confirmed later.
    pub(super) dead: u64,
    pub(super) up: u64,
    /// What happened, for the notes ("restart", "SENTINEL FAILOVER", ...).
    pub(super) what: &'static str,
}

/// Execute one lane of the server fault schedule (the thread ends after the lane's last fault
/// has ended). The servers are locked only to signal, kill, restart or pause one, never while a
/// fault lasts; `busy` (one per node) keeps two lanes off the same node at once, so the faulted
/// nodes are at most as many as the lanes: with 2 lanes over 5 nodes, a majority is always up.
pub(super) fn server_faults(
    servers: &Mutex<Servers>,
    busy: &[Mutex<()>],
    lane: usize,
    plan: &Plan,
    ctx: &Ctx,
) {
    let persistent = plan.topology.persistent();
    for hit in &plan.server[lane] {
        sleep_until(ctx.t0 + hit.at * MS);
        if now_ns() > ctx.launch_until {
            // A lane that ran late: the loops have stopped, nobody is left to attack.
            break;
        }
        if plan.topology.replicated() && replicated_fault(servers, hit.fault, ctx) {
            continue;
        }
        // On a Sentinel deployment or a Cluster, stops and pauses hit the primary (of the
        // key's slot).
        let node = match &*servers.lock().unwrap() {
            Servers::Sentinel(topo) => topo.primary(),
            Servers::Cluster(topo) => match hit.fault {
                ServerFault::Failover { key, .. } | ServerFault::Migrate { key, .. } => {
                    topo.node_for_slot(Cluster::slot_of(&lock_key(KEYS[key].name)))
                }
                _ => topo.node_for_slot(Cluster::slot_of(&lock_key(KEYS[0].name))),
            },
            Servers::Primaries(_) => hit.node,
        };
        let name = node_name(plan.topology, node);
        // The other lane may hold the node a little past its planned end (a restart takes
        // longer than planned): this one waits.
        let _busy = busy[node].lock().unwrap();
        match hit.fault {
            ServerFault::Stop { ms } => {
                servers.lock().unwrap().stop(node);
                let stopped = now_ns();
                ctx.event(stopped, format!("{name} SIGSTOP ({ms}ms)"));
                ctx.count(if ms < TTLS_MS[0] {
                    "SIGSTOP < TTL"
                } else {
                    "SIGSTOP > TTL"
                });
                sleep_until(stopped + ms * MS);
                servers.lock().unwrap().cont(node);
                let resumed = now_ns();
                ctx.event(resumed, format!("{name} SIGCONT"));
                ctx.outages.lock().unwrap().push((stopped, resumed));
            }
            ServerFault::Restart { down_ms } => {
                let kill_sent = now_ns();
                servers.lock().unwrap().kill(node);
                let dead = now_ns();
                ctx.event(
                    dead,
                    format!(
                        "{name} SIGKILLed{}",
                        if persistent {
                            " (its data is on disk)"
                        } else {
                            " (every lock forgotten)"
                        }
                    ),
                );
                ctx.count("restart");
                sleep_until(dead + down_ms * MS);
                servers.lock().unwrap().restart(node);
                let up = now_ns();
                ctx.event(
                    up,
                    format!(
                        "{name} restarted, {}",
                        if persistent { "with its data" } else { "empty" }
                    ),
                );
                ctx.outages.lock().unwrap().push((kill_sent, up));
                if !persistent {
                    ctx.restarts.lock().unwrap().push(Restart {
                        kill_sent,
                        from: dead,
                        dead,
                        up,
                        what: "restart",
                    });
                }
            }
            ServerFault::Pause { ms } => {
                let paused = now_ns();
                servers.lock().unwrap().node(node).cmd::<String>(&[
                    "CLIENT",
                    "PAUSE",
                    &ms.to_string(),
                    "WRITE",
                ]);
                ctx.event(paused, format!("{name} CLIENT PAUSE {ms} WRITE"));
                ctx.count("CLIENT PAUSE");
                sleep_until(paused + ms * MS);
                servers
                    .lock()
                    .unwrap()
                    .node(node)
                    .cmd::<String>(&["CLIENT", "UNPAUSE"]);
                let unpaused = now_ns();
                ctx.event(unpaused, format!("{name} CLIENT UNPAUSE"));
                ctx.outages.lock().unwrap().push((paused, unpaused));
            }
            _ => unreachable!(
                "{:?} is a fault of a Sentinel deployment or a Cluster",
                hit.fault
            ),
        }
    }
}

/// How many clients `node` has blocked (`INFO clients`: `blocked_clients`), 0 if it does not
/// answer.
fn blocked_clients(node: &Redis) -> u64 {
    node.try_cmd::<String>(&["INFO", "clients"])
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("blocked_clients:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Wait (at most 2s) until `node` has a client blocked (a waiter on its doorbell), so that
/// the failover or migration that follows happens under a blocked wait. Returns how many
/// were blocked when the fault started.
fn await_blocked(node: &Redis) -> u64 {
    let until = now_ns() + 2000 * MS;
    loop {
        let n = blocked_clients(node);
        if n > 0 || now_ns() > until {
            return n;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Count a failover or migration, and whether a waiter was blocked when it started.
fn count_blocked(ctx: &Ctx, at: u64, what: &'static str, with: &'static str, blocked: u64) {
    ctx.count(what);
    if blocked > 0 {
        ctx.count(with);
    }
    ctx.event(
        at,
        format!("{what} starts, {blocked} client(s) blocked on the node"),
    );
}

/// Make `old` a replica of `new` (both data nodes of a Sentinel deployment): from the reply
/// on, it refuses writes. Returns the instant of the reply.
fn demote(topo: &Sentinel, old: usize, new: usize) -> u64 {
    let port = topo.node(new).port().to_string();
    topo.node(old).cmd::<()>(&["REPLICAOF", "127.0.0.1", &port]);
    now_ns()
}

/// The faults proper to a Sentinel deployment or a Cluster (failovers, migrations); `false`
/// for a fault that [`server_faults`] executes as on one server (a stop, a pause).
fn replicated_fault(servers: &Mutex<Servers>, fault: ServerFault, ctx: &Ctx) -> bool {
    let mut guard = servers.lock().unwrap();
    match (&mut *guard, fault) {
        (Servers::Sentinel(topo), ServerFault::Failover { linger_ms, .. }) => {
            let old = topo.primary();
            let blocked = await_blocked(topo.node(old));
            let begin = now_ns();
            count_blocked(
                ctx,
                begin,
                "SENTINEL FAILOVER",
                "SENTINEL FAILOVER, waiter blocked",
                blocked,
            );
            let new = topo.failover();
            let named = now_ns();
            sleep_until(named + linger_ms * MS);
            let dead = demote(topo, old, new);
            ctx.event(
                dead,
                format!(
                    "node {new} promoted (named at {}), node {old} demoted",
                    super::rel(ctx.t0, named)
                ),
            );
            topo.settle_now();
            lost_writes(ctx, begin, dead, named, "SENTINEL FAILOVER");
        }
        (Servers::Sentinel(topo), ServerFault::KillPrimary { down_ms }) => {
            let old = topo.primary();
            let addr = topo.primary_addr();
            let blocked = await_blocked(topo.node(old));
            let kill_sent = now_ns();
            count_blocked(
                ctx,
                kill_sent,
                "SIGKILL of the primary",
                "SIGKILL of the primary, waiter blocked",
                blocked,
            );
            topo.kill(old);
            let dead = now_ns();
            let new = topo.wait_new_primary(&addr);
            let named = now_ns();
            ctx.event(named, format!("node {new} promoted, node {old} dead"));
            lost_writes(ctx, kill_sent, dead, named, "SIGKILL of the primary");
            sleep_until(dead + down_ms * MS);
            topo.restart(old);
            // Restarted as it was configured: node 0 as a primary, empty, until demoted. No
            // window: the sentinels never name it, so distlock counts no write to it.
            let demoted = demote(topo, old, new);
            ctx.event(demoted, format!("node {old} restarted empty and demoted"));
            topo.settle_now();
        }
        (Servers::Sentinel(topo), ServerFault::StopPrimary { ms, linger_ms }) => {
            let old = topo.primary();
            let addr = topo.primary_addr();
            let blocked = await_blocked(topo.node(old));
            count_blocked(
                ctx,
                now_ns(),
                "SIGSTOP of the primary until failed over",
                "SIGSTOP of the primary, waiter blocked",
                blocked,
            );
            topo.stop(old);
            let stopped = now_ns();
            sleep_until(stopped + ms * MS);
            let new = topo.wait_new_primary(&addr);
            let named = now_ns();
            topo.cont(old);
            let resumed = now_ns();
            sleep_until(resumed + linger_ms * MS);
            let dead = demote(topo, old, new);
            ctx.event(
                dead,
                format!(
                    "node {new} promoted (named at {}), node {old} SIGCONTed at {} and demoted",
                    super::rel(ctx.t0, named),
                    super::rel(ctx.t0, resumed)
                ),
            );
            lost_writes(
                ctx,
                stopped,
                dead,
                named,
                "SIGSTOP of the primary until failed over",
            );
            topo.settle_now();
        }
        (Servers::Cluster(topo), ServerFault::Failover { key, .. }) => {
            let slot = Cluster::slot_of(&lock_key(KEYS[key].name));
            let old = topo.node_for_slot(slot);
            let blocked = await_blocked(topo.node(old));
            count_blocked(
                ctx,
                now_ns(),
                "CLUSTER FAILOVER",
                "CLUSTER FAILOVER, waiter blocked",
                blocked,
            );
            let from = now_ns();
            let new = topo.failover(old);
            ctx.ambiguous.lock().unwrap().push((from, now_ns()));
            ctx.event(
                now_ns(),
                format!(
                    "node {new} took over from node {old} (slot {slot} of {})",
                    KEYS[key].name
                ),
            );
        }
        (Servers::Cluster(topo), ServerFault::Migrate { key, open_ms }) => {
            let slot = Cluster::slot_of(&lock_key(KEYS[key].name));
            let from = topo.node_for_slot(slot);
            let primaries = topo.primaries();
            let at = primaries.iter().position(|&p| p == from).unwrap_or(0);
            let to = primaries[(at + 1) % primaries.len()];
            let blocked = await_blocked(topo.node(from));
            count_blocked(
                ctx,
                now_ns(),
                "slot migration",
                "slot migration, waiter blocked",
                blocked,
            );
            topo.begin_migration(slot, from, to);
            std::thread::sleep(Duration::from_millis(open_ms));
            let moved = topo.migrate_keys(slot, from, to);
            topo.end_migration(slot, from, to);
            ctx.event(
                now_ns(),
                format!(
                    "slot {slot} of {} moved from node {from} to node {to} ({moved} keys)",
                    KEYS[key].name
                ),
            );
        }
        _ => return false,
    }
    true
}

/// A window in which Redis may lose acknowledged writes (see [`Restart`]), from `from` to
/// `dead`, the old primary's death or demotion, or `named`, the moment the test saw every
/// sentinel name the new primary, whichever came first. Past `named` the old primary may still
/// accept writes (it lingers), but none that distlock may count: a write counts only if the
/// sentinels, asked before it was sent, named the server it went to (a renewal whose check no
/// sentinel answered does not count), and its kill deadline is anchored before that question.
/// So a command that runs past `named` + its TTL on a lock of the old primary is a violation.
fn lost_writes(ctx: &Ctx, from: u64, dead: u64, named: u64, what: &'static str) {
    ctx.outages.lock().unwrap().push((from, dead.max(named)));
    ctx.restarts.lock().unwrap().push(Restart {
        kill_sent: from,
        from,
        dead: dead.min(named),
        up: named,
        what,
    });
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

/// The state letter of a process (`R`, `S`, `T`, `Z`...), if it exists.
fn state_of(pid: i32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(
        stat.rsplit(')')
            .next()?
            .split_whitespace()
            .next()?
            .to_owned(),
    )
}

/// Whether `pid` is the live (not zombie) guard of distlock `parent`.
fn is_guard_of(pid: i32, parent: Pid) -> bool {
    fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c == "distlock-guard\n")
        && ppid_pgrp_sid(pid).is_some_and(|(ppid, _, _)| ppid == parent.as_raw())
        && state_of(pid).is_some_and(|s| s != "Z" && s != "X")
}

/// The guard of a distlock.
fn guard_of(distlock: Pid) -> Option<Pid> {
    child_of(distlock, is_guard_of)
}

/// The command of a holding distlock that has a live guard (one the test killed may not be
/// replaced yet; a distlock stopped without a guard would leave its command to itself, which
/// the guarantees do not cover).
fn guarded_command_of(distlock: Pid) -> Option<Pid> {
    guard_of(distlock)?;
    command_of(distlock)
}

/// The live (not zombie) processes of process group `group`, from /proc.
fn live_members(group: i32) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            ppid_pgrp_sid(pid).is_some_and(|(_, pgrp, _)| pgrp == group)
                && state_of(pid).is_some_and(|s| s != "Z" && s != "X")
        })
        .collect()
}

/// Watch process group `group` until no live process is left in it, or until `until`: when
/// that was first seen. The members found in /proc are watched through pidfds (readable once a
/// process has exited, reaped or not: its distlock, the reaper, may be stopped); once they have
/// all exited, /proc is looked at again for members they forked meanwhile. The instant returned
/// is after the last look that found none: an upper bound of the group's death. (A pid recycled
/// between a look and its pidfd only makes the bound later.)
fn group_death(group: i32, until: u64) -> Option<u64> {
    loop {
        let members = live_members(group);
        if members.is_empty() {
            return Some(now_ns());
        }
        let fds: Vec<OwnedFd> = members
            .into_iter()
            .filter_map(|pid| {
                // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
                let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
                // SAFETY: a fresh descriptor that nothing else owns.
                (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
            })
            .collect();
        loop {
            let now = now_ns();
            if now >= until {
                return None;
            }
            let mut polled: Vec<libc::pollfd> = fds
                .iter()
                .map(|fd| libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            let ms = ((until - now) / MS).clamp(1, 50) as libc::c_int;
            // SAFETY: `polled` is a valid array of pollfds of that length.
            unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
            if polled.iter().all(|p| p.revents & libc::POLLIN != 0) {
                break;
            }
        }
    }
}

/// A distlock that the test stopped: watch its command's group until its SIGCONT is due at
/// `until`, then continue it (if it is still in the table: a distlock SIGKILLed meanwhile is
/// gone, and its pid may be another process's by now) and record what was seen.
fn continue_later(ctx: &Ctx, ci: usize, id: &str, group: Pid, until: u64) {
    let dead = group_death(group.as_raw(), until);
    sleep_until(until);
    let mut live = ctx.live.lock().unwrap();
    let now = now_ns();
    let what = match live[ci].as_mut().filter(|l| l.id == id) {
        Some(l) => {
            let _ = kill(l.pid, Signal::SIGCONT);
            l.resumed = Some(now);
            l.group_dead = dead;
            format!(
                "SIGCONT distlock {} ({id}); its command's group {}",
                l.pid,
                match (dead, l.stopped) {
                    (Some(d), Some(s)) => format!(
                        "was seen without a live process {:.1}ms after the stop",
                        (d.saturating_sub(s)) as f64 / 1e6
                    ),
                    _ => "still had live processes".into(),
                }
            )
        }
        None => format!("the distlock of {id} had ended before its SIGCONT was due"),
    };
    drop(live);
    ctx.event(now, what);
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

/// Execute the process fault schedule: each fault picks its victim among the live distlocks
/// (or their children, or those waiting in a line) at its time; with none to pick, it is
/// logged as such. A stopped distlock is continued by a thread of its own, so that the schedule
/// goes on meanwhile.
pub(super) fn process_faults(plan: &Plan, ctx: &Ctx) {
    std::thread::scope(|scope| {
        for &(at, fault) in &plan.procs {
            process_fault(scope, at, fault, ctx);
        }
    });
}

fn process_fault<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    at: u64,
    fault: ProcFault,
    ctx: &'s Ctx,
) {
    {
        sleep_until(ctx.t0 + at * MS);
        // Who waits in line is Redis's to say: ask before taking the table (a stopped server
        // holds the answer up for a bounded moment, and then there is no victim).
        let lines = match fault {
            ProcFault::Waiter { .. } => waiters_in_line(&ctx.urls[0]),
            _ => None,
        };
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
                    ctx.count("no victim");
                    return;
                }
                let ci = candidates[(pick % candidates.len() as u64) as usize];
                let l = live[ci].as_mut().unwrap();
                let _ = kill(l.pid, Signal::SIGKILL);
                l.killed_distlock = Some(now);
                let what = format!("SIGKILL distlock {} ({})", l.pid, l.id);
                drop(live);
                ctx.event(now, what);
                ctx.count("SIGKILL distlock");
            }
            ProcFault::Waiter { pick } => {
                // Only pids in the table: not reaped yet, so not recycled.
                let candidates: Vec<(usize, usize, usize)> = lines
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(key, place, pid)| {
                        let ci = live.iter().position(|l| {
                            l.as_ref().is_some_and(|l| {
                                l.pid.as_raw() == pid && l.killed_distlock.is_none()
                            })
                        })?;
                        Some((ci, key, place))
                    })
                    .collect();
                let first: Vec<_> = candidates.iter().filter(|c| c.2 == 0).collect();
                let from: Vec<_> = if pick % 2 == 1 && !first.is_empty() {
                    first
                } else {
                    candidates.iter().collect()
                };
                if from.is_empty() {
                    drop(live);
                    ctx.event(now, "no distlock waiting in line to SIGKILL".into());
                    ctx.count("no victim");
                    return;
                }
                let &(ci, key, place) = from[(pick / 2 % from.len() as u64) as usize];
                let l = live[ci].as_mut().unwrap();
                let _ = kill(l.pid, Signal::SIGKILL);
                let in_line = format!("#{} in line for {}", place + 1, KEYS[key].name);
                let what = format!("SIGKILL distlock {} ({}), {in_line}", l.pid, l.id);
                l.killed_distlock = Some(now);
                l.killed_in_line = Some(in_line);
                drop(live);
                ctx.event(now, what);
                ctx.count("SIGKILL waiter in line");
            }
            ProcFault::Child { pick } => {
                let Some((ci, command)) = pick_child(&live, pick, command_of, false) else {
                    drop(live);
                    ctx.event(now, "no holder's command to SIGKILL".into());
                    ctx.count("no victim");
                    return;
                };
                let l = live[ci].as_mut().unwrap();
                let what = if kill_checked(command, |c| is_command_of(c, l.pid)) {
                    l.killed_child = Some(now);
                    ctx.count("SIGKILL command");
                    format!("SIGKILL command {command} of {} (distlock {})", l.id, l.pid)
                } else {
                    ctx.count("no victim");
                    format!("command {command} of {} was gone already", l.id)
                };
                drop(live);
                ctx.event(now, what);
            }
            ProcFault::StopDistlock { pick, ms } => {
                let Some((ci, command)) = pick_holder_to_stop(&live, pick) else {
                    drop(live);
                    ctx.event(now, "no holding distlock with a guard to SIGSTOP".into());
                    ctx.count("no victim");
                    return;
                };
                let l = live[ci].as_mut().unwrap();
                let _ = kill(l.pid, Signal::SIGSTOP);
                l.stopped = Some(now);
                let what = format!(
                    "SIGSTOP distlock {} ({}) alone for {ms}ms, holding (command {command})",
                    l.pid, l.id
                );
                let id = l.id.clone();
                drop(live);
                ctx.event(now, what);
                ctx.count("SIGSTOP distlock > TTL");
                scope.spawn(move || continue_later(ctx, ci, &id, command, now + ms * MS));
            }
            ProcFault::Guard { pick } => {
                let Some((ci, guard)) = pick_child(&live, pick, guard_of, true) else {
                    drop(live);
                    ctx.event(now, "no guard to SIGKILL".into());
                    ctx.count("no victim");
                    return;
                };
                let l = live[ci].as_ref().unwrap();
                let what = if kill_checked(guard, |g| is_guard_of(g, l.pid)) {
                    ctx.count("SIGKILL guard");
                    format!("SIGKILL guard {guard} of {} (distlock {})", l.id, l.pid)
                } else {
                    ctx.count("no victim");
                    format!("guard {guard} of {} was gone already", l.id)
                };
                drop(live);
                ctx.event(now, what);
            }
        }
    }
}

/// The distlocks waiting in a line, as Redis has them: (key, place from 0, distlock's pid),
/// from each key's `:queue` (the order) and `:waiters` (their metadata, with the pid). On a
/// connection of its own with short timeouts: a stopped or restarting server gives None.
fn waiters_in_line(url: &str) -> Option<Vec<(usize, usize, i32)>> {
    let client = redis::Client::open(url).ok()?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_millis(300))
        .ok()?;
    con.set_read_timeout(Some(Duration::from_millis(300)))
        .ok()?;
    con.set_write_timeout(Some(Duration::from_millis(300)))
        .ok()?;
    let mut found = Vec::new();
    for (k, key) in KEYS.iter().enumerate() {
        let base = lock_key(key.name);
        let line: Vec<String> = redis::cmd("ZRANGE")
            .arg(format!("{base}:queue"))
            .arg(0)
            .arg(-1)
            .query(&mut con)
            .ok()?;
        for (place, token) in line.iter().enumerate() {
            let info: Option<String> = redis::cmd("HGET")
                .arg(format!("{base}:waiters"))
                .arg(token)
                .query(&mut con)
                .ok()?;
            let pid = info
                .and_then(|json| serde_json::from_str::<serde_json::Value>(&json).ok())
                .and_then(|v| v.get("pid")?.as_str()?.parse().ok());
            if let Some(pid) = pid {
                found.push((k, place, pid));
            }
        }
    }
    Some(found)
}

/// A holding distlock to stop, chosen by `pick`: the contender's index and its command. One
/// with a live guard, never stopped before (see [`pick_child`]), preferably one whose command
/// holds for longer than any TTL (it will run into its deadline), else for 200ms or more: most
/// hold for less, and would mostly end on their own before anything is at stake.
fn pick_holder_to_stop(live: &[Option<Live>], pick: u64) -> Option<(usize, Pid)> {
    let candidates: Vec<(usize, Pid, u8)> = live
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let l = l.as_ref()?;
            if l.killed_distlock.is_some() || l.stopped.is_some() {
                return None;
            }
            let tier = match l.hold_ms {
                h if h > MAX_TTL_MS => 2,
                h if h >= 200 => 1,
                _ => 0,
            };
            guarded_command_of(l.pid).map(|c| (i, c, tier))
        })
        .collect();
    let best = candidates.iter().map(|c| c.2).max()?;
    let from: Vec<&(usize, Pid, u8)> = candidates.iter().filter(|c| c.2 == best).collect();
    let &(ci, command, _) = from[(pick % from.len() as u64) as usize];
    Some((ci, command))
}

/// One of the live distlocks' children that `find` finds (their commands, or their guards),
/// chosen by `pick`: the contender's index and the child's pid. With `not_stopped`, a distlock
/// that the test has stopped (and not continued yet) is no candidate, nor one it stopped
/// before: stopped twice, or stopped and its guard killed, a distlock would leave its command
/// to itself, which the guarantees do not cover.
fn pick_child(
    live: &[Option<Live>],
    pick: u64,
    find: fn(Pid) -> Option<Pid>,
    not_stopped: bool,
) -> Option<(usize, Pid)> {
    let candidates: Vec<(usize, Pid)> = live
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let l = l.as_ref()?;
            if l.killed_distlock.is_some() || (not_stopped && l.stopped.is_some()) {
                return None;
            }
            find(l.pid).map(|c| (i, c))
        })
        .collect();
    (!candidates.is_empty()).then(|| candidates[(pick % candidates.len() as u64) as usize])
}
