//! The monitor: samples the keys in Redis every 20ms, on a connection of its own, so that the
//! checker can compare the commands' stamps with what the server said about their locks (the
//! mutex's token, the semaphore's live slots) and their lines. One monitor per server: a
//! Redlock's nodes are sampled each on its own, and the checker combines their views.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::now_ns;
use super::plan::KEYS;
use crate::fixtures::lock_key;

/// One look at every key, read in one MULTI (allowed during `CLIENT PAUSE WRITE`), sent at
/// `sent` and answered at `recv`: the server's clock, and per key (in the order of [`KEYS`])
/// what holds it and who waits.
pub(super) struct Sample {
    pub(super) sent: u64,
    pub(super) recv: u64,
    /// The server read (one server's, or a followed primary's URL; empty on a Cluster, whose
    /// keys are read where their slots are), for the checker's messages.
    pub(super) from: String,
    pub(super) keys: Vec<KeyView>,
}

/// One key in a sample.
pub(super) struct KeyView {
    /// The tokens that held the key at the sample's instant: the mutex's, or those of the
    /// semaphore's slots that had not expired on the server's clock (a slot past its expiry
    /// stays in `:slots` until a script purges it, but it is no one's any more: renewals
    /// refuse it).
    pub(super) holders: Vec<String>,
    /// PTTL of the key that carries the holders' expiry: the mutex key, or `:slots`.
    pub(super) pttl: i64,
    /// A shared key: whether a writer (not the readers' mark) held the mutex.
    pub(super) writer: bool,
    /// Waiters in line (`ZCARD :queue`), and the PTTL of `:queue`.
    pub(super) waiting: i64,
    pub(super) line_pttl: i64,
}

/// What a monitor samples.
pub(super) enum Source {
    /// One server.
    Url(String),
    /// The primary the sentinels name, asked before every sample: the monitor follows a
    /// failover as soon as the sentinels do (the old primary, until demoted, is not sampled).
    Sentinel {
        sentinels: Vec<String>,
        service: String,
    },
    /// A Cluster's nodes (port, URL): each key is read where its slot is served, following
    /// MOVED and ASK; a key whose keys are split by a migration (TRYAGAIN) leaves that sample
    /// out.
    Cluster { nodes: Vec<(u16, String)> },
}

/// Sample until `stop`; a connection that fails is replaced (the server restarts).
pub(super) fn monitor(source: &Source, stop: &AtomicBool) -> Vec<Sample> {
    match source {
        Source::Url(url) => follow(stop, || Some(url.clone())),
        Source::Sentinel { sentinels, service } => {
            let mut asked: Option<redis::Connection> = None;
            let mut next = 0;
            follow(stop, || {
                for _ in 0..sentinels.len() {
                    if asked.is_none() {
                        asked = connect(&sentinels[next % sentinels.len()]);
                    }
                    if let Some(c) = asked.as_mut() {
                        let _ = c.set_read_timeout(Some(Duration::from_millis(300)));
                        let named: Option<Option<(String, String)>> = redis::cmd("SENTINEL")
                            .arg("GET-MASTER-ADDR-BY-NAME")
                            .arg(service)
                            .query(c)
                            .ok();
                        if let Some(Some((host, port))) = named {
                            return Some(format!("redis://{host}:{port}"));
                        }
                    }
                    asked = None;
                    next += 1;
                }
                None
            })
        }
        Source::Cluster { nodes } => cluster(nodes, stop),
    }
}

/// Sample the server at the URL `locate` gives before each sample.
fn follow(stop: &AtomicBool, mut locate: impl FnMut() -> Option<String>) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut con: Option<(String, redis::Connection)> = None;
    while !stop.load(Ordering::SeqCst) {
        if let Some(url) = locate() {
            if con.as_ref().is_none_or(|(at, _)| *at != url) {
                con = connect(&url).map(|c| (url, c));
            }
        }
        if let Some((at, c)) = con.as_mut() {
            let sent = now_ns();
            match sample(c) {
                Some(keys) => samples.push(Sample {
                    sent,
                    recv: now_ns(),
                    from: at.clone(),
                    keys,
                }),
                None => con = None,
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    samples
}

/// Reads one key's view where its slot is served: the server's clock, the holders (the
/// mutex's value, or the semaphore's slots with their scores), their expiry, the line and its
/// expiry. EVAL_RO: allowed during `CLIENT PAUSE WRITE`, like the MULTI of one server. A shared
/// key ('r'): the readers' slots as holders, and the mutex's value (a writer's token, or the
/// readers' mark) last; the expiry is the writer's if one holds, else the slots'.
const CLUSTER_READ: &str = r#"
local t = redis.call('TIME')
local h
if ARGV[1] == 'm' then
  local v = redis.call('GET', KEYS[1])
  if v then h = {v} else h = {} end
elseif ARGV[1] == 'r' then
  local slots = KEYS[1] .. ':slots'
  local w = redis.call('GET', KEYS[1])
  local pttl
  if w and w ~= 'distlock:shared' then pttl = redis.call('PTTL', KEYS[1]) else pttl = redis.call('PTTL', slots) end
  return {t[1], t[2], pttl, redis.call('ZCARD', KEYS[2]), redis.call('PTTL', KEYS[2]),
    redis.call('ZRANGE', slots, 0, -1, 'WITHSCORES'), w}
else
  h = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
end
return {t[1], t[2], redis.call('PTTL', KEYS[1]), redis.call('ZCARD', KEYS[2]), redis.call('PTTL', KEYS[2]), h}
"#;

/// The value the scripts keep in a shared key's mutex while it has readers (never a token).
pub(super) const SHARED_MARK: &str = "distlock:shared";

/// The Cluster's monitor: per key, the node last seen serving it (MOVED moves it; ASK reads
/// once on the target, after ASKING). A sample is kept only when every key answered.
fn cluster(nodes: &[(u16, String)], stop: &AtomicBool) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut cons: Vec<Option<redis::Connection>> = nodes.iter().map(|_| None).collect();
    let mut owner = vec![0usize; KEYS.len()];
    let index = |addr: &str| {
        let port: u16 = addr.rsplit(':').next()?.parse().ok()?;
        nodes.iter().position(|(p, _)| *p == port)
    };
    while !stop.load(Ordering::SeqCst) {
        let sent = now_ns();
        let mut keys = Vec::new();
        for (k, key) in KEYS.iter().enumerate() {
            let lock = lock_key(key.name);
            // (A shared key's script reads `:slots` beside the mutex, in the same slot.)
            let held = if key.is_mutex() || key.rw {
                lock.clone()
            } else {
                format!("{lock}:slots")
            };
            let queue = format!("{lock}:queue");
            let mut asking: Option<usize> = None;
            let mut view = None;
            for _ in 0..3 {
                let at = asking.unwrap_or(owner[k]);
                if cons[at].is_none() {
                    cons[at] = connect(&nodes[at].1);
                }
                let Some(c) = cons[at].as_mut() else { break };
                if asking.is_some() && redis::cmd("ASKING").query::<()>(c).is_err() {
                    cons[at] = None;
                    break;
                }
                // ASKING holds for the next command only: the read.
                let read = redis::cmd("EVAL_RO")
                    .arg(CLUSTER_READ)
                    .arg(2)
                    .arg(&held)
                    .arg(&queue)
                    .arg(if key.rw {
                        "r"
                    } else if key.is_mutex() {
                        "m"
                    } else {
                        "s"
                    })
                    .query::<redis::Value>(c);
                match read {
                    Ok(v) => {
                        view = if key.rw {
                            rw_view(v)
                        } else {
                            key_view(v, key.is_mutex())
                        };
                        break;
                    }
                    Err(e) => match (e.code(), e.redirect_node().and_then(|(a, _)| index(a))) {
                        (Some("MOVED"), Some(i)) => {
                            owner[k] = i;
                            asking = None;
                        }
                        (Some("ASK"), Some(i)) => asking = Some(i),
                        (Some(_), _) => break,
                        (None, _) => {
                            cons[at] = None;
                            break;
                        }
                    },
                }
            }
            match view {
                Some(v) => keys.push(v),
                None => break,
            }
        }
        if keys.len() == KEYS.len() {
            samples.push(Sample {
                sent,
                recv: now_ns(),
                from: String::new(),
                keys,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    samples
}

/// One key's view from [`CLUSTER_READ`]'s reply.
fn key_view(v: redis::Value, mutex: bool) -> Option<KeyView> {
    let (s, us, pttl, waiting, line_pttl, flat): (u64, u64, i64, i64, i64, Vec<String>) =
        redis::from_redis_value(v).ok()?;
    let server_ms = s * 1000 + us / 1000;
    let holders = if mutex {
        flat
    } else {
        live_slots(&flat, server_ms)
    };
    Some(KeyView {
        holders,
        pttl,
        writer: false,
        waiting,
        line_pttl,
    })
}

/// A shared key's view from [`CLUSTER_READ`]'s reply in mode 'r'.
fn rw_view(v: redis::Value) -> Option<KeyView> {
    type Read = (u64, u64, i64, i64, i64, Vec<String>, Option<String>);
    let (s, us, pttl, waiting, line_pttl, flat, mutex): Read = redis::from_redis_value(v).ok()?;
    Some(KeyView {
        writer: mutex.as_deref().is_some_and(|v| v != SHARED_MARK),
        holders: rw_holders(mutex, &flat, s * 1000 + us / 1000),
        pttl,
        waiting,
        line_pttl,
    })
}

/// A shared key's holders: the writer (the mutex's value, unless it is the readers' mark) and
/// the readers whose slots are live.
fn rw_holders(mutex: Option<String>, flat: &[String], server_ms: u64) -> Vec<String> {
    let mut holders: Vec<String> = mutex.into_iter().filter(|v| v != SHARED_MARK).collect();
    holders.extend(live_slots(flat, server_ms));
    holders
}

/// The tokens of `flat` (ZRANGE WITHSCORES) whose expiry is after `server_ms`.
fn live_slots(flat: &[String], server_ms: u64) -> Vec<String> {
    flat.chunks(2)
        .filter(|pair| {
            pair.get(1)
                .and_then(|score| score.parse::<f64>().ok())
                .is_some_and(|expiry| expiry > server_ms as f64)
        })
        .map(|pair| pair[0].clone())
        .collect()
}

/// Commands per key in a sample (a shared key's: 6).
fn per_key(k: &super::plan::Key) -> usize {
    if k.rw { 6 } else { 4 }
}

/// A connection of the checker's own to `url`, if it can be had within 300ms, whose requests
/// wait up to 5s: longer than the longest SIGSTOP, so a request sent into a stopped server is
/// answered when it resumes.
pub(super) fn connect(url: &str) -> Option<redis::Connection> {
    let con = redis::Client::open(url)
        .ok()?
        .get_connection_with_timeout(Duration::from_millis(300))
        .ok()?;
    let _ = con.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = con.set_write_timeout(Some(Duration::from_secs(5)));
    Some(con)
}

/// One MULTI: TIME, then per key its holders, their expiry, its line and the line's expiry.
///
/// `ROLE` first, in the same MULTI: a server the sentinels name that does not (yet, or any
/// more) answer as a primary is no evidence of what the primary holds (a replica may lag it by
/// hundreds of milliseconds on a loaded machine), and its sample is left out (`None`; the
/// connection is opened again, to whatever the sentinels name then).
fn sample(con: &mut redis::Connection) -> Option<Vec<KeyView>> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    pipe.cmd("ROLE");
    pipe.cmd("TIME");
    for k in &KEYS {
        let key = lock_key(k.name);
        if k.rw {
            let slots = format!("{key}:slots");
            pipe.cmd("GET")
                .arg(&key)
                .cmd("PTTL")
                .arg(&key)
                .cmd("ZRANGE")
                .arg(&slots)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .cmd("PTTL")
                .arg(&slots);
        } else if k.is_mutex() {
            pipe.cmd("GET").arg(&key).cmd("PTTL").arg(&key);
        } else {
            let slots = format!("{key}:slots");
            pipe.cmd("ZRANGE")
                .arg(&slots)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .cmd("PTTL")
                .arg(&slots);
        }
        let queue = format!("{key}:queue");
        pipe.cmd("ZCARD").arg(&queue).cmd("PTTL").arg(&queue);
    }
    let values = pipe.query::<Vec<redis::Value>>(con).ok()?;
    if values.len() != 2 + KEYS.iter().map(per_key).sum::<usize>() {
        return None;
    }
    let mut values = values.into_iter();
    let role: Vec<redis::Value> = redis::from_redis_value(values.next()?).ok()?;
    let role: String = redis::from_redis_value(role.into_iter().next()?).ok()?;
    if role != "master" {
        return None;
    }
    let time: Vec<u64> = redis::from_redis_value(values.next()?).ok()?;
    let server_ms = time.first()? * 1000 + time.get(1)? / 1000;
    let mut keys = Vec::new();
    for k in &KEYS {
        if k.rw {
            let mutex: Option<String> = redis::from_redis_value(values.next()?).ok()?;
            let mutex_pttl: i64 = redis::from_redis_value(values.next()?).ok()?;
            let flat: Vec<String> = redis::from_redis_value(values.next()?).ok()?;
            let slots_pttl: i64 = redis::from_redis_value(values.next()?).ok()?;
            let writer = mutex.as_deref().is_some_and(|v| v != SHARED_MARK);
            let mut int = || redis::from_redis_value::<i64>(values.next()?).ok();
            let (waiting, line_pttl) = (int()?, int()?);
            keys.push(KeyView {
                holders: rw_holders(mutex, &flat, server_ms),
                pttl: if writer { mutex_pttl } else { slots_pttl },
                writer,
                waiting,
                line_pttl,
            });
            continue;
        }
        let holders = if k.is_mutex() {
            redis::from_redis_value::<Option<String>>(values.next()?)
                .ok()?
                .into_iter()
                .collect()
        } else {
            let flat: Vec<String> = redis::from_redis_value(values.next()?).ok()?;
            live_slots(&flat, server_ms)
        };
        let mut int = || redis::from_redis_value::<i64>(values.next()?).ok();
        let (pttl, waiting, line_pttl) = (int()?, int()?, int()?);
        keys.push(KeyView {
            holders,
            pttl,
            writer: false,
            waiting,
            line_pttl,
        });
    }
    Some(keys)
}
