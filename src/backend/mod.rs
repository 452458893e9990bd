//! HOW distlock talks to Redis: the only module that names redis-rs types.
//!
//! It offers an [`Endpoint`] (a parsed, redactable server address), a [`Connector`] that opens
//! connections with explicit timeouts, a [`Node`] (one lazily reconnecting connection that runs
//! scripts and a few read commands, each ending by a deadline), a [`Worker`] that runs a node on
//! a thread of its own so that callers wait no longer than their [`Budget`] (and stop at once
//! when its [`Cancel`] flag is raised), a [`Script`] wrapper, and [`subscribe`] for release
//! notifications. Errors are [`BackendError`]s, classified by what the caller can do about them:
//! retry, reconnect, or give up; and, for a write whose reply was lost, "it may have been applied".
//!
//! What a lock *is* (keys, scripts, algorithms) lives in [`crate::lock`]; this module knows only
//! how to reach the server a lock lives on: directly, through Sentinel, or in a Redis Cluster
//! (`route/`: one server and its TLS set-up, the Cluster route, the Sentinel route).

mod budget;
mod connector;
mod deferred;
mod endpoint;
mod error;
mod node;
mod probe;
mod route;
mod script;
mod servers;
mod subscribe;
mod worker;

pub use budget::{Budget, Cancel};
pub use connector::Connector;
pub use endpoint::{Endpoint, password_in};
pub use error::{BackendError, Newer, NoQuorum, Unreplicated};
pub use node::{MAX_REDIRECTS, Node, Rang, Sent, WAIT_ENDERS};
pub use route::{TlsFiles, slot};
pub use script::{Reply, Script};
pub use servers::{DataNodes, FORMS, SentinelServers, Servers};
pub use subscribe::{Notice, Subscription, subscribe, subscribe_all};
pub use worker::{Begun, Worker};
