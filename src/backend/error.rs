//! Errors from talking to Redis, classified by what the caller can do about them.

use std::fmt;

/// Why a Redis operation failed.
#[derive(Clone, Debug)]
pub enum BackendError {
    /// No connection could be made (refused, unreachable, DNS, connect timeout). Nothing was sent.
    Connect(String),
    /// The server refused our credentials. Fatal: retrying with the same password cannot help.
    Auth(String),
    /// The TLS handshake failed (untrusted certificate, wrong host name, protocol mismatch).
    /// Fatal: retrying cannot help.
    Tls(String),
    /// The connection failed or timed out after the command was sent: the command may or may not
    /// have been applied.
    Io {
        /// A timeout (rather than a dropped connection).
        timeout: bool,
        /// What happened, for messages.
        detail: String,
    },
    /// The server answered with an error (`code` is its first word, e.g. `NOPERM`).
    Server {
        /// The Redis error code (`ERR`, `WRONGTYPE`, `NOPERM`, `READONLY`, `LOADING`, ...).
        code: String,
        /// The rest of the message.
        detail: String,
    },
    /// The server answered with something the script never returns. A bug or a foreign key.
    Reply(String),
}

impl BackendError {
    /// Worth retrying (possibly after reconnecting): the server or the network may recover.
    pub fn is_transient(&self) -> bool {
        match self {
            BackendError::Connect(_) | BackendError::Io { .. } => true,
            BackendError::Server { code, .. } => matches!(
                code.as_str(),
                "LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN" | "OOM" | "READONLY"
            ),
            BackendError::Auth(_) | BackendError::Tls(_) | BackendError::Reply(_) => false,
        }
    }

    /// The command may have been applied although no reply arrived.
    pub fn maybe_applied(&self) -> bool {
        matches!(self, BackendError::Io { .. })
    }

    /// No reply arrived in time (the server may just be slow).
    pub fn is_timeout(&self) -> bool {
        matches!(self, BackendError::Io { timeout: true, .. })
    }

    /// The server holds another type of value at the key.
    pub fn is_wrong_type(&self) -> bool {
        matches!(self, BackendError::Server { code, .. } if code == "WRONGTYPE")
    }

    /// A one-line hint on what the user can do, when there is a useful one.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            BackendError::Tls(_) => Some(
                "check --tls-ca (the CA that signed the server's certificate) and that the URL's host name is in that certificate",
            ),
            BackendError::Connect(_) => {
                Some("check that Redis runs and --redis (or DISTLOCK_REDIS_URL) points at it")
            }
            BackendError::Auth(_) => {
                Some("check the user name and password in the URL: redis://USER:PASSWORD@HOST")
            }
            BackendError::Io { timeout: true, .. } => {
                Some("Redis did not answer in time; raise --redis-timeout if it is just slow")
            }
            BackendError::Server { code, detail } => match code.as_str() {
                "NOPERM" => Some(ACL_HINT),
                "ERR" if detail.contains("user executing the script") => Some(ACL_HINT),
                "READONLY" => {
                    Some("this server is a read-only replica; point --redis at the primary")
                }
                "OOM" => Some(
                    "Redis is out of memory; lock servers should run with maxmemory-policy noeviction and room to spare",
                ),
                _ => None,
            },
            _ => None,
        }
    }
}

/// What an ACL user needs for distlock.
const ACL_HINT: &str = "the Redis user needs ~distlock:* &distlock:* +evalsha +script|load +subscribe +get +set +pexpire +pttl +del +publish +hset +hget +hgetall +time";

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::Connect(detail) => write!(f, "cannot connect: {detail}"),
            BackendError::Auth(detail) => write!(f, "authentication failed: {detail}"),
            BackendError::Tls(detail) => write!(f, "TLS failure: {detail}"),
            BackendError::Io {
                timeout: true,
                detail,
            } => write!(f, "Redis did not answer {detail}"),
            BackendError::Io {
                timeout: false,
                detail,
            } => write!(f, "connection lost ({detail})"),
            BackendError::Server { code, detail } => write!(f, "Redis error {code} {detail}"),
            BackendError::Reply(detail) => write!(f, "unexpected reply from Redis: {detail}"),
        }
    }
}

impl std::error::Error for BackendError {}

impl BackendError {
    /// Classify an error from an established connection (the command was sent, or being sent).
    pub(crate) fn from_command(err: redis::RedisError) -> Self {
        Self::classify(err, true)
    }

    /// Classify an error from opening a connection (nothing of ours was sent yet).
    pub(crate) fn from_connect(err: redis::RedisError) -> Self {
        Self::classify(err, false)
    }

    fn classify(err: redis::RedisError, sent: bool) -> Self {
        use redis::ErrorKind;
        if let Some(detail) = tls_failure(&err) {
            return BackendError::Tls(detail);
        }
        match err.kind() {
            ErrorKind::AuthenticationFailed => BackendError::Auth(
                err.detail()
                    .unwrap_or("the server refused the credentials")
                    .to_owned(),
            ),
            ErrorKind::Io | ErrorKind::Parse if !sent => BackendError::Connect(io_detail(&err)),
            ErrorKind::Io => BackendError::Io {
                timeout: err.is_timeout(),
                detail: io_detail(&err),
            },
            ErrorKind::Parse => BackendError::Io {
                timeout: false,
                detail: format!("protocol error: {}", io_detail(&err)),
            },
            ErrorKind::UnexpectedReturnType => BackendError::Reply(err.to_string()),
            _ => match err.code() {
                Some(code) => {
                    let code = code.to_owned();
                    let detail = err.detail().unwrap_or_default().to_owned();
                    if code == "WRONGPASS"
                        || code == "NOAUTH"
                        || (code == "ERR"
                            && (detail.contains("AUTH") || detail.contains("unauthenticated")))
                    {
                        BackendError::Auth(format!("{code} {detail}"))
                    } else {
                        BackendError::Server { code, detail }
                    }
                }
                None if sent => BackendError::Reply(err.to_string()),
                None => BackendError::Connect(err.to_string()),
            },
        }
    }
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
        assert!(BackendError::Connect("refused".into()).is_transient());
        assert!(
            BackendError::Io {
                timeout: true,
                detail: String::new()
            }
            .maybe_applied()
        );
        assert!(!BackendError::Connect("refused".into()).maybe_applied());
        assert!(!BackendError::Auth("no".into()).is_transient());
        let loading = BackendError::Server {
            code: "LOADING".into(),
            detail: String::new(),
        };
        assert!(loading.is_transient());
        let noperm = BackendError::Server {
            code: "NOPERM".into(),
            detail: String::new(),
        };
        assert!(!noperm.is_transient());
        assert!(noperm.hint().is_some());
    }
}
