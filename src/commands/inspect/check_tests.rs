use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::lock::{HeldBy, Holder, HolderTtl, LockState, Waiting};

use super::super::view::fixtures::{agreed, split};

fn holder(host: &str, pid: u32, note: &str) -> Box<Holder> {
    Box::new(Holder {
        host: Some(host.into()),
        pid: Some(pid),
        user: None,
        command: Some("./deploy.sh".into()),
        kind: Some("run".into()),
        version: None,
        ci_url: None,
        note: Some(note.into()),
        warn_after_ms: None,
        set: None,
    })
}

fn held(secs: u64) -> HeldBy {
    HeldBy {
        ttl: HolderTtl::Expires(Duration::from_secs(20)),
        holder: Some(holder("web-3", 8812, "deploy v42")),
        held_for: Some(Duration::from_secs(secs)),
        token: Some("5f0c2a91aaaaaaaaaaaa".into()),
        fence: Some(1),
        slot: None,
        cooldown: None,
        warn_after: None,
    }
}

fn waiting(secs: u64) -> Waiting {
    Waiting {
        holder: Some(holder("ci-7", 17, "next")),
        waited: Some(Duration::from_secs(secs)),
        limit: 1,
    }
}

fn lock(holders: Vec<HeldBy>, waiters: Vec<Waiting>) -> Survey {
    agreed(LockState {
        limit: if holders.is_empty() { 0 } else { 1 },
        holders,
        waiters,
        now_ms: 0,
    })
}

fn limits() -> Limits {
    Limits {
        warn_held: Some(Duration::from_secs(1800)),
        crit_held: Some(Duration::from_secs(3600)),
        warn_wait: Some(Duration::from_secs(600)),
        crit_wait: None,
        crit_since_success: None,
    }
}

fn name() -> LockName {
    LockName::new("distlock", "deploy-prod")
}

#[test]
fn the_line_of_the_design_note() {
    let survey = lock(vec![held(2823)], vec![waiting(720), waiting(30)]);
    let (state, line) = judge(&name(), &survey, None, &limits(), 0);
    assert_eq!(state, Plugin::Warning);
    assert_eq!(
        line,
        "DISTLOCK WARNING: lock \"deploy-prod\" held 47m 3s by web-3 pid 8812 (deploy v42) \
         (over -w 30m); 2 waiting, oldest 12m (over --warn-wait 10m) \
         | held=2823s;1800;3600;0 holders=1;;;0;1 waiters=2;;;0 oldest_wait=720s;600;;0"
    );
}

#[test]
fn states_follow_the_thresholds() {
    let judge_ = |survey: &Survey, limits: &Limits| judge(&name(), survey, None, limits, 0).0;
    assert_eq!(judge_(&lock(vec![], vec![]), &limits()), Plugin::Ok);
    assert_eq!(
        judge_(&lock(vec![held(1800)], vec![]), &limits()),
        Plugin::Ok
    );
    assert_eq!(
        judge_(&lock(vec![held(1801)], vec![]), &limits()),
        Plugin::Warning
    );
    assert_eq!(
        judge_(&lock(vec![held(3601)], vec![]), &limits()),
        Plugin::Critical
    );
    let crit_wait = Limits {
        crit_wait: Some(Duration::from_secs(60)),
        ..limits()
    };
    assert_eq!(
        judge_(&lock(vec![held(1)], vec![waiting(61)]), &crit_wait),
        Plugin::Critical
    );
    // No thresholds: anything that could be read is OK.
    assert_eq!(
        judge_(
            &lock(vec![held(99_999)], vec![waiting(99_999)]),
            &Limits::default()
        ),
        Plugin::Ok
    );
    // A split Redlock is a warning.
    let (state, line) = judge(&name(), &split(vec![]), None, &Limits::default(), 0);
    assert_eq!(state, Plugin::Warning);
    assert!(line.contains("split"), "{line}");
}

#[test]
fn a_free_lock_and_a_cool_down_hold_nothing() {
    let (state, line) = judge(&name(), &lock(vec![], vec![]), None, &limits(), 0);
    assert_eq!(state, Plugin::Ok);
    assert_eq!(
        line,
        "DISTLOCK OK: lock \"deploy-prod\" is free \
         | held=0s;1800;3600;0 holders=0;;;0;1 waiters=0;;;0 oldest_wait=0s;600;;0"
    );
    let mut cooling = held(99_999);
    cooling.cooldown = Some(crate::lock::CoolDown {
        ended_ago: Duration::from_secs(5),
        min_interval: None,
        cooldown: Some(Duration::from_secs(60)),
    });
    let (state, line) = judge(&name(), &lock(vec![cooling], vec![]), None, &limits(), 0);
    assert_eq!(state, Plugin::Ok, "{line}");
    assert!(
        line.contains("kept taken after a run that succeeded"),
        "{line}"
    );
}

#[test]
fn notes_cannot_forge_performance_data_or_lines() {
    let mut h = held(5);
    h.holder = Some(holder("web|3", 1, "x | evil=1\nDISTLOCK OK"));
    let (_, line) = judge(&name(), &lock(vec![h], vec![]), None, &limits(), 0);
    assert_eq!(line.matches('|').count(), 1, "{line}");
    assert!(!line.contains('\n'), "{line}");
    assert!(unknown_line("a | b\nc").matches('|').count() == 0);
}

fn event(at_ms: u64, kind: &str, outcome: Option<&str>) -> Event {
    let mut fields = BTreeMap::new();
    if let Some(o) = outcome {
        fields.insert("outcome".to_owned(), o.to_owned());
    }
    Event {
        at_ms,
        id: format!("{at_ms}-0"),
        kind: kind.into(),
        key: "deploy-prod".into(),
        fields,
        recorded_by: None,
        last_at_ms: None,
    }
}

#[test]
fn successes_are_runs_that_exited_0_and_plain_releases() {
    assert_eq!(successes(&[]), Successes::NoHistory);
    let events = [
        event(1000, "acquired", None),
        event(2000, "released", Some("exit 0")),
        event(3000, "released", Some("exit 1")),
        event(4000, "released", Some("failed")),
        event(5000, "lost", None),
    ];
    assert_eq!(successes(&events), Successes::Last { at_ms: 2000 });
    assert_eq!(successes(&events[2..]), Successes::None { since_ms: 3000 });
    assert_eq!(
        successes(&[event(7000, "released", None)]),
        Successes::Last { at_ms: 7000 }
    );
}

#[test]
fn since_success_is_critical_when_stale_and_unknown_without_history() {
    let l = Limits {
        crit_since_success: Some(Duration::from_secs(3600)),
        ..Limits::default()
    };
    let free = lock(vec![], vec![]);
    let now = 10_000_000;
    let at = |ago_s: u64| {
        Some(Successes::Last {
            at_ms: now - ago_s * 1000,
        })
    };
    let (state, line) = judge(&name(), &free, at(60), &l, now);
    assert_eq!(state, Plugin::Ok);
    assert!(line.ends_with(" since_success=60s;;3600;0"), "{line}");
    assert_eq!(judge(&name(), &free, at(3601), &l, now).0, Plugin::Critical);
    let none = Some(Successes::None {
        since_ms: now - 5000,
    });
    assert_eq!(judge(&name(), &free, none, &l, now).0, Plugin::Critical);
    let (state, line) = judge(&name(), &free, Some(Successes::NoHistory), &l, now);
    assert_eq!(state, Plugin::Unknown);
    assert!(line.starts_with("DISTLOCK UNKNOWN: "), "{line}");
    // UNKNOWN wins over a crossed threshold: the check could not judge everything.
    let (state, _) = judge(
        &name(),
        &lock(vec![held(99_999)], vec![]),
        Some(Successes::NoHistory),
        &Limits {
            crit_held: Some(Duration::from_secs(1)),
            ..l
        },
        now,
    );
    assert_eq!(state, Plugin::Unknown);
}

#[test]
fn seconds_keep_milliseconds_without_trailing_zeros() {
    assert_eq!(secs(Duration::from_millis(2_823_100)), "2823.1");
    assert_eq!(secs(Duration::ZERO), "0");
    assert_eq!(secs(Duration::from_millis(5)), "0.005");
    assert_eq!(perf("a", "1", ["", "", "0", ""]), "a=1;;;0");
    assert_eq!(perf("a", "1", ["", "", "", ""]), "a=1");
}

/// Another client's lock (no distlock metadata) does not say when it was taken: held, never
/// over a threshold.
#[test]
fn a_strangers_lock_is_held_without_an_age() {
    let mut h = held(0);
    h.holder = None;
    h.held_for = None;
    let (state, line) = judge(&name(), &lock(vec![h], vec![]), None, &limits(), 0);
    assert_eq!(state, Plugin::Ok);
    assert!(
        line.starts_with(
            "DISTLOCK OK: lock \"deploy-prod\" held by another client (since when, it does not say) | held=0s;"
        ),
        "{line}"
    );
}
