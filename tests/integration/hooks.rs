//! Issue 28: `run --hook` (its stdin, environment, timing and failures), `--warn-after` and
//! `--warn-wait`, and what status, list and check make of a stored `--warn-after`.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fixtures::*;

/// A hook that saves its stdin and environment in `dir` (`NAME.stdin`, `NAME.env`; each file
/// appears whole, once written), and says `hook-says` on its stdout.
fn saving_hook(dir: &Scratch, name: &str) -> String {
    let base = dir.str(name);
    format!(
        "cat > {base}.stdin.tmp; env > {base}.env.tmp; mv {base}.stdin.tmp {base}.stdin; \
         mv {base}.env.tmp {base}.env; echo hook-says"
    )
}

/// The value of `name` in an `env` listing, if set.
fn var<'a>(env: &'a str, name: &str) -> Option<&'a str> {
    env.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
}

/// A run nested in another run (so distlock's own environment holds the outer lock's token and
/// DISTLOCK_HELD) times out: its hook gets the timed-out JSON line on stdin, the facts in its
/// environment, and none of the outer lock's secrets; its output goes to stderr, never stdout.
#[test]
fn the_hook_gets_the_json_line_and_the_facts_but_never_a_token() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let hook = saving_hook(&dir, "t");
    let out = run(distlock(&redis).args(["run", "-k", "outer", "--"]).args([
        env!("CARGO_BIN_EXE_distlock"),
        "run",
        "-k",
        "inner",
        "--timeout",
        "200ms",
        "--hook",
        &hook,
        "--",
        "sleep",
        "30",
    ]));
    assert_eq!(out.status.code(), Some(79), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "stdout: {:?}", out.stdout);
    assert!(stderr(&out).contains("hook-says\n"), "{}", stderr(&out));

    let line = wait_for_file(&dir.path("t.stdin"));
    assert_eq!(line.lines().count(), 1, "{line}");
    let json: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(json["event"], "timed-out");
    assert_eq!(json["key"], "inner");
    assert_eq!(json["exit"], 79);

    let env = wait_for_file(&dir.path("t.env"));
    assert_eq!(var(&env, "DISTLOCK_EVENT"), Some("timed-out"), "{env}");
    assert_eq!(var(&env, "DISTLOCK_KEY"), Some("inner"), "{env}");
    assert_eq!(var(&env, "DISTLOCK_EXIT"), Some("79"), "{env}");
    let id = var(&env, "DISTLOCK_ID").unwrap_or_else(|| panic!("no id: {env}"));
    assert_eq!(id.len(), 8, "{env}");
    for secret in [
        "DISTLOCK_TOKEN",
        "DISTLOCK_HELD",
        "DISTLOCK_FENCE",
        "DISTLOCK_HOOK",
    ] {
        assert_eq!(var(&env, secret), None, "{secret} leaked: {env}");
    }
}

/// A lost lock runs the hook only once the command's group got its signal: the command
/// records the TERM it got, the hook whether that record existed when it started.
#[test]
fn the_hook_of_a_loss_starts_after_the_group_got_its_signal() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let (signalled, ready, hooked) = (dir.str("signalled"), dir.str("ready"), dir.str("hooked"));
    let hook = format!(
        "if [ -e {signalled} ]; then w=after; else w=before; fi; \
         echo \"$w $DISTLOCK_EVENT $DISTLOCK_REASON $DISTLOCK_EXIT\" > {hooked}.tmp; mv {hooked}.tmp {hooked}"
    );
    let script = format!(
        "trap 'echo TERM > {signalled}; exit 1' TERM; echo > {ready}; while :; do sleep 0.05; done"
    );
    let mut holder = spawn(distlock(&redis).args([
        "run", "-k", "lost", "--ttl", "2s", "--hook", &hook, "--", "sh", "-c", &script,
    ]));
    wait_while_running("the command to start", &mut holder, || {
        std::path::Path::new(&ready).exists()
    });
    // An operator takes the key: the next renewal finds it gone.
    let _: i64 = redis.cmd(&["DEL", &lock_key("lost")]);
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert_eq!(
        wait_for_file(&dir.path("hooked")).trim(),
        "after lost not-held 124"
    );
}

/// A hook past --hook-timeout is stopped and reported once; a failing hook is one warning;
/// neither changes the exit code, which stays the command's.
#[test]
fn slow_and_failing_hooks_are_one_warning_and_keep_the_exit_code() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let pid_file = dir.str("hook-pid");
    let hook = format!("echo $$ > {pid_file}; exec sleep 60");
    let started = Instant::now();
    let out = run(distlock(&redis).args([
        "run",
        "-k",
        "slow",
        "--hook-events",
        "acquired",
        "--hook-timeout",
        "500ms",
        "--hook",
        &hook,
        "--",
        "sh",
        "-c",
        "exit 3",
    ]));
    // 500ms, then SIGTERM (which sleep obeys): far from the hook's 60s.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("--hook for").count(), 1, "{err}");
    assert!(
        err.contains(
            "the --hook for acquired failed: it was still running after --hook-timeout 500ms"
        ),
        "{err}"
    );
    assert!(!alive(read_pid(&dir.path("hook-pid"))));

    let out = run(distlock(&redis).args([
        "run",
        "-k",
        "failing",
        "--hook-events",
        "released",
        "--hook",
        "echo oops >&2; exit 7",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err,
        "oops\ndistlock: warning: the --hook for released failed: it exited with 7\n"
    );

    let out = run(distlock(&redis).args([
        "run",
        "-k",
        "x",
        "--hook",
        "true",
        "--hook-events",
        "lost,nope",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--hook-events: no event \"nope\""),
        "{}",
        stderr(&out)
    );
}

/// --warn-after: one held-too-long (warning and hook) once the command has held the lock that
/// long, not before and not again; stored with the holder, so that status and list show it and
/// check warns without -w.
#[test]
fn warn_after_fires_once_and_is_shown_by_status_list_and_check() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let hooked = dir.str("hooked");
    let started = Instant::now();
    let holding = Holder::new(distlock(&redis), &dir, "wa")
        .args(&[
            "--warn-after",
            "1s",
            "--hook",
            &format!("echo \"$DISTLOCK_EVENT\" >> {hooked}"),
        ])
        .hold();
    let ready = Instant::now();
    wait_for_file(&dir.path("hooked"));
    let fired = Instant::now();
    // Not before 1s of holding (which began after `started`), and soon after 1s from the
    // command's readiness (generously: a loaded machine).
    assert!(
        fired - started >= Duration::from_secs(1),
        "{:?}",
        fired - started
    );
    assert!(
        fired - ready < Duration::from_secs(5),
        "{:?}",
        fired - ready
    );

    let status = run(distlock(&redis).args(["status", "-k", "wa"]));
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains(", over its --warn-after 1s\n"), "{text}");
    let list = run(distlock(&redis).arg("list"));
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains(" (over 1s)\t"), "{text}");
    let json = run(distlock(&redis).args(["status", "--json", "-k", "wa"]));
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["holder"]["warn_after_ms"], 1000);
    let check = run(distlock(&redis).args(["check", "-k", "wa"]));
    let line = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{line}");
    assert!(
        line.starts_with("DISTLOCK WARNING: ") && line.contains("(over its --warn-after 1s)"),
        "{line}"
    );
    assert!(line.contains("| held="), "{line}");
    assert!(
        line.split("held=").nth(1).unwrap().contains(";1;"),
        "{line}"
    );

    // Held twice as long: still one warning, one hook.
    wait_until("a hold of 2s", || {
        let out = run(distlock(&redis).args(["status", "--json", "-k", "wa"]));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["held_for_ms"].as_u64().unwrap_or(0) >= 2000
    });
    let out = holding.finish();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err,
        "distlock: warning: the command has held the lock for 1s (--warn-after 1s) and still runs\n"
    );
    assert_eq!(std::fs::read_to_string(&hooked).unwrap(), "held-too-long\n");
}

/// --warn-wait: one long-wait (warning and hook) naming the holder, while the wait goes on.
#[test]
fn warn_wait_names_the_holder() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let holding = Holder::new(distlock(&redis), &dir, "ww").hold();
    let hook = saving_hook(&dir, "w");
    let waiter = spawn(distlock(&redis).args([
        "run",
        "-k",
        "ww",
        "--warn-wait",
        "300ms",
        "--hook",
        &hook,
        "--",
        "true",
    ]));
    let env = wait_for_file(&dir.path("w.env"));
    assert_eq!(var(&env, "DISTLOCK_EVENT"), Some("long-wait"), "{env}");
    let pid = holding.pid().to_string();
    assert_eq!(
        var(&env, "DISTLOCK_HOLDER_PID"),
        Some(pid.as_str()),
        "{env}"
    );
    assert!(var(&env, "DISTLOCK_HOLDER_HOST").is_some(), "{env}");
    let waited: u64 = var(&env, "DISTLOCK_WAITED_MS").unwrap().parse().unwrap();
    assert!(waited >= 300, "{env}");
    let json: Value = serde_json::from_str(&wait_for_file(&dir.path("w.stdin"))).unwrap();
    assert_eq!(json["event"], "long-wait");
    assert_eq!(json["holder"]["pid"].to_string(), pid);

    let held = holding.finish();
    assert_eq!(held.status.code(), Some(0), "{}", stderr(&held));
    let out = finish(waiter);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("--warn-wait 300ms").count(), 1, "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("distlock: warning: waited ")
                && l.contains("and still waiting (1st in line): held by ")
                && l.contains(&format!(" pid {pid} ("))),
        "{err}"
    );
}
