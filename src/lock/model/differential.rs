//! The differential test: seeded sequences of the script calls distlock makes (built by the
//! real argument builders), run step by step on a real `redis-server` and on the model, which
//! must give the same replies and leave the same keyspace.
//!
//! Each step starts the model from a snapshot of the real server's keyspace (taken atomically
//! by a script), so a difference shows at the step that makes it; a connection subscribed to
//! every channel collects what the step published, which must be what the model's run did. The real server's clock
//! cannot be set, so the step runs inside `MULTI`/`EXEC` between two `TIME`s, and the model
//! runs at that time: when both fall in one millisecond, every millisecond the script sees is
//! known and must match exactly; fences and tickets (microseconds) must match within the
//! bracket. A step whose bracket spans a millisecond boundary must match one of the script
//! times Redis 7.0 allows (frozen at either end, or running on between them); the few that
//! match none are counted, not failed (the script may have crossed the boundary between two of
//! its commands). `DISTLOCK_MODEL_SEED=N` replays a sequence; `DISTLOCK_MODEL_STEPS=N` sets
//! its length.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::keyspace::parse_score;
use super::*;
use crate::backend::Script;
use crate::clock::Moment;
use crate::lock::protocol::{
    ACQUIRE, HOLDS, INSPECT, RELEASE, RENEW, acquire_args, decode_answer, decode_state, ownership,
    release_args, renew_args,
};
use crate::lock::single::Held;
use crate::lock::{AfterRun, Holder, LockName, Queueing, Request, Token};

/// A `redis-server` of the test's own on a free loopback port, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// None when `redis-server` is not installed (outside CI: CI installs it).
    fn start() -> Option<Server> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            // Small hashes keep their insertion order (listpack), as the model's do: with a
            // value over 64 bytes Redis makes a hash table, whose HGETALL order differs (no
            // script depends on it; the replies would only compare less simply).
            .args(["--hash-max-listpack-value", "4096"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "redis-server is not installed, and CI must run the differential test"
                );
                eprintln!("SKIPPED: redis-server is not installed (Debian: redis-server)");
                return None;
            }
            Err(e) => panic!("cannot start redis-server: {e}"),
        };
        Some(Server { child, port })
    }

    /// A connection, once the server answers (within 10 s).
    fn connect(&self) -> Conn {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(stream) = TcpStream::connect(("127.0.0.1", self.port)) {
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let mut conn = Conn {
                    reader: BufReader::new(stream.try_clone().unwrap()),
                    writer: stream,
                };
                if conn.call(&[b"PING"]) == Resp::Status("PONG".into()) {
                    return conn;
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A RESP2 connection (our own: the replies are wanted exactly as Redis sends them).
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn send(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&out).unwrap();
    }

    fn read(&mut self) -> Resp {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).unwrap();
        let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        let n = || text.parse::<i64>().unwrap();
        match line[0] {
            b'+' => Resp::Status(text),
            b'-' => Resp::Error(text),
            b':' => Resp::Int(n()),
            b'$' if n() < 0 => Resp::Nil,
            b'$' => {
                let mut bulk = vec![0; n() as usize + 2];
                self.reader.read_exact(&mut bulk).unwrap();
                bulk.truncate(bulk.len() - 2);
                Resp::Bulk(bulk)
            }
            b'*' if n() < 0 => Resp::Nil,
            b'*' => Resp::Array((0..n()).map(|_| self.read()).collect()),
            other => panic!("not RESP: {:?}", other as char),
        }
    }

    fn call(&mut self, args: &[&[u8]]) -> Resp {
        self.send(args);
        self.read()
    }
}

fn text(r: &Resp) -> String {
    match r {
        Resp::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Resp::Status(s) => s.clone(),
        other => panic!("expected text, got {other:?}"),
    }
}

fn time_us(r: &Resp) -> u64 {
    match r {
        Resp::Array(t) => {
            text(&t[0]).parse::<u64>().unwrap() * 1_000_000 + text(&t[1]).parse::<u64>().unwrap()
        }
        other => panic!("TIME returned {other:?}"),
    }
}

/// The whole keyspace in one script (so at one instant), with each key's absolute expiry.
static SNAPSHOT: Script = Script::new(
    "local out = {redis.call('TIME')}
     for _, k in ipairs(redis.call('KEYS', '*')) do
       local ty = redis.call('TYPE', k).ok
       local data
       if ty == 'string' then data = {redis.call('GET', k)}
       elseif ty == 'hash' then data = redis.call('HGETALL', k)
       elseif ty == 'zset' then data = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
       elseif ty == 'list' then data = redis.call('LRANGE', k, 0, -1)
       elseif ty ~= 'none' then data = {'unexpected type ' .. ty} end
       if data then out[#out + 1] = {k, ty, redis.call('PEXPIRETIME', k), data} end
     end
     return out",
);

/// The real server's keyspace, and the time it was read at (µs).
fn snapshot(conn: &mut Conn) -> (Keyspace, u64) {
    let reply = conn.call(&[b"EVAL", SNAPSHOT.source().as_bytes(), b"0"]);
    let Resp::Array(items) = reply else {
        panic!("snapshot: {reply:?}")
    };
    let at = time_us(&items[0]);
    let mut ks = Keyspace::default();
    for item in &items[1..] {
        let Resp::Array(parts) = item else {
            panic!("snapshot: {item:?}")
        };
        let [Resp::Bulk(key), ty, Resp::Int(expiry), Resp::Array(data)] = parts.as_slice() else {
            panic!("snapshot: {parts:?}")
        };
        let bytes = |r: &Resp| match r {
            Resp::Bulk(b) => b.clone(),
            other => panic!("snapshot: {other:?}"),
        };
        let value = match text(ty).as_str() {
            "string" => Value::Str(bytes(&data[0])),
            "hash" => Value::Hash(
                data.chunks(2)
                    .map(|p| (bytes(&p[0]), bytes(&p[1])))
                    .collect(),
            ),
            "zset" => Value::ZSet(
                data.chunks(2)
                    .map(|p| (Score(parse_score(&bytes(&p[1])).unwrap()), bytes(&p[0])))
                    .collect(),
            ),
            "list" => Value::List(data.iter().map(bytes).collect()),
            other => panic!("snapshot: type {other}"),
        };
        let expires_at = u64::try_from(*expiry).ok();
        ks.insert(key, Entry { value, expires_at });
    }
    (ks, at)
}

/// A reply, readable (byte strings as text).
fn show(r: &Resp) -> String {
    match r {
        Resp::Int(n) => n.to_string(),
        Resp::Bulk(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Resp::Nil => "nil".into(),
        Resp::Status(s) => format!("+{s}"),
        Resp::Error(e) => format!("-{e}"),
        Resp::Array(items) => format!(
            "[{}]",
            items.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A key's entry, readable.
fn show_entry(e: &Entry) -> String {
    let t = |b: &[u8]| format!("{:?}", String::from_utf8_lossy(b));
    let value = match &e.value {
        Value::Str(s) => t(s),
        Value::Hash(fields) => format!(
            "hash {{{}}}",
            fields
                .iter()
                .map(|(f, v)| format!("{}: {}", t(f), t(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::ZSet(members) => format!(
            "zset {{{}}}",
            members
                .iter()
                .map(|(s, m)| format!("{}: {}", t(m), s.0))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::List(items) => format!(
            "list [{}]",
            items.iter().map(|i| t(i)).collect::<Vec<_>>().join(", ")
        ),
    };
    match e.expires_at {
        Some(when) => format!("{value} expires at {when}"),
        None => value,
    }
}

fn show_keyspace(ks: &Keyspace) -> String {
    ks.iter()
        .map(|(k, e)| format!("  {}: {}", String::from_utf8_lossy(k), show_entry(e)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Equal, but for numbers of 16 digits or more (microseconds: fences, tickets), which may
/// differ by `slack`.
fn same_text(a: &[u8], b: &[u8], slack: u64) -> bool {
    if a == b {
        return true;
    }
    fn split(s: &[u8]) -> Vec<(bool, &[u8])> {
        s.chunk_by(|x, y| x.is_ascii_digit() == y.is_ascii_digit())
            .map(|c| (c[0].is_ascii_digit(), c))
            .collect()
    }
    let (a, b) = (split(a), split(b));
    a.len() == b.len()
        && a.iter().zip(&b).all(|((digits, x), (_, y))| {
            x == y
                || (*digits
                    && x.len() >= 16
                    && y.len() >= 16
                    && std::str::from_utf8(x)
                        .ok()
                        .zip(std::str::from_utf8(y).ok())
                        .and_then(|(x, y)| Some(x.parse::<u64>().ok()?.abs_diff(y.parse().ok()?)))
                        .is_some_and(|d| d <= slack))
        })
}

fn same_reply(model: &Resp, real: &Resp, slack: u64) -> bool {
    match (model, real) {
        (Resp::Int(a), Resp::Int(b)) => {
            a == b || (a.abs() >= 1_000_000_000_000_000 && a.abs_diff(*b) <= slack)
        }
        (Resp::Bulk(a), Resp::Bulk(b)) => same_text(a, b, slack),
        // A script's error as Redis sends it ends with where it happened (" script: SHA, on
        // @user_script:LINE."), which the model does not say.
        (Resp::Error(a), Resp::Error(b)) => b.split(" script: ").next() == Some(a.as_str()),
        (Resp::Array(a), Resp::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_reply(x, y, slack))
        }
        (a, b) => a == b,
    }
}

fn same_value(model: &Value, real: &Value, slack: u64) -> bool {
    match (model, real) {
        (Value::Str(a), Value::Str(b)) => same_text(a, b, slack),
        (Value::Hash(a), Value::Hash(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((f, x), (g, y))| f == g && same_text(x, y, slack))
        }
        (Value::ZSet(a), Value::ZSet(b)) => {
            a.len() == b.len()
                && a.iter().zip(b).all(|((s, m), (t, n))| {
                    m == n && (s == t || (s.0 >= 1e15 && (s.0 - t.0).abs() <= slack as f64))
                })
        }
        (Value::List(a), Value::List(b)) => a == b,
        _ => false,
    }
}

/// The differences between the model's keyspace after a step (its keys expired at `end_ms`)
/// and the real one read `read_ms` later: a key the model has and Redis does not may have
/// expired in between.
fn keyspace_differences(
    model: &Keyspace,
    real: &Keyspace,
    end_ms: u64,
    read_ms: u64,
    slack: u64,
) -> Vec<String> {
    let mut model = model.clone();
    model.expire_all(end_ms);
    let mut out = Vec::new();
    let show = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
    for (key, entry) in model.iter() {
        match real.iter().find(|(k, _)| *k == key) {
            None if entry.expires_at.is_some_and(|when| when <= read_ms) => {}
            None => out.push(format!(
                "{}: only in the model: {}",
                show(key),
                show_entry(entry)
            )),
            Some((_, theirs)) => {
                if !same_value(&entry.value, &theirs.value, slack)
                    || entry.expires_at != theirs.expires_at
                {
                    out.push(format!(
                        "{}: model {entry:?}\n      redis {theirs:?}",
                        show(key)
                    ));
                }
            }
        }
    }
    for (key, entry) in real.iter() {
        if !model.iter().any(|(k, _)| k == key) {
            out.push(format!(
                "{}: only in Redis: {}",
                show(key),
                show_entry(entry)
            ));
        }
    }
    out
}

/// One call distlock makes.
#[derive(Clone, Debug)]
enum Call {
    Acquire {
        lock: usize,
        token: usize,
        queueing: Queueing,
        limit: u32,
        claim: u64,
        polls: bool,
        after: AfterRun,
        /// The waiter waits on its doorbell (`wake = list`): its turn is pushed there.
        doorbell: bool,
    },
    /// A doorbell's pop: `BLPOP` (inside the step's `MULTI`, where it never blocks: the pop of
    /// a blocked client being served) or `LPOP`.
    Pop {
        bell: String,
        blocking: bool,
    },
    Renew {
        lock: usize,
        token: usize,
        ttl: u64,
        keys: Option<Held>,
        floor: bool,
    },
    Release {
        lock: usize,
        token: usize,
        succeeded: bool,
        /// The client starts over with a new token afterwards.
        then_new: bool,
    },
    Holds {
        lock: usize,
        token: usize,
    },
    Inspect {
        lock: usize,
    },
    Lost {
        lock: usize,
        token: usize,
    },
    /// Time passes (ms).
    Sleep(u64),
    /// Another program writes the lock's keys: a newer protocol's marker, or a value of
    /// another type where the line is (and takes it back later).
    Foreign {
        lock: usize,
        what: Foreign,
    },
}

#[derive(Clone, Copy, Debug)]
enum Foreign {
    Protocol,
    WrongType,
    Clear,
}

/// The locks: a mutex and a semaphore of 2 (each used otherwise now and then).
const LOCKS: [&str; 2] = ["mutex", "sema"];
const TOKENS: usize = 5;

struct Plan {
    rng: fastrand::Rng,
    /// Each client's token generation (a client that is done takes a new token).
    generation: [u32; TOKENS],
    /// (lock, client) that the replies said hold, and wait in line: most renewals and releases
    /// come from holders, most attempts from waiters (refreshing their place, taking up).
    held: Vec<(usize, usize)>,
    waiting: Vec<(usize, usize)>,
    /// Calls that follow from the last steps, first: the pop of a doorbell that rang (the
    /// waiter blocked on it is served).
    follow: std::collections::VecDeque<Call>,
}

impl Plan {
    fn token(&self, client: usize) -> Token {
        Token::from_text(&format!(
            "{:08x}-7e57-4000-8000-{:012x}",
            client, self.generation[client]
        ))
    }

    /// Learn from a step's reply who holds and who waits.
    fn observe(&mut self, call: &Call, reply: &[crate::backend::Reply]) {
        use crate::backend::Reply::Int;
        let forget = |list: &mut Vec<(usize, usize)>, at: (usize, usize)| list.retain(|x| *x != at);
        match *call {
            Call::Acquire { lock, token, .. } => match reply.first() {
                Some(Int(1)) => {
                    forget(&mut self.waiting, (lock, token));
                    forget(&mut self.held, (lock, token));
                    self.held.push((lock, token));
                }
                Some(Int(2)) => {
                    forget(&mut self.waiting, (lock, token));
                    self.waiting.push((lock, token));
                }
                Some(Int(3) | Int(5)) => forget(&mut self.waiting, (lock, token)),
                _ => {}
            },
            Call::Renew { lock, token, .. } | Call::Holds { lock, token }
                if reply.first() == Some(&Int(0)) =>
            {
                forget(&mut self.held, (lock, token));
            }
            Call::Release {
                lock,
                token,
                then_new,
                ..
            } => {
                forget(&mut self.held, (lock, token));
                forget(&mut self.waiting, (lock, token));
                if then_new {
                    self.generation[token] += 1;
                    self.held.retain(|(_, c)| *c != token);
                    self.waiting.retain(|(_, c)| *c != token);
                }
            }
            _ => {}
        }
    }

    fn next(&mut self, step: usize, steps: usize) -> Call {
        if let Some(call) = self.follow.pop_front() {
            return call;
        }
        let rng = &mut self.rng;
        // Two long pauses: past the take-up window and a polling waiter's place (3 s), and
        // past every place in line (6 s).
        if step == steps / 3 {
            return Call::Sleep(3_100);
        }
        if step == 2 * steps / 3 {
            return Call::Sleep(6_100);
        }
        let kind = rng.u32(..100);
        let pool = match kind {
            0..40 => &self.waiting,
            40..74 => &self.held,
            _ => &Vec::new(),
        };
        let (lock, token) = if !pool.is_empty() && rng.u32(..10) < 7 {
            pool[rng.usize(..pool.len())]
        } else {
            (rng.usize(..LOCKS.len()), rng.usize(..TOKENS))
        };
        let usual = if lock == 0 { 1 } else { 2 };
        match kind {
            0..40 => {
                // Odd clients wait on a doorbell (now and then not, as a waiter whose push
                // was refused), and refresh rather than join after their first attempt.
                let doorbell = token % 2 == 1 && rng.u32(..8) > 0 || token == 0 && rng.bool();
                let queueing = match rng.u32(..10) {
                    0..3 => Queueing::Try,
                    3..5 if doorbell => Queueing::Refresh,
                    3..8 => Queueing::Join,
                    8 => Queueing::Supersede,
                    _ => Queueing::Replace,
                };
                let cool = lock == 0 && rng.u32(..5) == 0;
                Call::Acquire {
                    lock,
                    token,
                    queueing,
                    // On the mutex, a third are readers of a shared key (limit 0).
                    limit: match rng.u32(..12) {
                        0 => 3 - usual,
                        1..5 if lock == 0 => 0,
                        _ => usual,
                    },
                    claim: [40, 400, 9_200, 9_200][rng.usize(..4)],
                    polls: rng.u32(..8) == 0,
                    after: AfterRun {
                        min_interval: (cool && rng.bool()).then(|| Duration::from_millis(300)),
                        cooldown: cool.then(|| Duration::from_millis(120)),
                    },
                    doorbell,
                }
            }
            84..90 => Call::Pop {
                bell: LockName::new("distlock:", LOCKS[lock]).wake_channel(&format!(
                    "{:08x}-7e57-4000-8000-{:012x}",
                    token, self.generation[token]
                )),
                blocking: rng.bool(),
            },
            40..55 => Call::Renew {
                lock,
                token,
                ttl: [0, 60, 300, 30_000][rng.usize(..4)],
                keys: match rng.u32(..6) {
                    0 => None,
                    1 if lock == 0 => Some(Held::Shared),
                    _ if lock == 0 => Some(Held::Mutex),
                    _ => Some(Held::Slot),
                },
                floor: rng.u32(..6) == 0,
            },
            55..68 => Call::Release {
                lock,
                token,
                succeeded: rng.u32(..3) > 0,
                then_new: rng.bool(),
            },
            68..74 => Call::Holds { lock, token },
            74..80 => Call::Inspect { lock },
            80..82 => Call::Lost { lock, token },
            82..84 => Call::Foreign {
                lock,
                what: match rng.u32(..4) {
                    0 => Foreign::Protocol,
                    1 => Foreign::WrongType,
                    _ => Foreign::Clear,
                },
            },
            _ => Call::Sleep([2, 20, 80, 250][rng.usize(..4)]),
        }
    }
}

/// A script call: the script, its keys, its arguments, and how to check the reply decodes.
struct Invocation {
    script: &'static Script,
    keys: Vec<String>,
    args: Vec<Vec<u8>>,
    decode: fn(&[crate::backend::Reply]) -> bool,
}

/// The history's arguments go (a history is out of the model's scope; it is on only if a
/// test of this process configured one).
fn without_history(mut args: Vec<Vec<u8>>, from: usize) -> Vec<Vec<u8>> {
    let mut i = from;
    while i + 1 < args.len() {
        if args[i] == b"history_ms" {
            args.drain(i..i + 2);
        } else {
            i += 2;
        }
    }
    args
}

fn holder(client: usize) -> Holder {
    Holder {
        host: Some(format!("host-{client}")),
        pid: Some(4000 + client as u32),
        user: Some("ci".into()),
        command: Some(format!("make -C /srv/app deploy N={client} \"now\"")),
        kind: Some("run".into()),
        version: Some(crate::VERSION.into()),
        ci_url: (client % 2 == 0).then(|| "https://ci.example/job/1".into()),
        note: (client == 1).then(|| "ünïcode note".into()),
        warn_after_ms: None,
        set: None,
    }
}

fn invocation(call: &Call, plan: &Plan) -> Option<Invocation> {
    let name = |lock: usize| LockName::new("distlock:", LOCKS[lock]);
    Some(match *call {
        Call::Acquire {
            lock,
            token,
            queueing,
            limit,
            claim,
            polls,
            after,
            doorbell,
        } => {
            let holder = holder(token);
            let token = plan.token(token);
            let request = Request {
                token: &token,
                claim: Duration::from_millis(claim),
                ttl: Duration::from_secs(30),
                holder: &holder,
                limit,
                queueing,
                polls,
                after,
                doorbell,
            };
            Invocation {
                script: &ACQUIRE,
                keys: name(lock).keys().to_vec(),
                args: without_history(acquire_args(&request, queueing), 6),
                decode: |r| decode_answer(r, Moment::now(), Duration::from_secs(1)).is_ok(),
            }
        }
        Call::Renew {
            lock,
            token,
            ttl,
            keys,
            floor,
        } => Invocation {
            script: &RENEW,
            keys: match keys {
                Some(held) => held.keys(&name(lock)),
                None => name(lock).keys().to_vec(),
            },
            args: renew_args(
                &plan.token(token),
                Duration::from_millis(ttl),
                floor.then_some(1_800_000_000_000_000),
            ),
            decode: |r| matches!(r, [crate::backend::Reply::Int(0 | 1), ..]),
        },
        Call::Release {
            lock,
            token,
            succeeded,
            ..
        } => Invocation {
            script: &RELEASE,
            keys: name(lock).keys().to_vec(),
            args: without_history(release_args(&plan.token(token), succeeded), 2),
            decode: |r| ownership(r).is_ok(),
        },
        Call::Holds { lock, token } => Invocation {
            script: &HOLDS,
            keys: name(lock).keys().to_vec(),
            args: vec![plan.token(token).as_str().into()],
            decode: |r| {
                matches!(
                    r,
                    [crate::backend::Reply::Int(0)] | [crate::backend::Reply::Int(1), _]
                )
            },
        },
        Call::Inspect { lock } => Invocation {
            script: &INSPECT,
            keys: name(lock).keys().to_vec(),
            args: Vec::new(),
            decode: |r| decode_state(r).is_ok(),
        },
        Call::Lost { lock, token } => Invocation {
            script: &crate::lock::history::LOST,
            keys: crate::lock::history::keys(&name(lock)).to_vec(),
            args: vec![
                plan.token(token).as_str().into(),
                b"the lock expired".to_vec(),
                b"1234".to_vec(),
                b"host".to_vec(),
                b"host-x".to_vec(),
            ],
            decode: |r| r == [crate::backend::Reply::Int(0)],
        },
        Call::Sleep(_) | Call::Foreign { .. } | Call::Pop { .. } => return None,
    })
}

/// What the steps showed, for the summary.
#[derive(Default, Debug)]
struct Tally {
    compared: usize,
    straddled: usize,
    unresolved: usize,
    errors: usize,
    granted: usize,
    queued: usize,
    handed: usize,
    published: usize,
    /// Pushes onto a doorbell, and pops that found one.
    pushed: usize,
    rang: usize,
}

#[test]
fn the_model_answers_every_script_call_as_redis_does() {
    let Some(server) = Server::start() else {
        return;
    };
    let started = Instant::now();
    let seed = std::env::var("DISTLOCK_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261128);
    let steps: usize = std::env::var("DISTLOCK_MODEL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    eprintln!("differential test: seed {seed} (DISTLOCK_MODEL_SEED), {steps} steps");
    let mut conn = server.connect();
    // Every message any script publishes, to compare with what the model's runs published.
    let mut listener = server.connect();
    listener.call(&[b"PSUBSCRIBE", b"*"]);
    let info = text(&conn.call(&[b"INFO", b"server"]));
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .to_owned();
    for script in scripts() {
        let sha = conn.call(&[b"SCRIPT", b"LOAD", script.source().as_bytes()]);
        assert_eq!(text(&sha), script.hash());
    }
    let mut runner = Runner::new();
    let mut plan = Plan {
        rng: fastrand::Rng::with_seed(seed),
        generation: [0; TOKENS],
        held: Vec::new(),
        waiting: Vec::new(),
        follow: Default::default(),
    };
    let mut tally = Tally::default();
    let (mut before, _) = snapshot(&mut conn);
    for step in 0..steps {
        let call = plan.next(step, steps);
        if let Call::Pop { bell, blocking } = &call {
            // Mostly a doorbell that rang (the waiter's pop, served), else any.
            let rung: Vec<&[u8]> = before
                .iter()
                .filter(|(_, e)| matches!(e.value, Value::List(_)))
                .map(|(k, _)| k)
                .collect();
            let bell = match plan.rng.u32(..4) {
                0 => bell.clone(),
                _ if rung.is_empty() => bell.clone(),
                _ => String::from_utf8_lossy(rung[plan.rng.usize(..rung.len())]).into_owned(),
            };
            let blocking = *blocking;
            // The doorbell's pop, bracketed by the server's clock; the model pops at either
            // end of the bracket (an expiry may fall inside it).
            conn.send(&[b"MULTI"]);
            conn.send(&[b"TIME"]);
            if blocking {
                conn.send(&[b"BLPOP", bell.as_bytes(), b"0.01"]);
            } else {
                conn.send(&[b"LPOP", bell.as_bytes()]);
            }
            conn.send(&[b"TIME"]);
            conn.send(&[b"EXEC"]);
            for _ in 0..4 {
                let queued = conn.read();
                assert!(matches!(queued, Resp::Status(_)), "{queued:?}");
            }
            let Resp::Array(exec) = conn.read() else {
                panic!("EXEC failed")
            };
            let (t_before, real, t_after) = (time_us(&exec[0]), exec[1].clone(), time_us(&exec[2]));
            let (after, read_at) = snapshot(&mut conn);
            let mut first = None;
            let mut matched = false;
            for now in [t_before / 1000, t_after / 1000] {
                let mut model = before.clone();
                let reply = match (model.lpop(bell.as_bytes(), now), blocking) {
                    (None, _) => Resp::Nil,
                    (Some(item), true) => Resp::Array(vec![
                        Resp::Bulk(bell.clone().into_bytes()),
                        Resp::Bulk(item),
                    ]),
                    (Some(item), false) => Resp::Bulk(item),
                };
                let diffs = keyspace_differences(&model, &after, t_after / 1000, read_at / 1000, 0);
                if reply == real && diffs.is_empty() {
                    matched = true;
                    if reply != Resp::Nil {
                        tally.rang += 1;
                    }
                    break;
                }
                first.get_or_insert((reply, diffs));
            }
            tally.compared += 1;
            if !matched {
                let (reply, diffs) = first.unwrap();
                panic!(
                    "step {step} (seed {seed}): the model and Redis differ on {call:?} of {bell}\n\
                     before:\n{}\nreply: model {}\n       redis {}\nkeyspace:\n  {}",
                    show_keyspace(&before),
                    show(&reply),
                    show(&real),
                    diffs.join("\n  ")
                );
            }
            before = after;
            continue;
        }
        let Some(inv) = invocation(&call, &plan) else {
            match call {
                Call::Sleep(ms) => std::thread::sleep(Duration::from_millis(ms)),
                Call::Foreign { lock, what } => {
                    let name = LockName::new("distlock:", LOCKS[lock]);
                    let keys = name.keys();
                    let (protocol, queue) = (keys[9].as_bytes(), keys[3].as_bytes());
                    match what {
                        Foreign::Protocol => conn.call(&[b"SET", protocol, b"3", b"PX", b"500"]),
                        Foreign::WrongType => conn.call(&[b"SET", queue, b"x", b"PX", b"500"]),
                        Foreign::Clear => conn.call(&[b"DEL", protocol]),
                    };
                }
                _ => unreachable!(),
            }
            before = snapshot(&mut conn).0;
            continue;
        };
        // The step, bracketed by the server's clock.
        let keys: Vec<&[u8]> = inv.keys.iter().map(|k| k.as_bytes()).collect();
        let mut command: Vec<&[u8]> = vec![b"EVALSHA", inv.script.hash().as_bytes()];
        let numkeys = keys.len().to_string();
        command.push(numkeys.as_bytes());
        command.extend(&keys);
        command.extend(inv.args.iter().map(Vec::as_slice));
        conn.send(&[b"MULTI"]);
        conn.send(&[b"TIME"]);
        conn.send(&command);
        conn.send(&[b"TIME"]);
        conn.send(&[b"EXEC"]);
        for _ in 0..4 {
            let queued = conn.read();
            assert!(matches!(queued, Resp::Status(_)), "{queued:?}");
        }
        let Resp::Array(exec) = conn.read() else {
            panic!("EXEC failed")
        };
        let (t_before, real, t_after) = (time_us(&exec[0]), exec[1].clone(), time_us(&exec[2]));
        let (after, read_at) = snapshot(&mut conn);
        // The step's messages: those the listener got before a marker published after it.
        let marker = format!("differential:marker:{step}");
        conn.call(&[b"PUBLISH", marker.as_bytes(), b"."]);
        let mut published = Vec::new();
        loop {
            let Resp::Array(message) = listener.read() else {
                panic!("the listener got something else than a message")
            };
            let (channel, body) = (text(&message[2]), text(&message[3]));
            if channel == marker {
                break;
            }
            published.push((channel, body));
        }
        let slack = t_after - t_before;
        let straddles = t_before / 1000 != t_after / 1000;
        // The script times Redis 7.0 allows here: frozen at the start, frozen at the end (the
        // script started late in the bracket), or keys looked up at the start while the clock
        // reaches the end after any of the script's readings of it.
        let mut candidates = vec![(t_before, ScriptTime::Frozen)];
        if straddles {
            candidates.push((t_after, ScriptTime::Frozen));
            candidates.extend((0..32).map(|after| {
                (
                    t_before,
                    ScriptTime::Drifting {
                        by_us: slack,
                        after,
                    },
                )
            }));
        }
        let mut first = None;
        let mut matched = None;
        for (now_us, time) in candidates {
            if let ScriptTime::Drifting { after, .. } = time {
                // Past the script's last reading: the same as frozen at the start.
                if first
                    .as_ref()
                    .is_some_and(|(o, _): &(Outcome, _)| after > o.clock_readings)
                {
                    break;
                }
            }
            let mut model = Redis {
                keyspace: before.clone(),
                now_us,
            };
            let outcome = runner.eval(&mut model, time, inv.script, &inv.keys, &inv.args);
            let diffs = keyspace_differences(
                &model.keyspace,
                &after,
                t_after / 1000,
                read_at / 1000,
                slack,
            );
            let same = same_reply(&outcome.reply, &real, slack)
                && diffs.is_empty()
                && outcome.published == published;
            if same {
                matched = Some(outcome);
                break;
            }
            first.get_or_insert((outcome, diffs));
        }
        tally.compared += 1;
        tally.straddled += usize::from(straddles);
        match matched {
            Some(outcome) => {
                match outcome.reply.clone().into_replies() {
                    Ok(replies) => {
                        plan.observe(&call, &replies);
                        assert!(
                            (inv.decode)(&replies),
                            "step {step}: distlock's decoder refuses the reply {replies:?} to {call:?}"
                        );
                        if let Call::Acquire { .. } = call {
                            match replies.first() {
                                Some(crate::backend::Reply::Int(1)) => tally.granted += 1,
                                Some(crate::backend::Reply::Int(2)) => tally.queued += 1,
                                _ => {}
                            }
                        }
                    }
                    Err(_) => tally.errors += 1,
                }
                tally.handed += outcome
                    .published
                    .iter()
                    .filter(|(_, m)| m == "granted")
                    .count();
                // Hand-offs to a doorbell: a doorbell that is there after the step and was
                // not before (or is longer).
                let rang: Vec<String> = after
                    .iter()
                    .filter(|(k, e)| {
                        let len = |e: &Entry| match &e.value {
                            Value::List(items) => items.len(),
                            _ => 0,
                        };
                        len(e)
                            > before
                                .iter()
                                .find(|(j, _)| j == k)
                                .map_or(0, |(_, f)| len(f))
                    })
                    .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                    .collect();
                tally.pushed += rang.len();
                tally.handed += rang.len();
                // Most waiters are blocked on their doorbell: the pop is served at once.
                for bell in rang {
                    if plan.rng.u32(..4) > 0 {
                        plan.follow.push_back(Call::Pop {
                            bell,
                            blocking: true,
                        });
                    }
                }
                tally.published += outcome.published.len();
            }
            None if straddles => {
                tally.unresolved += 1;
                if std::env::var_os("DISTLOCK_MODEL_VERBOSE").is_some() {
                    let (outcome, diffs) = first.unwrap();
                    eprintln!(
                        "step {step}: unresolved across a ms boundary ({t_before}..{t_after}): \
                         {call:?}\n  model {}\n  redis {}\n  {}",
                        show(&outcome.reply),
                        show(&real),
                        diffs.join("\n  ")
                    );
                }
            }
            None => {
                let (outcome, diffs) = first.unwrap();
                panic!(
                    "step {step} (seed {seed}): the model and Redis differ on {call:?}\n\
                     at {t_before}..{t_after} us\nkeys {:?}\nargs {:?}\nbefore:\n{}\n\
                     reply: model {}\n       redis {}\npublished: model {:?}\n       \
                     redis {published:?}\nkeyspace:\n  {}",
                    inv.keys,
                    inv.args
                        .iter()
                        .map(|a| String::from_utf8_lossy(a))
                        .collect::<Vec<_>>(),
                    show_keyspace(&before),
                    show(&outcome.reply),
                    show(&real),
                    outcome.published,
                    diffs.join("\n  ")
                );
            }
        }
        before = after;
    }
    eprintln!(
        "differential test against Redis {version}: {tally:?} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Not vacuous: the sequence took locks, queued, handed locks on, and met errors.
    assert!(
        tally.granted > 10
            && tally.queued > 10
            && tally.handed > 0
            && tally.errors > 0
            && tally.pushed > 0
            && tally.rang > 0,
        "{tally:?}"
    );
    assert!(
        tally.unresolved * 20 <= tally.compared,
        "too many steps across a millisecond boundary matched no script time: {tally:?}"
    );
}
