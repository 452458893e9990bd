//! Helpers for tests that drive a session over the model Redis ([`ScriptLock`]).

use crate::lock::model::ScriptLock;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Set (to the test's name) in the process that runs one test alone.
pub const ALONE: &str = "DISTLOCK_UNIT_TEST_ALONE";

/// Run `scenario` in a process of its own: in the test's own run, start this binary again for
/// the test `name` of `module` (its `module_path!()`) only and return its stderr once it passed (bounded: 30s); in that process, run it
/// (and return `None`).
pub fn alone(module: &str, name: &str, scenario: impl FnOnce()) -> Option<String> {
    if std::env::var(ALONE).as_deref() == Ok(name) {
        scenario();
        return None;
    }
    let path = format!(
        "{}::{name}",
        module.split_once("::").map_or(module, |(_, rest)| rest)
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

/// `distlock ARGS...`, decided.
pub fn decided(args: &[&str]) -> crate::config::CommandConfig {
    let argv: Vec<&str> = std::iter::once("distlock")
        .chain(args.iter().copied())
        .collect();
    let command = <crate::cli::Cli as clap::CommandFactory>::command();
    let matches = command.clone().try_get_matches_from(argv).unwrap();
    let cli = <crate::cli::Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap();
    let origins = crate::config::Origins::of(&command, &matches);
    crate::config::Config::from_cli(cli, &origins)
        .unwrap()
        .command
}

/// Messages at the default level, in text, on stderr.
pub fn out() -> crate::output::Output {
    crate::output::Output::new(
        crate::output::Level::Normal,
        crate::output::Format::Text,
        Vec::new(),
    )
}

/// Make `signal` come while the attempt that takes `lock` is on its way (after the request, before
/// its answer is read).
pub fn signal_while_taking(lock: &ScriptLock, signal: nix::sys::signal::Signal) {
    lock.during_attempt(Box::new(move || {
        nix::sys::signal::raise(signal).unwrap();
    }));
}

/// Wait (at most 10s) until `condition` holds.
pub fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}
