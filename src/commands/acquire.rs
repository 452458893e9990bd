//! `distlock acquire`: take a lock and hand its token over, for locks that span several steps:
//! on stdout, or with `--env-file` appended to a file that later CI steps load.

use std::io::Write;

use crate::backend::{Budget, Cancel};
use crate::commands::reenter;
use crate::commands::take::take;
use crate::commands::{Exit, signal_name};
use crate::config::{AcquireConfig, TakeConfig};
use crate::envfile::EnvFile;
use crate::error::Error;
use crate::events;
use crate::exit;
use crate::lock::{self, Extended, Holder, Lock, Ownership, Token};
use crate::output::{Ev, Msg, Output};
use crate::signals;

/// Acquire, then print the token on stdout (and nothing else there), or append the lock's
/// values to the `--env-file` (and print nothing: the token stays out of CI logs).
pub fn acquire(cfg: AcquireConfig, out: &Output) -> Result<Exit, Error> {
    let AcquireConfig {
        take: cfg,
        env_file,
        json,
    } = cfg;
    let mut lock = lock::open(cfg.name.clone(), &cfg.topology);
    let timeout = cfg.topology.timeout();
    // A process that already holds this lock (a run around us, or an earlier step's
    // --env-file): hand out what it holds, take nothing.
    if let Some(held) = reenter::held_by_ancestor(lock.as_ref(), cfg.name.prefix()) {
        match reenter::check(lock.as_mut(), &held, cfg.limit, timeout, out)? {
            reenter::Nested::Reenter(fence) => {
                out.verbose(
                    Ev::Reentered,
                    format!(
                        "lock {} is already held by the process that started this one; handing out its token",
                        crate::text::quote(cfg.name.key())
                    ),
                );
                let granted = Granted {
                    token: &Token::from_text(&held.0.token),
                    fence,
                    // The ancestor's slot, as its run gave it to its command.
                    slot: std::env::var("DISTLOCK_SLOT")
                        .ok()
                        .and_then(|s| s.parse().ok()),
                };
                return match hand_over(&cfg, &env_file, json, &granted) {
                    Ok(()) => Ok(Exit::Code(exit::SUCCESS)),
                    Err(why) => {
                        // The lock is the ancestor's: it stays, and so does its token there.
                        out.error(Ev::HandOverFailed, Msg::new(why).exit(exit::IO_ERROR));
                        Ok(Exit::Code(exit::IO_ERROR))
                    }
                };
            }
            reenter::Nested::Exit(exit) => return Ok(exit),
            reenter::Nested::Take => {}
        }
    }
    let (tx, mut rx) = events::channel()
        .map_err(|e| Error::Internal(format!("cannot create the event pipe: {e}")))?;
    let cancel = Cancel::new();
    signals::install(&tx, &cancel)
        .map_err(|e| Error::Internal(format!("cannot install signal handlers: {e}")))?;
    // The lock belongs to whoever called us (a CI step's shell): name that process.
    let parent = nix::unistd::getppid().as_raw().unsigned_abs();
    let holder = Holder::this_process("acquire", parent, &cmdline(parent), cfg.note.as_deref());
    let grant = match take(&cfg, lock.as_mut(), &holder, (&tx, &mut rx), &cancel, out)? {
        Ok(grant) => grant,
        Err(exit) => return Ok(exit),
    };
    let key = crate::text::quote(cfg.name.key());
    // The attempt took a short claim; nothing renews an acquired lock, so make it the full TTL
    // before anyone learns the token.
    if grant.validity.ttl < cfg.ttl {
        let extended = lock.extend(
            &grant.token,
            cfg.ttl,
            &Budget::within(timeout).cancellable(&cancel),
        );
        if !matches!(extended, Ok(Extended::Held(_) | Extended::Replaced(..))) {
            let released = lock.release(&grant.token, &Budget::within(timeout));
            let after = match released {
                Ok(_) => "it was released".to_owned(),
                Err(_) => format!(
                    "it expires by itself within {}",
                    crate::text::duration(grant.validity.ttl)
                ),
            };
            return match extended {
                Err(source) => Err(Error::Redis {
                    context: format!(
                        "acquired lock {key} but could not extend it to its TTL ({after})"
                    ),
                    server: lock.describe(),
                    source,
                    note: None,
                }),
                _ => Err(Error::Internal(format!(
                    "lock {key} was gone right after it was acquired ({after})"
                ))),
            };
        }
        crate::commands::warn_failed_nodes(lock.as_mut(), out);
    }
    // A signal that arrived while we took the lock, or a token we cannot hand over (a stdout
    // nobody reads, an env file we cannot write): nobody would ever learn the token, so the
    // lock must not stay behind.
    if let Some(signal) = signals::take_termination(&mut rx) {
        let released = give_back(lock.as_mut(), &grant.token, timeout, cfg.ttl);
        let name = signal_name(signal);
        out.error(
            Ev::Interrupted,
            Msg::new(format!(
                "interrupted by {name} just after acquiring lock {key}; it {released}"
            ))
            .signal(name),
        );
        return Ok(Exit::Signal(signal));
    }
    let granted = Granted {
        token: &grant.token,
        fence: grant.fence,
        slot: grant.slot,
    };
    if let Err(why) = hand_over(&cfg, &env_file, json, &granted) {
        let released = give_back(lock.as_mut(), &grant.token, timeout, cfg.ttl);
        out.error(
            Ev::HandOverFailed,
            Msg::new(format!("{why}; lock {key} {released}")).exit(exit::IO_ERROR),
        );
        return Ok(Exit::Code(exit::IO_ERROR));
    }
    let held = format!(
        "lock {key} is held for {} unless renewed",
        crate::text::duration(cfg.ttl)
    );
    match &env_file {
        None => out.verbose(
            Ev::Held,
            format!("{held}; release it with distlock release"),
        ),
        Some(file) => out.verbose(
            Ev::Held,
            format!(
                "{held}; its key and token are in {}, for distlock renew and distlock release",
                crate::text::quote(&file.path().display().to_string())
            ),
        ),
    }
    Ok(Exit::Code(exit::SUCCESS))
}

/// What `acquire` hands over.
struct Granted<'a> {
    token: &'a Token,
    fence: u64,
    /// A semaphore slot's index.
    slot: Option<u32>,
}

/// `acquire --json`'s object.
#[derive(serde::Serialize)]
struct GrantJson<'a> {
    key: &'a str,
    redis_key: &'a str,
    token: &'a str,
    fence: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    slot: Option<u32>,
    ttl_ms: u64,
    limit: u32,
}

/// Hand the token over: on stdout (bare, or as JSON), or appended to the env file. The error
/// says why nobody will learn the token.
fn hand_over(
    cfg: &TakeConfig,
    env_file: &Option<EnvFile>,
    json: bool,
    granted: &Granted<'_>,
) -> Result<(), String> {
    match env_file {
        Some(file) => file
            .append(
                cfg.name.key(),
                cfg.ttl,
                (granted.fence, granted.slot),
                granted.token.as_str(),
            )
            .map_err(|e| {
                format!(
                    "cannot write to --env-file {} ({e})",
                    crate::text::quote(&file.path().display().to_string())
                )
            }),
        None if json => {
            let object = GrantJson {
                key: cfg.name.key(),
                redis_key: cfg.name.lock_key(),
                token: granted.token.as_str(),
                fence: granted.fence,
                slot: granted.slot,
                ttl_ms: u64::try_from(cfg.ttl.as_millis()).unwrap_or(u64::MAX),
                limit: cfg.limit,
            };
            let text =
                serde_json::to_string(&object).map_err(|e| format!("cannot encode JSON ({e})"))?;
            print_token(&text)
        }
        None => print_token(granted.token.as_str()),
    }
}

/// Print `line` on stdout, flushed, or say why nobody will read it.
fn print_token(line: &str) -> Result<(), String> {
    if stdout_was_closed() {
        return Err(
            "cannot print the token: stdout is closed (run acquire with its output captured, \
             e.g. TOKEN=$(distlock acquire ...), or use --env-file)"
                .into(),
        );
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot print the token ({e})"))
}

/// Whether distlock was started with its stdout closed (`>&-`). Rust's runtime then puts
/// /dev/null in its place, opened read-write, before `main`, so writes seem to succeed; a
/// shell's `>/dev/null` opens it write-only (a token thrown away on purpose is the user's
/// choice).
fn stdout_was_closed() -> bool {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let stdout = std::io::stdout();
    let read_write = fcntl(&stdout, FcntlArg::F_GETFL)
        .map(|flags| OFlag::from_bits_truncate(flags) & OFlag::O_ACCMODE == OFlag::O_RDWR)
        .unwrap_or(false);
    read_write
        && nix::sys::stat::fstat(&stdout).is_ok_and(|st| {
            (st.st_mode & libc::S_IFMT) == libc::S_IFCHR && st.st_rdev == libc::makedev(1, 3)
        })
}

/// Release a lock whose token nobody will learn, and say what became of it (the end of a
/// sentence about the lock). Not cancellable: a signal that already arrived must not stop it.
fn give_back(
    lock: &mut dyn Lock,
    token: &Token,
    timeout: std::time::Duration,
    ttl: std::time::Duration,
) -> String {
    match lock.release(token, &Budget::within(timeout)) {
        Ok(Ownership::Held) => "was released".into(),
        Ok(Ownership::NotHeld) => "was already gone (expired or broken)".into(),
        Err(e) => format!(
            "could not be released ({e}); it expires by itself within {}",
            crate::text::duration(ttl)
        ),
    }
}

/// The command line of process `pid`, if readable.
fn cmdline(pid: u32) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| {
            bytes
                .split(|b| *b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| std::ffi::OsStr::from_bytes(w).to_owned())
                .collect()
        })
        .unwrap_or_default()
}
