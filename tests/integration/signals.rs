//! Signals: while waiting, while the command runs, distlock itself killed, an interactive
//! command on a real pseudo-terminal (Ctrl-C once, reading the terminal, Ctrl-Z and resume),
//! and distlock, its guard, or both stopped.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::fixtures::*;

fn pid_of(child: &std::process::Child) -> Pid {
    Pid::from_raw(child.id() as i32)
}

fn interrupted_while_waiting(mode: &str) {
    let redis = Redis::start();
    let key = lock_key("wait-int");
    redis.cmd::<String>(&["SET", &key, "holder", "PX", "60000"]);
    let waiter = distlock(&redis)
        .args([
            "run",
            "-k",
            "wait-int",
            "--wait-mode",
            mode,
            "--",
            "echo",
            "ran",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Either way of waiting takes a place in line.
    wait_until("the waiter to take its place in line", || {
        redis.in_line("wait-int") == 1
    });
    kill(pid_of(&waiter), Signal::SIGINT).unwrap();
    let out = finish(waiter);
    assert_eq!(
        signal_of(&out),
        Some(libc::SIGINT),
        "{:?} {}",
        out.status,
        stderr(&out)
    );
    assert!(out.stdout.is_empty(), "the command must not run");
    assert!(
        stderr(&out).contains("interrupted by SIGINT while waiting"),
        "{}",
        stderr(&out)
    );
    assert_eq!(redis.get(&key).as_deref(), Some("holder"));
    // Nothing of the waiter's is left: its place in line went with it. (The fence counter is
    // the one key that outlives a lock, by design: fences never go back.)
    let mut keys: Vec<String> = redis.cmd(&["KEYS", "*"]);
    keys.sort();
    let expected = vec![key.clone(), format!("{key}:fence")];
    assert_eq!(keys, expected, "nothing of the waiter's is left");
}

#[test]
fn sigint_while_waiting_notify() {
    interrupted_while_waiting("notify");
}

#[test]
fn sigint_while_waiting_spin() {
    interrupted_while_waiting("spin");
}

#[test]
fn sigterm_is_forwarded_once_and_the_childs_status_returned() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let holder = distlock(&redis)
        .args(["run", "-k", "fwd", "--", "sh", "-c"])
        .arg(format!(
            "trap 'echo TERM >> {log}' TERM; echo $$ > {pid}; while [ ! -e {stop} ]; do sleep 0.02; done; exit 5",
            log = dir.str("log"),
            pid = dir.str("pid"),
            stop = dir.str("stop"),
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    read_pid(&dir.path("pid"));
    kill(pid_of(&holder), Signal::SIGTERM).unwrap();
    wait_for_file(&dir.path("log"));
    std::fs::write(dir.path("stop"), "").unwrap();
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(dir.path("log")).unwrap(), "TERM\n");
    assert!(!redis.exists(&lock_key("fwd")));
}

/// PDEATHSIG takes the direct child; the guard takes what it started (here `sleep`, run by sh in
/// a grandchild), so nothing runs on without the lock.
#[test]
fn the_command_and_its_children_die_when_distlock_is_sigkilled() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let (holder, child, grandchild) = holder_with_a_background_process(&redis, &dir, "orphan");
    kill(pid_of(&holder), Signal::SIGKILL).unwrap();
    finish(holder);
    wait_dead(child);
    wait_dead(grandchild);
}

/// A distlock holding `key` for `sh`, which runs `sleep` in the background and waits for it:
/// (distlock, sh, sleep), once both have started. distlock's stderr is piped.
fn holder_with_a_background_process(
    redis: &Redis,
    dir: &Scratch,
    key: &str,
) -> (std::process::Child, Pid, Pid) {
    let holder = distlock(redis)
        .args(["run", "-k", key, "--", "sh", "-c"])
        .arg(format!(
            "sleep 1000 & echo $! > {gc}; echo $$ > {pid}; wait",
            gc = dir.str("grandchild"),
            pid = dir.str("pid")
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let child = read_pid(&dir.path("pid"));
    let grandchild = read_pid(&dir.path("grandchild"));
    (holder, child, grandchild)
}

fn guard_of(parent: Pid) -> bool {
    !guards_of(parent).is_empty()
}

/// Someone kills the guard (`pkill distlock` matches `distlock-guard` too): distlock starts
/// another, so that a SIGKILL of distlock afterwards still takes the command's background
/// processes with it.
#[test]
fn a_killed_guard_is_replaced() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let (holder, child, grandchild) =
        holder_with_a_background_process(&redis, &dir, "guard-killed");
    let distlock_pid = pid_of(&holder);
    wait_until("the guard to start", || guard_of(distlock_pid));
    let first = guards_of(distlock_pid)[0];
    kill(first, Signal::SIGKILL).unwrap();
    wait_until("another guard", || {
        guards_of(distlock_pid).iter().any(|&g| g != first)
    });
    kill(distlock_pid, Signal::SIGKILL).unwrap();
    let out = finish(holder);
    wait_dead(child);
    wait_dead(grandchild);
    assert!(
        stderr(&out).contains(&format!("the guard process {first} died; started another")),
        "{}",
        stderr(&out)
    );
}

/// The guard lives beside the command, and goes away with distlock on a normal exit.
#[test]
fn the_guard_lives_beside_the_command_and_goes_away_with_distlock() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let holder = Holder::new(distlock(&redis), &dir, "guard")
        .says("$$")
        .hold();
    let distlock_pid = holder.pid();
    wait_until("the guard to start", || guard_of(distlock_pid));
    assert_eq!(holder.finish().status.code(), Some(0));
    // The guard was distlock's child; after distlock's exit, init adopts it (or reaps it).
    wait_until("the guard to exit", || {
        !std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c == "distlock-guard\n")
                && std::fs::read_to_string(e.path().join("environ"))
                    .is_ok_and(|env| env.contains(&format!("DISTLOCK_REDIS_URL={}", redis.url())))
        })
    });
}

/// The terminal goes to the command: it can read it, and Ctrl-C reaches it exactly once (from
/// the terminal; distlock, no longer in the foreground, gets none to forward).
#[test]
fn interactive_command_owns_the_terminal() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let (holder, mut master) = on_a_terminal(distlock(&redis).args(["run", "-v", "-k", "tty", "--", "sh", "-c"]).arg(format!(
        "trap 'echo INT >> {log}' INT; echo $$ > {pid}; read line; echo \"got:$line\" > {got}; \
         while [ ! -e {stop} ]; do sleep 0.02; done",
        log = dir.str("log"),
        pid = dir.str("pid"),
        got = dir.str("got"),
        stop = dir.str("stop"),
    )));
    let child = read_pid(&dir.path("pid"));
    wait_until("the command to own the terminal", || {
        foreground_group(&master) == child.as_raw()
    });
    master.write_all(b"hello\n").unwrap();
    assert_eq!(wait_for_file(&dir.path("got")), "got:hello\n");
    master.write_all(&[0x03]).unwrap(); // Ctrl-C
    assert_eq!(wait_for_file(&dir.path("log")), "INT\n");
    std::fs::write(dir.path("stop"), "").unwrap();
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.path("log")).unwrap(),
        "INT\n",
        "exactly one SIGINT"
    );
    assert!(!stderr(&out).contains("forwarded"), "{}", stderr(&out));
    drop(master);
}

/// Ctrl-Z stops the command, distlock takes the terminal back and stops too (like a shell job);
/// on SIGCONT it renews first, then gives the terminal and the CPU back to the command.
#[test]
fn ctrl_z_stops_and_sigcont_resumes() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let (holder, mut master) = on_a_terminal(
        distlock(&redis)
            .args(["run", "-k", "tstp", "--", "sh", "-c"])
            .arg(format!(
                "echo $$ > {pid}; read line; echo \"got:$line\" > {got}",
                pid = dir.str("pid"),
                got = dir.str("got"),
            )),
    );
    let distlock_pid = pid_of(&holder);
    let child = read_pid(&dir.path("pid"));
    wait_until("the command to own the terminal", || {
        foreground_group(&master) == child.as_raw()
    });
    master.write_all(&[0x1a]).unwrap(); // Ctrl-Z
    wait_until("the command to stop", || state_of(child) == "T");
    wait_until("distlock to stop", || state_of(distlock_pid) == "T");
    assert_eq!(
        foreground_group(&master),
        distlock_pid.as_raw(),
        "distlock took the terminal back"
    );
    kill(distlock_pid, Signal::SIGCONT).unwrap();
    wait_until("the command to resume with the terminal", || {
        state_of(child) != "T" && foreground_group(&master) == child.as_raw()
    });
    master.write_all(b"after\n").unwrap();
    assert_eq!(wait_for_file(&dir.path("got")), "got:after\n");
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!redis.exists(&lock_key("tstp")));
}

/// A job left stopped (Ctrl-Z) for longer than its lock's TTL has lost its lock (distlock,
/// stopped with it, renews nothing): the guard ends it at the deadline, and on `fg` the run
/// ends with 124.
#[test]
fn a_job_stopped_past_its_ttl_is_ended_by_the_guard() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let (holder, mut master) = on_a_terminal(
        distlock(&redis)
            .args(["run", "-k", "tstp-long", "--ttl", "2s", "--", "sh", "-c"])
            .arg(format!("echo $$ > {pid}; read line", pid = dir.str("pid"))),
    );
    let distlock_pid = pid_of(&holder);
    let child = read_pid(&dir.path("pid"));
    wait_until("the command to own the terminal", || {
        foreground_group(&master) == child.as_raw()
    });
    master.write_all(&[0x1a]).unwrap(); // Ctrl-Z
    wait_until("distlock to stop", || state_of(distlock_pid) == "T");
    let expiry = earliest_expiry(&redis, "tstp-long");
    let dead = wait_dead(child);
    assert!(
        dead < expiry,
        "the job outlived its lock by {:?}",
        dead - expiry
    );
    kill(distlock_pid, Signal::SIGCONT).unwrap();
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("guard process ended the command"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn usr1_is_forwarded_and_ends_a_wait_cleanly() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let holder = distlock(&redis)
        .args(["run", "-k", "usr", "--", "sh", "-c"])
        .arg(format!(
            "trap 'echo USR1 >> {log}; exit 3' USR1; echo $$ > {pid}; while :; do sleep 0.02; done",
            log = dir.str("log"),
            pid = dir.str("pid"),
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    read_pid(&dir.path("pid"));
    let waiter = distlock(&redis)
        .args(["run", "-k", "usr", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the waiter to subscribe", || redis.in_line("usr") == 1);
    kill(pid_of(&waiter), Signal::SIGUSR1).unwrap();
    let out = finish(waiter);
    assert_eq!(signal_of(&out), Some(libc::SIGUSR1), "{}", stderr(&out));
    kill(pid_of(&holder), Signal::SIGUSR1).unwrap();
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(dir.path("log")).unwrap(), "USR1\n");
    assert!(!redis.exists(&lock_key("usr")));
}

/// The signal state the command starts with: nothing blocked, SIGPIPE and SIGTTOU at their
/// defaults (distlock ignores TTOU itself; Rust ignores PIPE), no handler of distlock's left, but
/// a signal ignored by whoever started distlock (nohup) still ignored.
#[test]
fn the_command_starts_with_a_clean_signal_state() {
    let redis = Redis::start();
    let mask = |status: &str, field: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    let bit = |signal: i32| 1u64 << (signal - 1);
    let out = run(distlock(&redis).args(["run", "-k", "sig", "--", "cat", "/proc/self/status"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = String::from_utf8(out.stdout).unwrap();
    assert_eq!(mask(&status, "SigBlk:"), 0, "{status}");
    assert_eq!(
        mask(&status, "SigIgn:") & (bit(libc::SIGPIPE) | bit(libc::SIGTTOU) | bit(libc::SIGHUP)),
        0
    );
    assert_eq!(mask(&status, "SigCgt:"), 0, "no handlers survive exec");
    // Started with SIGHUP ignored (what nohup does): the command inherits that.
    let out = run(std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' HUP; exec {} run -k sig -- cat /proc/self/status",
            env!("CARGO_BIN_EXE_distlock")
        ))
        .env("DISTLOCK_REDIS_URL", redis.url()));
    let status = String::from_utf8(out.stdout).unwrap();
    assert_ne!(mask(&status, "SigIgn:") & bit(libc::SIGHUP), 0, "{status}");
}

#[test]
fn a_script_without_shebang_runs_with_sh() {
    use std::os::unix::fs::PermissionsExt;
    let redis = Redis::start();
    let dir = Scratch::new();
    let script = dir.path("no-shebang");
    std::fs::write(&script, "echo \"from sh: $1\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run(distlock(&redis)
        .args(["run", "-k", "sh", "--"])
        .arg(&script)
        .arg("arg"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from sh: arg\n");
}

// ---------------------------------------------------------------------------------------------
// distlock, its guard, or both stopped (issue 18). The guard holds distlock's kill deadlines:
// a stopped distlock cannot leave its command running past its lock; a stopped guard changes
// nothing; both stopped leave the command unwatched until one of them runs again.

/// `date +%s%N` stamps in `file`, one per line (the commands' clock, the same for both).
fn stamps(file: &std::path::Path) -> Vec<u128> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// A holder of `key` with `ttl` whose command stamps `log` every 100ms until killed, started
/// and stamping; returns it with its command's pid.
fn stamping_holder(
    redis: &Redis,
    dir: &Scratch,
    key: &str,
    ttl: &str,
) -> (std::process::Child, Pid) {
    let holder = distlock(redis)
        .args(["run", "-k", key, "--ttl", ttl, "--", "sh", "-c"])
        .arg(format!(
            "echo $$ > {pid}; while :; do date +%s%N >> {log}; sleep 0.1; done",
            pid = dir.str("pid"),
            log = dir.str("log"),
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let command = read_pid(&dir.path("pid"));
    wait_until("the command's first stamp", || {
        !stamps(&dir.path("log")).is_empty()
    });
    (holder, command)
}

/// The earliest instant at which `key` can expire in Redis, from a PTTL read now (later
/// renewals only push the expiry out).
fn earliest_expiry(redis: &Redis, key: &str) -> Instant {
    let sent = Instant::now();
    let pttl = redis.pttl(&lock_key(key));
    assert!(
        pttl > 0,
        "the lock must be held with an expiry, PTTL {pttl}"
    );
    sent + Duration::from_millis(pttl as u64)
}

/// Keep a fault on for `length` from `since` (the fault's length is what is under test, not a
/// synchronisation).
fn hold_fault(since: Instant, length: Duration) {
    while since.elapsed() < length {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 18's scenario: distlock alone is stopped (TTL 3s, stopped 6s) while a second run waits.
/// Its guard ends the command before the lock can expire in Redis; the second holder's section
/// never overlaps the first command's stamps; once resumed, the first run ends 124 and says
/// that the guard ended the command.
#[test]
fn a_stopped_distlock_cannot_leave_its_command_running_past_its_lock() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let (first, command) = stamping_holder(&redis, &dir, "paused", "3s");
    let second = distlock(&redis)
        .args(["run", "-k", "paused", "--", "sh", "-c"])
        .arg(format!(
            "date +%s%N > {start}; sleep 1; date +%s%N > {end}",
            start = dir.str("second-start"),
            end = dir.str("second-end"),
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the second run to wait in line", || {
        redis.in_line("paused") == 1
    });
    let expiry = earliest_expiry(&redis, "paused");
    let distlock_pid = pid_of(&first);
    kill(distlock_pid, Signal::SIGSTOP).unwrap();
    let stopped = Instant::now();
    let dead = wait_dead(command);
    assert!(
        dead < expiry,
        "the command outlived the lock by {:?} while distlock was stopped",
        dead - expiry
    );
    assert_eq!(
        state_of(distlock_pid),
        "T",
        "distlock was stopped all along"
    );
    // The second run takes the lock once it expired, and ends its section.
    wait_for_file(&dir.path("second-end"));
    hold_fault(stopped, Duration::from_secs(6));
    kill(distlock_pid, Signal::SIGCONT).unwrap();
    let out = finish(first);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "lost lock \"paused\" while the command ran (distlock's guard process ended the command because no renewal was confirmed in time"
        ),
        "{}",
        stderr(&out)
    );
    let out = finish(second);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let second_start: u128 = wait_for_file(&dir.path("second-start"))
        .trim()
        .parse()
        .unwrap();
    let first_stamps = stamps(&dir.path("log"));
    let inside: Vec<&u128> = first_stamps
        .iter()
        .filter(|&&t| t >= second_start)
        .collect();
    assert!(
        inside.is_empty(),
        "{} stamps of the first command inside the second holder's section",
        inside.len()
    );
}

/// The grant's deadline reaches the guard before the command runs: a command that stops its
/// own distlock with its first instruction (before any renewal could be sent) is ended by the
/// guard before the lock can expire, on the deadline of the grant alone.
#[test]
fn the_grants_deadline_reaches_the_guard_before_the_command_runs() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let holder = distlock(&redis)
        .args([
            "run",
            "-k",
            "first-deadline",
            "--ttl",
            "2s",
            "--",
            "sh",
            "-c",
        ])
        .arg(format!(
            "kill -STOP $PPID; echo $$ > {pid}; while :; do sleep 0.05; done",
            pid = dir.str("pid"),
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let command = read_pid(&dir.path("pid"));
    let distlock_pid = pid_of(&holder);
    wait_until("distlock to be stopped", || state_of(distlock_pid) == "T");
    let expiry = earliest_expiry(&redis, "first-deadline");
    let dead = wait_dead(command);
    assert!(
        dead < expiry,
        "the command outlived the lock by {:?}",
        dead - expiry
    );
    kill(distlock_pid, Signal::SIGCONT).unwrap();
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("guard process ended the command"),
        "{}",
        stderr(&out)
    );
}

/// The guard alone is stopped for longer than the TTL: nothing changes for the run. Renewals
/// go on; the guard, continued, reads the deadlines they left in its pipe before its clock, and
/// does not fire; the command completes and the run ends 0 without a word.
#[test]
fn a_stopped_guard_changes_nothing_for_the_run() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let mut holder = hold_until_released(distlock(&redis), &dir, "guard-stopped", &["--ttl", "2s"]);
    let distlock_pid = pid_of(&holder);
    wait_until("the guard to start", || guard_of(distlock_pid));
    let guard = guards_of(distlock_pid)[0];
    kill(guard, Signal::SIGSTOP).unwrap();
    let stopped = Instant::now();
    // Past the deadlines the guard held when it was stopped, with renewals meanwhile.
    for _ in 0..3 {
        wait_renewed_on(&redis, &lock_key("guard-stopped"), &mut holder);
    }
    hold_fault(stopped, Duration::from_secs(3));
    kill(guard, Signal::SIGCONT).unwrap();
    // A guard that (wrongly) acted on a stale deadline would do it at once: give it a renewal's
    // time, then check that it is the same guard, still there, and the command too.
    wait_renewed_on(&redis, &lock_key("guard-stopped"), &mut holder);
    assert_eq!(guards_of(distlock_pid), vec![guard]);
    assert_ne!(state_of(guard), "T");
    release(&dir);
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    assert!(!redis.exists(&lock_key("guard-stopped")));
}

/// distlock and its guard both stopped (`pkill -STOP distlock` matches both), the command not:
/// as the guarantees say, nothing can stop the command then, and it runs on past its lock; the
/// first of the two to run again kills it at once (here the guard), and distlock, continued,
/// ends the run with 124.
#[test]
fn distlock_and_its_guard_both_stopped_leave_the_command_until_one_runs() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let (holder, command) = stamping_holder(&redis, &dir, "both-stopped", "2s");
    let distlock_pid = pid_of(&holder);
    wait_until("the guard to start", || guard_of(distlock_pid));
    let guard = guards_of(distlock_pid)[0];
    kill(guard, Signal::SIGSTOP).unwrap();
    kill(distlock_pid, Signal::SIGSTOP).unwrap();
    wait_until("the lock to expire in Redis", || {
        redis.pttl(&lock_key("both-stopped")) == -2
    });
    let expired = Instant::now();
    // The command runs on without its lock: it stamps after the expiry.
    let before = stamps(&dir.path("log")).len();
    wait_until("a stamp after the expiry", || {
        stamps(&dir.path("log")).len() > before + 1
    });
    assert!(
        alive(command),
        "stopped 0s after expiry: {:?}",
        expired.elapsed()
    );
    kill(guard, Signal::SIGCONT).unwrap();
    let resumed = Instant::now();
    let dead = wait_dead(command);
    assert!(
        dead - resumed < Duration::from_secs(5),
        "the guard took {:?} after it was continued",
        dead - resumed
    );
    kill(distlock_pid, Signal::SIGCONT).unwrap();
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("guard process ended the command"),
        "{}",
        stderr(&out)
    );
}
