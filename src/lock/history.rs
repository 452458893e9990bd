//! Recording a lock's history: the extra arguments that the acquire and release scripts take
//! to record events beside the lock (`lua/history.lua`), and the one event no script sees, a
//! holder's loss ([`report_lost`]). Reading and printing the history is `crate::history`'s.
//!
//! The arguments are process-wide settings, set once by the command that knows them (the
//! global `--history`, `run` before its release, `break`), so that the engine's signatures stay
//! as they are.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::{Holder, LockName, Token, Topology};
use crate::backend::Script;

/// The most events one lock's history keeps (older ones are dropped): `HISTORY_CAP` in
/// `lock/lua/history.lua`.
pub const CAP: usize = 1000;

/// The shortest `--history`.
pub const MIN_DURATION: Duration = Duration::from_secs(1);

/// `--history` (None: record only into histories that exist).
static DURATION: OnceLock<Option<Duration>> = OnceLock::new();
/// How the work done under the lock ended, for the `released` event.
static OUTCOME: Mutex<Option<String>> = Mutex::new(None);
/// Who breaks the lock (`break`): its metadata; the release is then a `broken` event.
static BREAKER: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();

/// The lost-event script (see `lua/lost.lua`).
pub(crate) static LOST: Script = Script::new(concat!(
    include_str!("lua/history.lua"),
    include_str!("lua/lost.lua")
));

/// Keep the history of every lock this process takes for `duration` after its last event
/// (`--history`, `DISTLOCK_HISTORY`), or only record into histories that exist (`None`).
pub fn configure(duration: Option<Duration>) {
    let _ = DURATION.set(duration);
}

/// `--history`, if given.
pub fn duration() -> Option<Duration> {
    DURATION.get().copied().flatten()
}

/// The work under the lock ended so: `exit 0`, `signal 15`, `timed out`, ... (recorded by the
/// release that follows).
pub fn set_outcome(outcome: impl Into<String>) {
    if let Ok(mut slot) = OUTCOME.lock() {
        *slot = Some(outcome.into());
    }
}

/// This process breaks locks: its releases are recorded as `broken`, by it.
pub fn mark_break() {
    let _ = BREAKER.set(
        Holder::this_process("break", std::process::id(), &[], None)
            .to_fields()
            .into_iter()
            .filter(|(name, _)| matches!(*name, "host" | "pid" | "user"))
            .collect(),
    );
}

fn millis(d: Duration) -> String {
    d.as_millis().to_string()
}

/// The extra arguments of an acquire attempt (field/value pairs, see `lua/acquire.lua`).
pub fn acquire_fields() -> Vec<Vec<u8>> {
    match duration() {
        Some(d) => vec![b"history_ms".to_vec(), millis(d).into_bytes()],
        None => Vec::new(),
    }
}

/// The extra arguments of a release (field/value pairs after the first two, see
/// `lua/release.lua`).
pub fn release_fields() -> Vec<Vec<u8>> {
    let mut fields: Vec<(String, String)> = Vec::new();
    if let Some(d) = duration() {
        fields.push(("history_ms".into(), millis(d)));
    }
    if let Some(outcome) = OUTCOME.lock().ok().and_then(|o| o.clone()) {
        fields.push(("outcome".into(), outcome));
    }
    if let Some(breaker) = BREAKER.get() {
        fields.push(("break".into(), "1".into()));
        for (name, value) in breaker {
            fields.push((format!("by_{name}"), value.clone()));
        }
    }
    fields
        .into_iter()
        .flat_map(|(k, v)| [k.into_bytes(), v.into_bytes()])
        .collect()
}

/// The history's keys of lock `name`: its stream and its holds.
pub fn keys(name: &LockName) -> [String; 2] {
    let k = name.lock_key();
    [format!("{k}:history"), format!("{k}:history:held")]
}

/// The variable that makes a distlock a lost-report sender (see [`report_lost`]).
const LOST_REPORT: &str = "DISTLOCK_INTERNAL_LOST_REPORT";

/// What a holder that lost its lock reports: its pid, how long it held the lock by its own
/// count, its token and why it lost it.
#[derive(Debug)]
pub struct LostReport {
    pid: u32,
    held: Duration,
    token: Token,
    why: String,
}

/// Record that `token` lost lock `name` (`why`, in words), after holding it for `held` by our
/// own count, if the lock has a history, without delaying this process: its exit is what tells
/// the world that the command's process group is gone, and a server that does not answer could
/// hold it up for the Redis timeout. So a copy of this distlock, with the same arguments and
/// environment plus [`LOST_REPORT`], sends the report ([`take_lost_report`], [`send_lost`]) in
/// its own process group, silent, while this one exits. Best effort: nothing is reported if it
/// cannot be started.
pub fn report_lost(token: &Token, why: &str, held: Duration) {
    use std::os::unix::process::CommandExt;
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let report = format!(
        "{}\n{}\n{}\n{}",
        std::process::id(),
        held.as_millis(),
        token.as_str(),
        why.replace('\n', " ")
    );
    let _ = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(LOST_REPORT, report)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn();
}

/// In a copy started by [`report_lost`]: the report to send (and the variable is removed).
pub fn take_lost_report() -> Option<LostReport> {
    let text = std::env::var(LOST_REPORT).ok()?;
    // SAFETY: called from the main thread before any other thread is started (the first thing
    // `run` does once its configuration is decided), so nothing reads the environment meanwhile.
    unsafe { std::env::remove_var(LOST_REPORT) };
    let mut parts = text.splitn(4, '\n');
    Some(LostReport {
        pid: parts.next()?.parse().ok()?,
        held: Duration::from_millis(parts.next()?.parse().ok()?),
        token: Token::from_text(parts.next()?),
        why: parts.next().unwrap_or_default().to_owned(),
    })
}

/// Send `report` about lock `name` to every server of `topology` (one request each, bounded by
/// the Redis timeout, at most 1s).
pub fn send_lost(topology: &Topology, name: &LockName, report: &LostReport) {
    let keys = keys(name);
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let me = Holder::this_process("run", report.pid, &[], None);
    let mut args: Vec<Vec<u8>> = vec![
        report.token.as_str().as_bytes().to_vec(),
        report.why.as_bytes().to_vec(),
        millis(report.held).into_bytes(),
    ];
    for (field, value) in me.to_fields() {
        if matches!(field, "host" | "pid" | "user") {
            args.push(field.as_bytes().to_vec());
            args.push(value.into_bytes());
        }
    }
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let connectors = match topology {
        Topology::Single(server) => vec![server.for_key(name.lock_key())],
        Topology::Redlock { nodes, .. } => nodes.clone(),
    };
    std::thread::scope(|s| {
        for connector in connectors {
            let (keys, args) = (&keys, &args);
            s.spawn(move || {
                let connector =
                    connector.with_timeout(connector.timeout().min(Duration::from_secs(1)));
                let deadline = Instant::now() + connector.timeout();
                let _ = connector.node().eval(&LOST, keys, args, deadline);
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_the_scripts() {
        assert!(include_str!("lua/history.lua").contains(&format!("HISTORY_CAP = {CAP}")));
    }

    #[test]
    fn keys_share_the_hash_tag() {
        let name = LockName::new("distlock:", "deploy");
        assert_eq!(
            keys(&name),
            [
                "distlock:{deploy}:history",
                "distlock:{deploy}:history:held"
            ]
        );
        assert_eq!(&keys(&name)[..], &name.keys()[10..]);
    }
}
