//! The `cjson` table Redis gives scripts, with lua-cjson's behaviour where the scripts can see
//! it: `encode` walks a table with `pairs` (so keys come out in Lua's own order), escapes `/`
//! and control characters as lua-cjson does, writes numbers with `%.14g` and an empty table as
//! `{}`; `decode` (over serde_json) builds tables field by field in the document's order, as
//! lua-cjson does, so that a decoded table iterates as it would in Redis; `null` is
//! `cjson.null`. Errors are Lua errors (the scripts catch them with `pcall`).

use std::fmt;

use mlua::{LightUserData, Lua, Table, Value as LuaValue};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::keyspace::format_g;

/// A JSON value with the fields of its objects in the document's order.
enum Json {
    Null,
    Bool(bool),
    Number(f64),
    Text(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
                Ok(Json::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
                Ok(Json::Number(n as f64))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
                Ok(Json::Number(n as f64))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Json, E> {
                Ok(Json::Number(n))
            }
            fn visit_str<E>(self, s: &str) -> Result<Json, E> {
                Ok(Json::Text(s.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Json::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
                let mut fields = Vec::new();
                while let Some((k, v)) = map.next_entry()? {
                    fields.push((k, v));
                }
                Ok(Json::Object(fields))
            }
        }
        d.deserialize_any(V)
    }
}

fn null() -> LuaValue {
    LuaValue::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn to_lua(lua: &Lua, json: Json) -> mlua::Result<LuaValue> {
    Ok(match json {
        Json::Null => null(),
        Json::Bool(b) => LuaValue::Boolean(b),
        Json::Number(n) => LuaValue::Number(n),
        Json::Text(s) => LuaValue::String(lua.create_string(s)?),
        Json::Array(items) => {
            let t = lua.create_table()?;
            for (i, item) in items.into_iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            LuaValue::Table(t)
        }
        Json::Object(fields) => {
            let t = lua.create_table()?;
            for (k, v) in fields {
                t.raw_set(k, to_lua(lua, v)?)?;
            }
            LuaValue::Table(t)
        }
    })
}

/// A string as lua-cjson writes it: `"`, `\`, `/` and control characters escaped, every other
/// byte as it is.
fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

fn encode_number(out: &mut Vec<u8>, n: f64) -> mlua::Result<()> {
    if !n.is_finite() {
        return Err(mlua::Error::runtime(
            "Cannot serialise number: must not be NaN or Inf",
        ));
    }
    out.extend_from_slice(format_g(n, 14).as_bytes());
    Ok(())
}

fn encode(out: &mut Vec<u8>, value: &LuaValue, depth: usize) -> mlua::Result<()> {
    match value {
        LuaValue::Nil => out.extend_from_slice(b"null"),
        LuaValue::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        LuaValue::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        LuaValue::Integer(n) => encode_number(out, *n as f64)?,
        LuaValue::Number(n) => encode_number(out, *n)?,
        LuaValue::String(s) => encode_string(out, &s.as_bytes()),
        LuaValue::Table(t) => {
            if depth > 1000 {
                return Err(mlua::Error::runtime(
                    "Cannot serialise, excessive nesting (1001)",
                ));
            }
            let pairs: Vec<(LuaValue, LuaValue)> = t
                .pairs::<LuaValue, LuaValue>()
                .collect::<mlua::Result<_>>()?;
            // An array when every key is a positive integer and it is not too sparse (lua-cjson:
            // at most 10 elements, or at least half of them present).
            let indices: Option<Vec<usize>> = pairs
                .iter()
                .map(|(k, _)| match k {
                    LuaValue::Integer(n) if *n >= 1 => Some(*n as usize),
                    LuaValue::Number(n) if *n >= 1.0 && n.fract() == 0.0 => Some(*n as usize),
                    _ => None,
                })
                .collect();
            match indices {
                Some(indices) if !pairs.is_empty() => {
                    let max = indices.iter().copied().max().unwrap_or(0);
                    if max > 10 && max > 2 * indices.len() {
                        return Err(mlua::Error::runtime(
                            "Cannot serialise table: excessively sparse array",
                        ));
                    }
                    out.push(b'[');
                    for i in 1..=max {
                        if i > 1 {
                            out.push(b',');
                        }
                        encode(out, &t.raw_get::<LuaValue>(i)?, depth + 1)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    for (i, (k, v)) in pairs.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        match k {
                            LuaValue::String(s) => encode_string(out, &s.as_bytes()),
                            LuaValue::Integer(n) => {
                                encode_string(out, format_g(*n as f64, 14).as_bytes())
                            }
                            LuaValue::Number(n) => encode_string(out, format_g(*n, 14).as_bytes()),
                            _ => {
                                return Err(mlua::Error::runtime(
                                    "Cannot serialise table: table key must be a number or string",
                                ));
                            }
                        }
                        out.push(b':');
                        encode(out, v, depth + 1)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(mlua::Error::runtime(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )));
        }
    }
    Ok(())
}

/// The `cjson` table: `encode`, `decode`, `null`.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let cjson = lua.create_table()?;
    cjson.raw_set(
        "encode",
        lua.create_function(|lua, value: LuaValue| {
            let mut out = Vec::new();
            encode(&mut out, &value, 0)?;
            lua.create_string(out)
        })?,
    )?;
    cjson.raw_set(
        "decode",
        lua.create_function(|lua, text: mlua::String| {
            let json: Json = serde_json::from_slice(&text.as_bytes())
                .map_err(|e| mlua::Error::runtime(format!("Expected value: {e}")))?;
            to_lua(lua, json)
        })?,
    )?;
    cjson.raw_set("null", null())?;
    Ok(cjson)
}
