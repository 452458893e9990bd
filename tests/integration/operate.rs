//! Operating locks: holder metadata, status, list, break, the multi-step acquire/renew/release,
//! and what a waiter prints while it waits.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::sync::mpsc;

use serde_json::Value;

use crate::fixtures::*;

/// A holder whose command writes its pid to `held` and waits for `let_go`; returns once it
/// holds, with the process and its scratch dir.
fn hold(redis: &Redis, key: &str, extra: &[&str], env: &[(&str, &str)]) -> (Child, Scratch) {
    let dir = Scratch::new();
    let child = holder(redis, &dir, key, extra, env).hold().into_child();
    (child, dir)
}

/// The same `distlock run`, returned at once (a waiter: wait for it with `redis.in_line`).
fn start_run(redis: &Redis, key: &str, extra: &[&str], env: &[(&str, &str)]) -> (Child, Scratch) {
    let dir = Scratch::new();
    let child = holder(redis, &dir, key, extra, env).start().into_child();
    (child, dir)
}

fn holder(redis: &Redis, dir: &Scratch, key: &str, extra: &[&str], env: &[(&str, &str)]) -> Holder {
    let mut holder = Holder::new(distlock(redis), dir, key)
        .args(extra)
        .says("$$");
    for (k, v) in env {
        holder = holder.env(k, v);
    }
    holder
}

fn let_go(dir: &Scratch) {
    release(dir);
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
    // The holder took a short claim and extends it to the full TTL within a second or two.
    wait_until("the claim to be extended to the TTL", || {
        redis.pttl(&lock_key("st")) > 30_000
    });
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
            dir.str("held"),
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
        "KEY\tHOLDER\tHELD FOR\tEXPIRES IN\tWAITING\tCOMMAND / NOTE"
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
    wait_until("the waiter to subscribe", || redis.in_line("brk") == 1);
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

/// Wait until a `start_run` command runs (its run holds the lock then).
fn wait_ran(dir: &Scratch) {
    read_pid(&dir.path("held"));
}

fn host() -> String {
    nix::unistd::gethostname()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned()
}

fn status_json(redis: &Redis, key: &str) -> Value {
    let out = run(distlock(redis).args(["status", "-k", key, "--json"]));
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    json(&out)
}

/// The pids of the holders (oldest grant first) and of the waiters (first in line first).
fn pids(v: &Value) -> (Vec<u64>, Vec<u64>) {
    let of = |list: &Value| {
        list.as_array()
            .unwrap()
            .iter()
            .map(|entry| entry["holder"]["pid"].as_u64().unwrap())
            .collect()
    };
    (of(&v["holders"]), of(&v["waiting"]))
}

/// A semaphore of 2 held by 2 runs with 2 more in line: status shows every holder by id with
/// its fence and the line in order; list shows it; break --holder breaks exactly that holder
/// (its run exits 124, the first waiter gets the slot); break --yes breaks all that it shows.
#[test]
fn a_semaphore_shows_every_holder_and_its_line_and_breaks_one_or_all() {
    let redis = Redis::start();
    let args = |note: &'static str| ["--limit", "2", "--ttl", "3s", "--note", note];
    let (h1, d1) = hold(&redis, "pool", &args("batch 1"), &[]);
    let (h2, d2) = hold(&redis, "pool", &args("batch 2"), &[]);
    let (w1, dw1) = start_run(&redis, "pool", &args("batch 3"), &[]);
    wait_until("the first waiter in line", || redis.in_line("pool") == 1);
    let (w2, dw2) = start_run(&redis, "pool", &args("batch 4"), &[]);
    wait_until("the second waiter in line", || redis.in_line("pool") == 2);
    let tokens: Vec<String> =
        redis.cmd(&["ZRANGE", &format!("{}:slots", lock_key("pool")), "0", "-1"]);
    assert_eq!(tokens.len(), 2);

    let out = run(distlock(&redis).args(["status", "-k", "pool", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let (holders, waiters) = pids(&v);
    assert_eq!(holders, [h1.id(), h2.id()].map(u64::from), "oldest first");
    assert_eq!(
        waiters,
        [w1.id(), w2.id()].map(u64::from),
        "first in line first"
    );
    assert_eq!(v["held"], true);
    assert_eq!(v["limit"], 2);
    assert_eq!(
        v["holder"], v["holders"][0]["holder"],
        "the top level is the first holder"
    );
    assert_eq!(v["fence"], v["holders"][0]["fence"]);
    let fences: Vec<u64> = (0..2)
        .map(|i| v["holders"][i]["fence"].as_u64().unwrap())
        .collect();
    assert!(fences[0] < fences[1], "{fences:?}");
    let ids: Vec<String> = (0..2)
        .map(|i| v["holders"][i]["id"].as_str().unwrap().to_owned())
        .collect();
    for id in &ids {
        assert_eq!(id.len(), 8, "{id}");
        assert_eq!(
            tokens.iter().filter(|t| t.starts_with(id.as_str())).count(),
            1,
            "{id}"
        );
    }
    for token in &tokens {
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains(token.as_str()),
            "a whole token"
        );
    }
    assert_eq!(v["holders"][1]["holder"]["note"], "batch 2");
    assert!(v["holders"][1]["ttl_ms"].as_u64().unwrap() <= 3_000);
    assert_eq!(v["waiting"][0]["position"], 1);
    assert_eq!(v["waiting"][0]["holder"]["note"], "batch 3");
    assert_eq!(v["waiting"][0]["limit"], 2);
    assert!(v["waiting"][0]["waited_ms"].is_u64());
    assert!(v["waiting"][0]["since"].is_string());
    assert_eq!(v["waiting"][1]["position"], 2);
    assert_eq!(v["waiting"][1]["holder"]["note"], "batch 4");

    // For people: every holder by id, with its fence; the line in order.
    let out = run(distlock(&redis).args(["status", "-k", "pool"]));
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("lock \"pool\" is held: 2 of 2 slots (a semaphore)\n"),
        "{text}"
    );
    for (id, fence) in ids.iter().zip(&fences) {
        assert!(text.contains(&format!("\n  id        {id}\n")), "{text}");
        assert!(text.contains(&format!("\n  fence     {fence}\n")), "{text}");
    }
    let first = text.find(&format!("  1. {}, pid {}, waiting for ", host(), w1.id()));
    let second = text.find(&format!("  2. {}, pid {}, waiting for ", host(), w2.id()));
    assert!(first.is_some() && first < second, "{text}");
    assert!(text.contains("; note \"batch 3\"\n"), "{text}");
    for token in &tokens {
        assert!(!text.contains(token.as_str()), "a whole token: {text}");
    }

    // list: one row, 2 of 2 slots, the oldest holder, 2 waiting; --json: the status objects.
    let out = run(distlock(&redis).args(["list"]));
    let text = String::from_utf8(out.stdout).unwrap();
    let row: Vec<&str> = text.lines().nth(1).unwrap().split('\t').collect();
    assert_eq!(
        row[..2],
        ["pool", &format!("2/2 {}:{}", host(), h1.id())],
        "{text}"
    );
    assert_eq!(row[4..], ["2", "batch 1"], "{text}");
    let out = run(distlock(&redis).args(["list", "--json"]));
    let list = json(&out);
    assert_eq!(pids(&list[0]), pids(&v));
    assert_eq!(list[0]["holders"][1]["id"], ids[1]);

    // Break the second holder by its id: exactly that one; the first waiter gets its slot.
    let out = run(distlock(&redis).args(["break", "-k", "pool", "--holder", &ids[1], "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with(&format!(
            "distlock: broke holder {} of lock \"pool\" (held by ",
            ids[1]
        )),
        "{}",
        stderr(&out)
    );
    let out = finish(h2);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    drop(d2);
    wait_ran(&dw1);
    let v = status_json(&redis, "pool");
    assert_eq!(
        pids(&v),
        (
            vec![u64::from(h1.id()), u64::from(w1.id())],
            vec![u64::from(w2.id())]
        )
    );

    // Break them all: the two it shows, not the waiter that takes a freed slot meanwhile.
    let out = run(distlock(&redis).args(["break", "-k", "pool", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("distlock: broke holder ").count(), 2, "{err}");
    assert!(err.ends_with("distlock: broke 2 of the 2 holders of lock \"pool\"; the slots pass to the waiters in line\n"), "{err}");
    for (holder, dir) in [(h1, d1), (w1, dw1)] {
        let out = finish(holder);
        assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
        drop(dir);
    }
    wait_ran(&dw2);
    let v = status_json(&redis, "pool");
    assert_eq!(pids(&v), (vec![u64::from(w2.id())], vec![]));
    let_go(&dw2);
    assert_eq!(finish(w2).status.code(), Some(0));
    let out = run(distlock(&redis).args(["status", "-k", "pool"]));
    assert_eq!(out.status.code(), Some(1));
}

/// A mutex with two waiters: status --json keeps the fields scripts know, and adds the fence,
/// the limit, the holder with its id, and the waiters in order with their notes.
#[test]
fn a_mutex_shows_its_waiters_in_order_and_keeps_its_json_fields() {
    let redis = Redis::start();
    let (holder, dir) = hold(&redis, "mx", &["--note", "deploy 1"], &[]);
    let (w1, dw1) = start_run(&redis, "mx", &["--note", "deploy 2"], &[]);
    wait_until("the first waiter in line", || redis.in_line("mx") == 1);
    let (w2, dw2) = start_run(&redis, "mx", &["--note", "deploy 3"], &[]);
    wait_until("the second waiter in line", || redis.in_line("mx") == 2);
    let v = status_json(&redis, "mx");
    // Today's fields, and the new ones (serde_json sorts them).
    let fields: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let mut expected = [
        "key",
        "redis_key",
        "held",
        "ttl_ms",
        "held_for_ms",
        "acquired_at",
        "holder",
        "fence",
        "limit",
        "holders",
        "waiting",
    ];
    expected.sort_unstable();
    assert_eq!(fields, expected);
    assert_eq!(v["key"], "mx");
    assert_eq!(v["redis_key"], "distlock:{mx}");
    assert_eq!(v["held"], true);
    assert!(v["ttl_ms"].is_u64() && v["held_for_ms"].is_u64() && v["acquired_at"].is_string());
    assert_eq!(v["holder"]["pid"], u64::from(holder.id()));
    assert_eq!(v["holder"]["note"], "deploy 1");
    assert_eq!(v["limit"], 1);
    assert!(v["fence"].as_u64().unwrap() > 0);
    assert_eq!(v["holders"].as_array().unwrap().len(), 1);
    assert_eq!(v["holders"][0]["fence"], v["fence"]);
    assert_eq!(v["holders"][0]["holder"], v["holder"]);
    let token = redis.get(&lock_key("mx")).unwrap();
    assert!(token.starts_with(v["holders"][0]["id"].as_str().unwrap()));
    let notes: Vec<&str> = v["waiting"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["holder"]["note"].as_str().unwrap())
        .collect();
    assert_eq!(notes, ["deploy 2", "deploy 3"]);
    assert_eq!(pids(&v).1, [w1.id(), w2.id()].map(u64::from));
    assert_eq!(v["waiting"][1]["position"], 2);
    assert_eq!(v["waiting"][1]["limit"], 1);
    // Text: today's layout plus the fence, then the line.
    let out = run(distlock(&redis).args(["status", "-k", "mx"]));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "lock \"mx\" is held\n  holder    {}, pid {}",
            host(),
            holder.id()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "\n  fence     {}\n2 waiting, first in line first:\n  1. ",
            v["fence"]
        )),
        "{text}"
    );
    assert!(!text.contains("  id "), "{text}");
    let out = run(distlock(&redis).args(["list"]));
    let text = String::from_utf8(out.stdout).unwrap();
    let row: Vec<&str> = text.lines().nth(1).unwrap().split('\t').collect();
    assert_eq!(row[1], format!("{}:{}", host(), holder.id()), "{text}");
    assert_eq!(row[4..], ["2", "deploy 1"], "{text}");
    // The line moves in order.
    let_go(&dir);
    assert_eq!(finish(holder).status.code(), Some(0));
    wait_ran(&dw1);
    let v = status_json(&redis, "mx");
    assert_eq!(
        pids(&v),
        (vec![u64::from(w1.id())], vec![u64::from(w2.id())])
    );
    let_go(&dw1);
    assert_eq!(finish(w1).status.code(), Some(0));
    wait_ran(&dw2);
    let_go(&dw2);
    assert_eq!(finish(w2).status.code(), Some(0));
}

/// A holder id that matches several holders is refused with their ids (64); one that matches
/// none breaks nothing (1) and lists the ids; fewer than 4 characters are refused (64).
#[test]
fn break_holder_refuses_ambiguous_and_unknown_ids() {
    let redis = Redis::start();
    // Two holders whose tokens share their first 5 characters, written in the documented
    // layout (uuid tokens that share 5 would take a million tries).
    let key = lock_key("amb");
    let (now, _): (String, String) = {
        let time: Vec<String> = redis.cmd(&["TIME"]);
        (time[0].clone(), time[1].clone())
    };
    let expiry = (now.parse::<u64>().unwrap() * 1000 + 60_000).to_string();
    let (a, b) = (
        "3f2a9c1e-0000-4000-8000-000000000001",
        "3f2a9d00-0000-4000-8000-000000000002",
    );
    redis.cmd::<i64>(&["ZADD", &format!("{key}:slots"), &expiry, a, &expiry, b]);
    let meta = |pid: u32, fence: u32| {
        format!(
            r#"{{"host":"h","pid":"{pid}","note":"n{pid}","fence":"{fence}","acquired_at":"{now}000"}}"#
        )
    };
    redis.cmd::<i64>(&[
        "HSET",
        &format!("{key}:holders"),
        "limit",
        "3",
        a,
        &meta(1, 10),
        b,
        &meta(2, 20),
    ]);
    let v = status_json(&redis, "amb");
    assert_eq!(v["holders"][0]["id"], "3f2a9c1e");
    assert_eq!(v["holders"][1]["id"], "3f2a9d00");
    assert_eq!(v["limit"], 3);
    let out = run(distlock(&redis).args(["break", "-k", "amb", "--holder", "3f2a9", "--yes"]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "distlock: the id \"3f2a9\" matches 2 holders of lock \"amb\" (3f2a9c1e, 3f2a9d00); give more of the id\n"
    );
    let out = run(distlock(&redis).args(["break", "-k", "amb", "--holder", "9999", "--yes"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "distlock: no holder of lock \"amb\" has the id \"9999\"; nothing was broken (its 2 holders \
         are: 3f2a9c1e held by h pid 1 (n1); 3f2a9d00 held by h pid 2 (n2))\n"
    );
    let out = run(distlock(&redis).args([
        "--log-format",
        "json",
        "break",
        "-k",
        "amb",
        "--holder",
        "9999",
    ]));
    assert_eq!(out.status.code(), Some(1));
    let line: Value = serde_json::from_str(stderr(&out).trim()).unwrap();
    assert_eq!(
        (line["event"].as_str(), line["exit"].as_u64()),
        (Some("no-such-holder"), Some(1))
    );
    let out = run(distlock(&redis).args(["break", "-k", "amb", "--holder", "3f2"]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--holder \"3f2\" is too short; give at least 4 characters"),
        "{}",
        stderr(&out)
    );
    // Nothing was broken; then one more character names one.
    assert_eq!(redis.cmd::<i64>(&["ZCARD", &format!("{key}:slots")]), 2);
    let out = run(distlock(&redis).args(["break", "-k", "amb", "--holder", "3f2a9d", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let left: Vec<String> = redis.cmd(&["ZRANGE", &format!("{key}:slots"), "0", "-1"]);
    assert_eq!(left, [a]);
}

/// Under systemd or in a container USER and LOGNAME are often unset: the holder's user is then
/// looked up by uid (root, when the tests run as root), not shown as a bare uid.
#[test]
fn holder_user_comes_from_user_else_from_the_uid() {
    let redis = Redis::start();
    let uid = nix::unistd::getuid();
    let by_uid = nix::unistd::User::from_uid(uid)
        .unwrap()
        .map_or_else(|| format!("uid {uid}"), |u| u.name);
    if uid.is_root() {
        assert_eq!(by_uid, "root");
    }
    let user_of = |key: &str, cmd: &mut std::process::Command| {
        let out = run(cmd.args(["acquire", "-k", key]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let out = run(distlock(&redis).args(["status", "-k", key, "--json"]));
        json(&out)["holder"]["user"].as_str().unwrap().to_owned()
    };
    let unset = user_of(
        "no-user",
        distlock(&redis).env_remove("USER").env_remove("LOGNAME"),
    );
    assert_eq!(unset, by_uid);
    let empty = user_of(
        "empty-user",
        distlock(&redis).env("USER", "").env("LOGNAME", ""),
    );
    assert_eq!(empty, by_uid);
    let named = user_of(
        "named-user",
        distlock(&redis)
            .env("USER", "deployer")
            .env("LOGNAME", "other"),
    );
    assert_eq!(named, "deployer");
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
    // A later step with both in its environment names neither.
    let out = run(distlock(&redis)
        .env("DISTLOCK_KEY", "train")
        .env("DISTLOCK_TOKEN", &token)
        .arg("release"));
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
    let out = run(distlock(&redis).env("DISTLOCK_TOKEN", &token).arg("renew"));
    assert_eq!(out.status.code(), Some(64), "a key is required");
    assert!(stderr(&out).contains("--key"), "{}", stderr(&out));
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
        first.starts_with("distlock: lock \"lines\" is busy; waiting (1st in line): held by "),
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
