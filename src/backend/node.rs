//! Talking to one server: a lazily reconnecting connection ([`Node`]) whose every operation
//! ends by a deadline, following a Redis Cluster's redirections, and the scripts and replies it
//! carries ([`Script`], [`Reply`]: `script.rs`). Which server that is, is the [`Connector`]'s
//! business (`connector.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::Connection;

use super::deferred::Deferred;
use super::route::{self, Addr, Route, Server};
use super::{BackendError, Cancel, Connector, Reply, Script, probe};

/// What a worker thread learns about the call it runs, for a caller that stopped waiting.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// The request was handed to the socket: from here on it may be applied.
    pub(super) sent: AtomicBool,
}

/// One connection to one server, opened on first use and reopened after a failure.
pub struct Node {
    connector: Connector,
    conn: Option<Connection>,
    /// The server `conn` is connected to.
    server: Option<Arc<Server>>,
    /// Connections whose last request got no reply: that request may still be applied. They are
    /// never used for another request and answer nothing more; they only carry a request that
    /// must follow the lost one (see [`Node::send_behind_lost_replies`]).
    parked: Vec<Connection>,
    /// The server has answered something (even an error) on this node.
    answered: bool,
    /// Whether `server` lends its idle clients a shared read buffer (see
    /// [`Node::shares_read_buffers`]), as it said when asked on this connection.
    shares: Option<(Arc<Server>, bool)>,
    pub(super) progress: Option<Arc<Progress>>,
    /// The last [`Node::recheck`] asked the sentinels and none answered in time.
    unconfirmed: bool,
}

/// A time allowed, for messages. The limit is computed a moment after the caller set its
/// deadline (`timeout` from then), so "within 2s" would read "within 1.999s", or on a loaded
/// machine "within 1.96s": a limit within a tenth of `timeout` of it says `timeout`, which is
/// what was meant; a shorter one (a deadline that cut it) says itself, in whole tens of
/// milliseconds.
fn rounded(limit: Duration, timeout: Duration) -> Duration {
    if limit <= timeout && timeout - limit <= timeout / 10 {
        return timeout;
    }
    let ms = u64::try_from(limit.as_micros().div_ceil(10_000) * 10).unwrap_or(u64::MAX);
    Duration::from_millis(ms)
}

/// A request sent by [`Node::send_eval`], whose reply is still to be read.
#[derive(Debug)]
pub struct Sent {
    limit: Duration,
}

/// A script call: the script, its keys, its arguments.
pub type Call<'a> = (&'a Script, &'a [&'a str], &'a [&'a [u8]]);

/// What [`Node::ring`] got back.
#[derive(Debug)]
pub struct Rang {
    /// Whether the doorbell rang (`false`: the wait timed out), or the server's refusal (a
    /// redirection on a Cluster, a failover, an ACL without `+blpop`).
    pub bell: Result<bool, BackendError>,
    /// The reply of the script sent behind the wait, if one was.
    pub script: Option<Result<Vec<Reply>, BackendError>>,
}

/// The signals that end a wait for a lock (the signal policy's `signals::FORWARDED` is this
/// set): let through during a wait on a doorbell ([`Node::ring`]).
pub const WAIT_ENDERS: [i32; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// At most this many parked connections are kept (the oldest is closed first).
const MAX_PARKED: usize = 4;
/// How long the parked connections have to answer `TIME` before a wait on a doorbell (see
/// [`Node::close_answered_parked`]).
const PARKED_PROBE: Duration = Duration::from_millis(50);
/// At most this many MOVED and ASK redirections are followed for one request.
pub const MAX_REDIRECTS: u32 = 5;
/// The pause before asking again after TRYAGAIN (a slot migration half done for our keys).
const TRYAGAIN_PAUSE: Duration = Duration::from_millis(20);

impl Node {
    /// A handle on the server behind `connector`, which connects on first use.
    pub(super) fn new(connector: Connector) -> Self {
        Node {
            connector,
            conn: None,
            server: None,
            parked: Vec::new(),
            answered: false,
            shares: None,
            progress: None,
            unconfirmed: false,
        }
    }

    /// The connector this node connects with.
    pub fn connector(&self) -> &Connector {
        &self.connector
    }

    /// Before a write that extends a lock: behind Sentinel, check that the connection is still
    /// to the primary the sentinels name (after a failover, the old primary may accept writes
    /// for a while that are then lost); if not, the next request goes to the new one. A cost of
    /// one sentinel round trip, taken from `deadline`'s time.
    /// Returns whether the primary moved (the next request goes to the new one).
    ///
    /// Without a connection (the last request timed out, its connection parked), the next
    /// request opens one to the primary the route named last, confirmed by ROLE alone: an old
    /// primary that a failover has not demoted yet still answers `master`, so that primary is
    /// checked with the sentinels too. Only when the route knows no primary does the next
    /// request ask the sentinels anyway.
    pub fn recheck(&mut self, deadline: Instant) -> bool {
        self.unconfirmed = false;
        let Route::Sentinel(sentinel) = &*self.connector.route else {
            return false;
        };
        let current = if self.conn.is_some() {
            self.server.clone()
        } else {
            sentinel.known()
        };
        let Some(server) = current else {
            return false;
        };
        let budget = deadline.saturating_duration_since(Instant::now()) / 2;
        match sentinel.moved_from(&server, Instant::now() + budget, self.connector.timeout) {
            Some(true) => {
                self.conn = None;
                true
            }
            Some(false) => false,
            None => {
                self.unconfirmed = true;
                false
            }
        }
    }

    /// Whether the last [`Node::recheck`] got no answer from any sentinel in time: the write
    /// that followed went to the primary named last, which a failover may have replaced.
    pub fn primary_unconfirmed(&self) -> bool {
        self.unconfirmed
    }

    /// Run `script` with `keys` and `args` by `deadline`; the script must return an array.
    ///
    /// On a Redis Cluster, a MOVED reply (the slot has another owner) updates the slot map and
    /// the request goes to the new owner; an ASK reply (the slot is being migrated, and none
    /// of our keys is left on the source) sends this one request to the target, after
    /// `ASKING`, declaring only the first key (see below); TRYAGAIN (the slot is being
    /// migrated and our keys are not all on one side) waits 20ms and asks again, until
    /// `deadline`. None of these replies means the request ran, so sending it again is safe;
    /// at most [`MAX_REDIRECTS`] redirections are followed.
    ///
    /// A script run here must name every key it touches after its first key and touch only
    /// keys it declares (ours do: `lock/lua/common.lua` says why this is safe).
    pub fn eval(
        &mut self,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
        deadline: Instant,
    ) -> Result<Vec<Reply>, BackendError> {
        let mut redirects = 0;
        let mut asking: Option<Addr> = None;
        let mut last_ask: Option<Addr> = None;
        loop {
            let result = match asking.take() {
                None => self.eval_once(script, keys, args, deadline, false),
                Some(addr) => {
                    self.conn = None;
                    let (conn, server) = self.connector.open_at(&addr, deadline)?;
                    self.conn = Some(conn);
                    self.server = Some(server);
                    // ASK means the source has none of the declared keys (with some it would
                    // answer TRYAGAIN, with all it would run the script): the target has
                    // every one that exists. Declared there, keys that exist nowhere would be
                    // refused with TRYAGAIN; our scripts name every key after the first (see
                    // `lock/lua/common.lua`), so the first is enough.
                    let result =
                        self.eval_once(script, &keys[..keys.len().min(1)], args, deadline, true);
                    // The next request goes by the slot map again.
                    self.conn = None;
                    result
                }
            };
            let (code, detail) = match &result {
                Err(BackendError::Server { code, detail }) => (code.as_str(), detail.as_str()),
                _ => return result,
            };
            match code {
                "MOVED" | "ASK" if redirects < MAX_REDIRECTS => {
                    let Some((slot, addr)) = route::redirect(detail) else {
                        return result;
                    };
                    redirects += 1;
                    if code == "MOVED" {
                        self.connector.moved(slot, addr)?;
                        self.conn = None;
                        last_ask = None;
                    } else {
                        last_ask = Some(addr.clone());
                        asking = Some(addr);
                    }
                }
                // While a slot migrates, Redis refuses a script whose keys are partly on each
                // side (or partly missing): ask again, where we asked, until the keys have
                // moved or the time is up.
                "TRYAGAIN" if Instant::now() + TRYAGAIN_PAUSE < deadline => {
                    std::thread::sleep(TRYAGAIN_PAUSE);
                    asking.clone_from(&last_ask);
                }
                "READONLY" | "MASTERDOWN" | "CLUSTERDOWN" => {
                    // A demoted primary, or a shard without one: find the primary again.
                    self.connector.failed();
                    self.conn = None;
                    return result;
                }
                _ => return result,
            }
        }
    }

    fn eval_once(
        &mut self,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
        deadline: Instant,
        asking: bool,
    ) -> Result<Vec<Reply>, BackendError> {
        let _deferred = Deferred::new();
        let limit = self.ready(deadline)?;
        let conn = self.conn(deadline)?;
        let result = if asking {
            // ASKING holds for the next command only: send the script itself (EVAL), not
            // EVALSHA, which the target may answer with NOSCRIPT (and the script load would
            // then use up the ASKING).
            let mut eval = redis::cmd("EVAL");
            eval.arg(script.source).arg(keys.len()).arg(keys);
            for arg in args {
                eval.arg(*arg);
            }
            redis::cmd("ASKING")
                .query::<()>(conn)
                .and_then(|()| eval.query::<Vec<redis::Value>>(conn))
        } else {
            script.invoke::<Vec<redis::Value>>(conn, keys, args)
        };
        self.finish(result, limit, deadline)
            .map(|values| values.into_iter().map(Reply::from).collect())
    }

    /// Send `script` (EVALSHA) without waiting for its reply, by `deadline`; [`Node::recv_eval`]
    /// reads it. Several servers are asked at once this way from one thread: write to each,
    /// then read each reply, in about one round trip instead of one per server.
    pub fn send_eval(
        &mut self,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
        deadline: Instant,
    ) -> Result<Sent, BackendError> {
        let packed = script.evalsha(keys, args).get_packed_command();
        let _deferred = Deferred::new();
        let limit = self.ready(deadline)?;
        let conn = self.conn(deadline)?;
        let result = conn.send_packed_command(&packed);
        self.finish(result, limit, deadline)?;
        Ok(Sent { limit })
    }

    /// Read the reply of [`Node::send_eval`] by `deadline` (loading the script and running it
    /// again on NOSCRIPT, which only a server that never saw it answers).
    pub fn recv_eval(
        &mut self,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
        sent: Sent,
        deadline: Instant,
    ) -> Result<Vec<Reply>, BackendError> {
        let _deferred = Deferred::new();
        let limit = sent
            .limit
            .min(deadline.saturating_duration_since(Instant::now()))
            .max(Duration::from_millis(1));
        let Some(conn) = self.conn.as_mut() else {
            return Err(BackendError::Lost("the connection was closed".into()));
        };
        let result = conn
            .set_read_timeout(Some(limit))
            .and_then(|()| script_reply(conn, script, keys, args));
        let value = match self.finish(result, limit, deadline) {
            Err(BackendError::Server { code, detail }) if code == "MOVED" || code == "ASK" => {
                // Only a fixed server (a Redlock node) is asked this way: not a cluster's.
                return Err(match route::redirect(&detail) {
                    Some((slot, addr)) => match self.connector.moved(slot, addr) {
                        Err(e) => e,
                        Ok(()) => BackendError::Server { code, detail },
                    },
                    None => BackendError::Server { code, detail },
                });
            }
            other => other?,
        };
        match value {
            redis::Value::Array(items) => Ok(items.into_iter().map(Reply::from).collect()),
            other => Err(BackendError::Reply(format!("a script returned {other:?}"))),
        }
    }

    /// Whether the server lends a client that has nothing left to read a buffer shared by all
    /// (Redis 7.4 and later, Valkey 8 and later): then a request queued behind a blocked one
    /// costs a buffer of its own, about 20 KB, for the whole block, where a client blocked with
    /// nothing queued costs about 3 KB. Older servers keep every client's buffer for 2 s after
    /// it last spoke, so a client that speaks every 2 s keeps it either way. `None` until the
    /// server has said so on this connection: [`Node::ring`] asks it (`HELLO 2`, which every ACL
    /// user may run, like AUTH; on a RESP2 connection it changes nothing) in the same write as
    /// the first wait, so the question costs no round trip of its own; a server that refuses it
    /// is taken for an older one.
    pub fn shares_read_buffers(&self) -> Option<bool> {
        match (&self.shares, &self.server) {
            (Some((server, shares)), Some(now))
                if Arc::ptr_eq(server, now) && self.conn.is_some() =>
            {
                Some(*shares)
            }
            _ => None,
        }
    }

    /// Wait up to `block` for an element on the list `bell` (`BLPOP`), and with `then`, run
    /// that script (EVALSHA) right behind it, sent in the same write: Redis reads nothing more
    /// from a blocked connection, so the script runs the moment the pop is served or its time
    /// is up, and both replies come back together. Ends by `deadline` (at most `block` plus
    /// one timeout).
    ///
    /// The signals in [`WAIT_ENDERS`] are let through during the read: one cuts it short
    /// (EINTR), the connection is dropped (a blocked client that goes away has its queued
    /// request dropped unrun by Redis, unless the pop was served already and it ran), and the
    /// result is `Interrupted { sent: true }`; `cancel` (raised by their handler) is checked
    /// once they are let through. Every other signal waits for the end of the read.
    pub fn ring(
        &mut self,
        bell: &str,
        block: Duration,
        then: Option<Call<'_>>,
        cancel: Option<&Cancel>,
        deadline: Instant,
    ) -> Result<Rang, BackendError> {
        let mut packed = redis::cmd("BLPOP")
            .arg(bell)
            .arg(format!("{:.3}", block.as_secs_f64()))
            .get_packed_command();
        if let Some((script, keys, args)) = then {
            packed.extend(script.evalsha(keys, args).get_packed_command());
        }
        self.close_answered_parked();
        {
            let _deferred = Deferred::new();
            let limit = self.ready(deadline)?;
            // The first wait on a connection asks the server what it is in the same write (see
            // `shares_read_buffers`); its reply comes at once, before the wait's.
            let ask = self.shares_read_buffers().is_none();
            if ask {
                let mut hello = redis::cmd("HELLO").arg(2).get_packed_command();
                hello.extend(packed);
                packed = hello;
            }
            let conn = self.conn(deadline)?;
            let result = conn.send_packed_command(&packed).and_then(|()| match ask {
                true => conn.recv_response().map(Some),
                false => Ok(None),
            });
            if let Some(hello) = self.finish(result, limit, deadline)? {
                let shares = hello_shares_buffers(&hello);
                self.shares = self.server.clone().map(|server| (server, shares));
            }
        }
        let _open = Deferred::except(&WAIT_ENDERS);
        let interrupted = |node: &mut Node| {
            node.conn = None;
            Err(BackendError::Interrupted { sent: true })
        };
        if cancel.is_some_and(Cancel::is_cancelled) {
            return interrupted(self);
        }
        let limit = (block + self.connector.timeout)
            .min(deadline.saturating_duration_since(Instant::now()))
            .max(Duration::from_millis(1));
        let Some(conn) = self.conn.as_mut() else {
            return Err(BackendError::Lost("the connection was closed".into()));
        };
        let result = conn
            .set_read_timeout(Some(limit))
            .and_then(|()| conn.recv_response());
        if result.is_err() && cancel.is_some_and(Cancel::is_cancelled) {
            return interrupted(self);
        }
        let bell = match self.finish(result, limit, deadline) {
            Ok(redis::Value::Nil) => Ok(false),
            Ok(redis::Value::ServerError(e)) => Err(BackendError::from_command(e.into(), limit)),
            Ok(_) => Ok(true),
            Err(e @ BackendError::Server { .. }) => Err(e),
            Err(e) => return Err(e),
        };
        let Some((script, keys, args)) = then else {
            self.follow(&bell)?;
            return Ok(Rang { bell, script: None });
        };
        let Some(conn) = self.conn.as_mut() else {
            return Err(BackendError::Lost("the connection was closed".into()));
        };
        let result = script_reply(conn, script, keys, args);
        if result.is_err() && cancel.is_some_and(Cancel::is_cancelled) {
            return interrupted(self);
        }
        let script = self
            .finish(result, limit, deadline)
            .and_then(|value| match value {
                redis::Value::Array(items) => Ok(items.into_iter().map(Reply::from).collect()),
                other => Err(BackendError::Reply(format!("a script returned {other:?}"))),
            });
        self.follow(&bell)?;
        Ok(Rang {
            bell,
            script: Some(script),
        })
    }

    /// After a wait on a doorbell that the server refused: a slot that moved, a demoted primary
    /// (which unblocks its clients with UNBLOCKED and closes), a shard without a primary. The
    /// next request finds the server again.
    fn follow(&mut self, bell: &Result<bool, BackendError>) -> Result<(), BackendError> {
        if let Err(BackendError::Server { code, detail }) = bell {
            match code.as_str() {
                "MOVED" => {
                    if let Some((slot, addr)) = route::redirect(detail) {
                        self.connector.moved(slot, addr)?;
                    }
                    self.conn = None;
                }
                "UNBLOCKED" | "READONLY" | "MASTERDOWN" | "CLUSTERDOWN" => {
                    self.connector.failed();
                    self.conn = None;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// How many replicas have every write made on this connection so far, waiting up to
    /// `within` for `wanted` of them (`WAIT`). Only meaningful on the connection that made the
    /// write: an error if that connection is gone.
    pub fn wait_replicas(
        &mut self,
        wanted: u32,
        within: Duration,
        deadline: Instant,
    ) -> Result<u32, BackendError> {
        let _deferred = Deferred::new();
        let Some(conn) = self.conn.as_mut() else {
            return Err(BackendError::Lost(
                "the connection that made the write is gone".into(),
            ));
        };
        // The server answers after `within`; allow a round trip on top.
        let limit = (within + self.connector.timeout)
            .min(deadline.saturating_duration_since(Instant::now()))
            .max(Duration::from_millis(1));
        let result = route::set_timeouts(conn, limit).and_then(|()| {
            redis::cmd("WAIT")
                .arg(wanted)
                .arg(u64::try_from(within.as_millis()).unwrap_or(u64::MAX).max(1))
                .query::<i64>(conn)
                .map_err(|e| BackendError::from_command(e, limit))
        });
        match result {
            Ok(n) => {
                self.answered = true;
                Ok(u32::try_from(n).unwrap_or(0))
            }
            Err(e) => {
                // A reply may still come on this connection: never read it as another's.
                self.conn = None;
                Err(e)
            }
        }
    }

    /// The states of this primary's replicas that are not `online` (`INFO replication`:
    /// `wait_bgsave`, `send_bulk`: still syncing), on the connection of the last request;
    /// empty when they cannot be read (an ACL user without `+info`, say).
    pub fn syncing_replicas(&mut self, deadline: Instant) -> Vec<String> {
        let _deferred = Deferred::new();
        let Some(conn) = self.conn.as_mut() else {
            return Vec::new();
        };
        let limit = self
            .connector
            .timeout
            .min(deadline.saturating_duration_since(Instant::now()))
            .max(Duration::from_millis(1));
        let info = route::set_timeouts(conn, limit).and_then(|()| {
            redis::cmd("INFO")
                .arg("replication")
                .query::<String>(conn)
                .map_err(|e| BackendError::from_command(e, limit))
        });
        match info {
            Ok(info) => not_online(&info),
            Err(_) => {
                self.conn = None;
                Vec::new()
            }
        }
    }

    /// Every key matching the glob `pattern` (SCAN, never KEYS: it does not block the server);
    /// each SCAN call ends by its own timeout.
    pub fn scan(&mut self, pattern: &str) -> Result<Vec<String>, BackendError> {
        let _deferred = Deferred::new();
        let mut keys = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let deadline = Instant::now() + self.connector.timeout;
            let limit = self.ready(deadline)?;
            let conn = self.conn(deadline)?;
            let result = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query::<(u64, Vec<String>)>(conn);
            let (next, batch) = self.finish(result, limit, deadline)?;
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// Write `script` (as EVAL, so that it needs nothing loaded) on every connection whose last
    /// request got no reply, without reading anything, then close them. Redis executes the
    /// requests of one connection in order, so if a lost request is ever applied, this one runs
    /// right after it. Returns how many connections carried it, out of how many there were.
    pub fn send_behind_lost_replies(
        &mut self,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> (usize, usize) {
        // The usual case, every reply read: nothing to send, so no copy of the script (a
        // release's is about 24 KB, built twice: the command, then its wire form).
        if self.parked.is_empty() {
            return (0, 0);
        }
        let _deferred = Deferred::new();
        let mut command = redis::cmd("EVAL");
        command.arg(script.source).arg(keys.len()).arg(keys);
        for arg in args {
            command.arg(*arg);
        }
        let packed = command.get_packed_command();
        let parked = std::mem::take(&mut self.parked);
        let total = parked.len();
        let mut sent = 0;
        for mut conn in parked {
            let _ = conn.set_write_timeout(Some(Duration::from_millis(100)));
            if conn.send_packed_command(&packed).is_ok() {
                sent += 1;
            }
        }
        (sent, total)
    }

    /// Close the parked connections whose lost request is over, keeping only those that do not
    /// answer within [`PARKED_PROBE`]: `TIME` is written on each, then their replies are read
    /// until `TIME`'s arrives. Redis runs one connection's requests in order, so once `TIME` is
    /// answered the lost request has run (or was refused): no follow-up needs to ride behind
    /// it, and its connection is only a cost (a waiter whose doorbell reads timed out under
    /// load would otherwise keep up to [`MAX_PARKED`] of them besides its live one, where a
    /// waiter has one connection). Called before each wait on a doorbell: at most
    /// [`PARKED_PROBE`] longer, and only when something is parked.
    fn close_answered_parked(&mut self) {
        if self.parked.is_empty() {
            return;
        }
        let _deferred = Deferred::new();
        let time = redis::cmd("TIME").get_packed_command();
        let end = Instant::now() + PARKED_PROBE;
        let mut written = Vec::new();
        for mut conn in std::mem::take(&mut self.parked) {
            let _ = conn.set_write_timeout(Some(PARKED_PROBE));
            // A connection that takes no more bytes is closed: the server dropped it, and
            // with it anything still unread (or its request ran).
            if conn.send_packed_command(&time).is_ok() {
                written.push(conn);
            }
        }
        for mut conn in written {
            if !time_answered(&mut conn, end) {
                self.parked.push(conn);
            }
        }
    }

    /// How many connections carry a request whose reply was lost.
    pub fn lost_replies(&self) -> usize {
        self.parked.len()
    }

    /// Check the time left and open the connection: errors here mean nothing was sent.
    fn ready(&mut self, deadline: Instant) -> Result<Duration, BackendError> {
        self.conn(deadline)?;
        let limit = self.connector.limit(deadline, false)?;
        if let Some(conn) = &self.conn {
            route::set_timeouts(conn, limit)?;
        }
        if let Some(progress) = &self.progress {
            progress.sent.store(true, Ordering::SeqCst);
        }
        Ok(limit)
    }

    fn conn(&mut self, deadline: Instant) -> Result<&mut Connection, BackendError> {
        match &mut self.conn {
            Some(conn) => Ok(conn),
            slot => {
                let (conn, server) = self.connector.open(deadline)?;
                self.server = Some(server);
                Ok(slot.insert(conn))
            }
        }
    }

    /// Map a command's result. After an error that may have left the connection in an unknown
    /// state (a late reply would otherwise be read as the answer to the next command), the
    /// connection is not used again: parked if its request may still be applied, else dropped.
    fn finish<T>(
        &mut self,
        result: redis::RedisResult<T>,
        limit: Duration,
        deadline: Instant,
    ) -> Result<T, BackendError> {
        let err = match result {
            Ok(value) => {
                self.answered = true;
                return Ok(value);
            }
            Err(err) => BackendError::from_command(err, rounded(limit, self.connector.timeout)),
        };
        match &err {
            BackendError::Server { .. } | BackendError::Auth(_) => {
                self.answered = true;
                return Err(err);
            }
            BackendError::Timeout { .. } => {
                if let Some(conn) = self.conn.take() {
                    if self.parked.len() >= MAX_PARKED {
                        self.parked.remove(0);
                    }
                    self.parked.push(conn);
                }
            }
            _ => {
                self.conn = None;
                // The server may be gone for good (a failover): find it again next time.
                self.connector.failed();
            }
        }
        // A connection reset at the first request, by a server that never answered: a TLS
        // server rejecting plain text looks exactly like that.
        let tcp = self.server.as_ref().and_then(|s| s.tcp.clone());
        if let (BackendError::Lost(_), Some((host, port, false)), false) =
            (&err, &tcp, self.answered)
        {
            if probe::speaks_tls(host, *port, deadline.max(Instant::now() + limit / 4)) {
                return Err(BackendError::Mismatch(
                    "this server speaks TLS; use rediss:// instead of redis://".into(),
                ));
            }
        }
        Err(err)
    }
}

/// Whether `conn`, on which `TIME` was the last request written, has answered it by `end`:
/// every reply before it (those of the lost request) is read and discarded. `false` when no
/// reply, or not all of them, came in time; `true` also when the connection is closed or
/// broken (nothing more can run on it, and it can carry nothing).
fn time_answered(conn: &mut Connection, end: Instant) -> bool {
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        if conn.set_read_timeout(Some(left)).is_err() {
            return true;
        }
        match conn.recv_response() {
            Ok(reply) if is_time_reply(&reply) => return true,
            Ok(_) => {}
            Err(e) if e.is_timeout() => return false,
            // Any other error is a closed or broken connection, or a reply read in part: in
            // both cases nothing more can be read from it.
            Err(_) => return true,
        }
    }
}

/// Whether `reply` is `TIME`'s: two bulk strings of digits (seconds and microseconds; our
/// scripts' replies start with an integer), or the refusal of an ACL user without `+time`.
fn is_time_reply(reply: &redis::Value) -> bool {
    let digits = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => !b.is_empty() && b.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    match reply {
        redis::Value::Array(items) => items.len() == 2 && items.iter().all(digits),
        redis::Value::ServerError(e) => {
            e.code() == "NOPERM" && e.details().is_some_and(|d| d.contains("'time'"))
        }
        _ => false,
    }
}

/// The reply of a script sent as EVALSHA, read from `conn`; on NOSCRIPT (only a server that
/// never saw the script answers it), the script is loaded and run again.
fn script_reply(
    conn: &mut Connection,
    script: &Script,
    keys: &[&str],
    args: &[&[u8]],
) -> redis::RedisResult<redis::Value> {
    match conn.recv_response().and_then(redis::Value::extract_error) {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            script.invoke::<redis::Value>(conn, keys, args)
        }
        other => other,
    }
}

/// [`shares_buffers`] of the server that sent `hello`, a reply to `HELLO` (a flat array of
/// names and values under RESP2, a map under RESP3).
fn hello_shares_buffers(hello: &redis::Value) -> bool {
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    };
    let pairs: Vec<(String, String)> = match hello {
        redis::Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| match pair {
                [name, value] => Some((text(name), text(value))),
                _ => None,
            })
            .collect(),
        redis::Value::Map(items) => items.iter().map(|(n, v)| (text(n), text(v))).collect(),
        _ => Vec::new(),
    };
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    };
    shares_buffers(field("server"), field("version"))
}

/// Whether a server (`HELLO`'s `server` and `version`) lends its clients that have nothing
/// left to read one shared buffer: Redis from 7.4 (redis/redis#13170), Valkey from 8.0.
/// Anything else, or a version that does not parse, is taken for a server that does not.
pub(crate) fn shares_buffers(server: &str, version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    let (Some(Some(major)), Some(Some(minor))) = (parts.next(), parts.next()) else {
        return false;
    };
    match server {
        "redis" => (major, minor) >= (7, 4),
        "valkey" => major >= 8,
        _ => false,
    }
}

/// The replica states in `INFO replication` that are not `online`
/// (`slaveN:ip=...,port=...,state=wait_bgsave,...`).
fn not_online(info: &str) -> Vec<String> {
    info.lines()
        .filter(|line| line.starts_with("slave"))
        .filter_map(|line| {
            line.split(',')
                .find_map(|field| field.strip_prefix("state="))
        })
        .filter(|state| *state != "online")
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_allowed_says_what_was_meant() {
        let ms = Duration::from_millis;
        // A moment (or, loaded, tens of milliseconds) lost before the limit was computed.
        assert_eq!(rounded(ms(1999), ms(2000)), ms(2000));
        assert_eq!(rounded(ms(189), ms(200)), ms(200));
        // A deadline that cut the wait short says how short.
        assert_eq!(rounded(ms(1234), ms(2000)), ms(1240));
        assert_eq!(rounded(ms(100), ms(200)), ms(100));
    }

    #[test]
    fn replicas_that_are_not_online_are_still_syncing() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
                    slave0:ip=127.0.0.1,port=7202,state=wait_bgsave,offset=0,lag=0\r\n\
                    slave1:ip=127.0.0.1,port=7203,state=online,offset=740,lag=0\r\n\
                    slave2:ip=127.0.0.1,port=7204,state=send_bulk,offset=0,lag=1\r\n\
                    master_repl_offset:740\r\n";
        assert_eq!(not_online(info), ["wait_bgsave", "send_bulk"]);
        assert!(not_online("role:master\r\nconnected_slaves:0\r\n").is_empty());
    }

    #[test]
    fn servers_that_share_read_buffers() {
        // Measured (benches/README.md): a blocked waiter with its refresh queued costs about
        // 23 KB on each; with nothing queued 3.7 KB on Redis 8.0.2, 2.9 KB on Valkey 8.1.1.
        assert!(shares_buffers("redis", "7.4.0"));
        assert!(shares_buffers("redis", "8.0.2"));
        assert!(shares_buffers("valkey", "8.1.1"));
        assert!(!shares_buffers("redis", "7.0.15"));
        assert!(!shares_buffers("redis", "7.2.4"));
        assert!(!shares_buffers("valkey", "7.2.5"));
        assert!(!shares_buffers("redis", "7"));
        assert!(!shares_buffers("dragonfly", "8.0.0"));
        assert!(!shares_buffers("", ""));
        let bulk = |s: &str| redis::Value::BulkString(s.as_bytes().to_vec());
        let hello = |server: &str, version: &str| {
            redis::Value::Array(vec![
                bulk("server"),
                bulk(server),
                bulk("version"),
                bulk(version),
                bulk("proto"),
                redis::Value::Int(2),
            ])
        };
        assert!(hello_shares_buffers(&hello("redis", "8.0.2")));
        assert!(!hello_shares_buffers(&hello("redis", "7.0.15")));
        let map = redis::Value::Map(vec![
            (bulk("server"), bulk("valkey")),
            (bulk("version"), bulk("8.1.1")),
        ]);
        assert!(hello_shares_buffers(&map));
        assert!(!hello_shares_buffers(&redis::Value::Nil));
    }
}
