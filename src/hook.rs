//! `run --hook CMD`: one command run through `/bin/sh -c` on the events of `--hook-events`, to
//! alert or notify (`curl` to a webhook, a pager, a chat), with the event's JSON log line on
//! stdin and its facts in `DISTLOCK_*` variables (docs/hooks.md).
//!
//! It hears the events through [`Output`]'s tap, so that a hook sees exactly what the log says,
//! where it says it: a `lost` is said once the command's group has been killed, a `timed-out`
//! once it was stopped and the lock released. Rules that keep a hook out of the lock's way:
//! * **Not the command's.** A process group of its own (the kill sequence, the guard and the
//!   terminal's Ctrl-C reach the command's group only), without `DISTLOCK_TOKEN` (a release
//!   capability), `DISTLOCK_HELD` (a `distlock run` in it must not reenter a lock this run may
//!   no longer hold) or `DISTLOCK_HOOK` (no hook of a hook); the text is never substituted into
//!   CMD (notes and commands come from other users' hosts).
//! * **Not on stdout.** stdout belongs to the command (`run -- pg_dump > f`): the hook's stdout
//!   goes to distlock's stderr, as its stderr does.
//! * **Bounded, and never the exit code.** Each event runs the hook at most once per run.
//!   distlock waits for running hooks before it exits, each up to `--hook-timeout` from its
//!   start, then sends its group SIGTERM and SIGKILL a second later (`0`: no wait, no kill). A
//!   hook that cannot start, fails or is stopped is one `hook-failed` warning.
//!
//! distlock reaps the orphans of the command's group (it is their subreaper), and its
//! supervisor reaps with `waitpid(-1)`, hooks included: it hands their status back through
//! [`Hooks::reaped`].

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use crate::output::{Ev, Msg, Output};

/// The events `--hook-events` accepts: the default ones first, then those `all` adds.
pub const EVENTS: [Ev; 9] = [
    Ev::Lost,
    Ev::TimedOut,
    Ev::HeldTooLong,
    Ev::LongWait,
    Ev::Busy,
    Ev::Acquired,
    Ev::Released,
    Ev::Superseded,
    Ev::Replaced,
];
/// How many of [`EVENTS`] are the default.
pub const DEFAULT_EVENTS: usize = 5;

/// Variables a hook never inherits: a held lock's (the token above all), and the hook itself.
const WITHHELD: [&str; 6] = [
    "DISTLOCK_TOKEN",
    "DISTLOCK_HELD",
    "DISTLOCK_FENCE",
    "DISTLOCK_SLOT",
    "DISTLOCK_TTL_MS",
    "DISTLOCK_HOOK",
];

/// Variables a hook gets only from its event: never inherited (a distlock run inside a hook
/// of another would otherwise pass that event's on).
const OURS: [&str; 7] = [
    "DISTLOCK_ID",
    "DISTLOCK_EXIT",
    "DISTLOCK_SIGNAL",
    "DISTLOCK_WAITED_MS",
    "DISTLOCK_REASON",
    "DISTLOCK_HOLDER_HOST",
    "DISTLOCK_HOLDER_PID",
];

/// After SIGTERM, how long a hook past its time gets before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(1);

/// `--hook`, decided.
#[derive(Clone, Debug)]
pub struct HookConfig {
    /// What `/bin/sh -c` runs.
    pub command: String,
    /// On which events.
    pub events: Vec<Ev>,
    /// How long distlock waits for each hook (`--hook-timeout`).
    pub timeout: Duration,
}

/// The hooks of a run: a cheap handle; without a `--hook`, every method does nothing.
#[derive(Clone, Default)]
pub struct Hooks(Option<Arc<Shared>>);

struct Shared {
    cfg: HookConfig,
    key: String,
    /// Where `hook-failed` is said (the untapped output).
    out: Output,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The lock's short id, once it is ours.
    id: Option<String>,
    /// The events that ran the hook already.
    fired: Vec<Ev>,
    running: Vec<Running>,
}

struct Running {
    ev: Ev,
    child: Child,
    started: Instant,
}

impl Hooks {
    /// The hooks of `cfg` for lock `key`, and the output that runs them (`out`, tapped).
    pub fn new(cfg: Option<HookConfig>, key: &str, out: &Output) -> (Hooks, Output) {
        let Some(cfg) = cfg else {
            return (Hooks(None), out.clone());
        };
        let events = cfg.events.clone();
        let shared = Arc::new(Shared {
            cfg,
            key: key.to_owned(),
            out: out.clone(),
            state: Mutex::new(State::default()),
        });
        let tap = Arc::clone(&shared);
        let tapped = out.tapped(
            events,
            Arc::new(move |ev, level, msg, line| tap.fire(ev, level, msg, line)),
        );
        (Hooks(Some(shared)), tapped)
    }

    /// The lock is ours, with this token: its first 8 characters are `DISTLOCK_ID` from now on
    /// (the id `status` shows).
    pub fn holding(&self, token: &str) {
        if let Some(shared) = &self.0 {
            shared.state().id = Some(token.chars().take(8).collect());
        }
    }

    /// Someone else's `waitpid(-1)` reaped `status`: if it was a hook, it is settled.
    pub fn reaped(&self, status: WaitStatus) {
        let Some(shared) = &self.0 else {
            return;
        };
        if !matches!(status, WaitStatus::Exited(..) | WaitStatus::Signaled(..)) {
            return;
        }
        let mut state = shared.state();
        if let Some(i) = state
            .running
            .iter()
            .position(|r| Some(Pid::from_raw(r.child.id() as i32)) == status.pid())
        {
            let done = state.running.swap_remove(i);
            drop(state);
            let raw = match status {
                WaitStatus::Signaled(_, signal, _) => signal as i32,
                WaitStatus::Exited(_, code) => code << 8,
                _ => 0,
            };
            shared.settle(done.ev, Some(ExitStatus::from_raw(raw)));
        }
    }

    /// Before distlock exits: wait for the running hooks, each until `--hook-timeout` after
    /// its start, and stop those still running then.
    pub fn finish(&self) {
        let Some(shared) = &self.0 else {
            return;
        };
        if shared.cfg.timeout.is_zero() {
            return;
        }
        loop {
            let mut state = shared.state();
            let mut i = 0;
            while i < state.running.len() {
                let r = &mut state.running[i];
                match r.child.try_wait() {
                    Ok(None) if r.started.elapsed() < shared.cfg.timeout => i += 1,
                    Ok(None) => {
                        let r = state.running.swap_remove(i);
                        shared.stop(r);
                    }
                    // Ended (or, ECHILD, reaped by someone who did not say: nothing to add).
                    status => {
                        let r = state.running.swap_remove(i);
                        shared.settle(r.ev, status.ok().flatten());
                    }
                }
            }
            if state.running.is_empty() {
                return;
            }
            drop(state);
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tap: run the hook for `ev` (the first time), `line` on its stdin.
    fn fire(&self, ev: Ev, level: &str, msg: &Msg, line: &str) {
        // `-E 0` says busy is not news (a quiet skip): nor is it for the hook.
        if ev == Ev::Busy && level == "debug" {
            return;
        }
        let mut state = self.state();
        if state.fired.contains(&ev) {
            return;
        }
        state.fired.push(ev);
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(&self.cfg.command).process_group(0);
        for name in WITHHELD.iter().chain(&OURS) {
            cmd.env_remove(name);
        }
        cmd.env("DISTLOCK_EVENT", ev.as_str())
            .env("DISTLOCK_KEY", &self.key);
        if let Some(id) = &state.id {
            cmd.env("DISTLOCK_ID", id);
        }
        for (name, value) in msg.facts() {
            cmd.env(
                format!("DISTLOCK_{}", name.to_ascii_uppercase()),
                self.out.redact(&value),
            );
        }
        // The hook's stdout is distlock's stderr: stdout is the command's.
        let stdout = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_or_else(|_| Stdio::null(), Stdio::from);
        cmd.stdin(Stdio::piped()).stdout(stdout);
        match cmd.spawn() {
            Ok(mut child) => {
                // One line of a few hundred bytes (keys, notes and commands are capped) into an
                // empty pipe: it fits, so this never blocks. A hook that exited already makes
                // it fail (EPIPE; distlock ignores SIGPIPE): nothing to say.
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = stdin.write_all(line.as_bytes());
                }
                state.running.push(Running {
                    ev,
                    child,
                    started: Instant::now(),
                });
            }
            Err(e) => {
                drop(state);
                self.warn(ev, format!("cannot start it: {e}"));
            }
        }
    }

    /// A hook ended with `status` (None: unknown): a warning unless it succeeded.
    fn settle(&self, ev: Ev, status: Option<ExitStatus>) {
        let Some(status) = status.filter(|s| !s.success()) else {
            return;
        };
        let how = match (status.code(), status.signal().map(Signal::try_from)) {
            (Some(code), _) => format!("it exited with {code}"),
            (None, Some(Ok(signal))) => format!("it was killed by {}", signal.as_str()),
            _ => format!("it ended with {status}"),
        };
        self.warn(ev, how);
    }

    /// A hook past `--hook-timeout`: SIGTERM to its group, SIGKILL after [`TERM_GRACE`].
    fn stop(&self, mut r: Running) {
        let group = Pid::from_raw(r.child.id() as i32);
        let _ = killpg(group, Signal::SIGTERM);
        let killed_at = Instant::now();
        while killed_at.elapsed() < TERM_GRACE {
            if !matches!(r.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = r.child.try_wait();
        self.warn(
            r.ev,
            format!(
                "it was still running after --hook-timeout {}; stopped it",
                crate::text::duration(self.cfg.timeout)
            ),
        );
    }

    fn warn(&self, ev: Ev, what: String) {
        self.out.warn(
            Ev::HookFailed,
            format!("the --hook for {} failed: {what}", ev.as_str()),
        );
    }
}
