//! Sets of mixed modes (issue 27, `--shared-key K`): that key shared, the others exclusive, each
//! key in its own line and mode. A mixed set runs beside a reader of its shared key and
//! excludes a writer of it and anyone on its exclusive keys; what its command is told per key;
//! `acquire --env-file` with renew and release; nested runs per key; the refusals. Also two
//! things every set says: the lock-order warning of a nested run that inverts the sets' order,
//! and the notice of a held key lost while the set waits for a later one.
//!
//! Every wait is bounded and synchronised by files the commands write, never by sleeps.

use std::process::Command;

use crate::fixtures::*;

/// `-n` attempt of `keys` (with `extra`): its exit code.
fn try_once(redis: &Redis, keys: &[&str], extra: &[&str]) -> Option<i32> {
    let mut cmd = distlock(redis);
    cmd.args(["run", "-n"]);
    for key in keys {
        cmd.args(["-k", key]);
    }
    cmd.args(extra).args(["--", "true"]);
    run(&mut cmd).status.code()
}

/// The value of `name` in `env`'s output.
fn var(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .map(str::to_owned)
}

/// A mixed set `-k a -k b --shared-key a` holds beside a reader of `a` (both hold at once, each
/// until the test lets it go); meanwhile a writer of `a` and anything on `b` are busy, another
/// reader of `a` is not. Then a writer of `a` holds, and the mixed set waits for it.
#[test]
fn a_mixed_set_runs_beside_a_reader_and_excludes_a_writer_and_its_exclusive_key() {
    let redis = Redis::start();
    let (dr, dm, dw) = (Scratch::new(), Scratch::new(), Scratch::new());
    let mut reader = Holder::new(distlock(&redis), &dr, "mx-a")
        .args(&["--shared"])
        .says("$DISTLOCK_MODE")
        .hold();
    let mixed = Holder::new(distlock(&redis), &dm, "mx-a")
        .args(&["-k", "mx-b", "--shared-key", "mx-a"])
        .says("\"$DISTLOCK_MODE0 $DISTLOCK_MODE1\"")
        .hold();
    // Both hold at once: the overlap is proven by both handshakes, neither released yet.
    assert_eq!(reader.said(), "shared");
    assert_eq!(mixed.said(), "shared exclusive");
    assert_eq!(try_once(&redis, &["mx-a"], &[]), Some(75), "a writer of a");
    assert_eq!(try_once(&redis, &["mx-b"], &[]), Some(75), "a writer of b");
    assert_eq!(
        try_once(&redis, &["mx-b"], &["--shared"]),
        Some(75),
        "a reader of b"
    );
    assert_eq!(
        try_once(&redis, &["mx-a"], &["--shared"]),
        Some(0),
        "another reader of a"
    );
    reader.release();
    finish(reader.into_child());
    let out = mixed.finish();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A writer of a holds: the mixed set waits in a's line, and holds once the writer ends.
    let mut writer = Holder::new(distlock(&redis), &dw, "mx-a").hold();
    let dm2 = Scratch::new();
    let waiting = Holder::new(distlock(&redis), &dm2, "mx-a")
        .args(&["-k", "mx-b", "--shared-key", "mx-a"])
        .says("\"$DISTLOCK_MODE0 $DISTLOCK_MODE1\"")
        .start();
    wait_until("the mixed set to wait for a", || redis.in_line("mx-a") == 1);
    assert!(
        !std::fs::read_to_string(dm2.path("held")).is_ok_and(|s| s.ends_with('\n')),
        "the mixed set ran beside a writer of its shared key"
    );
    writer.release();
    finish(writer.into_child());
    assert_eq!(waiting.said(), "shared exclusive");
    let out = waiting.finish();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Nothing is left behind but the fence counters.
    let mut keys: Vec<String> = redis.cmd(&["KEYS", "*"]);
    keys.sort();
    assert_eq!(
        keys,
        vec![
            format!("{}:fence", lock_key("mx-a")),
            format!("{}:fence", lock_key("mx-b"))
        ]
    );
}

/// The command of a mixed set is told each key's mode, in the order typed, and its
/// `DISTLOCK_HELD` entries carry each key's limit (0: shared).
#[test]
fn a_mixed_sets_command_is_told_each_keys_mode() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let env = dir.str("env");
    let out = run(distlock(&redis)
        .args([
            "run",
            "-k",
            "me-b",
            "-k",
            "me-a",
            "--shared-key",
            "me-a",
            "--",
        ])
        .args(["sh", "-c", &format!("env > {env}")]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let text = std::fs::read_to_string(&env).unwrap();
    assert_eq!(var(&text, "DISTLOCK_KEYS").as_deref(), Some("me-b me-a"));
    assert_eq!(var(&text, "DISTLOCK_MODE0").as_deref(), Some("exclusive"));
    assert_eq!(var(&text, "DISTLOCK_MODE1").as_deref(), Some("shared"));
    assert_eq!(var(&text, "DISTLOCK_MODE"), None, "no single-key variable");
    let held: serde_json::Value =
        serde_json::from_str(&var(&text, "DISTLOCK_HELD").unwrap()).unwrap();
    let limits: Vec<(String, u64)> = held
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let lock = h["lock"].as_str().unwrap();
            let key = if lock.ends_with("{me-a}") {
                "me-a"
            } else {
                "me-b"
            };
            (key.to_owned(), h["limit"].as_u64().unwrap())
        })
        .collect();
    assert!(limits.contains(&("me-a".into(), 0)), "{held}");
    assert!(limits.contains(&("me-b".into(), 1)), "{held}");
}

/// What a mixed set cannot keep is refused at once (64, one line naming the fix), with
/// nothing sent: nothing listens on port 1 (a refusal that sent anything would fail with 69).
#[test]
fn what_shared_key_cannot_keep_is_refused_before_anything_is_sent() {
    let refused = |command: &str, args: &[&str], says: &str| {
        let out = run(bare_distlock()
            .args(["--redis", "redis://127.0.0.1:1", command])
            .args(args)
            .args(if command == "run" {
                &["--", "true"][..]
            } else {
                &["--json"][..]
            }));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    };
    for command in ["run", "acquire"] {
        refused(
            command,
            &["-k", "a", "-k", "b", "--shared-key", "c"],
            "--shared-key \"c\" names a key not given with -k; add -k c",
        );
        refused(
            command,
            &["-k", "a", "-k", "b", "--shared", "--shared-key", "a"],
            "--shared-key is redundant with --shared",
        );
        refused(
            command,
            &[
                "-k",
                "a",
                "-k",
                "b",
                "--shared-key",
                "a",
                "--min-interval",
                "1m",
            ],
            "--shared-key does not go with --min-interval or --cooldown",
        );
        refused(
            command,
            &[
                "-k",
                "a",
                "-k",
                "b",
                "--shared-key",
                "a",
                "--cooldown",
                "1m",
            ],
            "--shared-key does not go with --min-interval or --cooldown",
        );
        refused(
            command,
            &["-k", "a", "--shared-key", "a", "--limit", "2"],
            "--shared-key does not go with --limit",
        );
        refused(
            command,
            &["-k", "a", "--shared-key", "a", "--supersede"],
            "--shared-key does not go with --supersede or --replace",
        );
        refused(
            command,
            &["-k", "a", "-k", "b", "--shared-key", "a", "--replace"],
            "--replace takes one key",
        );
        refused(
            command,
            &[
                "--redis",
                "redis://127.0.0.1:1",
                "--redis",
                "redis://127.0.0.1:2",
                "-k",
                "a",
                "-k",
                "b",
                "--shared-key",
                "a",
            ],
            "--shared-key needs a line of waiters, which a Redlock",
        );
    }
}

/// `acquire --env-file` of a mixed set writes each key's mode; the shared key admits another
/// reader and refuses a writer; a later step renews (the readers' marks follow) and releases
/// every key from the file. `--json` gives each key's mode too.
#[test]
fn acquire_renew_and_release_a_mixed_set_from_an_env_file() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let file = dir.str("env");
    let out = run(distlock(&redis).args([
        "acquire",
        "-k",
        "ma-a",
        "-k",
        "ma-b",
        "--shared-key",
        "ma-a",
        "--ttl",
        "20s",
        "--env-file",
        &file,
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("DISTLOCK_MODE0=shared\n"), "{text}");
    assert!(text.contains("DISTLOCK_MODE1=exclusive\n"), "{text}");
    assert_eq!(try_once(&redis, &["ma-a"], &["--shared"]), Some(0));
    assert_eq!(try_once(&redis, &["ma-a"], &[]), Some(75));
    assert_eq!(try_once(&redis, &["ma-b"], &["--shared"]), Some(75));
    let shell = |what: &str| {
        let script = format!(
            "set -a; . {file}; set +a; exec {bin} {what}",
            bin = env!("CARGO_BIN_EXE_distlock")
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script])
            .env("DISTLOCK_REDIS_URL", redis.url())
            .env_remove("DISTLOCK_KEY")
            .env_remove("DISTLOCK_TOKEN");
        run(&mut cmd)
    };
    let out = shell("renew --ttl 60s");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let slots = format!("{}:slots", lock_key("ma-a"));
    assert!(redis.pttl(&slots) > 50_000, "{}", redis.pttl(&slots));
    // The readers' mark (the mutex key) and the protocol marker follow the reader's slot.
    assert!(redis.pttl(&lock_key("ma-a")) > 50_000);
    let protocol = format!("{}:protocol", lock_key("ma-a"));
    assert!(redis.pttl(&protocol) > 50_000);
    assert!(redis.pttl(&lock_key("ma-b")) > 50_000);
    let out = shell("release");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!redis.exists(&lock_key("ma-a")) && !redis.exists(&lock_key("ma-b")));
    assert!(!redis.exists(&slots));
    assert_eq!(try_once(&redis, &["ma-a"], &[]), Some(0));
    let out = shell("release");
    assert_eq!(out.status.code(), Some(77), "{}", stderr(&out));
    // --json: each key's mode.
    let out = run(distlock(&redis).args([
        "acquire",
        "-k",
        "mj-a",
        "-k",
        "mj-b",
        "--shared-key",
        "mj-b",
        "--json",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["locks"][0]["mode"], "exclusive", "{json}");
    assert_eq!(json["locks"][1]["mode"], "shared", "{json}");
}

/// Nested runs under a mixed set, per key: shared in shared and anything in exclusive reenter
/// (told the mode held); exclusive inside the shared key is refused at once (65), for one key
/// and for a set, the command not run.
#[test]
fn nested_runs_under_a_mixed_set_reenter_per_key_and_exclusive_in_shared_is_refused() {
    let redis = Redis::start();
    let nested = |inner: &str| {
        let mut cmd = distlock(&redis);
        cmd.env("PATH", path_with_distlock())
            .args(["run", "-k", "mn-a", "-k", "mn-b", "--shared-key", "mn-a"])
            .args([
                "--",
                "sh",
                "-c",
                &format!(
                    "distlock run {inner} -- sh -c \
                     'echo \"ran $DISTLOCK_KEYS:$DISTLOCK_MODE0:$DISTLOCK_MODE1\"'"
                ),
            ]);
        run(&mut cmd)
    };
    let out = nested("-k mn-a --shared");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran mn-a:shared:\n");
    let out = nested("-k mn-b --shared");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ran mn-b:exclusive:\n"
    );
    let out = nested("-k mn-b -k mn-a --shared-key mn-a");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ran mn-b mn-a:exclusive:shared\n"
    );
    for inner in [
        "-k mn-a",
        "-k mn-a -k mn-b",
        "-k mn-a -k mn-b --shared-key mn-b",
    ] {
        let out = nested(inner);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(65), "{inner}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{inner}: the nested command must not run"
        );
        assert!(err.contains("would wait for itself"), "{inner}: {err}");
    }
}

/// A nested run that waits for a key below one its parent holds (key order) is warned once,
/// naming both keys and the fix; not with `-q`, not in the consistent order, not when the key
/// is free.
#[test]
fn a_nested_run_that_inverts_the_key_order_is_warned_when_its_key_is_busy() {
    let redis = Redis::start();
    // The outer run holds `outer`; its command runs `distlock run INNER -k inner`, which waits
    // while `inner` is held by someone else: the outer run's stderr says what the inner said.
    let nested = |outer: &str, inner: &str, flags: &str, busy: bool| -> String {
        let dir = Scratch::new();
        let holder = busy.then(|| Holder::new(distlock(&redis), &dir, inner).hold());
        let mut cmd = distlock(&redis);
        cmd.env("PATH", path_with_distlock())
            .args(["run", "-k", outer, "--", "sh", "-c"])
            .arg(format!("distlock {flags} run -k {inner} -- true"));
        let child = spawn(&mut cmd);
        if let Some(mut holder) = holder {
            wait_until("the nested run to wait", || redis.in_line(inner) == 1);
            holder.release();
            finish(holder.into_child());
        }
        let out = finish(child);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stderr(&out)
    };
    let err = nested("lo-b", "lo-a", "", true);
    let warning = "waiting for lock \"lo-a\" while the run that started this one holds \"lo-b\"";
    assert_eq!(err.matches(warning).count(), 1, "{err}");
    assert!(
        err.contains("take both in one outer run (-k lo-a -k lo-b)"),
        "{err}"
    );
    let line = err.lines().find(|l| l.contains(warning)).unwrap();
    assert!(line.starts_with("distlock:"), "{line}");
    let err = nested("lo-b", "lo-a", "-q", true);
    assert!(!err.contains("key order"), "-q: {err}");
    let err = nested("lo-a", "lo-b", "", true);
    assert!(!err.contains("key order"), "the consistent order: {err}");
    let err = nested("lo-b", "lo-a", "", false);
    assert!(!err.contains("key order"), "a free key: {err}");
}

/// A set that holds its first key and waits for its second (held by another run) loses the
/// first (`break`): it says so once, naming the key, gives everything back, starts again, and
/// runs its command once the second key is free.
#[test]
fn a_key_lost_while_the_set_waits_is_told_once_and_the_set_starts_again() {
    let redis = Redis::start();
    let (dh, ds) = (Scratch::new(), Scratch::new());
    let mut holder = Holder::new(distlock(&redis), &dh, "ls-b").hold();
    let set = Holder::new(distlock(&redis), &ds, "ls-a")
        .args(&["-k", "ls-b"])
        .start();
    wait_until("the set to hold a and wait for b", || {
        redis.in_line("ls-b") == 1 && redis.exists(&lock_key("ls-a"))
    });
    let out = run(distlock(&redis).args(["break", "-k", "ls-a", "-y"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // It finds out at its next look at a (within a third of its claim), gives b's place back,
    // and takes a again.
    wait_until("the set to take a again", || {
        redis.exists(&lock_key("ls-a"))
    });
    holder.release();
    finish(holder.into_child());
    let out = set.finish();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let notice = "lock \"ls-a\" of set \"ls-a ls-b\" was lost while it waited for \"ls-b\"";
    assert_eq!(err.matches(notice).count(), 1, "{err}");
    assert!(err.contains("starts again from its first key"), "{err}");
}

/// On a Cluster, with the shared key and the exclusive one on two primaries: the mixed set
/// holds beside a reader of its shared key, and excludes a writer of it and a reader of its
/// exclusive key.
#[test]
fn a_mixed_set_on_a_cluster_across_two_primaries() {
    use crate::fixtures::topology::Cluster;
    let cluster = Cluster::start(3, 0);
    let url = cluster.seeds_url();
    let (a, b) = (cluster.key_on(0, "mc"), cluster.key_on(1, "mc"));
    let at = || {
        let mut cmd = bare_distlock();
        cmd.env("DISTLOCK_REDIS_URL", &url);
        cmd
    };
    let (dr, dm) = (Scratch::new(), Scratch::new());
    let reader = Holder::new(at(), &dr, &a)
        .args(&["--shared"])
        .says("$DISTLOCK_MODE")
        .hold();
    let mixed = Holder::new(at(), &dm, &a)
        .args(&["-k", &b, "--shared-key", &a])
        .says("\"$DISTLOCK_MODE0 $DISTLOCK_MODE1\"")
        .hold();
    assert_eq!(reader.said(), "shared");
    assert_eq!(mixed.said(), "shared exclusive");
    let try_once = |key: &str, extra: &[&str]| {
        run(at()
            .args(["run", "-n", "-k", key])
            .args(extra)
            .args(["--", "true"]))
        .status
        .code()
    };
    assert_eq!(try_once(&a, &[]), Some(75), "a writer of the shared key");
    assert_eq!(
        try_once(&b, &["--shared"]),
        Some(75),
        "a reader of the other"
    );
    for holder in [reader, mixed] {
        let out = holder.finish();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    assert_eq!(try_once(&a, &[]), Some(0));
    assert_eq!(try_once(&b, &[]), Some(0));
}
