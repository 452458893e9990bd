//! The invariants, checked after every step, and the interesting states a configuration must
//! reach (see `docs/verification.md`, "The invariants").

use std::collections::BTreeMap;

use super::{End, Kind, Phase, Req, State, Violation, World};
use crate::lock::model::{Entry, Keyspace, Resp, Value};
use crate::lock::protocol::{REFRESH, TAKEUP, millis};

/// An interesting state: a run that never reaches one its configuration names fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sometimes {
    /// A release or an attempt handed the lock to a waiter.
    HandOff,
    /// A lock handed to a waiter expired before it took it up.
    TakeUpLapsed,
    /// An acquire whose client had given up on it ran after that client's release.
    OrphanAfterRelease,
    /// A waiter whose place lapsed was purged from the line.
    PurgedWaiter,
    /// Two scripts ran in the same millisecond.
    SameMillisecond,
    /// A lock cooling down after a run expired.
    CooldownEnded,
    /// A renewal succeeded.
    Renewed,
    Superseded,
    Replaced,
    /// A waiter that polls was granted the lock.
    PollingGrant,
    /// Two holders at once (a semaphore).
    TwoHolders,
    /// The lock was handed to a waiter that had crashed, or that crashed before taking it up.
    CrashedHead,
    /// A holder was paused (SIGSTOP) past its kill deadline.
    PausedHolder,
    /// The lock handed to a dead waiter (crashed, or paused) lapsed and went to another.
    DeadHeadPassed,
    /// A doorbell waiter's pop took its turn (a hand-off served by a pop).
    PoppedHandOff,
    /// Another client's script ran between a doorbell waiter's pop and its refresh.
    RefreshAfterAnotherStep,
    /// A refresh ran after its waiter gave up, and found no place.
    LateRefreshNoPlace,
    /// One script handed a shared lock to two readers or more (a batch).
    BatchHandOff,
}

fn fail(invariant: &'static str, detail: String) -> Result<(), Violation> {
    Err(Violation { invariant, detail })
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The keys of the lock, alive at `now` (absolute ms), by their suffix ("" for the lock).
fn view(ks: &Keyspace, now: u64) -> BTreeMap<String, Entry> {
    ks.iter()
        .filter(|(_, e)| e.expires_at.is_none_or(|at| now <= at))
        .map(|(k, e)| {
            let k = text(k);
            let suffix = k
                .split_once('}')
                .map_or(String::new(), |(_, s)| s.to_owned());
            (suffix, e.clone())
        })
        .collect()
}

fn string(v: &BTreeMap<String, Entry>, key: &str) -> Option<String> {
    match v.get(key).map(|e| &e.value) {
        Some(Value::Str(s)) => Some(text(s)),
        _ => None,
    }
}

fn hash(v: &BTreeMap<String, Entry>, key: &str) -> BTreeMap<String, String> {
    match v.get(key).map(|e| &e.value) {
        Some(Value::Hash(fields)) => fields.iter().map(|(k, v)| (text(k), text(v))).collect(),
        _ => BTreeMap::new(),
    }
}

fn zset(v: &BTreeMap<String, Entry>, key: &str) -> BTreeMap<String, f64> {
    match v.get(key).map(|e| &e.value) {
        Some(Value::ZSet(members)) => members.iter().map(|(s, m)| (text(m), s.0)).collect(),
        _ => BTreeMap::new(),
    }
}

/// What a shared lock's readers keep in the mutex key (common.lua `SHARED`): nobody's token.
const SHARED: &str = "distlock:shared";

/// A writer (or another client) holds the mutex: the key holds something else than the
/// readers' mark.
fn writer_holds(v: &BTreeMap<String, Entry>) -> bool {
    string(v, "").is_some_and(|t| t != SHARED)
}

fn json_field(json: &str, field: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(json).ok()?;
    value.get(field)?.as_str().map(str::to_owned)
}

/// The grants in a keyspace: (token, fence) of the mutex holder or of each live slot.
fn holders(v: &BTreeMap<String, Entry>, now: u64) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    if let Some(token) = string(v, "").filter(|t| t != SHARED) {
        let fence = hash(v, ":owner")
            .get("fence")
            .and_then(|f| f.parse().ok())
            .unwrap_or(0);
        out.push((token, fence));
    }
    let held = hash(v, ":holders");
    for (token, score) in zset(v, ":slots") {
        // (A slot whose score is now has expired: the scripts purge it, common.lua
        // `purge_slots`.)
        if score as u64 > now {
            let fence = held
                .get(&token)
                .and_then(|j| json_field(j, "fence"))
                .and_then(|f| f.parse().ok())
                .unwrap_or(0);
            out.push((token, fence));
        }
    }
    out
}

/// The grants still handed (not yet taken up): the mutex's, if its owner hash says so, and
/// each live slot's whose holder's JSON does.
fn handed(v: &BTreeMap<String, Entry>, now: u64) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(token) = string(v, "")
        && hash(v, ":owner").contains_key("handed")
    {
        out.push(token);
    }
    let held = hash(v, ":holders");
    for (token, score) in zset(v, ":slots") {
        if score as u64 >= now
            && held
                .get(&token)
                .and_then(|j| json_field(j, "handed"))
                .is_some()
        {
            out.push(token);
        }
    }
    out
}

/// The client with `token` is dead: gone (crashed, or done with a request still in line), or
/// paused.
fn dead(s: &State, token: &str) -> bool {
    s.clients
        .iter()
        .find(|c| c.token == token)
        .is_some_and(|c| c.paused || matches!(c.phase, Phase::Done(_)))
}

/// Client `j` (`c`) can be told of its turn: subscribed to its wake channel, or a bell-only
/// doorbell waiter, whose turn is pushed onto its doorbell as data (common.lua `wake`) that its
/// blocking pop takes, or its next one (waiter.rs:159-201).
fn told(world: &World, j: usize, c: &super::Client) -> bool {
    c.subscribed || world.config.clients[j].bell_only
}

/// After a script ran for client `i`: fences, FIFO, expiries, well-formedness, only the
/// holder changes its own lock, no error.
pub fn after_exec(
    world: &mut World,
    s: &mut State,
    i: usize,
    req: Req,
    before: &Keyspace,
    reply: &Resp,
) -> Result<(), Violation> {
    let now = s.redis.now_ms();
    let token = s.clients[i].token.clone();
    if let Resp::Error(e) = reply {
        return fail(
            "no script ever errors",
            format!("{token}'s {:?}: {e}", req.kind),
        );
    }
    let b = view(before, now);
    let a = view(&s.redis.keyspace, now);

    // Fences: a new grant's fence is above every earlier one; a grant seen again keeps its own.
    let held_before: Vec<String> = holders(&b, now).into_iter().map(|(t, _)| t).collect();
    // (In the order of their fences: one hand-off may grant a batch of readers.)
    let mut held_after = holders(&a, now);
    held_after.sort_by_key(|(_, fence)| *fence);
    let mut granted = Vec::new();
    for (t, fence) in &held_after {
        if s.grants.contains(&(t.clone(), *fence)) {
            continue;
        }
        granted.push(t.clone());
        if held_before.contains(t) {
            return fail(
                "fences strictly increase per grant",
                format!("{t}'s fence changed to {fence} while it held the lock"),
            );
        }
        if *fence <= s.max_fence {
            return fail(
                "fences strictly increase per grant",
                format!("{t} was granted fence {fence}, not above {}", s.max_fence),
            );
        }
        s.grants.insert((t.clone(), *fence));
        s.max_fence = *fence;
    }
    if let (Kind::Acquire(_), Resp::Array(items)) = (req.kind, reply)
        && let [Resp::Int(1), Resp::Int(fence), ..] = items.as_slice()
        && !held_after.contains(&(token.clone(), fence.unsigned_abs()))
    {
        return fail(
            "fences strictly increase per grant",
            format!("{token} was answered fence {fence}, which is not the one Redis holds for it"),
        );
    }
    // A dead head costs at most the take-up window: none once its place lapsed (the lock is
    // handed only to a waiter whose place is live); the timed part is checked as time passes
    // (`after_tick`). Follow the latest hand-off until it is taken up or another grant comes.
    let handed_now = handed(&a, now);
    let alive_before = zset(&b, ":alive");
    let now_rel = s.now();
    for t in &granted {
        let handed_to_t = handed_now.contains(t);
        if handed_to_t && alive_before.get(t).is_none_or(|&d| (d as u64) < now) {
            return fail(
                "a dead head costs at most the take-up window",
                format!("the lock was handed to {t}, whose place in line had lapsed"),
            );
        }
        if let Some((h, _)) = &s.handoff
            && h != t
            && dead(s, h)
        {
            world.reached.insert(Sometimes::DeadHeadPassed);
        }
        s.handoff = handed_to_t.then(|| (t.clone(), now_rel));
    }
    if let Some((h, _)) = &s.handoff
        && held_after.iter().any(|(t, _)| t == h)
        && !handed_now.contains(h)
    {
        s.handoff = None;
    }

    if held_after.len() >= 2 {
        world.reached.insert(Sometimes::TwoHolders);
    }
    if granted.iter().filter(|t| handed_now.contains(*t)).count() >= 2 {
        world.reached.insert(Sometimes::BatchHandOff);
    }

    // FIFO: nobody is granted the lock while a live waiter that does not poll and joined
    // before it stays in line.
    let queue_before = zset(&b, ":queue");
    let queue = zset(&a, ":queue");
    let alive = zset(&a, ":alive");
    let waiters = hash(&a, ":waiters");
    // Shared locks: a writer is never passed by a reader that joined after it, whatever the
    // writer's wait mode (one that polls included: acquire.lua `ahead_for_reader`).
    if world.config.shared() {
        for (t, _) in &held_after {
            if held_before.contains(t) {
                continue;
            }
            let reader = s
                .clients
                .iter()
                .position(|c| &c.token == t)
                .is_some_and(|j| world.config.clients[j].limit == 0);
            if !reader {
                continue;
            }
            let ticket = queue_before.get(t).copied().unwrap_or(f64::INFINITY);
            for (u, &their) in &queue {
                let writer = waiters
                    .get(u)
                    .and_then(|j| json_field(j, "limit"))
                    .is_some_and(|l| l != "0");
                if writer && their < ticket && alive.get(u).is_some_and(|&d| d as u64 >= now) {
                    return fail(
                        "a writer is never passed by a later reader",
                        format!(
                            "reader {t} was granted the lock while writer {u}, before it in line, waits"
                        ),
                    );
                }
            }
        }
    }
    for (t, _) in &held_after {
        if held_before.contains(t) {
            continue;
        }
        if let Some(j) = s.clients.iter().position(|c| &c.token == t)
            && world.config.clients[j].polls
        {
            world.reached.insert(super::Sometimes::PollingGrant);
        }
        let ticket = queue_before.get(t).copied().unwrap_or(f64::INFINITY);
        for (u, &their) in &queue {
            let polls = waiters
                .get(u)
                .and_then(|j| json_field(j, "polls"))
                .is_some_and(|p| p == "1");
            if u != t && their < ticket && alive.get(u).is_some_and(|&d| d as u64 >= now) && !polls
            {
                return fail(
                    "FIFO among live waiters",
                    format!("{t} was granted the lock while {u}, before it in line, waits"),
                );
            }
        }
    }
    // A waiter whose place had lapsed left the line.
    let alive_before = zset(&b, ":alive");
    for (u, &deadline) in &alive_before {
        if (deadline as u64) < now && !queue.contains_key(u) {
            world.reached.insert(Sometimes::PurgedWaiter);
        }
    }

    // Expiries: every key but the fence counter (and the protocol marker) expires.
    for (key, entry) in &a {
        if entry.expires_at.is_none() && key != ":fence" && key != ":protocol" {
            return fail(
                "every key but the fence has a TTL",
                format!("after {token}'s {:?}, {{k}}{key} has no expiry", req.kind),
            );
        }
    }
    // Well-formed: the line's three keys agree; a holder is not in line; a mutex and slots
    // never coexist.
    let mut members: Vec<_> = queue.keys().collect();
    let mut in_waiters: Vec<_> = waiters.keys().collect();
    let mut in_alive: Vec<_> = alive.keys().collect();
    members.sort();
    in_waiters.sort();
    in_alive.sort();
    if members != in_waiters || members != in_alive {
        return fail(
            "the line is well-formed",
            format!("queue {members:?}, waiters {in_waiters:?}, alive {in_alive:?}"),
        );
    }
    for (t, _) in &held_after {
        if queue.contains_key(t) {
            return fail(
                "the line is well-formed",
                format!("{t} holds the lock and waits in line"),
            );
        }
    }
    if writer_holds(&a) && !zset(&a, ":slots").is_empty() {
        return fail(
            "the line is well-formed",
            "a mutex and semaphore slots at once".into(),
        );
    }

    // No lost hand-off: an acquire or release leaves no free lock with a waiter at the head
    // of its line that would be handed it (one that does not poll): every script that frees
    // the lock or finds it free hands it on (common.lua `hand_off`).
    let head = queue
        .iter()
        .min_by(|x, y| x.1.total_cmp(y.1))
        .map(|(t, _)| t.clone());
    // (A refresh that finds no place, {5}, hands a free lock on too: C7 found one that did not,
    // see docs/verification.md.)
    if world.config.shared() && matches!(req.kind, Kind::Acquire(_) | Kind::Release { .. }) {
        if let Some(w) = unserved(&a, &queue, &alive, &waiters, now) {
            return fail(
                "readers at the head are admitted together",
                format!(
                    "after {token}'s {:?}, {w} waits in line with only readers that poll before \
                     it, and could be admitted",
                    req.kind
                ),
            );
        }
    } else if matches!(req.kind, Kind::Acquire(_) | Kind::Release { .. })
        && !a.contains_key("")
        && zset(&a, ":slots").len() < world.config.limit() as usize
        && let Some(h) = head
        && waiters
            .get(&h)
            .and_then(|j| json_field(j, "polls"))
            .is_none_or(|p| p != "1")
    {
        return fail(
            "a free lock is handed to the waiter at the head of its line",
            format!(
                "after {token}'s {:?}, the lock is free and {h} heads the line",
                req.kind
            ),
        );
    }

    // Only a holder changes its own lock: a renewal or release by `token` leaves another
    // holder's mutex (value and expiry) and live slots as they were.
    if matches!(req.kind, Kind::Renew | Kind::Release { .. }) {
        if let Some(other) = string(&b, "").filter(|o| o != SHARED)
            && other != token
            && (b.get("") != a.get("") || b.get(":owner") != a.get(":owner"))
        {
            return fail(
                "only a holder changes its own lock",
                format!(
                    "{token}'s {:?} changed {other}'s lock: {:?} -> {:?}",
                    req.kind,
                    b.get(""),
                    a.get("")
                ),
            );
        }
        let slots_after = zset(&a, ":slots");
        for (u, score) in zset(&b, ":slots") {
            if u != token && score as u64 > now && slots_after.get(&u) != Some(&score) {
                return fail(
                    "only a holder changes its own lock",
                    format!("{token}'s {:?} changed {u}'s slot", req.kind),
                );
            }
        }
    }
    Ok(())
}

/// A shared lock's waiter that should hold it: walking the line from its head past readers that
/// poll (common.lua `hand_off` skips them), the first other waiter, if it is a reader and no
/// writer holds, or a writer while nobody holds and no reader was skipped.
fn unserved(
    a: &BTreeMap<String, Entry>,
    queue: &BTreeMap<String, f64>,
    alive: &BTreeMap<String, f64>,
    waiters: &BTreeMap<String, String>,
    now: u64,
) -> Option<String> {
    let mut line: Vec<(&String, &f64)> = queue.iter().collect();
    line.sort_by(|x, y| x.1.total_cmp(y.1));
    let mut skipped = false;
    for (w, _) in line {
        if alive.get(w).is_none_or(|&d| (d as u64) < now) {
            continue;
        }
        let json = waiters.get(w).map(String::as_str).unwrap_or("{}");
        let polls = json_field(json, "polls").is_some_and(|p| p == "1");
        let reader = json_field(json, "limit").is_some_and(|l| l == "0");
        if reader && polls {
            skipped = true;
            continue;
        }
        let free = if reader {
            !writer_holds(a)
        } else {
            !polls && !skipped && !writer_holds(a) && zset(a, ":slots").is_empty()
        };
        return free.then(|| w.clone());
    }
    None
}

/// Time passed: a handed lock that lapsed (the waiter never took it up), a cool-down that
/// ended.
pub fn after_tick(
    world: &mut World,
    s: &State,
    before: &Keyspace,
    then: u64,
) -> Result<(), Violation> {
    let b = view(before, then);
    let a = view(&s.redis.keyspace, s.redis.now_ms());
    // A waiter handed the lock, subscribed, live, and whose wake-up cannot be lost takes it up
    // in the same instant (its wake-up and attempt are urgent): a hand-off that survives a
    // tick was never announced. So does a bell-only doorbell waiter, whatever the lost
    // wake-ups (a push is data, not a message that can be lost): its blocking pop is served in
    // the step that pushed, or its next pipeline (sent at once after a reply) pops it at once,
    // and the refresh behind is urgent.
    if let Some(t) = string(&b, "")
        && hash(&b, ":owner").contains_key("handed")
        && let Some(j) = s.clients.iter().position(|c| c.token == t)
        && let c = &s.clients[j]
        && matches!(c.phase, Phase::Waiting { .. })
        && ((c.subscribed && world.config.lost_wakes == 0) || world.config.clients[j].bell_only)
        && !c.paused
        && c.losses_left == world.config.losses
    {
        return fail(
            "a woken waiter takes up its hand-off at once",
            format!("the lock handed to {t} was not taken up in the instant it was handed"),
        );
    }
    if let Some(t) = string(&b, "")
        && !a.contains_key("")
    {
        let owner = hash(&b, ":owner");
        if owner.contains_key("ended_at") {
            world.reached.insert(Sometimes::CooldownEnded);
        }
        if owner.contains_key("handed") {
            world.reached.insert(Sometimes::TakeUpLapsed);
            if let Some(c) = s.clients.iter().find(|c| c.token == t)
                && matches!(c.phase, Phase::Waiting { .. })
                && !c.paused
                && c.losses_left == world.config.losses
            {
                return fail(
                    "a live waiter takes up a hand-off",
                    format!("the lock handed to {t} expired before it took it up"),
                );
            }
        }
    }
    // A dead head costs at most the take-up window (protocol.rs, module docs: "a dead waiter
    // costs the line at most TAKEUP"): a lock handed to a waiter that does not take it up
    // expires after TAKEUP, and the waiter next in line finds it free at its next attempt,
    // at most REFRESH later (the first in line looks just past the expiry it saw, the others
    // every REFRESH). So time does not pass the hand-off + TAKEUP + REFRESH without another
    // grant while a live, notified waiter is in line with only notified waiters before it
    // (behind a waiter that polls, the bound is that waiter's: not this one), plus the error
    // backoff (100 ms, waiter.rs `after_failure`) for each of its own requests that was lost.
    if let Some((h, at)) = &s.handoff {
        let bound = at + millis(TAKEUP) + millis(REFRESH);
        let t = s.now();
        if t > bound {
            let queue = zset(&b, ":queue");
            let alive = zset(&b, ":alive");
            let waiters = hash(&b, ":waiters");
            let mut line: Vec<(&String, &f64)> = queue.iter().collect();
            line.sort_by(|x, y| x.1.total_cmp(y.1));
            for (w, _) in line {
                if waiters
                    .get(w)
                    .and_then(|j| json_field(j, "polls"))
                    .is_some_and(|p| p == "1")
                {
                    break;
                }
                let Some(j) = s.clients.iter().position(|c| &c.token == w) else {
                    continue;
                };
                let c = &s.clients[j];
                let live = matches!(c.phase, Phase::Waiting { .. })
                    && told(world, j, c)
                    && !c.paused
                    && !world.config.clients[j].polls
                    && alive.get(w).is_some_and(|&d| d as u64 >= then);
                let backoff = 100 * u64::from(world.config.losses - c.losses_left);
                if live && t > bound + backoff {
                    let what = match &s.clients.iter().find(|c| &c.token == h) {
                        Some(c) if c.paused => "paused",
                        Some(c) if c.phase == Phase::Done(End::Crashed) => "crashed",
                        Some(c) if matches!(c.phase, Phase::Done(_)) => "gone",
                        _ => "live",
                    };
                    return fail(
                        "a dead head costs at most the take-up window",
                        format!(
                            "the lock handed to {h} ({what}) at {at} was not granted again by \
                             {} (TAKEUP {} + REFRESH {} ms later{}), and {w} waits in line \
                             at {t}",
                            bound + backoff,
                            millis(TAKEUP),
                            millis(REFRESH),
                            if backoff > 0 {
                                format!(", + {backoff} ms for its lost requests")
                            } else {
                                String::new()
                            }
                        ),
                    );
                }
            }
        }
    }
    let held = hash(&b, ":holders");
    let slots_after = zset(&a, ":slots");
    for (t, score) in zset(&b, ":slots") {
        if !slots_after.contains_key(&t)
            && score as u64 >= then
            && held.get(&t).and_then(|j| json_field(j, "handed")).is_some()
        {
            world.reached.insert(Sometimes::TakeUpLapsed);
        }
    }
    Ok(())
}

/// Checked in every state: at most N holders before their kill deadline, each backed by
/// Redis until its validity ends, and a free lock with a live notified waiter at the head of
/// its line is not left so for longer than a refresh.
pub fn state(world: &mut World, s: &mut State) -> Result<(), Violation> {
    let now = s.now();
    let abs = s.redis.now_ms();
    let v = view(&s.redis.keyspace, abs);
    if let Some((h, _)) = &s.handoff
        && handed(&v, abs).contains(h)
        && s.clients
            .iter()
            .any(|c| &c.token == h && c.phase == Phase::Done(End::Crashed))
    {
        world.reached.insert(Sometimes::CrashedHead);
    }
    let mut holding = Vec::new();
    let slots = zset(&v, ":slots");
    for c in &s.clients {
        if let Phase::Holding { anchor, ttl, .. } = c.phase {
            if now < world.kill_at(anchor, ttl) {
                holding.push(c.token.clone());
            } else if c.paused {
                world.reached.insert(Sometimes::PausedHolder);
            }
            let backed = string(&v, "").as_deref() == Some(c.token.as_str())
                || slots
                    .get(&c.token)
                    .is_some_and(|&score| score as u64 >= abs);
            if now < anchor + ttl && !backed {
                return fail(
                    "a holder's belief is backed by Redis until its validity ends",
                    format!(
                        "{} believes it holds until {} but Redis does not hold it for it",
                        c.token,
                        anchor + ttl
                    ),
                );
            }
        }
    }
    if world.config.shared() {
        let writers = holding
            .iter()
            .filter(|t| {
                s.clients
                    .iter()
                    .position(|c| &c.token == *t)
                    .is_some_and(|j| world.config.clients[j].limit != 0)
            })
            .count();
        if writers > 0 && holding.len() > 1 {
            return fail(
                "a writer holds alone",
                format!("{holding:?} all hold the lock, {writers} of them writers"),
            );
        }
    } else if holding.len() > world.config.limit() as usize {
        return fail(
            "at most N holders before their kill deadline",
            format!("{holding:?} all hold the lock"),
        );
    }
    // No lost wake-up: a free lock whose line is headed by a live, notified waiter.
    let queue = zset(&v, ":queue");
    let head = queue
        .iter()
        .min_by(|x, y| x.1.total_cmp(y.1))
        .map(|(t, _)| t.clone());
    let free = if world.config.shared() {
        // A reader at the head needs no writer; a writer, nobody.
        let reader = head
            .as_ref()
            .and_then(|h| hash(&v, ":waiters").get(h).cloned())
            .and_then(|j| json_field(&j, "limit"))
            .is_some_and(|l| l == "0");
        !writer_holds(&v) && (reader || slots.is_empty())
    } else {
        !v.contains_key("") && slots.len() < world.config.limit() as usize
    };
    let live_head = head.and_then(|h| {
        let j = s.clients.iter().position(|c| c.token == h)?;
        let c = &s.clients[j];
        (matches!(c.phase, Phase::Waiting { .. })
            && !c.paused
            && told(world, j, c)
            && !world.config.clients[j].polls)
            .then_some(h)
    });
    if free && let Some(h) = live_head {
        let since = *s.stuck_since.get_or_insert(now);
        if now - since > millis(REFRESH) {
            return fail(
                "a free lock goes to a live waiter at the head within a refresh",
                format!("free since {since} with {h} first in line"),
            );
        }
    } else {
        s.stuck_since = None;
    }
    Ok(())
}

/// A state with nothing left to do: if every client is gone, nothing but the fence counter is
/// left once the last expiry passed.
pub fn terminal(_world: &World, s: &State) -> Result<(), Violation> {
    let all_gone = s
        .clients
        .iter()
        .all(|c| matches!(c.phase, Phase::Done(_)) && c.orphan.is_none());
    if !all_gone {
        return Ok(());
    }
    let mut ks = s.redis.keyspace.clone();
    let last = ks.iter().filter_map(|(_, e)| e.expires_at).max();
    if let Some(last) = last {
        ks.expire_all(last + 1);
    }
    let left: Vec<String> = ks
        .iter()
        .map(|(k, _)| text(k))
        .filter(|k| !k.ends_with(":fence") && !k.ends_with(":protocol"))
        .collect();
    if !left.is_empty() {
        return fail(
            "nothing but the fence is left once every client is gone",
            format!("{left:?} stay"),
        );
    }
    Ok(())
}
