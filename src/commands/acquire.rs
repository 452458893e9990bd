//! `distlock acquire`: take a lock and hand its token over, for locks that span several steps:
//! on stdout, or with `--env-file` appended to a file that later CI steps load.

use std::io::Write;

use crate::backend::{BackendError, Budget};
use crate::config::{AcquireConfig, TakeConfig};
use crate::envfile::EnvFile;
use crate::error::Error;
use crate::exit::{Code, Exit};
use crate::lock::{self, Extended, Holder, Lock, Ownership, Token};
use crate::output::{Ev, Msg, Output};
use crate::session::keys::{HeldKey, held_keys};
use crate::session::{self, Reentry, Session, Taken, signal_name};

/// Acquire, then print the token on stdout (and nothing else there), or append the lock's
/// values to the `--env-file` (and print nothing: the token stays out of CI logs).
pub fn acquire(cfg: AcquireConfig, out: &Output) -> Result<Exit, Error> {
    let AcquireConfig {
        take: cfg,
        env_file,
        json,
    } = cfg;
    let lock = lock::open_set(&cfg.members(), &cfg.topology);
    acquire_with(&cfg, &env_file, json, lock, out)
}

/// Acquire on `lock` (opened by [`acquire`], or the model Redis's in tests).
fn acquire_with(
    cfg: &TakeConfig,
    env_file: &Option<EnvFile>,
    json: bool,
    mut lock: Box<dyn Lock>,
    out: &Output,
) -> Result<Exit, Error> {
    let timeout = cfg.topology.timeout();
    // A process that already holds this lock (a run around us, or an earlier step's
    // --env-file): hand out what it holds, take nothing.
    // A set takes its keys (reentry is for one key), but never one that the run that started
    // it holds: it would wait for its own parent.
    if cfg.is_set() {
        let inherited = crate::session::reenter::inherited();
        let held: Vec<String> = (lock.members().into_iter())
            .filter(|m| inherited.iter().any(|h| h.lock == m.id))
            .map(|m| m.name.key().to_owned())
            .collect();
        if !held.is_empty() {
            return Err(Error::Usage(format!(
                "the run that started this one holds {}: acquire of a set cannot reenter it \
                 (it would wait for its parent for ever); use that run's DISTLOCK_KEY<i>, \
                 DISTLOCK_FENCE<i> and DISTLOCK_TOKEN<i>",
                crate::text::quote(&held.join(" "))
            )));
        }
    }
    let reentry = if cfg.is_set() {
        None
    } else {
        session::reentry(lock.as_mut(), cfg, || Ok(()), out)?
    };
    match reentry {
        Some(Reentry::Reenter { held, fence }) => {
            out.verbose(
                Ev::Reentered,
                format!(
                    "lock {} is already held by the process that started this one; handing out its token",
                    crate::text::quote(cfg.name.key())
                ),
            );
            let granted = Granted {
                keys: Vec::new(),
                token: &Token::from_text(&held.token),
                fence,
                // The ancestor's slot, as its run gave it to its command.
                slot: std::env::var("DISTLOCK_SLOT")
                    .ok()
                    .and_then(|s| s.parse().ok()),
            };
            return match hand_over(cfg, env_file, json, &granted) {
                Ok(()) => Ok(Exit::from(Code::Success)),
                Err(why) => {
                    // The lock is the ancestor's: it stays, and so does its token there.
                    out.error(Ev::HandOverFailed, Msg::new(why).exit(Code::IoError.get()));
                    Ok(Exit::from(Code::IoError))
                }
            };
        }
        Some(Reentry::Exit(exit)) => return Ok(exit),
        None => {}
    }
    let mut session = Session::start(lock)?;
    // The lock belongs to whoever called us (a CI step's shell): name that process.
    let parent = nix::unistd::getppid().as_raw().unsigned_abs();
    let mut holder = Holder::this_process("acquire", parent, &cmdline(parent), cfg.note.as_deref());
    holder.set = cfg.set_field();
    let grant = match session.take(cfg, &holder, out)? {
        Taken::Granted(grant) => grant,
        Taken::Exit(exit) => return Ok(exit),
    };
    let cancel = session.cancel().clone();
    let key = cfg.quoted();
    // A signal that came while we took the lock raised the cancel flag, which would stop the
    // extension before it is sent: no extension then, the signal path below gives it back.
    let mut interrupted = session.interrupted();
    // The attempt took a short claim; nothing renews an acquired lock, so make it the full TTL
    // before anyone learns the token.
    if interrupted.is_none() && grant.validity.ttl < cfg.ttl {
        let extended = session.lock().extend(
            &grant.token,
            cfg.ttl,
            &Budget::within(timeout).cancellable(&cancel),
        );
        // Stopped by a signal: the signal path below.
        if matches!(extended, Err(BackendError::Interrupted { .. })) {
            interrupted = session.interrupted();
        }
        let lock = session.lock();
        if interrupted.is_none()
            && !matches!(extended, Ok(Extended::Held(_) | Extended::Replaced(..)))
        {
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
        session::warn_failed_nodes(lock, out);
    }
    // A signal that arrived while we took the lock, or a token we cannot hand over (a stdout
    // nobody reads, an env file we cannot write): nobody would ever learn the token, so the
    // lock must not stay behind.
    if interrupted.is_none() {
        interrupted = session.interrupted();
    }
    if let Some(signal) = interrupted {
        let released = give_back(session.lock(), &grant.token, timeout, cfg.ttl);
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
        keys: if cfg.is_set() {
            held_keys(session.lock_ref(), &grant, cfg)
        } else {
            Vec::new()
        },
        token: &grant.token,
        fence: grant.fence,
        slot: grant.slot,
    };
    if let Err(why) = hand_over(cfg, env_file, json, &granted) {
        let released = give_back(session.lock(), &grant.token, timeout, cfg.ttl);
        out.error(
            Ev::HandOverFailed,
            Msg::new(format!("{why}; lock {key} {released}")).exit(Code::IoError.get()),
        );
        return Ok(Exit::from(Code::IoError));
    }
    let held = format!(
        "lock {key} is held for {} unless renewed",
        crate::text::duration(cfg.ttl)
    );
    match env_file {
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
    Ok(Exit::from(Code::Success))
}

/// What `acquire` hands over.
struct Granted<'a> {
    /// A set's keys, in the order typed (empty for one key).
    keys: Vec<HeldKey>,
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

/// `acquire --json`'s object for a set: every key, in the order typed.
#[derive(serde::Serialize)]
struct SetJson<'a> {
    keys: Vec<&'a str>,
    locks: Vec<KeyJson<'a>>,
    ttl_ms: u64,
}

/// One key of [`SetJson`].
#[derive(serde::Serialize)]
struct KeyJson<'a> {
    key: &'a str,
    redis_key: String,
    token: &'a str,
    fence: u64,
    mode: &'static str,
}

/// Hand the token over: on stdout (bare, or as JSON), or appended to the env file. The error
/// says why nobody will learn the token.
fn hand_over(
    cfg: &TakeConfig,
    env_file: &Option<EnvFile>,
    json: bool,
    granted: &Granted<'_>,
) -> Result<(), String> {
    if !granted.keys.is_empty() {
        return hand_over_set(cfg, env_file, &granted.keys);
    }
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

/// A set's keys, fences and tokens: appended to the env file, or as JSON on stdout
/// (the configuration refuses a set without either).
fn hand_over_set(
    cfg: &TakeConfig,
    env_file: &Option<EnvFile>,
    keys: &[HeldKey],
) -> Result<(), String> {
    match env_file {
        Some(file) => {
            let lines: Vec<crate::envfile::SetKey> = keys
                .iter()
                .map(|k| crate::envfile::SetKey {
                    key: k.key.clone(),
                    fence: k.fence,
                    mode: crate::session::reenter::mode(k.limit),
                    token: k.token.as_str().to_owned(),
                })
                .collect();
            file.append_set(&lines, cfg.ttl).map_err(|e| {
                format!(
                    "cannot write to --env-file {} ({e})",
                    crate::text::quote(&file.path().display().to_string())
                )
            })
        }
        None => {
            let object = SetJson {
                keys: keys.iter().map(|k| k.key.as_str()).collect(),
                locks: keys
                    .iter()
                    .map(|k| KeyJson {
                        key: &k.key,
                        redis_key: lock::LockName::new(cfg.name.prefix(), &k.key)
                            .lock_key()
                            .to_owned(),
                        token: k.token.as_str(),
                        fence: k.fence,
                        mode: crate::session::reenter::mode(k.limit),
                    })
                    .collect(),
                ttl_ms: u64::try_from(cfg.ttl.as_millis()).unwrap_or(u64::MAX),
            };
            let text =
                serde_json::to_string(&object).map_err(|e| format!("cannot encode JSON ({e})"))?;
            print_token(&text)
        }
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

#[cfg(test)]
mod tests {
    //! `acquire` over the model Redis, each test in a process of its own (signal handlers are
    //! process-wide).

    use super::acquire_with;
    use crate::config::{AcquireConfig, CommandConfig};
    use crate::exit::Exit;
    use crate::lock::model::ScriptLock;
    use crate::session::testing::{alone, decided, out, signal_while_taking};

    fn config() -> AcquireConfig {
        match decided(&["acquire", "-k", "k", "--ttl", "60s"]) {
            CommandConfig::Acquire(acquire) => acquire,
            _ => unreachable!("an acquire"),
        }
    }

    #[test]
    fn the_token_is_handed_over_and_the_lock_kept_for_its_ttl() {
        // (The token goes to the test process's stdout.)
        alone(
            module_path!(),
            "the_token_is_handed_over_and_the_lock_kept_for_its_ttl",
            || {
                let lock = ScriptLock::new();
                let server = lock.client();
                let cfg = config();
                let exit = acquire_with(&cfg.take, &None, false, Box::new(lock), &out()).unwrap();
                assert_eq!(exit, Exit::Code(0));
                let state = server.state();
                assert_eq!(state.holders.len(), 1, "the lock stays held");
                // Extended from the short claim to the TTL.
                let crate::lock::HolderTtl::Expires(left) = state.holders[0].ttl else {
                    panic!("{state:?}");
                };
                assert!(left > std::time::Duration::from_secs(50), "{left:?}");
            },
        );
    }

    #[test]
    fn a_signal_while_taking_gives_the_lock_back() {
        let Some(stderr) = alone(
            module_path!(),
            "a_signal_while_taking_gives_the_lock_back",
            || {
                let lock = ScriptLock::new();
                let server = lock.client();
                signal_while_taking(&server, nix::sys::signal::Signal::SIGINT);
                let cfg = config();
                let exit = acquire_with(&cfg.take, &None, false, Box::new(lock), &out()).unwrap();
                assert_eq!(exit, Exit::Signal(libc::SIGINT));
                assert!(server.holders().is_empty(), "the lock was given back");
            },
        ) else {
            return;
        };
        assert!(
            stderr.contains("interrupted by SIGINT just after acquiring lock"),
            "{stderr}"
        );
        assert!(stderr.contains("it was released"), "{stderr}");
    }
}
