//! The engine against the model Redis ([`ScriptLock`]): its logic over the real scripts,
//! without a server.

use super::*;
use crate::backend::Cancel;
use crate::events;
use crate::lock::model::{REFRESH, ScriptLock};
use crate::lock::{Answer, Queueing};
use crate::lock::{Holder, Token};
use crate::output::{Format, Level, Output};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

const CLAIM: Duration = Duration::from_secs(5);

struct Waiter {
    token: Token,
    cancel: Cancel,
    signal: events::Sender,
    handle: JoinHandle<(Waited, Duration)>,
}

/// Run the engine for a new client of `lock`'s world on a thread of its own.
fn waiter(lock: &ScriptLock, limit: u32, wait: Option<Duration>, queueing: Queueing) -> Waiter {
    waiter_with(lock.client(), limit, wait, queueing, WaitMode::Notify)
}

fn waiter_with(
    mut lock: ScriptLock,
    limit: u32,
    wait: Option<Duration>,
    queueing: Queueing,
    mode: WaitMode,
) -> Waiter {
    let token = Token::generate().unwrap();
    let cancel = Cancel::new();
    let (tx, mut rx) = events::channel().unwrap();
    let (t, c, s) = (token.clone(), cancel.clone(), tx.clone());
    let handle = std::thread::spawn(move || {
        let out = Output::new(Level::Quiet, Format::Text, Vec::new());
        let holder = Holder::default();
        let w = Wait {
            request: Request {
                token: &t,
                claim: CLAIM,
                ttl: Duration::from_secs(30),
                holder: &holder,
                limit,
                queueing,
                polls: false,
                after: crate::lock::AfterRun::default(),
                doorbell: false,
            },
            policy: WaitPolicy { limit: wait, mode },
            timeout: Duration::from_millis(100),
            unreachable_after: Duration::from_millis(300),
            cancel: &c,
        };
        let mut display = WaitDisplay::new(&out, "k", "model://", wait, Duration::from_secs(30));
        let start = Instant::now();
        let waited = acquire(&mut lock, &w, (&tx, &mut rx), &mut display, &out);
        (waited, start.elapsed())
    });
    Waiter {
        token,
        cancel,
        signal: s,
        handle,
    }
}

fn in_line(lock: &ScriptLock, token: &Token) -> bool {
    lock.in_line(token)
}

fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Poll `condition` every 2ms for at most 5s.
fn wait_for(mut condition: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(Instant::now() < end, "condition not met within 5s");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A mutex that `holder` holds for 30s.
fn held() -> ScriptLock {
    let lock = ScriptLock::new();
    lock.hold("holder", 1, Duration::from_secs(30));
    lock
}

/// A waiter that joined the line of `lock` (a lock of `limit`), once its place is taken.
fn joined(lock: &ScriptLock, limit: u32) -> Waiter {
    let w = waiter(lock, limit, None, Queueing::Join);
    until("the waiter to take its place", || in_line(lock, &w.token));
    w
}

/// The holder of `token` releases the lock, from a client of its own.
fn release(lock: &ScriptLock, token: &Token) {
    lock.client()
        .release(token, &Budget::within(Duration::from_secs(1)))
        .unwrap();
}

fn join(w: Waiter) -> (Waited, Duration) {
    w.handle.join().unwrap()
}

#[test]
fn an_uncontended_lock_costs_one_attempt_without_a_place_in_line() {
    let lock = ScriptLock::new();
    let (waited, _) = join(waiter(&lock, 1, None, Queueing::Join));
    let Waited::Acquired { grant, .. } = waited else {
        panic!("{waited:?}");
    };
    // The first fence is the server's clock in µs (the counter never goes back, even when
    // lost: see lua/common.lua).
    assert_eq!(grant.fence, lock.fence());
    assert!(grant.fence > 1_000_000_000_000_000, "{}", grant.fence);
    assert_eq!(grant.validity.ttl, CLAIM);
    let w = lock.world();
    assert_eq!(w.attempts.len(), 1);
    assert_eq!(w.attempts[0].1, Queueing::Try);
    assert!(w.gave_up.is_empty());
}

#[test]
fn a_release_hands_the_lock_to_the_first_in_line() {
    let lock = held();
    let w = joined(&lock, 1);
    release(&lock, &Token::from_text("holder"));
    let token = w.token.clone();
    let (waited, took) = join(w);
    assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
    assert!(
        took < Duration::from_secs(5),
        "{took:?}: woken, not by expiry"
    );
    let world = lock.world();
    let mine: Vec<Queueing> = world
        .attempts
        .iter()
        .filter(|(t, _)| t == token.as_str())
        .map(|(_, q)| *q)
        .collect();
    // Try, then (subscribed) join, then take up the lock handed over.
    assert_eq!(mine.first(), Some(&Queueing::Try));
    assert!(mine[1..].iter().all(|q| *q == Queueing::Join), "{mine:?}");
}

#[test]
fn waiters_are_served_in_the_order_they_joined() {
    let lock = held();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..5 {
        let w = joined(&lock, 1);
        waiters.push((i, w));
    }
    release(&lock, &Token::from_text("holder"));
    for (i, w) in waiters {
        let token = w.token.clone();
        let (waited, _) = join(w);
        assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
        order.lock().unwrap().push(i);
        release(&lock, &token);
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
}

#[test]
fn a_lost_wake_up_costs_at_most_a_refresh() {
    let lock = held();
    let w = joined(&lock, 1);
    lock.deafen(&w.token);
    let released = Instant::now();
    release(&lock, &Token::from_text("holder"));
    let (waited, _) = join(w);
    assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
    // The next refresh takes up the lock handed over (it waits for TAKEUP, longer than
    // REFRESH): never its expiry.
    assert!(
        released.elapsed() < REFRESH + Duration::from_secs(1),
        "{:?}",
        released.elapsed()
    );
}

#[test]
fn the_wait_limit_ends_the_wait_and_leaves_the_line() {
    let lock = held();
    let w = waiter(&lock, 1, Some(Duration::from_millis(200)), Queueing::Join);
    let token = w.token.clone();
    let (waited, took) = join(w);
    assert!(matches!(waited, Waited::Busy { .. }), "{waited:?}");
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(took < Duration::from_millis(600), "{took:?}");
    assert!(!in_line(&lock, &token));
    assert!(lock.world().gave_up.contains(&token.as_str().to_owned()));
}

#[test]
fn a_signal_ends_the_wait_and_leaves_the_line() {
    let lock = held();
    let w = joined(&lock, 1);
    // What the signal handler does.
    w.cancel.cancel();
    // SAFETY: writing one byte from a valid buffer to a valid fd.
    unsafe { libc::write(w.signal.raw_wake_fd(), [15u8].as_ptr().cast(), 1) };
    let token = w.token.clone();
    let (waited, _) = join(w);
    assert!(
        matches!(
            waited,
            Waited::Interrupted {
                signal: 15,
                residue: Residue::Nothing
            }
        ),
        "{waited:?}"
    );
    assert!(!in_line(&lock, &token));
}

#[test]
fn the_newest_waiter_supersedes_the_older_ones() {
    let lock = held();
    let older = waiter(&lock, 1, None, Queueing::Join);
    until("the older waiter to take its place", || {
        in_line(&lock, &older.token)
    });
    let newer = waiter(&lock, 1, None, Queueing::Supersede);
    let (waited, _) = join(older);
    assert!(matches!(waited, Waited::Superseded { .. }), "{waited:?}");
    until("the newer waiter to take its place", || {
        in_line(&lock, &newer.token)
    });
    release(&lock, &Token::from_text("holder"));
    let (waited, _) = join(newer);
    assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
}

#[test]
fn a_key_held_with_another_limit_is_a_conflict() {
    let lock = ScriptLock::new();
    lock.hold("holder", 3, Duration::from_secs(30));
    let (waited, _) = join(waiter(&lock, 1, None, Queueing::Join));
    assert!(matches!(waited, Waited::Conflict(_)), "{waited:?}");
}

#[test]
fn a_semaphore_slot_is_handed_to_the_next_in_line() {
    let lock = ScriptLock::new();
    lock.hold("a", 2, Duration::from_secs(30));
    lock.hold("b", 2, Duration::from_secs(30));
    let w = joined(&lock, 2);
    release(&lock, &Token::from_text("a"));
    let (waited, _) = join(w);
    assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
    assert_eq!(lock.holders().len(), 2);
}

/// A lock without a line (a Redlock) notifies from one server before the others
/// have the release: the waiter looks again soon, not at the holder's expiry.
#[test]
fn a_notice_before_the_release_lands_is_looked_at_again_soon() {
    let mut lock = ScriptLock::new();
    lock.lineless = true;
    lock.hold("holder", 1, Duration::from_secs(30));
    let w = waiter_with(lock.client(), 1, None, Queueing::Join, WaitMode::Notify);
    wait_for(|| !lock.subscribed().is_empty());
    let notified = Instant::now();
    lock.notify_all();
    std::thread::sleep(Duration::from_millis(15));
    lock.drop_holder("holder");
    let (waited, _) = join(w);
    assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
    assert!(
        notified.elapsed() < Duration::from_secs(2),
        "{:?}",
        notified.elapsed()
    );
    assert!(lock.state().waiters.is_empty());
}

#[test]
fn no_wait_tries_once_without_subscribing_or_a_place() {
    let lock = held();
    let (waited, _) = join(waiter(&lock, 1, Some(Duration::ZERO), Queueing::Join));
    assert!(matches!(waited, Waited::Busy { .. }), "{waited:?}");
    let w = lock.world();
    assert_eq!(w.attempts.len(), 1);
    assert!(w.gave_up.is_empty());
    drop(w);
    assert!(lock.state().waiters.is_empty());
}

#[test]
fn spin_mode_takes_a_place_in_line_without_subscribing() {
    let lock = ScriptLock::new();
    lock.hold("holder", 1, Duration::from_millis(150));
    let w = waiter_with(lock.client(), 1, None, Queueing::Join, WaitMode::Spin);
    let (waited, _) = join(w);
    assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
    let world = lock.world();
    // The first attempt only tries; every later one keeps (or takes) the place.
    assert_eq!(world.attempts[0].1, Queueing::Try);
    assert!(world.attempts.len() >= 2);
    assert!(
        world.attempts[1..]
            .iter()
            .all(|(_, q)| *q == Queueing::Join)
    );
    drop(world);
    assert!(lock.subscribed().is_empty());
}

#[test]
fn a_server_that_never_answers_ends_the_wait() {
    let lock = ScriptLock::new();
    let client = lock.client();
    client
        .hang
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let w = waiter_with(client, 1, None, Queueing::Join, WaitMode::Notify);
    let (waited, took) = join(w);
    let Waited::Failed {
        unanswered,
        residue,
        ..
    } = waited
    else {
        panic!("{waited:?}");
    };
    assert!(unanswered.is_some_and(|u| u.attempts >= 2));
    // Every attempt may have been applied: what may remain is said.
    assert!(matches!(residue, Residue::MayRemain(CLAIM)), "{residue:?}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn a_lost_reply_is_taken_back_when_the_wait_ends() {
    let lock = held();
    let client = lock.client();
    // Twice: an attempt whose reply is lost asks again at once (as SingleNode does), and the
    // engine learns of the loss only when that reply is lost too.
    for _ in 0..2 {
        client
            .failures
            .lock()
            .unwrap()
            .push_back(BackendError::Timeout {
                sent: true,
                after: Duration::from_millis(100),
            });
    }
    let w = waiter_with(
        client,
        1,
        Some(Duration::from_millis(300)),
        Queueing::Join,
        WaitMode::Notify,
    );
    let (waited, _) = join(w);
    assert!(
        matches!(
            waited,
            Waited::Busy {
                residue: Residue::TakenBack,
                ..
            }
        ),
        "{waited:?}"
    );
}

/// A waiter that polls cannot be woken, so nobody hands it the lock; at the head of the line
/// it keeps its turn all the same (the scripts hand nothing to those behind it), and takes the
/// free lock at its next poll. (The hand-written fake knew no polling waiters: it handed
/// them the lock as to any other.)
#[test]
fn a_polling_waiter_ahead_is_served_before_a_notified_one() {
    let lock = held();
    let polling = waiter_with(lock.client(), 1, None, Queueing::Join, WaitMode::Spin);
    until("the polling waiter to take its place", || {
        in_line(&lock, &polling.token)
    });
    let notified = joined(&lock, 1);
    release(&lock, &Token::from_text("holder"));
    let token = polling.token.clone();
    let (waited, _) = join(polling);
    assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
    assert_eq!(lock.holders(), [token.as_str()]);
    assert!(in_line(&lock, &notified.token), "still waiting its turn");
    // Its release hands the lock to the notified waiter.
    release(&lock, &token);
    let (waited, _) = join(notified);
    assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
}

// The doorbell (issue 26): a waiter in line blocks on its own list with the take-up sent
// behind the pop (ScriptLock::ringing, as SingleNode).

/// A waiter on its doorbell (a client of `lock`'s world), once it blocks there.
fn ringing(lock: &ScriptLock, limit: u32) -> Waiter {
    let blocked = lock.blocked();
    let w = waiter_with(
        lock.ringing(),
        limit,
        None,
        Queueing::Join,
        WaitMode::Notify,
    );
    until("the waiter to block on its doorbell", || {
        in_line(lock, &w.token) && lock.blocked() > blocked
    });
    w
}

/// The queueing of every attempt `token` sent, in order.
fn attempts_of(lock: &ScriptLock, token: &Token) -> Vec<Queueing> {
    lock.world()
        .attempts
        .iter()
        .filter(|(t, _)| t == token.as_str())
        .map(|(_, q)| *q)
        .collect()
}

#[test]
fn a_hand_off_to_a_doorbell_waiter_is_taken_up_with_its_pop() {
    let lock = held();
    let w = ringing(&lock, 1);
    release(&lock, &Token::from_text("holder"));
    let token = w.token.clone();
    let (waited, took) = join(w);
    let Waited::Acquired { grant, .. } = waited else {
        panic!("{waited:?}");
    };
    assert!(
        took < Duration::from_secs(2),
        "{took:?}: rung, not by expiry"
    );
    let rung = {
        let world = lock.world();
        let mine: Vec<_> = world
            .rings
            .iter()
            .filter(|r| r.token == token.as_str())
            .cloned()
            .collect();
        mine.last().cloned().unwrap()
    };
    // The pop took the turn, and the take-up behind it holds the lock from the pipeline's
    // send time for the claim plus the block (it may have run up to the block after it).
    assert_eq!(rung.popped.as_deref(), Some("granted"));
    assert!(rung.behind);
    assert_eq!(grant.validity.anchor, rung.anchor);
    assert_eq!(grant.validity.ttl, CLAIM + rung.block);
    assert!(rung.block > Duration::ZERO);
    // It joined at once (its turn waits in the list: nothing to lose), then only refreshed,
    // the last of which took the turn up: no round trip after the pop, no subscription.
    let mine = attempts_of(&lock, &token);
    assert_eq!(mine.first(), Some(&Queueing::Join), "{mine:?}");
    assert!(
        mine[1..].iter().all(|q| *q == Queueing::Refresh),
        "{mine:?}"
    );
    assert!(lock.subscribed().is_empty());
    assert_eq!(lock.holders(), [token.as_str()]);
    // Taken up: the doorbell is gone.
    assert_eq!(lock.doorbell_of(&token), None);
}

#[test]
fn the_doorbell_rings_with_an_expiry_until_it_is_taken_up() {
    let lock = held();
    // A client that only joins (it never pops): the push waits in its list, with a TTL.
    let holder = Holder::default();
    let token = Token::from_text("waiter");
    let mut client = lock.ringing();
    let request = Request {
        token: &token,
        claim: CLAIM,
        ttl: Duration::from_secs(30),
        holder: &holder,
        limit: 1,
        queueing: Queueing::Join,
        polls: false,
        after: crate::lock::AfterRun::default(),
        doorbell: true,
    };
    let budget = Budget::within(Duration::from_secs(1));
    let answer = client.try_acquire(&request, &budget).unwrap();
    assert!(matches!(answer, Answer::Queued { .. }), "{answer:?}");
    release(&lock, &Token::from_text("holder"));
    assert_eq!(
        lock.doorbell_of(&token),
        Some((vec!["granted".to_owned()], true))
    );
    // Nothing was published for it: the push replaces the message.
    let turn = client
        .await_turn(&request, Duration::from_millis(200), &budget)
        .unwrap();
    assert!(turn.waited && !turn.refused, "{turn:?}");
    assert!(matches!(turn.answer, Answer::Granted { .. }), "{turn:?}");
    assert_eq!(lock.doorbell_of(&token), None);
}

#[test]
fn a_late_take_up_after_giving_up_leaves_no_place_and_no_grant() {
    let lock = held();
    let client = lock.ringing();
    // Its take-up, queued behind the pop, arrives after the give-up (a connection whose
    // bytes the server reads late), instead of being dropped with the connection.
    client
        .straggle
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let w = waiter_with(client, 1, None, Queueing::Join, WaitMode::Notify);
    until("the waiter to block on its doorbell", || {
        in_line(&lock, &w.token) && lock.blocked() == 1
    });
    w.cancel.cancel();
    // SAFETY: writing one byte from a valid buffer to a valid fd.
    unsafe { libc::write(w.signal.raw_wake_fd(), [15u8].as_ptr().cast(), 1) };
    let token = w.token.clone();
    let (waited, _) = join(w);
    assert!(
        matches!(waited, Waited::Interrupted { signal: 15, .. }),
        "{waited:?}"
    );
    assert!(!in_line(&lock, &token));
    assert_eq!(lock.blocked(), 0, "its connection is gone");
    // The late take-up finds no place: it neither joins again nor, once the lock is free,
    // takes it.
    assert_eq!(lock.run_stragglers(), [Answer::NoPlace]);
    assert!(!in_line(&lock, &token));
    assert_eq!(lock.holders(), ["holder"]);
    assert!(lock.state().waiters.is_empty());
    release(&lock, &Token::from_text("holder"));
    assert!(lock.holders().is_empty());
    assert_eq!(lock.doorbell_of(&token), None);
}

#[test]
fn doorbell_waiters_are_served_in_the_order_they_joined() {
    let lock = held();
    let waiters: Vec<Waiter> = (0..3).map(|_| ringing(&lock, 1)).collect();
    let tokens: Vec<Token> = waiters.iter().map(|w| w.token.clone()).collect();
    release(&lock, &Token::from_text("holder"));
    let mut order = Vec::new();
    for w in waiters {
        let token = w.token.clone();
        let (waited, _) = join(w);
        assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
        order.push(token.clone());
        // The others still wait, blocked on their doorbells, none of which rang.
        for other in tokens.iter().filter(|t| !order.contains(t)) {
            assert!(in_line(&lock, other));
            assert_eq!(lock.doorbell_of(other), None);
        }
        release(&lock, &token);
    }
    assert_eq!(order, tokens);
    let world = lock.world();
    for token in &tokens {
        assert!(
            world
                .rings
                .iter()
                .any(|r| r.token == token.as_str() && r.popped.as_deref() == Some("granted")),
            "each took its turn off its doorbell"
        );
    }
}

#[test]
fn a_polling_waiter_ahead_of_a_doorbell_waiter_keeps_its_turn() {
    let lock = held();
    let polling = waiter_with(lock.client(), 1, None, Queueing::Join, WaitMode::Spin);
    until("the polling waiter to take its place", || {
        in_line(&lock, &polling.token)
    });
    let rung = ringing(&lock, 1);
    release(&lock, &Token::from_text("holder"));
    let token = polling.token.clone();
    let (waited, _) = join(polling);
    assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
    assert!(in_line(&lock, &rung.token), "still waiting its turn");
    assert_eq!(lock.doorbell_of(&rung.token), None, "not rung");
    // Its release pushes the turn to the doorbell waiter.
    release(&lock, &token);
    let bell = rung.token.clone();
    let (waited, took) = join(rung);
    assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(
        lock.world()
            .rings
            .iter()
            .any(|r| r.token == bell.as_str() && r.popped.as_deref() == Some("granted"))
    );
}

#[test]
fn a_subscribing_waiter_behind_a_doorbell_waiter_and_the_reverse() {
    for doorbell_first in [true, false] {
        let lock = held();
        let subscribe = |lock: &ScriptLock| {
            let w = waiter_with(lock.client(), 1, None, Queueing::Join, WaitMode::Notify);
            until("the subscribing waiter to take its place", || {
                in_line(lock, &w.token)
            });
            w
        };
        let (first, second) = if doorbell_first {
            let first = ringing(&lock, 1);
            (first, subscribe(&lock))
        } else {
            let first = subscribe(&lock);
            (first, ringing(&lock, 1))
        };
        let started = Instant::now();
        release(&lock, &Token::from_text("holder"));
        let token = first.token.clone();
        let (waited, _) = join(first);
        assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
        assert!(in_line(&lock, &second.token));
        release(&lock, &token);
        let (waited, _) = join(second);
        assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
        // Both woken (pushed or published), neither by a refresh or an expiry.
        assert!(
            started.elapsed() < REFRESH,
            "{:?} (doorbell first: {doorbell_first})",
            started.elapsed()
        );
        // One subscribed, the other did not.
        assert_eq!(lock.subscribed().len(), 1);
    }
}

#[test]
fn a_refused_doorbell_falls_back_to_release_notifications() {
    let lock = held();
    let client = lock.ringing();
    client
        .refuse_doorbell
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let w = waiter_with(client, 1, None, Queueing::Join, WaitMode::Notify);
    until("the waiter to subscribe", || !lock.subscribed().is_empty());
    let started = Instant::now();
    release(&lock, &Token::from_text("holder"));
    let token = w.token.clone();
    let (waited, _) = join(w);
    assert!(matches!(waited, Waited::Acquired { .. }), "{waited:?}");
    assert!(started.elapsed() < REFRESH, "{:?}", started.elapsed());
    // Woken by a message: its later attempts said it subscribes (no doorbell pushed).
    assert_eq!(lock.doorbell_of(&token), None);
    assert!(lock.world().rings.is_empty());
}
