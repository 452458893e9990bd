//! A Redis server address parsed from a URL, with a display form that never shows the password.

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

/// Every form of `--redis` distlock accepts, for messages: a refused URL shows them all.
pub const FORMS: &str = "redis://[USER:PASSWORD@]HOST[:PORT][/DB] (rediss:// for TLS, \
    unix:///PATH), several such URLs for a Redlock, \
    redis+sentinel://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/SERVICE[/DB], or \
    redis+cluster://HOST:PORT[,HOST:PORT...]";

/// A parsed Redis URL.
#[derive(Clone)]
pub struct Endpoint {
    pub(super) info: ConnectionInfo,
    display: String,
    password: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    // Never derive Debug here: redis-rs's ConnectionInfo prints the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Endpoint").field(&self.display).finish()
    }
}

impl Endpoint {
    /// Parse `url`. The error is a one-line usage message that never repeats the URL (which may
    /// hold a password).
    pub fn parse(url: &str) -> Result<Self, String> {
        let url = url.trim();
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("redis" | "rediss" | "unix" | "redis+unix") => {}
            Some(other) => {
                return Err(format!(
                    "the Redis URL has scheme \"{}\"; use {FORMS}",
                    crate::text::quote(other).trim_matches('"')
                ));
            }
            None => {
                return Err(format!(
                    "the Redis URL has no scheme; use {FORMS} (e.g. redis://127.0.0.1:6379)"
                ));
            }
        }
        let info = url
            .into_connection_info()
            .map_err(|e| format!("the Redis URL is not valid ({}); use {FORMS}", e.category()))?;
        let password = info.redis_settings().password().map(str::to_owned);
        let display = display(&info);
        Ok(Endpoint {
            info,
            display,
            password,
        })
    }

    /// The URL as shown to users: the password replaced by `***`.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// The password, so that the output layer can scrub it from any text.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// The same URL (scheme, credentials, database, TLS settings) for the server at
    /// `host:port`: a Cluster node that a seed leads to.
    pub(super) fn at(&self, host: &str, port: u16) -> Endpoint {
        let addr = match self.info.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: host.to_owned(),
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host.to_owned(), port),
        };
        let info = self.info.clone().set_addr(addr);
        Endpoint {
            display: display(&info),
            info,
            password: self.password.clone(),
        }
    }

    /// Whether the connection uses TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self.info.addr(), ConnectionAddr::TcpTls { .. })
    }
}

/// Best-effort extraction of a password from a URL we could not parse, so that it can still be
/// redacted from every message.
pub fn password_in(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let userinfo = rest.rsplit_once('@')?.0;
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty()).then(|| password.to_owned())
}

fn display(info: &ConnectionInfo) -> String {
    let settings = info.redis_settings();
    let auth = match (settings.username(), settings.password()) {
        (Some(user), Some(_)) => format!("{user}:***@"),
        (None, Some(_)) => ":***@".to_owned(),
        (Some(user), None) => format!("{user}@"),
        (None, None) => String::new(),
    };
    let db = match settings.db() {
        0 => String::new(),
        n => format!("/{n}"),
    };
    match info.addr() {
        ConnectionAddr::Tcp(host, port) => format!("redis://{auth}{}:{port}{db}", bracket(host)),
        ConnectionAddr::TcpTls { host, port, .. } => {
            format!("rediss://{auth}{}:{port}{db}", bracket(host))
        }
        ConnectionAddr::Unix(path) => format!("unix://{auth}{}{db}", path.display()),
        _ => "redis://(unknown address)".to_owned(),
    }
}

fn bracket(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_hides_password() {
        let e = Endpoint::parse("redis://alice:s3cret@db.example:6380/2").unwrap();
        assert_eq!(e.display(), "redis://alice:***@db.example:6380/2");
        assert_eq!(e.password(), Some("s3cret"));
        assert!(!format!("{e:?}").contains("s3cret"));
        let e = Endpoint::parse("redis://:pw@127.0.0.1").unwrap();
        assert_eq!(e.display(), "redis://:***@127.0.0.1:6379");
    }

    #[test]
    fn unix_sockets() {
        let e = Endpoint::parse("unix:///run/redis.sock").unwrap();
        assert_eq!(e.display(), "unix:///run/redis.sock");
    }

    #[test]
    fn bad_schemes_are_refused_without_echoing_the_url() {
        let err = Endpoint::parse("http://u:topsecret@host").unwrap_err();
        assert!(err.contains("\"http\""), "{err}");
        assert!(!err.contains("topsecret"));
        // Every accepted form is shown, the Sentinel and Cluster ones included.
        for form in [
            "redis://",
            "rediss://",
            "unix://",
            "redis+sentinel://",
            "redis+cluster://",
        ] {
            assert!(err.contains(form), "{form} missing from: {err}");
        }
        assert!(
            Endpoint::parse("localhost:6379")
                .unwrap_err()
                .contains("no scheme")
        );
    }

    #[test]
    fn password_of_unparsable_url() {
        assert_eq!(password_in("redis://u:p@ss@h"), Some("p@ss".into()));
        assert_eq!(password_in("redis://h"), None);
    }
}
