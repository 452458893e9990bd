//! `run`'s pipeline over the model Redis. Each test runs in a process of its own (this test
//! binary, started again for that one test): a run installs signal handlers, makes the process
//! a subreaper and reaps any child, which must not reach the other tests' threads.

use std::time::{Duration, Instant};

use super::run_with;
use crate::config::{CommandConfig, RunConfig};
use crate::exit::Exit;
use crate::lock::model::ScriptLock;
use crate::session::testing::{alone, decided, out, signal_while_taking, until};

/// `distlock run -k k ARGS...`, decided.
fn config(args: &[&str]) -> RunConfig {
    let argv: Vec<&str> = ["run", "-k", "k"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    match decided(&argv) {
        CommandConfig::Run(run) => run,
        _ => unreachable!("a run"),
    }
}

#[test]
fn a_loss_kills_the_command_and_the_run_ends_124() {
    let Some(stderr) = alone(
        module_path!(),
        "a_loss_kills_the_command_and_the_run_ends_124",
        || {
            let lock = ScriptLock::new();
            let server = lock.client();
            // Someone deletes the key once it is ours: the first renewal finds it gone.
            let thief = std::thread::spawn(move || {
                until("the lock to be taken", || !server.holders().is_empty());
                for token in server.holders() {
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
        },
    ) else {
        return;
    };
    assert!(stderr.contains("lost lock"), "{stderr}");
    assert!(stderr.contains("process group was terminated"), "{stderr}");
}

#[test]
fn a_signal_while_taking_releases_the_lock() {
    let Some(stderr) = alone(
        module_path!(),
        "a_signal_while_taking_releases_the_lock",
        || {
            let lock = ScriptLock::new();
            let server = lock.client();
            // SIGTERM comes while the attempt that takes the lock is on its way.
            signal_while_taking(&server, nix::sys::signal::Signal::SIGTERM);
            let exit = run_with(config(&["--", "true"]), Box::new(lock), &out()).unwrap();
            assert_eq!(exit, Exit::Signal(libc::SIGTERM));
            assert_eq!(server.world().attempts.len(), 1);
            assert!(server.holders().is_empty(), "the lock was released");
        },
    ) else {
        return;
    };
    assert!(
        stderr.contains("the command was not started and the lock was released"),
        "{stderr}"
    );
}

#[test]
fn a_release_that_fails_is_reported() {
    let Some(stderr) = alone(module_path!(), "a_release_that_fails_is_reported", || {
        let lock = ScriptLock::new();
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
