//! The doorbell client (issue 26; `waiter.rs` `ring`, `single.rs` `await_turn`), kept apart
//! from the other clients' rules: the hooks in `mod.rs` and `check.rs` call these functions.
//!
//! A client whose spec says `doorbell` declares `wake = list`, joins on its first attempt
//! (waiter.rs `run`: its turn waits in the list, nothing to lose by joining first), and once
//! in line sends ONE pipeline: `BLPOP P{K}:wake:TOKEN B` + the acquire in mode `refresh` with
//! the claim plus B, anchored at the pipeline's send time ([`Mode::Refresh`] with `block` B).
//! The pop is served atomically inside the step whose script pushed (Redis serves a blocked
//! client right after the command that fed its key), or when time reaches the block's end;
//! the queued refresh then becomes the client's request in flight, which runs as a SEPARATE
//! later step (Redis runs it in `beforeSleep`: other clients' steps may come between), and
//! whose reply may be lost as any other. A crashed client's connection close frees its
//! blocked pop and drops the refresh behind it; once the pop was served the refresh is a
//! request in flight, which a crash leaves as an orphan that may still run. A give-up during
//! the wait drops the connection too, but the refresh's bytes may still reach the server
//! (design note §4.4, "Signals"): it is left as an orphan that may run later, and must find
//! no place (reply {5}).

use super::check::Sometimes;
use super::{Client, Kind, Mode, Phase, Req, State, Violation, World};
use crate::lock::model::Resp;

/// A pipeline sent: the pop blocked, or served and the refresh queued behind it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bell {
    /// When the pipeline was sent (ms after T0): the refresh's validity anchor.
    pub sent: u64,
    /// When the pop's time is up (ms after T0).
    pub until: u64,
    /// The block B (the refresh behind asks for the claim plus B).
    pub block: u64,
    /// What the pop took, once served (None: its time was up), and when.
    pub popped: Option<(Option<String>, u64)>,
    /// Another client's script ran between the pop and the refresh.
    pub interleaved: bool,
}

/// The doorbell's list of `token`.
fn key(world: &World, token: &str) -> String {
    world.name.wake_channel(token)
}

/// Client `i` sends the pipeline (a `Send` of `Acquire(Refresh { block })`, block > 0).
pub fn ring(world: &mut World, s: &mut State, i: usize, block: u64) {
    let now = s.now();
    s.clients[i].bell = Some(Bell {
        sent: now,
        until: now + block,
        block,
        popped: None,
        interleaved: false,
    });
    // A list that already holds the news is popped at once.
    serve(world, s);
}

/// Serve every blocked pop whose list holds an element (after every script, and when a pop
/// is sent): the refresh behind it is queued, as the client's request in flight.
pub fn serve(world: &mut World, s: &mut State) {
    let now_abs = s.redis.now_ms();
    let now = s.now();
    for c in s.clients.iter_mut() {
        let Some(bell) = c.bell.as_mut() else {
            continue;
        };
        if bell.popped.is_some() || matches!(c.phase, Phase::Done(_)) {
            continue;
        }
        let Some(item) = s
            .redis
            .keyspace
            .lpop(key(world, &c.token).as_bytes(), now_abs)
        else {
            continue;
        };
        let item = String::from_utf8_lossy(&item).into_owned();
        if item == "granted" {
            world.reached.insert(Sometimes::PoppedHandOff);
        }
        bell.popped = Some((Some(item), now));
        queue_refresh(c);
    }
}

/// The refresh behind a served (or timed out) pop: the client's request in flight, anchored
/// at the pipeline's send time.
fn queue_refresh(c: &mut Client) {
    let bell = c.bell.as_ref().expect("a pipeline");
    c.inflight = Some((
        Req {
            kind: Kind::Acquire(Mode::Refresh { block: bell.block }),
            sent: bell.sent,
        },
        None,
    ));
}

/// Time moved to now: a pop whose block ended times out (nil), and the refresh behind it is
/// queued.
pub fn after_tick(s: &mut State) {
    let now = s.now();
    for c in s.clients.iter_mut() {
        if matches!(c.phase, Phase::Done(_)) {
            continue;
        }
        if let Some(bell) = c.bell.as_mut()
            && bell.popped.is_none()
            && now >= bell.until
        {
            bell.popped = Some((None, now));
            queue_refresh(c);
        }
    }
}

/// The instants that matter to the doorbells: each blocked pop's end.
pub fn instants(s: &State) -> Vec<u64> {
    s.clients
        .iter()
        .filter(|c| !matches!(c.phase, Phase::Done(_)))
        .filter_map(|c| c.bell.as_ref())
        .filter(|b| b.popped.is_none())
        .map(|b| b.until)
        .collect()
}

/// Whether client `c` is blocked on its doorbell (no request due: it may give up).
pub fn blocked(c: &Client) -> bool {
    c.bell.as_ref().is_some_and(|b| b.popped.is_none())
}

/// Client `i` gives up, or crashes, while blocked: the connection goes. A give-up's refresh
/// may still reach the server (an orphan); a crash's never does (Redis frees the blocked
/// client with its queued command).
pub fn abandon(s: &mut State, i: usize, crashed: bool) {
    let c = &mut s.clients[i];
    if let Some(bell) = c.bell.take()
        && bell.popped.is_none()
        && !crashed
        && c.orphan.is_none()
    {
        c.orphan = Some(Req {
            kind: Kind::Acquire(Mode::Refresh { block: bell.block }),
            sent: bell.sent,
        });
    }
}

/// Before another client's script runs: a refresh waiting behind a served pop now has had a
/// step in between.
pub fn before_exec(s: &mut State, i: usize) {
    for (j, c) in s.clients.iter_mut().enumerate() {
        if j != i
            && let Some(bell) = c.bell.as_mut()
            && bell.popped.is_some()
        {
            bell.interleaved = true;
        }
    }
}

/// After client `i`'s script `req` ran: the doorbell invariants.
pub fn after_exec(
    world: &mut World,
    s: &mut State,
    i: usize,
    req: Req,
    reply: &Resp,
    orphan: bool,
) -> Result<(), Violation> {
    let token = s.clients[i].token.clone();
    let now_abs = s.redis.now_ms();
    let bell_there = s
        .redis
        .keyspace
        .clone()
        .lookup(key(world, &token).as_bytes(), now_abs)
        .is_some();
    let granted = matches!(reply, Resp::Array(items) if items.first() == Some(&Resp::Int(1)));
    let no_place = matches!(reply, Resp::Array(items) if items.as_slice() == [Resp::Int(5)]);
    // A take-up or a release leaves no doorbell behind.
    if (granted || matches!(req.kind, Kind::Release { .. })) && bell_there {
        return Err(Violation {
            invariant: "a doorbell is gone after a take-up or a give-up",
            detail: format!(
                "after {token}'s {:?}, its doorbell is still there",
                req.kind
            ),
        });
    }
    let Kind::Acquire(Mode::Refresh { .. }) = req.kind else {
        return Ok(());
    };
    // A late refresh after a give-up (the client's release ran) finds no place: no ghost
    // place, no ghost grant.
    if s.clients[i].released {
        if !no_place {
            return Err(Violation {
                invariant: "no ghost place or grant from a late refresh",
                detail: format!(
                    "{token}'s refresh ran after its release and answered {}",
                    super::show_resp(reply)
                ),
            });
        }
        world.reached.insert(Sometimes::LateRefreshNoPlace);
    }
    // The refresh behind a pop that took 'granted', run in the instant of the pop, takes the
    // turn up: the grant and its take-up reach the waiter together.
    if !orphan && let Some(bell) = s.clients[i].bell.take() {
        if bell.interleaved {
            world.reached.insert(Sometimes::RefreshAfterAnotherStep);
        }
        if let Some((Some(item), at)) = &bell.popped
            && item == "granted"
            && *at == s.now()
            && !granted
        {
            return Err(Violation {
                invariant: "the take-up reaches a doorbell waiter with its grant",
                detail: format!(
                    "{token} popped its turn, and its refresh answered {}",
                    super::show_resp(reply)
                ),
            });
        }
    }
    Ok(())
}

/// A doorbell waiter's grant, decoded from its refresh: held from the pipeline's send time
/// for the claim plus the block (asserted here against what `deliver` made of it).
pub fn check_grant(world: &World, c: &Client, req: Req) -> Result<(), Violation> {
    if let (Kind::Acquire(Mode::Refresh { block }), Phase::Holding { anchor, ttl, .. }) =
        (req.kind, &c.phase)
        && (*anchor != req.sent || *ttl != world.claim_ms + block)
    {
        return Err(Violation {
            invariant: "the take-up reaches a doorbell waiter with its grant",
            detail: format!(
                "{} holds from {anchor} for {ttl} ms, not from {} for {} ms",
                c.token,
                req.sent,
                world.claim_ms + block
            ),
        });
    }
    Ok(())
}
