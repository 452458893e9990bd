//! `--log-format json`: on every path, every line distlock writes on stderr is one JSON object
//! with `ts`, `level`, `key`, `event` and `msg`, names the right lock, and never shows the
//! password of the Redis URL.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use serde_json::Value;

use crate::fixtures::*;

const PASSWORD: &str = "s3cret-pw";

/// A server that requires [`PASSWORD`].
fn secured() -> Redis {
    Redis::start_with(&["--requirepass", PASSWORD])
}

fn url(redis: &Redis) -> String {
    format!("redis://:{PASSWORD}@127.0.0.1:{}", redis.port())
}

/// distlock pointed at `redis` with the password in the URL, asked for JSON messages.
fn json_distlock(redis: &Redis) -> Command {
    let mut cmd = bare_distlock();
    cmd.env("DISTLOCK_REDIS_URL", url(redis))
        .args(["--log-format", "json"]);
    cmd
}

/// Every event name distlock documents.
fn event_names() -> Vec<&'static str> {
    distlock::output::Ev::ALL
        .iter()
        .map(|e| e.as_str())
        .collect()
}

/// Parse `text` (stderr) as JSON lines, checking what every line must hold: an object with an
/// RFC 3339 UTC timestamp with milliseconds, a level, a documented event, a message, and `key`
/// equal to `key` (null when None). The password never appears.
fn parse_lines(text: &str, key: Option<&str>) -> Vec<Value> {
    assert!(!text.contains(PASSWORD), "the password leaked: {text}");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "a line was cut: {text:?}"
    );
    let names = event_names();
    text.lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line:?}\nin {text}"));
            let object = value.as_object().unwrap_or_else(|| panic!("{line}"));
            let ts = object["ts"]
                .as_str()
                .unwrap_or_else(|| panic!("ts: {line}"));
            assert!(
                ts.len() == 24 && ts.ends_with('Z') && ts.as_bytes()[19] == b'.',
                "ts is not RFC 3339 UTC with milliseconds: {line}"
            );
            humantime::parse_rfc3339(ts).unwrap_or_else(|e| panic!("{e}: {line}"));
            let level = object["level"].as_str().unwrap_or_default();
            assert!(
                ["error", "warning", "notice", "debug"].contains(&level),
                "level: {line}"
            );
            let event = object["event"].as_str().unwrap_or_default();
            assert!(names.contains(&event), "undocumented event: {line}");
            let msg = object["msg"]
                .as_str()
                .unwrap_or_else(|| panic!("msg: {line}"));
            assert!(!msg.is_empty() && !msg.starts_with("distlock:"), "{line}");
            match key {
                Some(key) => assert_eq!(object["key"], key, "key: {line}"),
                None => assert!(object["key"].is_null(), "key should be null: {line}"),
            }
            value
        })
        .collect()
}

fn events(lines: &[Value]) -> Vec<&str> {
    lines
        .iter()
        .map(|l| l["event"].as_str().unwrap_or_default())
        .collect()
}

/// The one line of `event`.
fn the<'a>(lines: &'a [Value], event: &str) -> &'a Value {
    let found: Vec<&Value> = lines.iter().filter(|l| l["event"] == event).collect();
    assert_eq!(found.len(), 1, "one {event} line in {lines:#?}");
    found[0]
}

#[test]
fn a_run_with_v_reports_each_step() {
    let redis = secured();
    let out = run(json_distlock(&redis).args(["run", "-v", "-k", "ok", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = parse_lines(&stderr(&out), Some("ok"));
    assert_eq!(
        events(&lines),
        ["connected", "acquired", "started", "released"],
        "{lines:#?}"
    );
    assert!(lines.iter().all(|l| l["level"] == "debug"), "{lines:#?}");
    // The URL is shown, without its password.
    let connected = the(&lines, "connected")["msg"].as_str().unwrap();
    assert!(connected.contains("redis://:***@127.0.0.1"), "{connected}");
    assert!(the(&lines, "acquired")["waited_ms"].is_u64());
    // Without -v, a successful run says nothing at all.
    let out = run(json_distlock(&redis).args(["run", "-k", "ok", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
}

#[test]
fn busy_with_no_wait_exits_75_with_one_line() {
    let redis = secured();
    redis_cmd(
        &redis,
        &["SET", &lock_key("busy"), "someone", "PX", "60000"],
    );
    let out = run(json_distlock(&redis).args(["run", "-k", "busy", "-n", "--", "true"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let lines = parse_lines(&stderr(&out), Some("busy"));
    assert_eq!(events(&lines), ["busy"]);
    let busy = &lines[0];
    assert_eq!(busy["level"], "notice");
    assert_eq!(busy["exit"], 75);
    assert!(busy["msg"].as_str().unwrap().contains("is busy"), "{busy}");
    // -q and the cron idiom keep their meaning.
    let out = run(json_distlock(&redis).args(["run", "-q", "-k", "busy", "-n", "--", "true"]));
    assert_eq!(out.status.code(), Some(75));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let out = run(json_distlock(&redis).args(["run", "-k", "busy", "-n", "-E", "0", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let out =
        run(json_distlock(&redis).args(["run", "-v", "-k", "busy", "-n", "-E", "0", "--", "true"]));
    let lines = parse_lines(&stderr(&out), Some("busy"));
    let busy = the(&lines, "busy");
    assert_eq!(busy["level"], "debug");
    assert_eq!(busy["exit"], 0);
}

/// A command with a password, for the helpers that bypass distlock.
fn redis_cmd(redis: &Redis, args: &[&str]) {
    let mut cmd = redis::cmd("AUTH");
    cmd.arg(PASSWORD);
    let mut con = redis.client();
    let _: () = cmd.query(&mut con).unwrap();
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query(&mut con).unwrap();
}

/// Forward the lines of `child`'s stderr to a channel as they come, so that a test can wait for
/// one (bounded) while the process runs.
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Collect lines until one holds `event`; fail after `BOUND`.
fn read_until(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>, event: &str) {
    let deadline = Instant::now() + BOUND;
    let needle = format!("\"event\":\"{event}\"");
    while !seen.iter().any(|l| l.contains(&needle)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("no {event} line; got {seen:#?}"),
        }
    }
}

#[test]
fn a_waiter_reports_the_holder_then_the_acquisition() {
    let redis = secured();
    let dir = Scratch::new();
    let holder = hold_until_released(
        json_distlock(&redis),
        &dir,
        "w",
        &["--ttl", "60s", "--note", "the holder"],
    );
    // For `run`, the holder's pid is distlock's own.
    let holder_pid = holder.id();
    let mut waiter = json_distlock(&redis)
        .args(["run", "-k", "w", "--report-every", "1s", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut waiter);
    let mut seen = Vec::new();
    read_until(&rx, &mut seen, "waiting");
    read_until(&rx, &mut seen, "still-waiting");
    release(&dir);
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    parse_lines(&stderr(&out), Some("w"));
    let status = finish(waiter).status;
    // The reader ends at the end of the stream, which hangs up the channel.
    seen.extend(rx.iter());
    let text: String = seen.iter().map(|l| format!("{l}\n")).collect();
    assert_eq!(status.code(), Some(0), "{text}");
    let lines = parse_lines(&text, Some("w"));
    let names = events(&lines);
    assert_eq!(names.first(), Some(&"waiting"), "{text}");
    assert_eq!(names.last(), Some(&"acquired"), "{text}");
    assert!(names.contains(&"still-waiting"), "{text}");
    let waiting = the(&lines, "waiting");
    assert_eq!(waiting["level"], "notice");
    assert!(
        waiting["msg"].as_str().unwrap().contains("(the holder)"),
        "{waiting}"
    );
    assert!(waiting["holder"]["host"].is_string(), "{waiting}");
    assert_eq!(waiting["holder"]["pid"], holder_pid, "{waiting}");
    let still = lines
        .iter()
        .find(|l| l["event"] == "still-waiting")
        .unwrap();
    assert_eq!(still["holder"]["pid"], holder_pid, "{still}");
    assert!(still["waited_ms"].as_u64().unwrap() >= 1000, "{still}");
    let acquired = the(&lines, "acquired");
    assert!(
        acquired["waited_ms"].as_u64().unwrap() >= 1000,
        "{acquired}"
    );
}

/// On a terminal, a waiter in JSON mode prints lines, never the live status line.
#[test]
fn no_spinner_on_a_terminal() {
    let redis = secured();
    redis_cmd(&redis, &["SET", &lock_key("tty"), "crashed", "PX", "1500"]);
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave = std::fs::File::from(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let child = json_distlock(&redis)
        .args(["run", "-k", "tty", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(slave.try_clone().unwrap()))
        .spawn()
        .unwrap();
    drop(slave);
    // Read the terminal while distlock writes (it would block on a full terminal).
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match master.read(&mut buf) {
                Ok(0) | Err(_) => return text, // EIO once every writer has gone
                Ok(n) => text.extend_from_slice(&buf[..n]),
            }
        }
    });
    let out = finish(child);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(reader.join().unwrap()).unwrap();
    let text = text.replace("\r\n", "\n");
    let lines = parse_lines(&text, Some("tty"));
    assert_eq!(events(&lines), ["waiting", "acquired"], "{text}");
}

#[test]
fn an_operator_deleting_the_key_loses_the_lock_with_exit_124() {
    let redis = secured();
    let dir = Scratch::new();
    let holder = json_distlock(&redis)
        .args(["run", "-k", "lost", "--ttl", "3s", "--", "sh", "-c"])
        .arg(format!("echo started > {}; sleep 1000", dir.str("started")))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&dir.path("started"));
    redis_cmd(&redis, &["DEL", &lock_key("lost")]);
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    let lines = parse_lines(&stderr(&out), Some("lost"));
    assert_eq!(events(&lines), ["lost"]);
    assert_eq!(lines[0]["level"], "error");
    assert_eq!(lines[0]["exit"], 124);
    assert!(
        lines[0]["msg"]
            .as_str()
            .unwrap()
            .starts_with("lost lock \"lost\"")
    );
}

#[test]
fn usage_errors_are_json_lines_whoever_finds_them() {
    let redis = secured();
    // (arguments, environment, expected events, text in the first message)
    type Case<'a> = (
        &'a [&'a str],
        &'a [(&'a str, &'a str)],
        &'a [&'a str],
        &'a str,
    );
    let cases: &[Case] = &[
        // clap's own refusals, before any configuration exists: the format is found in the
        // raw arguments, before or after the subcommand, or in the environment.
        (
            &["--log-format", "json", "run", "--ttl", "30"],
            &[],
            &["usage-error"],
            "--ttl 30 has no unit",
        ),
        (
            &[
                "run",
                "--log-format=json",
                "-k",
                "k",
                "--ttl",
                "30",
                "--",
                "true",
            ],
            &[],
            &["usage-error"],
            "--ttl 30 has no unit",
        ),
        (
            &["run", "-k", "k", "--", "true"],
            &[("DISTLOCK_LOG_FORMAT", "json"), ("DISTLOCK_TTL", "30")],
            &["usage-error"],
            "DISTLOCK_TTL=30 (from the environment) has no unit",
        ),
        (
            &[
                "--log-format",
                "json",
                "run",
                "-k",
                "k",
                "--kil-grace",
                "1s",
                "--",
                "true",
            ],
            &[],
            &["usage-error", "usage-tip", "usage-tip"],
            "unexpected argument '--kil-grace'",
        ),
        (
            &["--log-format", "json", "frobnicate"],
            &[],
            &["usage-error"],
            "frobnicate",
        ),
        (
            &[],
            &[("DISTLOCK_LOG_FORMAT", "json")],
            &["usage-error"],
            "requires a subcommand",
        ),
        // A password in a URL clap never got to parse is still redacted.
        (
            &[
                "--log-format",
                "json",
                "--redis",
                "http://u:s3cret-pw@h",
                "run",
                "-k",
                "k",
                "true",
            ],
            &[],
            &["usage-error"],
            "redis://",
        ),
        // distlock's own refusals, once clap has parsed.
        (
            &["--log-format", "json", "run", "-k", "a b", "--", "true"],
            &[],
            &["usage-error"],
            "whitespace",
        ),
        (
            &[
                "--log-format",
                "json",
                "run",
                "-k",
                "k",
                "--ttl",
                "25h",
                "--",
                "true",
            ],
            &[],
            &["usage-error"],
            "--ttl 25h is out of range",
        ),
        (
            &["--log-format", "json", "run", "-k", "k"],
            &[],
            &["usage-error"],
            "COMMAND",
        ),
    ];
    for (args, env, expected, needle) in cases {
        let mut cmd = bare_distlock();
        cmd.env("DISTLOCK_REDIS_URL", url(&redis)).args(*args);
        for (var, value) in *env {
            cmd.env(var, value);
        }
        let out = run(&mut cmd);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        let lines = parse_lines(&stderr(&out), None);
        assert_eq!(events(&lines), *expected, "{args:?}");
        assert!(lines.iter().all(|l| l["level"] == "error"), "{lines:#?}");
        assert_eq!(lines[0]["exit"], 64, "{args:?}");
        let msg = lines[0]["msg"].as_str().unwrap();
        assert!(msg.contains(needle), "{args:?}: {needle:?} not in {msg}");
    }
    // An argument that is not UTF-8.
    use std::os::unix::ffi::OsStrExt;
    let out = run(json_distlock(&redis)
        .args(["run", "-k"])
        .arg(std::ffi::OsStr::from_bytes(b"k\xff"))
        .args(["--", "true"]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert_eq!(events(&parse_lines(&stderr(&out), None)), ["usage-error"]);
    // Words after `--` are the command's: they do not choose distlock's format.
    let out = run(bare_distlock().args([
        "run",
        "-k",
        "k",
        "--ttl",
        "30",
        "--",
        "tool",
        "--log-format",
        "json",
    ]));
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).starts_with("distlock: --ttl 30"),
        "{}",
        stderr(&out)
    );
    // Typed wins over the environment.
    let out = run(bare_distlock().env("DISTLOCK_LOG_FORMAT", "json").args([
        "--log-format",
        "text",
        "run",
        "--ttl",
        "30",
    ]));
    assert!(stderr(&out).starts_with("distlock: "), "{}", stderr(&out));
}

#[test]
fn unreachable_redis_exits_69_naming_the_lock() {
    let mut redis = secured();
    redis.kill();
    for (args, key) in [
        (&["run", "-k", "k", "--", "true"][..], Some("k")),
        (&["status", "-k", "k"][..], Some("k")),
        (&["break", "-k", "k", "--yes"][..], Some("k")),
        (&["acquire", "-k", "k"][..], Some("k")),
        (&["release", "-k", "k", "--token", "t"][..], Some("k")),
        (&["list"][..], None),
    ] {
        let out = run(json_distlock(&redis).args(args));
        assert_eq!(out.status.code(), Some(69), "{args:?}: {}", stderr(&out));
        let lines = parse_lines(&stderr(&out), key);
        assert_eq!(events(&lines), ["redis-error"], "{args:?}");
        assert_eq!(lines[0]["level"], "error");
        assert_eq!(lines[0]["exit"], 69);
        let msg = lines[0]["msg"].as_str().unwrap();
        assert!(msg.contains("redis://:***@127.0.0.1"), "{msg}");
    }
}

#[test]
fn the_operator_commands_speak_json_on_stderr_only() {
    let redis = secured();
    // status: the data stays on stdout, as text or --json; nothing on stderr.
    let out = run(json_distlock(&redis).args(["status", "-k", "op"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("is free"));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    // list: nothing matches (a notice about no lock).
    let out = run(json_distlock(&redis).args(["list", "nothing-*"]));
    assert_eq!(out.status.code(), Some(0));
    let lines = parse_lines(&stderr(&out), None);
    assert_eq!(events(&lines), ["no-locks"]);
    // break: free, then refused without a terminal, then broken.
    let out = run(json_distlock(&redis).args(["break", "-k", "op", "--yes"]));
    assert_eq!(out.status.code(), Some(1));
    let lines = parse_lines(&stderr(&out), Some("op"));
    assert_eq!(events(&lines), ["free"]);
    assert_eq!(lines[0]["exit"], 1);
    let out = run(json_distlock(&redis).args(["acquire", "-k", "op", "--note", "ops"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let out = run(json_distlock(&redis).args(["break", "-k", "op"]));
    assert_eq!(out.status.code(), Some(64));
    let lines = parse_lines(&stderr(&out), Some("op"));
    assert_eq!(events(&lines), ["usage-error"]);
    assert!(lines[0]["msg"].as_str().unwrap().contains("without --yes"));
    let out = run(json_distlock(&redis).args(["break", "-k", "op", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = parse_lines(&stderr(&out), Some("op"));
    assert_eq!(events(&lines), ["broken"]);
    assert!(lines[0]["holder"]["host"].is_string(), "{}", lines[0]);
    // release with the token of the broken lock: not held (77).
    let out = run(json_distlock(&redis).args(["release", "-k", "op", "--token", &token]));
    assert_eq!(out.status.code(), Some(77));
    let lines = parse_lines(&stderr(&out), Some("op"));
    assert_eq!(events(&lines), ["not-held"]);
    assert_eq!(lines[0]["exit"], 77);
}

/// On a terminal, `break` asks its question as one JSON line, and the answer is typed after it.
#[test]
fn the_break_question_is_one_json_line() {
    let redis = secured();
    let out = run(json_distlock(&redis).args(["acquire", "-k", "ask", "--ttl", "60s"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (child, mut master) = on_a_terminal(json_distlock(&redis).args(["break", "-k", "ask"]));
    master.write_all(b"n\n").unwrap();
    let out = finish(child);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let lines = parse_lines(&stderr(&out), Some("ask"));
    assert_eq!(events(&lines), ["confirm-break", "declined"]);
    let question = lines[0]["msg"].as_str().unwrap();
    assert!(
        question.starts_with("lock \"ask\" is held\n") && question.ends_with("[y/N]"),
        "{question:?}"
    );
}

#[test]
fn the_json_log_page_documents_every_event() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json-log.md"),
    )
    .unwrap();
    assert!(page.starts_with("# Messages for programs (`--log-format json`)"));
    let documented: Vec<&str> = page
        .lines()
        .filter_map(|l| Some(l.strip_prefix("| `")?.split_once("` | ")?.0))
        .collect();
    for name in event_names() {
        assert!(
            documented.contains(&name),
            "docs/json-log.md's event table lacks {name}"
        );
    }
}
