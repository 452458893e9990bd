//! Issue 28: `distlock metrics` against real servers: the output parses with `promtool check
//! metrics` (Debian's `prometheus` package; `.ci/deps` installs it) in several states, the same
//! state prints the same bytes, the counters count past the history's cap, `-o FILE` replaces
//! the file whole with mode 0644 whatever the umask, and a Redis that does not answer still
//! replaces it, with `distlock_up 0` (exit 69).

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::fixtures::topology::Primaries;
use crate::fixtures::*;

/// `distlock metrics ARGS` with `cmd`: its exit code and stdout.
fn metrics(mut cmd: Command, args: &[&str]) -> (i32, String, Output) {
    let out = run(cmd.arg("metrics").args(args));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), text, out)
}

/// `promtool check metrics` accepts `text` (no parse error, no lint problem).
fn assert_promtool_accepts(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; see .ci/deps)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = finish(child);
    assert_eq!(
        out.status.code(),
        Some(0),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
}

/// The metrics of `cmd` parse, and a second read of the same state prints the same bytes.
fn assert_valid_and_stable(cmd: impl Fn() -> Command) -> String {
    let (code, text, out) = metrics(cmd(), &[]);
    assert_eq!(code, 0, "{}", stderr(&out));
    assert_promtool_accepts(&text);
    let (_, again, _) = metrics(cmd(), &[]);
    assert_eq!(text, again, "the same state, other bytes");
    text
}

/// The value of the sample `series` (its name and labels as printed).
fn value(text: &str, series: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(str::to_owned)
}

/// No lock; a held lock with a waiter; a full semaphore; a history with every event kind
/// (acquired, released, gave-up, broken, lost, superseded, expired): each parses and is
/// byte-identical when read twice.
#[test]
fn metrics_parse_and_repeat_byte_for_byte_in_every_state() {
    let redis = Redis::start();
    let text = assert_valid_and_stable(|| distlock(&redis));
    assert!(text.contains("\ndistlock_up 1\n"), "{text}");
    assert!(!text.contains("distlock_lock_"), "{text}");

    let dir = Scratch::new();
    let holder = hold_until_released(
        distlock(&redis),
        &dir,
        "deploy",
        &["--note", "v\"42\"\nnext", "--history", "1h"],
    );
    let waiter = spawn(distlock(&redis).args(["run", "-k", "deploy", "--", "true"]));
    wait_until("the waiter in line", || redis.in_line("deploy") == 1);
    let (sem_a, sem_b) = (Scratch::new(), Scratch::new());
    let a = hold_until_released(distlock(&redis), &sem_a, "pool", &["--limit", "2"]);
    let b = hold_until_released(distlock(&redis), &sem_b, "pool", &["--limit", "2"]);
    let text = assert_valid_and_stable(|| distlock(&redis));
    for (series, expected) in [
        ("distlock_lock_holders{key=\"deploy\"}", "1"),
        ("distlock_lock_waiters{key=\"deploy\"}", "1"),
        ("distlock_lock_holders{key=\"pool\"}", "2"),
        ("distlock_lock_limit{key=\"pool\"}", "2"),
        (
            "distlock_events_total{key=\"deploy\",event=\"acquired\"}",
            "1",
        ),
    ] {
        assert_eq!(
            value(&text, series).as_deref(),
            Some(expected),
            "{series}\n{text}"
        );
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for series in [
        "distlock_lock_acquired_timestamp_seconds{key=\"deploy\"}",
        "distlock_lock_oldest_wait_timestamp_seconds{key=\"deploy\"}",
    ] {
        let at: f64 = value(&text, series).unwrap().parse().unwrap();
        assert!((now - at).abs() < 60.0, "{series} {at} vs {now}");
    }
    // The host only in the info series; notes, commands and pids nowhere.
    assert!(text.contains("distlock_lock_holder_info{key=\"deploy\",host=\""));
    assert!(!text.contains("v\\\"42") && !text.contains("pid"), "{text}");

    release(&dir);
    assert_eq!(finish(holder).status.code(), Some(0));
    assert_eq!(finish(waiter).status.code(), Some(0));
    release(&sem_a);
    release(&sem_b);
    finish(a);
    finish(b);
    // A waiter that gives up, and a broken holder.
    let dir = Scratch::new();
    let holder = hold_until_released(distlock(&redis), &dir, "deploy", &[]);
    let out = run(distlock(&redis).args(["run", "-k", "deploy", "--wait", "100ms", "--", "true"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let out = run(distlock(&redis).args(["break", "-k", "deploy", "--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The broken holder finds its lock gone at its release and reports it lost (in the
    // background): wait for that event, so that the state no longer changes.
    release(&dir);
    assert_eq!(finish(holder).status.code(), Some(124));
    let lost = "distlock_events_total{key=\"deploy\",event=\"lost\"}";
    wait_until("the lost report", || {
        value(&metrics(distlock(&redis), &[]).1, lost).as_deref() == Some("1")
    });
    let text = assert_valid_and_stable(|| distlock(&redis));
    for (event, n) in [
        ("acquired", "3"),
        ("released", "2"),
        ("gave-up", "1"),
        ("broken", "1"),
        ("superseded", "0"),
    ] {
        let series = format!("distlock_events_total{{key=\"deploy\",event=\"{event}\"}}");
        assert_eq!(
            value(&text, &series).as_deref(),
            Some(n),
            "{series}\n{text}"
        );
    }
    assert_eq!(
        value(&text, "distlock_hold_seconds_count{key=\"deploy\"}").as_deref(),
        Some("3"),
        "{text}"
    );
    assert!(
        value(
            &text,
            "distlock_last_success_timestamp_seconds{key=\"deploy\"}"
        )
        .is_some()
    );
    // A free lock with a history is still there (its counters, no holder).
    assert_eq!(
        value(&text, "distlock_lock_holders{key=\"deploy\"}").as_deref(),
        Some("0")
    );

    // A waiter superseded by a newer one, and a holder killed (SIGKILL: its guard ends the
    // command, nothing releases) whose lock expires: every event kind is counted.
    let dir = Scratch::new();
    let holder = hold_until_released(distlock(&redis), &dir, "deploy", &["--ttl", "1s"]);
    let older = spawn(distlock(&redis).args(["run", "-k", "deploy", "--", "true"]));
    wait_until("the older waiter in line", || redis.in_line("deploy") == 1);
    let newer = spawn(distlock(&redis).args(["run", "-k", "deploy", "--supersede", "--", "true"]));
    assert_eq!(finish(older).status.code(), Some(75));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(holder.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = finish(holder);
    assert_eq!(finish(newer).status.code(), Some(0));
    let text = assert_valid_and_stable(|| distlock(&redis));
    for (event, n) in [("superseded", "1"), ("expired", "1"), ("acquired", "5")] {
        let series = format!("distlock_events_total{{key=\"deploy\",event=\"{event}\"}}");
        assert_eq!(
            value(&text, &series).as_deref(),
            Some(n),
            "{series}\n{text}"
        );
    }
}

/// The counters count every event, also those the history's stream (1000 events) dropped.
#[test]
fn counters_stay_exact_past_the_history_cap() {
    let redis = Redis::start();
    let runs = 501;
    for _ in 0..runs {
        let out = run(distlock(&redis).args(["--history", "1h", "run", "-k", "n", "--", "true"]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let len: i64 = redis.cmd(&["XLEN", &format!("{}:history", lock_key("n"))]);
    assert_eq!(len, 1000, "the stream is at its cap");
    let (code, text, out) = metrics(distlock(&redis), &[]);
    assert_eq!(code, 0, "{}", stderr(&out));
    let n = runs.to_string();
    for series in [
        "distlock_events_total{key=\"n\",event=\"acquired\"}",
        "distlock_events_total{key=\"n\",event=\"released\"}",
        "distlock_wait_seconds_count{key=\"n\"}",
        "distlock_wait_seconds_bucket{key=\"n\",le=\"+Inf\"}",
        "distlock_hold_seconds_count{key=\"n\"}",
    ] {
        assert_eq!(
            value(&text, series).as_deref(),
            Some(n.as_str()),
            "{series}\n{text}"
        );
    }
}

/// `-o FILE` under umask 077: replaced whole (no temporary file left), mode 0644; with Redis
/// unreachable, FILE is replaced all the same, with `distlock_up 0`, and distlock exits 69.
#[test]
fn the_file_is_replaced_atomically_readable_and_says_when_redis_is_down() {
    use std::os::unix::fs::PermissionsExt;
    let redis = Redis::start();
    let out = run(distlock(&redis).args(["--history", "1h", "run", "-k", "f", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    let dir = Scratch::new();
    let file = dir.path("distlock.prom");
    std::fs::write(&file, "stale\n").unwrap();
    let with_umask = |url: &str| {
        let out = run(Command::new("sh")
            .args(["-c", "umask 077; exec \"$@\"", "sh"])
            .arg(env!("CARGO_BIN_EXE_distlock"))
            .args(["metrics", "--label", "redis=a\"b", "-o"])
            .arg(&file)
            .env("DISTLOCK_REDIS_URL", url));
        let text = std::fs::read_to_string(&file).unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        let names: Vec<String> = std::fs::read_dir(dir.path(""))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        (out, text, mode, names)
    };
    let (out, text, mode, names) = with_umask(&redis.url());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert_eq!(mode, 0o644);
    assert_eq!(names, ["distlock.prom"]);
    assert!(text.contains("distlock_up{redis=\"a\\\"b\"} 1\n"), "{text}");
    assert!(
        text.contains("distlock_events_total{redis=\"a\\\"b\",key=\"f\""),
        "{text}"
    );
    assert_promtool_accepts(&text);

    let down = format!("redis://127.0.0.1:{}", free_port());
    let (out, text, mode, names) = with_umask(&down);
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert_eq!(mode, 0o644);
    assert_eq!(names, ["distlock.prom"]);
    assert!(
        text.ends_with("\ndistlock_up{redis=\"a\\\"b\"} 0\n"),
        "{text}"
    );
    assert!(!text.contains("distlock_lock"), "{text}");
    assert_promtool_accepts(&text);
    // On stdout alike.
    let mut cmd = bare_distlock();
    cmd.args(["--redis", &down]);
    let (code, text, _) = metrics(cmd, &[]);
    assert_eq!(code, 69);
    assert!(text.ends_with("\ndistlock_up 0\n"), "{text}");
}

/// A Redlock with a node down: what the majority holds and counted, and the split gauge.
#[test]
fn a_redlock_with_a_node_down_shows_the_majority() {
    let mut nodes = Primaries::start(3);
    let redlock = |nodes: &Primaries| {
        let mut cmd = bare_distlock();
        for url in nodes.urls() {
            cmd.arg("--redis").arg(url);
        }
        cmd
    };
    for _ in 0..2 {
        let out = run(redlock(&nodes).args(["--history", "1h", "run", "-k", "r", "--", "true"]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    nodes.kill(0);
    let dir = Scratch::new();
    let holder = hold_until_released(redlock(&nodes), &dir, "r", &[]);
    let (code, text, out) = metrics(redlock(&nodes), &[]);
    assert_eq!(code, 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("did not answer"), "{}", stderr(&out));
    assert_promtool_accepts(&text);
    for (series, expected) in [
        ("distlock_up", "1"),
        ("distlock_lock_holders{key=\"r\"}", "1"),
        ("distlock_lock_split{key=\"r\"}", "0"),
        ("distlock_events_total{key=\"r\",event=\"acquired\"}", "3"),
        ("distlock_events_total{key=\"r\",event=\"released\"}", "2"),
    ] {
        assert_eq!(
            value(&text, series).as_deref(),
            Some(expected),
            "{series}\n{text}"
        );
    }
    release(&dir);
    assert_eq!(finish(holder).status.code(), Some(0));
}

/// The alert rules docs/monitoring.md shows (its YAML block of `groups:`) are valid Prometheus
/// rules: `promtool check rules` accepts them.
#[test]
fn the_documented_alert_rules_pass_promtool() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/monitoring.md"),
    )
    .unwrap();
    let start = page
        .find("```yaml\ngroups:")
        .expect("docs/monitoring.md shows alert rules");
    let block = &page[start + "```yaml\n".len()..];
    let rules = &block[..block.find("```").unwrap()];
    let dir = Scratch::new();
    std::fs::write(dir.path("rules.yml"), rules).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(dir.path("rules.yml"))
        .output()
        .expect("promtool (Debian package prometheus; see .ci/deps)");
    assert!(
        out.status.success(),
        "promtool: {}{}\n{rules}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What `distlock metrics -o` writes is what node_exporter's textfile collector reads: a real
/// node_exporter on loopback, scraped, reports no scrape error and serves distlock's series.
#[test]
fn node_exporters_textfile_collector_reads_the_file() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let holder = hold_until_released(distlock(&redis), &dir, "textfile", &[]);
    let collected = Scratch::new();
    let out = run(distlock(&redis)
        .args(["metrics", "-o"])
        .arg(collected.path("distlock.prom")));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let port = free_port();
    let mut exporter = Command::new("prometheus-node-exporter")
        .args(["--collector.disable-defaults", "--collector.textfile"])
        .arg(format!(
            "--collector.textfile.directory={}",
            collected.0.path().display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus-node-exporter (Debian package; see .ci/deps)");
    let scrape = || -> Option<String> {
        use std::io::Read;
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        conn.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .ok()?;
        conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .ok()?;
        let mut body = String::new();
        conn.read_to_string(&mut body).ok()?;
        body.contains("node_textfile_scrape_error").then_some(body)
    };
    let mut body = None;
    wait_until("node_exporter to serve the textfile's metrics", || {
        body = scrape();
        body.is_some()
    });
    let _ = exporter.kill();
    let _ = exporter.wait();
    let body = body.unwrap_or_default();
    assert!(body.contains("\nnode_textfile_scrape_error 0"), "{body}");
    assert!(body.contains("\ndistlock_up 1"), "{body}");
    assert!(
        body.contains("\ndistlock_lock_holders{key=\"textfile\"} 1"),
        "{body}"
    );
    release(&dir);
    assert_eq!(finish(holder).status.code(), Some(0));
}
