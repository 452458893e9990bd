//! Issue 10: locks behind Redis Sentinel (`redis+sentinel://`), on a real primary with replicas
//! and three real sentinels: the primary is found through the sentinels and confirmed with
//! ROLE; a failover between runs and during a run; all sentinels down.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fixtures::topology::Sentinel;
use crate::fixtures::*;

fn at(url: &str) -> Command {
    let mut cmd = bare_distlock();
    cmd.env("DISTLOCK_REDIS_URL", url);
    cmd
}

/// Every subcommand works through the sentinels, on the primary they name; a failover between
/// two runs sends the second one to the new primary.
#[test]
fn every_subcommand_through_the_sentinels_and_a_failover_between_runs() {
    let mut topo = Sentinel::start(1);
    let url = topo.url();
    let dir = Scratch::new();
    let out = run(at(&url)
        .args(["-v", "run", "-k", "s1", "--", "sh", "-c"])
        .arg(format!("echo $DISTLOCK_FENCE > {}", dir.str("fence"))));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // -v names the primary the sentinels named.
    let primary = topo.primary_addr();
    assert!(
        stderr(&out).contains(&format!("(primary redis://{primary})")),
        "{}",
        stderr(&out)
    );
    assert!(!wait_for_file(&dir.path("fence")).trim().is_empty());

    // acquire / status / list / renew / release / break, by the same URL.
    let out = run(at(&url).args(["acquire", "-k", "s2", "--ttl", "30s"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let primary = topo.primary();
    assert_eq!(topo.node(primary).get(&lock_key("s2")), Some(token.clone()));
    let out = run(at(&url).args(["status", "-k", "s2"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(at(&url).args(["list"]));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("s2"),
        "{}",
        stderr(&out)
    );
    let out = run(at(&url).args(["renew", "-k", "s2", "--token", &token]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Failover: the lock (replicated) is on the new primary; release finds it there.
    wait_until("the replica to have the lock", || {
        topo.node(1 - primary).get(&lock_key("s2")) == Some(token.clone())
    });
    let new = topo.failover();
    assert_ne!(new, primary);
    let out = run(at(&url).args(["release", "-k", "s2", "--token", &token]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!topo.node(new).exists(&lock_key("s2")));

    // The old primary still answers as a primary for a while: distlock must not use it.
    let out = run(at(&url).args(["run", "-k", "s3", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(at(&url).args(["acquire", "-k", "s4"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(topo.node(new).exists(&lock_key("s4")));
    assert!(!topo.node(primary).exists(&lock_key("s4")));
    let out = run(at(&url).args(["break", "-k", "s4", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!topo.node(new).exists(&lock_key("s4")));
}

/// A failover during a run whose lock reached the new primary: the renewals follow the new
/// primary (the old one still accepts writes for a while, which would be lost) and the run
/// ends normally, releasing on the new primary. Then a SIGKILLed primary, during a run.
#[test]
fn a_run_survives_failovers_when_its_lock_was_replicated() {
    let mut topo = Sentinel::start(2);
    let url = topo.url();
    let dir = Scratch::new();
    // The TTL must outlast the automatic failover below (the primary judged down after 3 s,
    // then an election and a promotion: 5.3 s measured), which a loaded machine stretches, and
    // an election that fails stretches by 6 s (twice the failover timeout) before the next
    // one: a TERM at 20 s - 4 s of grace leaves room for both. Frequent renewals keep the
    // waits short.
    let mut holder = Holder::new(at(&url), &dir, "fo")
        .args(&["--ttl", "20s", "--renew-every", "1s"])
        .then(&format!("echo done > {}", dir.str("done")))
        .hold();
    let old = topo.primary();
    let token = topo.node(old).get(&lock_key("fo")).unwrap();
    wait_until("the replicas to have the lock", || {
        (0..3).all(|i| topo.node(i).get(&lock_key("fo")) == Some(token.clone()))
    });
    let new = topo.failover();
    // A renewal lands on the new primary (it no longer replicates the old one, so a longer
    // expiry there is distlock's doing), while the command runs on.
    wait_renewed_on(topo.node(new), &lock_key("fo"), holder.child());
    topo.settle_now();

    // Now the automatic path: the primary dies; the sentinels promote a replica.
    wait_until("the replicas to have the lock", || {
        (0..3)
            .filter(|i| topo.node(*i).is_up())
            .all(|i| topo.node(i).get(&lock_key("fo")) == Some(token.clone()))
    });
    let newer = topo.kill_primary();
    wait_renewed_on(topo.node(newer), &lock_key("fo"), holder.child());

    let out = holder.finish();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(wait_for_file(&dir.path("done")), "done\n");
    // Released on the primary the sentinels name (the same node, unless a loaded machine made
    // them fail over once more).
    let now = topo.primary();
    assert!(
        !topo.node(now).exists(&lock_key("fo")),
        "the lock is left on node {now}, the primary (node {newer} after the kill); \
         distlock said: {}",
        stderr(&out)
    );
}

/// A failover that loses the lock (the replica that is promoted does not have it: replication
/// is asynchronous): the next renewal asks the sentinels, finds the lock gone on the new
/// primary, and the command is killed (124).
#[test]
fn a_failover_that_loses_the_lock_kills_the_command() {
    let mut topo = Sentinel::start(1);
    let url = topo.url();
    let dir = Scratch::new();
    let primary = topo.primary();
    let replica = 1 - primary;
    let holder = at(&url)
        .args([
            "run",
            "-k",
            "lost",
            "--ttl",
            "6s",
            "--kill-grace",
            "500ms",
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("echo $$ > {}; exec sleep 60", dir.str("pid")))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let child = read_pid(&dir.path("pid"));
    // The write that did not make it: delete the lock on the replica alone (a write on a
    // writable replica stays local).
    wait_until("the replica to have the lock", || {
        topo.node(replica).exists(&lock_key("lost"))
    });
    topo.node(replica)
        .cmd::<()>(&["CONFIG", "SET", "replica-read-only", "no"]);
    topo.node(replica).cmd::<i64>(&["DEL", &lock_key("lost")]);
    assert_eq!(topo.failover(), replica);
    let failed_over = Instant::now();
    wait_dead(child);
    // At the next renewal (every 2s), plus the kill grace (0.5s): not at the end of a TTL kept
    // alive on the old primary, which accepts renewals until it is demoted (about 10s later),
    // then lives 6s more.
    assert!(
        failed_over.elapsed() < Duration::from_secs(5),
        "{:?}",
        failed_over.elapsed()
    );
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(stderr(&out).contains("lost lock"), "{}", stderr(&out));
}

/// Every sentinel refuses connections: exit 69 within the Redis timeout's bound, saying so;
/// sentinels that do not answer (stopped) are waited for as one server would be, until
/// `--unreachable-after`; a service the sentinels do not know: exit 69 at once, naming it.
#[test]
fn all_sentinels_down_and_an_unknown_service() {
    let mut topo = Sentinel::start(0);
    let unknown = topo.url().replace("/distlock-test", "/nosuch");
    let out = run(at(&unknown).args(["run", "-k", "u", "--", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(stderr(&out).contains("\"nosuch\""), "{}", stderr(&out));

    let url = topo.url();
    topo.stop_sentinels();
    let started = Instant::now();
    let out = run(at(&url).args([
        "--redis-timeout",
        "500ms",
        "run",
        "--unreachable-after",
        "1s",
        "-k",
        "u",
        "--",
        "echo",
        "ran",
    ]));
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    topo.cont_sentinels();
    topo.kill_sentinels();
    let started = Instant::now();
    let out = run(at(&url).args(["run", "-k", "u", "--", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(stderr(&out).contains("sentinel"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A holder and a waiter in line across a failover: the release goes to the new primary
/// (asked of the sentinels, not the connection that acquired), hands the lock to the waiter
/// there, and the waiter, whose attempts also ask the sentinels, takes it up: one after the
/// other, never both.
#[test]
fn the_line_survives_a_failover() {
    let mut topo = Sentinel::start(1);
    let url = topo.url();
    let dir = Scratch::new();
    let log = dir.str("log");
    let holder = Holder::new(at(&url), &dir, "line")
        .then(&format!("echo holder >> {log}"))
        .hold();
    let waiter = at(&url)
        .args(["run", "-k", "line", "--", "sh", "-c"])
        .arg(format!("echo waiter >> {log}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let old = topo.primary();
    // Blocked on its doorbell on the primary: the failover unblocks it (UNBLOCKED), and it
    // finds the new primary through the sentinels.
    wait_until("the waiter to be in line on the replica too", || {
        (0..2).all(|i| topo.node(i).in_line("line") == 1) && topo.node(old).blocked_on_doorbell()
    });
    let new = topo.failover();
    assert_ne!(new, old);
    let out = holder.finish();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "holder\nwaiter\n");
    assert!(!topo.node(new).exists(&lock_key("line")));
}

/// A nested run of the lock its parent holds reenters through the sentinels too. The lock's
/// display names the server it reached once connected, which a nested run cannot know before it
/// connects: reentry compares the servers as configured.
#[test]
fn a_nested_run_reenters_through_the_sentinels() {
    let topo = Sentinel::start(1);
    assert_a_nested_run_reenters(at(&topo.url()));
}

/// Issue 24: through the sentinels too, a dead holder's waiter starts within 0.3 s of its
/// lock's expiry.
#[test]
fn a_dead_holders_waiter_starts_within_300ms_of_the_expiry() {
    let topo = Sentinel::start(1);
    let url = topo.url();
    let primary = topo.node(topo.primary());
    assert_a_dead_holders_waiter_starts_promptly(
        &|| at(&url),
        &|_| primary,
        Duration::from_millis(300),
        1,
    );
}

/// A renewal that timed out leaves no connection (it is parked: its request may still be
/// applied); the renewal after it must ask the sentinels first, like one on an open
/// connection. After a failover the old primary answers ROLE `master` until the sentinels
/// demote it (about 10 s later), so a connection confirmed by ROLE alone lands there, and a
/// renewal there keeps the command alive under a lock that the new primary may not have.
#[test]
fn a_write_retried_after_a_timeout_asks_the_sentinels_first() {
    let mut topo = Sentinel::start(1);
    let url = topo.url();
    let dir = Scratch::new();
    let mut cmd = at(&url);
    cmd.args(["--redis-timeout", "300ms"]);
    let mut holder = Holder::new(cmd, &dir, "retry")
        .args(&["--ttl", "10s", "--renew-every", "500ms"])
        .hold();
    let old = topo.primary();
    wait_until("the replica to have the lock", || {
        topo.node(1 - old).exists(&lock_key("retry"))
    });
    // Writes wait on the old primary (ROLE and the sentinels' pings are still answered): a
    // renewal times out, and its connection is parked.
    let timeouts = topo.node(old).successful_calls("role");
    topo.node(old)
        .cmd::<()>(&["CLIENT", "PAUSE", "8000", "WRITE"]);
    wait_until(
        "a renewal to time out and be retried (ROLE on a new connection)",
        || topo.node(old).successful_calls("role") > timeouts,
    );
    let new = topo.failover();
    assert_ne!(new, old);
    // From now on the sentinels name the new primary: no renewal may connect to the old one.
    let roles = topo.node(old).successful_calls("role");
    topo.node(old).cmd::<()>(&["CLIENT", "UNPAUSE"]);
    wait_renewed_on(topo.node(new), &lock_key("retry"), holder.child());
    wait_renewed_on(topo.node(new), &lock_key("retry"), holder.child());
    assert_eq!(
        topo.node(old).successful_calls("role"),
        roles,
        "a renewal retried after a timeout connected to the old primary (confirmed by ROLE \
         alone) instead of asking the sentinels"
    );
    let out = holder.finish();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A renewal whose primary no sentinel confirms in time is sent (the lock must not lapse on a
/// healthy primary while the sentinels are slow) but does not count: after a failover the old
/// primary accepts it, and a kill deadline anchored there would outlive the lock on the new
/// one. Sentinels silent for a moment cost nothing (the next renewal is confirmed); silent for
/// longer than the TTL, they end the command (124), however healthy the primary.
#[test]
fn a_renewal_the_sentinels_do_not_confirm_does_not_count() {
    let mut topo = Sentinel::start(1);
    let url = topo.url();
    let dir = Scratch::new();
    let mut cmd = at(&url);
    cmd.args(["--redis-timeout", "300ms"]);
    let mut holder = Holder::new(cmd, &dir, "quiet")
        .args(&[
            "--ttl",
            "3s",
            "--renew-every",
            "500ms",
            "--kill-grace",
            "300ms",
        ])
        .hold();
    let primary = topo.primary();
    // Silent for a moment (a third of the TTL): renewals confirmed before and after keep it.
    topo.stop_sentinels();
    std::thread::sleep(Duration::from_millis(1000));
    topo.cont_sentinels();
    wait_renewed_on(topo.node(primary), &lock_key("quiet"), holder.child());
    wait_renewed_on(topo.node(primary), &lock_key("quiet"), holder.child());
    // Silent for longer than the TTL: the primary goes on accepting renewals (its lock stays
    // alive), none of them counts, and the command is ended by the last confirmed one's TTL.
    topo.stop_sentinels();
    let silent = Instant::now();
    let out = finish_within(holder, Duration::from_secs(10));
    let took = silent.elapsed();
    topo.cont_sentinels();
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(took < Duration::from_secs(5), "{took:?}: {}", stderr(&out));
    assert!(
        stderr(&out).contains("no sentinel answered in time"),
        "{}",
        stderr(&out)
    );
}

/// Wait (bounded) for the holder to exit by itself; past `bound`, release it (and let the
/// test's assertions say what happened).
fn finish_within(mut holder: Holding, bound: Duration) -> std::process::Output {
    let started = Instant::now();
    while started.elapsed() < bound {
        if let Ok(Some(_)) = holder.child().try_wait() {
            return finish(holder.into_child());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    holder.finish()
}
