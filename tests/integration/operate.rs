//! Operating locks: holder metadata, status, list, break, the multi-step acquire/renew/release,
//! and what a waiter prints while it waits.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::sync::mpsc;

use serde_json::Value;

use crate::util::*;

/// A holder whose command waits on a fifo; returns the process, the fifo, and its scratch dir.
fn hold(redis: &Redis, key: &str, extra: &[&str], env: &[(&str, &str)]) -> (Child, Scratch) {
    let dir = Scratch::new();
    nix::unistd::mkfifo(&dir.path("go"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut cmd = distlock(redis);
    cmd.args(["run", "-k", key])
        .args(extra)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "echo $$ > {}; read _ < {}",
            dir.str("ready"),
            dir.str("go")
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().unwrap();
    read_pid(&dir.path("ready"));
    (child, dir)
}

fn let_go(dir: &Scratch) {
    std::fs::write(dir.path("go"), "go\n").unwrap();
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn status_shows_the_holder_and_exits_0_held_1_free() {
    let redis = Redis::start();
    let github = [
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_SERVER_URL", "https://github.com"),
        ("GITHUB_REPOSITORY", "acme/shop"),
        ("GITHUB_RUN_ID", "4242"),
    ];
    let (holder, dir) = hold(
        &redis,
        "st",
        &["--note", "release 42", "--ttl", "40s"],
        &github,
    );
    let out = run(distlock(&redis).args(["status", "-k", "st", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["key"], "st");
    assert_eq!(v["redis_key"], "distlock:{st}");
    assert_eq!(v["held"], true);
    let ttl = v["ttl_ms"].as_u64().unwrap();
    assert!(ttl > 30_000 && ttl <= 40_000, "{ttl}");
    assert!(v["held_for_ms"].as_u64().unwrap() < 20_000);
    assert_eq!(v["holder"]["pid"].as_u64().unwrap(), u64::from(holder.id()));
    assert_eq!(v["holder"]["note"], "release 42");
    assert_eq!(v["holder"]["kind"], "run");
    assert_eq!(
        v["holder"]["command"],
        format!(
            "sh -c 'echo $$ > {}; read _ < {}'",
            dir.str("ready"),
            dir.str("go")
        )
    );
    assert_eq!(
        v["holder"]["ci_url"],
        "https://github.com/acme/shop/actions/runs/4242"
    );
    assert_eq!(
        v["holder"]["host"].as_str().unwrap(),
        nix::unistd::gethostname().unwrap().to_str().unwrap()
    );
    // The metadata lives beside the lock, with the same expiry.
    let owner_ttl = redis.pttl(&format!("{}:owner", lock_key("st")));
    assert!(
        (owner_ttl - redis.pttl(&lock_key("st"))).abs() < 1000,
        "{owner_ttl}"
    );
    // Human form.
    let out = run(distlock(&redis).args(["status", "-k", "st"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("lock \"st\" is held\n"), "{text}");
    assert!(text.contains("release 42") && text.contains("held for") && text.contains("expires"));
    // -q: the exit code alone.
    let out = run(distlock(&redis).args(["status", "-q", "-k", "st"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    let_go(&dir);
    assert_eq!(finish(holder).status.code(), Some(0));
    // Released together with the lock.
    assert!(!redis.exists(&format!("{}:owner", lock_key("st"))));
    let out = run(distlock(&redis).args(["status", "-k", "st", "--json"]));
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["held"], false);
    assert!(v["holder"].is_null());
    let out = run(distlock(&redis).args(["status", "-k", "st"]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "lock \"st\" is free\n"
    );
}

#[test]
fn status_of_another_clients_lock_and_of_an_unreachable_redis() {
    let mut redis = Redis::start();
    redis.cmd::<String>(&["SET", &lock_key("py"), "py-token", "PX", "9000"]);
    let out = run(distlock(&redis).args(["status", "-k", "py", "--json"]));
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    assert_eq!(v["held"], true);
    assert!(v["holder"].is_null());
    assert!(v["held_for_ms"].is_null());
    redis.kill();
    let out = run(distlock(&redis).args(["status", "-k", "py"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1);
}

#[test]
fn list_shows_every_lock_under_the_prefix() {
    let redis = Redis::start();
    let (h1, d1) = hold(&redis, "deploy-eu", &["--note", "eu rollout"], &[]);
    let (h2, d2) = hold(&redis, "backup", &[], &[]);
    redis.cmd::<String>(&["SET", &lock_key("deploy-us"), "other-client", "PX", "60000"]);
    redis.cmd::<String>(&["SET", "unrelated", "x"]);
    redis.cmd::<String>(&["SET", "otherprefix:{deploy-x}", "x"]);
    let out = run(distlock(&redis).args(["list", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let keys: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["backup", "deploy-eu", "deploy-us"]);
    assert_eq!(v[1]["holder"]["note"], "eu rollout");
    assert!(v[2]["holder"].is_null());
    let out = run(distlock(&redis).args(["list", "deploy-*", "--json"]));
    let v = json(&out);
    assert_eq!(v.as_array().unwrap().len(), 2);
    // Without a terminal: tab-separated, with a header.
    let out = run(distlock(&redis).args(["list"]));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "KEY\tHOLDER\tHELD FOR\tEXPIRES IN\tCOMMAND / NOTE"
    );
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[2].starts_with("deploy-eu\t") && lines[2].ends_with("\teu rollout"),
        "{text}"
    );
    // Another prefix sees nothing.
    let out = run(distlock(&redis).args(["--prefix", "other:", "list", "--json"]));
    assert_eq!(json(&out), serde_json::json!([]));
    let out = run(distlock(&redis).args(["list", "a{b"]));
    assert_eq!(out.status.code(), Some(64));
    let_go(&d1);
    let_go(&d2);
    finish(h1);
    finish(h2);
}

#[test]
fn list_is_an_aligned_table_on_a_terminal() {
    let redis = Redis::start();
    let (holder, dir) = hold(&redis, "tty-list", &["--note", "x"], &[]);
    let pty = nix::pty::openpty(None, None).unwrap();
    let child = distlock(&redis)
        .args(["list"])
        .stdout(Stdio::from(std::fs::File::from(pty.slave)))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(child);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Everything it wrote is in the terminal's buffer; the terminal adds \r to each newline.
    let mut text = String::new();
    let mut master = BufReader::new(std::fs::File::from(pty.master));
    for _ in 0..2 {
        master.read_line(&mut text).unwrap();
    }
    let text = text.replace('\r', "");
    let lines: Vec<&str> = text.lines().collect();
    let host = nix::unistd::gethostname().unwrap();
    let host = host.to_str().unwrap();
    assert!(lines[0].starts_with("KEY       HOLDER  "), "{text:?}");
    assert_eq!(
        lines[0].find("HOLDER"),
        lines[1].find(&format!("{host}:")),
        "{text:?}"
    );
    assert_eq!(lines[0].find("COMMAND"), lines[1].rfind('x'), "{text:?}");
    let_go(&dir);
    finish(holder);
}

#[test]
fn break_needs_confirmation_and_wakes_waiters_and_the_holder_loses_its_lock() {
    let redis = Redis::start();
    let (holder, dir) = hold(&redis, "brk", &["--ttl", "3s"], &[]);
    // No terminal, no --yes: refused, and the lock is untouched.
    let out = run(distlock(&redis).args(["break", "-k", "brk"]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("--yes"));
    assert!(
        stderr(&out).contains(&format!("pid {}", holder.id())),
        "shows who holds it: {}",
        stderr(&out)
    );
    assert!(redis.exists(&lock_key("brk")));
    // A waiter in notify mode (subscribed) is woken by the break.
    let waiter = distlock(&redis)
        .args(["run", "-k", "brk", "--ttl", "60s", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the waiter to subscribe", || {
        redis.subscribers(&format!("{}:released", lock_key("brk"))) == 1
    });
    let out = run(distlock(&redis).args(["force-release", "-k", "brk", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("broke lock \"brk\""));
    assert_eq!(finish(waiter).status.code(), Some(0));
    // The old holder notices at its next renewal: its command is killed, exit 124.
    let out = finish(holder);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    drop(dir);
    // Nothing to break.
    let out = run(distlock(&redis).args(["break", "-k", "brk", "--yes"]));
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn break_asks_on_a_terminal() {
    let redis = Redis::start();
    let (holder, dir) = hold(&redis, "ask", &[], &[]);
    for (answer, code, exists) in [("n\n", 1, true), ("y\n", 0, false)] {
        let (child, mut master) = on_a_terminal(distlock(&redis).args(["break", "-k", "ask"]));
        // The terminal keeps typed input until the prompt reads it.
        master.write_all(answer.as_bytes()).unwrap();
        let out = finish(child);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{answer:?}: {}",
            stderr(&out)
        );
        assert!(stderr(&out).contains("Break it?"), "{}", stderr(&out));
        assert_eq!(redis.exists(&lock_key("ask")), exists);
    }
    let_go(&dir);
    finish(holder);
}

#[test]
fn acquire_renew_release_across_steps() {
    let redis = Redis::start();
    let out = run(distlock(&redis).args([
        "acquire",
        "-k",
        "train",
        "--ttl",
        "20s",
        "--note",
        "release 7",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let token = String::from_utf8(out.stdout).unwrap();
    assert!(
        token.ends_with('\n') && token.lines().count() == 1,
        "only the token on stdout: {token:?}"
    );
    let token = token.trim().to_owned();
    assert_eq!(
        redis.get(&lock_key("train")).as_deref(),
        Some(token.as_str())
    );
    let out = run(distlock(&redis).args(["status", "-k", "train", "--json"]));
    let v = json(&out);
    assert_eq!(v["holder"]["kind"], "acquire");
    assert_eq!(v["holder"]["note"], "release 7");
    // Busy for everyone else, with the usual exit code.
    let out = run(distlock(&redis).args(["acquire", "-k", "train", "-n"]));
    assert_eq!(out.status.code(), Some(75));
    assert!(out.stdout.is_empty());
    // Renew: explicit TTL, then the TTL it was acquired with; the token may come from the env.
    let out =
        run(distlock(&redis).args(["renew", "-k", "train", "--token", &token, "--ttl", "50s"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(redis.pttl(&lock_key("train")) > 40_000);
    let out = run(distlock(&redis)
        .env("DISTLOCK_TOKEN", &token)
        .args(["renew", "-k", "train"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let pttl = redis.pttl(&lock_key("train"));
    assert!(pttl > 15_000 && pttl <= 20_000, "{pttl}");
    // A wrong token changes nothing.
    let out = run(distlock(&redis).args(["release", "-k", "train", "--token", "not-the-token"]));
    assert_eq!(out.status.code(), Some(77), "{}", stderr(&out));
    assert!(stderr(&out).contains("not held with this token"));
    assert!(redis.exists(&lock_key("train")));
    let out = run(distlock(&redis)
        .env("DISTLOCK_TOKEN", &token)
        .args(["release", "-k", "train"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        !redis.exists(&lock_key("train")) && !redis.exists(&format!("{}:owner", lock_key("train")))
    );
    // Twice: not held any more.
    for verb in ["release", "renew"] {
        let out = run(distlock(&redis).args([verb, "-k", "train", "--token", &token]));
        assert_eq!(out.status.code(), Some(77), "{verb}: {}", stderr(&out));
    }
    let out = run(distlock(&redis).args(["release", "-k", "train"]));
    assert_eq!(out.status.code(), Some(64), "a token is required");
}

/// Read a child's stderr line by line, in the background.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

fn next_line(rx: &mpsc::Receiver<String>) -> String {
    rx.recv_timeout(BOUND)
        .expect("a line from the waiter in time")
}

#[test]
fn without_a_terminal_the_wait_is_reported_in_lines() {
    let redis = Redis::start();
    let (holder, dir) = hold(&redis, "lines", &["--note", "nightly import"], &[]);
    let mut waiter = distlock(&redis)
        .args(["run", "-k", "lines", "--report-every", "1s", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut waiter);
    let first = next_line(&rx);
    assert!(
        first.starts_with("distlock: lock \"lines\" is busy; waiting: held by "),
        "{first}"
    );
    assert!(
        first.contains(&format!("pid {} (nightly import)", holder.id())),
        "{first}"
    );
    for _ in 0..2 {
        let line = next_line(&rx);
        assert!(
            line.starts_with("distlock: still waiting for lock \"lines\" after "),
            "{line}"
        );
        assert!(line.contains("nightly import"), "{line}");
    }
    let_go(&dir);
    finish(holder);
    let mut last = next_line(&rx);
    while last.starts_with("distlock: still waiting") {
        last = next_line(&rx);
    }
    assert!(
        last.starts_with("distlock: acquired lock \"lines\" after waiting "),
        "{last}"
    );
    assert_eq!(finish(waiter).status.code(), Some(0));
}

#[test]
fn quiet_waits_silently() {
    let redis = Redis::start();
    redis.cmd::<String>(&["SET", &lock_key("hush"), "x", "PX", "1200"]);
    let out = run(distlock(&redis).args([
        "run",
        "-q",
        "-k",
        "hush",
        "--report-every",
        "1s",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
}

#[test]
fn renewal_keeps_the_metadata_alive_with_the_lock() {
    let redis = Redis::start();
    let (holder, dir) = hold(&redis, "meta", &["--ttl", "2s"], &[]);
    // Past several renewals of a 2s TTL, the metadata is still there.
    wait_until("three renewals", || redis.successful_calls("evalsha") >= 4);
    assert!(redis.exists(&format!("{}:owner", lock_key("meta"))));
    assert!(redis.pttl(&format!("{}:owner", lock_key("meta"))) > 0);
    let_go(&dir);
    assert_eq!(finish(holder).status.code(), Some(0));
}
