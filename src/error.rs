//! Errors that end distlock, each deciding its exit code. They are printed in one place
//! ([`crate::main`]), as one `distlock: ...` line naming the problem and, where there is one,
//! the fix.

use crate::backend::BackendError;
use crate::exit;

/// Why distlock stops on its own account.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line or the environment asks for something impossible (exit 64).
    #[error("{0}")]
    Usage(String),
    /// Redis could not be used (exit 69; 65 when the key holds another type of value).
    #[error("{context} at {server}: {source}")]
    Redis {
        /// What we were doing ("cannot reach Redis", "cannot acquire the lock").
        context: String,
        /// The server, password redacted.
        server: String,
        /// What went wrong.
        source: BackendError,
    },
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
            Error::Usage(_) => exit::USAGE,
            Error::Redis { source, .. } if source.is_wrong_type() => exit::DATA,
            Error::Redis { .. } => exit::UNAVAILABLE,
            Error::NotFound(_) => exit::NOT_FOUND,
            Error::CannotExecute(_) => exit::CANNOT_EXECUTE,
            Error::Internal(_) => exit::SOFTWARE,
        }
    }

    /// The whole message, with the hint that says what to do.
    pub fn message(&self) -> String {
        let hint = match self {
            Error::Redis { source, .. } if source.is_wrong_type() => {
                Some("that key is not a lock; choose another --key or --prefix")
            }
            Error::Redis { source, .. } => source.hint(),
            Error::Internal(_) => Some(
                "this is a bug or a limit of the system; run again with -v and report what it says",
            ),
            _ => None,
        };
        match hint {
            Some(hint) => format!("{self}; {hint}"),
            None => self.to_string(),
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
        let redis = |code: &str| Error::Redis {
            context: "cannot acquire".into(),
            server: "redis://h:1".into(),
            source: BackendError::Server {
                code: code.into(),
                detail: "d".into(),
            },
        };
        assert_eq!(redis("WRONGTYPE").exit_code(), 65);
        assert!(redis("WRONGTYPE").message().contains("--prefix"));
        assert_eq!(redis("NOPERM").exit_code(), 69);
        assert_eq!(Error::NotFound("x".into()).exit_code(), 127);
        assert_eq!(Error::CannotExecute("x".into()).exit_code(), 126);
        assert_eq!(Error::Internal("x".into()).exit_code(), 70);
    }
}
