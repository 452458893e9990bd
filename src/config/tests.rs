//! The configuration's unit tests: what each command line decides, and how each refusal is
//! worded.

use super::*;
use clap::Parser;

fn parse(args: &[&str]) -> Result<RunConfig, Error> {
    parse_with(&Origins::default(), args)
}

/// Parse `distlock ... run ARGS`, as if the values of `origins` came from the environment.
fn parse_with(origins: &Origins, args: &[&str]) -> Result<RunConfig, Error> {
    let mut argv = vec!["distlock", "--redis", "redis://127.0.0.1:1", "run"];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).map_err(|e| Error::Usage(e.to_string()))?;
    match Config::from_cli(cli, origins)?.command {
        CommandConfig::Run(run) => Ok(run),
        _ => unreachable!("a run command line"),
    }
}

fn usage(args: &[&str]) -> String {
    usage_with(&Origins::default(), args)
}

fn usage_with(origins: &Origins, args: &[&str]) -> String {
    match parse_with(origins, args) {
        Err(Error::Usage(msg)) => msg,
        Err(other) => panic!("expected a usage error, got {other}"),
        Ok(_) => panic!("expected a usage error for {args:?}"),
    }
}

#[test]
fn a_redlock_refuses_what_it_cannot_keep() {
    let redlock = [
        "--redis",
        "redis://127.0.0.1:2",
        "--redis",
        "redis://127.0.0.1:3",
    ];
    let with = |extra: &[&'static str]| {
        let mut args = redlock.to_vec();
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-k", "x", "--", "true"]);
        args
    };
    assert!(usage(&with(&["--supersede"])).contains("--supersede and --replace need a line"));
    assert!(usage(&with(&["--replace"])).contains("--supersede and --replace need a line"));
    let msg = usage(&with(&["--limit", "3"]));
    assert!(
        msg.contains("--limit 3 cannot be kept over a Redlock of 2"),
        "{msg}"
    );
    assert!(parse(&with(&["--limit", "1"])).is_ok());
    // One server keeps both.
    assert!(parse(&["-k", "x", "--supersede", "--limit", "3", "--", "true"]).is_ok());
}

#[test]
fn defaults() {
    let run = parse(&["-k", "k", "--", "true"]).unwrap();
    assert_eq!(run.take.ttl, Duration::from_secs(30));
    assert_eq!(run.renew_every, Duration::from_secs(10));
    assert_eq!(run.deadlines.grace, Duration::from_secs(5));
    assert_eq!(run.take.wait.limit, None);
    assert_eq!(run.take.busy_exit, 75);
    assert_eq!(run.kill_signal, Signal::SIGTERM);
    assert_eq!(run.take.name.lock_key(), "distlock:{k}");
}

#[test]
fn short_ttl_scales_grace_and_renewal() {
    let run = parse(&["-k", "k", "--ttl", "1s", "true"]).unwrap();
    assert_eq!(run.renew_every, Duration::from_millis(333));
    assert_eq!(run.deadlines.grace, Duration::from_millis(200));
}

#[test]
fn no_wait_means_one_try() {
    let run = parse(&["-k", "k", "-n", "-E", "0", "true"]).unwrap();
    assert_eq!(run.take.wait.limit, Some(Duration::ZERO));
    assert_eq!(run.take.busy_exit, 0);
}

#[test]
fn default_prefix_is_the_one_clap_applies() {
    use clap::CommandFactory;
    let command = Cli::command();
    let prefix = command
        .get_arguments()
        .find(|a| a.get_id() == "prefix")
        .unwrap();
    assert_eq!(
        prefix.get_default_values(),
        [std::ffi::OsStr::new(DEFAULT_PREFIX)]
    );
}

#[test]
fn bad_combinations_are_explained() {
    assert!(usage(&["-k", "k", "--ttl", "0s", "true"]).contains("1s to 24h"));
    assert!(usage(&["-k", "k", "--ttl", "500ms", "true"]).contains("1s to 24h"));
    assert!(usage(&["-k", "k", "--ttl", "2d", "true"]).contains("1s to 24h"));
    assert!(
        usage(&["-k", "k", "--ttl", "10s", "--renew-every", "10s", "true"])
            .contains("shorter than --ttl")
    );
    assert!(usage(&["-k", "k", "--ttl", "10s", "--kill-grace", "9s", "true"]).contains("at most"));
    assert!(usage(&["-k", "", "true"]).contains("empty"));
    assert!(usage(&["-k", "a b", "true"]).contains("whitespace"));
    assert!(usage(&["-k", "k", "", ""]).contains("no command"));
}

#[test]
fn values_from_the_environment_are_named_by_their_variable() {
    let env = Origins::with_env(&[
        ("ttl", "DISTLOCK_TTL"),
        ("renew_every", "DISTLOCK_RENEW_EVERY"),
        ("report_every", "DISTLOCK_REPORT_EVERY"),
        ("redis_timeout", "DISTLOCK_REDIS_TIMEOUT"),
        ("prefix", "DISTLOCK_PREFIX"),
    ]);
    assert_eq!(
        usage_with(&env, &["-k", "k", "--ttl", "25h", "true"]),
        "DISTLOCK_TTL=25h (from the environment) is out of range; use 1s to 24h \
         (renewal keeps a short TTL alive as long as the command runs)"
    );
    let msg = usage_with(&env, &["-k", "k", "--renew-every", "1m", "true"]);
    assert!(
        msg.starts_with(
            "DISTLOCK_RENEW_EVERY=1m (from the environment) must be at least 100ms and \
             shorter than DISTLOCK_TTL=30s (from the environment)"
        ),
        "{msg}"
    );
    let msg = usage_with(&env, &["-k", "k", "--report-every", "10ms", "true"]);
    assert_eq!(
        msg,
        "DISTLOCK_REPORT_EVERY=10ms (from the environment) is too short; use 1s or more"
    );
    let msg = usage_with(&env, &["--redis-timeout", "90s", "-k", "k", "true"]);
    assert_eq!(
        msg,
        "DISTLOCK_REDIS_TIMEOUT=90s (from the environment) is out of range; use 10ms to 60s"
    );
    let msg = usage_with(&env, &["--prefix", "a{", "-k", "k", "true"]);
    assert!(
        msg.starts_with("DISTLOCK_PREFIX (from the environment): the prefix"),
        "{msg}"
    );
    // Typed values keep their flags, even when other values came from the environment.
    let grace = Origins::with_env(&[("kill_grace", "DISTLOCK_KILL_GRACE")]);
    let msg = usage_with(
        &grace,
        &["-k", "k", "--ttl", "10s", "--kill-grace", "9s", "true"],
    );
    assert!(
        msg.starts_with(
            "DISTLOCK_KILL_GRACE=9s (from the environment) with --ttl 10s and --renew-every \
             3.3s leaves no time"
        ),
        "{msg}"
    );
}

#[test]
fn every_password_is_redacted_as_typed_and_decoded() {
    for url in [
        "redis://:p%40ss@127.0.0.1:6379",
        "redis+sentinel://:p%40ss@127.0.0.1:26379/mymaster",
        "redis+sentinel://:p%40ss@127.0.0.1:26379/mymaster?sentinel_password=other",
    ] {
        let cli = Cli::try_parse_from(["distlock", "--redis", url, "status", "-k", "k"]).unwrap();
        let out = output_for(&cli);
        assert_eq!(out.redact("p%40ss and p@ss"), "*** and ***", "{url}");
    }
}

#[test]
fn an_empty_redis_url_is_named() {
    let empty = |origins: &Origins, url: &str| {
        let cli = Cli::try_parse_from(["distlock", "--redis", url, "status", "-k", "k"]).unwrap();
        match Config::from_cli(cli, origins) {
            Err(Error::Usage(msg)) => msg,
            _ => panic!("expected a usage error for {url:?}"),
        }
    };
    let env = Origins::with_env(&[("redis", "DISTLOCK_REDIS_URL")]);
    assert!(
        empty(&env, "").starts_with(
            "DISTLOCK_REDIS_URL is set but empty (a missing CI secret?); set it to a URL such \
             as redis://HOST:6379, or unset it"
        ),
        "{}",
        empty(&env, "")
    );
    assert!(
        empty(&Origins::default(), " ").starts_with("--redis is empty; give a URL"),
        "{}",
        empty(&Origins::default(), " ")
    );
}

#[test]
fn tls_options_are_named_the_way_they_were_set() {
    let env = Origins::with_env(&[("tls_ca", "DISTLOCK_TLS_CA")]);
    let msg = usage_with(&env, &["--tls-ca", "/ca.pem", "-k", "k", "true"]);
    assert_eq!(
        msg,
        "DISTLOCK_TLS_CA (from the environment) needs a rediss:// URL"
    );
    let msg = usage_with(
        &env,
        &[
            "--tls-ca",
            "/ca.pem",
            "--tls-cert",
            "/c.pem",
            "-k",
            "k",
            "true",
        ],
    );
    assert_eq!(
        msg,
        "DISTLOCK_TLS_CA (from the environment) and --tls-cert need a rediss:// URL"
    );
    let tls = |extra: &[&str]| {
        let mut argv = vec!["distlock", "--redis", "rediss://127.0.0.1:1"];
        argv.extend_from_slice(extra);
        argv.extend_from_slice(&["status", "-k", "k"]);
        let cli = Cli::try_parse_from(argv).unwrap();
        match Config::from_cli(cli, &env) {
            Err(Error::Usage(msg)) => msg,
            _ => panic!("expected a usage error for {extra:?}"),
        }
    };
    let msg = tls(&["--tls-ca", "/nonexistent/ca.pem"]);
    assert!(
        msg.starts_with(
            "cannot read DISTLOCK_TLS_CA=\"/nonexistent/ca.pem\" (from the environment): "
        ),
        "{msg}"
    );
    let msg = tls(&["--tls-cert", "/nonexistent/c.pem"]);
    assert!(
        msg.starts_with("--tls-cert is given without --tls-key;"),
        "{msg}"
    );
}

#[test]
fn durations_are_echoed_as_written() {
    assert_eq!(
        usage(&["-k", "k", "--ttl", "25h", "true"]),
        "--ttl 25h is out of range; use 1s to 24h \
         (renewal keeps a short TTL alive as long as the command runs)"
    );
    let msg = usage(&[
        "-k",
        "k",
        "--ttl",
        "0.5m",
        "--renew-every",
        "30000ms",
        "true",
    ]);
    assert!(
        msg.starts_with("--renew-every 30000ms must be at least 100ms and shorter than --ttl 0.5m"),
        "{msg}"
    );
    // Given values as written, defaults (a fifth of --ttl, capped at 5s) as computed.
    let msg = usage(&["-k", "k", "--ttl", "10s", "--kill-grace", "9000ms", "true"]);
    assert!(
        msg.starts_with("--kill-grace 9000ms with --ttl 10s and --renew-every 3.3s leaves"),
        "{msg}"
    );
    let msg = usage(&["-k", "k", "--ttl", "2s", "--renew-every", "1500ms", "true"]);
    assert!(
        msg.starts_with("--kill-grace 400ms with --ttl 2s and --renew-every 1500ms leaves"),
        "{msg}"
    );
}

#[test]
fn hook_events_default_all_and_unknown() {
    let names = |args: &[&str]| -> Vec<&'static str> {
        let run = parse(args).unwrap();
        let hook = run.hook.expect("a hook");
        hook.events.iter().map(|e| e.as_str()).collect()
    };
    let hooked = ["-k", "k", "--hook", "true"];
    assert_eq!(
        names(&[&hooked[..], &["--", "true"]].concat()),
        ["lost", "timed-out", "held-too-long", "long-wait", "busy"]
    );
    assert_eq!(
        names(&[&hooked[..], &["--hook-events", " lost, all", "--", "true"]].concat()).len(),
        10
    );
    assert!(
        usage(&[&hooked[..], &["--hook-events", "renewed", "--", "true"]].concat())
            .starts_with("--hook-events: no event \"renewed\"; use lost, timed-out, ")
    );
    // An empty hook (DISTLOCK_HOOK= in a crontab) is none.
    assert!(
        parse(&["-k", "k", "--hook", " ", "--", "true"])
            .unwrap()
            .hook
            .is_none()
    );
    assert!(usage(&["-k", "k", "--warn-after", "0s", "--", "true"]).contains("out of range"));
}

#[test]
fn several_keys_are_kept_in_the_order_typed() {
    let run = parse(&["-k", "b", "--key", "a", "-k", "c", "--", "true"]).unwrap();
    let keys: Vec<&str> = run.take.keys.iter().map(LockName::key).collect();
    assert_eq!(keys, ["b", "a", "c"]);
    assert_eq!(run.take.name.key(), "b");
    let one = parse(&["-k", "x", "--", "true"]).unwrap();
    assert_eq!(one.take.keys.len(), 1);
}

#[test]
fn several_keys_refuse_what_a_set_cannot_keep() {
    let msg = usage(&["-k", "a", "-k", "b", "-k", "a", "--", "true"]);
    assert!(msg.contains("key \"a\" is given twice"), "{msg}");
    let many: Vec<String> = (0..33).map(|i| format!("k{i}")).collect();
    let mut args: Vec<&str> = many.iter().flat_map(|k| ["-k", k.as_str()]).collect();
    args.extend(["--", "true"]);
    let msg = usage(&args);
    assert!(
        msg.contains("33 keys given; one run takes at most 32"),
        "{msg}"
    );
    args.drain(..2);
    assert!(parse(&args).is_ok(), "32 keys are accepted");
    let msg = usage(&["-k", "a", "-k", "b", "--limit", "2", "--", "true"]);
    assert!(
        msg.contains("--limit 2 (a semaphore) takes one key"),
        "{msg}"
    );
    assert!(parse(&["-k", "a", "-k", "b", "--limit", "1", "--", "true"]).is_ok());
    let msg = usage(&["-k", "a", "-k", "b", "--supersede", "--", "true"]);
    assert!(msg.contains("--supersede takes one key"), "{msg}");
    let msg = usage(&["-k", "a", "-k", "b", "--replace", "--", "true"]);
    assert!(msg.contains("--replace takes one key"), "{msg}");
    // A bad key among several is refused as one alone would be.
    let msg = usage(&["-k", "a", "-k", "b{", "--", "true"]);
    assert!(msg.contains("brace"), "{msg}");
}

#[test]
fn a_shared_key_is_shared_and_the_others_exclusive() {
    let run = parse(&["-k", "b", "-k", "a", "--shared-key", "a", "--", "true"]).unwrap();
    let take = &run.take;
    assert_eq!(take.limit, 1);
    let limits: Vec<(&str, u32)> = (take.keys.iter())
        .map(|k| (k.key(), take.limit_of(k)))
        .collect();
    assert_eq!(limits, [("b", 1), ("a", 0)]);
    let members = take.members();
    let members: Vec<(&str, Option<u32>)> = members.iter().map(|(k, l)| (k.key(), *l)).collect();
    assert_eq!(members, [("b", None), ("a", Some(0))]);
    // Naming every key is --shared.
    let all = parse(&[
        "-k",
        "a",
        "-k",
        "b",
        "--shared-key",
        "b",
        "--shared-key",
        "a",
        "--",
        "true",
    ])
    .unwrap();
    assert_eq!(all.take.limit, 0);
    assert!(all.take.shared_keys.is_empty());
    let one = parse(&["-k", "a", "--shared-key", "a", "--", "true"]).unwrap();
    assert_eq!(one.take.limit, 0);
    assert_eq!(one.take.members().len(), 1);
    // Without it, nothing changes.
    let plain = parse(&["-k", "a", "-k", "b", "--", "true"]).unwrap();
    assert!(plain.take.members().iter().all(|(_, l)| l.is_none()));
}

#[test]
fn shared_key_refusals_name_the_fix() {
    let msg = usage(&["-k", "a", "-k", "b", "--shared-key", "c", "--", "true"]);
    assert!(
        msg.contains("--shared-key \"c\" names a key not given with -k; add -k c"),
        "{msg}"
    );
    let msg = usage(&[
        "-k",
        "a",
        "-k",
        "b",
        "--shared",
        "--shared-key",
        "a",
        "--",
        "true",
    ]);
    assert!(
        msg.contains("--shared-key is redundant with --shared"),
        "{msg}"
    );
    let msg = usage(&[
        "-k",
        "a",
        "-k",
        "b",
        "--shared-key",
        "a",
        "--shared-key",
        "a",
        "--",
        "true",
    ]);
    assert!(msg.contains("--shared-key \"a\" is given twice"), "{msg}");
    for (extra, says) in [
        (
            &["--min-interval", "1m"][..],
            "--min-interval or --cooldown",
        ),
        (&["--cooldown", "1m"][..], "--min-interval or --cooldown"),
    ] {
        let mut args = vec!["-k", "a", "-k", "b", "--shared-key", "a"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "true"]);
        let msg = usage(&args);
        assert!(
            msg.contains(&format!("--shared-key does not go with {says}")),
            "{msg}"
        );
    }
    // With one key, --limit and --supersede/--replace meet --shared-key's own refusal.
    let msg = usage(&["-k", "a", "--shared-key", "a", "--limit", "3", "--", "true"]);
    assert!(
        msg.contains("--shared-key does not go with --limit"),
        "{msg}"
    );
    let msg = usage(&["-k", "a", "--shared-key", "a", "--supersede", "--", "true"]);
    assert!(
        msg.contains("--shared-key does not go with --supersede or --replace"),
        "{msg}"
    );
    let msg = usage(&["-k", "a", "--shared-key", "a", "--replace", "--", "true"]);
    assert!(
        msg.contains("--shared-key does not go with --supersede or --replace"),
        "{msg}"
    );
    // Several keys refuse --limit N>1, --supersede and --replace first, as without it.
    let msg = usage(&[
        "-k",
        "a",
        "-k",
        "b",
        "--shared-key",
        "a",
        "--limit",
        "2",
        "--",
        "true",
    ]);
    assert!(msg.contains("takes one key"), "{msg}");
    let msg = usage(&[
        "--redis",
        "redis://127.0.0.1:2",
        "--redis",
        "redis://127.0.0.1:3",
        "-k",
        "a",
        "-k",
        "b",
        "--shared-key",
        "a",
        "--",
        "true",
    ]);
    assert!(
        msg.contains("--shared-key needs a line of waiters, which a Redlock")
            && !msg.contains("  "),
        "{msg}"
    );
}
