//! Issue 9: counting semaphores (`--limit N`): up to N holders, each with its own token,
//! renewal, kill deadline and release; a key used with two limits is refused.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::fixtures::*;

/// A slot holder whose command records its fence, shows it is inside (`NAME.in`) and stays
/// until the test lets it go (`NAME.go`).
fn slot_holder(redis: &Redis, dir: &Scratch, key: &str, limit: &str, name: &str) -> Child {
    distlock(redis)
        .args(["run", "-k", key, "--limit", limit, "--", "sh", "-c"])
        .arg(format!(
            "echo \"$DISTLOCK_FENCE\" > {d}/{name}.fence; touch {d}/{name}.in; \
             while [ ! -e {d}/{name}.go ]; do sleep 0.01; done; rm {d}/{name}.in",
            d = dir.0.path().display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn inside(dir: &Scratch) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.0.path())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".in").map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// Six processes on a semaphore of 2: never more than 2 inside at once, the others wait in
/// line and get a slot when one is released; every holder has its own fence.
#[test]
fn never_more_than_the_limit_inside() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let children: Vec<(String, Child)> = (0..6)
        .map(|i| {
            let name = format!("p{i}");
            let child = slot_holder(&redis, &dir, "sem", "2", &name);
            (name, child)
        })
        .collect();
    let mut done = 0;
    let mut max_inside = 0;
    while done < 6 {
        // Two inside while at least two are left, then the last one alone.
        let expected = if done < 5 { 2 } else { 1 };
        wait_until("the slots to fill", || inside(&dir).len() == expected);
        let now_inside = inside(&dir);
        max_inside = max_inside.max(now_inside.len());
        assert!(now_inside.len() <= 2, "{now_inside:?}");
        // Let one go.
        let name = &now_inside[0];
        std::fs::write(dir.path(&format!("{name}.go")), "").unwrap();
        wait_until("it to leave", || !inside(&dir).contains(name));
        done += 1;
        assert!(inside(&dir).len() <= 2);
    }
    assert_eq!(max_inside, 2);
    let mut fences = Vec::new();
    for (name, child) in children {
        let out = finish(child);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        fences.push(
            std::fs::read_to_string(dir.path(&format!("{name}.fence")))
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap(),
        );
    }
    let mut unique = fences.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 6, "every slot has its own fence: {fences:?}");
    let keys: Vec<String> = redis.cmd(&["KEYS", "*"]);
    assert_eq!(keys, vec![format!("{}:fence", lock_key("sem"))]);
}

/// One key, one use: a mutex holder refuses a semaphore, a semaphore refuses a mutex and
/// another limit, naming both (exit 65).
#[test]
fn a_key_used_with_another_limit_is_refused() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let mutex = slot_holder(&redis, &dir, "mixed", "1", "m");
    wait_until("the mutex holder", || !inside(&dir).is_empty());
    let out = run(distlock(&redis).args(["run", "-k", "mixed", "--limit", "3", "--", "true"]));
    assert_eq!(out.status.code(), Some(65), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is held as a mutex")
            && stderr(&out).contains("asked for a semaphore of --limit 3"),
        "{}",
        stderr(&out)
    );
    std::fs::write(dir.path("m.go"), "").unwrap();
    assert_eq!(finish(mutex).status.code(), Some(0));
    let sem = slot_holder(&redis, &dir, "mixed", "3", "s");
    wait_until("the semaphore holder", || !inside(&dir).is_empty());
    for (limit, expected) in [("1", "a mutex"), ("2", "a semaphore of --limit 2")] {
        let out =
            run(distlock(&redis).args(["run", "-k", "mixed", "--limit", limit, "--", "true"]));
        assert_eq!(out.status.code(), Some(65), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("is held as a semaphore of --limit 3 (1 holders")
                && stderr(&out).contains(&format!("asked for {expected}")),
            "{}",
            stderr(&out)
        );
    }
    std::fs::write(dir.path("s.go"), "").unwrap();
    assert_eq!(finish(sem).status.code(), Some(0));
}

/// A holder that crashed (SIGKILL: nothing released) frees its slot when its TTL runs out, by
/// the Redis server's clock.
#[test]
fn a_crashed_holder_frees_its_slot_at_its_ttl() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let crashed = distlock(&redis)
        .args([
            "run", "-k", "crash", "--limit", "2", "--ttl", "2s", "--", "sh", "-c",
        ])
        .arg(format!("touch {}; sleep 100", dir.str("a.in")))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let other = slot_holder(&redis, &dir, "crash", "2", "b");
    wait_until("two holders", || inside(&dir).len() == 2);
    kill(Pid::from_raw(crashed.id() as i32), Signal::SIGKILL).unwrap();
    finish(crashed);
    let killed = Instant::now();
    let out = run(distlock(&redis).args(["run", "-k", "crash", "--limit", "2", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let took = killed.elapsed();
    assert!(
        took < Duration::from_secs(2) + Duration::from_millis(2500),
        "{took:?}"
    );
    std::fs::write(dir.path("b.go"), "").unwrap();
    assert_eq!(finish(other).status.code(), Some(0));
}

/// A nested run of the semaphore its parent holds a slot of keeps that slot (no second one).
#[test]
fn a_nested_run_keeps_its_parents_slot() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let path = path_with_distlock();
    let out = run(distlock(&redis).env("PATH", &path).args([
        "run",
        "-k",
        "nest",
        "--limit",
        "2",
        "--",
        "sh",
        "-c",
        &format!(
            "distlock run -k nest --limit 2 -- sh -c 'redis-cli -p {} ZCARD \"{}:slots\" > {}'",
            redis.port(),
            lock_key("nest"),
            dir.str("slots")
        ),
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.path("slots")).unwrap().trim(),
        "1"
    );
}

/// A semaphore over a Redlock is refused before the command runs: a majority of the nodes
/// does not keep L+1 holders of a semaphore of L apart (see `try_acquire` in
/// src/lock/redlock/mod.rs for a sequence of minority outages that lets 4 holders into a
/// `--limit 3` over 5 persistent nodes). A mutex over the same nodes runs.
#[test]
fn a_redlock_refuses_a_semaphore() {
    let nodes = crate::fixtures::topology::Primaries::start(3);
    let redis_args: Vec<String> = nodes
        .urls()
        .into_iter()
        .flat_map(|u| ["--redis".to_owned(), u])
        .collect();
    let out = run(bare_distlock()
        .args(&redis_args)
        .args(["run", "-k", "sem", "--limit", "2", "--", "true"]));
    // A usage error, before anything is sent, as for --supersede over a Redlock.
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--limit 2 cannot be kept over a Redlock of 3"),
        "{}",
        stderr(&out)
    );
    let out = run(bare_distlock()
        .args(&redis_args)
        .args(["run", "-k", "mutex", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
