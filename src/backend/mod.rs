//! HOW distlock talks to Redis: the only module that names redis-rs types.
//!
//! It offers an [`Endpoint`] (a parsed, redactable server address), a [`Connector`] that opens
//! connections with explicit timeouts, a [`Node`] (one lazily reconnecting connection that runs
//! scripts and a few read commands), a [`Script`] wrapper, and [`subscribe`] for release
//! notifications. Errors are [`BackendError`]s, classified by what the caller can do about them:
//! retry, reconnect, or give up; and, for a write whose reply was lost, "it may have been applied".
//!
//! What a lock *is* (keys, scripts, algorithms) lives in [`crate::lock`]; this module knows only
//! how to reach one server. Sentinel, Cluster and TLS belong here when they come.

mod deferred;
mod endpoint;
mod error;
mod node;
mod subscribe;

pub use endpoint::{Endpoint, password_in};
pub use error::BackendError;
pub use node::{Connector, Node, Reply, Script, TlsFiles};
pub use subscribe::{Notice, Subscription, subscribe};
