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

/// A loss is told against the lock's `--ttl`, in the user's words: no "claim" (the design's
/// word for the shorter expiry an acquire sets), and on a Redlock the time it counts, less the
/// allowance for its nodes' clocks.
#[test]
fn a_loss_is_told_against_the_ttl() {
    use super::expiry_words;
    let (ttl, claim) = (Duration::from_secs(30), Duration::from_millis(9200));
    let redlock = |d: Duration| d - crate::lock::redlock_drift(d);
    assert_eq!(expiry_words(ttl, ttl, claim, false), "of its --ttl 30s");
    assert_eq!(
        expiry_words(claim, ttl, claim, false),
        "of the 9.2s an acquire sets before the first renewal extends the lock to its --ttl 30s"
    );
    assert_eq!(
        expiry_words(redlock(ttl), ttl, claim, true),
        "of its --ttl 30s (a Redlock counts 29.6s of it, allowing for its nodes' clocks drifting \
         apart)"
    );
    assert_eq!(
        expiry_words(redlock(claim), ttl, claim, true),
        "of the 9.2s an acquire sets before the first renewal extends the lock to its --ttl 30s \
         (a Redlock counts 9.1s of it, allowing for its nodes' clocks drifting apart)"
    );
    // A short --ttl: the acquire sets the whole TTL.
    let short = Duration::from_secs(2);
    assert_eq!(
        expiry_words(redlock(short), short, short, true),
        "of its --ttl 2s (a Redlock counts 1.9s of it, allowing for its nodes' clocks drifting \
         apart)"
    );
    for words in [
        expiry_words(claim, ttl, claim, false),
        expiry_words(redlock(ttl), ttl, claim, true),
    ] {
        assert!(!words.contains("claim"), "{words}");
    }
}
