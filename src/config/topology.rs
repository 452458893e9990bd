//! From the global options to a [`Topology`]: the Redis URLs (from `--redis`,
//! `DISTLOCK_REDIS_URL` or `REDIS_URL`), their timeouts, `--replicas`, a Redlock's per-node
//! timeout, and the TLS files. The flag logic of each command is in `mod.rs`; what a topology
//! can keep is asked of the lock ([`Topology::refuses`]).

use std::time::Duration;

use super::DEFAULT_URL;
use super::origins::{Origins, blamed_on};
use crate::backend::{Connector, Endpoint, Servers, TlsFiles};
use crate::cli;
use crate::error::Error;
use crate::lock::Topology;

/// The URLs given with --redis or DISTLOCK_REDIS_URL (clap reads both), else REDIS_URL.
pub(super) fn redis_urls(global: &cli::GlobalArgs) -> Vec<String> {
    if !global.redis.is_empty() {
        return global.redis.clone();
    }
    std::env::var("REDIS_URL")
        .ok()
        .filter(|s| !s.is_empty())
        .into_iter()
        .collect()
}

/// The servers the global options describe (`ttl`: the lock's TTL, when the command takes a
/// lock; a Redlock's per-node timeout is derived from it).
pub(super) fn topology(
    global: &cli::GlobalArgs,
    origins: &Origins,
    ttl: Option<Duration>,
) -> Result<Topology, Error> {
    let urls = redis_urls(global);
    // Name the variable a bad URL came from: DISTLOCK_REDIS_URL (read by clap) or REDIS_URL.
    let from_env = if global.redis.is_empty() {
        (!urls.is_empty()).then_some("REDIS_URL")
    } else {
        origins.env_var("redis")
    };
    // An empty URL is most often a CI secret that is missing and expanded to nothing: say so,
    // rather than that "the Redis URL has no scheme". (An empty REDIS_URL counts as unset.)
    if !urls.is_empty() && urls.iter().all(|u| u.trim().is_empty()) {
        return Err(Error::Usage(match from_env {
            Some(var) => format!(
                "{var} is set but empty (a missing CI secret?); set it to a URL such as \
                 redis://HOST:6379, or unset it to use the default (REDIS_URL, else {DEFAULT_URL})"
            ),
            None => format!(
                "--redis is empty; give a URL such as redis://HOST:6379, or leave --redis out to \
                 use the default (DISTLOCK_REDIS_URL, else REDIS_URL, else {DEFAULT_URL})"
            ),
        }));
    }
    let urls = if urls.is_empty() {
        vec![DEFAULT_URL.to_owned()]
    } else {
        urls
    };
    let servers = Servers::parse(&urls).map_err(|e| Error::Usage(blamed_on(from_env, e)))?;
    let timeout = global.redis_timeout.value;
    if !(Duration::from_millis(10)..=Duration::from_secs(60)).contains(&timeout) {
        return Err(Error::Usage(format!(
            "{} is out of range; use 10ms to 60s",
            origins.duration("redis_timeout", &global.redis_timeout)
        )));
    }
    let tls = tls_files(global, origins, servers.is_tls())?;
    let replicas = match global.replicas {
        None => None,
        Some(n) => {
            let within = global.replicas_timeout.value;
            if !(Duration::from_millis(10)..=timeout).contains(&within) {
                return Err(Error::Usage(format!(
                    "{} is out of range; use 10ms to --redis-timeout ({})",
                    origins.duration("replicas_timeout", &global.replicas_timeout),
                    crate::text::duration(timeout)
                )));
            }
            if matches!(servers, Servers::Independent(_)) {
                return Err(Error::Usage(
                    "--replicas waits for the replicas of one primary; a Redlock's nodes are \
                     independent primaries and its majority is its safety: drop --replicas, or \
                     give one URL (plain, redis+sentinel:// or redis+cluster://)"
                        .into(),
                ));
            }
            Some((n, within))
        }
    };
    let set_up = |e| Error::Usage(format!("cannot set up the Redis client: {e}"));
    let connector = |endpoint: &Endpoint| {
        Connector::fixed(endpoint.clone(), timeout, tls.clone()).map_err(set_up)
    };
    match &servers {
        Servers::One(_) | Servers::Sentinel(_) | Servers::Cluster(_) => {
            Ok(Topology::Single(Box::new(
                Connector::for_servers(&servers, timeout, tls.clone())
                    .map_err(set_up)?
                    .with_replicas(replicas),
            )))
        }
        Servers::Independent(endpoints) => {
            let node_timeout = match &global.node_timeout {
                Some(given) => {
                    if !(Duration::from_millis(10)..=timeout).contains(&given.value) {
                        return Err(Error::Usage(format!(
                            "{} is out of range; use 10ms to --redis-timeout ({})",
                            origins.duration("node_timeout", given),
                            crate::text::duration(timeout)
                        )));
                    }
                    given.value
                }
                // A lock's validity loses what its nodes take to answer: 5% of its TTL. A
                // command that takes no lock (status, list, break, renew, release) has no
                // validity to protect, and a busy machine's TLS handshake can take longer.
                None => match ttl {
                    Some(ttl) => (ttl / 20)
                        .clamp(Duration::from_millis(50), Duration::from_millis(500))
                        .min(timeout),
                    None => timeout,
                },
            };
            Ok(Topology::Redlock {
                nodes: endpoints
                    .iter()
                    .map(connector)
                    .collect::<Result<Vec<_>, _>>()?,
                node_timeout,
            })
        }
    }
}

/// Read the TLS files named on the command line; only meaningful with rediss://.
fn tls_files(global: &cli::GlobalArgs, origins: &Origins, tls: bool) -> Result<TlsFiles, Error> {
    let named = [
        ("tls_ca", &global.tls_ca),
        ("tls_cert", &global.tls_cert),
        ("tls_key", &global.tls_key),
    ];
    if !tls {
        let given: Vec<String> = named
            .iter()
            .filter(|(_, path)| path.is_some())
            .map(|(id, _)| origins.option(id))
            .collect();
        if !given.is_empty() {
            let verb = if given.len() == 1 { "needs" } else { "need" };
            return Err(Error::Usage(format!(
                "{} {verb} a rediss:// URL",
                and_list(&given)
            )));
        }
        return Ok(TlsFiles::default());
    }
    let read = |id: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| {
            Error::Usage(format!(
                "cannot read {}: {e}",
                origins.given(id, &crate::text::quote(&path.display().to_string()))
            ))
        })
    };
    let ca = global
        .tls_ca
        .as_deref()
        .map(|p| read("tls_ca", p))
        .transpose()?;
    let client = match (&global.tls_cert, &global.tls_key) {
        (Some(cert), Some(key)) => Some((read("tls_cert", cert)?, read("tls_key", key)?)),
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => {
            let (given, missing) = if global.tls_cert.is_some() {
                ("tls_cert", "--tls-key")
            } else {
                ("tls_key", "--tls-cert")
            };
            return Err(Error::Usage(format!(
                "{} is given without {missing}; --tls-cert and --tls-key go together: give both or neither",
                origins.option(given)
            )));
        }
    };
    Ok(TlsFiles { ca, client })
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}
