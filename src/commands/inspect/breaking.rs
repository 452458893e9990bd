//! `distlock break`: which holders to break (all that were shown, or the one `--holder` names),
//! whether the operator agreed, and the releases, one per holder, each by the token that was
//! shown. Talks only to a `dyn Lock` and to [`Output`]; reading the lock and the terminal is the
//! caller's business.
//!
//! A break is `lock.release(token)` with the token of a holder as it was shown: the release
//! compares tokens, so a holder that left meanwhile (or a newer one in its place) is never
//! broken, and the lock or the slot goes to the next waiter in line, as after any release.
//!
//! A Redlock's split (no token on a majority of its nodes, after partial acquires or a node
//! that lost its data) has no holder, and nobody can take the lock until the nodes' locks
//! expire: [`break_split`] releases every token that some node holds, each by the same
//! token-compare release on every node, so that the lock is free now.

use crate::backend::Budget;
use crate::commands::Exit;
use crate::error::Error;
use crate::exit;
use crate::lock::{HeldBy, Lock, Ownership, Token};
use crate::output::{Ev, Msg, Output};

use super::view::{Shown, View, short_ids, who};

/// Whether the operator agreed to the break.
pub enum Consent<'a> {
    /// `--yes`.
    Given,
    /// Ask this question (the status of the lock, then the question itself); true is yes.
    Ask(&'a mut dyn FnMut(&str) -> bool),
    /// Nobody can be asked (stdin is not a terminal) and `--yes` is missing.
    Impossible,
}

/// Break the holders of `view` that `holder` (an id prefix) selects, or all of them.
pub fn break_holders(
    lock: &mut dyn Lock,
    view: &View<'_>,
    holder: Option<&str>,
    consent: Consent<'_>,
    budget: &dyn Fn() -> Budget,
    out: &Output,
) -> Result<Exit, Error> {
    let key = crate::text::quote(view.name.key());
    if view.holders.is_empty() {
        out.notice(
            Ev::Free,
            Msg::new(format!("lock {key} is free; nothing to break")).exit(exit::FREE),
        );
        return Ok(Exit::Code(exit::FREE));
    }
    let targets: Vec<&Shown<'_>> = match holder {
        None => view.holders.iter().collect(),
        Some(prefix) => {
            let matching: Vec<&Shown<'_>> = view
                .holders
                .iter()
                .filter(|shown| shown.token().is_some_and(|t| t.starts_with(prefix)))
                .collect();
            let id = crate::text::quote(prefix);
            match matching.as_slice() {
                [] => {
                    out.notice(
                        Ev::NoSuchHolder,
                        Msg::new(format!(
                            "no holder of lock {key} has the id {id}; nothing was broken (its {}: {})",
                            plural(view.holders.len(), "holder is", "holders are"),
                            view.id_list()
                        ))
                        .exit(exit::FREE),
                    );
                    return Ok(Exit::Code(exit::FREE));
                }
                [_] => matching,
                several => {
                    let ids: Vec<String> = several
                        .iter()
                        .map(|shown| {
                            shown
                                .id
                                .as_deref()
                                .map_or("?".into(), crate::text::sanitize)
                        })
                        .collect();
                    return Err(Error::Usage(format!(
                        "the id {id} matches {} holders of lock {key} ({}); give more of the id",
                        several.len(),
                        ids.join(", ")
                    )));
                }
            }
        }
    };
    let mut tokens = Vec::with_capacity(targets.len());
    for shown in &targets {
        match shown.token() {
            Some(token) => tokens.push(Token::from_text(token)),
            None => return Err(Error::Internal("the lock's token could not be read".into())),
        }
    }
    let semaphore = view.is_semaphore();
    let what = match (targets.as_slice(), semaphore) {
        ([_], false) => format!("lock {key} ({})", targets[0].held.summary()),
        ([one], true) => format!("{} of lock {key} ({})", one.named(), one.held.summary()),
        (all, _) => format!(
            "the {} holders of lock {key} ({})",
            all.len(),
            view.id_list()
        ),
    };
    match consent {
        Consent::Given => {}
        Consent::Impossible => {
            return Err(Error::Usage(format!(
                "refusing to break {what} without --yes: there is no terminal to ask on"
            )));
        }
        Consent::Ask(ask) => {
            let question = match (targets.as_slice(), semaphore) {
                ([_], false) => "Break it? Its holder loses it (distlock run terminates its \
                                 command at the next renewal)."
                    .to_owned(),
                ([one], true) => format!(
                    "Break {} ({})? It loses its slot (distlock run terminates its command at \
                     the next renewal).",
                    one.named(),
                    who(one.held)
                ),
                (all, _) => format!(
                    "Break all {} holders? Each loses its slot (distlock run terminates its \
                     command at the next renewal).",
                    all.len()
                ),
            };
            if !ask(&format!("{}{question} [y/N] ", view.text())) {
                out.notice(
                    Ev::Declined,
                    Msg::new(format!("lock {key} was not broken")).exit(exit::FREE),
                );
                return Ok(Exit::Code(exit::FREE));
            }
        }
    }
    let it = if semaphore { "its slot" } else { "it" };
    let next = match view.waiters.len() {
        0 => String::new(),
        1 => format!("; {it} passes to the waiter in line"),
        n => format!("; {it} passes to the first of the {n} waiters in line"),
    };
    // One holder: one line, as for a mutex. Several: a line per holder, then the outcome.
    if let ([one], [token]) = (targets.as_slice(), tokens.as_slice()) {
        let named = if semaphore {
            format!("{} of lock {key}", one.named())
        } else {
            format!("lock {key}")
        };
        return match release(lock, token, budget, &key)? {
            Ownership::Held => {
                out.notice(
                    Ev::Broken,
                    Msg::new(format!("broke {named} ({}){next}", one.held.summary()))
                        .holder(one.held.who())
                        .exit(exit::SUCCESS),
                );
                Ok(Exit::Code(exit::SUCCESS))
            }
            Ownership::NotHeld => {
                let changed = if semaphore {
                    format!("{named} released its slot or lost it meanwhile")
                } else {
                    format!("lock {key} changed hands or was released meanwhile")
                };
                out.notice(
                    Ev::NotBroken,
                    Msg::new(format!("{changed}; nothing was broken")).exit(exit::FREE),
                );
                Ok(Exit::Code(exit::FREE))
            }
        };
    }
    let mut broken = 0;
    for (shown, token) in targets.iter().zip(&tokens) {
        match release(lock, token, budget, &key)? {
            Ownership::Held => {
                broken += 1;
                out.notice(
                    Ev::HolderBroken,
                    Msg::new(format!(
                        "broke {} of lock {key} ({})",
                        shown.named(),
                        shown.held.summary()
                    ))
                    .holder(shown.held.who()),
                );
            }
            Ownership::NotHeld => out.notice(
                Ev::HolderNotBroken,
                Msg::new(format!(
                    "{} of lock {key} released its slot or lost it meanwhile; not broken",
                    shown.named()
                )),
            ),
        }
    }
    if broken == 0 {
        out.notice(
            Ev::NotBroken,
            Msg::new(format!(
                "none of the {} holders shown still held lock {key}; nothing was broken",
                targets.len()
            ))
            .exit(exit::FREE),
        );
        return Ok(Exit::Code(exit::FREE));
    }
    let slots = if view.waiters.is_empty() {
        String::new()
    } else {
        "; the slots pass to the waiters in line".to_owned()
    };
    out.notice(
        Ev::Broken,
        Msg::new(format!(
            "broke {broken} of the {} holders of lock {key}{slots}",
            targets.len()
        ))
        .exit(exit::SUCCESS),
    );
    Ok(Exit::Code(exit::SUCCESS))
}

/// A token that nodes of a split hold.
struct Splinter<'a> {
    /// What the first node that holds it says of its holder.
    held: &'a HeldBy,
    /// The token.
    token: &'a str,
    /// Its id (a prefix, as for any holder).
    id: Option<String>,
    /// The nodes that hold it.
    nodes: Vec<&'a str>,
}

impl Splinter<'_> {
    /// `3f2a9c1e (held by ci-7 pid 12) on 1 of the 3 nodes: redis://a`, for messages.
    fn describe(&self, of: usize) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|a| crate::text::sanitize(a))
            .collect();
        format!(
            "{} (held by {}) on {} of the {of} nodes: {}",
            self.id.as_deref().map_or("?".into(), crate::text::sanitize),
            who(self.held),
            self.nodes.len(),
            nodes.join(" ")
        )
    }
}

/// Break a Redlock's split (`view.split`): release every token that some node holds (or the
/// one `holder` selects), after consent. 0 when something was released, 1 when nothing was.
pub fn break_split(
    lock: &mut dyn Lock,
    view: &View<'_>,
    holder: Option<&str>,
    consent: Consent<'_>,
    budget: &dyn Fn() -> Budget,
    out: &Output,
) -> Result<Exit, Error> {
    let key = crate::text::quote(view.name.key());
    let of = view.nodes.len();
    // Every token that a node holds, once, with the nodes that hold it.
    let mut splinters: Vec<Splinter<'_>> = Vec::new();
    for node in &view.nodes {
        let Ok(state) = &node.state else { continue };
        for shown in &state.holders {
            let Some(token) = shown.token() else { continue };
            match splinters.iter_mut().find(|s| s.token == token) {
                Some(splinter) => splinter.nodes.push(node.address),
                None => splinters.push(Splinter {
                    held: shown.held,
                    token,
                    id: None,
                    nodes: vec![node.address],
                }),
            }
        }
    }
    let tokens: Vec<Option<&str>> = splinters.iter().map(|s| Some(s.token)).collect();
    for (splinter, id) in splinters.iter_mut().zip(short_ids(&tokens)) {
        splinter.id = id;
    }
    let all = || {
        splinters
            .iter()
            .map(|s| s.describe(of))
            .collect::<Vec<_>>()
            .join("; ")
    };
    if splinters.is_empty() {
        out.notice(
            Ev::NotBroken,
            Msg::new(format!(
                "lock {key} is split, but no node that answered holds a token to release; \
                 nothing was broken"
            ))
            .exit(exit::FREE),
        );
        return Ok(Exit::Code(exit::FREE));
    }
    let targets: Vec<&Splinter<'_>> = match holder {
        None => splinters.iter().collect(),
        Some(prefix) => {
            let matching: Vec<&Splinter<'_>> = splinters
                .iter()
                .filter(|s| s.token.starts_with(prefix))
                .collect();
            let id = crate::text::quote(prefix);
            match matching.as_slice() {
                [] => {
                    out.notice(
                        Ev::NoSuchHolder,
                        Msg::new(format!(
                            "no node of lock {key} holds a token with the id {id}; nothing was \
                             broken (the split lock's {}: {})",
                            plural(splinters.len(), "token is", "tokens are"),
                            all()
                        ))
                        .exit(exit::FREE),
                    );
                    return Ok(Exit::Code(exit::FREE));
                }
                [_] => matching,
                several => {
                    let ids: Vec<String> = several
                        .iter()
                        .map(|s| s.id.as_deref().map_or("?".into(), crate::text::sanitize))
                        .collect();
                    return Err(Error::Usage(format!(
                        "the id {id} matches {} tokens of lock {key} ({}); give more of the id",
                        several.len(),
                        ids.join(", ")
                    )));
                }
            }
        }
    };
    let what = match targets.as_slice() {
        [one] => format!("the split lock {key} (token {})", one.describe(of)),
        several => format!(
            "the split lock {key} ({} tokens: {})",
            several.len(),
            several
                .iter()
                .map(|s| s.describe(of))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    };
    match consent {
        Consent::Given => {}
        Consent::Impossible => {
            return Err(Error::Usage(format!(
                "refusing to break {what} without --yes: there is no terminal to ask on"
            )));
        }
        Consent::Ask(ask) => {
            let them = match targets.len() {
                1 => "its token on every node that holds it".to_owned(),
                n => format!("all {n} tokens, each on every node that holds it"),
            };
            let question = format!(
                "Release {them}? No holder has a majority, so nobody holds the lock, and nobody \
                 can take it until the nodes' locks expire; releasing frees it now (a distlock \
                 run among the holders terminates its command at its next renewal)."
            );
            if !ask(&format!("{}{question} [y/N] ", view.text())) {
                out.notice(
                    Ev::Declined,
                    Msg::new(format!("lock {key} was not broken")).exit(exit::FREE),
                );
                return Ok(Exit::Code(exit::FREE));
            }
        }
    }
    let mut broken = 0;
    for splinter in &targets {
        let token = Token::from_text(splinter.token);
        let held = lock
            .release_anywhere(&token, &budget())
            .map_err(|e| Error::redis(format!("cannot break lock {key}"), lock.describe(), e))?;
        match held {
            1.. => {
                broken += 1;
                out.notice(
                    Ev::HolderBroken,
                    Msg::new(format!(
                        "lock {key}: released token {}{}",
                        splinter.describe(of),
                        if held < splinter.nodes.len() {
                            format!(" (only {held} of them still held it)")
                        } else {
                            String::new()
                        }
                    ))
                    .holder(splinter.held.who()),
                );
            }
            0 => out.notice(
                Ev::HolderNotBroken,
                Msg::new(format!(
                    "lock {key}: token {} was gone meanwhile; not released",
                    splinter.describe(of)
                )),
            ),
        }
    }
    if broken == 0 {
        out.notice(
            Ev::NotBroken,
            Msg::new(format!(
                "none of the {} tokens shown was still held on a node of lock {key}; nothing was \
                 broken",
                targets.len()
            ))
            .exit(exit::FREE),
        );
        return Ok(Exit::Code(exit::FREE));
    }
    out.notice(
        Ev::Broken,
        Msg::new(format!(
            "broke the split lock {key}: released {broken} of the {} {} its nodes held",
            targets.len(),
            if targets.len() == 1 {
                "token"
            } else {
                "tokens"
            }
        ))
        .exit(exit::SUCCESS),
    );
    Ok(Exit::Code(exit::SUCCESS))
}

/// Release `token`, compare-and-delete: a newer holder is never broken by mistake.
fn release(
    lock: &mut dyn Lock,
    token: &Token,
    budget: &dyn Fn() -> Budget,
    key: &str,
) -> Result<Ownership, Error> {
    lock.release(token, &budget())
        .map_err(|e| Error::redis(format!("cannot break lock {key}"), lock.describe(), e))
}

/// `1 holder is`, `2 holders are`.
fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    use crate::lock::fake::FakeLock;
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

    /// A semaphore of 3 held by A, B and C, and the state `status` would show.
    fn pool() -> (FakeLock, crate::lock::LockState) {
        let lock = FakeLock::new();
        for token in [A, B, C] {
            lock.hold(token, 3, Duration::from_secs(60));
        }
        let mut state = lock.client().inspect(&budget()).unwrap();
        // The fake reports no fences: give them in the order of the grants.
        for held in &mut state.holders {
            held.fence = [A, B, C]
                .iter()
                .position(|t| held.token.as_deref() == Some(*t))
                .map(|i| i as u64);
        }
        (lock, state)
    }

    fn holders(lock: &FakeLock) -> Vec<String> {
        let mut tokens: Vec<String> = lock.world().holders.keys().cloned().collect();
        tokens.sort();
        tokens
    }

    fn brk(
        lock: &FakeLock,
        state: &crate::lock::LockState,
        holder: Option<&str>,
        consent: Consent<'_>,
    ) -> Result<Exit, Error> {
        let name = crate::lock::LockName::new("fake:", "k");
        let view = View::new(&name, state, SystemTime::now());
        break_holders(
            &mut lock.client(),
            &view,
            holder,
            consent,
            &budget,
            &quiet(),
        )
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
            s
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
        let mut asked = String::new();
        let mut no = |text: &str| {
            asked = text.to_owned();
            false
        };
        assert_eq!(
            brk(&lock, &state, None, Consent::Ask(&mut no)).unwrap(),
            Exit::Code(1)
        );
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
        let mut yes = |text: &str| text.contains("Break holder 9b07d2aa (another client)?");
        assert_eq!(
            brk(&lock, &state, Some("9b07d2aa"), Consent::Ask(&mut yes)).unwrap(),
            Exit::Code(0)
        );
        assert_eq!(holders(&lock), [A, B]);
    }

    #[test]
    fn a_free_lock_has_nothing_to_break() {
        let lock = FakeLock::new();
        let state = crate::lock::LockState::default();
        assert_eq!(
            brk(&lock, &state, None, Consent::Impossible).unwrap(),
            Exit::Code(1)
        );
        assert_eq!(
            brk(&lock, &state, Some("abcd"), Consent::Given).unwrap(),
            Exit::Code(1)
        );
    }

    /// A split over three nodes: A on the first, B on the second, the third free; the fake
    /// holds both tokens (as slots of 2, so that it keeps both).
    fn split() -> (FakeLock, crate::lock::Survey) {
        use crate::lock::{NodeView, Survey};
        let lock = FakeLock::new();
        lock.hold(A, 2, Duration::from_secs(60));
        lock.hold(B, 2, Duration::from_secs(60));
        let state = lock.client().inspect(&budget()).unwrap();
        let on = |token: &str| crate::lock::LockState {
            holders: state
                .holders
                .iter()
                .filter(|h| h.token.as_deref() == Some(token))
                .cloned()
                .collect(),
            limit: 1,
            waiters: Vec::new(),
        };
        let survey = Survey {
            agreed: None,
            nodes: vec![
                NodeView {
                    address: "redis://a".into(),
                    state: Ok(on(A)),
                },
                NodeView {
                    address: "redis://b".into(),
                    state: Ok(on(B)),
                },
                NodeView {
                    address: "redis://c".into(),
                    state: Ok(crate::lock::LockState::default()),
                },
            ],
        };
        (lock, survey)
    }

    fn brk_split(
        lock: &FakeLock,
        survey: &crate::lock::Survey,
        holder: Option<&str>,
        consent: Consent<'_>,
    ) -> Result<Exit, Error> {
        let name = crate::lock::LockName::new("fake:", "k");
        let view = View::surveyed(&name, survey, SystemTime::now());
        assert!(view.split);
        break_split(
            &mut lock.client(),
            &view,
            holder,
            consent,
            &budget,
            &quiet(),
        )
    }

    #[test]
    fn a_split_releases_every_token_a_node_holds_after_consent() {
        let (lock, survey) = split();
        match brk_split(&lock, &survey, None, Consent::Impossible) {
            Err(Error::Usage(msg)) => {
                assert!(msg.starts_with("refusing to break the split lock \"k\" (2 tokens: "));
                assert!(
                    msg.contains(
                        "3f2a9c1e (held by another client) on 1 of the 3 nodes: redis://a"
                    )
                );
                assert!(
                    msg.contains(
                        "3f2a9d00 (held by another client) on 1 of the 3 nodes: redis://b"
                    )
                );
            }
            other => panic!("expected a usage error, got {other:?}"),
        }
        let mut asked = String::new();
        let mut no = |text: &str| {
            asked = text.to_owned();
            false
        };
        assert_eq!(
            brk_split(&lock, &survey, None, Consent::Ask(&mut no)).unwrap(),
            Exit::Code(1)
        );
        assert!(asked.starts_with("lock \"k\" is split"), "{asked}");
        assert!(asked.contains("Release all 2 tokens"), "{asked}");
        assert_eq!(holders(&lock), [A, B]);
        // An id names one token; an id of both is refused; an unknown one breaks nothing.
        assert!(matches!(
            brk_split(&lock, &survey, Some("3f2a9"), Consent::Given),
            Err(Error::Usage(_))
        ));
        assert_eq!(
            brk_split(&lock, &survey, Some("ffff"), Consent::Given).unwrap(),
            Exit::Code(1)
        );
        assert_eq!(
            brk_split(&lock, &survey, Some("3f2a9d"), Consent::Given).unwrap(),
            Exit::Code(0)
        );
        assert_eq!(holders(&lock), [A]);
        // All: A is released, B is gone already (not an error).
        assert_eq!(
            brk_split(&lock, &survey, None, Consent::Given).unwrap(),
            Exit::Code(0)
        );
        assert!(holders(&lock).is_empty());
        // Nothing of what was shown is left: 1.
        assert_eq!(
            brk_split(&lock, &survey, None, Consent::Given).unwrap(),
            Exit::Code(1)
        );
    }
}
