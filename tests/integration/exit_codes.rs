//! The exit-code table, row by row, and the one-line messages that go with it.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use crate::fixtures::*;

#[test]
fn child_code_passes_through_and_stdout_stays_the_childs() {
    let redis = Redis::start();
    for code in [0, 1, 3, 42, 255] {
        let out = run(distlock(&redis).args([
            "run",
            "-k",
            "k",
            "--",
            "sh",
            "-c",
            &format!("exit {code}"),
        ]));
        assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
        assert!(out.stdout.is_empty());
        assert!(out.stderr.is_empty(), "{}", stderr(&out));
    }
    // -v explains on stderr only.
    let out = run(distlock(&redis).args(["run", "-v", "-k", "k", "--", "true"]));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).lines().all(|l| l.starts_with("distlock: ")),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("acquired lock"));
    assert!(!redis.exists(&lock_key("k")), "released");
}

#[test]
fn child_environment() {
    let redis = Redis::start();
    let out = run(distlock(&redis).args([
        "run",
        "-k",
        "env-test",
        "--ttl",
        "7s",
        "--",
        "sh",
        "-c",
        "echo \"$DISTLOCK_KEY $DISTLOCK_TTL_MS $DISTLOCK_TOKEN\"",
    ]));
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(fields[0], "env-test");
    assert_eq!(fields[1], "7000");
    assert_eq!(
        uuid::Uuid::parse_str(fields[2]).unwrap().get_version_num(),
        4
    );
}

#[test]
fn killed_child_is_reported_as_a_signal_death() {
    let redis = Redis::start();
    let out = run(distlock(&redis).args(["run", "-k", "k", "--", "sh", "-c", "kill -TERM $$"]));
    assert_eq!(signal_of(&out), Some(libc::SIGTERM), "{:?}", out.status);
    let out = run(distlock(&redis).args(["run", "-k", "k", "--", "sh", "-c", "kill -INT $$"]));
    assert_eq!(signal_of(&out), Some(libc::SIGINT));
    // SIGQUIT re-raised without leaving a core file of distlock behind.
    let out = run(distlock(&redis).args(["run", "-k", "k", "--", "sh", "-c", "kill -QUIT $$"]));
    assert_eq!(signal_of(&out), Some(libc::SIGQUIT));
    assert!(!redis.exists(&lock_key("k")));
}

/// A usage error is one line (the error and where to look), plus one line per clap `tip:`; every
/// line carries the `distlock: ` prefix.
#[test]
fn usage_errors_exit_64_with_one_line_plus_tips() {
    let redis = Redis::start();
    let cases: &[(&[&str], &str)] = &[
        (&["run", "-k", "k", "--bogus", "--", "true"], "--bogus"),
        (&["run", "-k", "k", "--ttl", "30", "--", "true"], "30s"),
        (
            &["run", "-k", "k", "--ttl", "0s", "--", "true"],
            "1s to 24h",
        ),
        (
            &["run", "-k", "k", "--ttl", "1000d", "--", "true"],
            "--ttl 1000d is out of range; use 1s to 24h",
        ),
        (
            &["run", "-k", "k", "--wait", "soon", "--", "true"],
            "duration",
        ),
        (&["run", "-k", "", "--", "true"], "empty"),
        (&["run", "-k", "a{b}", "--", "true"], "hash tag"),
        (&["run", "-k", "k"], "COMMAND"),
        (&["run", "--", "true"], "--key"),
        (
            &[
                "run",
                "-k",
                "k",
                "--ttl",
                "10s",
                "--kill-grace",
                "9s",
                "--",
                "true",
            ],
            "--kill-grace",
        ),
        (
            &["run", "-k", "k", "--renew-every", "1m", "--", "true"],
            "--renew-every",
        ),
        (
            &["run", "-k", "k", "--kill-signal", "STOP", "--", "true"],
            "does not end",
        ),
        (
            &["run", "-k", "k", "--wait-mode", "poll", "--", "true"],
            "notify",
        ),
        (
            &[
                "--redis",
                "http://u:hunter2@h",
                "run",
                "-k",
                "k",
                "--",
                "true",
            ],
            "redis://",
        ),
        (
            &["--redis", "127.0.0.1:6379", "run", "-k", "k", "--", "true"],
            "scheme",
        ),
        (&["--prefix", "a{", "run", "-k", "k", "--", "true"], "brace"),
        (&["frobnicate"], "frobnicate"),
    ];
    for (args, needle) in cases {
        let out = run(distlock(&redis).args(*args));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.starts_with("distlock: "), "{args:?}: {err}");
        assert!(
            first.contains(needle),
            "{args:?}: expected {needle:?} in the first line of {err}"
        );
        assert!(
            err.lines()
                .skip(1)
                .all(|l| l.starts_with("distlock: tip: ")),
            "{args:?}: one line plus tips, got {err}"
        );
        assert!(!err.contains("hunter2"));
        assert!(!err.contains("panicked"));
    }
    // clap's tips each get a line of their own, after the error.
    let out = run(distlock(&redis).args(["run", "-k", "k", "--kil-grace", "1s", "--", "true"]));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(64), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("distlock: unexpected argument '--kil-grace' found (usage: "),
        "{err}"
    );
    assert_eq!(
        lines[1], "distlock: tip: a similar argument exists: '--kill-grace'",
        "{err}"
    );
    assert!(lines[2..].iter().all(|l| l.starts_with("distlock: tip: ")));
    // Arguments that are not UTF-8 (clap refuses them for --key): a message, not a panic.
    use std::os::unix::ffi::OsStrExt;
    let bad = std::ffi::OsStr::from_bytes(b"k\xff");
    let out = run(distlock(&redis)
        .args(["--redis", "redis://u:hunter2@127.0.0.1:1", "run", "-k"])
        .arg(bad)
        .args(["--", "true"]));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("hunter2"),
        "{err}"
    );
    // Nothing was written to Redis by any of them.
    let keys: Vec<String> = redis.cmd(&["KEYS", "*"]);
    assert!(keys.is_empty(), "{keys:?}");
}

/// A value read from a DISTLOCK_* variable is named by the variable, not by the flag the user
/// never typed; a typed flag wins over the variable and is named as typed.
#[test]
fn errors_name_the_environment_variable_a_value_came_from() {
    /// The environment, the arguments, and how the message starts.
    type Case = (
        &'static [(&'static str, &'static str)],
        &'static [&'static str],
        &'static str,
    );
    let cases: &[Case] = &[
        // Refused by clap's value parsers.
        (
            &[("DISTLOCK_TTL", "30")],
            &["run", "-k", "k", "--", "true"],
            "DISTLOCK_TTL=30 (from the environment) has no unit; write 30s for seconds or 30ms \
             for milliseconds",
        ),
        (
            &[("DISTLOCK_TTL", "30")],
            &["run", "-k", "k", "--ttl", "30", "--", "true"],
            "--ttl 30 has no unit; write 30s",
        ),
        (
            &[("DISTLOCK_TTL", "30")],
            &["run", "-k", "k", "-nt30", "--", "true"],
            "--ttl 30 has no unit; write 30s",
        ),
        // Words of the command are not distlock's flags.
        (
            &[("DISTLOCK_TTL", "30")],
            &["run", "-k", "k", "sleep", "--ttl", "30"],
            "DISTLOCK_TTL=30 (from the environment) has no unit",
        ),
        (
            &[("DISTLOCK_WAIT", "")],
            &["acquire", "-k", "k"],
            "DISTLOCK_WAIT=\"\" (from the environment) is empty; write a duration with a unit",
        ),
        (
            &[("DISTLOCK_KILL_SIGNAL", "STOP")],
            &["run", "-k", "k", "--", "true"],
            "DISTLOCK_KILL_SIGNAL=STOP (from the environment) is SIGSTOP, which does not end a process",
        ),
        (
            &[("DISTLOCK_WAIT_MODE", "notfy")],
            &["run", "-k", "k", "--", "true"],
            "invalid value 'notfy' for DISTLOCK_WAIT_MODE (from the environment) [possible values: notify, spin]",
        ),
        (
            &[("DISTLOCK_CONFLICT_EXIT_CODE", "abc")],
            &["acquire", "-k", "k"],
            "invalid value 'abc' for DISTLOCK_CONFLICT_EXIT_CODE (from the environment)",
        ),
        // Refused by the checks in config.
        (
            &[("DISTLOCK_TTL", "25h")],
            &["run", "-k", "k", "--", "true"],
            "DISTLOCK_TTL=25h (from the environment) is out of range; use 1s to 24h",
        ),
        (
            &[("DISTLOCK_TTL", "10s")],
            &["run", "-k", "k", "--ttl", "25h", "--", "true"],
            "--ttl 25h is out of range; use 1s to 24h",
        ),
        (
            &[("DISTLOCK_REDIS_TIMEOUT", "90s")],
            &["status", "-k", "k"],
            "DISTLOCK_REDIS_TIMEOUT=90s (from the environment) is out of range; use 10ms to 60s",
        ),
        // A global option typed after the subcommand still wins over the variable.
        (
            &[("DISTLOCK_REDIS_TIMEOUT", "1s")],
            &["status", "-k", "k", "--redis-timeout", "90s"],
            "--redis-timeout 90s is out of range",
        ),
        (
            &[("DISTLOCK_REDIS_TIMEOUT", "90s")],
            &["--redis-timeout", "90s", "status", "-k", "k"],
            "--redis-timeout 90s is out of range",
        ),
        (
            &[("DISTLOCK_REPORT_EVERY", "10ms")],
            &["acquire", "-k", "k"],
            "DISTLOCK_REPORT_EVERY=10ms (from the environment) is too short; use 1s or more",
        ),
        (
            &[("DISTLOCK_RENEW_EVERY", "1m")],
            &["run", "-k", "k", "--", "true"],
            "DISTLOCK_RENEW_EVERY=1m (from the environment) must be at least 100ms and shorter than --ttl 30s",
        ),
        (
            &[("DISTLOCK_KILL_GRACE", "9s"), ("DISTLOCK_TTL", "10s")],
            &["run", "-k", "k", "--", "true"],
            "DISTLOCK_KILL_GRACE=9s (from the environment) with DISTLOCK_TTL=10s (from the \
             environment) and --renew-every 3.3s leaves no time",
        ),
        (
            &[("DISTLOCK_TLS_CA", "/etc/ssl/ca.pem")],
            &["run", "-k", "k", "--", "true"],
            "DISTLOCK_TLS_CA (from the environment) needs a rediss:// URL",
        ),
        (
            &[("DISTLOCK_PREFIX", "a{")],
            &["run", "-k", "k", "--", "true"],
            "DISTLOCK_PREFIX (from the environment): the prefix",
        ),
        (
            &[("DISTLOCK_TOKEN", "")],
            &["release", "-k", "k"],
            "DISTLOCK_TOKEN (from the environment) is empty or malformed",
        ),
        (
            &[("DISTLOCK_REDIS_URL", "127.0.0.1:6379")],
            &["run", "-k", "k", "--", "true"],
            "DISTLOCK_REDIS_URL (from the environment): the Redis URL has no scheme",
        ),
        // A missing CI secret expands to nothing.
        (
            &[("DISTLOCK_REDIS_URL", "")],
            &["run", "-k", "k", "--", "true"],
            "DISTLOCK_REDIS_URL is set but empty (a missing CI secret?); set it to a URL such as \
             redis://HOST:6379, or unset it",
        ),
        (
            &[("DISTLOCK_REDIS_URL", "redis://127.0.0.1:1")],
            &["--redis", "", "status", "-k", "k"],
            "--redis is empty; give a URL such as redis://HOST:6379",
        ),
        (
            &[("REDIS_URL", "http://u:hunter2@h")],
            &["run", "-k", "k", "--", "true"],
            "REDIS_URL (from the environment): the Redis URL has scheme",
        ),
        // One bad URL among several: every accepted form is shown, Sentinel and Cluster too.
        (
            &[("DISTLOCK_REDIS_URL", "redis://127.0.0.1:1")],
            &[
                "--redis",
                "redis://127.0.0.1:1",
                "--redis",
                "http://u:hunter2@h",
                "status",
                "-k",
                "k",
            ],
            "URL 2 of 2: the Redis URL has scheme \"http\"; use \
             redis://[USER:PASSWORD@]HOST[:PORT][/DB] (rediss:// for TLS, unix:///PATH), several \
             such URLs for a Redlock, \
             redis+sentinel://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/SERVICE[/DB], or \
             redis+cluster://HOST:PORT[,HOST:PORT...]",
        ),
    ];
    for (env, args, expected) in cases {
        let mut cmd = bare_distlock();
        // Unreachable, so that a case that wrongly passes the checks touches no server.
        if !env.iter().any(|(k, _)| k.ends_with("REDIS_URL")) {
            cmd.env("DISTLOCK_REDIS_URL", "redis://127.0.0.1:1");
        }
        let out = run(cmd.envs(env.iter().copied()).args(*args));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(64), "{env:?} {args:?}: {err}");
        assert!(
            err.starts_with(&format!("distlock: {expected}")),
            "{env:?} {args:?}: expected {expected:?}, got {err}"
        );
        assert!(
            err.lines()
                .skip(1)
                .all(|l| l.starts_with("distlock: tip: ")),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
    }
}

#[test]
fn help_and_version_exit_0_and_document_exit_codes() {
    let out = run(bare_distlock().args(["run", "--help"]));
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    for code in ["64", "69", "75", "124", "126", "127", "128+N"] {
        assert!(help.contains(code), "--help lacks exit code {code}");
    }
    // The top level lists the codes of run, the main job, and says where the others are.
    let out = run(bare_distlock().arg("--help"));
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    for code in ["64", "69", "75", "124", "126", "127", "128+N"] {
        assert!(
            help.contains(code),
            "distlock --help lacks exit code {code}"
        );
    }
    assert!(help.contains("distlock COMMAND --help"), "{help}");
    // An environment variable that is not set is named without a value (clap would show
    // `[env: DISTLOCK_TTL=]`, as if it were set to nothing); one that is set shows its value,
    // except the URL and the token, which may hold secrets.
    let out = run(bare_distlock()
        .env("DISTLOCK_WAIT", "5s")
        .env("DISTLOCK_REDIS_URL", "redis://:hunter2@h")
        .args(["run", "--help"]));
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("[env: DISTLOCK_TTL]"), "{help}");
    assert!(help.contains("[env: DISTLOCK_WAIT=5s]"), "{help}");
    assert!(help.contains("[env: DISTLOCK_REDIS_URL]"), "{help}");
    assert!(!help.contains("=]") && !help.contains("hunter2"), "{help}");
    let out = run(bare_distlock().arg("--version"));
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .starts_with("distlock ")
    );
}

#[test]
fn wrong_type_key_exits_65() {
    let redis = Redis::start();
    redis.cmd::<i64>(&["HSET", &lock_key("h"), "f", "v"]);
    let out = run(distlock(&redis).args(["run", "-k", "h", "--", "true"]));
    assert_eq!(out.status.code(), Some(65), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a lock"));
}

#[test]
fn unreachable_redis_exits_69() {
    let mut redis = Redis::start();
    redis.kill();
    let out = run(distlock(&redis).args(["run", "-k", "k", "--", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1);
    assert!(stderr(&out).contains("cannot connect"));
    let out = run(bare_distlock().args([
        "--redis",
        "unix:///nonexistent/redis.sock",
        "run",
        "-k",
        "k",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
}

#[test]
fn wrong_password_exits_69_and_never_shows_a_password() {
    let redis = Redis::start_with(&["--requirepass", "s3cret-pw"]);
    let url = format!("redis://:wr0ng-pw@127.0.0.1:{}", redis.port());
    let out = run(bare_distlock().args(["--redis", &url, "run", "-v", "-k", "k", "--", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("authentication failed"), "{err}");
    assert!(!err.contains("wr0ng-pw"), "{err}");
    // No password at all against a server that needs one.
    let out = run(distlock(&redis).args(["run", "-k", "k", "--", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(stderr(&out).contains("authentication"), "{}", stderr(&out));
    // The right password works, and -v does not show it either (also given through REDIS_URL).
    let url = format!("redis://:s3cret-pw@127.0.0.1:{}", redis.port());
    let out = run(bare_distlock()
        .env("REDIS_URL", &url)
        .args(["run", "-v", "-k", "k", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("redis://:***@127.0.0.1"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("s3cret-pw"));
}

#[test]
fn busy_lock_exits_75_or_the_chosen_code() {
    let redis = Redis::start();
    let key = lock_key("busy");
    redis.cmd::<String>(&["SET", &key, "someone-else", "PX", "60000"]);
    let out = run(distlock(&redis).args(["run", "-k", "busy", "-n", "--", "echo", "ran"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "the command must not run");
    assert!(stderr(&out).contains("is busy (held by another client"));
    let out = run(distlock(&redis).args(["run", "-k", "busy", "--wait", "200ms", "--", "true"]));
    assert_eq!(out.status.code(), Some(75));
    // The cron idiom: skip quietly (cron mails any output), without needing -q; -v explains.
    let out = run(distlock(&redis).args(["run", "-k", "busy", "-n", "-E", "0", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let out =
        run(distlock(&redis).args(["run", "-v", "-k", "busy", "-n", "-E", "0", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("is busy"), "{}", stderr(&out));
    assert_eq!(redis.get(&key).as_deref(), Some("someone-else"));
}

#[test]
fn command_not_found_127_and_not_executable_126() {
    let redis = Redis::start();
    let out = run(distlock(&redis).args(["run", "-k", "k", "--", "no-such-command-xyz"]));
    assert_eq!(out.status.code(), Some(127));
    assert!(stderr(&out).contains("not found"));
    let dir = Scratch::new();
    let script = dir.path("script.sh");
    std::fs::File::create(&script)
        .unwrap()
        .write_all(b"#!/bin/sh\necho hi\n")
        .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(distlock(&redis).args(["run", "-k", "k", "--"]).arg(&script));
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot execute"));
    let out = run(distlock(&redis)
        .args(["run", "-k", "k", "--"])
        .arg(dir.0.path()));
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    assert!(!redis.exists(&lock_key("k")), "no lock left behind");
}

#[test]
fn stdin_and_stdout_pass_through_byte_for_byte() {
    let redis = Redis::start();
    let data: Vec<u8> = (0..1_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let mut child = distlock(&redis)
        .args(["run", "-k", "pipe", "--", "cat"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = data.clone();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = finish(child);
    writer.join().unwrap().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout == data, "stdout differs from stdin");
    assert!(out.stderr.is_empty());
}

#[test]
fn acl_user_with_the_documented_rights_works_and_a_weaker_one_gets_a_hint() {
    let redis = Redis::start();
    // The rights docs/protocol.md documents, exactly.
    let protocol =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.md")).unwrap();
    let line = protocol
        .split('`')
        .find(|part| part.starts_with("~distlock:* &distlock:* -@all"))
        .expect("docs/protocol.md documents the ACL rights");
    let rights: Vec<&str> = line.split_whitespace().collect();
    assert!(rights.contains(&"+zadd"), "{line}");
    let mut args = vec!["ACL", "SETUSER", "locker", "on", ">pw"];
    args.extend(rights);
    redis.cmd::<String>(&args);
    redis.cmd::<String>(&[
        "ACL",
        "SETUSER",
        "weak",
        "on",
        ">pw",
        "~*",
        "&*",
        "-@all",
        "+evalsha",
        "+script|load",
    ]);
    let url = |user: &str| format!("redis://{user}:pw@127.0.0.1:{}", redis.port());
    // Busy first (so the waiting path and its subscription are exercised), then free.
    redis.cmd::<String>(&["SET", &lock_key("acl"), "x", "PX", "300"]);
    let out =
        run(bare_distlock().args(["--redis", &url("locker"), "run", "-k", "acl", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!redis.exists(&lock_key("acl")));
    let out =
        run(bare_distlock().args(["--redis", &url("weak"), "run", "-k", "acl", "--", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the Redis user needs"),
        "{}",
        stderr(&out)
    );
}

/// With the default user left `nopass` (Redis's default), a failed AUTH must not fall back to
/// running as `default`: it ends distlock with 69 and nothing is written.
#[test]
fn failed_auth_is_fatal_even_when_the_default_user_is_open() {
    let redis = Redis::start();
    redis.cmd::<String>(&[
        "ACL", "SETUSER", "alice", "on", ">right", "~*", "&*", "+@all",
    ]);
    let url = format!("redis://alice:wrong@127.0.0.1:{}", redis.port());
    let out = run(bare_distlock().args(["--redis", &url, "run", "-k", "k", "--", "echo", "ran"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).contains("authentication failed"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("wrong"), "{}", stderr(&out));
    assert!(!redis.exists(&lock_key("k")));
}
