//! Errors that end distlock, each deciding its exit code. They are printed in one place
//! ([`crate::main`]), as one `distlock: ...` line naming the problem and, where there is one,
//! the fix.

use crate::backend::BackendError;
use crate::exit::Code;
use crate::output::Ev;

/// Why distlock stops on its own account.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line or the environment asks for something impossible (exit 64).
    #[error("{0}")]
    Usage(String),
    /// Redis could not be used (exit 69; 65 when the key holds another type of value, or a lock
    /// in a newer key layout).
    #[error("{context} at {server}: {source}")]
    Redis {
        /// What we were doing ("cannot reach Redis", "cannot acquire the lock").
        context: String,
        /// The server, password redacted.
        server: String,
        /// What went wrong.
        source: BackendError,
        /// What else the user must know (what an attempt may have left behind).
        note: Option<String>,
    },
    /// The key is used in another way: as a mutex and a semaphore, or with another limit (65).
    #[error("{0}")]
    Conflict(String),
    /// The command does not exist (exit 127).
    #[error("{0}")]
    NotFound(String),
    /// The command exists but cannot be run (exit 126).
    #[error("{0}")]
    CannotExecute(String),
    /// Something distlock needs from the operating system failed, or a bug (exit 70).
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// The exit code this error ends distlock with.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => Code::Usage.get(),
            Error::Redis { source, .. } if source.is_wrong_type() || source.is_newer_protocol() => {
                Code::Data.get()
            }
            Error::Redis { .. } => Code::Unavailable.get(),
            Error::Conflict(_) => Code::Data.get(),
            Error::NotFound(_) => Code::NotFound.get(),
            Error::CannotExecute(_) => Code::CannotExecute.get(),
            Error::Internal(_) => Code::Software.get(),
        }
    }

    /// The event of its message (`--log-format json`).
    pub fn event(&self) -> Ev {
        match self {
            Error::Usage(_) => Ev::UsageError,
            Error::Redis { source, .. } if source.is_newer_protocol() => Ev::NewerProtocol,
            Error::Redis { .. } => Ev::RedisError,
            Error::Conflict(_) => Ev::LockConflict,
            Error::NotFound(_) => Ev::CommandNotFound,
            Error::CannotExecute(_) => Ev::CommandNotExecutable,
            Error::Internal(_) => Ev::InternalError,
        }
    }

    /// The whole message, with the hint that says what to do.
    pub fn message(&self) -> String {
        let hint = match self {
            Error::Redis { source, .. } if source.is_wrong_type() => {
                Some("that key is not a lock; choose another --key or --prefix".to_owned())
            }
            Error::Redis { source, server, .. } => source.hint_at(server),
            Error::Internal(_) => Some(
                "this is a bug or a limit of the system; run again with -v and report what it says"
                    .to_owned(),
            ),
            _ => None,
        };
        let mut text = self.to_string();
        if let Some(hint) = hint {
            text.push_str("; ");
            text.push_str(&hint);
        }
        if let Error::Redis {
            note: Some(note), ..
        } = self
        {
            text.push_str("; ");
            text.push_str(note);
        }
        text
    }

    /// A Redis error while `context`, at `server`.
    pub fn redis(
        context: impl Into<String>,
        server: impl Into<String>,
        source: BackendError,
    ) -> Self {
        Error::Redis {
            context: context.into(),
            server: server.into(),
            source,
            note: None,
        }
    }
}

impl From<crate::child::spawn::SpawnError> for Error {
    fn from(err: crate::child::spawn::SpawnError) -> Self {
        match err {
            crate::child::spawn::SpawnError::NotFound(msg) => Error::NotFound(msg),
            crate::child::spawn::SpawnError::CannotExecute(msg) => Error::CannotExecute(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(Error::Usage("x".into()).exit_code(), 64);
        let redis = |code: &str| {
            Error::redis(
                "cannot acquire",
                "redis://h:1",
                BackendError::Server {
                    code: code.into(),
                    detail: "d".into(),
                },
            )
        };
        assert_eq!(redis("WRONGTYPE").exit_code(), 65);
        assert!(redis("WRONGTYPE").message().contains("--prefix"));
        assert_eq!(redis("NOPERM").exit_code(), 69);
        let newer = Error::redis(
            "cannot acquire",
            "redis://h:1",
            BackendError::NewerProtocol(Box::new(crate::backend::Newer {
                found: "2".into(),
                ours: "1".into(),
            })),
        );
        assert_eq!(newer.exit_code(), 65);
        assert_eq!(newer.event(), Ev::NewerProtocol);
        assert!(
            newer.message().contains("protocol 2"),
            "{}",
            newer.message()
        );
        assert!(newer.message().contains("upgrade distlock"));
        assert_eq!(Error::NotFound("x".into()).exit_code(), 127);
        assert_eq!(Error::CannotExecute("x".into()).exit_code(), 126);
        assert_eq!(Error::Internal("x".into()).exit_code(), 70);
    }
}
