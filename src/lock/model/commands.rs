//! The Redis commands the scripts call, exactly those (`redis.call` in `lock/lua/*.lua`), each
//! in the forms the scripts use, with Redis' replies, its `WRONGTYPE` and the error texts a
//! script could meet (Redis 7.0's, checked against 7.0.15). A command or a form it does not
//! model panics: a script that starts needing one must make the model grow, never pass by.

use super::keyspace::{Entry, Keyspace, Score, Value, format_score, parse_int, parse_score};

/// A reply in RESP2 terms, as a script sees a command's, and as a client sees a script's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Resp {
    Int(i64),
    Bulk(Vec<u8>),
    /// A nil bulk string (Lua `false`).
    Nil,
    /// A status (`+OK`): the table `{ok = ...}` in Lua.
    Status(String),
    /// An error, its code first (`WRONGTYPE Operation against ...`).
    Error(String),
    Array(Vec<Resp>),
}

impl Resp {
    fn bulk(text: impl Into<Vec<u8>>) -> Resp {
        Resp::Bulk(text.into())
    }

    fn error(text: &str) -> Resp {
        Resp::Error(text.to_owned())
    }
}

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
pub const MIN_MAX: &str = "ERR min or max is not a float";
pub const SYNTAX: &str = "ERR syntax error";
/// What a script gets for a command called with too few or too many arguments.
pub const ARITY: &str = "ERR Wrong number of args calling Redis command from script";

/// The instants a command counts from (see `ScriptTime` in `lua.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// When the script started (ms): what key lookups expire by, in every Redis version since
    /// 2.6 (redis#1525).
    pub lookup_ms: u64,
    /// What the running clock reads (µs) for `TIME`, relative expiries (`SET PX`, `PEXPIRE`),
    /// the "already expired" check and `PTTL`: the script's start from Redis 7.2 on, the time
    /// of the command in 7.0: `start_us` for the first `switch_after` readings, then `later_us`.
    pub start_us: u64,
    pub later_us: u64,
    pub switch_after: usize,
    /// How many times a command read it.
    pub readings: usize,
}

impl Clock {
    /// Read the running clock (µs).
    fn read_us(&mut self) -> u64 {
        let at = if self.readings < self.switch_after {
            self.start_us
        } else {
            self.later_us
        };
        self.readings += 1;
        at
    }

    fn read_ms(&mut self) -> i64 {
        (self.read_us() / 1000) as i64
    }
}

/// What one command did beside its reply: the messages it published.
pub type Published = Vec<(Vec<u8>, Vec<u8>)>;

/// Run one command (`argv[0]` its name) on `ks` at `clock`.
pub fn call(
    ks: &mut Keyspace,
    clock: &mut Clock,
    argv: &[Vec<u8>],
    published: &mut Published,
) -> Resp {
    let name = String::from_utf8_lossy(&argv[0]).to_ascii_uppercase();
    // Redis' arity: N exactly, or -N at least N (the name counted).
    let arity: i64 = match name.as_str() {
        "TIME" => 1,
        "GET" | "PTTL" | "HGETALL" | "ZCARD" => 2,
        "HGET" | "ZSCORE" | "PUBLISH" => 3,
        "DEL" | "EXISTS" => -2,
        "SET" | "PEXPIRE" | "PEXPIREAT" | "HDEL" | "ZREM" | "ZRANK" => -3,
        "HSET" | "ZADD" | "ZRANGE" | "ZRANGEBYSCORE" => -4,
        "LPUSH" => -3,
        "XADD" => panic!(
            "the model Redis has no streams: a script recorded a history (--history), which \
             the model does not cover"
        ),
        _ => panic!(
            "the model Redis has no command {name:?} (a script calls a command the model does \
             not implement: add it to lock/model/commands.rs)"
        ),
    };
    let argc = argv.len() as i64;
    if (arity > 0 && argc != arity) || (arity < 0 && argc < -arity) {
        return Resp::error(ARITY);
    }
    let args = &argv[1..];
    let now = clock.lookup_ms;
    match name.as_str() {
        "TIME" => {
            let now = clock.read_us();
            Resp::Array(vec![
                Resp::bulk((now / 1_000_000).to_string()),
                Resp::bulk((now % 1_000_000).to_string()),
            ])
        }
        "GET" => match ks.lookup(&args[0], now) {
            None => Resp::Nil,
            Some(Entry {
                value: Value::Str(s),
                ..
            }) => Resp::Bulk(s.clone()),
            Some(_) => Resp::error(WRONGTYPE),
        },
        "SET" => set(ks, clock, args),
        "DEL" => Resp::Int(args.iter().filter(|k| ks.remove(k, now)).count() as i64),
        "EXISTS" => Resp::Int(args.iter().filter(|k| ks.lookup(k, now).is_some()).count() as i64),
        "PTTL" => match ks.lookup(&args[0], now) {
            None => Resp::Int(-2),
            Some(Entry {
                expires_at: None, ..
            }) => Resp::Int(-1),
            Some(Entry {
                expires_at: Some(when),
                ..
            }) => Resp::Int((*when as i64 - clock.read_ms()).max(0)),
        },
        "PEXPIRE" | "PEXPIREAT" => {
            if args.len() != 2 {
                panic!("the model Redis has no {name} options (NX, XX, GT, LT): {argv:?}");
            }
            let Some(n) = parse_int(&args[1]) else {
                return Resp::error(NOT_INTEGER);
            };
            // (Redis reads the clock twice here, for the base and for the check: one reading
            // in the model.)
            let running = clock.read_ms();
            let base = if name == "PEXPIRE" { running } else { 0 };
            let Some(when) = n.checked_add(base) else {
                return Resp::Error(format!(
                    "ERR invalid expire time in '{}' command",
                    name.to_ascii_lowercase()
                ));
            };
            match ks.lookup(&args[0], now) {
                None => Resp::Int(0),
                // Already past: deleted (`checkAlreadyExpired`, on a primary).
                Some(_) if when <= running => {
                    ks.remove(&args[0], now);
                    Resp::Int(1)
                }
                Some(entry) => {
                    entry.expires_at = Some(when as u64);
                    Resp::Int(1)
                }
            }
        }
        "HGET" | "HGETALL" | "HSET" | "HDEL" => hash(ks, now, &name, args),
        "ZADD" | "ZREM" | "ZSCORE" | "ZCARD" | "ZRANK" | "ZRANGE" | "ZRANGEBYSCORE" => {
            zset(ks, now, &name, args)
        }
        "LPUSH" => {
            let mut new = Vec::new();
            let items = match ks.lookup(&args[0], now) {
                None => &mut new,
                Some(Entry {
                    value: Value::List(items),
                    ..
                }) => items,
                Some(_) => return Resp::error(WRONGTYPE),
            };
            // Each element in turn at the head: `LPUSH k a b` leaves [b, a].
            for item in &args[1..] {
                items.insert(0, item.clone());
            }
            let len = items.len() as i64;
            if !new.is_empty() {
                ks.insert(
                    &args[0],
                    Entry {
                        value: Value::List(new),
                        expires_at: None,
                    },
                );
            }
            Resp::Int(len)
        }
        "PUBLISH" => {
            published.push((args[0].clone(), args[1].clone()));
            Resp::Int(0)
        }
        _ => unreachable!(),
    }
}

/// `SET key value` and `SET key value PX ms`.
fn set(ks: &mut Keyspace, clock: &mut Clock, args: &[Vec<u8>]) -> Resp {
    let expires_at = match &args[2..] {
        [] => None,
        [px, ms] if px.eq_ignore_ascii_case(b"PX") => {
            let Some(ms) = parse_int(ms) else {
                return Resp::error(NOT_INTEGER);
            };
            match clock.read_ms().checked_add(ms) {
                Some(when) if ms > 0 => Some(when as u64),
                _ => return Resp::error("ERR invalid expire time in 'set' command"),
            }
        }
        other => panic!("the model Redis has no SET form {other:?} (only SET k v [PX ms])"),
    };
    ks.insert(
        &args[0],
        Entry {
            value: Value::Str(args[1].clone()),
            expires_at,
        },
    );
    Resp::Status("OK".into())
}

fn hash(ks: &mut Keyspace, now: u64, name: &str, args: &[Vec<u8>]) -> Resp {
    let key = &args[0];
    let fields = match ks.lookup(key, now) {
        None => None,
        Some(Entry {
            value: Value::Hash(fields),
            ..
        }) => Some(fields),
        Some(_) => return Resp::error(WRONGTYPE),
    };
    match name {
        "HGET" => fields
            .and_then(|f| f.iter().find(|(n, _)| *n == args[1]))
            .map_or(Resp::Nil, |(_, v)| Resp::Bulk(v.clone())),
        "HGETALL" => Resp::Array(
            fields
                .map(|f| {
                    f.iter()
                        .flat_map(|(n, v)| [Resp::Bulk(n.clone()), Resp::Bulk(v.clone())])
                        .collect()
                })
                .unwrap_or_default(),
        ),
        "HSET" => {
            if args.len() % 2 == 0 {
                return Resp::error("ERR wrong number of arguments for 'hset' command");
            }
            let mut added = 0;
            let mut new = Vec::new();
            let fields = match fields {
                Some(f) => f,
                None => &mut new,
            };
            for pair in args[1..].chunks(2) {
                match fields.iter_mut().find(|(n, _)| *n == pair[0]) {
                    Some((_, v)) => *v = pair[1].clone(),
                    None => {
                        fields.push((pair[0].clone(), pair[1].clone()));
                        added += 1;
                    }
                }
            }
            if !new.is_empty() {
                ks.insert(
                    key,
                    Entry {
                        value: Value::Hash(new),
                        expires_at: None,
                    },
                );
            }
            Resp::Int(added)
        }
        "HDEL" => {
            let Some(fields) = fields else {
                return Resp::Int(0);
            };
            let before = fields.len();
            fields.retain(|(n, _)| !args[1..].contains(n));
            let removed = (before - fields.len()) as i64;
            if fields.is_empty() {
                ks.remove(key, now);
            }
            Resp::Int(removed)
        }
        _ => unreachable!(),
    }
}

/// A `ZRANGEBYSCORE` bound: `(x` excludes x; `-inf`, `+inf`.
fn bound(text: &[u8]) -> Option<(f64, bool)> {
    match text.strip_prefix(b"(") {
        Some(rest) => Some((parse_score(rest)?, true)),
        None => Some((parse_score(text)?, false)),
    }
}

fn with_scores(members: &[(Score, Vec<u8>)], scores: bool) -> Resp {
    Resp::Array(
        members
            .iter()
            .flat_map(|(s, m)| {
                let mut out = vec![Resp::Bulk(m.clone())];
                if scores {
                    out.push(Resp::bulk(format_score(s.0)));
                }
                out
            })
            .collect(),
    )
}

/// The `WITHSCORES` flag after `args[3]`; any other option is not modelled.
fn scores_flag(name: &str, args: &[Vec<u8>]) -> bool {
    match &args[3..] {
        [] => false,
        [flag] if flag.eq_ignore_ascii_case(b"WITHSCORES") => true,
        other => panic!("the model Redis has no {name} options {other:?} (only WITHSCORES)"),
    }
}

fn zset(ks: &mut Keyspace, now: u64, name: &str, args: &[Vec<u8>]) -> Resp {
    let key = &args[0];
    let members = match ks.lookup(key, now) {
        None => None,
        Some(Entry {
            value: Value::ZSet(members),
            ..
        }) => Some(members),
        Some(_) => return Resp::error(WRONGTYPE),
    };
    let empty = Vec::new();
    match name {
        "ZADD" => {
            if let Some(flag) = args[1..].iter().find(|a| {
                let a = a.to_ascii_uppercase();
                matches!(
                    a.as_slice(),
                    b"NX" | b"XX" | b"GT" | b"LT" | b"CH" | b"INCR"
                )
            }) {
                panic!(
                    "the model Redis has no ZADD flag {:?}",
                    String::from_utf8_lossy(flag)
                );
            }
            if (args.len() - 1) % 2 != 0 {
                return Resp::error(SYNTAX);
            }
            let mut pairs = Vec::new();
            for pair in args[1..].chunks(2) {
                let Some(score) = parse_score(&pair[0]) else {
                    return Resp::error(NOT_FLOAT);
                };
                pairs.push((Score(score), pair[1].clone()));
            }
            let mut new = Vec::new();
            let members = match members {
                Some(m) => m,
                None => &mut new,
            };
            let mut added = 0;
            for (score, member) in pairs {
                match members.iter().position(|(_, m)| *m == member) {
                    Some(i) => members[i].0 = score,
                    None => {
                        members.push((score, member));
                        added += 1;
                    }
                }
            }
            members.sort();
            if !new.is_empty() {
                ks.insert(
                    key,
                    Entry {
                        value: Value::ZSet(new),
                        expires_at: None,
                    },
                );
            }
            Resp::Int(added)
        }
        "ZREM" => {
            let Some(members) = members else {
                return Resp::Int(0);
            };
            let before = members.len();
            members.retain(|(_, m)| !args[1..].contains(m));
            let removed = (before - members.len()) as i64;
            if members.is_empty() {
                ks.remove(key, now);
            }
            Resp::Int(removed)
        }
        "ZSCORE" => members
            .and_then(|m| m.iter().find(|(_, m)| *m == args[1]))
            .map_or(Resp::Nil, |(s, _)| Resp::bulk(format_score(s.0))),
        "ZCARD" => Resp::Int(members.map_or(0, |m| m.len() as i64)),
        "ZRANK" => {
            if args.len() != 2 {
                panic!("the model Redis has no ZRANK WITHSCORE");
            }
            members
                .and_then(|m| m.iter().position(|(_, m)| *m == args[1]))
                .map_or(Resp::Nil, |i| Resp::Int(i as i64))
        }
        "ZRANGE" => {
            let scores = scores_flag(name, args);
            let (Some(start), Some(stop)) = (parse_int(&args[1]), parse_int(&args[2])) else {
                return Resp::error(NOT_INTEGER);
            };
            let members = members.map_or(&empty, |m| &*m);
            let len = members.len() as i64;
            let start = if start < 0 {
                (start + len).max(0)
            } else {
                start
            };
            let stop = if stop < 0 {
                stop + len
            } else {
                stop.min(len - 1)
            };
            if start > stop || start >= len {
                return Resp::Array(Vec::new());
            }
            with_scores(&members[start as usize..=stop as usize], scores)
        }
        "ZRANGEBYSCORE" => {
            let scores = scores_flag(name, args);
            let (Some((min, min_ex)), Some((max, max_ex))) = (bound(&args[1]), bound(&args[2]))
            else {
                return Resp::error(MIN_MAX);
            };
            let members = members.map_or(&empty, |m| &*m);
            let inside: Vec<(Score, Vec<u8>)> = members
                .iter()
                .filter(|(s, _)| {
                    let s = s.0;
                    (if min_ex { s > min } else { s >= min })
                        && (if max_ex { s < max } else { s <= max })
                })
                .cloned()
                .collect();
            with_scores(&inside, scores)
        }
        _ => unreachable!(),
    }
}
