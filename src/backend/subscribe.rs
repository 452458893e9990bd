//! Release notifications: a background thread holding one subscribed connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::deferred::Deferred;
use super::{BackendError, Connector};

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

impl Drop for Subscription {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How long the subscriber blocks in one read before checking whether it should stop. Reads
/// that time out send nothing to Redis: an idle waiter costs no Redis commands.
const IDLE_READ: Duration = Duration::from_secs(5);

/// Subscribe to `channel` and report every notice through `notify` from a background thread.
///
/// Returns once the subscription is confirmed by the server, so that anything published after
/// this call returns is seen (the no-lost-wake-up rule: subscribe, then look at the lock).
pub fn subscribe(
    connector: &Connector,
    channel: String,
    notify: impl Fn(Notice) + Send + 'static,
) -> Result<Subscription, BackendError> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), BackendError>>(1);
    let connector = connector.clone();
    let thread_stop = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("distlock-subscriber".into())
        .stack_size(256 * 1024)
        .spawn(move || run(connector, channel, thread_stop, ready_tx, notify))
        .map_err(|e| BackendError::Connect(format!("cannot start the subscriber thread: {e}")))?;
    // The thread answers within the connect timeout (plus a little for the SUBSCRIBE reply).
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(Subscription { stop }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(BackendError::Connect(
            "the subscriber thread ended unexpectedly".into(),
        )),
    }
}

fn run(
    connector: Connector,
    channel: String,
    stop: Arc<AtomicBool>,
    ready: mpsc::SyncSender<Result<(), BackendError>>,
    notify: impl Fn(Notice),
) {
    // For the thread's whole life: its reads must never fail with EINTR, and the other
    // threads handle every signal.
    let _deferred = Deferred::new();
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(50);
    while !stop.load(Ordering::Relaxed) {
        let mut conn = match connector.open() {
            Ok(conn) => conn,
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
            let e = BackendError::from_command(e);
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
                        notify(Notice::Down(BackendError::from_command(e)));
                    }
                    break;
                }
            }
        }
    }
}
