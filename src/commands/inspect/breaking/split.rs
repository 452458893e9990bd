//! Breaking a Redlock's split: every token that some node holds (or the one `--holder`
//! names), after consent, each released on every node by the same token compare.

use crate::backend::Budget;
use crate::error::Error;
use crate::exit::{Code, Exit};
use crate::lock::{HeldBy, Lock, Token};
use crate::output::{Ev, Msg, Output};

use super::{Consent, plural};
use crate::commands::inspect::view::{View, short_ids, who};

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
            .exit(Code::Free.get()),
        );
        return Ok(Exit::from(Code::Free));
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
                        .exit(Code::Free.get()),
                    );
                    return Ok(Exit::from(Code::Free));
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
                    Msg::new(format!("lock {key} was not broken")).exit(Code::Free.get()),
                );
                return Ok(Exit::from(Code::Free));
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
            .exit(Code::Free.get()),
        );
        return Ok(Exit::from(Code::Free));
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
        .exit(Code::Success.get()),
    );
    Ok(Exit::from(Code::Success))
}
