//! A connection on a thread of its own, so that whoever asks never waits longer than it wants.
//!
//! # Why a thread
//!
//! redis-rs's sync connection bounds each socket read and write, but not everything around
//! them: the host-name lookup, the TLS library's own logic, several round trips per call (a
//! script load after NOSCRIPT). And it does not expose its socket, so nothing can interrupt a
//! read that is waiting for a server that stopped: a signal only shows up when the read's
//! timeout has passed. A caller that must end by a deadline, and within a second of SIGTERM,
//! "whatever the server does", therefore cannot do the I/O itself. A [`Worker`] owns the
//! connection on its own thread; the caller hands it a job and waits for the answer with its
//! own deadline and cancel flag. If it stops waiting while the job runs, the thread finishes
//! that job on its own (its socket timeouts end it) and exits; the next call starts a new thread
//! with a new connection. Independent servers (Redlock) get one worker each, so that they are
//! asked concurrently.
//!
//! The thread blocks every signal for its whole life, so its socket calls never fail with EINTR
//! (see `deferred.rs`), and the main thread handles every signal.
//!
//! # Why not always
//!
//! A second thread is not free on the path every `run` takes: measured here, it cost about
//! 0.5ms of CPU per `distlock run -- true` (2.7ms without it), because the clone/exec of the
//! command and the guard, and the teardown at exit, then pay for TLB shoot-downs on the other
//! CPU. So a worker starts *inline*: jobs run on the calling thread, with signals held back
//! (see `deferred.rs`) and every socket operation cut to the deadline. A call that must also
//! answer to a cancel flag runs inline on a short leash ([`LEASH`]): a healthy server answers
//! well within it. If it does not, the job is run again on a thread of its own (jobs are
//! idempotent: the same token, the same script), the lost request's connection moves there
//! with everything else, and the worker stays threaded from then on. A signal thus waits at
//! most the leash, and a healthy run never pays for a thread.
//!
//! A worker made with [`Worker::inline`] never starts a thread: for a thread that is a
//! background worker itself (the renewer) and needs no second one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::deferred::Deferred;
use super::node::Progress;
use super::{BackendError, Budget, Connector, Node};

/// A job for the thread.
type Job = Box<dyn FnOnce(&mut Node) + Send>;

/// How often a waiting caller looks at its cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(20);
/// How long a cancellable job may run inline before it is run again on a thread of its own.
pub const LEASH: Duration = Duration::from_millis(250);
/// How long past the deadline a caller waits for the job's own socket timeout to end it (so
/// that the job, not the caller, reports the failure, and its connection is kept in order).
const SLACK: Duration = Duration::from_millis(50);

/// A connection to one server, with its jobs run on a thread of its own (or inline).
pub struct Worker {
    connector: Connector,
    mode: Mode,
    /// Whether this worker may move to a thread of its own.
    may_thread: bool,
    /// A caller stopped waiting for a job that had already sent its request: that request, on
    /// a connection this worker no longer owns, may still be applied.
    left_behind: bool,
}

enum Mode {
    /// Jobs run on the calling thread, on this node.
    Inline(Box<Node>),
    /// The job queue of the thread, if one runs.
    Thread(Option<mpsc::Sender<Job>>),
}

/// The second half of a request sent inline: reads its reply.
type Receive<T> = Box<dyn FnOnce(&mut Node, Instant) -> Result<T, BackendError> + Send>;

/// A request started by [`Worker::begin`].
pub enum Begun<T> {
    /// Already over (it failed before anything was sent, or was cancelled).
    Done(Result<T, BackendError>),
    /// Sent inline; the reply is read by this.
    Inline(Receive<T>),
    /// Running on the thread.
    Thread {
        /// Where the result comes.
        rx: mpsc::Receiver<Result<T, BackendError>>,
        /// Shared with the job.
        call: Arc<Call>,
        /// When it was handed over.
        begun: Instant,
    },
}

/// What a caller and the job it waits for share.
#[derive(Default)]
pub struct Call {
    progress: Arc<Progress>,
    /// The job has started (a job that has not started when its caller gives up never runs).
    started: AtomicBool,
    /// The caller stopped waiting.
    abandoned: AtomicBool,
}

impl Worker {
    /// A worker that runs jobs inline until one of them overruns its leash, and then on a
    /// thread of its own (see the module docs).
    pub fn new(connector: &Connector) -> Worker {
        Worker {
            connector: connector.clone(),
            mode: Mode::Inline(Box::new(connector.node())),
            may_thread: true,
            left_behind: false,
        }
    }

    /// A worker whose jobs always run on the calling thread.
    pub fn inline(connector: &Connector) -> Worker {
        Worker {
            connector: connector.clone(),
            mode: Mode::Inline(Box::new(connector.node())),
            may_thread: false,
            left_behind: false,
        }
    }

    /// The server's connector.
    pub fn connector(&self) -> &Connector {
        &self.connector
    }

    /// Whether a request this worker sent was left in flight on a thread it gave up on (it may
    /// still be applied, and nothing can be sent behind it any more).
    pub fn left_requests_behind(&self) -> bool {
        self.left_behind
    }

    /// Run `job` on the node and return its result, or stop waiting at the budget's deadline
    /// (`Timeout`) or, once on a thread, when its cancel flag is raised (`Interrupted`). The job
    /// gets the deadline to pass to the node. A job that may run twice (it is idempotent) can
    /// run inline on a leash even when the budget has a cancel flag (see the module docs); any
    /// other job with a cancel flag runs on the thread.
    pub fn call<T, F>(
        &mut self,
        budget: &Budget,
        idempotent: bool,
        job: F,
    ) -> Result<T, BackendError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Node, Instant) -> Result<T, BackendError> + Clone + Send + 'static,
    {
        let begun = Instant::now();
        if budget.is_cancelled() {
            return Err(BackendError::Interrupted { sent: false });
        }
        if let Mode::Inline(node) = &mut self.mode {
            if budget.cancel.is_none() || !self.may_thread {
                return job(node, budget.deadline);
            }
            if idempotent {
                let leash = budget.deadline.min(Instant::now() + LEASH);
                match job.clone()(node, leash) {
                    Err(e) if e.is_unfinished() && leash < budget.deadline => {
                        // A server that is slow, stopped or gone: go on where a signal can
                        // interrupt the wait (the lost request's connection moves along).
                        if budget.is_cancelled() {
                            return Err(BackendError::Interrupted {
                                sent: e.maybe_applied(),
                            });
                        }
                    }
                    other => return other,
                }
                // Say how long the caller waited in all, not what was left for the retry.
                return self.call_threaded(budget, job).map_err(|e| match e {
                    BackendError::Timeout { sent, .. } => BackendError::Timeout {
                        sent,
                        after: allowed(budget.deadline.saturating_duration_since(begun)),
                    },
                    other => other,
                });
            }
        }
        self.call_threaded(budget, job)
    }

    /// Run `job`, which waits on the server on purpose (a doorbell: [`Node::ring`]), inline
    /// without a leash (it answers to the budget's cancel flag itself), or on the thread if
    /// this worker has moved to one.
    pub fn call_blocking<T, F>(&mut self, budget: &Budget, job: F) -> Result<T, BackendError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Node, Instant) -> Result<T, BackendError> + Send + 'static,
    {
        if budget.is_cancelled() {
            return Err(BackendError::Interrupted { sent: false });
        }
        match &mut self.mode {
            Mode::Inline(node) => job(node, budget.deadline),
            Mode::Thread(_) => self.call_threaded(budget, job),
        }
    }

    fn call_threaded<T, F>(&mut self, budget: &Budget, job: F) -> Result<T, BackendError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Node, Instant) -> Result<T, BackendError> + Send + 'static,
    {
        let deadline = budget.deadline;
        let started_at = Instant::now();
        let call = Arc::new(Call::default());
        let (tx, rx) = mpsc::sync_channel(1);
        let shared = Arc::clone(&call);
        let boxed: Job = Box::new(move |node: &mut Node| {
            if shared.abandoned.load(Ordering::SeqCst) {
                return;
            }
            shared.started.store(true, Ordering::SeqCst);
            node.progress = Some(Arc::clone(&shared.progress));
            let result = job(node, deadline);
            node.progress = None;
            let _ = tx.send(result);
        });
        self.jobs()?.send(boxed).map_err(|_| {
            self.mode = Mode::Thread(None);
            BackendError::Connect("the connection's thread ended unexpectedly".into())
        })?;
        self.wait_for(budget, &rx, &call, started_at)
    }

    /// Wait for a job on the thread, by the budget's deadline (plus a little slack for the
    /// job's own socket timeout) or its cancel flag.
    fn wait_for<T>(
        &mut self,
        budget: &Budget,
        rx: &mpsc::Receiver<Result<T, BackendError>>,
        call: &Call,
        started_at: Instant,
    ) -> Result<T, BackendError> {
        let give_up_at = budget.deadline + SLACK;
        loop {
            let now = Instant::now();
            let wait = CANCEL_POLL.min(give_up_at.saturating_duration_since(now));
            match rx.recv_timeout(wait) {
                Ok(result) => return result,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.mode = Mode::Thread(None);
                    return Err(BackendError::Lost(
                        "the connection's thread ended unexpectedly".into(),
                    ));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let cancelled = budget.is_cancelled();
            if cancelled || Instant::now() >= give_up_at {
                call.abandoned.store(true, Ordering::SeqCst);
                let sent = call.progress.sent.load(Ordering::SeqCst);
                if call.started.load(Ordering::SeqCst) {
                    // The thread is stuck in this job: let it end on its own, and use a new
                    // thread (and connection) for the next call.
                    self.mode = Mode::Thread(None);
                    self.left_behind |= sent;
                }
                return Err(if cancelled {
                    BackendError::Interrupted { sent }
                } else {
                    BackendError::Timeout {
                        sent,
                        after: started_at.elapsed().min(self.connector.timeout()),
                    }
                });
            }
        }
    }

    /// Start a request whose reply is read later by [`Worker::end`]: inline, `send` runs now
    /// and `recv` at the end (on the leash when the budget has a cancel flag); on a thread, both
    /// run there. Several workers (independent servers) are asked at once this way: begin each,
    /// then end each.
    pub fn begin<M, T, S, R>(&mut self, budget: &Budget, send: S, recv: R) -> Begun<T>
    where
        M: Send + 'static,
        T: Send + 'static,
        S: FnOnce(&mut Node, Instant) -> Result<M, BackendError> + Send + 'static,
        R: FnOnce(&mut Node, M, Instant) -> Result<T, BackendError> + Send + 'static,
    {
        if budget.is_cancelled() {
            return Begun::Done(Err(BackendError::Interrupted { sent: false }));
        }
        if let Mode::Inline(node) = &mut self.mode {
            return match send(node, budget.deadline) {
                Ok(mid) => Begun::Inline(Box::new(move |node: &mut Node, deadline| {
                    recv(node, mid, deadline)
                })),
                Err(e) => Begun::Done(Err(e)),
            };
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let call = Arc::new(Call::default());
        let shared = Arc::clone(&call);
        let deadline = budget.deadline;
        let job: Job = Box::new(move |node: &mut Node| {
            if shared.abandoned.load(Ordering::SeqCst) {
                return;
            }
            shared.started.store(true, Ordering::SeqCst);
            node.progress = Some(Arc::clone(&shared.progress));
            let result = send(node, deadline).and_then(|mid| recv(node, mid, deadline));
            node.progress = None;
            let _ = tx.send(result);
        });
        match self.jobs().map(|jobs| jobs.send(job)) {
            Ok(Ok(())) => Begun::Thread {
                rx,
                call,
                begun: Instant::now(),
            },
            _ => {
                self.mode = Mode::Thread(None);
                Begun::Done(Err(BackendError::Connect(
                    "the connection's thread ended unexpectedly".into(),
                )))
            }
        }
    }

    /// The result of a request started by [`Worker::begin`], by the budget's deadline.
    pub fn end<T: Send + 'static>(
        &mut self,
        budget: &Budget,
        begun: Begun<T>,
    ) -> Result<T, BackendError> {
        match begun {
            Begun::Done(result) => result,
            Begun::Inline(recv) => {
                let leashed = budget.cancel.is_some() && self.may_thread;
                let Mode::Inline(node) = &mut self.mode else {
                    return Err(BackendError::Lost("the connection moved".into()));
                };
                let deadline = if leashed {
                    budget.deadline.min(Instant::now() + LEASH)
                } else {
                    budget.deadline
                };
                let result = recv(node, deadline);
                if leashed
                    && deadline < budget.deadline
                    && result.as_ref().is_err_and(BackendError::is_timeout)
                {
                    // Slow or stopped: this server's next requests go to a thread, where a
                    // deadline or a signal can abandon them.
                    let _ = self.jobs();
                }
                result
            }
            Begun::Thread { rx, call, begun } => self.wait_for(budget, &rx, &call, begun),
        }
    }

    /// The job queue, starting the thread if none runs (with the inline node, if there was
    /// one: its lost requests' connections go along).
    fn jobs(&mut self) -> Result<&mpsc::Sender<Job>, BackendError> {
        let node = match std::mem::replace(&mut self.mode, Mode::Thread(None)) {
            Mode::Inline(node) => Some(node),
            Mode::Thread(jobs) => {
                self.mode = Mode::Thread(jobs);
                None
            }
        };
        let Mode::Thread(slot) = &mut self.mode else {
            return Err(BackendError::Connect("not a threaded worker".into()));
        };
        if slot.is_none() {
            let (tx, rx) = mpsc::channel::<Job>();
            let node = node.map_or_else(|| self.connector.node(), |node| *node);
            std::thread::Builder::new()
                .name("distlock-redis".into())
                .stack_size(256 * 1024)
                .spawn(move || run(node, &rx))
                .map_err(|e| BackendError::Connect(format!("cannot start a thread: {e}")))?;
            *slot = Some(tx);
        }
        match slot {
            Some(tx) => Ok(tx),
            None => Err(BackendError::Connect("no thread".into())),
        }
    }
}

/// A time allowed, for messages, in whole tens of milliseconds.
fn allowed(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis().div_ceil(10) * 10).unwrap_or(u64::MAX))
}

fn run(mut node: Node, jobs: &mpsc::Receiver<Job>) {
    let _deferred = Deferred::new();
    while let Ok(job) = jobs.recv() {
        job(&mut node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Cancel, Endpoint, TlsFiles};
    use std::net::TcpListener;

    /// A listener that accepts connections and never answers (a stopped server).
    fn silent_server() -> (TcpListener, Connector) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        let connector = Connector::new(
            Endpoint::parse(&url).unwrap(),
            Duration::from_secs(5),
            TlsFiles::default(),
        )
        .unwrap();
        (listener, connector)
    }

    fn ping(node: &mut Node, deadline: Instant) -> Result<Vec<super::super::Reply>, BackendError> {
        static PING: super::super::Script = super::super::Script::new("return {1}");
        node.eval(&PING, &[], &[], deadline)
    }

    #[test]
    fn a_caller_stops_waiting_at_its_deadline_whatever_the_server_does() {
        let (_listener, connector) = silent_server();
        let mut worker = Worker::new(&connector);
        let start = Instant::now();
        let err = worker
            .call(
                &Budget::within(Duration::from_millis(300)).cancellable(&Cancel::new()),
                false,
                ping,
            )
            .unwrap_err();
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_millis(1500), "{took:?}");
        assert!(err.is_timeout(), "{err:?}");
        assert!(err.maybe_applied(), "the request was sent: {err:?}");
    }

    #[test]
    fn a_cancel_ends_the_wait_at_once() {
        let (_listener, connector) = silent_server();
        let mut worker = Worker::new(&connector);
        let cancel = Cancel::new();
        let raiser = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(LEASH + Duration::from_millis(100));
            raiser.cancel();
        });
        let start = Instant::now();
        // Idempotent: it runs inline on the leash, then again on a thread, where the cancel
        // reaches it.
        let err = worker
            .call(
                &Budget::within(Duration::from_secs(30)).cancellable(&cancel),
                true,
                ping,
            )
            .unwrap_err();
        let took = start.elapsed();
        assert!(took >= LEASH, "{took:?}");
        assert!(took < LEASH + Duration::from_secs(1), "{took:?}");
        assert!(
            matches!(err, BackendError::Interrupted { sent: true }),
            "{err:?}"
        );
        assert!(worker.left_requests_behind());
        // The stuck thread is left behind; the next call gets a new one.
        cancel.reset();
        let err = worker
            .call(&Budget::within(Duration::from_millis(100)), false, ping)
            .unwrap_err();
        assert!(err.is_timeout());
    }

    #[test]
    fn a_healthy_call_runs_inline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        drop(listener);
        let connector = Connector::new(
            Endpoint::parse(&url).unwrap(),
            Duration::from_secs(5),
            TlsFiles::default(),
        )
        .unwrap();
        let mut worker = Worker::new(&connector);
        let me = std::thread::current().id();
        let ran_on = worker
            .call(
                &Budget::within(Duration::from_secs(1)).cancellable(&Cancel::new()),
                true,
                move |_, _| Ok(std::thread::current().id()),
            )
            .unwrap();
        assert_eq!(ran_on, me);
        assert!(matches!(worker.mode, Mode::Inline(_)));
    }

    #[test]
    fn inline_workers_run_on_the_calling_thread() {
        let (_listener, connector) = silent_server();
        let mut worker = Worker::inline(&connector);
        let me = std::thread::current().id();
        let ran_on = worker
            .call(
                &Budget::within(Duration::from_secs(1)).cancellable(&Cancel::new()),
                false,
                move |_, _| Ok(std::thread::current().id()),
            )
            .unwrap();
        assert_eq!(ran_on, me);
    }
}
