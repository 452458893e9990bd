//! What a connection carries for a lock: a Lua [`Script`] (sent by its hash, loaded on
//! `NOSCRIPT`), and its [`Reply`] in our own terms, so that no redis-rs type leaves the backend.

/// One element of a script's reply, in our own terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// An integer.
    Int(i64),
    /// A string (Lua strings are bytes).
    Bytes(Vec<u8>),
    /// Lua `false` / nil.
    Nil,
    /// A nested array.
    Array(Vec<Reply>),
}

impl Reply {
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// The text, if this is a string (lossily decoded).
    pub fn as_text(&self) -> Option<String> {
        match self {
            Reply::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

impl From<redis::Value> for Reply {
    fn from(value: redis::Value) -> Self {
        match value {
            redis::Value::Int(n) => Reply::Int(n),
            redis::Value::BulkString(b) => Reply::Bytes(b),
            redis::Value::SimpleString(s) => Reply::Bytes(s.into_bytes()),
            redis::Value::Okay => Reply::Bytes(b"OK".to_vec()),
            redis::Value::Array(items) | redis::Value::Set(items) => {
                Reply::Array(items.into_iter().map(Reply::from).collect())
            }
            _ => Reply::Nil,
        }
    }
}

/// A Lua script, sent with EVALSHA (falling back to loading it on NOSCRIPT).
///
/// The SHA-1 that EVALSHA names is computed when distlock is compiled ([`Script::new`] is a
/// `const fn`, and every script is a `static`): hashing the acquire and release scripts (about
/// 54 KB of Lua) at run time was the largest piece of distlock's own CPU time in a `run`.
/// SHA-1 is written here as a `const fn` (below) because the crate redis-rs hashes with,
/// `sha1_smol`, cannot run at compile time; the tests hold it to that crate's answer for every
/// script distlock sends, and to the FIPS 180 examples.
pub struct Script {
    pub(super) source: &'static str,
    hash: [u8; 40],
}

impl Script {
    /// Wrap Lua source (in a `static` or `const`, the hash costs nothing at run time).
    pub const fn new(source: &'static str) -> Self {
        Script {
            source,
            hash: sha1_hex(source.as_bytes()),
        }
    }

    /// The script's SHA-1, in lowercase hex: what EVALSHA names.
    pub fn hash(&self) -> &str {
        std::str::from_utf8(&self.hash).unwrap_or_default()
    }

    /// The Lua source.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// `EVALSHA hash numkeys keys... args...`.
    pub(super) fn evalsha(&self, keys: &[&str], args: &[&[u8]]) -> redis::Cmd {
        let mut command = redis::cmd("EVALSHA");
        command.arg(self.hash()).arg(keys.len()).arg(keys);
        for arg in args {
            command.arg(*arg);
        }
        command
    }

    /// Run the script on `conn`: EVALSHA, and on NOSCRIPT, `SCRIPT LOAD` and EVALSHA again
    /// (what redis-rs's `ScriptInvocation::invoke` does).
    pub(super) fn invoke<T: redis::FromRedisValue>(
        &self,
        conn: &mut dyn redis::ConnectionLike,
        keys: &[&str],
        args: &[&[u8]],
    ) -> redis::RedisResult<T> {
        let eval = self.evalsha(keys, args);
        match eval.query(conn) {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(self.source)
                    .query::<String>(conn)?;
                eval.query(conn)
            }
            other => other,
        }
    }
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Script").field(&self.hash()).finish()
    }
}

/// SHA-1 of `data` in lowercase hex (FIPS 180-4), as Redis names a script; a `const fn`, so
/// that a script's hash is part of the binary.
const fn sha1_hex(data: &[u8]) -> [u8; 40] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let len = data.len();
    // The message, a 0x80 byte, zeros, and the length in bits: a whole number of 64-byte blocks.
    let blocks = (len + 9).div_ceil(64);
    let bits = (len as u64).wrapping_mul(8);
    let mut block = 0;
    while block < blocks {
        let mut w = [0u32; 80];
        let mut i = 0;
        while i < 16 {
            let mut word = 0u32;
            let mut j = 0;
            while j < 4 {
                let at = block * 64 + i * 4 + j;
                let byte = if at < len {
                    data[at]
                } else if at == len {
                    0x80
                } else if at >= blocks * 64 - 8 {
                    (bits >> ((blocks * 64 - 1 - at) * 8)) as u8
                } else {
                    0
                };
                word = (word << 8) | byte as u32;
                j += 1;
            }
            w[i] = word;
            i += 1;
        }
        while i < 80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
            i += 1;
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        let mut t = 0;
        while t < 80 {
            let (f, k) = match t / 20 {
                0 => ((b & c) | (!b & d), 0x5A82_7999),
                1 => (b ^ c ^ d, 0x6ED9_EBA1),
                2 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let temp = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(w[t]);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = temp;
            t += 1;
        }
        h[0] = h[0].wrapping_add(a);
        h[1] = h[1].wrapping_add(b);
        h[2] = h[2].wrapping_add(c);
        h[3] = h[3].wrapping_add(d);
        h[4] = h[4].wrapping_add(e);
        block += 1;
    }
    let digits = b"0123456789abcdef";
    let mut hex = [0u8; 40];
    let mut i = 0;
    while i < 20 {
        let byte = (h[i / 4] >> (24 - (i % 4) * 8)) as u8;
        hex[2 * i] = digits[(byte >> 4) as usize];
        hex[2 * i + 1] = digits[(byte & 0x0f) as usize];
        i += 1;
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_known_answers() {
        // FIPS 180 examples, the empty string, and lengths around the padding's block edges.
        assert_eq!(
            Script::new("abc").hash(),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            Script::new("").hash(),
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        );
        assert_eq!(
            Script::new("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq").hash(),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        for len in [55, 56, 63, 64, 65, 119, 120, 128, 1000] {
            let text: &'static str = "x".repeat(len).leak();
            assert_eq!(
                Script::new(text).hash(),
                redis::Script::new(text).get_hash(),
                "length {len}"
            );
        }
    }
}
