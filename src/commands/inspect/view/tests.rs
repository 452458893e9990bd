//! The view of a lock against hand-made states: ids, order, text, rows and JSON.

use super::*;
use crate::lock::{Holder, HolderTtl};

/// 2026-11-23T10:00:00Z.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_795_428_000)
}

fn held(token: &str, fence: u64, pid: u32, note: &str, held_for: u64) -> HeldBy {
    HeldBy {
        ttl: HolderTtl::Expires(Duration::from_millis(28_600)),
        holder: Some(Box::new(Holder {
            host: Some("ci-7".into()),
            pid: Some(pid),
            user: Some("deploy".into()),
            command: Some("./batch.sh".into()),
            kind: Some("run".into()),
            version: Some("0.1.0".into()),
            ci_url: None,
            note: Some(note.into()),
            warn_after_ms: None,
            set: None,
        })),
        held_for: Some(Duration::from_secs(held_for)),
        token: Some(token.into()),
        fence: Some(fence),
        slot: None,
        cooldown: None,
        warn_after: None,
    }
}

fn waiting(pid: u32, note: Option<&str>, waited: u64, limit: u32) -> Waiting {
    Waiting {
        holder: Some(Box::new(Holder {
            host: Some("ci-8".into()),
            pid: Some(pid),
            note: note.map(Into::into),
            ci_url: (pid == 31).then(|| "https://ci/job/31".into()),
            ..Holder::default()
        })),
        waited: Some(Duration::from_secs(waited)),
        limit,
    }
}

/// That `view`'s row in `list` is `row`.
#[track_caller]
fn assert_row(view: &View<'_>, row: [&str; 6]) {
    assert_eq!(view.row(), row.map(String::from));
}

fn semaphore() -> LockState {
    LockState {
        // As Redis lists them: soonest expiry first, not the order of the grants.
        holders: vec![
            held("9b07d2aa-0000-4000-8000-000000000002", 20, 12, "batch 2", 5),
            held(
                "3f2a9c1e-0000-4000-8000-000000000001",
                10,
                11,
                "batch 1",
                65,
            ),
        ],
        limit: 2,
        waiters: vec![waiting(31, Some("batch 3"), 12, 2), waiting(32, None, 3, 2)],
        now_ms: 0,
    }
}

#[test]
fn a_semaphore_shows_every_holder_by_id_and_the_line_in_order() {
    let name = LockName::new("distlock:", "pool");
    let state = semaphore();
    let view = View::new(&name, &state, now());
    assert_eq!(
        view.text(),
        "lock \"pool\" is held: 2 of 2 slots (a semaphore)\n\
         \n\
         \x20 id        3f2a9c1e\n\
         \x20 holder    ci-7, pid 11, user deploy\n\
         \x20 command   ./batch.sh\n\
         \x20 note      batch 1\n\
         \x20 via       distlock 0.1.0 run\n\
         \x20 held for  1m 5s (since 2026-11-23T09:58:55Z)\n\
         \x20 expires   in 28.6s unless renewed\n\
         \x20 fence     10\n\
         \n\
         \x20 id        9b07d2aa\n\
         \x20 holder    ci-7, pid 12, user deploy\n\
         \x20 command   ./batch.sh\n\
         \x20 note      batch 2\n\
         \x20 via       distlock 0.1.0 run\n\
         \x20 held for  5s (since 2026-11-23T09:59:55Z)\n\
         \x20 expires   in 28.6s unless renewed\n\
         \x20 fence     20\n\
         \n\
         2 waiting, first in line first:\n\
         \x20 1. ci-8, pid 31, waiting for 12s (since 2026-11-23T09:59:48Z); note \"batch 3\"; CI job https://ci/job/31\n\
         \x20 2. ci-8, pid 32, waiting for 3s (since 2026-11-23T09:59:57Z)\n"
    );
    assert_row(
        &view,
        ["pool", "2/2 ci-7:11", "1m 5s", "28.6s", "2", "batch 1"],
    );
}

#[test]
fn a_mutex_keeps_its_layout_plus_its_fence() {
    let name = LockName::new("distlock:", "m");
    let state = LockState {
        holders: vec![held("aaaaaaaa-1", 7, 11, "deploy 42", 5)],
        limit: 1,
        waiters: vec![waiting(32, None, 3, 1)],
        now_ms: 0,
    };
    let view = View::new(&name, &state, now());
    let text = view.text();
    assert!(
        text.starts_with("lock \"m\" is held\n  holder    ci-7, pid 11, user deploy\n"),
        "{text}"
    );
    assert!(!text.contains("  id "), "{text}");
    assert!(text.contains("\n  fence     7\n1 waiting:\n  1. ci-8, pid 32"));
    assert_eq!(view.row()[1], "ci-7:11");
    // Free, with a waiter (a hand-off under way): still shown.
    let free = LockState {
        holders: Vec::new(),
        limit: 0,
        waiters: vec![waiting(32, None, 3, 1)],
        now_ms: 0,
    };
    let view = View::new(&name, &free, now());
    assert!(view.text().starts_with("lock \"m\" is free\n1 waiting:\n"));
    assert_row(&view, ["m", "(free)", "-", "-", "1", ""]);
}

#[test]
fn json_keeps_the_mutex_fields_and_adds_holders_and_the_line() {
    let name = LockName::new("distlock:", "pool");
    let state = semaphore();
    let view = View::new(&name, &state, now());
    let v = serde_json::to_value(view.json()).unwrap();
    assert_eq!(v["held"], true);
    assert_eq!(v["holder"]["pid"], 11, "the first holder's, as before");
    assert_eq!(v["acquired_at"], "2026-11-23T09:58:55Z");
    assert_eq!(v["fence"], 10);
    assert_eq!(v["limit"], 2);
    assert_eq!(v["holders"][0]["id"], "3f2a9c1e");
    assert_eq!(v["holders"][1]["id"], "9b07d2aa");
    assert_eq!(v["holders"][1]["fence"], 20);
    assert_eq!(v["holders"][1]["holder"]["note"], "batch 2");
    assert_eq!(v["holders"][1]["ttl_ms"], 28_600);
    assert_eq!(v["waiting"][0]["position"], 1);
    assert_eq!(v["waiting"][0]["holder"]["note"], "batch 3");
    assert_eq!(v["waiting"][0]["waited_ms"], 12_000);
    assert_eq!(v["waiting"][0]["since"], "2026-11-23T09:59:48Z");
    assert_eq!(v["waiting"][1]["position"], 2);
    assert_eq!(v["waiting"][1]["limit"], 2);
    let text = serde_json::to_string(&view.json()).unwrap();
    assert!(!text.contains("-0000-4000"), "never a whole token: {text}");
}

#[test]
fn a_split_shows_each_node_and_no_holder() {
    use super::fixtures::{agreed, holding, split};
    let name = LockName::new("distlock:", "sp");
    let held_on = |token: &str, fence| Ok(holding(vec![held(token, fence, 11, "n", 5)]));
    let survey = split(vec![
        (
            "redis://a:6379",
            held_on("3f2a9c1e-0000-4000-8000-000000000001", 7),
        ),
        ("redis://b:6379", Ok(LockState::default())),
        ("redis://c:6379", Err("cannot connect\x1b[2J".into())),
    ]);
    let view = View::surveyed(&name, &survey, now());
    let text = view.text();
    assert!(
        text.starts_with("lock \"sp\" is split: no holder has a majority of the 3 nodes"),
        "{text}"
    );
    assert!(
        text.contains("\n  node redis://a:6379: 3f2a9c1e held by ci-7 pid 11"),
        "{text}"
    );
    assert!(text.contains("\n  node redis://b:6379: free\n"), "{text}");
    assert!(
        text.contains("\n  node redis://c:6379: no answer (cannot connect"),
        "{text}"
    );
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert_eq!(view.row()[1], "(split)");
    let v = serde_json::to_value(view.json()).unwrap();
    assert_eq!(v["split"], true);
    assert_eq!(v["held"], false);
    assert_eq!(v["nodes"][0]["address"], "redis://a:6379");
    assert_eq!(v["nodes"][0]["fence"], 7);
    assert_eq!(v["nodes"][1]["held"], false);
    assert!(v["nodes"][2]["error"].is_string());
    assert!(v["nodes"][2].get("held").is_none());
    // One server: neither field, as before.
    let single = agreed(LockState::default());
    let v = serde_json::to_value(View::surveyed(&name, &single, now()).json()).unwrap();
    assert!(v.get("split").is_none() && v.get("nodes").is_none(), "{v}");
}

#[test]
fn ids_are_short_unique_and_never_the_whole_token() {
    let ids = |tokens: &[Option<&str>]| short_ids(tokens);
    assert_eq!(
        ids(&[Some("3f2a9c1e-aaaa-aaaa"), Some("9b07d2aa-bbbb-bbbb"), None]),
        [Some("3f2a9c1e".into()), Some("9b07d2aa".into()), None]
    );
    // Two tokens that share their first 8 characters get one more than they share.
    assert_eq!(
        ids(&[
            Some("3f2a9c1e-aa-0000000000"),
            Some("3f2a9c1e-ab-0000000000"),
            Some("77777777-zz-0000000000")
        ]),
        [
            Some("3f2a9c1e-aa".into()),
            Some("3f2a9c1e-ab".into()),
            Some("77777777".into())
        ]
    );
    // Another client's short token: half of it at most; nothing when that is nothing.
    assert_eq!(
        ids(&[Some("py-token")]),
        [Some("py-t".into())],
        "8 characters would be all of it"
    );
    assert_eq!(ids(&[Some("x")]), [None]);
    assert_eq!(ids(&[Some("ééééééééééé-ü")]), [Some("éééééé".into())]);
}

#[test]
fn text_from_redis_cannot_forge_lines() {
    let name = LockName::new("distlock:", "k");
    let mut state = semaphore();
    if let Some(h) = state.holders[0].holder.as_mut() {
        h.note = Some("x\ndistlock: acquired\u{1b}[2J".into());
    }
    if let Some(h) = state.waiters[0].holder.as_mut() {
        h.host = Some("evil\rhost".into());
        h.note = Some("n\u{9b}31m".into());
        h.ci_url = Some("https://ci/\n1".into());
    }
    state.holders[1].token = Some("ab\u{1b}cd\nefgh-ijklmnop".into());
    let text = View::new(&name, &state, now()).text();
    assert_eq!(text.matches('\n').count(), 23, "{text}");
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
}

#[test]
fn a_lock_of_a_newer_protocol_is_named_for_what_it_is() {
    let lock = crate::lock::NewerLock {
        name: LockName::new("distlock:", "v3"),
        protocol: "3".into(),
    };
    let row = newer_row(&lock);
    assert_eq!(row[..5], ["v3", "(protocol 3)", "?", "?", "?"]);
    assert!(
        row[5].starts_with("a lock of protocol 3; this distlock (")
            && row[5].ends_with("speaks protocol 2: upgrade distlock to manage it"),
        "{}",
        row[5]
    );
    let json = serde_json::to_value(newer_json(&lock)).unwrap();
    assert_eq!(json["key"], "v3");
    assert_eq!(json["redis_key"], "distlock:{v3}");
    assert_eq!(json["protocol"], "3");
    assert_eq!(json["error"], row[5]);
    assert_eq!(json.as_object().unwrap().len(), 4, "{json}");
}
