//! One recorded event, as read back from a history stream, and how it is shown: one line for
//! people, one JSON object for programs.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::backend::Reply;

use super::time::rfc3339;

/// Fields whose values are integers (written as JSON numbers).
const NUMBERS: &[&str] = &[
    "pid",
    "fence",
    "slot",
    "waited_ms",
    "held_ms",
    "place",
    "by_pid",
];

/// The `why` of a `gave-up` recorded for a waiter whose place in line lapsed (it stopped
/// refreshing it: killed, stopped, cut off), by the script that purged it.
pub const LAPSED: &str = "lapsed";

/// The `why` of an `expired` hold that was a lock handed to a waiter which never took it up.
pub const NOT_TAKEN_UP: &str = "not-taken-up";

/// An event of a lock's history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// When it happened: ms since the epoch, on the Redis server's clock (the stream id).
    pub at_ms: u64,
    /// The stream entry's id (on one server; for a Redlock, the first node's).
    pub id: String,
    /// `acquired`, `released`, `lost`, `expired`, `broken`, `superseded`, `gave-up`.
    pub kind: String,
    /// The lock's key (without prefix).
    pub key: String,
    /// Every other field, as recorded (see `lock/lua/history.lua`).
    pub fields: BTreeMap<String, String>,
    /// For a Redlock: how many nodes recorded it, of how many (None for one server).
    pub recorded_by: Option<(usize, usize)>,
    /// For a Redlock: when the last node that recorded it did (`at_ms` is the first).
    pub last_at_ms: Option<u64>,
}

impl Event {
    /// Decode one XRANGE entry: `[id, [field, value, ...]]`.
    pub fn decode(entry: &Reply) -> Option<Event> {
        let Reply::Array(parts) = entry else {
            return None;
        };
        let id = parts.first()?.as_text()?;
        let at_ms = id.split('-').next()?.parse().ok()?;
        let Reply::Array(pairs) = parts.get(1)? else {
            return None;
        };
        let mut fields = BTreeMap::new();
        for pair in pairs.chunks(2) {
            if let [name, value] = pair {
                fields.insert(name.as_text()?, value.as_text()?);
            }
        }
        let kind = fields.remove("event")?;
        let key = fields.remove("key").unwrap_or_default();
        Some(Event {
            at_ms,
            id,
            kind,
            key,
            fields,
            recorded_by: None,
            last_at_ms: None,
        })
    }

    /// A field's value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// A duration field (`waited_ms`, `held_ms`).
    pub fn millis(&self, name: &str) -> Option<Duration> {
        self.get(name)?.parse().ok().map(Duration::from_millis)
    }

    /// What identifies the event across the nodes of a Redlock (each records its own copy, at
    /// its own time): the lock, the kind, the token prefix and the slot.
    pub fn identity(&self) -> (String, String, String, String) {
        (
            self.key.clone(),
            self.kind.clone(),
            self.get("token").unwrap_or_default().to_owned(),
            self.get("slot").unwrap_or_default().to_owned(),
        )
    }

    /// One JSON object: ts (RFC 3339 with ms), at_ms, event, key, then every recorded field
    /// (integers as numbers), and for a Redlock recorded_by and nodes.
    pub fn to_json(&self) -> serde_json::Value {
        let mut object = serde_json::Map::new();
        object.insert("ts".into(), rfc3339(self.at_ms, true).into());
        object.insert("at_ms".into(), self.at_ms.into());
        object.insert("event".into(), self.kind.clone().into());
        object.insert("key".into(), self.key.clone().into());
        for (name, value) in &self.fields {
            let json = match value.parse::<i64>() {
                Ok(n) if NUMBERS.contains(&name.as_str()) => n.into(),
                _ => value.clone().into(),
            };
            object.insert(name.clone(), json);
        }
        if let Some((by, of)) = self.recorded_by {
            object.insert("recorded_by".into(), by.into());
            object.insert("nodes".into(), of.into());
        }
        if let Some(last) = self.last_at_ms {
            object.insert("last_at_ms".into(), last.into());
        }
        serde_json::Value::Object(object)
    }

    /// Who: `web-3 pid 8812 (deploy v42)` (the note, else the command).
    fn who(&self, prefix: &str) -> String {
        let field = |name: &str| self.get(&format!("{prefix}{name}"));
        let mut who = field("host").unwrap_or("?").to_owned();
        if let Some(pid) = field("pid") {
            who.push_str(&format!(" pid {pid}"));
        }
        if let Some(what) = field("note").or(field("command")) {
            who.push_str(&format!(" ({what})"));
        }
        who
    }

    /// One line for people: `2026-11-25T03:00:01Z  acquired  web-3 pid 8812 (deploy v42)
    /// waited 12.3s  fence 17`; with `with_key`, the key after the kind.
    pub fn line(&self, with_key: bool) -> String {
        let mut parts = vec![rfc3339(self.at_ms, false), format!("{:<10}", self.kind)];
        if with_key {
            parts.push(self.key.clone());
        }
        parts.push(self.who(""));
        let dur = |name: &str| self.millis(name).map(crate::text::duration);
        match self.kind.as_str() {
            "acquired" => {
                if let Some(waited) = dur("waited_ms") {
                    parts.push(format!("waited {waited}"));
                }
                if let Some(place) = self.get("place") {
                    parts.push(format!("joined as {place}"));
                }
            }
            "released" | "lost" | "expired" | "broken" => {
                if let Some(held) = dur("held_ms") {
                    let words = if self.kind == "expired" {
                        "held at most"
                    } else {
                        "held"
                    };
                    parts.push(format!("{words} {held}"));
                }
                if let Some(outcome) = self.get("outcome") {
                    parts.push(outcome.to_owned());
                }
                match (self.kind.as_str(), self.get("why")) {
                    ("expired", Some(NOT_TAKEN_UP)) => parts.push(
                        "handed over but never taken up: the waiter was gone (killed in line?)"
                            .into(),
                    ),
                    ("expired", _) => parts.push("holder vanished without releasing".into()),
                    (_, Some(why)) => parts.push(why.to_owned()),
                    (_, None) => {}
                }
                if self.kind == "broken" {
                    let user = self
                        .get("by_user")
                        .map(|u| format!(" user {u}"))
                        .unwrap_or_default();
                    parts.push(format!("broken by {}{user}", self.who("by_")));
                }
            }
            "superseded" => {
                if let Some(waited) = dur("waited_ms") {
                    parts.push(format!("waited {waited}"));
                }
                parts.push(format!("by {}", self.who("by_")));
            }
            "gave-up" => {
                let lapsed = self.get("why") == Some(LAPSED);
                if let Some(waited) = dur("waited_ms") {
                    let words = if lapsed { "waited at most" } else { "waited" };
                    parts.push(format!("{words} {waited}"));
                }
                match self.get("why") {
                    Some(LAPSED) => parts.push(
                        "its place in line lapsed: the waiter stopped keeping it (killed?)".into(),
                    ),
                    Some(why) => parts.push(why.to_owned()),
                    None => {}
                }
            }
            _ => {}
        }
        if let Some(fence) = self.get("fence") {
            parts.push(format!("fence {fence}"));
        }
        if let Some(slot) = self.get("slot") {
            parts.push(format!("slot {slot}"));
        }
        if let Some(mode) = self.get("mode") {
            parts.push(mode.to_owned());
        }
        if let Some(token) = self.get("token") {
            parts.push(format!("id {token}"));
        }
        if let Some((by, of)) = self.recorded_by.filter(|(by, of)| by < of) {
            parts.push(format!("(recorded by {by} of {of} nodes)"));
        }
        crate::text::sanitize(&parts.join("  "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, fields: &[(&str, &str)]) -> Reply {
        Reply::Array(vec![
            Reply::Bytes(id.as_bytes().to_vec()),
            Reply::Array(
                fields
                    .iter()
                    .flat_map(|(k, v)| {
                        [
                            Reply::Bytes(k.as_bytes().to_vec()),
                            Reply::Bytes(v.as_bytes().to_vec()),
                        ]
                    })
                    .collect(),
            ),
        ])
    }

    #[test]
    fn an_acquired_event_reads_like_the_issue_says() {
        let at = super::super::time::parse_rfc3339("2026-11-25T03:00:01Z").unwrap();
        let e = Event::decode(&entry(
            &format!("{at}-0"),
            &[
                ("event", "acquired"),
                ("key", "deploy"),
                ("host", "web-3"),
                ("pid", "8812"),
                ("note", "deploy v42"),
                ("waited_ms", "12300"),
                ("fence", "17"),
                ("token", "abcdef12"),
            ],
        ))
        .unwrap();
        assert_eq!(
            e.line(false),
            "2026-11-25T03:00:01Z  acquired    web-3 pid 8812 (deploy v42)  waited 12.3s  fence 17  id abcdef12"
        );
        let json = e.to_json();
        assert_eq!(json["pid"], 8812);
        assert_eq!(json["event"], "acquired");
        assert_eq!(json["ts"], "2026-11-25T03:00:01.000Z");
        assert!(json.get("recorded_by").is_none());
    }

    #[test]
    fn a_lapsed_place_and_an_untaken_hand_off_say_so() {
        let e = Event::decode(&entry(
            "1764039601000-0",
            &[
                ("event", "gave-up"),
                ("key", "deploy"),
                ("host", "web-3"),
                ("pid", "8812"),
                ("command", "make"),
                ("waited_ms", "7000"),
                ("place", "2"),
                ("why", "lapsed"),
                ("token", "abcdef12"),
            ],
        ))
        .unwrap();
        assert_eq!(
            e.line(false),
            "2025-11-25T03:00:01Z  gave-up     web-3 pid 8812 (make)  waited at most 7s  its place in line lapsed: the waiter stopped keeping it (killed?)  id abcdef12"
        );
        assert_eq!(e.to_json()["why"], "lapsed");
        let e = Event::decode(&entry(
            "1764039601000-0",
            &[
                ("event", "expired"),
                ("key", "deploy"),
                ("host", "web-3"),
                ("held_ms", "3001"),
                ("why", "not-taken-up"),
            ],
        ))
        .unwrap();
        assert!(
            e.line(false).ends_with(
                "held at most 3s  handed over but never taken up: the waiter was gone (killed in line?)"
            ),
            "{}",
            e.line(false)
        );
    }

    #[test]
    fn malformed_entries_are_skipped() {
        assert_eq!(Event::decode(&Reply::Nil), None);
        assert_eq!(Event::decode(&entry("x-0", &[("event", "acquired")])), None);
        assert_eq!(Event::decode(&entry("1-0", &[("key", "k")])), None);
    }
}
