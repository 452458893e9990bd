//! Release notifications: a background thread holding one subscribed connection.

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
}

impl Subscription {
    /// A subscription with no thread behind it (for a lock that delivers its notices itself,
    /// such as the tests' fake).
    pub fn detached() -> Self {
        Subscription {
            stop: Arc::new(AtomicBool::new(false)),
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
    let connector = connector.clone();
    let thread_stop = Arc::clone(&stop);
    let deadline = budget.deadline;
    std::thread::Builder::new()
        .name("distlock-subscriber".into())
        .stack_size(256 * 1024)
        .spawn(move || run(connector, channel, thread_stop, ready_tx, notify, deadline))
        .map_err(|e| BackendError::Connect(format!("cannot start the subscriber thread: {e}")))?;
    let subscription = Subscription { stop };
    // The thread answers by the deadline (its connect and SUBSCRIBE are bounded by it), but it
    // may be stuck where no timeout reaches (a host-name lookup): never wait more than a little
    // past the deadline.
    let started = Instant::now();
    let give_up_at = deadline + Duration::from_millis(50);
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

fn run(
    connector: Connector,
    channel: String,
    stop: Arc<AtomicBool>,
    ready: mpsc::SyncSender<Result<(), BackendError>>,
    notify: impl Fn(Notice),
    first_deadline: Instant,
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
        let mut conn = match connector.open(deadline) {
            Ok((conn, _)) => conn,
            Err(e) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(e));
                    return;
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        let mut pubsub = conn.as_pubsub();
        if let Err(e) = pubsub.subscribe(&channel) {
            let e = BackendError::from_command(e, connector.timeout());
            if let Some(ready) = ready.take() {
                let _ = ready.send(Err(e));
                return;
            }
            std::thread::sleep(backoff);
            continue;
        }
        backoff = Duration::from_millis(50);
        match ready.take() {
            Some(ready) => {
                let _ = ready.send(Ok(()));
            }
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
