//! N independent primaries, as Redlock uses them: no replication, no coordination, each node
//! stopped, killed and restarted on its own. Node `i` keeps its port and its directory for the
//! fixture's life, so a restart is the same server coming back.

use crate::util::{Redis, RedisOptions};

pub struct Primaries {
    nodes: Vec<Redis>,
}

impl Primaries {
    /// `n` servers without persistence: a restart comes back empty, as a plain Redis would.
    pub fn start(n: usize) -> Primaries {
        Primaries::start_with(n, Redis::options())
    }

    /// `n` servers with `appendonly yes` + `appendfsync always`: a restart (even after a
    /// SIGKILL) comes back with every acknowledged write, the setup Redlock's safety needs.
    pub fn start_persistent(n: usize) -> Primaries {
        Primaries::start_with(n, Redis::options().persistent())
    }

    /// `n` servers, each started with `options` (TLS, ACL users, persistence...).
    pub fn start_with(n: usize, options: RedisOptions) -> Primaries {
        let nodes = (0..n).map(|_| options.clone().start()).collect();
        Primaries { nodes }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn node(&self, i: usize) -> &Redis {
        &self.nodes[i]
    }

    /// `redis://127.0.0.1:PORT` of node `i` (`rediss://` with TLS).
    pub fn url(&self, i: usize) -> String {
        self.nodes[i].url()
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Redis::url).collect()
    }

    /// SIGSTOP node `i`: it keeps its port and answers nothing (a partition, or a GC pause).
    pub fn stop(&mut self, i: usize) {
        self.nodes[i].stop();
    }

    pub fn cont(&mut self, i: usize) {
        self.nodes[i].cont();
    }

    /// SIGKILL node `i`: its port refuses connections until `restart`.
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Kill node `i` (if it runs) and start it again on its port with its data directory:
    /// with persistence it keeps its keys, without it comes back empty.
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].restart();
    }

    /// Kill node `i` and start it again without its data, even when persistent: the node
    /// that "lost its disk", which can break Redlock's safety.
    pub fn restart_empty(&mut self, i: usize) {
        self.nodes[i].restart_empty();
    }
}
