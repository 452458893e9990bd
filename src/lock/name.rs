//! Lock names: which keys a user may choose, and the Redis keys derived from them.

/// Default key prefix (clap's default for --prefix; a test keeps the two equal).
pub const DEFAULT_PREFIX: &str = "distlock:";

/// Longest accepted key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;

/// Characters refused in keys, with the reason shown to users.
const FORBIDDEN: &[(char, &str)] = &[
    ('{', "braces would break the Cluster hash tag"),
    ('}', "braces would break the Cluster hash tag"),
    ('*', "glob characters would make key patterns ambiguous"),
    ('?', "glob characters would make key patterns ambiguous"),
    ('[', "glob characters would make key patterns ambiguous"),
    (']', "glob characters would make key patterns ambiguous"),
    ('\\', "backslashes would make key patterns ambiguous"),
];

/// A lock's user-facing key and the Redis names derived from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockName {
    key: String,
    lock_key: String,
    owner_key: String,
    channel: String,
}

impl LockName {
    /// The names for `key` under `prefix`. Both must have been validated.
    pub fn new(prefix: &str, key: &str) -> Self {
        let lock_key = format!("{prefix}{{{key}}}");
        let owner_key = format!("{lock_key}:owner");
        let channel = format!("{lock_key}:released");
        LockName {
            key: key.to_owned(),
            lock_key,
            owner_key,
            channel,
        }
    }

    /// The key as the user gave it (without prefix).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The prefix (`PREFIX` of `PREFIX{KEY}`).
    pub fn prefix(&self) -> &str {
        let end = self.lock_key.len().saturating_sub(self.key.len() + 2);
        self.lock_key.get(..end).unwrap_or_default()
    }

    /// The Redis key of the lock: `PREFIX{KEY}`.
    pub fn lock_key(&self) -> &str {
        &self.lock_key
    }

    /// The hash of holder metadata: `PREFIX{KEY}:owner`.
    pub fn owner_key(&self) -> &str {
        &self.owner_key
    }

    /// A Redis key of a lock under `prefix`, split into the user's key and what follows the
    /// hash tag (`""` for the lock itself, `":owner"`, `":queue"`, ...); None for keys of other
    /// programs.
    pub fn split<'a>(prefix: &str, redis_key: &'a str) -> Option<(&'a str, &'a str)> {
        let inner = redis_key.strip_prefix(prefix)?.strip_prefix('{')?;
        let end = inner.find('}')?;
        let (key, rest) = (&inner[..end], &inner[end + 1..]);
        validate_key(key).ok().map(|()| (key, rest))
    }

    /// The SCAN pattern for lock keys whose KEY matches the glob `pattern`.
    pub fn scan_pattern(prefix: &str, pattern: &str) -> String {
        let mut escaped = String::with_capacity(prefix.len() + pattern.len() + 2);
        for c in prefix.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                escaped.push('\\');
            }
            escaped.push(c);
        }
        format!("{escaped}{{{pattern}}}")
    }

    /// The pub/sub channel a release that leaves the lock free publishes on:
    /// `PREFIX{KEY}:released`.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The channel on which the waiter `token` is woken alone (its turn came, or it was
    /// superseded): `PREFIX{KEY}:wake:TOKEN`.
    pub fn wake_channel(&self, token: &str) -> String {
        format!("{}:wake:{token}", self.lock_key)
    }

    /// Every key of the lock, in the order the scripts take them (see `lua/common.lua`): the
    /// lock, its owner hash, the fence counter, the line (queue, waiters, alive), the semaphore
    /// (slots, holders), the superseded waiters, and last the protocol marker that
    /// `lua/protocol.lua` checks (declared so that Redis Cluster routes and migrates it with
    /// the others), then the history's stream and holds (`lua/history.lua`; declared so that
    /// the scripts may record into them). All share the hash tag `{KEY}`.
    pub fn keys(&self) -> [String; 12] {
        let k = &self.lock_key;
        [
            k.clone(),
            self.owner_key.clone(),
            format!("{k}:fence"),
            format!("{k}:queue"),
            format!("{k}:waiters"),
            format!("{k}:alive"),
            format!("{k}:slots"),
            format!("{k}:holders"),
            format!("{k}:superseded"),
            format!("{k}:protocol"),
            format!("{k}:history"),
            format!("{k}:history:held"),
        ]
    }
}

/// Check a user-supplied key. The error names the problem and the fix.
pub fn validate_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("the lock key is empty; give it a name, e.g. --key deploy-prod".into());
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(format!(
            "the lock key is {} bytes long; use at most {MAX_KEY_BYTES}",
            key.len()
        ));
    }
    for c in key.chars() {
        if c.is_whitespace() || c.is_control() {
            return Err(format!(
                "the lock key {} contains whitespace or a control character; use e.g. - or _ instead",
                crate::text::quote(key)
            ));
        }
        if let Some((_, why)) = FORBIDDEN.iter().find(|(f, _)| *f == c) {
            return Err(format!(
                "the lock key {} contains '{c}' ({why}); use letters, digits and - _ . : / @",
                crate::text::quote(key)
            ));
        }
    }
    Ok(())
}

/// Check a `list` pattern: a glob over keys (`*`, `?`, `[...]`), without braces or whitespace.
pub fn validate_pattern(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() || pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "the pattern {} is empty or contains whitespace; use e.g. 'deploy-*'",
            crate::text::quote(pattern)
        ));
    }
    if pattern.contains(['{', '}']) {
        return Err(format!(
            "the pattern {} contains a brace; match keys without their prefix or braces, e.g. 'deploy-*'",
            crate::text::quote(pattern)
        ));
    }
    Ok(())
}

/// Check a user-supplied prefix.
pub fn validate_prefix(prefix: &str) -> Result<(), String> {
    if prefix.contains(['{', '}']) {
        return Err(format!(
            "the prefix {} contains a brace; braces are reserved for the hash tag around the key",
            crate::text::quote(prefix)
        ));
    }
    if prefix.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "the prefix {} contains whitespace or a control character",
            crate::text::quote(prefix)
        ));
    }
    if prefix.len() > MAX_KEY_BYTES {
        return Err(format!("the prefix is longer than {MAX_KEY_BYTES} bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let name = LockName::new("distlock:", "deploy-prod");
        assert_eq!(name.lock_key(), "distlock:{deploy-prod}");
        assert_eq!(name.channel(), "distlock:{deploy-prod}:released");
        assert_eq!(name.key(), "deploy-prod");
        assert_eq!(name.prefix(), "distlock:");
        assert_eq!(LockName::new("", "k").prefix(), "");
        assert_eq!(name.owner_key(), "distlock:{deploy-prod}:owner");
        assert_eq!(name.keys()[2], "distlock:{deploy-prod}:fence");
        assert_eq!(name.keys()[8], "distlock:{deploy-prod}:superseded");
        assert_eq!(name.keys()[9], "distlock:{deploy-prod}:protocol");
        assert_eq!(name.keys()[10], "distlock:{deploy-prod}:history");
        assert_eq!(name.keys()[11], "distlock:{deploy-prod}:history:held");
        assert!(
            name.keys()
                .iter()
                .all(|k| k.starts_with("distlock:{deploy-prod}"))
        );
        assert_eq!(name.wake_channel("t"), "distlock:{deploy-prod}:wake:t");
        assert_eq!(LockName::split("distlock:", "other:{a}"), None);
        assert_eq!(
            LockName::split("distlock:", "distlock:{a-b}:slots"),
            Some(("a-b", ":slots"))
        );
        assert_eq!(
            LockName::split("distlock:", "distlock:{a-b}"),
            Some(("a-b", ""))
        );
        assert_eq!(LockName::split("distlock:", "distlock:{a b}"), None);
        assert_eq!(
            LockName::scan_pattern("distlock:", "dep*"),
            "distlock:{dep*}"
        );
        assert_eq!(LockName::scan_pattern("a*b:", "*"), "a\\*b:{*}");
    }

    #[test]
    fn keys() {
        assert!(validate_key("deploy-prod").is_ok());
        assert!(validate_key("team/app:db@eu-west.1").is_ok());
        assert!(validate_key("résumé").is_ok());
        assert!(validate_key("").unwrap_err().contains("empty"));
        assert!(validate_key("a b").unwrap_err().contains("whitespace"));
        assert!(validate_key("a{b").unwrap_err().contains("hash tag"));
        assert!(validate_key("a*").unwrap_err().contains("glob"));
        assert!(validate_key("a\u{1b}").is_err());
        assert!(validate_key(&"x".repeat(257)).unwrap_err().contains("256"));
        assert!(validate_key(&"x".repeat(256)).is_ok());
    }

    #[test]
    fn prefixes() {
        assert!(validate_prefix("distlock:").is_ok());
        assert!(validate_prefix("").is_ok());
        assert!(validate_prefix("a{").is_err());
    }
}
