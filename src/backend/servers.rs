//! Where locks live, as the user addresses it: one grammar for every subcommand.
//!
//! * one `redis://`, `rediss://` or `unix://` URL: one server (which may turn out to be a
//!   Cluster node; see the cluster routing);
//! * several of them: independent primaries, and the lock is a Redlock over them;
//! * `redis+sentinel://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/SERVICE[/DB]` (and
//!   `rediss+sentinel://` for TLS to the sentinels and the data nodes): the primary that the
//!   sentinels name for SERVICE (sentinel port 26379 by default; the `sentinel_username` and
//!   `sentinel_password` query parameters when the sentinels' credentials differ from the data
//!   nodes'), the form redis-py based tools accept;
//! * `redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]` (and `rediss+cluster://`): a
//!   Redis Cluster, by seed nodes.
//!
//! Each node becomes an [`Endpoint`] (a URL that redis-rs parses), so credentials, TLS and
//! redaction work the same everywhere. Errors are one-line usage messages that never repeat a
//! URL (which may hold a password).

use super::Endpoint;

pub use super::endpoint::FORMS;

/// Where locks live.
#[derive(Clone, Debug)]
pub enum Servers {
    /// One server.
    One(Endpoint),
    /// Several independent primaries: a Redlock over them.
    Independent(Vec<Endpoint>),
    /// The primary that sentinels name.
    Sentinel(SentinelServers),
    /// A Redis Cluster, by seed nodes.
    Cluster(Vec<Endpoint>),
}

/// A Sentinel deployment.
#[derive(Clone, Debug)]
pub struct SentinelServers {
    /// The sentinels (with their own credentials).
    pub sentinels: Vec<Endpoint>,
    /// The service (master name) they monitor.
    pub service: String,
    /// How to reach a data node the sentinels name.
    pub data: DataNodes,
}

/// The part of a data node's URL that the sentinels do not give: scheme, credentials, database.
#[derive(Clone)]
pub struct DataNodes {
    scheme: &'static str,
    userinfo: Option<String>,
    db: u32,
    fragment: Option<String>,
}

impl std::fmt::Debug for DataNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataNodes")
            .field("scheme", &self.scheme)
            .field("db", &self.db)
            .finish()
    }
}

impl DataNodes {
    /// The data node at `host:port`.
    pub fn endpoint(&self, host: &str, port: u16) -> Result<Endpoint, String> {
        Endpoint::parse(&node_url(
            self.scheme,
            self.userinfo.as_deref(),
            &host_port(host, port),
            self.db,
            self.fragment.as_deref(),
        ))
    }
}

impl Servers {
    /// Parse what `--redis` (given once or several times, or `DISTLOCK_REDIS_URL` holding
    /// several URLs separated by whitespace) says.
    pub fn parse(urls: &[String]) -> Result<Servers, String> {
        let urls: Vec<&str> = urls.iter().flat_map(|u| u.split_whitespace()).collect();
        match urls.as_slice() {
            [] => Err(format!("no Redis URL given; use {FORMS}")),
            [one] => match scheme(one).as_deref() {
                Some("redis+sentinel" | "rediss+sentinel") => sentinel(one).map(Servers::Sentinel),
                Some("redis+cluster" | "rediss+cluster") => cluster(one).map(Servers::Cluster),
                _ => Endpoint::parse(one).map(Servers::One),
            },
            several => {
                if several
                    .iter()
                    .any(|u| scheme(u).is_some_and(|s| s.contains('+') && s != "redis+unix"))
                {
                    return Err(format!(
                        "several URLs make a Redlock over independent primaries: give each as \
                         redis://, rediss:// or unix://, not Sentinel or Cluster URLs; use {FORMS}"
                    ));
                }
                let endpoints = several
                    .iter()
                    .enumerate()
                    .map(|(i, u)| {
                        Endpoint::parse(u)
                            .map_err(|e| format!("URL {} of {}: {e}", i + 1, several.len()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let mut shown: Vec<&str> = endpoints.iter().map(Endpoint::display).collect();
                shown.sort_unstable();
                if shown.windows(2).any(|w| w[0] == w[1]) {
                    return Err(
                        "the same Redis server is given twice; a Redlock needs independent primaries"
                            .into(),
                    );
                }
                Ok(Servers::Independent(endpoints))
            }
        }
    }

    /// Every endpoint named (for redaction and messages).
    pub fn endpoints(&self) -> Vec<&Endpoint> {
        match self {
            Servers::One(e) => vec![e],
            Servers::Independent(es) | Servers::Cluster(es) => es.iter().collect(),
            Servers::Sentinel(s) => s.sentinels.iter().collect(),
        }
    }

    /// Whether TLS is used.
    pub fn is_tls(&self) -> bool {
        match self {
            Servers::Sentinel(s) => s.data.scheme == "rediss",
            _ => self.endpoints().iter().any(|e| e.is_tls()),
        }
    }

    /// How the servers are shown (passwords redacted).
    pub fn display(&self) -> String {
        match self {
            Servers::One(e) => e.display().to_owned(),
            Servers::Independent(es) => es
                .iter()
                .map(Endpoint::display)
                .collect::<Vec<_>>()
                .join(" "),
            Servers::Sentinel(s) => format!(
                "{}+sentinel://{}/{}",
                s.data.scheme,
                hosts_of(&s.sentinels),
                s.service
            ),
            Servers::Cluster(es) => format!(
                "{}+cluster://{}",
                if es.iter().any(|e| e.is_tls()) {
                    "rediss"
                } else {
                    "redis"
                },
                hosts_of(es)
            ),
        }
    }
}

/// `h1:p1,h2:p2` from the endpoints' displays.
fn hosts_of(endpoints: &[Endpoint]) -> String {
    endpoints
        .iter()
        .map(|e| {
            let shown = e.display();
            let rest = shown.split_once("://").map_or(shown, |(_, r)| r);
            let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
            rest.split('/').next().unwrap_or(rest).to_owned()
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn scheme(url: &str) -> Option<String> {
    url.trim()
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
}

/// A URL split into its parts: scheme, userinfo, the comma-separated hosts, path, query,
/// fragment.
struct Parts<'a> {
    tls: bool,
    userinfo: Option<&'a str>,
    hosts: Vec<&'a str>,
    path: &'a str,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
}

fn split<'a>(url: &'a str, kind: &str) -> Result<Parts<'a>, String> {
    let url = url.trim();
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("the {kind} URL has no scheme; use {FORMS}"))?;
    let tls = scheme.to_ascii_lowercase().starts_with("rediss");
    let (rest, fragment) = match rest.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (rest, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let hosts: Vec<&str> = hosts.split(',').map(str::trim).collect();
    if hosts.iter().any(|h| h.is_empty()) {
        return Err(format!(
            "the {kind} URL has an empty host in its list; use {FORMS}"
        ));
    }
    Ok(Parts {
        tls,
        userinfo,
        hosts,
        path,
        query,
        fragment,
    })
}

/// `host[:port]` with the default port when none is given; IPv6 literals stay bracketed.
fn with_port(host: &str, default: u16) -> Result<String, String> {
    let has_port = if host.starts_with('[') {
        host.contains("]:")
    } else {
        host.contains(':')
    };
    if !has_port {
        return Ok(format!("{host}:{default}"));
    }
    let port = host.rsplit_once(':').map(|(_, p)| p).unwrap_or_default();
    port.parse::<u16>()
        .map_err(|_| "a host in the list has a port that is not a number".to_owned())?;
    Ok(host.to_owned())
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn node_url(
    scheme: &str,
    userinfo: Option<&str>,
    host: &str,
    db: u32,
    fragment: Option<&str>,
) -> String {
    let auth = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
    let fragment = fragment.map(|f| format!("#{f}")).unwrap_or_default();
    format!("{scheme}://{auth}{host}/{db}{fragment}")
}

fn sentinel(url: &str) -> Result<SentinelServers, String> {
    let parts = split(url, "Sentinel")?;
    let mut segments = parts.path.split('/').filter(|s| !s.is_empty());
    let service = segments.next().ok_or_else(|| {
        "the Sentinel URL names no service; write the master name after the hosts, e.g. \
         redis+sentinel://host:26379/mymaster"
            .to_owned()
    })?;
    let service = percent_decode(service);
    let db = match segments.next() {
        Some(db) => db
            .parse::<u32>()
            .map_err(|_| "the Sentinel URL's database is not a number".to_owned())?,
        None => 0,
    };
    if segments.next().is_some() {
        return Err(format!(
            "the Sentinel URL has more than SERVICE/DB after the hosts; use {FORMS}"
        ));
    }
    // The sentinels use the data nodes' credentials unless the query gives their own.
    let mut sentinel_user: Option<String> = None;
    let mut sentinel_password: Option<String> = None;
    for pair in parts
        .query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "sentinel_username" => sentinel_user = Some(value.to_owned()),
            "sentinel_password" => sentinel_password = Some(value.to_owned()),
            other => {
                return Err(format!(
                    "the Sentinel URL has the unknown parameter \"{}\"; only sentinel_username and sentinel_password are understood",
                    crate::text::sanitize(&percent_decode(other))
                ));
            }
        }
    }
    let sentinel_userinfo = match (sentinel_user, sentinel_password) {
        (None, None) => parts.userinfo.map(str::to_owned),
        (user, password) => Some(format!(
            "{}:{}",
            user.unwrap_or_default(),
            password.unwrap_or_default()
        )),
    };
    let scheme = if parts.tls { "rediss" } else { "redis" };
    let sentinels = parts
        .hosts
        .iter()
        .map(|h| {
            let host = with_port(h, 26379)?;
            Endpoint::parse(&node_url(
                scheme,
                sentinel_userinfo.as_deref(),
                &host,
                0,
                parts.fragment,
            ))
            .map_err(|e| format!("a sentinel in the Sentinel URL: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SentinelServers {
        sentinels,
        service,
        data: DataNodes {
            scheme,
            userinfo: parts.userinfo.map(str::to_owned),
            db,
            fragment: parts.fragment.map(str::to_owned),
        },
    })
}

fn cluster(url: &str) -> Result<Vec<Endpoint>, String> {
    let parts = split(url, "Cluster")?;
    if !matches!(parts.path, "" | "/" | "/0") {
        return Err(
            "a Redis Cluster has only database 0; remove the path from the Cluster URL".into(),
        );
    }
    if parts.query.is_some() {
        return Err("the Cluster URL takes no parameters".into());
    }
    let scheme = if parts.tls { "rediss" } else { "redis" };
    parts
        .hosts
        .iter()
        .map(|h| {
            let host = with_port(h, 6379)?;
            Endpoint::parse(&node_url(scheme, parts.userinfo, &host, 0, parts.fragment))
                .map_err(|e| format!("a seed node in the Cluster URL: {e}"))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(urls: &[&str]) -> Result<Servers, String> {
        Servers::parse(&urls.iter().map(|u| u.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn one_url_is_one_server_and_several_are_a_redlock() {
        assert!(matches!(parse(&["redis://h:1"]), Ok(Servers::One(_))));
        let Ok(Servers::Independent(nodes)) = parse(&["redis://a:1 redis://b:2", "rediss://c:3"])
        else {
            panic!("a Redlock");
        };
        assert_eq!(nodes.len(), 3);
        assert!(
            parse(&["redis://a:1", "redis://a:1"])
                .unwrap_err()
                .contains("twice")
        );
        assert!(
            parse(&["redis://a:1", "redis+sentinel://s:1/m"])
                .unwrap_err()
                .contains("not Sentinel or Cluster")
        );
        assert!(parse(&[]).is_err());
    }

    #[test]
    fn sentinel_urls() {
        let Ok(Servers::Sentinel(s)) = parse(&[
            "redis+sentinel://u:p%40ss@s1,s2:26380,[::1]:5/mymaster/2?sentinel_password=sp",
        ]) else {
            panic!("a Sentinel URL");
        };
        assert_eq!(s.service, "mymaster");
        assert_eq!(s.sentinels.len(), 3);
        assert_eq!(s.sentinels[0].display(), "redis://:***@s1:26379");
        assert_eq!(s.sentinels[0].password(), Some("sp"));
        assert_eq!(s.sentinels[1].display(), "redis://:***@s2:26380");
        assert_eq!(s.sentinels[2].display(), "redis://:***@[::1]:5");
        let data = s.data.endpoint("10.0.0.7", 6380).unwrap();
        assert_eq!(data.display(), "redis://u:***@10.0.0.7:6380/2");
        assert_eq!(data.password(), Some("p@ss"));
        let shown = parse(&["rediss+sentinel://u:p@s1,s2/svc"])
            .unwrap()
            .display();
        assert_eq!(shown, "rediss+sentinel://s1:26379,s2:26379/svc");
        assert!(!shown.contains(":p@"));
        assert!(
            parse(&["redis+sentinel://s1"])
                .unwrap_err()
                .contains("no service")
        );
        assert!(
            parse(&["redis+sentinel://s1/m/x"])
                .unwrap_err()
                .contains("not a number")
        );
        assert!(
            parse(&["redis+sentinel://s1,,s2/m"])
                .unwrap_err()
                .contains("empty host")
        );
        assert!(
            parse(&["redis+sentinel://s1/m?foo=1"])
                .unwrap_err()
                .contains("unknown parameter")
        );
        // The sentinels use the data nodes' credentials by default.
        let Ok(Servers::Sentinel(s)) = parse(&["redis+sentinel://:pw@s1/m"]) else {
            panic!();
        };
        assert_eq!(s.sentinels[0].password(), Some("pw"));
    }

    #[test]
    fn cluster_urls() {
        let Ok(Servers::Cluster(seeds)) = parse(&["redis+cluster://:pw@a:7000,b:7001,c"]) else {
            panic!("a Cluster URL");
        };
        assert_eq!(seeds.len(), 3);
        assert_eq!(seeds[2].display(), "redis://:***@c:6379");
        assert!(
            parse(&["redis+cluster://a:1/3"])
                .unwrap_err()
                .contains("database 0")
        );
        assert!(
            parse(&["redis+cluster://a:x"])
                .unwrap_err()
                .contains("not a number")
        );
        let tls = parse(&["rediss+cluster://a:1"]).unwrap();
        assert!(tls.is_tls());
        assert_eq!(tls.display(), "rediss+cluster://a:1");
    }

    #[test]
    fn errors_never_repeat_a_password() {
        for urls in [
            vec!["redis+sentinel://u:topsecret@s1"],
            vec!["redis+cluster://u:topsecret@a:1/4"],
            vec!["redis://u:topsecret@a:1", "http://u:topsecret@b"],
        ] {
            let err = parse(&urls).unwrap_err();
            assert!(!err.contains("topsecret"), "{err}");
        }
    }
}
