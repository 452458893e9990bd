//! Integration tests: the distlock binary against real redis-server processes that each test
//! starts on a free loopback port (never the shared server on 6379).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixtures;

mod acl;
mod chaos;
mod ci;
mod cluster;
mod cost;
mod cron;
mod docs;
mod doorbell;
mod doorbell_topologies;
mod exclusion;
mod exit_codes;
mod faults;
mod generated;
mod hardening;
mod history;
mod hooks;
mod json_log;
mod loss;
mod metrics;
mod mixed;
mod monitoring;
mod notices;
mod operate;
mod protocol;
mod queue;
mod redlock;
mod replicas;
mod semaphore;
mod sentinel;
mod sets;
mod shared;
mod signals;
mod tls;
mod topology_tls;
mod waiting;
