//! The checker: from the critical sections' log, the runs' records, the monitor's samples and
//! the faults as executed, all timed on one clock (CLOCK_MONOTONIC), prove that the safety
//! contract held. One method per invariant, each with its rationale in its doc comment;
//! [`Checker::check`] runs them all and returns the violations (each with the runs involved,
//! described) and notes (figures for the summary). Nothing here waits or touches a process.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::faults::Restart;
use super::monitor::Sample;
use super::plan::{self, Form, KEYS, WaitKind};
use super::{MS, RunRec, rel};

/// How long a guard may take to kill its group after its distlock died (see
/// [`Checker::no_command_outlives_its_distlock`]).
const GUARD_REACTION: u64 = 100 * MS;

/// One critical section, as its stamps tell it (see `cs.c`).
#[derive(Default, Debug)]
pub(super) struct Section {
    pub(super) token: String,
    /// DISTLOCK_FENCE as the command got it (None: missing or not a number).
    pub(super) fence: Option<u64>,
    pub(super) start: u64,
    /// The latest stamp: the section certainly ran until then.
    pub(super) last: u64,
    pub(super) read: Option<i64>,
    pub(super) pre_write: bool,
    pub(super) wrote: Option<i64>,
    pub(super) ended: bool,
}

/// The sections in the log, by run id.
pub(super) fn parse_log(text: &str) -> HashMap<String, Section> {
    let mut sections: HashMap<String, Section> = HashMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(ns), Some(id), Some(kind)) = (f.next(), f.next(), f.next()) else {
            panic!("bad log line {line:?}");
        };
        let ns: u64 = ns.parse().unwrap();
        let s = sections.entry(id.to_owned()).or_default();
        s.last = s.last.max(ns);
        match kind {
            "S" => {
                s.start = ns;
                let _pid = f.next();
                let _pgid = f.next();
                s.token = f.next().unwrap_or("-").to_owned();
                s.fence = f.next().and_then(|v| v.parse().ok());
            }
            "R" => s.read = f.next().and_then(|v| v.parse().ok()),
            "P" => s.pre_write = true,
            "W" => s.wrote = f.next().and_then(|v| v.parse().ok()),
            "E" => s.ended = true,
            _ => {}
        }
    }
    sections
}

/// What the run left behind, as found once every loop had stopped (the bounded waits for it
/// are the orchestration's).
pub(super) struct Leftovers {
    /// Processes carrying the run's marker that were still there after the grace (and were
    /// then SIGKILLed): pid and command line.
    pub(super) orphans: Vec<(i32, String)>,
    /// Lines (`P{K}:queue`) still in Redis when the wait for keys ended, described with how
    /// many wait in them and their PTTL.
    pub(super) lines: Vec<String>,
    /// The other keys still in Redis (but the fence counters) then, each with its PTTL.
    pub(super) keys: Vec<String>,
    /// How long after every loop had stopped the wait for keys ended.
    pub(super) keys_after: String,
}

/// Everything the checker looks at.
pub(super) struct Evidence<'a> {
    pub(super) t0: u64,
    pub(super) runs: &'a [RunRec],
    pub(super) sections: &'a HashMap<String, Section>,
    pub(super) restarts: &'a [Restart],
    /// (start, end) of every server fault: stop, pause or restart.
    pub(super) outages: &'a [(u64, u64)],
    /// Per server (a Redlock's nodes, in order), the monitor's samples of it.
    pub(super) samples: &'a [Vec<Sample>],
    /// How many servers make a majority (1 of 1; 3 of a Redlock's 5).
    pub(super) quorum: usize,
    /// The counters' final values, per key (None: the semaphore, whose sections only stamp).
    pub(super) counters: &'a [Option<i64>],
    pub(super) leftovers: Leftovers,
}

/// What the checker found.
pub(super) struct Verdict {
    pub(super) violations: Vec<String>,
    pub(super) notes: Vec<String>,
}

pub(super) struct Checker<'a> {
    t0: u64,
    runs: HashMap<&'a str, &'a RunRec>,
    sections: &'a HashMap<String, Section>,
    restarts: &'a [Restart],
    outages: &'a [(u64, u64)],
    samples: &'a [Vec<Sample>],
    quorum: usize,
    counters: &'a [Option<i64>],
    /// Per key, the ids of its sections (those with a start stamp), by start.
    per_key: Vec<Vec<&'a str>>,
    /// Per key, how many overlapping pairs of sections a restart excused.
    excused_pairs: Vec<i64>,
    violations: Vec<String>,
    notes: Vec<String>,
}

impl<'a> Checker<'a> {
    pub(super) fn check(evidence: Evidence<'a>) -> Verdict {
        let Evidence {
            t0,
            runs,
            sections,
            restarts,
            outages,
            samples,
            quorum,
            counters,
            leftovers,
        } = evidence;
        let mut checker = Checker {
            t0,
            runs: runs.iter().map(|r| (r.id.as_str(), r)).collect(),
            sections,
            restarts,
            outages,
            samples,
            quorum,
            counters,
            per_key: vec![Vec::new(); KEYS.len()],
            excused_pairs: vec![0; KEYS.len()],
            violations: Vec::new(),
            notes: Vec::new(),
        };
        checker.no_process_left(&leftovers);
        checker.every_line_empties(&leftovers);
        checker.no_key_left(&leftovers);
        checker.every_section_started();
        checker.mutual_exclusion();
        checker.cool_downs_hold();
        checker.semaphore_limit();
        checker.lost_lock_dead_before_next_holder();
        checker.no_command_outlives_its_distlock();
        checker.runs_only_while_the_key_is_its();
        checker.every_lock_expires();
        checker.redis_never_exceeds_the_limit();
        checker.every_grant_has_a_fence();
        checker.mutex_fences_increase();
        checker.semaphore_fences_unique_and_ordered();
        checker.only_documented_exits();
        checker.stopped_holders_were_ended_by_their_guard();
        checker.no_lost_update();
        checker.note_waits();
        Verdict {
            violations: checker.violations,
            notes: checker.notes,
        }
    }

    /// Whether the sections `x` and `y` are both readers of the shared key (which exclude
    /// nobody but writers).
    fn readers(&self, x: &str, y: &str) -> bool {
        self.runs[x].params.shared && self.runs[y].params.shared
    }

    fn t(&self, t: u64) -> String {
        rel(self.t0, t)
    }

    fn describe(&self, id: &str) -> String {
        let r = self.runs[id];
        let key = &KEYS[r.params.key];
        let mut s = format!(
            "{id}: key {}{} ttl {}ms wait {:?}{}{} form {:?} hold {}ms; spawned {} exited {} ({})",
            key.name,
            match r.params.also {
                Some(also) => format!(" (a set with {})", KEYS[also].name),
                None if key.rw && r.params.shared => " --shared (a reader)".to_owned(),
                None if key.rw => " (a writer)".to_owned(),
                None if key.is_mutex() => String::new(),
                None => format!(" --limit {}", key.limit),
            },
            r.params.ttl_ms,
            r.params.wait,
            if r.params.spin { " spin" } else { "" },
            if r.params.supersede {
                " --supersede"
            } else if r.params.cooldown {
                " --cooldown"
            } else {
                ""
            },
            r.params.form,
            r.params.hold_ms,
            self.t(r.spawned),
            self.t(r.exited),
            r.exit(),
        );
        if let Some(x) = self.sections.get(id) {
            let _ = write!(
                s,
                "; section {}..{} read {:?} wrote {:?}{} token {} fence {}",
                self.t(x.start),
                self.t(x.last),
                x.read,
                x.wrote,
                if x.ended { " ended" } else { "" },
                x.token,
                x.fence.map_or("-".into(), |f| f.to_string())
            );
        }
        if let Some(k) = r.killed_distlock {
            let _ = write!(s, "; distlock SIGKILLed by the test at {}", self.t(k));
            if let Some(place) = &r.killed_in_line {
                let _ = write!(s, " ({place})");
            }
        }
        if let Some(k) = r.killed_child {
            let _ = write!(s, "; command SIGKILLed by the test at {}", self.t(k));
        }
        if let Some(stopped) = r.stopped {
            let _ = write!(
                s,
                "; distlock SIGSTOPped by the test at {}, continued at {}, its group seen dead at {}",
                self.t(stopped),
                r.resumed.map_or("-".into(), |t| self.t(t)),
                r.group_dead.map_or("-".into(), |t| self.t(t))
            );
        }
        if !r.stderr.is_empty() {
            let _ = write!(
                s,
                "\n      stderr: {}",
                r.stderr.trim_end().replace('\n', "\n              ")
            );
        }
        s
    }

    /// The restart that explains an overlap between the section `x` and a section that started
    /// at `y_start`, if any.
    ///
    /// A restart without persistence forgets every lock by design (docs/guarantees.md, "Not
    /// guaranteed"). The overlap it allows, and nothing more: `x`'s lock was taken from the old
    /// server (its distlock was started before that server was dead), the other section started
    /// after the old server was dead (so its lock came from the new one), and `x` ended within
    /// its TTL of the restart. That last bound is sound: `x`'s last confirmed renewal T was sent
    /// to the old server, so T < `dead`, and distlock SIGKILLs the group at T + ttl - margin at
    /// the latest (a "not held" reply only brings the kill forward); the margin (>= 110ms) covers
    /// the time the SIGKILL takes. (One hole, documented: a lock taken from the old server in
    /// the last instant before the kill whose command started only after the old server was
    /// reaped would be excused too; that needs a real bug to coincide with a restart within a
    /// millisecond.)
    fn restart_excuse(&self, x_id: &str, x: &Section, y_start: u64) -> Option<&'a Restart> {
        let xr = self.runs[x_id];
        let ttl = xr.params.ttl_ms * MS;
        self.restarts
            .iter()
            .find(|r| xr.spawned < r.dead && y_start > r.from && x.last <= r.dead + ttl)
    }

    /// [`Checker::restart_excuse`] for two sections the other way round, when the later one,
    /// `y`, is a lock set's: a set takes its keys one at a time and starts its command only
    /// with the last, so a key it took from the old server may start a command after the
    /// restart (one seen in CI: `-k chaos-c -k chaos-b` held b, waited 0.5 s for c across a
    /// restart, started 36 ms after a single-key run that had b from the new server). Excused
    /// only if `y`'s token on key `k` never showed on the new server (no sample read after it
    /// was up holds it there): its key came from the old one. As for one key, it must end
    /// within its TTL of the restart.
    fn set_restart_excuse(
        &self,
        k: usize,
        y_id: &str,
        y: &Section,
        x_start: u64,
    ) -> Option<&'a Restart> {
        let yr = self.runs[y_id];
        yr.params.also?;
        let r = self.restart_excuse(y_id, y, x_start)?;
        let on_new = self
            .samples
            .iter()
            .flatten()
            .any(|s| s.sent > r.up && s.keys[k].holders.contains(&y.token));
        (!on_new).then_some(r)
    }

    /// No process outlives the run. Every process the test starts (distlock, its guard, sh, the
    /// C program) carries the run's marker in its environment, whatever its parent: one left
    /// after the grace escaped every kill that distlock and its guard promise.
    fn no_process_left(&mut self, leftovers: &Leftovers) {
        for (pid, cmdline) in &leftovers.orphans {
            self.violations.push(format!(
                "ORPHAN: process {pid} ({cmdline}) outlived the run"
            ));
        }
    }

    /// A waiter killed in line does not stall the line: once nobody waits any more, every line
    /// is empty. A dead waiter's place lapses by itself (its lease, on the server's clock, is
    /// no longer refreshed), and a lock handed to it lapses after the take-up window, so the
    /// line's keys expire within the place lease of the last attempt. A line left after that
    /// holds waiters that no live process stands for: the next live waiter would have waited
    /// behind them.
    fn every_line_empties(&mut self, leftovers: &Leftovers) {
        if !leftovers.lines.is_empty() {
            self.violations.push(format!(
                "LINE LEFT {} after all loops stopped (the place lease and take-up window had passed): {}",
                leftovers.keys_after,
                leftovers.lines.join(", ")
            ));
        }
    }

    /// No key outlives its TTL. A key of a SIGKILLed distlock (or one whose release could not
    /// reach the server) was last renewed before every loop stopped, so it expires within the
    /// TTL (a lock handed to a dead waiter: within the take-up window; a line's other keys and
    /// `:superseded`: within the place lease). The fence counters are the one key of a lock
    /// that stays, by design (fences never go back); a key without an expiry would stay
    /// forever.
    fn no_key_left(&mut self, leftovers: &Leftovers) {
        if leftovers.keys.is_empty() && leftovers.lines.is_empty() {
            self.notes.push(format!(
                "every key but the fence counters was gone {} after all loops stopped",
                leftovers.keys_after
            ));
        } else if !leftovers.keys.is_empty() {
            self.violations.push(format!(
                "KEYS LEFT {} after all loops stopped: {}",
                leftovers.keys_after,
                leftovers.keys.join(", ")
            ));
        }
    }

    /// Every section in the log has a start stamp (the C program writes it first, before any
    /// other): the others cannot be placed in time. Sorts the sections per key by start.
    fn every_section_started(&mut self) {
        for (id, x) in self.sections.iter() {
            if x.start == 0 {
                self.violations
                    .push(format!("section {id} logged without a start stamp"));
                continue;
            }
            self.per_key[self.runs[id.as_str()].params.key].push(id.as_str());
        }
        for list in &mut self.per_key {
            list.sort_by_key(|id| self.sections[*id].start);
        }
    }

    /// Mutual exclusion: no two sections on a key overlap, except across a restart (see
    /// [`Checker::restart_excuse`]).
    ///
    /// A section's interval is [S, last stamp]. Both ends are conservative in the right
    /// direction: the command did run at every stamp, so two intervals that intersect prove two
    /// commands ran their critical sections at the same time.
    ///
    /// On the shared key, the same for every pair with a writer in it: readers may overlap
    /// each other, a writer overlaps nobody.
    fn mutual_exclusion(&mut self) {
        for (k, key) in KEYS.iter().enumerate() {
            if !(key.is_mutex() || key.rw) {
                continue;
            }
            let list = &self.per_key[k];
            let mut together = 0;
            for (i, &xi) in list.iter().enumerate() {
                let x = &self.sections[xi];
                for &yi in &list[i + 1..] {
                    let y = &self.sections[yi];
                    if y.start > x.last {
                        break;
                    }
                    if self.readers(xi, yi) {
                        together += 1;
                        continue;
                    }
                    match self
                        .restart_excuse(xi, x, y.start)
                        .or_else(|| self.set_restart_excuse(k, yi, y, x.start))
                    {
                        Some(r) => {
                            self.excused_pairs[k] += 1;
                            self.notes.push(format!(
                                "overlap {xi}/{yi} on {} excused by the {} (lock servable without the old grant from {}, old server dead or demoted at {}, new one up at {}): {xi} ended at {}",
                                key.name,
                                r.what,
                                self.t(r.from),
                                self.t(r.dead),
                                self.t(r.up),
                                self.t(x.last)
                            ));
                        }
                        None => self.violations.push(format!(
                            "OVERLAP on {}: {yi} started at {} while {xi} ran until at least {} ({:.1}ms of overlap)\n    {}\n    {}",
                            key.name,
                            self.t(y.start),
                            self.t(x.last),
                            (x.last - y.start) as f64 / 1e6,
                            self.describe(xi),
                            self.describe(yi)
                        )),
                    }
                }
            }
            if key.rw {
                let readers = list
                    .iter()
                    .filter(|id| self.runs[**id].params.shared)
                    .count();
                self.notes.push(format!(
                    "shared {}: {} sections ({readers} readers, {} writers), {together} pairs of readers ran together",
                    key.name,
                    list.len(),
                    list.len() - readers
                ));
            }
        }
    }

    /// A run with `--cooldown` that succeeded keeps its mutex taken for the cool-down after its
    /// release: no other section of the key starts within [`plan::COOLDOWN_MS`] of its end.
    /// Its last stamp comes before the release, which starts the cool-down on the server's
    /// clock; the stamps and the server read the same machine's clocks (1ms spared for their
    /// ticks). A restart that forgot the lock or the cool-down in between excuses it (a single
    /// server without persistence): one during the section as well as one after it. A release that failed leaves the lock until its TTL, which is longer.
    fn cool_downs_hold(&mut self) {
        let cooldown = plan::COOLDOWN_MS * MS;
        let mut held = 0;
        for (k, key) in KEYS.iter().enumerate() {
            if !key.is_mutex() {
                continue;
            }
            let list = &self.per_key[k];
            for (i, &xi) in list.iter().enumerate() {
                let x = &self.sections[xi];
                let xr = self.runs[xi];
                if !(xr.params.cooldown && xr.code == Some(0) && x.ended) {
                    continue;
                }
                let Some(&yi) = list[i + 1..]
                    .iter()
                    .find(|&&yi| self.sections[yi].start > x.last)
                else {
                    continue;
                };
                let y = &self.sections[yi];
                if y.start + MS >= x.last + cooldown {
                    held += 1;
                    continue;
                }
                // The cool-down is written by x's release, on the server that holds x's lock: a
                // restart after x's start (x was granted by the old server, then released on
                // an empty one, which had nothing of x's to keep taken) or after x's end (the
                // cool-down itself forgotten) excuses it, as the overlap check excuses a
                // section whose lock a restart forgot (`restart_excuse`: after its spawn).
                if self
                    .restarts
                    .iter()
                    .any(|r| xr.spawned < r.dead && r.from < y.start)
                {
                    continue;
                }
                self.violations.push(format!(
                    "COOL-DOWN BROKEN on {}: {yi} started {:.1}ms after {xi} ended, which succeeded with --cooldown {}ms\n    {}\n    {}",
                    key.name,
                    (y.start - x.last) as f64 / 1e6,
                    plan::COOLDOWN_MS,
                    self.describe(xi),
                    self.describe(yi)
                ));
            }
        }
        self.notes.push(format!(
            "cool-downs: {held} next sections started after the cool-down"
        ));
    }

    /// A semaphore of N never has more than N sections running at once: at the start of each
    /// section, the sections whose interval contains that instant (it included) are at most N.
    /// The maximum of overlapping intervals is reached at some start, so checking every start
    /// is enough; intervals are conservative as for the mutex (see
    /// [`Checker::mutual_exclusion`]).
    ///
    /// Outside the restart windows (see [`Checker::restart_split`]). And, as for a mutex's
    /// lost lock (see [`Checker::lost_lock_dead_before_next_holder`]), a holder that lost its
    /// slot (exit 124) counts as running until the upper bound of its whole group's death
    /// ([`RunRec::group_dead_by`]: its distlock seen exiting, or, for a distlock the test
    /// stopped, its group seen without a live process): a slot can pass on only once it expired,
    /// and distlock (or its guard) kills the group before that.
    fn semaphore_limit(&mut self) {
        for (k, key) in KEYS.iter().enumerate() {
            if !key.is_semaphore() {
                continue;
            }
            let limit = key.limit as usize;
            let list = &self.per_key[k];
            let (mut most, mut excused) = (0, 0);
            let mut found = Vec::new();
            for (i, &yi) in list.iter().enumerate() {
                let y = &self.sections[yi];
                let mut running: Vec<&str> = list[..i]
                    .iter()
                    .filter(|x| self.sections[**x].last >= y.start)
                    .copied()
                    .collect();
                running.push(yi);
                most = most.max(running.len());
                let lost: Vec<&str> = list[..i]
                    .iter()
                    .filter(|x| {
                        let r = self.runs[**x];
                        self.sections[**x].last < y.start
                            && r.code == Some(124)
                            && !r.stderr.contains("no longer held")
                            && r.group_dead_by() >= y.start
                    })
                    .copied()
                    .collect();
                if running.len() + lost.len() <= limit {
                    continue;
                }
                let all: Vec<&str> = running.iter().chain(&lost).copied().collect();
                if let Some(r) = self.restart_split(&all, y.start, limit) {
                    excused += 1;
                    self.notes.push(format!(
                        "{} sections at once on {} at {} excused by the {} (from {}, old server dead or demoted at {}, new one up at {}): {}",
                        all.len(),
                        key.name,
                        self.t(y.start),
                        r.what,
                        self.t(r.from),
                        self.t(r.dead),
                        self.t(r.up),
                        all.join(", ")
                    ));
                    continue;
                }
                let what = if running.len() > limit {
                    format!(
                        "OVER THE LIMIT on {}: {} sections ran at once when {yi} started at {} (limit {limit})",
                        key.name,
                        running.len(),
                        self.t(y.start)
                    )
                } else {
                    format!(
                        "LOST SLOT NOT PROVEN DEAD on {}: when {yi} started at {}, {} sections ran and {} holder(s) that had lost their slot were not seen dead yet (limit {limit})",
                        key.name,
                        self.t(y.start),
                        running.len(),
                        lost.len()
                    )
                };
                let runs: Vec<String> = all.iter().map(|id| self.describe(id)).collect();
                found.push(format!("{what}\n    {}", runs.join("\n    ")));
            }
            self.violations.extend(found);
            self.notes.push(format!(
                "semaphore {} (--limit {limit}): {} sections, at most {most} at once{}",
                key.name,
                list.len(),
                if excused > 0 {
                    format!(", {excused} starts over the limit excused by restarts")
                } else {
                    String::new()
                }
            ));
        }
    }

    /// The restart that explains more than `limit` sections running at once (`active`, the
    /// last of which started at `at`), if any: [`Checker::restart_excuse`] generalised to N.
    ///
    /// Each server grants at most `limit` slots, so the sections must split into at most
    /// `limit` whose slot may come from the old server (its distlock was started before that
    /// server was dead, and the section ended within its TTL of that: see the bound at
    /// [`Checker::restart_excuse`]) and at most `limit` whose slot may come from the new one
    /// (the section started after the old server was dead). A section that fits both may go
    /// either way; one that fits neither cannot be excused. (The same hole as for the mutex:
    /// a slot taken from the old server in the last instant before the kill whose command
    /// started only after the old server was reaped.)
    fn restart_split(&self, active: &[&str], at: u64, limit: usize) -> Option<&'a Restart> {
        self.restarts.iter().find(|r| {
            if at <= r.from {
                return false;
            }
            let (mut old, mut new, mut either) = (0, 0, 0);
            for id in active {
                let x = &self.sections[*id];
                let xr = self.runs[*id];
                let may_be_old = xr.spawned < r.dead && x.last <= r.dead + xr.params.ttl_ms * MS;
                let may_be_new = x.start > r.from;
                match (may_be_old, may_be_new) {
                    (true, true) => either += 1,
                    (true, false) => old += 1,
                    (false, true) => new += 1,
                    (false, false) => return false,
                }
            }
            old <= limit && new <= limit && old + new + either <= 2 * limit
        })
    }

    /// A lost lock's command was dead before the lock could pass on.
    ///
    /// Which bound is sound. The command's last stamp is a *lower* bound of its death: a stamp
    /// after a moment proves it ran then, so "last stamp < next holder's first stamp" is the
    /// part of mutual exclusion that can only fail on a real violation, and it is asserted for
    /// every section there. To *prove* the lost holder harmless we need an *upper* bound of the
    /// death of its whole process group (grandchildren do not stamp): distlock's exit as seen by
    /// `waitid`. On a loss distlock exits 124 right after `kill(-group, 0)` fails (no Redis call
    /// in between: it leaves the key alone), and waitid sees the exit after it happened. The
    /// next holder's first stamp comes after its acquire, which comes after the lost lock
    /// expired. So "distlock's exit < next holder's start" proves that nothing of the lost
    /// holder ran once the lock had passed on.
    ///
    /// A distlock that the test SIGSTOPped exits only after its SIGCONT, long after its lock
    /// passed on: there the bound is when the test saw its command's group without a live
    /// process (watched through pidfds and /proc while distlock was stopped; see
    /// [`RunRec::group_dead_by`]). The guard, which holds distlock's deadlines, must have killed
    /// it by then. There is slack by design: distlock SIGKILLs by
    /// T + ttl - margin, the key expires at T + ttl at the earliest (T: send time of the last
    /// confirmed renewal), so at least the margin (>= 110ms; more with SIGTERM's grace) plus
    /// the next acquire's latency; the smallest slack seen is printed.
    ///
    /// Not for the other 124, "no longer held when the command ended": there the command had
    /// ended and its group was empty *before* distlock sent the release, and the release is a
    /// Redis round trip that a stopped or paused server holds up for seconds: distlock's exit
    /// bounds nothing useful, and the stamps (mutual exclusion, and the monitor) carry the
    /// proof.
    fn lost_lock_dead_before_next_holder(&mut self) {
        let mut min_slack: Option<(u64, String)> = None;
        for (k, list) in self.per_key.iter().enumerate() {
            if !(KEYS[k].is_mutex() || KEYS[k].rw) {
                // The semaphore's lost slots: see `semaphore_limit`.
                continue;
            }
            for (i, &xi) in list.iter().enumerate() {
                let xr = self.runs[xi];
                if xr.code != Some(124) || xr.stderr.contains("no longer held") {
                    continue;
                }
                let x = &self.sections[xi];
                // The next section it excludes: on the shared key, a reader excludes only
                // writers.
                let Some(&yi) = list[i + 1..].iter().find(|&&yi| !self.readers(xi, yi)) else {
                    continue;
                };
                let y = &self.sections[yi];
                if self.restart_excuse(xi, x, y.start).is_some()
                    || self.set_restart_excuse(k, yi, y, x.start).is_some()
                {
                    // The lock was forgotten: the next holder may start at once (mutual
                    // exclusion excuses the overlap).
                    continue;
                }
                let dead_by = xr.group_dead_by();
                if dead_by < y.start {
                    let slack = y.start - dead_by;
                    if min_slack.as_ref().is_none_or(|(s, _)| slack < *s) {
                        min_slack = Some((slack, format!("{xi} -> {yi}")));
                    }
                } else {
                    self.violations.push(format!(
                        "LOST LOCK NOT PROVEN DEAD on {}: {xi} lost its lock (exit 124) and its process group was last seen alive (distlock's exit, or the test's watch of a stopped distlock's group) at {}, after {yi} started at {}\n    {}\n    {}",
                        KEYS[k].name,
                        self.t(dead_by),
                        self.t(y.start),
                        self.describe(xi),
                        self.describe(yi)
                    ));
                }
            }
        }
        if let Some((slack, pair)) = min_slack {
            let why = pair
                .split(" -> ")
                .next()
                .and_then(|x| {
                    self.runs[x]
                        .stderr
                        .lines()
                        .find(|l| l.contains("lost lock"))
                })
                .unwrap_or("")
                .to_owned();
            self.notes.push(format!(
                "lost locks: smallest slack between a lost holder's exit and the next holder's start: {:.1}ms ({pair}: {why})",
                slack as f64 / 1e6
            ));
        }
    }

    /// No command outlives its distlock: distlock waits for the whole group before it exits,
    /// and when it is SIGKILLed docs/guarantees.md promises the command dies with it. A stamp
    /// later than distlock's exit (an upper bound, see
    /// [`Checker::lost_lock_dead_before_next_holder`]) proves a process of the command ran with
    /// nobody left to kill it on a loss. The 2ms allow for a SIGKILL queued by the dying
    /// distlock (PR_SET_PDEATHSIG) that has not reached a process running on the other CPU
    /// yet: it can read the (vDSO) clock in that window, but not for milliseconds.
    ///
    /// A grandchild of a distlock that the test SIGKILLed is killed by the guard instead: a
    /// process of its own, which must first be scheduled to read the end of its pipe, then
    /// signal the group. On a loaded machine that takes milliseconds (3-25ms seen beside a
    /// parallel build), so it gets [`GUARD_REACTION`], measured from distlock's death; a
    /// command that nobody killed would stamp every 10ms until its hold ends (up to 800ms, or
    /// longer than its TTL), and that the lock never passed on beside it is mutual exclusion's
    /// to prove. The longest reaction seen is noted.
    fn no_command_outlives_its_distlock(&mut self) {
        let mut slowest_guard: Option<(u64, String)> = None;
        for (id, x) in self.sections.iter() {
            let r = self.runs[id.as_str()];
            let by_the_guard = r.killed_distlock.is_some()
                && !matches!(r.params.form, Form::Direct | Form::StubbornExec);
            if by_the_guard && x.last > r.exited {
                let late = x.last - r.exited;
                if slowest_guard.as_ref().is_none_or(|(ns, _)| late > *ns) {
                    slowest_guard = Some((late, id.clone()));
                }
                if late <= GUARD_REACTION {
                    continue;
                }
            }
            if x.last > r.exited + 2 * MS {
                self.violations.push(format!(
                    "OUTLIVED ITS DISTLOCK on {}: {id}'s command ran until at least {}, {:.1}ms after its distlock exited ({}){}\n    {}",
                    KEYS[r.params.key].name,
                    self.t(x.last),
                    (x.last - r.exited) as f64 / 1e6,
                    r.exit(),
                    if matches!(r.params.form, Form::Direct | Form::StubbornExec) {
                        ""
                    } else {
                        "; the section ran in a grandchild of distlock, which PR_SET_PDEATHSIG does not reach"
                    },
                    self.describe(id)
                ));
            }
        }
        if let Some((ns, id)) = slowest_guard {
            self.notes.push(format!(
                "guard: the slowest kill after a distlock's death left its command {:.1}ms ({id})",
                ns as f64 / 1e6
            ));
        }
    }

    /// A command runs only while the key is its own, as the monitor sees the key: once a sample
    /// sent after a section started shows the key without the section's token (the mutex holds
    /// another token or none; the semaphore has no live slot of that token), the lock was not
    /// the section's any more no later than that sample's answer, and a stamp after that answer
    /// proves the command ran without its lock (outside a restart that forgot it). And a token
    /// never comes back once gone after its command started: renewals never re-create a key or
    /// revive an expired slot.
    ///
    /// Over a Redlock, the lock is the section's while a majority of nodes hold its token, and
    /// one node's view proves nothing: a node that was stopped or paused during the acquire
    /// may apply it late (its request was queued), after the section started and after a
    /// sample had shown the token absent, so a token may come back on one node legitimately,
    /// and there is no RE-CREATED check. What is checked: the token is gone *for good* from a
    /// node at the first sample without it after the last sample with it (a gap of one 20ms
    /// sample cannot hide a grant, which lasts a whole TTL); once that holds on a majority (the
    /// quorum-th such answer), no majority holds it any more, so no renewal can have been
    /// confirmed since (every renewal confirmed later would have needed a majority holding it
    /// when applied), and distlock's kill deadline, anchored at the last confirmed one, has
    /// passed. A stamp after that is a command running without its lock.
    fn runs_only_while_the_key_is_its(&mut self) {
        for (id, x) in self.sections.iter() {
            if x.token == "-" || x.start == 0 {
                continue;
            }
            let r = self.runs[id.as_str()];
            let k = r.params.key;
            let holds = |s: &Sample| s.keys[k].holders.contains(&x.token);
            // Per node, the sample where the token was gone (for good, over a Redlock).
            let mut gone: Vec<&Sample> = Vec::new();
            for samples in self.samples {
                let first_after = samples.partition_point(|s| s.sent < x.start);
                let after = &samples[first_after..];
                let from = if self.samples.len() == 1 {
                    0
                } else {
                    after.iter().rposition(holds).map_or(0, |p| p + 1)
                };
                let Some(j) = after[from..].iter().position(|s| !holds(s)) else {
                    continue;
                };
                let g = &after[from + j];
                // A failover that may lose writes, during the run's life: the new primary
                // may lack the run's release (or its take-up), so its token comes back there
                // (held until it expires, or granted again by the line it had a place in).
                // That is the write loss the window stands for; whether the command ran
                // without its lock is checked below, with the same excuse as for an overlap.
                let lost_by_failover = |back: &Sample| {
                    self.restarts.iter().any(|rs| {
                        rs.what != "restart"
                            && rs.from < back.sent
                            && rs.dead > r.spawned
                            && rs.from < r.exited
                    })
                };
                if let Some(back) = after[from + j..].iter().find(|s| holds(s))
                    && !lost_by_failover(back)
                {
                    self.violations.push(format!(
                        "RE-CREATED: {id}'s token was gone from {} at {} and back at {}\n    {}",
                        KEYS[k].name,
                        self.t(g.recv),
                        self.t(back.sent),
                        self.describe(id)
                    ));
                }
                gone.push(g);
            }
            gone.sort_by_key(|g| g.recv);
            let Some(g) = gone.get(self.quorum - 1) else {
                continue;
            };
            if x.last > g.recv {
                let ttl = r.params.ttl_ms * MS;
                let excused = self.restarts.iter().any(|rs| {
                    rs.kill_sent < g.recv && r.spawned < rs.dead && x.last <= rs.dead + ttl
                });
                if !excused {
                    self.violations.push(format!(
                        "RAN WITHOUT THE LOCK on {}: {} no longer held {id}'s token in the sample answered at {} (holders {:?}{}), but {id} ran until at least {}\n    {}",
                        KEYS[k].name,
                        if self.samples.len() == 1 {
                            "the key".to_owned()
                        } else {
                            format!("a majority of the nodes ({} of {})", self.quorum, self.samples.len())
                        },
                        self.t(g.recv),
                        g.keys[k].holders,
                        if g.from.is_empty() {
                            String::new()
                        } else {
                            format!(", read from {}", g.from)
                        },
                        self.t(x.last),
                        self.describe(id)
                    ));
                }
            }
        }
    }

    /// A held key always has an expiry, and so does a line: a lock, a slot or a place without
    /// one would outlive a crashed holder or waiter. (For a semaphore, `:slots` carries the
    /// expiry of the whole set; each slot's own is its score.)
    fn every_lock_expires(&mut self) {
        for s in self.samples.iter().flatten() {
            for (k, view) in s.keys.iter().enumerate() {
                if !view.holders.is_empty() && view.pttl == -1 {
                    self.violations.push(format!(
                        "NO EXPIRY: {} held by {:?} without a TTL at {}",
                        KEYS[k].name,
                        view.holders,
                        self.t(s.sent)
                    ));
                }
                if view.waiting > 0 && view.line_pttl == -1 {
                    self.violations.push(format!(
                        "NO EXPIRY: the line of {} ({} waiting) had no TTL at {}",
                        KEYS[k].name,
                        view.waiting,
                        self.t(s.sent)
                    ));
                }
            }
        }
        let longest = (0..KEYS.len())
            .map(|k| {
                let most = self
                    .samples
                    .iter()
                    .flatten()
                    .map(|s| s.keys[k].waiting)
                    .max();
                format!("{} {}", KEYS[k].name, most.unwrap_or(0))
            })
            .collect::<Vec<_>>();
        self.notes.push(format!(
            "longest lines seen by the monitor: {}",
            longest.join(", ")
        ));
    }

    /// Redis itself never grants a semaphore more live slots than its limit (nor a mutex more
    /// than one holder): the server's side of [`Checker::semaphore_limit`], on every sample,
    /// with no excuse (each sample is one server's state at one instant).
    /// On the shared key: a writer holds it only alone (no live reader's slot beside it).
    fn redis_never_exceeds_the_limit(&mut self) {
        for s in self.samples.iter().flatten() {
            for (k, view) in s.keys.iter().enumerate() {
                if KEYS[k].rw {
                    if view.writer && view.holders.len() > 1 {
                        self.violations.push(format!(
                            "WRITER NOT ALONE IN REDIS: {} held by a writer and readers at {}: {:?} (the writer first)",
                            KEYS[k].name,
                            self.t(s.sent),
                            view.holders
                        ));
                    }
                    continue;
                }
                if view.holders.len() > KEYS[k].limit as usize {
                    self.violations.push(format!(
                        "OVER THE LIMIT IN REDIS: {} had {} live holders (limit {}) at {}: {:?}",
                        KEYS[k].name,
                        view.holders.len(),
                        KEYS[k].limit,
                        self.t(s.sent),
                        view.holders
                    ));
                }
            }
        }
    }

    /// Every command gets a fence (`DISTLOCK_FENCE`, a positive integer): a resource that
    /// checks fences would refuse a command without one.
    fn every_grant_has_a_fence(&mut self) {
        let mut ids: Vec<&str> = self.per_key.iter().flatten().copied().collect();
        ids.sort();
        for id in ids {
            if self.sections[id].fence.is_none_or(|f| f == 0) {
                self.violations.push(format!(
                    "NO FENCE: {id}'s command got no DISTLOCK_FENCE (or not a positive integer)\n    {}",
                    self.describe(id)
                ));
            }
        }
    }

    /// On a mutex, fences strictly increase in the order the sections started: a fence is
    /// greater than every earlier grant's, and with mutual exclusion the grants come in the
    /// order of the sections (each section starts after its grant, and the next grant comes
    /// only after the lock was released or expired, when the section had ended).
    ///
    /// Across a restart too: the restart loses the counter (`P{K}:fence`), but a fence is
    /// max(last + 1, the server's clock in µs), so it still increases as long as the server's
    /// clock does. The one inversion allowed is the mirror of [`Checker::restart_excuse`]: a
    /// section whose lock came from the old server but whose command started only after one
    /// that took its lock from the new server (the old lock was forgotten; its command runs
    /// without it until distlock notices).
    fn mutex_fences_increase(&mut self) {
        for (k, key) in KEYS.iter().enumerate() {
            if !key.is_mutex() {
                continue;
            }
            let list = &self.per_key[k];
            let (mut across, mut excused) = (0, 0);
            let mut found = Vec::new();
            for (j, &yi) in list.iter().enumerate() {
                let y = &self.sections[yi];
                let Some(fy) = y.fence else { continue };
                let mut worst: Option<(&str, u64)> = None;
                for &xi in &list[..j] {
                    let x = &self.sections[xi];
                    let Some(fx) = x.fence else { continue };
                    let restart_between = self
                        .restarts
                        .iter()
                        .any(|r| x.start < r.dead && r.dead < y.start);
                    if fx < fy {
                        if restart_between && j > 0 && list[j - 1] == xi {
                            across += 1;
                        }
                        continue;
                    }
                    if self.restart_excuse(yi, y, x.start).is_some() {
                        excused += 1;
                        continue;
                    }
                    if worst.is_none_or(|(_, f)| fx > f) {
                        worst = Some((xi, fx));
                    }
                }
                if let Some((xi, fx)) = worst {
                    let x = &self.sections[xi];
                    let restart = self
                        .restarts
                        .iter()
                        .find(|r| x.start < r.dead && r.dead < y.start);
                    found.push(format!(
                        "FENCE ORDER on {}: {xi} started at {} with fence {fx}, {yi} after it at {} with fence {fy}{}\n    {}\n    {}",
                        key.name,
                        self.t(x.start),
                        self.t(y.start),
                        match restart {
                            Some(r) => format!(
                                " (across the restart at {}: the counter was lost, but fences are built from the server's clock too and must still increase)",
                                self.t(r.dead)
                            ),
                            None => String::new(),
                        },
                        self.describe(xi),
                        self.describe(yi)
                    ));
                }
            }
            self.violations.extend(found);
            self.notes.push(format!(
                "fences on {}: {} sections in start order, {across} successive pairs across a restart, {excused} pairs excused (lock from the old server, command started after the restart)",
                key.name,
                list.len()
            ));
        }
    }

    /// On a semaphore, every grant's fence is unique, and fences increase in grant order.
    /// Several sections run at once, so start order is not grant order (two grants close
    /// together may start their commands in either order); what is certain is that a section
    /// that started before another's distlock was even spawned was granted first. So: for every
    /// such pair, the earlier one's fence is smaller. Restarts need no excuse here: the later
    /// grant comes after the earlier section started, from the same server or a newer one,
    /// whose clock-based fence is greater.
    fn semaphore_fences_unique_and_ordered(&mut self) {
        for (k, key) in KEYS.iter().enumerate() {
            if key.is_mutex() {
                continue;
            }
            let list = &self.per_key[k];
            let mut found = Vec::new();
            let mut seen: HashMap<u64, &str> = HashMap::new();
            let mut pairs = 0;
            for &yi in list {
                let Some(fy) = self.sections[yi].fence else {
                    continue;
                };
                if let Some(xi) = seen.insert(fy, yi) {
                    found.push(format!(
                        "FENCE REUSED on {}: {xi} and {yi} both got fence {fy}\n    {}\n    {}",
                        key.name,
                        self.describe(xi),
                        self.describe(yi)
                    ));
                }
                let spawned = self.runs[yi].spawned;
                let mut worst: Option<(&str, u64)> = None;
                for &xi in list {
                    let x = &self.sections[xi];
                    if x.start >= spawned {
                        break;
                    }
                    let Some(fx) = x.fence else { continue };
                    pairs += 1;
                    if fx >= fy && worst.is_none_or(|(_, f)| fx > f) {
                        worst = Some((xi, fx));
                    }
                }
                if let Some((xi, fx)) = worst {
                    found.push(format!(
                        "FENCE ORDER on {}: {xi}'s section started at {} with fence {fx}, before {yi}'s distlock was started (at {}), yet {yi} got fence {fy}\n    {}\n    {}",
                        key.name,
                        self.t(self.sections[xi].start),
                        self.t(spawned),
                        self.describe(xi),
                        self.describe(yi)
                    ));
                }
            }
            self.violations.extend(found);
            self.notes.push(format!(
                "fences on {}: {} sections, unique, {pairs} pairs in certain grant order",
                key.name,
                list.len()
            ));
        }
    }

    /// Exit codes: only documented ones, and consistent with what the command did; no panic,
    /// no process that survived SIGKILL, no distlock that ran past the run limit. (Every key is
    /// used with one limit, so a conflict, exit 65, is undocumented here.)
    fn only_documented_exits(&mut self) {
        let mut ids: Vec<&str> = self.runs.keys().copied().collect();
        ids.sort();
        for id in ids {
            let r = self.runs[id];
            let x = self.sections.get(id);
            let killed = r.killed_distlock.is_some() || r.killed_child.is_some();
            let bad = |why: &str| format!("EXIT: {why}\n    {}", self.describe(id));
            let mut found = Vec::new();
            if r.hung.is_some() {
                found.push(bad(
                    "distlock ran longer than its limit (30s; a set 60s) and was killed",
                ));
            }
            if r.stderr.contains("panicked") {
                found.push(bad("distlock panicked"));
            }
            if r.stderr.contains("survived SIGKILL") {
                found.push(bad("a process survived SIGKILL"));
            }
            match (r.code, r.signal) {
                (Some(0), _) => {
                    if !x.is_some_and(|x| x.ended) {
                        found.push(bad("exit 0 but the command did not complete"));
                    }
                }
                (Some(124), _) => {
                    // "no longer held when the command ended": the key vanished before the
                    // release ran. With a healthy server the release follows the end of the
                    // group at once, well before T + ttl; only a server fault (a restart, or a
                    // stop or pause that holds the release up past the expiry) explains it.
                    if r.stderr.contains("no longer held")
                        && !self
                            .outages
                            .iter()
                            .any(|&(from, to)| from < r.exited && to > r.spawned)
                    {
                        found.push(bad(
                            "the lock vanished before the release, with no server fault to explain it",
                        ));
                    }
                }
                (Some(75), _) => {
                    if x.is_some() {
                        found.push(bad("exit 75 (busy) but the command ran"));
                    }
                    if r.stderr.contains("superseded by") {
                        // --supersede cancels the older waiters: a documented 75, for a run
                        // that had a place in line, while a superseding run waited on its key.
                        if r.params.wait == WaitKind::NoWait {
                            found.push(bad("superseded without a place in line"));
                        }
                        // (A lock set is superseded in the line of whichever of its keys it
                        // waited for: the run's other record names that key.)
                        let by = self.runs.values().any(|o| {
                            o.id != r.id
                                && o.params.supersede
                                && (o.params.key == r.params.key
                                    || Some(o.params.key) == r.params.also)
                                && o.spawned < r.exited
                                && o.exited > r.spawned
                        });
                        if !by {
                            found.push(bad(
                                "superseded, but no run with --supersede waited on this key meanwhile",
                            ));
                        }
                    } else if r.params.wait == WaitKind::Forever {
                        found.push(bad("exit 75 (busy) without --wait or --no-wait"));
                    }
                }
                (Some(69), _) => {
                    if x.is_some() {
                        found.push(bad("exit 69 (Redis unreachable) but the command ran"));
                    }
                }
                (_, Some(9)) if killed || r.hung.is_some() => {}
                _ => found.push(bad("undocumented exit for this run")),
            }
            self.violations.extend(found);
        }
    }

    /// A holding distlock that the test stopped for longer than every TTL, its command running
    /// on: only the guard could end the command in time. So its command's group was seen dead
    /// while distlock was stopped (its deadline lies within a TTL of the stop, the SIGCONT
    /// later), and the run ends with 124 and the guard's reason, unless the command completed
    /// before the deadline, or the test SIGKILLed distlock meanwhile (the guard then kills on
    /// its death; the exit is a signal) or the command (the group may be empty before the
    /// deadline), or distlock had started the kill itself before it was stopped (renewals
    /// failing: 124 with its own reason; the guard backed up the SIGKILL). And no stamp of its command comes after the stop plus its TTL: the last
    /// renewal distlock confirmed was sent before the stop (a stopped renewer confirms
    /// nothing), so the guard's SIGKILL deadline lies at least the margin (>= 110ms) before
    /// that. (That the group died before the lock passed on is also
    /// [`Checker::lost_lock_dead_before_next_holder`]'s and mutual exclusion's to prove; this
    /// check needs no next holder.)
    fn stopped_holders_were_ended_by_their_guard(&mut self) {
        let mut ids: Vec<&str> = self
            .runs
            .values()
            .filter(|r| r.stopped.is_some())
            .map(|r| r.id.as_str())
            .collect();
        ids.sort();
        let (mut by_guard, mut by_distlock, mut finished, mut killed) = (0, 0, 0, 0);
        let mut found = Vec::new();
        for id in &ids {
            let r = self.runs[id];
            let mut in_time = true;
            if let (Some(x), Some(stopped)) = (self.sections.get(*id), r.stopped) {
                let deadline = stopped + r.params.ttl_ms * MS;
                if x.last > deadline {
                    in_time = false;
                    found.push(format!(
                        "STOPPED HOLDER RAN PAST ITS DEADLINE: {id}'s distlock was stopped at {}, its command stamped at {}, {:.1}ms after the stop plus its TTL\n    {}",
                        self.t(stopped),
                        self.t(x.last),
                        (x.last - deadline) as f64 / 1e6,
                        self.describe(id)
                    ));
                }
            }
            let guard = r.stderr.contains("guard process ended the command");
            if !in_time {
                // Reported above.
            } else if guard && r.code == Some(124) {
                by_guard += 1;
            } else if r.code == Some(124) && r.stderr.contains("lost lock") {
                by_distlock += 1;
            } else if self.sections.get(*id).is_some_and(|x| x.ended) {
                finished += 1;
            } else if r.killed_distlock.is_some() || r.killed_child.is_some() {
                killed += 1;
            } else {
                found.push(format!(
                    "STOPPED HOLDER: {id}'s distlock was stopped past its TTL, its command neither completed nor was it ended by the guard ({})\n    {}",
                    r.exit(),
                    self.describe(id)
                ));
            }
            if r.group_dead.is_none() && r.resumed.is_some() {
                found.push(format!(
                    "STOPPED HOLDER: {id}'s command's group was still alive when its distlock was continued\n    {}",
                    self.describe(id)
                ));
            }
        }
        self.violations.extend(found);
        self.notes.push(format!(
            "distlocks stopped past their TTL while holding: {}; the guard ended the command of {by_guard}, distlock itself before its stop (the guard backing up its SIGKILL) {by_distlock}, {finished} completed before their deadline, {killed} otherwise ended by the test's SIGKILL (of distlock or the command) meanwhile",
            ids.len()
        ));
    }

    /// No counter update lost, outside the restart windows. W = sections that logged W (their
    /// write is in place), U = sections that logged P but not W (killed around the write: it may
    /// or may not have landed). Without overlap the counter is exactly the number of writes, so
    /// W <= counter <= W+U; every overlapping pair may lose at most one update, so across
    /// restarts the lower bound is W - (excused overlapping pairs). A lost update outside those
    /// windows breaks the lower bound.
    fn no_lost_update(&mut self) {
        for (k, list) in self.per_key.iter().enumerate() {
            let Some(c) = self.counters[k] else { continue };
            let w = list
                .iter()
                .filter(|id| self.sections[**id].wrote.is_some())
                .count() as i64;
            let u = list
                .iter()
                .filter(|id| {
                    let x = &self.sections[**id];
                    x.pre_write && x.wrote.is_none()
                })
                .count() as i64;
            let m = self.excused_pairs[k];
            self.notes.push(format!(
                "counter {}: {c} (writes logged {w}, possibly landed {u}, excused overlaps {m})",
                KEYS[k].name
            ));
            if c < w - m || c > w + u {
                self.violations.push(format!(
                    "LOST UPDATE on {}: counter {c}, but {w} writes were logged, {u} more may have landed, and only {m} overlaps are excused by restarts",
                    KEYS[k].name
                ));
            }
        }
    }

    /// Not an invariant, figures: the longest time from spawning a distlock to its section's
    /// start, per wait mode (both wait in line; spin notices its turn by polling), and the
    /// notify waiters that could not subscribe and polled instead (like spin).
    fn note_waits(&mut self) {
        let mut longest: [Option<(u64, &str)>; 2] = [None, None];
        for (id, x) in self.sections.iter() {
            let r = self.runs[id.as_str()];
            let waited = x.start.saturating_sub(r.spawned);
            let slot = &mut longest[usize::from(r.params.spin)];
            if slot.is_none_or(|(w, _)| waited > w) {
                *slot = Some((waited, id.as_str()));
            }
        }
        let show = |l: Option<(u64, &str)>| {
            l.map_or("-".into(), |(w, id)| {
                format!("{:.1}s ({id})", w as f64 / 1e9)
            })
        };
        // A notify waiter that cannot subscribe polls instead, keeping its place in line.
        let mut polling: Vec<&str> = self
            .runs
            .values()
            .filter(|r| r.stderr.contains("polling instead"))
            .map(|r| r.id.as_str())
            .collect();
        polling.sort();
        self.notes.push(format!(
            "longest time from spawn to section start: notify {}, spin {}; {} notify waiter(s) fell back to polling{}",
            show(longest[0]),
            show(longest[1]),
            polling.len(),
            if polling.is_empty() {
                String::new()
            } else {
                format!(" ({})", polling.join(", "))
            }
        ));
    }
}
