//! The subcommands. Each reads its decided configuration and returns how distlock should exit.

pub mod run;
