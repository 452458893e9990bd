//! The model's keyspace: strings, hashes, sorted sets and lists with an optional expiry in ms, expired
//! lazily as Redis does (a key is gone once `now > when`; at `now == when` it is alive with a
//! PTTL of 0). Cheap to clone, hashable and comparable, so that an explorer can keep states.
//!
//! Streams are not modelled: they hold only a lock's history, which the scripts write only when
//! asked to (`--history`); a script that reaches `XADD` fails loudly (see `commands.rs`).

use std::collections::BTreeMap;

/// A sorted set's score: a double (never NaN: Redis refuses it) in IEEE total order, hashable
/// by its bits.
#[derive(Clone, Copy, Debug)]
pub struct Score(pub f64);

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl std::hash::Hash for Score {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// A value of one of the types the scripts use.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    Str(Vec<u8>),
    /// Field/value pairs in insertion order: HGETALL's order in Redis' listpack encoding (a
    /// small hash; a big one, or one with a value over 64 bytes, is a hash table there, whose
    /// order differs; no script depends on the order).
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// Members ordered by (score, member), as Redis orders them.
    ZSet(Vec<(Score, Vec<u8>)>),
    /// Elements head first (`LPUSH` adds at the head, `LPOP`/`BLPOP` take the head): a
    /// waiter's doorbell. Never empty (Redis deletes an emptied list).
    List(Vec<Vec<u8>>),
}

/// A key's value and its expiry (absolute, in ms on the server's clock).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    pub value: Value,
    pub expires_at: Option<u64>,
}

/// The keys of one Redis database.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Keyspace {
    entries: BTreeMap<Vec<u8>, Entry>,
}

impl Keyspace {
    /// The entry at `key` as a command sees it at `now` (ms): an expired key is deleted first,
    /// as Redis' lazy expiry does on every lookup.
    pub fn lookup(&mut self, key: &[u8], now: u64) -> Option<&mut Entry> {
        if self
            .entries
            .get(key)
            .is_some_and(|e| e.expires_at.is_some_and(|when| now > when))
        {
            self.entries.remove(key);
        }
        self.entries.get_mut(key)
    }

    /// Write `entry` at `key` (replacing whatever was there).
    pub fn insert(&mut self, key: &[u8], entry: Entry) {
        self.entries.insert(key.to_vec(), entry);
    }

    /// Delete `key`; whether it existed (as seen at `now`).
    pub fn remove(&mut self, key: &[u8], now: u64) -> bool {
        self.lookup(key, now).is_some() && self.entries.remove(key).is_some()
    }

    /// Delete every key expired at `now` (what active expiry would eventually do; to a script
    /// there is no difference): the logical state at `now`, for comparing and hashing states.
    pub fn expire_all(&mut self, now: u64) {
        self.entries
            .retain(|_, e| e.expires_at.is_none_or(|when| now <= when));
    }

    /// `LPOP key` (the client's side of a doorbell, and what `BLPOP` does when it is served):
    /// the head element of the list at `key`, which is deleted once empty; None if there is no
    /// list there (or another type: the model's callers only pop doorbells).
    pub fn lpop(&mut self, key: &[u8], now: u64) -> Option<Vec<u8>> {
        let Some(Entry {
            value: Value::List(items),
            ..
        }) = self.lookup(key, now)
        else {
            return None;
        };
        let head = (!items.is_empty()).then(|| items.remove(0));
        if items.is_empty() {
            self.entries.remove(key);
        }
        head
    }

    /// Every key and its entry, in key order (expired ones included: see [`Self::expire_all`]).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.entries.iter().map(|(k, e)| (k.as_slice(), e))
    }
}

/// `%.<precision>g` of C's printf, which Redis (`%.17g`) and lua-cjson (`%.14g`) format
/// doubles with.
pub fn format_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s.to_owned()
        }
    };
    if exponent < -4 || exponent >= p as i64 {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exponent.abs())
    } else {
        let decimals = usize::try_from(p as i64 - 1 - exponent).unwrap_or(0);
        trim(&format!("{x:.decimals$}"))
    }
}

/// A score as Redis replies it (`d2string`): an integer when it is one and |x| < 2^52,
/// otherwise `%.17g`.
pub fn format_score(x: f64) -> String {
    const LIMIT: f64 = 4_503_599_627_370_496.0;
    if x > -LIMIT && x < LIMIT && x == (x as i64) as f64 && x != 0.0 {
        format!("{}", x as i64)
    } else {
        format_g(x, 17)
    }
}

/// Parse a score as Redis does (`strtod`, with `inf`/`+inf`/`-inf`); None for anything else.
pub fn parse_score(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?;
    match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" => return Some(f64::INFINITY),
        "-inf" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    if text.is_empty() || text.trim() != text {
        return None;
    }
    let x: f64 = text.parse().ok()?;
    (!x.is_nan()).then_some(x)
}

/// Parse an integer argument as Redis does (`string2ll`: no spaces, no `+`, no leading zeros).
pub fn parse_int(text: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(text).ok()?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || (text.starts_with('-') && digits == "0")
    {
        return None;
    }
    text.parse().ok()
}
