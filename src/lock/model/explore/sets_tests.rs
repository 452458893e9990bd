//! The lock-set configurations (C9, C9c; small bounds in `cargo test`, the full ones
//! `#[ignore]`d and run by `make model-check`) and the mutants of the set client's rules.

use super::sets::*;

/// A set client naming `keys` (indices into `KEYS`, in the order typed): starts at once, its
/// work ends when its first renewal is due, or earlier.
pub fn set(keys: &[usize]) -> SetSpec {
    SetSpec {
        keys: keys.to_vec(),
        start_by: 0,
        early_release: true,
        give_up: false,
        renewals: 0,
    }
}

/// C9: `-k a -k b` and `-k b -k a` (opposite orders) and a single-key run on b holding through
/// one renewal, no faults (default timing: claim 9.2 s, so a set waits long enough on b for
/// its held a to be renewed to the claim).
pub fn c9(horizon_ms: u64) -> SetConfig {
    SetConfig {
        name: "C9 sets",
        clients: vec![
            set(&[0, 1]),
            set(&[1, 0]),
            SetSpec {
                renewals: 1,
                ..set(&[1])
            },
        ],
        ttl_ms: 30_000,
        grace_ms: 5_000,
        timeout_ms: 2_000,
        every_ms: 10_000,
        horizon_ms,
        crashes: 0,
        errors: 0,
        rule: Rule::Real,
        check_cycles: true,
        max_states: 3_000_000,
        sometimes: vec![
            SetSometimes::HeldWhileWaiting,
            SetSometimes::KeptHeld,
            SetSometimes::SetRan,
            SetSometimes::HandOff,
        ],
    }
}

/// C9c: C9 with a crash (of any client, at any instant).
pub fn c9c(horizon_ms: u64) -> SetConfig {
    let mut c = c9(horizon_ms);
    c.name = "C9c sets, a crash";
    c.crashes = 1;
    c.sometimes
        .extend([SetSometimes::CrashedHolding, SetSometimes::FreedAfterCrash]);
    c
}

pub fn run_sets(config: SetConfig) -> SetExplored {
    let bounds = config.bounds();
    match explore_sets(config.clone(), Vec::new()) {
        Ok(explored) => {
            eprintln!(
                "{}: {bounds}: {} states, {} transitions, depth {}, {:.1?}",
                config.name,
                explored.states,
                explored.transitions,
                explored.depth,
                explored.elapsed
            );
            let missing: Vec<_> = config
                .sometimes
                .iter()
                .filter(|s| !explored.reached.contains(s))
                .collect();
            assert!(
                missing.is_empty(),
                "{}: vacuous: never reached {missing:?} (reached {:?})",
                config.name,
                explored.reached
            );
            explored
        }
        Err(cx) => panic!("{}", render_sets(config, &cx)),
    }
}

#[test]
fn c9_small() {
    run_sets(c9(16_000));
}

#[test]
fn c9g_small() {
    run_sets(c9g(16_000));
}

#[test]
fn c9c_small() {
    run_sets(c9c(HORIZON_C9C_SMALL));
}

const HORIZON_C9C_SMALL: u64 = 10_000;

/// A mutant of the set client's rules, the configuration that should catch it, the invariant
/// that should break and in how many steps (the shortest counterexample).
pub struct SetMutant {
    pub id: &'static str,
    pub what: &'static str,
    pub config: fn() -> SetConfig,
    pub killed_by: &'static str,
    pub steps: usize,
}

pub fn set_mutants() -> Vec<SetMutant> {
    vec![
        SetMutant {
            id: "S5",
            what: "a set that takes its keys in the order typed",
            config: || SetConfig {
                rule: Rule::TypedOrder,
                ..c9(16_000)
            },
            killed_by: "no cycle in the wait-for graph",
            steps: 2,
        },
        SetMutant {
            id: "S5'",
            what: "S5 with the wait-for graph unchecked (progress alone)",
            config: || SetConfig {
                rule: Rule::TypedOrder,
                check_cycles: false,
                ..c9(16_000)
            },
            killed_by: "every client ends (no deadlock)",
            steps: 40,
        },
        SetMutant {
            id: "S6",
            what: "a set that does not renew the keys it holds while it waits",
            config: || SetConfig {
                rule: Rule::NoKeepHeld,
                ..c9(16_000)
            },
            killed_by: "a waiting set keeps its earlier keys",
            steps: 21,
        },
        SetMutant {
            id: "S7",
            what: "a set that starts its command with its first key alone",
            config: || SetConfig {
                rule: Rule::StartWithFirst,
                ..c9(16_000)
            },
            killed_by: "a set runs its command only with every key",
            steps: 1,
        },
        SetMutant {
            id: "S8",
            what: "a set that renews the keys it holds while waiting to --ttl, not to the claim",
            config: || SetConfig {
                rule: Rule::KeepHeldToTtl,
                ..c9c(14_000)
            },
            killed_by: "a set killed while waiting frees its keys within the claim",
            steps: 21,
        },
        SetMutant {
            id: "S9",
            what: "giving back that leaves the lines but keeps the keys held",
            config: || SetConfig {
                rule: Rule::GiveBackSkipsHeld,
                ..c9g(16_000)
            },
            killed_by: "a run that gave up leaves nothing behind",
            steps: 6,
        },
        SetMutant {
            id: "S10",
            what: "a set whose sleep after a failed attempt is the error backoff alone, not cut \
                   to a third of the claim while it holds a key",
            config: || SetConfig {
                rule: Rule::ErrorSleepUncapped,
                ..c9e(8_000)
            },
            killed_by: "a waiting set keeps its earlier keys",
            steps: 19,
        },
    ]
}

/// Run one mutant: killed by the expected invariant in the expected number of steps, with a
/// trace that replays.
pub fn check_set_mutant(m: &SetMutant) -> Result<String, String> {
    let config = (m.config)();
    match explore_sets(config.clone(), Vec::new()) {
        Ok(explored) => Err(format!(
            "{} ({}) survived ({} states); expected {:?}",
            m.id, m.what, explored.states, m.killed_by
        )),
        Err(cx) => {
            let trace = render_sets(config.clone(), &cx);
            if cx.violation.invariant != m.killed_by {
                return Err(format!(
                    "{} ({}) was killed by {:?}, expected {:?}:\n{trace}",
                    m.id, m.what, cx.violation.invariant, m.killed_by
                ));
            }
            match replay_sets(config, &cx.trace) {
                Err(v) if v.invariant == m.killed_by => {}
                _ => return Err(format!("{}: the trace does not replay:\n{trace}", m.id)),
            }
            if cx.trace.len() != m.steps {
                return Err(format!(
                    "{} ({}) killed by {:?} in {} steps, expected {}:\n{trace}",
                    m.id,
                    m.what,
                    m.killed_by,
                    cx.trace.len(),
                    m.steps
                ));
            }
            Ok(format!(
                "{} ({}) killed in {} steps by {:?}:\n{trace}",
                m.id,
                m.what,
                cx.trace.len(),
                m.killed_by
            ))
        }
    }
}

#[test]
fn every_set_mutant_is_killed() {
    let mut failures = Vec::new();
    for m in set_mutants() {
        match check_set_mutant(&m) {
            Ok(report) => eprintln!("{report}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// C9s: C9 on the short timing (`--ttl 6s --grace 0 --redis-timeout 500ms --renew-every 2s`:
/// claim 2.1 s, so a waiting set renews its first key every 0.7 s and a hand-off's take-up
/// window, 3 s, is longer than the claim) with a crash.
pub fn c9s(horizon_ms: u64) -> SetConfig {
    SetConfig {
        name: "C9s sets, short timing, a crash",
        ttl_ms: 6_000,
        grace_ms: 0,
        timeout_ms: 500,
        every_ms: 2_000,
        ..c9c(horizon_ms)
    }
}

/// C9g: C9 where `-k b -k a` may give up (its `--wait` running out) at any instant it sleeps in
/// line.
pub fn c9g(horizon_ms: u64) -> SetConfig {
    let mut c = c9(horizon_ms);
    c.name = "C9g sets, a give-up";
    c.clients[1].give_up = true;
    c.sometimes.push(SetSometimes::GaveUpHolding);
    c
}

/// C9e: short timing, `-k a -k b` and a single-key run on b holding through one renewal, and
/// up to 6 failed attempts (b's server unreachable): the sleep after each is cut to a third of
/// the claim while a is held, so a is renewed before it lapses (mutant S10 leaves the cut out).
pub fn c9e(horizon_ms: u64) -> SetConfig {
    SetConfig {
        name: "C9e sets, failing attempts, short timing",
        clients: vec![
            set(&[0, 1]),
            SetSpec {
                renewals: 1,
                ..set(&[1])
            },
        ],
        errors: 6,
        crashes: 0,
        sometimes: vec![SetSometimes::FailedHolding, SetSometimes::KeptHeld],
        ..c9s(horizon_ms)
    }
}

/// C9d: C9e on the default timing (claim 9.2 s, grace 5 s): the error backoff (at most 5 s)
/// stays under two thirds of the claim, and the held key is renewed in time.
pub fn c9d(horizon_ms: u64) -> SetConfig {
    SetConfig {
        name: "C9d sets, failing attempts",
        ttl_ms: 30_000,
        grace_ms: 5_000,
        timeout_ms: 2_000,
        every_ms: 10_000,
        errors: 8,
        ..c9e(horizon_ms)
    }
}

/// C10: four clients, two of them starting at any instant up to 2 s: `-k a -k b`, `-k b -k a`
/// (late), a single-key run on b holding through one renewal, and one on a (late).
pub fn c10(horizon_ms: u64) -> SetConfig {
    SetConfig {
        name: "C10 sets, four clients, late starts",
        clients: vec![
            set(&[0, 1]),
            SetSpec {
                start_by: 2_000,
                ..set(&[1, 0])
            },
            SetSpec {
                renewals: 1,
                ..set(&[1])
            },
            SetSpec {
                start_by: 2_000,
                ..set(&[0])
            },
        ],
        ..c9(horizon_ms)
    }
}

// The full bounds (`make model-check`, an optimized build).

#[test]
#[ignore = "full bounds: make model-check"]
fn c9_full() {
    run_sets(c9(30_000));
}

#[test]
#[ignore = "full bounds: make model-check"]
fn c9c_full() {
    run_sets(c9c(20_000));
}

#[test]
#[ignore = "full bounds: make model-check"]
fn c9s_full() {
    run_sets(c9s(8_000));
}

#[test]
#[ignore = "full bounds: make model-check"]
fn c10_full() {
    run_sets(c10(30_000));
}

#[test]
#[ignore = "full bounds: make model-check"]
fn c9g_full() {
    run_sets(c9g(30_000));
}

/// C9e: failed attempts while a key is held, on the short timing: the sleep after each is cut
/// to a third of the claim (`Waiter::sleep` and `look_again_within`), so the held key is
/// renewed in time (without the cut: mutant S10).
#[test]
fn c9e_small() {
    run_sets(c9e(8_000));
}

#[test]
#[ignore = "full bounds: make model-check"]
fn c9d_full() {
    run_sets(c9d(25_000));
}
