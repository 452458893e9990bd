//! Mutual exclusion under real contention, and compatibility of the key layout.

use std::process::Stdio;

use crate::fixtures::*;

/// Many processes increment a counter file with a non-atomic read-sleep-write under the lock,
/// and mark their critical section with an atomic `mkdir`: a lost update or an overlap fails.
fn contend(mode: &str) {
    let redis = Redis::start();
    let dir = Scratch::new();
    std::fs::write(dir.path("counter"), "0\n").unwrap();
    let section = format!(
        "mkdir {inside} || echo overlap >> {overlaps}; n=$(cat {counter}); sleep 0.01; \
         echo $((n + 1)) > {counter}; rmdir {inside}",
        inside = dir.str("inside"),
        overlaps = dir.str("overlaps"),
        counter = dir.str("counter"),
    );
    let contenders = 8;
    let rounds = 5;
    let children: Vec<_> = (0..contenders)
        .map(|_| {
            let script = format!(
                "for i in $(seq {rounds}); do {bin} run -k counter --ttl 5s --wait-mode {mode} -- sh -c '{section}' || exit 1; done",
                bin = env!("CARGO_BIN_EXE_distlock"),
            );
            std::process::Command::new("sh")
                .args(["-c", &script])
                .env("DISTLOCK_REDIS_URL", redis.url())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = finish(child);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let total: u32 = std::fs::read_to_string(dir.path("counter"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !dir.path("overlaps").exists(),
        "critical sections overlapped"
    );
    assert_eq!(total, contenders * rounds, "lost updates");
    assert!(!redis.exists(&lock_key("counter")));
}

#[test]
fn contenders_never_overlap_notify() {
    contend("notify");
}

#[test]
fn contenders_never_overlap_spin() {
    contend("spin");
}

#[test]
fn excludes_and_is_excluded_by_other_clients_of_the_same_layout() {
    // redis-py's Lock, redsync and node-redlock store a bare token with PX under the key name;
    // here a client does exactly that, by hand, under distlock's key for "shared".
    let redis = Redis::start();
    let key = lock_key("shared");
    redis.cmd::<String>(&["SET", &key, "py-token", "NX", "PX", "60000"]);
    let out = run(distlock(&redis).args(["run", "-k", "shared", "-n", "--", "true"]));
    assert_eq!(out.status.code(), Some(75));
    redis.cmd::<i64>(&["DEL", &key]);
    // While distlock holds it, the other client's SET NX fails, and the value is a bare token.
    let dir = Scratch::new();
    let holder = Holder::new(distlock(&redis), &dir, "shared")
        .says("\"$DISTLOCK_TOKEN\"")
        .stdout_piped()
        .hold();
    let token = holder.said();
    assert_eq!(redis.get(&key).as_deref(), Some(token.as_str()));
    let taken: Option<String> = redis.cmd(&["SET", &key, "py-token", "NX", "PX", "60000"]);
    assert_eq!(taken, None);
    let out = holder.finish();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!redis.exists(&key));
}
