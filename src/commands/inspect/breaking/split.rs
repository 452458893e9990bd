//! Breaking a Redlock's split: every token that some node holds (or the one `--holder`
//! names), after consent, each released on every node by the same token compare.

use std::ops::ControlFlow;

use crate::backend::Budget;
use crate::error::Error;
use crate::exit::{Code, Exit};
use crate::lock::{HeldBy, Lock, Token};
use crate::output::{Ev, Msg, Output};

use super::{Consent, Target, agreed, by_id, end, failed, plural};
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

impl Target for Splinter<'_> {
    fn token(&self) -> Option<&str> {
        Some(self.token)
    }

    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
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
            self.shown_id(),
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
        let none = Msg::new(format!(
            "lock {key} is split, but no node that answered holds a token to release; nothing \
             was broken"
        ));
        return Ok(end(out, Ev::NotBroken, none, Code::Free));
    }
    let targets: Vec<&Splinter<'_>> = match holder {
        None => splinters.iter().collect(),
        Some(prefix) => match by_id(&splinters, prefix, "tokens", &key)? {
            Some(one) => vec![one],
            None => {
                let nowhere = Msg::new(format!(
                    "no node of lock {key} holds a token with the id {}; nothing was broken (the \
                     split lock's {}: {})",
                    crate::text::quote(prefix),
                    plural(splinters.len(), "token is", "tokens are"),
                    all()
                ));
                return Ok(end(out, Ev::NoSuchHolder, nowhere, Code::Free));
            }
        },
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
    let question = || {
        let them = match targets.len() {
            1 => "its token on every node that holds it".to_owned(),
            n => format!("all {n} tokens, each on every node that holds it"),
        };
        format!(
            "Release {them}? No holder has a majority, so nobody holds the lock, and nobody \
             can take it until the nodes' locks expire; releasing frees it now (a distlock \
             run among the holders terminates its command at its next renewal)."
        )
    };
    if let ControlFlow::Break(declined) = agreed(consent, &what, question, view, &key, out)? {
        return Ok(declined);
    }
    let mut broken = 0;
    for splinter in &targets {
        let token = Token::from_text(splinter.token);
        let release = lock.release_anywhere(&token, &budget());
        let held = release.map_err(|e| failed(lock, &key, e))?;
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
        let none = Msg::new(format!(
            "none of the {} tokens shown was still held on a node of lock {key}; nothing was \
             broken",
            targets.len()
        ));
        return Ok(end(out, Ev::NotBroken, none, Code::Free));
    }
    let broke = Msg::new(format!(
        "broke the split lock {key}: released {broken} of the {} {} its nodes held",
        targets.len(),
        if targets.len() == 1 {
            "token"
        } else {
            "tokens"
        }
    ));
    Ok(end(out, Ev::Broken, broke, Code::Success))
}
