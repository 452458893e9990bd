use std::time::Duration;

use super::*;
use crate::lock::{CoolDown, HeldBy, Holder, HolderTtl, Waiting};

fn held(host: &str, held_for_ms: u64, warn_after: Option<u64>) -> HeldBy {
    HeldBy {
        ttl: HolderTtl::Expires(Duration::from_secs(20)),
        holder: Some(Box::new(Holder {
            host: Some(host.into()),
            kind: Some("run".into()),
            ..Holder::default()
        })),
        held_for: Some(Duration::from_millis(held_for_ms)),
        token: None,
        fence: None,
        slot: None,
        cooldown: None,
        warn_after: warn_after.map(Duration::from_millis),
    }
}

fn survey(holders: Vec<HeldBy>, limit: u32, waited_ms: &[u64]) -> Survey {
    Survey {
        agreed: Some(LockState {
            holders,
            limit,
            waiters: (waited_ms.iter())
                .map(|ms| Waiting {
                    holder: None,
                    waited: Some(Duration::from_millis(*ms)),
                    limit,
                })
                .collect(),
            now_ms: 1_764_300_000_500,
        }),
        nodes: Vec::new(),
    }
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape("a\\b\"c\nd é"), "a\\\\b\\\"c\\nd é");
    let labels = [("redis".to_owned(), "pr\"od\n\\".to_owned())];
    let text = render(&labels, None, false);
    assert_eq!(
        text,
        "# HELP distlock_up Whether Redis answered (a Redlock: a majority of its nodes).\n\
         # TYPE distlock_up gauge\n\
         distlock_up{redis=\"pr\\\"od\\n\\\\\"} 0\n"
    );
    let name = LockName::new("distlock:", "we\"ird\nkey\\");
    let free = survey(Vec::new(), 0, &[]);
    let lock = Lock {
        name: &name,
        survey: &free,
        counts: None,
    };
    let text = render(&[], Some(&[lock]), false);
    assert!(
        text.contains("distlock_lock_holders{key=\"we\\\"ird\\nkey\\\\\"} 0\n"),
        "{text}"
    );
    assert!(text.starts_with("# HELP distlock_up "), "{text}");
    assert!(text.contains("\ndistlock_up 1\n"), "{text}");
}

#[test]
fn timestamps_histograms_and_the_order_are_fixed() {
    let (a, b) = (
        LockName::new("distlock:", "b-semaphore"),
        LockName::new("distlock:", "a-mutex"),
    );
    let mut cooling = held("old", 9_000_000, None);
    cooling.cooldown = Some(CoolDown {
        ended_ago: Duration::from_secs(1),
        min_interval: None,
        cooldown: Some(Duration::from_secs(60)),
    });
    let sem = survey(
        vec![
            held("web-2", 1_000, None),
            held("web-1", 60_250, Some(1_800_000)),
            held("web-1", 5_000, None),
        ],
        4,
        &[10_000, 30_000],
    );
    let mutex = survey(vec![cooling], 1, &[]);
    let mut counts = Counts::default();
    counts.events[0] = 1002;
    counts.wait.buckets[0] = 1000;
    counts.wait.buckets[9] = 2;
    counts.wait.sum_ms = 172_801_500;
    counts.last_ok_ms = 1_764_299_000_000;
    let locks = [
        Lock {
            name: &a,
            survey: &sem,
            counts: None,
        },
        Lock {
            name: &b,
            survey: &mutex,
            counts: Some(counts),
        },
    ];
    let text = render(&[("redis".into(), "prod".into())], Some(&locks), false);
    assert_eq!(
        text,
        render(&[("redis".into(), "prod".into())], Some(&locks), false)
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let expected = [
        "distlock_up{redis=\"prod\"} 1",
        // A mutex kept taken after a run that succeeded holds nothing.
        "distlock_lock_holders{redis=\"prod\",key=\"a-mutex\"} 0",
        "distlock_lock_holders{redis=\"prod\",key=\"b-semaphore\"} 3",
        "distlock_lock_limit{redis=\"prod\",key=\"a-mutex\"} 1",
        "distlock_lock_limit{redis=\"prod\",key=\"b-semaphore\"} 4",
        "distlock_lock_waiters{redis=\"prod\",key=\"a-mutex\"} 0",
        "distlock_lock_waiters{redis=\"prod\",key=\"b-semaphore\"} 2",
        "distlock_lock_acquired_timestamp_seconds{redis=\"prod\",key=\"b-semaphore\"} 1764299940.25",
        "distlock_lock_oldest_wait_timestamp_seconds{redis=\"prod\",key=\"b-semaphore\"} 1764299970.5",
        "distlock_lock_warn_after_seconds{redis=\"prod\",key=\"b-semaphore\"} 1800",
        "distlock_lock_holder_info{redis=\"prod\",key=\"b-semaphore\",host=\"web-1\",kind=\"run\"} 1",
        "distlock_lock_holder_info{redis=\"prod\",key=\"b-semaphore\",host=\"web-2\",kind=\"run\"} 1",
        "distlock_events_total{redis=\"prod\",key=\"a-mutex\",event=\"acquired\"} 1002",
        "distlock_events_total{redis=\"prod\",key=\"a-mutex\",event=\"broken\"} 0",
    ];
    assert_eq!(&lines[..expected.len()], expected, "{text}");
    for line in [
        "distlock_wait_seconds_bucket{redis=\"prod\",key=\"a-mutex\",le=\"0.1\"} 1000",
        "distlock_wait_seconds_bucket{redis=\"prod\",key=\"a-mutex\",le=\"86400\"} 1000",
        "distlock_wait_seconds_bucket{redis=\"prod\",key=\"a-mutex\",le=\"+Inf\"} 1002",
        "distlock_wait_seconds_sum{redis=\"prod\",key=\"a-mutex\"} 172801.5",
        "distlock_wait_seconds_count{redis=\"prod\",key=\"a-mutex\"} 1002",
        "distlock_hold_seconds_count{redis=\"prod\",key=\"a-mutex\"} 0",
        "distlock_last_success_timestamp_seconds{redis=\"prod\",key=\"a-mutex\"} 1764299000",
    ] {
        assert!(lines.contains(&line), "{line} in\n{text}");
    }
    for family in ["distlock_events_total", "distlock_wait_seconds"] {
        let kind = if family.ends_with("total") {
            "counter"
        } else {
            "histogram"
        };
        assert!(
            text.contains(&format!("\n# TYPE {family} {kind}\n")),
            "{text}"
        );
    }
    assert!(!text.contains("split"), "{text}");
    let text = render(&[], Some(&locks), true);
    assert!(
        text.contains("\ndistlock_lock_split{key=\"a-mutex\"} 0\n"),
        "{text}"
    );
}

#[test]
fn the_file_is_replaced_whole_and_readable() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("distlock-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("distlock.prom");
    std::fs::write(&path, "old").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    write_atomically(&path, b"new\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644);
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1);
    assert!(write_atomically(&dir.join("missing/x.prom"), b"").is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
