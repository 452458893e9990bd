use std::collections::BTreeMap;

use super::*;

const H: u64 = 3_600_000;
const M: u64 = 60_000;

/// 2026-11-24T03:00:00Z.
fn t0() -> u64 {
    crate::history::time::parse_rfc3339("2026-11-24T03:00:00Z").unwrap()
}

fn ev(at_ms: u64, kind: &str, host: &str, token: &str, fields: &[(&str, u64)]) -> Event {
    let mut map: BTreeMap<String, String> = fields
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.to_string()))
        .collect();
    map.insert("host".into(), host.into());
    map.insert("token".into(), token.into());
    Event {
        at_ms,
        id: format!("{at_ms}-0"),
        kind: kind.into(),
        key: "deploy-prod".into(),
        fields: map,
        recorded_by: None,
        last_at_ms: None,
    }
}

/// A day of `deploy-prod`: web-3 holds and releases, waits and loses its lock; ci-7 waits,
/// holds, is broken, then vanishes (expired); web-3 holds at the end, still.
fn day() -> Vec<Event> {
    let t = t0();
    let mut e = vec![
        ev(t + 30 * M, "acquired", "web-3", "a1", &[("waited_ms", 0)]),
        ev(
            t + 2 * H + 30 * M,
            "released",
            "web-3",
            "a1",
            &[("held_ms", 2 * H)],
        ),
        ev(t + 4 * H, "acquired", "ci-7", "b1", &[("waited_ms", H)]),
        ev(t + 7 * H, "broken", "ci-7", "b1", &[("held_ms", 3 * H)]),
        ev(
            t + 8 * H,
            "acquired",
            "web-3",
            "a2",
            &[("waited_ms", 2 * H)],
        ),
        ev(t + 11 * H, "lost", "web-3", "a2", &[("held_ms", 3 * H)]),
        ev(t + 13 * H, "gave-up", "web-5", "c1", &[("waited_ms", H)]),
        ev(t + 14 * H, "acquired", "ci-7", "b2", &[("waited_ms", 0)]),
        ev(t + 17 * H, "expired", "ci-7", "b2", &[("held_ms", 3 * H)]),
        ev(t + 21 * H, "acquired", "web-3", "a3", &[("waited_ms", 0)]),
    ];
    e[5].fields.insert("why".into(), "renewals failed".into());
    e
}

fn frame(width: usize, glyphs: Glyphs) -> Frame {
    Frame {
        key: "deploy-prod".into(),
        from_ms: t0(),
        to_ms: t0() + 24 * H,
        width,
        glyphs,
    }
}

#[test]
fn golden_unicode_80() {
    let text = render(&day(), &frame(80, Glyphs::Unicode));
    assert_eq!(text, GOLDEN_UNICODE_80, "\n{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

#[test]
fn golden_ascii_60() {
    let text = render(&day(), &frame(60, Glyphs::Ascii));
    assert_eq!(text, GOLDEN_ASCII_60, "\n{text}");
    assert!(text.is_ascii(), "{text}");
    assert!(text.lines().all(|l| l.len() <= 60), "{text}");
}

const GOLDEN_UNICODE_80: &str = concat!(
    "\"deploy-prod\"  2026-11-24 03:00 → 2026-11-25 03:00 UTC  (one column = 19m 43s)\n",
    "ci-7            ░░░█████████!                    ▓▓▓▓▓▓▓▓▓▓\n",
    "web-3   ███████          ░░░░░░█████████x                             ██████████\n",
    "web-5                                      ░░░░\n",
    "       |03:00   |06:00   |09:00   |12:00   |15:00   |18:00   |21:00   |00:00\n",
    "█ held  ░ waiting  x lost  ! broken  ▓ held at most (expired)\n",
);
const GOLDEN_ASCII_60: &str = concat!(
    "\"deploy-prod\"  2026-11-24 03:00 -> 2026-11-25 03:00 UTC\n",
    "(one column = 27m 10s)\n",
    "ci-7         ..#######!              ++++++++\n",
    "web-3   #####       ....#######x                     #######\n",
    "web-5                            ...\n",
    "             |06:00       |12:00        |18:00       |00:00\n",
    "# held  . waiting  x lost  ! broken\n",
    "+ held at most (expired)\n",
);

/// A hold its holder reported lost after the next taker had recorded it expired is drawn
/// once, as lost; a hand-off never taken up is no hold.
#[test]
fn a_hold_recorded_twice_is_drawn_once_as_lost() {
    let t = t0();
    let mut lost = ev(t + 6 * H, "lost", "web-3", "a1", &[("held_ms", 2 * H)]);
    lost.fields.insert("expired".into(), "1".into());
    let mut untaken = ev(t + 20 * H, "expired", "ci-9", "z1", &[("held_ms", 3 * H)]);
    untaken.fields.insert("why".into(), NOT_TAKEN_UP.into());
    let events = [
        ev(t + 4 * H, "acquired", "web-3", "a1", &[]),
        ev(t + 5 * H, "expired", "web-3", "a1", &[("held_ms", H)]),
        lost,
        untaken,
    ];
    let text = render(&events, &frame(56, Glyphs::Ascii));
    assert_eq!(
        text,
        concat!(
            "\"deploy-prod\"  2026-11-24 03:00 -> 2026-11-25 03:00 UTC\n",
            "(one column = 29m 23s)\n",
            "web-3          ####x\n",
            "             |06:00      |12:00      |18:00      |00:00\n",
            "# held  . waiting  x lost  ! broken\n",
            "+ held at most (expired)\n",
        ),
        "\n{text}"
    );
}

/// Past 12 hosts, the least busy share a lane, "others (N)"; every line fits the width.
#[test]
fn many_hosts_share_an_others_lane() {
    let t = t0();
    let events: Vec<Event> = (0..15u64)
        .flat_map(|i| {
            let host = format!("host-{i:02}");
            let token = format!("t{i}");
            // host-00 holds longest, host-14 shortest.
            [
                ev(t + i * H, "acquired", &host, &token, &[]),
                ev(
                    t + i * H + (15 - i) * 10 * M,
                    "released",
                    &host,
                    &token,
                    &[("held_ms", (15 - i) * 10 * M)],
                ),
            ]
        })
        .collect();
    let text = render(&events, &frame(72, Glyphs::Unicode));
    let labels: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            l.split("  ")
                .next()
                .filter(|w| w.starts_with("host") || w.starts_with("others"))
        })
        .collect();
    assert_eq!(labels.len(), MAX_LANES, "{text}");
    assert!(
        labels.contains(&"host-00") && !labels.iter().any(|l| l.starts_with("host-14")),
        "{text}"
    );
    assert_eq!(labels.last(), Some(&"others (4)"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 72), "{text}");
}

/// Spans outside the frame are cut at its edges; an empty frame says so.
#[test]
fn spans_are_cut_at_the_frame_and_an_empty_frame_says_so() {
    let t = t0();
    let events = [
        ev(t - 2 * H, "acquired", "web-3", "a1", &[]),
        ev(t + H, "released", "web-3", "a1", &[("held_ms", 3 * H)]),
    ];
    let text = render(&events, &frame(40, Glyphs::Ascii));
    let lane = text.lines().find(|l| l.starts_with("web-3")).unwrap();
    assert!(lane.starts_with("web-3  ##") && lane.len() < 12, "{text}");
    let text = render(&[], &frame(40, Glyphs::Ascii));
    assert!(text.contains("nothing held or waited for"), "{text}");
}

#[test]
fn the_locale_decides_unicode() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    assert!(unicode_locale(env(&[("LANG", "en_US.UTF-8")])));
    assert!(unicode_locale(env(&[
        ("LC_CTYPE", "C.utf8"),
        ("LANG", "C")
    ])));
    assert!(!unicode_locale(env(&[
        ("LC_ALL", "C"),
        ("LANG", "en_US.UTF-8")
    ])));
    assert!(unicode_locale(env(&[
        ("LC_ALL", ""),
        ("LANG", "de_DE.UTF-8")
    ])));
    assert!(!unicode_locale(env(&[])));
    assert!(!unicode_locale(env(&[("LANG", "POSIX")])));
}

/// A broken holder reports its loss afterwards: drawn once, as broken.
#[test]
fn a_broken_hold_reported_lost_stays_broken() {
    let t = t0();
    let events = [
        ev(t + 4 * H, "acquired", "web-3", "a1", &[]),
        ev(t + 6 * H, "broken", "web-3", "a1", &[("held_ms", 2 * H)]),
        ev(
            t + 6 * H + M,
            "lost",
            "web-3",
            "a1",
            &[("held_ms", 2 * H + M)],
        ),
    ];
    let text = render(&events, &frame(60, Glyphs::Ascii));
    let lane = text.lines().find(|l| l.starts_with("web-3")).unwrap();
    assert!(lane.ends_with("#!") && !lane.contains('x'), "{text}");
}

/// In ASCII, what the history holds (a host name, the key) is ASCII too.
#[test]
fn ascii_charts_stay_ascii_whatever_the_host_names() {
    let t = t0();
    let events = [
        ev(t + 4 * H, "acquired", "büro-1", "a1", &[]),
        ev(t + 6 * H, "released", "büro-1", "a1", &[("held_ms", 2 * H)]),
    ];
    let mut f = frame(60, Glyphs::Ascii);
    f.key = "déploiement".into();
    let text = render(&events, &f);
    assert!(text.is_ascii(), "{text}");
    assert!(
        text.starts_with("\"d?ploiement\"") && text.contains("\nb?ro-1  "),
        "{text}"
    );
    let text = render(&events, &frame(60, Glyphs::Unicode));
    assert!(text.contains("\nbüro-1  "), "{text}");
}
