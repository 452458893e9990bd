//! The subcommands. Each reads its decided configuration and returns how distlock should exit.

pub mod acquire;
pub mod generate;
pub mod inspect;
pub mod metrics;
pub mod run;
pub mod token;

pub use crate::session::warn_failed_nodes;
