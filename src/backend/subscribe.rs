//! Release notifications: a background thread holding one subscribed connection (per server,
//! for a lock over several).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::deferred::Deferred;
use super::{BackendError, Budget, Connector};

/// What the subscriber thread reports.
#[derive(Debug)]
pub enum Notice {
    /// A message arrived on the channel (a holder released the lock).
    Message,
    /// The subscription broke; notifications may be missed until `Resubscribed`.
    Down(BackendError),
    /// The subscription is back after a break. Releases published in between were missed, so the
    /// caller should look at the lock again.
    Resubscribed,
}

/// A live subscription. Dropping it stops the thread (within one read timeout) and closes its
/// connection.
#[derive(Debug)]
pub struct Subscription {
    stop: Arc<AtomicBool>,
    /// Subscriptions that end with this one (a lock over several keys has one per key).
    others: Vec<Subscription>,
}

impl Subscription {
    /// This subscription and `other`, ended together.
    pub fn with(mut self, other: Subscription) -> Self {
        self.others.push(other);
        self
    }

    /// A subscription with no thread behind it (for a lock that delivers its notices itself,
    /// such as the tests' lock over the model Redis).
    pub fn detached() -> Self {
        Subscription {
            stop: Arc::new(AtomicBool::new(false)),
            others: Vec::new(),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How long the subscriber blocks in one read before checking whether it should stop. Reads
/// that time out send nothing to Redis: an idle waiter costs no Redis commands. A waiter that
/// got the lock closes its subscriber connection within this time (redis-rs gives no handle to
/// shut the socket down from another thread); each wake-up costs about 0.1ms of CPU (250ms
/// cost a waiter 0.34ms of CPU per second in the benchmark, 5s kept the connection of a new
/// holder open for up to 5s into its command).
const IDLE_READ: Duration = Duration::from_secs(1);

/// Subscribe to `channel` and report every notice through `notify` from a background thread.
///
/// Returns once the subscription is confirmed by the server, so that anything published after
/// this call returns is seen (the no-lost-wake-up rule: subscribe, then look at the lock); or
/// with an error when the budget ends first.
pub fn subscribe(
    connector: &Connector,
    channel: String,
    notify: impl Fn(Notice) + Send + 'static,
    budget: &Budget,
) -> Result<Subscription, BackendError> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), BackendError>>(1);
    let ready: Ready = Box::new(move |result| {
        let _ = ready_tx.send(result);
    });
    start(
        connector.clone(),
        channel,
        Arc::clone(&stop),
        ready,
        notify,
        budget.deadline,
        false,
    )?;
    let subscription = Subscription {
        stop,
        others: Vec::new(),
    };
    // The thread answers by the deadline (its connect and SUBSCRIBE are bounded by it), but it
    // may be stuck where no timeout reaches (a host-name lookup): never wait more than a little
    // past the deadline.
    let started = Instant::now();
    let give_up_at = budget.deadline + Duration::from_millis(50);
    loop {
        let wait =
            Duration::from_millis(20).min(give_up_at.saturating_duration_since(Instant::now()));
        match ready_rx.recv_timeout(wait) {
            Ok(Ok(())) => return Ok(subscription),
            Ok(Err(e)) => return Err(e),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(BackendError::Connect(
                    "the subscriber thread ended unexpectedly".into(),
                ));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if budget.is_cancelled() {
            return Err(BackendError::Interrupted { sent: false });
        }
        if Instant::now() >= give_up_at {
            return Err(BackendError::Timeout {
                sent: false,
                after: started.elapsed(),
            });
        }
    }
}

/// A message from another server within this long of the last one reported is the same
/// release (a release runs on every server of a Redlock, each publishing): reported once.
const SAME_RELEASE: Duration = Duration::from_millis(10);

/// Subscribe to `channel` on every server of `connectors` at once (a thread each), and report
/// through `notify` what any of them hears: a message (one per release, see [`SAME_RELEASE`]),
/// `Down` when no server is subscribed any more, `Resubscribed` when one is again after that.
///
/// Returns once `enough` of them are subscribed; or, once every server has answered or the
/// budget has ended, if at least one is; else with the last error. A server that could not
/// subscribe at first (down, stopped, refusing) keeps trying in the background and joins when
/// it can. Dropping the subscription stops them all.
pub fn subscribe_all(
    connectors: &[Connector],
    channel: &str,
    notify: impl Fn(Notice) + Send + Sync + 'static,
    enough: usize,
    budget: &Budget,
) -> Result<Subscription, BackendError> {
    let stop = Arc::new(AtomicBool::new(false));
    let subscription = Subscription {
        stop: Arc::clone(&stop),
        others: Vec::new(),
    };
    let any = Arc::new(AnyOf {
        notify: Box::new(notify),
        state: std::sync::Mutex::new(AnyState {
            live: vec![false; connectors.len()],
            last_message: None,
        }),
    });
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), BackendError>>();
    for (i, connector) in connectors.iter().enumerate() {
        let ready_tx = ready_tx.clone();
        let live = Arc::clone(&any);
        let ready: Ready = Box::new(move |result| {
            if result.is_ok() {
                live.set_live(i, true);
            }
            let _ = ready_tx.send(result);
        });
        let any = Arc::clone(&any);
        start(
            connector.clone(),
            channel.to_owned(),
            Arc::clone(&stop),
            ready,
            move |notice| any.heard(i, notice),
            budget.deadline,
            true,
        )?;
    }
    drop(ready_tx);
    let started = Instant::now();
    // As for one server: never wait much past the deadline.
    let give_up_at = budget.deadline + Duration::from_millis(50);
    let (mut subscribed, mut answered, mut last) = (0, 0, None);
    loop {
        if subscribed >= enough.max(1) || (answered == connectors.len() && subscribed > 0) {
            return Ok(subscription);
        }
        if answered == connectors.len() || Instant::now() >= give_up_at {
            if subscribed > 0 {
                return Ok(subscription);
            }
            return Err(last.unwrap_or(BackendError::Timeout {
                sent: false,
                after: started.elapsed(),
            }));
        }
        if budget.is_cancelled() {
            return Err(BackendError::Interrupted { sent: false });
        }
        let wait =
            Duration::from_millis(20).min(give_up_at.saturating_duration_since(Instant::now()));
        match ready_rx.recv_timeout(wait) {
            Ok(Ok(())) => {
                subscribed += 1;
                answered += 1;
            }
            Ok(Err(e)) => {
                answered += 1;
                last = Some(e);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                answered = connectors.len();
            }
        }
    }
}

/// The subscriptions of [`subscribe_all`], reporting as one.
struct AnyOf {
    notify: Box<dyn Fn(Notice) + Send + Sync>,
    state: std::sync::Mutex<AnyState>,
}

struct AnyState {
    /// Per server: subscribed now.
    live: Vec<bool>,
    /// When the last message was reported.
    last_message: Option<Instant>,
}

impl AnyOf {
    /// Server `i` is subscribed (or not); returns whether any server was before.
    fn set_live(&self, i: usize, live: bool) -> bool {
        let Ok(mut state) = self.state.lock() else {
            return true;
        };
        let before = state.live.iter().any(|l| *l);
        if let Some(slot) = state.live.get_mut(i) {
            *slot = live;
        }
        before
    }

    /// Server `i` reported `notice`: pass on what the servers together say.
    fn heard(&self, i: usize, notice: Notice) {
        let report = match &notice {
            Notice::Message => match self.state.lock() {
                Ok(mut state) => {
                    let now = Instant::now();
                    let same = state
                        .last_message
                        .is_some_and(|last| now.saturating_duration_since(last) < SAME_RELEASE);
                    if !same {
                        state.last_message = Some(now);
                    }
                    !same
                }
                Err(_) => true,
            },
            // Releases are missed only while no server is subscribed.
            Notice::Down(_) => {
                self.set_live(i, false);
                self.state
                    .lock()
                    .map_or(true, |state| !state.live.iter().any(|l| *l))
            }
            Notice::Resubscribed => !self.set_live(i, true),
        };
        if report {
            (self.notify)(notice);
        }
    }
}

/// Tells the caller how the first subscription went.
type Ready = Box<dyn FnOnce(Result<(), BackendError>) + Send>;

/// Start the subscriber thread of one server (see [`run`]).
fn start(
    connector: Connector,
    channel: String,
    stop: Arc<AtomicBool>,
    ready: Ready,
    notify: impl Fn(Notice) + Send + 'static,
    first_deadline: Instant,
    keep_trying: bool,
) -> Result<(), BackendError> {
    std::thread::Builder::new()
        .name("distlock-subscriber".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            run(
                connector,
                channel,
                stop,
                ready,
                notify,
                first_deadline,
                keep_trying,
            )
        })
        .map(|_| ())
        .map_err(|e| BackendError::Connect(format!("cannot start the subscriber thread: {e}")))
}

/// The subscriber thread: subscribe (the first time by `first_deadline`, and say how it went
/// through `ready`), report every message, and subscribe again after a break, until `stop`.
/// If the first subscription fails, the thread ends there, unless `keep_trying`.
fn run(
    connector: Connector,
    channel: String,
    stop: Arc<AtomicBool>,
    ready: Ready,
    notify: impl Fn(Notice),
    first_deadline: Instant,
    keep_trying: bool,
) {
    // For the thread's whole life: its reads must never fail with EINTR, and the other
    // threads handle every signal.
    let _deferred = Deferred::new();
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(50);
    while !stop.load(Ordering::Relaxed) {
        let deadline = match ready {
            Some(_) => first_deadline,
            None => Instant::now() + connector.timeout(),
        };
        let failed = |e: BackendError, ready: &mut Option<Ready>| {
            if let Some(ready) = ready.take() {
                ready(Err(e));
                return !keep_trying;
            }
            false
        };
        let mut conn = match connector.open(deadline) {
            Ok((conn, _)) => conn,
            Err(e) => {
                if failed(e, &mut ready) {
                    return;
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        // Never dropped: redis-rs's PubSub unsubscribes when dropped (UNSUBSCRIBE and
        // PUNSUBSCRIBE, then waits for their replies), which the documented ACL does not allow
        // (each would be an entry in the server's ACL log) and which nothing needs: closing the
        // connection, as dropping `conn` does, ends its subscription. (It holds no more than the
        // messages that arrived during SUBSCRIBE.)
        let mut pubsub = std::mem::ManuallyDrop::new(conn.as_pubsub());
        if let Err(e) = pubsub.subscribe(&channel) {
            if failed(
                BackendError::from_command(e, connector.timeout()),
                &mut ready,
            ) {
                return;
            }
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_secs(2));
            continue;
        }
        backoff = Duration::from_millis(50);
        match ready.take() {
            Some(ready) => ready(Ok(())),
            None => notify(Notice::Resubscribed),
        }
        if pubsub.set_read_timeout(Some(IDLE_READ)).is_err() {
            continue;
        }
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match pubsub.get_message() {
                Ok(_) => {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    notify(Notice::Message);
                }
                Err(e) if e.is_timeout() => {}
                Err(e) => {
                    if !stop.load(Ordering::Relaxed) {
                        notify(Notice::Down(BackendError::from_command(e, IDLE_READ)));
                    }
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Three servers' subscriptions reporting as one; what it passed on.
    fn any_of_three() -> (AnyOf, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let any = AnyOf {
            notify: Box::new(move |notice| {
                let name = match notice {
                    Notice::Message => "message",
                    Notice::Down(_) => "down",
                    Notice::Resubscribed => "resubscribed",
                };
                log.lock().unwrap().push(name.to_owned());
            }),
            state: Mutex::new(AnyState {
                live: vec![false; 3],
                last_message: None,
            }),
        };
        (any, seen)
    }

    #[test]
    fn one_release_heard_on_several_servers_is_reported_once() {
        let (any, seen) = any_of_three();
        for i in 0..3 {
            any.heard(i, Notice::Message);
        }
        assert_eq!(*seen.lock().unwrap(), ["message"]);
        std::thread::sleep(SAME_RELEASE * 2);
        any.heard(1, Notice::Message);
        assert_eq!(*seen.lock().unwrap(), ["message", "message"]);
    }

    #[test]
    fn notifications_are_down_only_when_no_server_is_subscribed() {
        let (any, seen) = any_of_three();
        any.set_live(0, true);
        any.set_live(2, true);
        let down = || Notice::Down(BackendError::Lost("reset".into()));
        any.heard(0, down());
        assert!(seen.lock().unwrap().is_empty(), "server 2 still listens");
        // A server that comes back while another listens is no news.
        any.heard(1, Notice::Resubscribed);
        any.heard(1, down());
        assert!(seen.lock().unwrap().is_empty());
        any.heard(2, down());
        assert_eq!(*seen.lock().unwrap(), ["down"]);
        // The first one back: releases may have been missed meanwhile.
        any.heard(0, Notice::Resubscribed);
        any.heard(2, Notice::Resubscribed);
        assert_eq!(*seen.lock().unwrap(), ["down", "resubscribed"]);
    }
}
