//! Finding the server a request goes to: one fixed server, the primary that the sentinels name
//! for a service, or the primary that owns a lock's slot in a Redis Cluster.
//!
//! * **Fixed**: a Redlock node. It must be a primary of its own: a MOVED reply is an error.
//! * **Cluster**: one plain URL, or `redis+cluster://` seeds. A plain URL is used as it is until
//!   its server answers MOVED: then it is a Cluster node, and from there on requests go to the
//!   owner of their slot, from `CLUSTER SLOTS` (asked of the seeds, then of the known
//!   primaries) and from every MOVED reply (which names the owner of one slot). ASK is
//!   followed for one request, with `ASKING` (see [`super::Node`]).
//! * **Sentinel**: the sentinels are asked in turn (`SENTINEL GET-MASTER-ADDR-BY-NAME`); the
//!   node one of them names is used only if `ROLE` says it is a primary (a sentinel with a
//!   stale view may name a demoted one: the next sentinel is asked). The answer is kept until a
//!   connection to it fails or it turns out to be a replica (`READONLY`, or `ROLE` on a new
//!   connection), then asked again.
//!
//! One file per job: `server.rs` (one server, its TLS set-up and the opening of a connection),
//! `cluster.rs` and `sentinel.rs` (the two routes that find a server); this file says which
//! route a connector follows.
//!
//! Every step ends by the caller's deadline: a stopped sentinel or seed costs its share of the
//! time, never a hang (redis-rs's own Sentinel and Cluster clients connect without timeouts or
//! retry on their own, which is why they are not used).

mod cluster;
mod sentinel;
mod server;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use cluster::slot;
pub(super) use cluster::{ClusterRoute, redirect};
pub(super) use sentinel::SentinelRoute;
pub use server::TlsFiles;
pub(super) use server::{Server, limit, set_timeouts};

/// A host and port.
pub(super) type Addr = (String, u16);

/// How requests find their server.
pub(super) enum Route {
    /// Always this server (a Redlock node).
    Fixed(Arc<Server>),
    /// One URL (which may turn out to be a Cluster node) or Cluster seeds.
    Cluster(Box<ClusterRoute>),
    /// The primary that the sentinels name.
    Sentinel(Box<SentinelRoute>),
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Route::Fixed(server) => f.debug_tuple("Fixed").field(server).finish(),
            Route::Cluster(c) => f.debug_tuple("Cluster").field(&c.seeds).finish(),
            Route::Sentinel(s) => f.debug_tuple("Sentinel").field(&s.sentinels).finish(),
        }
    }
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A thread that panicked while holding it left a map, which is still a valid map.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
