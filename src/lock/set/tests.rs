//! The set over the model Redis ([`ScriptLock`]): each member its own world (one key each),
//! driven as the engine drives it.

use std::time::Duration;

use super::*;
use crate::lock::model::ScriptLock;
use crate::lock::{AfterRun, Holder, Queueing};

const CLAIM: Duration = Duration::from_secs(5);

fn request<'a>(token: &'a Token, holder: &'a Holder, queueing: Queueing) -> Request<'a> {
    Request {
        token,
        claim: CLAIM,
        ttl: Duration::from_secs(30),
        holder,
        limit: 1,
        queueing,
        polls: false,
        after: AfterRun::default(),
        doorbell: false,
    }
}

fn budget() -> Budget {
    Budget::within(Duration::from_millis(500))
}

/// Two worlds (keys) and a set over a client of each.
fn two() -> (ScriptLock, ScriptLock, LockSet) {
    let (a, b) = (ScriptLock::new(), ScriptLock::new());
    let set = LockSet::new(vec![Box::new(a.client()), Box::new(b.client())]);
    (a, b, set)
}

#[test]
fn every_key_free_is_one_grant_valid_until_the_earliest_expiry() {
    let (a, b, mut set) = two();
    let token = Token::generate().unwrap();
    let holder = Holder::default();
    let answer = set
        .try_acquire(&request(&token, &holder, Queueing::Try), &budget())
        .unwrap();
    let Answer::Granted { validity, .. } = answer else {
        panic!("{answer:?}");
    };
    assert!(validity.ttl <= CLAIM);
    assert_eq!(a.holders(), vec![token.as_str().to_owned()]);
    assert_eq!(b.holders(), vec![token.as_str().to_owned()]);
    let members = set.members();
    assert_eq!(members.len(), 2);
    assert!(members.iter().all(|m| m.fence.is_some()));
    assert_eq!(set.release(&token, &budget()).unwrap(), Ownership::Held);
    assert!(a.holders().is_empty() && b.holders().is_empty());
}

#[test]
fn a_busy_key_keeps_the_keys_below_it_until_given_up() {
    let (a, b, mut set) = two();
    b.hold("other", 1, Duration::from_secs(30));
    let token = Token::generate().unwrap();
    let holder = Holder::default();
    let answer = set
        .try_acquire(&request(&token, &holder, Queueing::Try), &budget())
        .unwrap();
    assert!(matches!(answer, Answer::Busy(_)), "{answer:?}");
    // The engine attempts again soon enough for the held key to be renewed in time.
    assert_eq!(set.look_again_within(), Some(CLAIM / 3));
    assert!(set.holds_part());
    assert_eq!(a.holders(), vec![token.as_str().to_owned()]);
    // Joining: a place in b's line, a still held.
    let answer = set
        .try_acquire(&request(&token, &holder, Queueing::Join), &budget())
        .unwrap();
    assert!(
        matches!(answer, Answer::Queued { position: 1, .. }),
        "{answer:?}"
    );
    assert!(b.in_line(&token));
    // Giving up: a released, the line left.
    let residue = set.give_up(&token, CLAIM, &budget());
    assert_eq!(residue, Residue::Nothing);
    assert!(a.holders().is_empty());
    assert!(!b.in_line(&token));
    assert_eq!(b.holders(), vec!["other".to_owned()]);
}

#[test]
fn a_key_handed_over_completes_the_set() {
    let (a, b, mut set) = two();
    b.hold("other", 1, Duration::from_secs(30));
    let token = Token::generate().unwrap();
    let holder = Holder::default();
    let join = request(&token, &holder, Queueing::Join);
    assert!(matches!(
        set.try_acquire(&join, &budget()).unwrap(),
        Answer::Queued { .. }
    ));
    b.drop_holder("other");
    let answer = set.try_acquire(&join, &budget()).unwrap();
    assert!(matches!(answer, Answer::Granted { .. }), "{answer:?}");
    assert_eq!(a.holders(), vec![token.as_str().to_owned()]);
    assert_eq!(b.holders(), vec![token.as_str().to_owned()]);
}

#[test]
fn losing_one_key_makes_the_set_not_held_and_the_others_are_still_extended() {
    let (a, b, mut set) = two();
    let token = Token::generate().unwrap();
    let holder = Holder::default();
    assert!(matches!(
        set.try_acquire(&request(&token, &holder, Queueing::Try), &budget())
            .unwrap(),
        Answer::Granted { .. }
    ));
    let mut renewer = set.fresh(Duration::from_millis(500));
    b.drop_holder(token.as_str());
    let extended = renewer
        .extend(&token, Duration::from_secs(30), &budget())
        .unwrap();
    assert_eq!(extended, Extended::NotHeld);
    // Named to the handle that took the set (shared with the renewer's).
    assert_eq!(set.busy_key().as_deref(), Some("k"));
    assert_eq!(a.holders(), vec![token.as_str().to_owned()]);
    // Releasing the set releases what is left, and says it was not all held.
    assert_eq!(set.release(&token, &budget()).unwrap(), Ownership::NotHeld);
    assert!(a.holders().is_empty());
}

#[test]
fn a_conflict_gives_every_key_back_at_once() {
    let (a, b, mut set) = two();
    b.hold("sem", 3, Duration::from_secs(30));
    let token = Token::generate().unwrap();
    let holder = Holder::default();
    let answer = set
        .try_acquire(&request(&token, &holder, Queueing::Try), &budget())
        .unwrap();
    assert!(matches!(answer, Answer::Conflict(_)), "{answer:?}");
    assert!(a.holders().is_empty());
    assert!(!set.holds_part());
}
