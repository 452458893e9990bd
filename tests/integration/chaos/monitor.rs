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
    /// Waiters in line (`ZCARD :queue`), and the PTTL of `:queue`.
    pub(super) waiting: i64,
    pub(super) line_pttl: i64,
}

/// Sample until `stop`; a connection that fails is replaced (the server restarts).
pub(super) fn monitor(url: &str, stop: &AtomicBool) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut con: Option<redis::Connection> = None;
    while !stop.load(Ordering::SeqCst) {
        if con.is_none() {
            con = connect(url);
        }
        if let Some(c) = con.as_mut() {
            let sent = now_ns();
            match sample(c) {
                Some(keys) => samples.push(Sample {
                    sent,
                    recv: now_ns(),
                    keys,
                }),
                None => con = None,
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    samples
}

/// Commands per key in a sample.
const PER_KEY: usize = 4;

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
fn sample(con: &mut redis::Connection) -> Option<Vec<KeyView>> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    pipe.cmd("TIME");
    for k in &KEYS {
        let key = lock_key(k.name);
        if k.is_mutex() {
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
    if values.len() != 1 + PER_KEY * KEYS.len() {
        return None;
    }
    let mut values = values.into_iter();
    let time: Vec<u64> = redis::from_redis_value(values.next()?).ok()?;
    let server_ms = time.first()? * 1000 + time.get(1)? / 1000;
    let mut keys = Vec::new();
    for k in &KEYS {
        let holders = if k.is_mutex() {
            redis::from_redis_value::<Option<String>>(values.next()?)
                .ok()?
                .into_iter()
                .collect()
        } else {
            let flat: Vec<String> = redis::from_redis_value(values.next()?).ok()?;
            flat.chunks(2)
                .filter(|pair| {
                    pair.get(1)
                        .and_then(|score| score.parse::<f64>().ok())
                        .is_some_and(|expiry| expiry > server_ms as f64)
                })
                .map(|pair| pair[0].clone())
                .collect()
        };
        let mut int = || redis::from_redis_value::<i64>(values.next()?).ok();
        let (pttl, waiting, line_pttl) = (int()?, int()?, int()?);
        keys.push(KeyView {
            holders,
            pttl,
            waiting,
            line_pttl,
        });
    }
    Some(keys)
}
