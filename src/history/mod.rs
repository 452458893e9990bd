//! A lock's history as `distlock log` and `distlock stats` show it (docs/history.md): reading
//! ([`read`]) goes to every server that may hold a history (each primary of a Cluster, each
//! node of a Redlock, where an event counts once a majority recorded it); [`log`] and [`stats`]
//! print what it found. Recording is the lock's ([`crate::lock::history`], re-exported here):
//! the acquire and release scripts that already run write the events. This module names no
//! redis-rs type.

pub mod counts;
mod event;
mod log;
mod read;
mod stats;
pub mod time;
pub mod timeline;

pub use crate::lock::history::*;
pub use event::Event;
pub use log::{LogConfig, log};
pub use read::{Found, Query, fetch};
pub use stats::{StatsConfig, stats};
