//! The model's own rules, each checked against what Redis 7.0.15 does (the differential test
//! checks the scripts as a whole).

use std::time::Duration;

use super::keyspace::{format_g, format_score};
use super::*;
use crate::backend::Script;
use crate::clock::Moment;
use crate::lock::protocol::{ACQUIRE, HOLDS, acquire_args, decode_answer};
use crate::lock::{AfterRun, Answer, Holder, LockName, Queueing, Request, Token};

/// 2026-11-28 00:00:00 UTC, in µs.
const T0: u64 = 1_795_824_000_000_000;

fn eval(redis: &mut Redis, script: &'static Script, keys: &[&str], args: &[&str]) -> Resp {
    Runner::new()
        .eval(redis, ScriptTime::Frozen, script, keys, args)
        .reply
}

fn lua(source: &'static str) -> &'static Script {
    Box::leak(Box::new(Script::new(source)))
}

fn error_of(reply: Resp) -> String {
    match reply {
        Resp::Error(e) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn a_key_lives_through_its_expiry_millisecond_and_is_gone_after_it() {
    let mut redis = Redis::at(T0);
    let set = lua("return redis.call('SET', KEYS[1], 'v', 'PX', 10)");
    let pttl = lua("return {redis.call('PTTL', KEYS[1]), redis.call('EXISTS', KEYS[1])}");
    assert_eq!(
        eval(&mut redis, set, &["k"], &[]),
        Resp::Status("OK".into())
    );
    redis.advance_to(T0 + 10_000);
    assert_eq!(
        eval(&mut redis, pttl, &["k"], &[]),
        Resp::Array(vec![Resp::Int(0), Resp::Int(1)])
    );
    redis.advance_to(T0 + 11_000);
    assert_eq!(
        eval(&mut redis, pttl, &["k"], &[]),
        Resp::Array(vec![Resp::Int(-2), Resp::Int(0)])
    );
}

#[test]
fn an_expiry_in_the_past_deletes_and_set_refuses_px_0() {
    let mut redis = Redis::at(T0);
    let script = lua("redis.call('SET', KEYS[1], 'v') \
         local n = redis.call('PEXPIRE', KEYS[1], 0) \
         return {n, redis.call('EXISTS', KEYS[1]), redis.call('PEXPIRE', KEYS[1], 10)}");
    assert_eq!(
        eval(&mut redis, script, &["k"], &[]),
        Resp::Array(vec![Resp::Int(1), Resp::Int(0), Resp::Int(0)])
    );
    let px0 = lua("return redis.call('SET', KEYS[1], 'v', 'PX', 0)");
    assert!(
        error_of(eval(&mut redis, px0, &["k"], &[]))
            .starts_with("ERR invalid expire time in 'set' command")
    );
}

#[test]
fn a_command_on_the_wrong_type_raises_wrongtype_and_pcall_returns_it() {
    let mut redis = Redis::at(T0);
    let call = lua("redis.call('SET', KEYS[1], 'v') return redis.call('HGET', KEYS[1], 'f')");
    assert_eq!(
        error_of(eval(&mut redis, call, &["k"], &[])),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    let pcall = lua("local e = redis.pcall('ZCARD', KEYS[1]) return e.err");
    assert_eq!(
        eval(&mut redis, pcall, &["k"], &[]),
        Resp::Bulk(b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec())
    );
    let arity = lua("return redis.call('GET')");
    assert_eq!(
        error_of(eval(&mut redis, arity, &[], &[])),
        "ERR Wrong number of args calling Redis command from script"
    );
    let odd = lua("return redis.call('HSET', 'h', 'a', 'b', 'c')");
    assert_eq!(
        error_of(eval(&mut redis, odd, &[], &[])),
        "ERR wrong number of arguments for 'hset' command"
    );
    let table = lua("return redis.call('GET', {})");
    assert_eq!(
        error_of(eval(&mut redis, table, &[], &[])),
        "ERR Lua redis lib command arguments must be strings or integers"
    );
}

#[test]
#[should_panic(expected = "the model Redis has no command \"INCR\"")]
fn a_command_the_model_lacks_fails_loudly() {
    eval(
        &mut Redis::at(T0),
        lua("return redis.call('INCR', 'n')"),
        &[],
        &[],
    );
}

#[test]
fn globals_are_read_only_and_an_unknown_one_is_an_error() {
    let mut redis = Redis::at(T0);
    let read = error_of(eval(&mut redis, lua("return y"), &[], &[]));
    assert_eq!(
        read,
        "ERR user_script:1: Script attempted to access nonexistent global variable 'y'"
    );
    let write = error_of(eval(&mut redis, lua("x = 1 return 1"), &[], &[]));
    assert_eq!(
        write,
        "ERR user_script:1: Attempt to modify a readonly table"
    );
}

#[test]
fn lua_values_become_replies_as_redis_converts_them() {
    let mut redis = Redis::at(T0);
    let cases: [(&'static str, Resp); 7] = [
        ("return {1, nil, 3}", Resp::Array(vec![Resp::Int(1)])),
        (
            "return {1.9, -1.9, true, false}",
            Resp::Array(vec![Resp::Int(1), Resp::Int(-1), Resp::Int(1), Resp::Nil]),
        ),
        (
            "return string.format('%.0f', 2^52)",
            Resp::Bulk(b"4503599627370496".to_vec()),
        ),
        ("return unpack({7, 8})", Resp::Int(7)),
        (
            "return redis.status_reply('FINE')",
            Resp::Status("FINE".into()),
        ),
        (
            "return redis.error_reply('DISTLOCK-PROTOCOL 2 1')",
            Resp::Error("DISTLOCK-PROTOCOL 2 1".into()),
        ),
        (
            "return redis.error_reply('oops')",
            Resp::Error("ERR oops".into()),
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(
            eval(&mut redis, lua(source), &[], &[]),
            expected,
            "{source}"
        );
    }
}

#[test]
fn numbers_reach_commands_and_scores_come_back_as_redis_formats_them() {
    let mut redis = Redis::at(T0);
    let script = lua(
        "redis.call('SET', 'a', 0.1) redis.call('ZADD', 'z', 2^53 + 2, 'm') \
         redis.call('ZADD', 'z', 1764288000000, 'n') \
         return {redis.call('GET', 'a'), redis.call('ZSCORE', 'z', 'm'), \
                 redis.call('ZRANGE', 'z', 0, 0, 'WITHSCORES')[2]}",
    );
    assert_eq!(
        eval(&mut redis, script, &[], &[]),
        Resp::Array(vec![
            Resp::Bulk(b"0.10000000000000001".to_vec()),
            Resp::Bulk(b"9007199254740994".to_vec()),
            Resp::Bulk(b"1764288000000".to_vec()),
        ])
    );
    assert_eq!(format_g(1e20, 17), "1e+20");
    assert_eq!(format_g(1.5, 17), "1.5");
    assert_eq!(format_g(12345678901234567.0, 14), "1.2345678901235e+16");
    assert_eq!(format_score(-3.0), "-3");
}

#[test]
fn cjson_escapes_and_orders_as_lua_cjson() {
    let mut redis = Redis::at(T0);
    let encode = lua("return cjson.encode({a = string.char(127, 1, 8) .. 'x/y\"'})");
    assert_eq!(
        eval(&mut redis, encode, &[], &[]),
        Resp::Bulk(br#"{"a":"\u007f\u0001\bx\/y\""}"#.to_vec())
    );
    // Keys come back in the order Lua's table iterates them (as in Redis 7.0.15).
    let order = lua(
        "local t = cjson.decode('{\"b\":\"1\",\"a\":\"2\",\"c\":3}') \
         local o = {} for k in pairs(t) do o[#o + 1] = k end return o",
    );
    assert_eq!(
        eval(&mut redis, order, &[], &[]),
        Resp::Array(vec![
            Resp::Bulk(b"a".to_vec()),
            Resp::Bulk(b"c".to_vec()),
            Resp::Bulk(b"b".to_vec()),
        ])
    );
    let sparse = lua(
        "return {cjson.encode({}), cjson.encode({[1] = 'a', [3] = 'c'}), cjson.encode({n = 1.5})}",
    );
    assert_eq!(
        eval(&mut redis, sparse, &[], &[]),
        Resp::Array(vec![
            Resp::Bulk(b"{}".to_vec()),
            Resp::Bulk(br#"["a",null,"c"]"#.to_vec()),
            Resp::Bulk(br#"{"n":1.5}"#.to_vec()),
        ])
    );
    let bad = lua("return {pcall(cjson.decode, 'nope')}");
    assert!(matches!(
        eval(&mut redis, bad, &[], &[]),
        Resp::Array(items) if items.first() == Some(&Resp::Nil)
    ));
}

#[test]
fn redis_7_0_time_runs_on_inside_a_script_while_keys_expire_by_its_start() {
    // A key that expires 1 ms after the script starts: alive for lookups all through the
    // script; in 7.0 the script's TIME, and PTTL, may already be past it.
    let script = lua("local t = redis.call('TIME') \
         return {t[1] * 1000 + math.floor(t[2] / 1000), redis.call('EXISTS', KEYS[1]), \
                 redis.call('PTTL', KEYS[1])}");
    let mut runner = Runner::new();
    let mut redis = Redis::at(T0);
    let set = lua("return redis.call('SET', KEYS[1], 'v', 'PX', 1)");
    runner.eval(&mut redis, ScriptTime::Frozen, set, &["k"], &[] as &[&str]);
    let now = (T0 / 1000) as i64;
    let frozen = runner.eval(
        &mut redis.clone(),
        ScriptTime::Frozen,
        script,
        &["k"],
        &[] as &[&str],
    );
    assert_eq!(
        frozen.reply,
        Resp::Array(vec![Resp::Int(now), Resp::Int(1), Resp::Int(1)])
    );
    redis.advance_to(T0 + 1_000);
    let drifting = runner.eval(
        &mut redis,
        ScriptTime::Drifting {
            by_us: 1_000,
            after: 0,
        },
        script,
        &["k"],
        &[] as &[&str],
    );
    assert_eq!(
        drifting.reply,
        Resp::Array(vec![Resp::Int(now + 2), Resp::Int(1), Resp::Int(0)])
    );
}

#[test]
fn a_patch_applies_exactly_once_or_refuses() {
    let patch = Patch::new("a", "b");
    assert_eq!(patch.apply("xay").unwrap(), Some("xby".into()));
    assert_eq!(patch.apply("xyz").unwrap(), None);
    assert!(patch.apply("aa").unwrap_err().contains("occurs 2 times"));
    // A stale patch (in no script), and one that matches a script twice, are refused.
    let stale = Runner::with_patches(vec![Patch::new("no such text in any script", "")]);
    assert!(stale.err().unwrap().contains("occurs in no script"));
    let ambiguous = Runner::with_patches(vec![Patch::new("redis.call('GET', LOCK)", "")]);
    assert!(ambiguous.err().unwrap().contains("ambiguous"));
}

#[test]
fn a_patched_script_runs_patched_and_the_others_as_they_are() {
    let keys = LockName::new("distlock:", "k").keys();
    let mut redis = Redis::at(T0);
    let plain = Runner::new().eval(
        &mut redis.clone(),
        ScriptTime::Frozen,
        &HOLDS,
        &keys,
        &["nobody"],
    );
    assert_eq!(plain.reply, Resp::Array(vec![Resp::Int(0)]));
    let mut mutant = Runner::with_patches(vec![Patch::new(
        "if redis.call('GET', LOCK) == ARGV[1] then\n  return {1,",
        "if true then\n  return {1,",
    )])
    .unwrap();
    let patched = mutant.eval(&mut redis, ScriptTime::Frozen, &HOLDS, &keys, &["nobody"]);
    assert_eq!(patched.reply, Resp::Array(vec![Resp::Int(1), Resp::Int(0)]));
}

#[test]
fn the_acquire_script_grants_and_queues_and_the_real_decoder_reads_it() {
    let name = LockName::new("distlock:", "k");
    let keys = name.keys();
    let holder = Holder::default();
    let (a, b) = (Token::from_text("a-token"), Token::from_text("b-token"));
    let request = |token| Request {
        token,
        claim: Duration::from_millis(9200),
        ttl: Duration::from_secs(30),
        holder: &holder,
        limit: 1,
        queueing: Queueing::Join,
        polls: false,
        after: AfterRun::default(),
        doorbell: false,
    };
    let mut runner = Runner::new();
    let mut redis = Redis::at(T0);
    let mut attempt = |redis: &mut Redis, token| {
        let args = acquire_args(&request(token), Queueing::Join);
        let outcome = runner.eval(redis, ScriptTime::Frozen, &ACQUIRE, &keys, &args);
        let replies = outcome.reply.into_replies().unwrap();
        (
            decode_answer(&replies, Moment::now(), Duration::from_millis(9200)).unwrap(),
            outcome.published,
        )
    };
    let (first, _) = attempt(&mut redis, &a);
    assert!(
        matches!(first, Answer::Granted { fence, .. } if fence == T0),
        "{first:?}"
    );
    redis.advance_to(T0 + 5_000);
    let (second, published) = attempt(&mut redis, &b);
    assert!(
        matches!(second, Answer::Queued { position: 1, .. }),
        "{second:?}"
    );
    assert!(published.is_empty());
    let lock = redis
        .keyspace
        .lookup(name.lock_key().as_bytes(), redis.now_ms());
    assert_eq!(
        lock.map(|e| (e.value.clone(), e.expires_at)),
        Some((Value::Str(b"a-token".to_vec()), Some(T0 / 1000 + 9200)))
    );
    // The fingerprint ignores nothing but expired keys.
    let mut later = redis.clone();
    assert_eq!(later.fingerprint(), redis.clone().fingerprint());
}

#[test]
fn redis_7_0_time_may_move_on_between_two_readings_and_publishes_are_recorded() {
    // NOW from the first TIME, PTTL one ms later: what the differential test saw on 7.0.15.
    let script = lua("local t = redis.call('TIME') \
         redis.call('PUBLISH', 'chan', 'msg') \
         return {t[1] * 1000 + math.floor(t[2] / 1000), redis.call('PTTL', KEYS[1])}");
    let mut runner = Runner::new();
    let mut redis = Redis::at(T0);
    let set = lua("return redis.call('SET', KEYS[1], 'v', 'PX', 100)");
    runner.eval(&mut redis, ScriptTime::Frozen, set, &["k"], &[] as &[&str]);
    let now = (T0 / 1000) as i64;
    let outcome = runner.eval(
        &mut redis,
        ScriptTime::Drifting {
            by_us: 1_000,
            after: 1,
        },
        script,
        &["k"],
        &[] as &[&str],
    );
    assert_eq!(
        outcome.reply,
        Resp::Array(vec![Resp::Int(now), Resp::Int(99)])
    );
    assert_eq!(outcome.published, vec![("chan".into(), "msg".into())]);
    assert_eq!(outcome.clock_readings, 2);
}

#[test]
fn a_script_that_fails_keeps_what_it_wrote_before() {
    // Redis has no rollback: the error reply comes after the first SET took effect.
    let mut redis = Redis::at(T0);
    let script = lua("redis.call('SET', 'a', '1') return redis.call('SET', 'b', 'v', 'PX', 0)");
    assert!(error_of(eval(&mut redis, script, &[], &[])).starts_with("ERR invalid expire time"));
    let get = lua("return {redis.call('GET', 'a'), redis.call('EXISTS', 'b')}");
    assert_eq!(
        eval(&mut redis, get, &[], &[]),
        Resp::Array(vec![Resp::Bulk(b"1".to_vec()), Resp::Int(0)])
    );
}
