//! The guard against real processes: the group known from the start, deadlines passed and
//! moved, distlock killing or dying, replacements, a clogged line, a forgotten group.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::*;
use crate::child::spawn::{SpawnSpec, resolve, spawn};
use crate::clock::Moment;
use crate::lock::Validity;
use crate::renew::Deadlines;

impl Guard {
    /// What distlock's death does to the guard: its end of the pipe closes, unannounced.
    fn orphan(&mut self) {
        self.line.wire().pipe = None;
    }
}

impl line::Wire {
    /// Whether the guard has read everything on its pipe (FIONREAD works on either end).
    fn pipe_is_drained(&self) -> bool {
        use std::os::fd::AsRawFd;
        let Some(pipe) = self.pipe.as_ref() else {
            return true;
        };
        let mut waiting: libc::c_int = 0;
        // SAFETY: FIONREAD on an open pipe descriptor writes one int, to a local that outlives
        // the call.
        let done = unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &raw mut waiting) };
        done == 0 && waiting == 0
    }
}

/// The longest any wait in these tests may take.
const BOUND: Duration = Duration::from_secs(10);

/// Whether any live (not zombie) process is in process group `group`.
fn group_alive(group: i32) -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .any(|stat| {
            // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.first() != Some(&"Z") && fields.get(2) == Some(&group.to_string().as_str())
        })
}

/// `sh -c script` in a group of its own that names itself to `guard`.
fn spawn_sh(guard: &Guard, script: &str) -> Pid {
    let sh = resolve(std::ffi::OsStr::new("sh")).unwrap();
    let argv: Vec<OsString> = ["sh", "-c", script].iter().map(OsString::from).collect();
    spawn(SpawnSpec {
        program: &sh,
        argv: &argv,
        env: vec![],
        unset: &[],
        take_terminal: false,
        reset_signals: &[libc::SIGPIPE],
        guard: guard.group_slot(),
    })
    .unwrap()
}

/// How `pid` (a child of this process) ends, within `BOUND`; `cleanup` is killed on failure.
fn ended(pid: Pid, cleanup: Pid) -> WaitStatus {
    let deadline = Instant::now() + BOUND;
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)).unwrap() {
            WaitStatus::StillAlive if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            WaitStatus::StillAlive => {
                let _ = nix::sys::signal::killpg(cleanup, Signal::SIGKILL);
                panic!("process {pid} did not end");
            }
            other => return other,
        }
    }
}

/// That the command's group leader `group` dies of `signal`, within `BOUND`.
#[track_caller]
fn assert_dies_of(group: Pid, signal: Signal) {
    assert_eq!(
        ended(group, group),
        WaitStatus::Signaled(group, signal, false)
    );
}

/// That the guard process `guard` exits with `code` (what it did), within `BOUND`; `group`
/// is killed if it does not.
#[track_caller]
fn assert_guard_exits(guard: Pid, code: i32, group: Pid) {
    assert_eq!(ended(guard, group), WaitStatus::Exited(guard, code));
}

fn still_running(pid: Pid) -> bool {
    waitpid(pid, Some(WaitPidFlag::WNOHANG)).unwrap() == WaitStatus::StillAlive
}

/// The guard knows the command's group from the command itself, before distlock says
/// anything: when distlock dies the moment the command has started (here: its pipe end is
/// closed right after the spawn, no message sent), the whole group dies, background
/// processes included.
#[test]
fn the_guard_knows_the_group_before_distlock_speaks() {
    let mut guard = Guard::start(&Line::new(Signal::SIGTERM)).unwrap();
    let group = spawn_sh(&guard, "sleep 30 & wait");
    guard.orphan();
    assert_dies_of(group, Signal::SIGKILL);
    let deadline = Instant::now() + BOUND;
    while group_alive(group.as_raw()) {
        assert!(
            Instant::now() < deadline,
            "the command's background process outlived the guard's kill"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_guard_exits(guard.pid(), ORPHANED, group);
}

/// A guard that died before the spawn does not take the command down with it (the command
/// names its group in memory, where nothing can fail or raise a signal).
#[test]
fn a_dead_guard_does_not_kill_the_command() {
    let guard = Guard::start(&Line::new(Signal::SIGTERM)).unwrap();
    kill(guard.pid(), Signal::SIGKILL).unwrap();
    let _ = waitpid(guard.pid(), None);
    let pid = spawn_sh(&guard, "exit 7");
    assert_eq!(waitpid(pid, None).unwrap(), WaitStatus::Exited(pid, 7));
}

/// A deadline that passes without a move: the guard sends the kill signal to the whole
/// group, then SIGKILL at the second deadline to what ignored it, and says so in its exit
/// status. Neither comes before its deadline.
#[test]
fn a_passed_deadline_ends_the_group_with_the_kill_signal_then_sigkill() {
    let line = Line::new(Signal::SIGTERM);
    let guard = Guard::start(&line).unwrap();
    let term = Moment::now() + Duration::from_millis(200);
    line.move_to(term, term + Duration::from_millis(300));
    // sh and its background sleep ignore SIGTERM.
    let group = spawn_sh(&guard, "trap '' TERM; sleep 30 & wait");
    assert_dies_of(group, Signal::SIGKILL);
    assert!(Moment::now() >= term + Duration::from_millis(300));
    assert_guard_exits(guard.pid(), FIRED, group);
    // A group that takes the kill signal dies of it.
    let line = Line::new(Signal::SIGTERM);
    let guard = Guard::start(&line).unwrap();
    let term = Moment::now() + Duration::from_millis(100);
    line.move_to(term, term + Duration::from_secs(5));
    let group = spawn_sh(&guard, "sleep 30");
    assert_dies_of(group, Signal::SIGTERM);
    assert!(Moment::now() >= term);
    assert!(Moment::now() < term + Duration::from_secs(5));
    // Its flag says so at once, before it is done with the group (its SIGKILL is due later).
    assert!(guard.has_fired());
    assert!(still_running(guard.pid()));
    drop(guard);
}

/// Every move of the deadline before it passes spares the command; so does a move that
/// waits in the pipe of a guard that was stopped past the old deadline (it reads its pipe
/// before it looks at the clock).
#[test]
fn a_moved_deadline_spares_the_command_even_when_the_guard_was_stopped() {
    let line = Line::new(Signal::SIGTERM);
    let mut guard = Guard::start(&line).unwrap();
    let first = Moment::now() + Duration::from_millis(300);
    line.move_to(first, first + Duration::from_millis(100));
    let group = spawn_sh(&guard, "sleep 30");
    kill(guard.pid(), Signal::SIGSTOP).unwrap();
    let later = Moment::now() + Duration::from_secs(60);
    line.move_to(later, later + Duration::from_secs(1));
    // Earlier deadlines never move it back.
    line.move_to(first, first);
    while Moment::now() < first + Duration::from_millis(200) {
        // The stop's length is what is under test, not a synchronisation.
        std::thread::sleep(Duration::from_millis(10));
    }
    kill(guard.pid(), Signal::SIGCONT).unwrap();
    // Give a guard that would (wrongly) fire the time to do it.
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        still_running(group),
        "the guard killed a command whose deadline had moved"
    );
    assert!(still_running(guard.pid()));
    guard.disarm();
    assert_guard_exits(guard.pid(), DISARMED, group);
    nix::sys::signal::killpg(group, Signal::SIGKILL).unwrap();
    let _ = waitpid(group, None);
}

/// When distlock kills the group itself, the guard sends no second kill signal: it only
/// backs up the SIGKILL at its deadline.
#[test]
fn when_distlock_kills_the_guard_only_backs_up_its_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("term");
    let line = Line::new(Signal::SIGTERM);
    let guard = Guard::start(&line).unwrap();
    let term = Moment::now() + Duration::from_millis(100);
    line.move_to(term, term + Duration::from_millis(300));
    let group = spawn_sh(
        &guard,
        &format!(
            "trap 'echo TERM >> {}' TERM; while :; do sleep 0.01; done",
            log.display()
        ),
    );
    line.distlock_kills();
    assert_dies_of(group, Signal::SIGKILL);
    assert!(!log.exists(), "the guard sent the kill signal too");
    assert!(!guard.has_fired());
    assert_guard_exits(guard.pid(), BACKED_UP, group);
}

/// A replacement guard gets the group and the latest deadline before it runs: it fires on
/// that deadline without a word from anyone after its start.
#[test]
fn a_replacement_gets_the_group_and_the_latest_deadline_first() {
    let line = Line::new(Signal::SIGTERM);
    let first = Guard::start(&line).unwrap();
    let group = spawn_sh(&first, "sleep 30");
    let term = Moment::now() + Duration::from_millis(300);
    line.move_to(term, term + Duration::from_secs(5));
    kill(first.pid(), Signal::SIGKILL).unwrap();
    let _ = waitpid(first.pid(), None);
    let second = Guard::start_watching(&line, group).unwrap();
    // The first guard's end does not disarm its replacement.
    drop(first);
    assert_dies_of(group, Signal::SIGTERM);
    assert!(Moment::now() >= term);
    assert_guard_exits(second.pid(), FIRED, group);
}

/// A guard that does not read its pipe (stopped) for thousands of messages is reported,
/// and never blocks the writer.
#[test]
fn a_guard_that_does_not_read_clogs_its_line_without_blocking_it() {
    let line = Line::new(Signal::SIGTERM);
    let guard = Guard::start(&line).unwrap();
    kill(guard.pid(), Signal::SIGSTOP).unwrap();
    let start = Moment::now() + Duration::from_secs(60);
    let mut n = 0;
    while !line.take_clogged() {
        n += 1;
        assert!(n < 100_000, "a 64 KiB pipe took {n} messages");
        let at = start + Duration::from_millis(n);
        line.move_to(at, at);
    }
    assert!(n > 3000, "clogged after {n} messages");
    kill(guard.pid(), Signal::SIGKILL).unwrap();
    let _ = waitpid(guard.pid(), None);
}

/// The guard's deadlines are distlock's own, but for a head start on the kill signal (so
/// that a healthy distlock is the one to send it): never earlier, and the SIGKILL deadline
/// to the instant. Later validities move them; earlier ones never move them back.
#[test]
fn the_guard_holds_distlocks_deadlines_with_a_head_start_on_the_kill_signal() {
    let line = Line::new(Signal::SIGTERM);
    let deadlines = Deadlines {
        ttl: Duration::from_secs(3),
        grace: Duration::from_millis(600),
    };
    let t0 = Moment::now();
    let v = Validity {
        anchor: t0,
        ttl: Duration::from_secs(3),
    };
    line.move_deadline(&deadlines, v);
    let held = line.wire().deadline.unwrap();
    assert_eq!(held.kill, deadlines.kill_at(v));
    assert_eq!(held.term, deadlines.term_at(v) + Duration::from_millis(50));
    let later = Validity {
        anchor: t0 + Duration::from_secs(1),
        ..v
    };
    line.move_deadline(&deadlines, later);
    line.move_deadline(&deadlines, v);
    assert_eq!(line.wire().deadline.unwrap().kill, deadlines.kill_at(later));
    // A short grace: a quarter of it; none: none.
    assert_eq!(
        head_start(Duration::from_millis(100)),
        Duration::from_millis(25)
    );
    assert_eq!(head_start(Duration::ZERO), Duration::ZERO);
}

/// A group forgotten (distlock saw it empty) is never signalled, whatever the deadline.
#[test]
fn a_forgotten_group_is_not_signalled() {
    let line = Line::new(Signal::SIGTERM);
    let mut guard = Guard::start(&line).unwrap();
    let term = Moment::now() + Duration::from_millis(100);
    line.move_to(term, term);
    let group = spawn_sh(&guard, "sleep 30");
    guard.group_gone();
    while Moment::now() < term + Duration::from_millis(200) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(still_running(group));
    assert!(still_running(guard.pid()));
    guard.disarm();
    assert_guard_exits(guard.pid(), DISARMED, group);
    nix::sys::signal::killpg(group, Signal::SIGKILL).unwrap();
    let _ = waitpid(group, None);
}

/// Deadlines that passed before the command named its group (distlock stopped between the
/// grant and the spawn): the guard, finding no group at its deadline, looks again every
/// millisecond, and ends the group as soon as the command names it.
#[test]
fn a_deadline_passed_before_the_group_is_named_ends_the_group_once_named() {
    let line = Line::new(Signal::SIGKILL);
    let guard = Guard::start(&line).unwrap();
    let now = Moment::now();
    line.move_to(now, now);
    // The guard has read the passed deadline, found no group, and sleeps: it cannot fire yet.
    let deadline = Instant::now() + BOUND;
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", guard.pid())).unwrap();
        let state = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().chars().next());
        if state == Some(Some('S')) && line.wire().pipe_is_drained() {
            break;
        }
        assert!(Instant::now() < deadline, "the guard never went to sleep");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(still_running(guard.pid()));
    let group = spawn_sh(&guard, "sleep 30 & wait");
    assert_dies_of(group, Signal::SIGKILL);
    assert_guard_exits(guard.pid(), FIRED, group);
}
