//! Redlock: one lock over N independent Redis primaries, following the algorithm of Redis's
//! distributed-locks page and the reference client's constants, with distlock's safety contract
//! on top. Every node runs the same scripts as the one-server lock ([`super::protocol`]); this
//! module only asks them all and counts. Everything that is a Redlock's alone lives here: how
//! it asks ([`Redlock`]), what it answers to the engine (`lock.rs`), its majority rules and the
//! messages about them (`majority.rs`), and what it refuses ([`Redlock::refuses`]), which the
//! configuration asks through [`super::Topology::refuses`].
//!
//! * The same token on every node; the nodes are asked **at once** (a request is written to
//!   each, then each reply is read: about one round trip, without a thread per node while they
//!   answer), each bounded by the per-node timeout, far below the TTL.
//! * The lock is ours only if at least N/2+1 nodes granted it **and** the validity
//!   `claim − elapsed − drift` (drift = 1% of the claim + 2ms) is still positive; otherwise it is
//!   released on **every** node, those whose reply was lost included, before anything else.
//! * Its validity is anchored at the send time of the round that reached a quorum, minus the
//!   drift, so the kill deadlines of `run` end the command before a majority can forget it.
//! * Renewals extend on every node and count only with a quorum; a slow or dead minority costs
//!   its per-node timeout and nothing else.
//! * **Fences.** Each node's fence counter is independent. Every node is proposed the same
//!   floor ([`fence_floor`]), so nodes in step grant the same fence. When they do not, a second
//!   round raises the counter of every granting node below the largest fence granted to it
//!   (before the command starts): any later majority shares a node with this one, so it grants
//!   a larger fence. Fences thus strictly increase across grants while a majority keeps its
//!   data.
//! * **No line.** A strict FIFO across independent nodes would need a consensus that Redlock
//!   does not have: waiters on a Redlock take no place in line, and are woken by every release
//!   (heard from any node: a notify waiter subscribes on every node; a spin waiter polls them
//!   all) or at the holder's expiry; the first to win a majority takes the lock.
//!   `--supersede` needs a line and is refused.
//! * **No semaphore.** A majority keeps two holders of a mutex apart (two majorities share a
//!   node), not L+1 holders of a semaphore of L: on 5 nodes, none losing data, with nodes 3
//!   and 4 down A takes a slot on 0-2; they come back, 0 and 1 go down, B takes one on 2-4; all
//!   up, C takes one on all five; D then finds room on 0, 1, 3 and 4: 4 holders of `--limit 3`
//!   (found by the chaos test). A quorum above N·L/(L+1) would be safe but survive fewer
//!   failures. [`Redlock::refuses`] both `--limit N>1` and `--supersede`; the configuration
//!   asks it.

mod lock;
mod majority;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use majority::{list, node_margin};

use super::protocol::{RELEASE, ownership, release_args};
use super::{LockName, NodeFailure, Ownership, Token};
use crate::backend::{BackendError, Begun, Budget, Connector, NoQuorum, Reply, Script, Worker};

/// A lock over independent primaries.
pub struct Redlock {
    name: LockName,
    nodes: Vec<Worker>,
    /// Each node's budget for one request.
    node_timeout: Duration,
    /// Per node: an attempt of ours may hold the lock there (it granted, or its reply was
    /// lost), so giving up must release there.
    touched: Vec<bool>,
    /// Per node: its last request was sent and got no reply in time (a stopped or overloaded
    /// server). A release for it is written behind that request instead of waiting for the
    /// node once more (see [`Redlock::release_all`]).
    stuck: Vec<bool>,
    /// The token attempts use from now on, when it is no longer the request's; and the tokens
    /// retired before it (see [`Redlock::retire`]), which giving up and releasing clear too.
    token: Option<Token>,
    retired: Vec<Token>,
    /// What this run learnt of each node, shared with the handles [`Lock::fresh`] makes.
    ///
    /// [`Lock::fresh`]: crate::lock::Lock::fresh
    health: Arc<Mutex<Health>>,
}

/// What a run learns about each node, shared by every handle on the lock (the renewer's
/// included): which answered its last request, and which failed while a majority answered,
/// each reported once per run (a node that stays down is named once, not at every renewal).
#[derive(Debug, Default)]
struct Health {
    /// Per node: it answered the last request it was asked.
    answered: Vec<bool>,
    /// Per node: a failure of it was reported (or waits in `pending` to be).
    reported: Vec<bool>,
    /// Failures not handed out yet (see [`crate::lock::Lock::take_failures`]).
    pending: Vec<NodeFailure>,
}

/// The drift allowance for an expiry of `ttl`: clocks run at slightly different rates (the
/// reference client's 1%, plus 2ms).
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The fence proposed to every node of an acquire round: our clock in microseconds, plus a
/// second so that it lies above the nodes' own clocks (each node hands out at least its clock in
/// microseconds). Nodes whose counters are in step (every grant raised them to the same fence)
/// then all grant exactly this number, and the round that would raise the smaller ones is not
/// needed. Correctness does not depend on it: a node whose clock or counter is ahead grants more,
/// and the others are raised to that.
fn fence_floor() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.as_micros())
        .unwrap_or(u64::MAX / 2)
        .saturating_add(1_000_000)
}

/// What one node said, or why it said nothing.
type Said = Result<Vec<Reply>, BackendError>;

impl Redlock {
    /// The lock `name` over the primaries behind `connectors`.
    pub fn new(name: LockName, connectors: &[Connector], node_timeout: Duration) -> Self {
        let health = Health {
            answered: vec![false; connectors.len()],
            reported: vec![false; connectors.len()],
            pending: Vec::new(),
        };
        Redlock::with_health(name, connectors, node_timeout, Arc::new(Mutex::new(health)))
    }

    fn with_health(
        name: LockName,
        connectors: &[Connector],
        node_timeout: Duration,
        health: Arc<Mutex<Health>>,
    ) -> Self {
        Redlock {
            name,
            nodes: connectors.iter().map(Worker::new).collect(),
            node_timeout,
            touched: vec![false; connectors.len()],
            stuck: vec![false; connectors.len()],
            token: None,
            retired: Vec::new(),
            health,
        }
    }

    /// After a failed round, `token`'s release reached not every node (it was queued behind a
    /// request still unanswered, or got no answer itself): it may still land on a node after
    /// our next attempt, and delete what that attempt granted there, under the command of a
    /// run that believes it holds a majority. Such a token is never asked with again: the next
    /// attempts use a fresh one (the holder's token is whichever was granted).
    fn retire(&mut self, token: &Token) -> Result<(), BackendError> {
        let fresh = Token::generate()
            .map_err(|e| BackendError::Connect(format!("cannot draw a new token: {e}")))?;
        self.retired.push(token.clone());
        self.token = Some(fresh);
        self.touched.iter_mut().for_each(|t| *t = false);
        Ok(())
    }

    /// Release every retired token, best effort (each is released on every node, queued
    /// behind an unanswered request where there is one: none is asked with again).
    fn release_retired(&mut self, budget: &Budget) {
        for token in std::mem::take(&mut self.retired) {
            self.release_all(&token, false, budget);
        }
    }

    /// Node `i`'s address, for people (passwords redacted).
    fn address(&self, i: usize) -> String {
        self.nodes
            .get(i)
            .map_or_else(String::new, |w| w.connector().display().to_owned())
    }

    /// Note how each asked node answered a round; when every node was asked and a majority
    /// answered, each node that failed for the first time in the run becomes a failure to
    /// report. (A round without a majority fails, and its error names the nodes itself.)
    fn note(&self, said: &[Option<Said>]) {
        let Ok(mut health) = self.health.lock() else {
            return;
        };
        let nodes = said.len();
        let answered = said.iter().filter(|s| matches!(s, Some(Ok(_)))).count();
        let whole = said.iter().all(Option::is_some) && answered >= self.quorum();
        for (i, said) in said.iter().enumerate() {
            match said {
                Some(Ok(_)) => health.answered[i] = true,
                // A signal cut the wait: that says nothing of the node.
                None | Some(Err(BackendError::Interrupted { .. })) => {}
                Some(Err(e)) => {
                    health.answered[i] = false;
                    if whole && !health.reported[i] {
                        health.reported[i] = true;
                        let failure = NodeFailure {
                            address: self.address(i),
                            error: e.clone(),
                            answered,
                            nodes,
                            needed: self.quorum(),
                        };
                        health.pending.push(failure);
                    }
                }
            }
        }
    }

    /// How many nodes make a majority.
    pub fn quorum(&self) -> usize {
        majority::quorum(self.nodes.len())
    }

    /// Run `script` with `args` on every node at once, each by its own deadline (the per-node
    /// timeout, cut to the budget's).
    fn ask(&mut self, script: &'static Script, args: &[Vec<u8>], budget: &Budget) -> Vec<Said> {
        let all = vec![true; self.nodes.len()];
        self.ask_some(&all, script, args, budget)
            .into_iter()
            .map(|said| said.unwrap_or_else(|| Err(BackendError::Lost("not asked".into()))))
            .collect()
    }

    /// Run `script` with `args` at once on the nodes that `which` selects (`None` for the
    /// others), each by its own deadline (the per-node timeout, cut to the budget's). Notes
    /// which nodes left a request without a reply.
    fn ask_some(
        &mut self,
        which: &[bool],
        script: &'static Script,
        args: &[Vec<u8>],
        budget: &Budget,
    ) -> Vec<Option<Said>> {
        let node_budget = Budget {
            deadline: budget.deadline.min(Instant::now() + self.node_timeout),
            cancel: budget.cancel.clone(),
        };
        let keys = self.name.keys();
        let begun: Vec<Option<Begun<Vec<Reply>>>> = self
            .nodes
            .iter_mut()
            .zip(which)
            .map(|(worker, &asked)| {
                if !asked {
                    return None;
                }
                let (keys_sent, args_sent) = (keys.clone(), args.to_vec());
                let (keys_read, args_read) = (keys.clone(), args.to_vec());
                Some(worker.begin(
                    &node_budget,
                    move |node, deadline| {
                        let keys: Vec<&str> = keys_sent.iter().map(String::as_str).collect();
                        let args: Vec<&[u8]> = args_sent.iter().map(Vec::as_slice).collect();
                        node.send_eval(script, &keys, &args, deadline)
                    },
                    move |node, sent, deadline| {
                        let keys: Vec<&str> = keys_read.iter().map(String::as_str).collect();
                        let args: Vec<&[u8]> = args_read.iter().map(Vec::as_slice).collect();
                        node.recv_eval(script, &keys, &args, sent, deadline)
                    },
                ))
            })
            .collect();
        let said: Vec<Option<Said>> = begun
            .into_iter()
            .zip(self.nodes.iter_mut())
            .map(|(begun, worker)| begun.map(|begun| worker.end(&node_budget, begun)))
            .collect();
        for (stuck, said) in self.stuck.iter_mut().zip(&said) {
            match said {
                Some(Ok(_)) => *stuck = false,
                Some(Err(e)) if e.is_timeout() && e.maybe_applied() => *stuck = true,
                _ => {}
            }
        }
        self.note(&said);
        said
    }

    /// Release `token` on every node; returns how many nodes answered, how many held it, and
    /// why the others did not answer.
    ///
    /// A node whose last request got no reply in time (stopped, say) is not waited for again:
    /// the release is written behind that request on its connection, so that if the server
    /// ever applies it, the release follows at once (Redis runs one connection's requests in
    /// order). A stopped minority thus costs one per-node timeout per acquire, not one more per
    /// release. Where that cannot be done (no such connection is left), it is asked live.
    fn release_all(&mut self, token: &Token, succeeded: bool, budget: &Budget) -> Released {
        let keys = self.name.keys();
        let args = release_args(token, succeeded);
        let mut live = vec![true; self.nodes.len()];
        for (i, worker) in self.nodes.iter_mut().enumerate() {
            if !self.stuck[i] || worker.left_requests_behind() {
                continue;
            }
            let (keys, args) = (keys.clone(), args.clone());
            // Writes only (each bounded by its own short timeout): no cancel flag needed.
            let carried = worker.call(&Budget::within(self.node_timeout), false, move |node, _| {
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                Ok(node.send_behind_lost_replies(&RELEASE, &keys, &args))
            });
            if let Ok((sent, of)) = carried
                && of > 0
                && sent == of
            {
                live[i] = false;
                self.touched[i] = false;
                self.stuck[i] = false;
            }
        }
        let said = self.ask_some(&live, &RELEASE, &args, budget);
        let mut released = Released {
            answered: 0,
            held: 0,
            errors: Vec::new(),
        };
        for (i, reply) in said.into_iter().enumerate() {
            let Some(reply) = reply else {
                released.errors.push((
                    i,
                    BackendError::Lost(
                        "its last request is still unanswered; the release was queued behind it"
                            .into(),
                    ),
                ));
                continue;
            };
            match reply.and_then(|r| ownership(&r)) {
                Ok(found) => {
                    released.answered += 1;
                    self.touched[i] = false;
                    if found == Ownership::Held {
                        released.held += 1;
                    }
                }
                Err(e) => released.errors.push((i, e)),
            }
        }
        released
    }

    /// Why no majority was reached: `answered` nodes answered, and each of `errors` (by node)
    /// did not.
    fn no_quorum(&self, errors: Vec<(usize, BackendError)>, answered: usize) -> BackendError {
        BackendError::NoQuorum(Box::new(NoQuorum {
            answered,
            nodes: self.nodes.len(),
            needed: self.quorum(),
            failed: errors
                .into_iter()
                .map(|(i, e)| (self.address(i), e))
                .collect(),
        }))
    }
}

/// What a release on every node found.
struct Released {
    /// How many nodes answered.
    answered: usize,
    /// How many of them held the token.
    held: usize,
    /// Why each other node did not answer.
    errors: Vec<(usize, BackendError)>,
}

impl Redlock {
    /// What a Redlock over `nodes` independent primaries cannot do, as a usage error's text:
    /// keep a line of waiters (`supersede`: `--supersede` and `--replace` cancel the waiters
    /// ahead in it), or count more than one holder (a majority of slots each does not make at
    /// most `limit` holders: with 3 nodes and `--limit 3`, four holders can each hold slots on
    /// two nodes; see the module docs). `None` when it can keep what is asked.
    pub fn refuses(nodes: usize, supersede: bool, limit: u32) -> Option<String> {
        if supersede {
            return Some(format!(
                "--supersede and --replace need a line of waiters, which a Redlock over {nodes} \
                 independent servers cannot keep; drop them, or give one URL (plain, \
                 redis+sentinel:// or redis+cluster://)"
            ));
        }
        if limit > 1 {
            return Some(format!(
                "--limit {limit} cannot be kept over a Redlock of {nodes} independent servers (a \
                 majority of slots for each holder does not bound the holders to {limit}); use \
                 --limit 1, or give one URL (plain, redis+sentinel:// or redis+cluster://)"
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_constants() {
        assert_eq!(drift(Duration::from_secs(10)), Duration::from_millis(102));
        let connector = |port: u16| {
            Connector::new(
                crate::backend::Endpoint::parse(&format!("redis://127.0.0.1:{port}")).unwrap(),
                Duration::from_millis(100),
                crate::backend::TlsFiles::default(),
            )
            .unwrap()
        };
        let name = LockName::new("distlock:", "k");
        for (n, quorum) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)] {
            let connectors: Vec<Connector> = (0..n).map(|i| connector(1 + i)).collect();
            let lock = Redlock::new(name.clone(), &connectors, Duration::from_millis(100));
            assert_eq!(lock.quorum(), quorum, "{n} nodes");
        }
    }
}
