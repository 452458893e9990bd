//! Breaking against the model Redis ([`ScriptLock`]): by id, all, the question, a free lock, a split.

use super::*;
use std::time::{Duration, SystemTime};

use crate::backend::Budget;
use crate::commands::inspect::view::View;
use crate::commands::inspect::view::fixtures::{agreed, holding, split};
use crate::lock::model::ScriptLock;
use crate::lock::{LockState, Survey, Token};
use crate::output::{Format, Level};

const A: &str = "3f2a9c1e-0000-4000-8000-000000000001";
const B: &str = "3f2a9d00-0000-4000-8000-000000000002";
const C: &str = "9b07d2aa-0000-4000-8000-000000000003";

fn quiet() -> Output {
    Output::new(Level::Quiet, Format::Text, Vec::new())
}

fn budget() -> Budget {
    Budget::within(Duration::from_secs(1))
}

/// A semaphore of 3 held by A, B and C, and what `status` would show.
fn pool() -> (ScriptLock, Survey) {
    let lock = ScriptLock::new();
    for token in [A, B, C] {
        lock.hold(token, 3, Duration::from_secs(60));
    }
    let state = lock.client().inspect(&budget()).unwrap();
    (lock, agreed(state))
}

fn holders(lock: &ScriptLock) -> Vec<String> {
    lock.holders()
}

/// Break what `survey` shows of the model's lock as `distlock break` does: the tokens of a split,
/// or else the holders.
fn brk(
    lock: &ScriptLock,
    survey: &Survey,
    holder: Option<&str>,
    consent: Consent<'_>,
) -> Result<Exit, Error> {
    let name = lock.name().clone();
    let view = View::surveyed(&name, survey, SystemTime::now());
    let breaks = if view.split {
        break_split
    } else {
        break_holders
    };
    breaks(
        &mut lock.client(),
        &view,
        holder,
        consent,
        &budget,
        &quiet(),
    )
}

/// Break as [`brk`] does, answering no: how it ended, and the question.
fn declined(
    lock: &ScriptLock,
    survey: &Survey,
    holder: Option<&str>,
) -> (Result<Exit, Error>, String) {
    let mut asked = String::new();
    let mut no = |text: &str| {
        asked = text.to_owned();
        false
    };
    let ended = brk(lock, survey, holder, Consent::Ask(&mut no));
    (ended, asked)
}

#[test]
fn one_holder_by_its_id() {
    let (lock, state) = pool();
    assert_eq!(
        brk(&lock, &state, Some("9b07"), Consent::Given).unwrap(),
        Exit::Code(0)
    );
    assert_eq!(holders(&lock), [A, B]);
    // Again: it is gone, and the id names nobody now.
    let state = {
        let mut s = lock.client().inspect(&budget()).unwrap();
        s.holders.iter_mut().for_each(|h| h.fence = Some(1));
        agreed(s)
    };
    assert_eq!(
        brk(&lock, &state, Some("9b07"), Consent::Given).unwrap(),
        Exit::Code(1)
    );
    assert_eq!(holders(&lock), [A, B]);
}

#[test]
fn an_ambiguous_id_is_refused_with_the_ids() {
    let (lock, state) = pool();
    match brk(&lock, &state, Some("3f2a9"), Consent::Given) {
        Err(Error::Usage(msg)) => {
            assert!(msg.contains("matches 2 holders"), "{msg}");
            assert!(
                msg.contains("3f2a9c1e") && msg.contains("3f2a9d00"),
                "{msg}"
            );
            assert!(msg.contains("give more of the id"), "{msg}");
        }
        other => panic!("expected a usage error, got {other:?}"),
    }
    assert_eq!(holders(&lock), [A, B, C], "nothing broken");
    // One more character tells them apart.
    assert_eq!(
        brk(&lock, &state, Some("3f2a9c"), Consent::Given).unwrap(),
        Exit::Code(0)
    );
    assert_eq!(holders(&lock), [B, C]);
}

#[test]
fn all_holders_shown_and_only_those() {
    let (lock, state) = pool();
    // B leaves and D takes its slot after the state was shown: D is not broken.
    lock.client()
        .release(&Token::from_text(B), &budget())
        .unwrap();
    lock.hold("d-newcomer-000000", 3, Duration::from_secs(60));
    assert_eq!(
        brk(&lock, &state, None, Consent::Given).unwrap(),
        Exit::Code(0)
    );
    assert_eq!(holders(&lock), ["d-newcomer-000000"]);
    // Nothing left of those shown: 1.
    assert_eq!(
        brk(&lock, &state, None, Consent::Given).unwrap(),
        Exit::Code(1)
    );
}

#[test]
fn the_question_shows_the_holders_and_no_means_no() {
    let (lock, state) = pool();
    let (ended, asked) = declined(&lock, &state, None);
    assert_eq!(ended.unwrap(), Exit::Code(1));
    assert!(
        asked.starts_with("lock \"k\" is held: 3 of 3 slots"),
        "{asked}"
    );
    assert!(asked.ends_with("Break all 3 holders? Each loses its slot (distlock run terminates its command at the next renewal). [y/N] "), "{asked}");
    assert_eq!(holders(&lock), [A, B, C]);
    match brk(&lock, &state, Some("9b07d2aa"), Consent::Impossible) {
        Err(Error::Usage(msg)) => assert!(
            msg.starts_with("refusing to break holder 9b07d2aa of lock \"k\" (")
                && msg.ends_with("without --yes: there is no terminal to ask on"),
            "{msg}"
        ),
        other => panic!("expected a usage error, got {other:?}"),
    }
    // (The holders took their slots through the scripts with empty metadata: distlock
    // clients that said nothing about themselves, not foreign clients.)
    let mut yes = |text: &str| text.contains("Break holder 9b07d2aa (an unnamed holder)?");
    assert_eq!(
        brk(&lock, &state, Some("9b07d2aa"), Consent::Ask(&mut yes)).unwrap(),
        Exit::Code(0)
    );
    assert_eq!(holders(&lock), [A, B]);
}

#[test]
fn a_free_lock_has_nothing_to_break() {
    let lock = ScriptLock::new();
    let state = agreed(LockState::default());
    assert_eq!(
        brk(&lock, &state, None, Consent::Impossible).unwrap(),
        Exit::Code(1)
    );
    assert_eq!(
        brk(&lock, &state, Some("abcd"), Consent::Given).unwrap(),
        Exit::Code(1)
    );
}

/// A split over three nodes: A on the first, B on the second, the third free; the model
/// holds both tokens (as slots of 2, so that it keeps both).
fn split_ab() -> (ScriptLock, Survey) {
    let lock = ScriptLock::new();
    lock.hold(A, 2, Duration::from_secs(60));
    lock.hold(B, 2, Duration::from_secs(60));
    let state = lock.client().inspect(&budget()).unwrap();
    let on = |token: &str| {
        let held = state
            .holders
            .iter()
            .filter(|h| h.token.as_deref() == Some(token));
        Ok(holding(held.cloned().collect()))
    };
    let survey = split(vec![
        ("redis://a", on(A)),
        ("redis://b", on(B)),
        ("redis://c", Ok(LockState::default())),
    ]);
    let name = lock.name().clone();
    assert!(View::surveyed(&name, &survey, SystemTime::now()).split);
    (lock, survey)
}

#[test]
fn a_split_releases_every_token_a_node_holds_after_consent() {
    let (lock, survey) = split_ab();
    match brk(&lock, &survey, None, Consent::Impossible) {
        Err(Error::Usage(msg)) => {
            assert!(msg.starts_with("refusing to break the split lock \"k\" (2 tokens: "));
            assert!(
                msg.contains("3f2a9c1e (held by an unnamed holder) on 1 of the 3 nodes: redis://a"),
                "{msg}"
            );
            assert!(
                msg.contains("3f2a9d00 (held by an unnamed holder) on 1 of the 3 nodes: redis://b")
            );
        }
        other => panic!("expected a usage error, got {other:?}"),
    }
    let (ended, asked) = declined(&lock, &survey, None);
    assert_eq!(ended.unwrap(), Exit::Code(1));
    assert!(asked.starts_with("lock \"k\" is split"), "{asked}");
    assert!(asked.contains("Release all 2 tokens"), "{asked}");
    assert_eq!(holders(&lock), [A, B]);
    // An id names one token; an id of both is refused; an unknown one breaks nothing.
    assert!(matches!(
        brk(&lock, &survey, Some("3f2a9"), Consent::Given),
        Err(Error::Usage(_))
    ));
    assert_eq!(
        brk(&lock, &survey, Some("ffff"), Consent::Given).unwrap(),
        Exit::Code(1)
    );
    assert_eq!(
        brk(&lock, &survey, Some("3f2a9d"), Consent::Given).unwrap(),
        Exit::Code(0)
    );
    assert_eq!(holders(&lock), [A]);
    // All: A is released, B is gone already (not an error).
    assert_eq!(
        brk(&lock, &survey, None, Consent::Given).unwrap(),
        Exit::Code(0)
    );
    assert!(holders(&lock).is_empty());
    // Nothing of what was shown is left: 1.
    assert_eq!(
        brk(&lock, &survey, None, Consent::Given).unwrap(),
        Exit::Code(1)
    );
}
