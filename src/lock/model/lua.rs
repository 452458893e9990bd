//! The runner: distlock's scripts in Lua 5.1 (the Lua of Redis) with what Redis gives a script
//! and nothing more: `redis.call`/`pcall`/`error_reply`/`status_reply`, a `cjson` table,
//! `KEYS`/`ARGV`, the conversions between Lua values and replies that Redis makes, globals that
//! cannot be created and whose absence is an error (Redis 7.0), and the script-time rules.
//! Every script is loaded by its hash from the exact text distlock sends, optionally patched
//! (mutants, see [`Patch`]), and compiled once per runner.

use std::collections::HashMap;

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value as LuaValue};

use super::Redis;
use super::commands::{self, Clock, Published, Resp};
use super::keyspace::format_g;
use crate::backend::Script;

/// How time passes inside one script.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScriptTime {
    /// Redis 7.2 and later: one instant for the whole script (`TIME`, key expiry, relative
    /// expiries, PTTL).
    Frozen,
    /// Redis 7.0: keys expire by the script's start, but `TIME`, relative expiries (`SET PX`,
    /// `PEXPIRE`), the "already expired" check and `PTTL` read the running clock, which reads
    /// the start for the first `after` of these readings and `by_us` later from then on (the
    /// script took that long to get there).
    Drifting { by_us: u64, after: usize },
}

/// A change to the scripts' text at load time: `old` replaced by `new` in every script whose
/// text contains it, where it must occur exactly once, and at least one script must contain
/// it (a patch that no longer applies fails loudly instead of checking nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patch {
    pub old: String,
    pub new: String,
}

impl Patch {
    pub fn new(old: &str, new: &str) -> Patch {
        Patch {
            old: old.to_owned(),
            new: new.to_owned(),
        }
    }

    /// `source` with the patch applied, if it applies to it (an error if `old` occurs more
    /// than once).
    pub fn apply(&self, source: &str) -> Result<Option<String>, String> {
        match source.matches(self.old.as_str()).count() {
            0 => Ok(None),
            1 => Ok(Some(source.replacen(&self.old, &self.new, 1))),
            n => Err(format!(
                "patch {:?} is ambiguous: it occurs {n} times in one script",
                self.old
            )),
        }
    }
}

/// What a script run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The script's reply (an error reply when it failed).
    pub reply: Resp,
    /// The messages it published (channel, message), in order.
    pub published: Vec<(String, String)>,
    /// How many times its commands read the running clock (see [`ScriptTime::Drifting`]).
    pub clock_readings: usize,
}

/// What the `redis.*` functions work on during one run (the runner's app data).
struct Exec {
    redis: Redis,
    clock: Clock,
    published: Published,
    /// Commands the script's user may not run (see [`Runner::deny`]).
    denied: Vec<String>,
}

/// A Lua VM loaded with Redis' script environment and distlock's scripts.
pub struct Runner {
    lua: Lua,
    patches: Vec<Patch>,
    /// Compiled scripts by their hash (of the text distlock sends, before any patch).
    loaded: HashMap<String, Function>,
    /// `pcall(f)` in Lua: the error value as raised (a string, or Redis' `{err = ...}`).
    protected: Function,
    /// Commands refused to the scripts (see [`Runner::deny`]).
    denied: Vec<String>,
}

/// Every script distlock sends (a patch must apply to one of them).
pub fn scripts() -> [&'static Script; 6] {
    use crate::lock::protocol::{ACQUIRE, HOLDS, INSPECT, RELEASE, RENEW};
    [
        &ACQUIRE,
        &RENEW,
        &RELEASE,
        &INSPECT,
        &HOLDS,
        &crate::lock::history::LOST,
    ]
}

impl Runner {
    /// A runner for the scripts as they are.
    pub fn new() -> Runner {
        Runner::with_patches(Vec::new()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A runner whose scripts have `patches` applied (an error if one does not apply).
    pub fn with_patches(patches: Vec<Patch>) -> Result<Runner, String> {
        for patch in &patches {
            let mut applies = false;
            for script in scripts() {
                applies |= patch.apply(script.source())?.is_some();
            }
            if !applies {
                return Err(format!("patch {:?} occurs in no script", patch.old));
            }
        }
        let lua = sandbox().map_err(|e| e.to_string())?;
        let protected = lua
            .load("local f = ... return pcall(f)")
            .set_name("=runner")
            .into_function()
            .map_err(|e| e.to_string())?;
        Ok(Runner {
            lua,
            patches,
            loaded: HashMap::new(),
            protected,
            denied: Vec::new(),
        })
    }

    /// Refuse `command` to the scripts from now on, as an ACL user without it does: the call
    /// fails with a `NOPERM` error (raised by `redis.call`, returned by `redis.pcall`). (The
    /// text of Redis' error is not modelled exactly; the scripts only test that it is one.)
    pub fn deny(&mut self, command: &str) {
        self.denied.push(command.to_ascii_uppercase());
    }

    /// The script's compiled body (patched), compiled on first use.
    fn function(&mut self, script: &Script) -> Function {
        if let Some(f) = self.loaded.get(script.hash()) {
            return f.clone();
        }
        let mut source = script.source().to_owned();
        for patch in &self.patches {
            if let Some(patched) = patch.apply(&source).unwrap_or_else(|e| panic!("{e}")) {
                source = patched;
            }
        }
        // Redis names every script's chunk `@user_script`: errors read `user_script:LINE: ...`.
        let f = self
            .lua
            .load(source)
            .set_name("@user_script")
            .into_function()
            .unwrap_or_else(|e| panic!("a script does not compile: {e}"));
        self.loaded.insert(script.hash().to_owned(), f.clone());
        f
    }

    /// Run `script` on `redis` (at its clock) with `keys` and `args`, as EVALSHA would.
    pub fn eval(
        &mut self,
        redis: &mut Redis,
        time: ScriptTime,
        script: &Script,
        keys: &[impl AsRef<[u8]>],
        args: &[impl AsRef<[u8]>],
    ) -> Outcome {
        let f = self.function(script);
        let lua = &self.lua;
        let strings = |items: Vec<&[u8]>| -> Table {
            let table = lua.create_table().unwrap();
            for (i, item) in items.into_iter().enumerate() {
                table
                    .raw_set(i + 1, lua.create_string(item).unwrap())
                    .unwrap();
            }
            table
        };
        let globals = lua.globals();
        let keys = strings(keys.iter().map(AsRef::as_ref).collect());
        let args = strings(args.iter().map(AsRef::as_ref).collect());
        globals.raw_set("KEYS", keys).unwrap();
        globals.raw_set("ARGV", args).unwrap();
        let start = redis.now_us;
        let (later_us, switch_after) = match time {
            ScriptTime::Frozen => (start, 0),
            ScriptTime::Drifting { by_us, after } => (start + by_us, after),
        };
        let clock = Clock {
            lookup_ms: start / 1000,
            start_us: start,
            later_us,
            switch_after,
            readings: 0,
        };
        lua.set_app_data(Exec {
            redis: std::mem::take(redis),
            clock,
            published: Vec::new(),
            denied: self.denied.clone(),
        });
        let result = self.protected.call::<MultiValue>(f);
        let exec = lua
            .remove_app_data::<Exec>()
            .expect("the run's state is where it was put");
        *redis = exec.redis;
        let clock_readings = exec.clock.readings;
        let published = exec
            .published
            .into_iter()
            .map(|(c, m)| {
                (
                    String::from_utf8_lossy(&c).into_owned(),
                    String::from_utf8_lossy(&m).into_owned(),
                )
            })
            .collect();
        let values: Vec<LuaValue> = result
            .unwrap_or_else(|e| panic!("the runner failed: {e}"))
            .into_iter()
            .collect();
        let reply = match values.as_slice() {
            [LuaValue::Boolean(true), value, ..] => to_resp(value),
            [LuaValue::Boolean(true)] => Resp::Nil,
            [LuaValue::Boolean(false), error, ..] => match error {
                // Raised by redis.call (Redis' error table).
                LuaValue::Table(t) => match t.raw_get::<LuaValue>("err") {
                    Ok(LuaValue::String(s)) => Resp::Error(s.to_string_lossy()),
                    _ => Resp::Error("ERR (an error table without err)".into()),
                },
                LuaValue::String(s) => Resp::Error(format!("ERR {}", s.to_string_lossy())),
                other => Resp::Error(format!("ERR {other:?}")),
            },
            other => panic!("the runner returned {other:?}"),
        };
        Outcome {
            reply,
            published,
            clock_readings,
        }
    }
}

impl Default for Runner {
    fn default() -> Self {
        Runner::new()
    }
}

/// A Lua VM with what Redis gives a script: the base, table, string and math libraries,
/// `redis`, `cjson`, and a global table that refuses new globals and unknown names.
fn sandbox() -> mlua::Result<Lua> {
    // Rust panics (a command the model lacks) go through the scripts' pcall to the test.
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::new().catch_rust_panics(false),
    )?;
    let globals = lua.globals();
    for name in ["dofile", "loadfile"] {
        globals.raw_set(name, LuaValue::Nil)?;
    }
    // The command itself: (true, reply) or (false, error table), raised or returned by the
    // Lua wrappers below, as Redis' redis.call and redis.pcall do.
    let raw = lua.create_function(|lua, args: MultiValue| {
        let argv = match arguments(&args) {
            Ok(argv) => argv,
            Err(e) => return Ok((false, LuaValue::Table(error_table(lua, e)?))),
        };
        let reply = {
            let mut exec = lua
                .app_data_mut::<Exec>()
                .expect("redis.call runs inside a script");
            let Exec {
                redis,
                clock,
                published,
                denied,
            } = &mut *exec;
            let name = String::from_utf8_lossy(&argv[0]).to_ascii_uppercase();
            if denied.contains(&name) {
                Resp::Error(format!(
                    "NOPERM this user has no permissions to run the '{}' command",
                    name.to_ascii_lowercase()
                ))
            } else {
                commands::call(&mut redis.keyspace, clock, &argv, published)
            }
        };
        match reply {
            Resp::Error(e) => Ok((false, LuaValue::Table(error_table(lua, &e)?))),
            reply => Ok((true, to_lua(lua, &reply)?)),
        }
    })?;
    let redis = lua.create_table()?;
    let wrap = |source: &str| -> mlua::Result<Function> {
        lua.load(source)
            .set_name("=redis")
            .call::<Function>(raw.clone())
    };
    redis.raw_set(
        "call",
        wrap("local raw = ... return function(...) local ok, r = raw(...) if not ok then error(r) end return r end")?,
    )?;
    redis.raw_set(
        "pcall",
        wrap("local raw = ... return function(...) local ok, r = raw(...) return r end")?,
    )?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, text: mlua::String| {
            // "-CODE msg" or "msg" (an ERR then), as luaRedisErrorReplyCommand says it.
            let text = text.to_string_lossy();
            let text = text.strip_prefix('-').unwrap_or(&text);
            let text = text.trim_end_matches(['\r', '\n']);
            let err = if text.contains(' ') {
                text.to_owned()
            } else {
                format!("ERR {text}")
            };
            error_table(lua, &err)
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, text: mlua::String| {
            let t = lua.create_table()?;
            t.raw_set("ok", text)?;
            Ok(t)
        })?,
    )?;
    globals.raw_set("redis", redis)?;
    globals.raw_set("cjson", super::cjson::table(&lua)?)?;
    // Redis 7.0: the globals are read-only, and reading an unknown one is an error (a typo in
    // a script, or a local used before its definition, fails instead of reading nil).
    lua.load(
        r#"
        setmetatable(_G, {
          __index = function(_, name)
            error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
          end,
          __newindex = function()
            error("Attempt to modify a readonly table", 2)
          end,
        })
        "#,
    )
    .set_name("=sandbox")
    .exec()?;
    Ok(lua)
}

fn error_table(lua: &Lua, err: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", err)?;
    Ok(t)
}

/// A script's `redis.call` arguments as Redis takes them: strings as they are, numbers as
/// `%.17g` (so 3000 is "3000"); anything else is refused.
fn arguments(args: &MultiValue) -> Result<Vec<Vec<u8>>, &'static str> {
    if args.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    args.iter()
        .map(|arg| match arg {
            LuaValue::String(s) => Ok(s.as_bytes().to_vec()),
            LuaValue::Integer(n) => Ok(n.to_string().into_bytes()),
            LuaValue::Number(n) => Ok(format_g(*n, 17).into_bytes()),
            _ => Err("ERR Lua redis lib command arguments must be strings or integers"),
        })
        .collect()
}

/// A command's reply as a script sees it: integers are numbers, a nil bulk is `false`, a
/// status is `{ok = ...}`, arrays are tables (errors never get here: they are raised).
fn to_lua(lua: &Lua, reply: &Resp) -> mlua::Result<LuaValue> {
    Ok(match reply {
        Resp::Int(n) => LuaValue::Number(*n as f64),
        Resp::Bulk(b) => LuaValue::String(lua.create_string(b)?),
        Resp::Nil => LuaValue::Boolean(false),
        Resp::Status(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", s.as_str())?;
            LuaValue::Table(t)
        }
        Resp::Error(e) => LuaValue::Table(error_table(lua, e)?),
        Resp::Array(items) => {
            let t = lua.create_table()?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            LuaValue::Table(t)
        }
    })
}

/// A script's return value as Redis replies it: numbers are integers (truncated), `false` and
/// nil are nil, `true` is 1, `{err = ...}` an error, `{ok = ...}` a status, any other table an
/// array that ends at its first nil.
pub fn to_resp(value: &LuaValue) -> Resp {
    match value {
        LuaValue::String(s) => Resp::Bulk(s.as_bytes().to_vec()),
        LuaValue::Boolean(true) => Resp::Int(1),
        LuaValue::Integer(n) => Resp::Int(*n),
        LuaValue::Number(n) => Resp::Int(*n as i64),
        LuaValue::Table(t) => {
            if let Ok(LuaValue::String(e)) = t.raw_get::<LuaValue>("err") {
                return Resp::Error(e.to_string_lossy());
            }
            if let Ok(LuaValue::String(s)) = t.raw_get::<LuaValue>("ok") {
                return Resp::Status(s.to_string_lossy());
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<LuaValue>(i) {
                    Ok(LuaValue::Nil) | Err(_) => break,
                    Ok(v) => items.push(to_resp(&v)),
                }
            }
            Resp::Array(items)
        }
        _ => Resp::Nil,
    }
}
