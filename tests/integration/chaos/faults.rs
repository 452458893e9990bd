//! Faults, as the plan schedules them: the servers' (SIGSTOP/SIGCONT, SIGKILL and a restart,
//! without persistence on one server, with it on a Redlock's nodes, `CLIENT PAUSE WRITE`) on one
//! thread per lane, and SIGKILLs of processes (a holder's command, a distlock, a distlock
//! waiting in line, a distlock's guard) on another. Each executed fault is logged as an event
//! with its time; server faults are also recorded as outages, and restarts that forget the
//! locks as restarts, the windows the checker excuses. Processes are found through /proc and
//! killed through a pidfd after checking what they are, since pids are recycled quickly.

use std::fs;
use std::sync::Mutex;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::plan::{KEYS, Plan, ProcFault, ServerFault, TTLS_MS, node_name};
use super::{Ctx, Live, MS, now_ns, sleep_until};
use crate::topology::Primaries;
use crate::util::lock_key;

/// A restart of a server that forgets its locks, as executed: SIGKILL sent, server reaped, new
/// server answering.
pub(super) struct Restart {
    pub(super) kill_sent: u64,
    /// The old server was reaped: its data (every lock) is gone by then.
    pub(super) dead: u64,
    pub(super) up: u64,
}

/// Execute one lane of the server fault schedule (the thread ends after the lane's last fault
/// has ended). The servers are locked only to signal, kill, restart or pause one, never while a
/// fault lasts; `busy` (one per node) keeps two lanes off the same node at once, so the faulted
/// nodes are at most as many as the lanes: with 2 lanes over 5 nodes, a majority is always up.
pub(super) fn server_faults(
    servers: &Mutex<Primaries>,
    busy: &[Mutex<()>],
    lane: usize,
    plan: &Plan,
    ctx: &Ctx,
) {
    let persistent = plan.topology.persistent();
    for hit in &plan.server[lane] {
        sleep_until(ctx.t0 + hit.at * MS);
        let node = hit.node;
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
                        dead,
                        up,
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

/// Execute the process fault schedule: each fault picks its victim among the live distlocks
/// (or their children, or those waiting in a line) at its time; with none to pick, it is
/// logged as such.
pub(super) fn process_faults(plan: &Plan, ctx: &Ctx) {
    for &(at, fault) in &plan.procs {
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
                    continue;
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
                    continue;
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
                let Some((ci, command)) = pick_child(&live, pick, command_of) else {
                    drop(live);
                    ctx.event(now, "no holder's command to SIGKILL".into());
                    ctx.count("no victim");
                    continue;
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
            ProcFault::Guard { pick } => {
                let Some((ci, guard)) = pick_child(&live, pick, guard_of) else {
                    drop(live);
                    ctx.event(now, "no guard to SIGKILL".into());
                    ctx.count("no victim");
                    continue;
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
