//! Errors from talking to Redis, classified by what the caller can do about them: retry,
//! reconnect, or give up; and, for a request whose reply never came, whether it may have been
//! applied. Each error says its cause once; [`BackendError::hint`] adds what to do, once.

use std::fmt;
use std::time::Duration;

/// Why a Redis operation failed.
#[derive(Clone, Debug)]
pub enum BackendError {
    /// No connection could be made (refused, unreachable, unknown host). Nothing was sent.
    Connect(String),
    /// No reply within the time allowed.
    Timeout {
        /// Whether our request had been sent: if so, it may have been applied.
        sent: bool,
        /// How long we waited.
        after: Duration,
    },
    /// The connection broke after the request was sent: it may have been applied.
    Lost(String),
    /// The caller was interrupted (a signal) before the reply came.
    Interrupted {
        /// Whether our request had been sent: if so, it may have been applied.
        sent: bool,
    },
    /// The server refused our credentials, or wants some we did not give. Fatal.
    Auth(String),
    /// The TLS handshake failed (untrusted certificate, wrong host name). Fatal.
    Tls(String),
    /// The other end does not speak what we speak: TLS against a plain-text server or the
    /// reverse, or not Redis at all. Fatal; the text says what to change.
    Mismatch(String),
    /// The server answered with an error (`code` is its first word, e.g. `NOPERM`).
    Server {
        /// The Redis error code (`ERR`, `WRONGTYPE`, `NOPERM`, `READONLY`, `LOADING`, ...).
        code: String,
        /// The rest of the message.
        detail: String,
    },
    /// The server answered with something the script never returns. A bug or a foreign key.
    Reply(String),
    /// `--replicas`: fewer replicas than required acknowledged a write in time.
    NotReplicated(Box<Unreplicated>),
    /// A lock over independent nodes (a Redlock) heard from fewer than a majority of them:
    /// which failed, and why. Whether it is worth retrying, or a misconfiguration, follows from
    /// the nodes' own errors (see [`NoQuorum`]).
    NoQuorum(Box<NoQuorum>),
    /// The lock is stored in a newer key layout than this distlock speaks (its protocol
    /// marker names a higher version): a script refused it before reading or changing
    /// anything (see `lock/lua/protocol.lua`). Fatal.
    NewerProtocol(Box<Newer>),
}

/// Too few nodes of a Redlock answered.
#[derive(Clone, Debug)]
pub struct NoQuorum {
    /// How many nodes answered.
    pub answered: usize,
    /// How many nodes there are.
    pub nodes: usize,
    /// How many make a majority.
    pub needed: usize,
    /// Each node that failed, in the order the nodes were given: its address (passwords
    /// redacted) and its error.
    pub failed: Vec<(String, BackendError)>,
}

impl NoQuorum {
    /// Whether the nodes that failed with an error of this kind are too many for a majority
    /// to answer even if every other node did.
    fn lost_to(&self, kind: impl Fn(&BackendError) -> bool) -> bool {
        let others = self.failed.iter().filter(|(_, e)| !kind(e)).count();
        self.answered + others < self.needed
    }
}

/// A lock in a newer key layout, as a script reported it.
#[derive(Clone, Debug)]
pub struct Newer {
    /// The protocol the lock's marker names, as stored (sanitised by the script).
    pub found: String,
    /// The protocol this distlock's scripts speak, as the refusal names it (the lock module's
    /// `PROTOCOL`: the backend only reports what the script said).
    pub ours: String,
}

/// The error code with which a script refuses a lock of a newer protocol
/// (`DISTLOCK-PROTOCOL <found> <ours>`, see `lock/lua/protocol.lua`).
pub const PROTOCOL_ERROR: &str = "DISTLOCK-PROTOCOL";

/// A write that `--replicas` could not confirm.
#[derive(Clone, Debug)]
pub struct Unreplicated {
    /// How many replicas acknowledged it (0 when the count could not be read).
    pub acked: u32,
    /// How many were required.
    pub wanted: u32,
    /// How long we waited.
    pub within: Duration,
    /// Why the count could not be read, if it could not.
    pub detail: Option<String>,
    /// The states (`INFO replication`) of the primary's replicas that are not yet `online`,
    /// such as `wait_bgsave` or `send_bulk`: they are still syncing, and acknowledge nothing
    /// until they are done.
    pub syncing: Vec<String>,
}

impl BackendError {
    /// Worth retrying (possibly after reconnecting): the server or the network may recover.
    pub fn is_transient(&self) -> bool {
        match self {
            BackendError::Connect(_) | BackendError::Timeout { .. } | BackendError::Lost(_) => true,
            BackendError::Server { code, .. } => matches!(
                code.as_str(),
                "LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN" | "OOM" | "READONLY"
            ),
            BackendError::Interrupted { .. }
            | BackendError::Auth(_)
            | BackendError::Tls(_)
            | BackendError::Mismatch(_)
            | BackendError::Reply(_)
            | BackendError::NotReplicated(_)
            | BackendError::NewerProtocol(_) => false,
            // Worth retrying unless the nodes that failed for good leave no majority.
            BackendError::NoQuorum(q) => !q.lost_to(|e| !e.is_transient()),
        }
    }

    /// Whether a server that has never answered shows a problem of configuration (wrong port,
    /// wrong protocol, wrong credentials) rather than a slow or restarting server: such an
    /// error is reported at once instead of being retried.
    pub fn is_misconfiguration(&self) -> bool {
        match self {
            BackendError::Connect(_)
            | BackendError::Auth(_)
            | BackendError::Tls(_)
            | BackendError::Mismatch(_)
            | BackendError::NewerProtocol(_) => true,
            BackendError::Server { code, .. } => !matches!(
                code.as_str(),
                "LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN"
            ),
            BackendError::Timeout { .. }
            | BackendError::Lost(_)
            | BackendError::Interrupted { .. }
            | BackendError::Reply(_)
            | BackendError::NotReplicated(_) => false,
            // The nodes that refused (say) leave no majority, whatever the slow ones do: a
            // Redlock that cannot work now fails as one server that refuses does.
            BackendError::NoQuorum(q) => q.lost_to(BackendError::is_misconfiguration),
        }
    }

    /// The request may have been applied although no reply arrived.
    pub fn maybe_applied(&self) -> bool {
        match self {
            BackendError::NoQuorum(q) => q.failed.iter().any(|(_, e)| e.maybe_applied()),
            _ => matches!(
                self,
                BackendError::Timeout { sent: true, .. }
                    | BackendError::Lost(_)
                    | BackendError::Interrupted { sent: true }
            ),
        }
    }

    /// No reply arrived in time (the server may just be slow).
    pub fn is_timeout(&self) -> bool {
        matches!(self, BackendError::Timeout { .. })
    }

    /// The time ran out before the request was done: no reply came, or the server asked
    /// again and again to be asked later (TRYAGAIN while a Cluster slot migrates). More time
    /// may bring an answer.
    pub fn is_unfinished(&self) -> bool {
        match self {
            BackendError::Timeout { .. } => true,
            BackendError::Server { code, .. } => code == "TRYAGAIN",
            _ => false,
        }
    }

    /// The server holds another type of value at the key.
    pub fn is_wrong_type(&self) -> bool {
        match self {
            BackendError::Server { code, .. } => code == "WRONGTYPE",
            BackendError::NoQuorum(q) => q.failed.iter().any(|(_, e)| e.is_wrong_type()),
            _ => false,
        }
    }

    /// [`BackendError::hint`] for the servers at `server` (a URL as messages show it): the
    /// URL form it suggests is the one the user gave (`rediss://`, `redis+sentinel://...`).
    pub fn hint_at(&self, server: &str) -> Option<String> {
        let hint = self.hint()?;
        if !matches!(self, BackendError::Auth(_)) {
            return Some(hint.to_owned());
        }
        let scheme = server
            .split_once("://")
            .map_or("redis", |(scheme, _)| scheme);
        Some(if scheme.ends_with("+sentinel") {
            format!(
                "check the user name and password in the URL: {scheme}://[USER]:PASSWORD@HOST/SERVICE \
                 (for the data nodes; the sentinels' own, if they have others: \
                 ?sentinel_username=USER&sentinel_password=PASSWORD)"
            )
        } else {
            hint.replace("SCHEME://", &format!("{scheme}://"))
        })
    }

    /// The lock is stored in a newer key layout than this distlock speaks.
    pub fn is_newer_protocol(&self) -> bool {
        match self {
            BackendError::NewerProtocol(_) => true,
            BackendError::NoQuorum(q) => q.failed.iter().any(|(_, e)| e.is_newer_protocol()),
            _ => false,
        }
    }

    /// A one-line hint on what the user can do, when there is a useful one (see
    /// [`BackendError::hint_at`] for one that names the user's URL form).
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            // The nodes' hint when they agree on one (all refused, say); else each node's
            // error speaks for itself.
            BackendError::NoQuorum(q) => {
                let mut hints = q.failed.iter().map(|(_, e)| e.hint());
                let first = hints.next().flatten();
                hints.all(|h| h == first).then_some(first).flatten()
            }
            BackendError::Tls(_) => Some(
                "check --tls-ca (the CA that signed the server's certificate) and that the URL's host name is in that certificate",
            ),
            BackendError::Connect(_) => {
                Some("check that Redis runs and --redis (or DISTLOCK_REDIS_URL) points at it")
            }
            BackendError::Auth(_) => {
                Some("check the user name and password in the URL: SCHEME://[USER]:PASSWORD@HOST")
            }
            BackendError::Timeout { .. } => Some("raise --redis-timeout if Redis is just slow"),
            BackendError::NotReplicated(u) if !u.syncing.is_empty() => Some(
                "try again once the replicas have synced (INFO replication on the primary shows state=online for each)",
            ),
            BackendError::NotReplicated(_) => Some(
                "check the primary's replicas (INFO replication), or raise --replicas-timeout, or lower --replicas",
            ),
            BackendError::NewerProtocol(_) => Some(
                "a newer distlock uses this lock: upgrade distlock on this machine (every client of a lock must speak its protocol; see docs/protocol.md); nothing was changed",
            ),
            BackendError::Server { code, detail } => match code.as_str() {
                "NOPERM" => Some(ACL_HINT),
                "ERR" if detail.contains("user executing the script") => Some(ACL_HINT),
                "READONLY" => {
                    Some("this server is a read-only replica; point --redis at the primary")
                }
                "TRYAGAIN" => Some(
                    "the lock's Cluster slot is being moved to another node; try again once the migration is over, or raise --redis-timeout to wait it out",
                ),
                "OOM" => Some(
                    "Redis is out of memory; lock servers should run with maxmemory-policy noeviction and room to spare",
                ),
                _ => None,
            },
            _ => None,
        }
    }
}

/// What an ACL user needs for distlock (docs/protocol.md's "Redis key layout" and the topology
/// sections of docs/guide.md say the same).
const ACL_HINT: &str = "the Redis user needs ~distlock:* &distlock:* +evalsha +eval +script|load +subscribe +get +set +del +exists +pexpire +pexpireat +pttl +publish +hset +hget +hgetall +hdel +zadd +zrange +zrangebyscore +zrank +zscore +zrem +zcard +time +xadd +xrange +xrevrange +hincrby +lpush +blpop, +scan for list, +select for a database other than 0; behind Sentinel also +role (and on the sentinels +sentinel|get-master-addr-by-name); on a Cluster also +cluster|slots +asking";

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::Connect(detail) => write!(f, "cannot connect: {detail}"),
            BackendError::Timeout { sent: true, after } => {
                write!(f, "no answer within {}", crate::text::duration(*after))
            }
            BackendError::Timeout { sent: false, after } => write!(
                f,
                "could not connect within {}",
                crate::text::duration(*after)
            ),
            BackendError::Lost(detail) => write!(f, "connection lost ({detail})"),
            BackendError::Interrupted { .. } => write!(f, "interrupted"),
            BackendError::Auth(detail) => write!(f, "authentication failed: {detail}"),
            BackendError::Tls(detail) => write!(f, "TLS failure: {detail}"),
            BackendError::Mismatch(detail) => f.write_str(detail),
            BackendError::Server { code, detail } => write!(f, "Redis error {code} {detail}"),
            BackendError::Reply(detail) => write!(f, "unexpected reply from Redis: {detail}"),
            BackendError::NewerProtocol(newer) => write!(
                f,
                "the lock is stored in key layout protocol {}, and this distlock ({}) speaks \
                 protocol {}",
                newer.found,
                env!("CARGO_PKG_VERSION"),
                newer.ours
            ),
            BackendError::NoQuorum(q) => {
                write!(
                    f,
                    "only {} of {} Redis nodes answered; a Redlock needs {}",
                    q.answered, q.nodes, q.needed
                )?;
                for (i, (address, e)) in q.failed.iter().enumerate() {
                    let sep = if i == 0 { ": " } else { "; " };
                    write!(f, "{sep}{address} {e}")?;
                }
                Ok(())
            }
            BackendError::NotReplicated(u) => match &u.detail {
                None => {
                    write!(
                        f,
                        "only {} of the {} replica{} required acknowledged the write within {}",
                        u.acked,
                        u.wanted,
                        if u.wanted == 1 { "" } else { "s" },
                        crate::text::duration(u.within)
                    )?;
                    match u.syncing.as_slice() {
                        [] => Ok(()),
                        [state] => write!(
                            f,
                            " (a replica is still syncing with the primary: state {state})"
                        ),
                        states => write!(
                            f,
                            " ({} replicas are still syncing with the primary: states {})",
                            states.len(),
                            states.join(", ")
                        ),
                    }
                }
                Some(detail) => write!(
                    f,
                    "could not learn whether {} replica{} acknowledged the write ({detail})",
                    u.wanted,
                    if u.wanted == 1 { "" } else { "s" },
                ),
            },
        }
    }
}

impl std::error::Error for BackendError {}

impl BackendError {
    /// Classify an error from an established connection: the request was sent, or being sent.
    /// `timeout` is the time we allowed for the reply.
    pub(crate) fn from_command(err: redis::RedisError, timeout: Duration) -> Self {
        Self::classify(err, true, timeout)
    }

    /// Classify an error from opening a connection (nothing of ours was sent yet).
    pub(crate) fn from_connect(err: redis::RedisError, timeout: Duration) -> Self {
        Self::classify(err, false, timeout)
    }

    fn classify(err: redis::RedisError, sent: bool, timeout: Duration) -> Self {
        use redis::ErrorKind;
        if let Some(detail) = tls_failure(&err) {
            return BackendError::Tls(detail);
        }
        if err.is_timeout() {
            return BackendError::Timeout {
                sent,
                after: timeout,
            };
        }
        match err.kind() {
            ErrorKind::AuthenticationFailed => BackendError::Auth(
                err.detail()
                    .unwrap_or("the server refused the credentials")
                    .to_owned(),
            ),
            ErrorKind::Io if !sent => BackendError::Connect(io_detail(&err)),
            ErrorKind::Io => BackendError::Lost(io_detail(&err)),
            ErrorKind::Parse => BackendError::Mismatch(format!(
                "the server does not answer in the Redis protocol ({}); check the host and port",
                io_detail(&err)
            )),
            ErrorKind::UnexpectedReturnType => BackendError::Reply(err.to_string()),
            _ => match err.code() {
                Some(PROTOCOL_ERROR) => {
                    // `DISTLOCK-PROTOCOL <found> <ours>` (see `lock/lua/protocol.lua`).
                    let mut words = err.detail().unwrap_or_default().split_whitespace();
                    let mut word = || words.next().unwrap_or("unknown").to_owned();
                    let (found, ours) = (word(), word());
                    BackendError::NewerProtocol(Box::new(Newer { found, ours }))
                }
                Some(code) => {
                    let code = code.to_owned();
                    let detail = err.detail().unwrap_or_default().to_owned();
                    auth_problem(&code, &detail).unwrap_or(BackendError::Server { code, detail })
                }
                None if sent => BackendError::Reply(err.to_string()),
                None => BackendError::Connect(err.to_string()),
            },
        }
    }
}

/// Errors that mean "authenticate first" or "wrong credentials", in the words Redis uses.
fn auth_problem(code: &str, detail: &str) -> Option<BackendError> {
    // A client that has not authenticated gets NOAUTH, or, for a request with many arguments
    // (our scripts), "Protocol error: unauthenticated multibulk length".
    if code == "NOAUTH" || detail.contains("unauthenticated") {
        return Some(BackendError::Auth(
            "Redis requires a password and none was given".into(),
        ));
    }
    if code == "WRONGPASS" || (code == "ERR" && detail.contains("AUTH")) {
        return Some(BackendError::Auth(format!("{code} {detail}")));
    }
    None
}

/// The rustls error inside `err`, if the failure was the TLS layer's.
fn tls_failure(err: &redis::RedisError) -> Option<String> {
    use std::error::Error;
    let inner = err
        .source()?
        .downcast_ref::<std::sync::Arc<dyn Error + Send + Sync>>()?;
    let io = inner.downcast_ref::<std::io::Error>()?;
    let tls = io.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(tls.to_string())
}

/// The io error's message without redis-rs's framing ("An error was signalled by the server"...).
fn io_detail(err: &redis::RedisError) -> String {
    let text = err.to_string();
    text.strip_prefix("I/O error - ")
        .or_else(|| text.strip_prefix("IoError: "))
        .unwrap_or(&text)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_and_fatal() {
        let timeout = |sent| BackendError::Timeout {
            sent,
            after: Duration::from_secs(2),
        };
        assert!(BackendError::Connect("refused".into()).is_transient());
        assert!(timeout(true).maybe_applied());
        assert!(!timeout(false).maybe_applied());
        assert!(!BackendError::Connect("refused".into()).maybe_applied());
        assert!(BackendError::Lost("reset".into()).maybe_applied());
        assert!(!BackendError::Interrupted { sent: false }.maybe_applied());
        assert!(!BackendError::Auth("no".into()).is_transient());
        let loading = BackendError::Server {
            code: "LOADING".into(),
            detail: String::new(),
        };
        assert!(loading.is_transient());
        assert!(!loading.is_misconfiguration());
        let noperm = BackendError::Server {
            code: "NOPERM".into(),
            detail: String::new(),
        };
        assert!(!noperm.is_transient());
        assert!(noperm.is_misconfiguration());
        assert!(noperm.hint().is_some());
        assert!(!timeout(true).is_misconfiguration());
    }

    #[test]
    fn one_cause_said_once() {
        let e = BackendError::Timeout {
            sent: true,
            after: Duration::from_secs(2),
        };
        assert_eq!(e.to_string(), "no answer within 2s");
        assert_eq!(
            e.hint(),
            Some("raise --redis-timeout if Redis is just slow")
        );
        let e = BackendError::Timeout {
            sent: false,
            after: Duration::from_millis(500),
        };
        assert_eq!(e.to_string(), "could not connect within 500ms");
    }

    #[test]
    fn the_auth_hint_shows_the_users_url_form() {
        let auth = BackendError::Auth("WRONGPASS".into());
        for (server, form) in [
            ("redis://h:6379", "redis://[USER]:PASSWORD@HOST"),
            ("rediss://:***@h:6379", "rediss://[USER]:PASSWORD@HOST"),
            (
                "redis+cluster://h:1,h:2",
                "redis+cluster://[USER]:PASSWORD@HOST",
            ),
            (
                "rediss+sentinel://h:26379/mymaster",
                "rediss+sentinel://[USER]:PASSWORD@HOST/SERVICE",
            ),
        ] {
            let hint = auth.hint_at(server).unwrap();
            assert!(hint.contains(form), "{server}: {hint}");
        }
        let timeout = BackendError::Timeout {
            sent: true,
            after: Duration::from_secs(2),
        };
        assert_eq!(timeout.hint_at("rediss://h").as_deref(), timeout.hint());
    }

    #[test]
    fn a_missing_password_says_so() {
        for (code, detail) in [
            ("NOAUTH", "Authentication required."),
            ("ERR", "Protocol error: unauthenticated multibulk length"),
        ] {
            let e = auth_problem(code, detail).unwrap();
            assert!(e.to_string().contains("requires a password"), "{e}");
        }
        assert!(matches!(
            auth_problem("WRONGPASS", "invalid username-password pair"),
            Some(BackendError::Auth(_))
        ));
        assert!(auth_problem("ERR", "unknown command").is_none());
    }
}
