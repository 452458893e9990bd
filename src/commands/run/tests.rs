//! `run`'s pipeline over the fake lock. Each test runs in a process of its own (this test
//! binary, started again for that one test): a run installs signal handlers, makes the process
//! a subreaper and reaps any child, which must not reach the other tests' threads.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::run_with;
use crate::config::{CommandConfig, Config, Origins, RunConfig};
use crate::exit::Exit;
use crate::lock::fake::FakeLock;
use crate::output::{Format, Level, Output};

/// Set (to the test's name) in the process that runs one test alone.
const ALONE: &str = "DISTLOCK_UNIT_TEST_ALONE";

/// Run `scenario` in a process of its own: in the test's own run, start this binary again for
/// `name` only and return its stderr once it passed (bounded: 30s); in that process, run it
/// (and return `None`).
fn alone(name: &str, scenario: impl FnOnce()) -> Option<String> {
    if std::env::var(ALONE).as_deref() == Ok(name) {
        scenario();
        return None;
    }
    let path = format!(
        "{}::{name}",
        module_path!()
            .split_once("::")
            .map_or(module_path!(), |(_, rest)| rest)
    );
    let child = Command::new(std::env::current_exe().unwrap())
        .args([path.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE, name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(output) = rx.recv_timeout(Duration::from_secs(30)) else {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        panic!("{name} did not end within 30s");
    };
    let output = output.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success() && String::from_utf8_lossy(&output.stdout).contains("1 passed"),
        "{name} failed in its own process:\n{}\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    Some(stderr)
}

/// `distlock run -k k ARGS...`, decided.
fn config(args: &[&str]) -> RunConfig {
    let argv: Vec<&str> = ["distlock", "run", "-k", "k"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    let command = <crate::cli::Cli as clap::CommandFactory>::command();
    let matches = command.clone().try_get_matches_from(argv).unwrap();
    let cli = <crate::cli::Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap();
    let origins = Origins::of(&command, &matches);
    match Config::from_cli(cli, &origins).unwrap().command {
        CommandConfig::Run(run) => run,
        _ => unreachable!("a run"),
    }
}

fn out() -> Output {
    Output::new(Level::Normal, Format::Text, Vec::new())
}

/// Wait (at most 10s) until `condition` holds.
fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_loss_kills_the_command_and_the_run_ends_124() {
    let Some(stderr) = alone("a_loss_kills_the_command_and_the_run_ends_124", || {
        let lock = FakeLock::new();
        let server = lock.client();
        // Someone deletes the key once it is ours: the first renewal finds it gone.
        let thief = std::thread::spawn(move || {
            until("the lock to be taken", || {
                !server.world().holders.is_empty()
            });
            let tokens: Vec<String> = server.world().holders.keys().cloned().collect();
            for token in tokens {
                server.drop_holder(&token);
            }
        });
        let started = Instant::now();
        let exit = run_with(
            config(&["--ttl", "1s", "--", "sleep", "30"]),
            Box::new(lock),
            &out(),
        )
        .unwrap();
        thief.join().unwrap();
        assert_eq!(exit, Exit::Code(124));
        // The command was killed, not waited for.
        assert!(started.elapsed() < Duration::from_secs(20));
    }) else {
        return;
    };
    assert!(stderr.contains("lost lock"), "{stderr}");
    assert!(stderr.contains("process group was terminated"), "{stderr}");
}

#[test]
fn a_signal_while_taking_releases_the_lock() {
    let Some(stderr) = alone("a_signal_while_taking_releases_the_lock", || {
        let lock = FakeLock::new();
        let server = lock.client();
        // SIGTERM comes while the attempt that takes the lock is on its way.
        server.world().during_attempt = Some(Box::new(|| {
            nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM).unwrap();
        }));
        let exit = run_with(config(&["--", "true"]), Box::new(lock), &out()).unwrap();
        assert_eq!(exit, Exit::Signal(libc::SIGTERM));
        assert_eq!(server.world().attempts.len(), 1);
        assert!(server.world().holders.is_empty(), "the lock was released");
    }) else {
        return;
    };
    assert!(
        stderr.contains("the command was not started and the lock was released"),
        "{stderr}"
    );
}

#[test]
fn a_release_that_fails_is_reported() {
    let Some(stderr) = alone("a_release_that_fails_is_reported", || {
        let lock = FakeLock::new();
        lock.world().releases_fail = true;
        let exit = run_with(config(&["--", "true"]), Box::new(lock), &out()).unwrap();
        // The command's own code: the key expires by itself.
        assert_eq!(exit, Exit::Code(0));
    }) else {
        return;
    };
    assert!(stderr.contains("cannot release lock"), "{stderr}");
    assert!(stderr.contains("expires by itself within"), "{stderr}");
}
