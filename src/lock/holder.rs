//! Who holds a lock: the metadata stored beside it in `PREFIX{KEY}:owner`, and what a waiter or
//! an operator learns about a held lock.
//!
//! The hash's fields are part of the documented Redis layout (other tools may read them):
//! `acquired_at` (ms since the epoch, on the Redis server's clock), `host`, `pid`, `user`,
//! `command`, `kind` (`run` or `acquire`), `version` (of distlock), `ttl_ms` (the TTL asked
//! for; `renew` without `--ttl` reuses it), and when present `ci_url`, `note` and
//! `warn_after_ms` (`run --warn-after`). The lock's own
//! value stays the bare token.

use std::time::Duration;

use super::HolderTtl;

/// Longest command line stored, in bytes (longer ones are cut at a character boundary and end
/// with `...`).
pub const MAX_COMMAND_BYTES: usize = 300;
/// Longest note stored, in bytes.
pub const MAX_NOTE_BYTES: usize = 300;

/// What a holder says about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    /// Host name.
    pub host: Option<String>,
    /// Process id: distlock's for `run`, the calling shell's for `acquire`.
    pub pid: Option<u32>,
    /// User name (`uid N` when none is known).
    pub user: Option<String>,
    /// The command line, shell-quoted and truncated.
    pub command: Option<String>,
    /// `run` or `acquire`.
    pub kind: Option<String>,
    /// distlock's version.
    pub version: Option<String>,
    /// The CI job holding the lock.
    pub ci_url: Option<String>,
    /// `--note`.
    pub note: Option<String>,
    /// `run --warn-after`, in ms: a hold longer than this is worth a warning.
    pub warn_after_ms: Option<u64>,
    /// The keys of the set this holder takes with this key (space-separated, in the order it
    /// takes them), when it takes several (`run -k a -k b`).
    pub set: Option<String>,
}

impl Holder {
    /// The fields to store, in a stable order (`acquired_at` is added by the script).
    pub fn to_fields(&self) -> Vec<(&'static str, String)> {
        let mut fields = Vec::new();
        let mut push = |name: &'static str, value: &Option<String>| {
            if let Some(value) = value {
                fields.push((name, value.clone()));
            }
        };
        push("host", &self.host);
        push("pid", &self.pid.map(|p| p.to_string()));
        push("user", &self.user);
        push("command", &self.command);
        push("kind", &self.kind);
        push("version", &self.version);
        push("ci_url", &self.ci_url);
        push("note", &self.note);
        push(
            "warn_after_ms",
            &self.warn_after_ms.map(|ms| ms.to_string()),
        );
        push("set", &self.set);
        fields
    }

    /// Read the stored fields back (unknown fields are ignored). Returns the holder and the
    /// `acquired_at` time, if any.
    pub fn from_fields(fields: &[(String, String)]) -> (Option<Box<Holder>>, Option<u64>) {
        if fields.is_empty() {
            return (None, None);
        }
        let mut holder = Holder::default();
        let mut acquired_at = None;
        for (name, value) in fields {
            let value = Some(value.clone());
            match name.as_str() {
                "host" => holder.host = value,
                "pid" => holder.pid = value.and_then(|v| v.parse().ok()),
                "user" => holder.user = value,
                "command" => holder.command = value,
                "kind" => holder.kind = value,
                "version" => holder.version = value,
                "ci_url" => holder.ci_url = value,
                "note" => holder.note = value,
                "warn_after_ms" => holder.warn_after_ms = value.and_then(|v| v.parse().ok()),
                "set" => holder.set = value,
                "acquired_at" => acquired_at = value.and_then(|v| v.parse().ok()),
                _ => {}
            }
        }
        (Some(Box::new(holder)), acquired_at)
    }

    /// A waiter's JSON metadata (as the line stores it), read back; `None` if it is not an
    /// object.
    pub fn from_json(json: &str) -> Option<Box<Holder>> {
        let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(json).ok()?;
        let fields: Vec<(String, String)> = map
            .into_iter()
            .filter_map(|(k, v)| match v {
                serde_json::Value::String(s) => Some((k, s)),
                serde_json::Value::Number(n) => Some((k, n.to_string())),
                _ => None,
            })
            .collect();
        Holder::from_fields(&fields).0
    }

    /// This process as a holder: `kind` is `run` or `acquire`; `pid` is the process to name.
    pub fn this_process(
        kind: &str,
        pid: u32,
        command: &[std::ffi::OsString],
        note: Option<&str>,
    ) -> Holder {
        let host = nix::unistd::gethostname()
            .ok()
            .map(|h| h.to_string_lossy().into_owned());
        let user = Some(user_name(
            |name| std::env::var(name).ok(),
            nix::unistd::getuid().as_raw(),
            |uid| {
                let passwd = std::fs::read("/etc/passwd").ok()?;
                passwd_name(&String::from_utf8_lossy(&passwd), uid)
            },
        ));
        let command = (!command.is_empty()).then(|| {
            let words: Vec<String> = command
                .iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect();
            truncate(&shell_words::join(&words), MAX_COMMAND_BYTES)
        });
        Holder {
            host,
            pid: Some(pid),
            user,
            command,
            kind: Some(kind.to_owned()),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            ci_url: ci_job_url(|name| std::env::var(name).ok()),
            note: note
                .filter(|n| !n.is_empty())
                .map(|n| truncate(n, MAX_NOTE_BYTES)),
            warn_after_ms: None,
            set: None,
        }
    }

    /// One line for humans: `host pid 123 (./deploy.sh v42)`, or the note.
    /// Every part comes from Redis, written by whoever took the lock (a note can hold anything):
    /// control characters are escaped, so that it can never forge a line or move the cursor.
    pub fn summary(&self) -> String {
        use crate::text::sanitize;
        let mut text = String::new();
        if let Some(host) = &self.host {
            text.push_str(&sanitize(host));
        }
        if let Some(pid) = self.pid {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(&format!("pid {pid}"));
        }
        let what = self.note.as_ref().or(self.command.as_ref());
        if let Some(what) = what {
            text.push_str(&format!(" ({})", sanitize(what)));
        }
        if text.is_empty() {
            "an unnamed holder".to_owned()
        } else {
            text
        }
    }
}

impl Holder {
    /// The summary, and the CI job when there is one: who superseded a waiter.
    pub fn summary_with_job(&self) -> String {
        match &self.ci_url {
            Some(url) => format!("{}, CI job {}", self.summary(), crate::text::sanitize(url)),
            None => self.summary(),
        }
    }
}

/// Who runs this process: `USER` or `LOGNAME`, else the name of `uid` from `/etc/passwd`
/// (`by_uid`), else `uid N`.
///
/// The file is read only when neither variable is set, as under systemd or in containers, where
/// a bare `uid 0` would hide that the holder is root. distlock reads it itself rather than
/// asking the C library (`getpwuid`): that goes through NSS (nsswitch.conf, shared modules,
/// maybe a network directory), which costs a run more than its start-up and which a statically
/// linked binary cannot load at all. A user known only to a network directory shows as `uid N`.
pub fn user_name(
    var: impl Fn(&str) -> Option<String>,
    uid: u32,
    by_uid: impl FnOnce(u32) -> Option<String>,
) -> String {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|name| var(name).filter(|u| !u.is_empty()))
        .or_else(|| by_uid(uid).filter(|u| !u.is_empty()))
        .unwrap_or_else(|| format!("uid {uid}"))
}

/// The name of `uid` in `passwd` (the text of `/etc/passwd`: `name:password:uid:...` lines).
pub fn passwd_name(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        (id.parse() == Ok(uid) && !name.is_empty() && !name.starts_with(['+', '-', '#']))
            .then(|| name.to_owned())
    })
}

/// The URL of the CI job this process runs in, if any: GitHub Actions, GitLab CI, Jenkins,
/// Buildkite.
pub fn ci_job_url(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    let get = |name: &str| var(name).filter(|v| !v.is_empty());
    if get("GITHUB_ACTIONS").as_deref() == Some("true") {
        if let (Some(server), Some(repo), Some(run)) = (
            get("GITHUB_SERVER_URL"),
            get("GITHUB_REPOSITORY"),
            get("GITHUB_RUN_ID"),
        ) {
            let attempt = get("GITHUB_RUN_ATTEMPT")
                .map(|a| format!("/attempts/{a}"))
                .unwrap_or_default();
            return Some(format!("{server}/{repo}/actions/runs/{run}{attempt}"));
        }
    }
    if let Some(url) = get("CI_JOB_URL") {
        return Some(url);
    }
    if let Some(url) = get("BUILDKITE_BUILD_URL") {
        return Some(match get("BUILDKITE_JOB_ID") {
            Some(job) => format!("{url}#{job}"),
            None => url,
        });
    }
    get("BUILD_URL")
}

/// `text` cut to at most `max` bytes at a character boundary, marked with `...`.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// Everything known about a held lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldBy {
    /// Time left before it expires unless renewed.
    pub ttl: HolderTtl,
    /// The holder's metadata (none for clients that store none).
    pub holder: Option<Box<Holder>>,
    /// How long it has been held (on the Redis server's clock).
    pub held_for: Option<Duration>,
    /// The holder's token (only from an inspection; never printed whole).
    pub token: Option<String>,
    /// Its fencing token, when distlock granted it.
    pub fence: Option<u64>,
    /// A semaphore holder's slot index (`DISTLOCK_SLOT`).
    pub slot: Option<u32>,
    /// The run is over and succeeded, and the mutex stays taken until an interval has passed:
    /// it is free when `ttl` runs out.
    pub cooldown: Option<CoolDown>,
    /// The holder's `--warn-after` (its metadata field `warn_after_ms`), if it gave one.
    pub warn_after: Option<Duration>,
}

/// A mutex kept taken after its run succeeded (`--min-interval`, `--cooldown`): what the owner
/// hash says (`ended_at`, `min_interval_ms`, `cooldown_ms`), as durations on the Redis server's
/// clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoolDown {
    /// How long ago the run ended.
    pub ended_ago: Duration,
    /// `--min-interval` of that run (counted from its start).
    pub min_interval: Option<Duration>,
    /// `--cooldown` of that run (counted from its end).
    pub cooldown: Option<Duration>,
}

impl CoolDown {
    /// The flags that keep it taken, as the user wrote them: `--min-interval 1h`.
    pub fn flags(&self) -> String {
        let mut flags = Vec::new();
        if let Some(d) = self.min_interval {
            flags.push(format!("--min-interval {}", crate::text::duration(d)));
        }
        if let Some(d) = self.cooldown {
            flags.push(format!("--cooldown {}", crate::text::duration(d)));
        }
        flags.join(", ")
    }
}

impl HeldBy {
    /// Who the holder says it is, for a program (the `holder` field of a JSON line): its host
    /// and process id; `None` when it stored nothing about itself.
    pub fn who(&self) -> Option<(Option<&str>, Option<u32>)> {
        self.holder.as_deref().map(|h| (h.host.as_deref(), h.pid))
    }

    /// One line for humans: who, for how long, and until when.
    pub fn summary(&self) -> String {
        if let (Some(cool), HolderTtl::Expires(left)) = (&self.cooldown, self.ttl) {
            use crate::text::duration;
            let who = self
                .holder
                .as_ref()
                .map_or_else(|| "an unnamed holder".to_owned(), |h| h.summary());
            let started = self
                .held_for
                .map(|d| format!("started {} ago and ", duration(d)))
                .unwrap_or_default();
            return format!(
                "ran recently: the last run, by {who}, {started}ended {} ago; the next may \
                 start in {} ({})",
                duration(cool.ended_ago),
                duration(left),
                cool.flags()
            );
        }
        let who = match &self.holder {
            Some(holder) => format!("held by {}", holder.summary()),
            None => "held by another client (it stores no distlock metadata)".to_owned(),
        };
        let since = self
            .held_for
            .map(|d| format!(" for {}", crate::text::duration(d)))
            .unwrap_or_default();
        let expiry = match self.ttl {
            HolderTtl::Expires(d) => {
                format!("expires in {} unless renewed", crate::text::duration(d))
            }
            HolderTtl::Never => "set without expiry".to_owned(),
        };
        format!("{who}{since}; {expiry}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_note_from_redis_cannot_forge_a_line() {
        let holder = Holder {
            host: Some("h\u{1b}[2J".into()),
            note: Some("x\ndistlock: acquired lock \"inj\"".into()),
            ..Holder::default()
        };
        let summary = holder.summary();
        assert!(
            !summary.contains('\n') && !summary.contains('\u{1b}'),
            "{summary}"
        );
        assert!(summary.contains("x\\ndistlock"), "{summary}");
    }

    #[test]
    fn fields_round_trip() {
        let holder = Holder {
            host: Some("ci-3".into()),
            pid: Some(42),
            user: Some("deploy".into()),
            command: Some("./deploy.sh v42".into()),
            kind: Some("run".into()),
            version: Some("0.1.0".into()),
            ci_url: None,
            note: Some("release 42".into()),
            warn_after_ms: Some(1_800_000),
            set: Some("a b".into()),
        };
        let mut fields: Vec<(String, String)> = holder
            .to_fields()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        fields.push(("acquired_at".into(), "1700000000000".into()));
        fields.push(("future_field".into(), "x".into()));
        let (back, at) = Holder::from_fields(&fields);
        assert_eq!(back, Some(Box::new(holder)));
        assert_eq!(at, Some(1_700_000_000_000));
        assert_eq!(Holder::from_fields(&[]), (None, None));
    }

    #[test]
    fn ci_urls() {
        let env = |pairs: &[(&str, &str)]| {
            let map: HashMap<String, String> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            move |name: &str| map.get(name).cloned()
        };
        assert_eq!(
            ci_job_url(env(&[
                ("GITHUB_ACTIONS", "true"),
                ("GITHUB_SERVER_URL", "https://github.com"),
                ("GITHUB_REPOSITORY", "o/r"),
                ("GITHUB_RUN_ID", "7"),
                ("GITHUB_RUN_ATTEMPT", "2"),
            ])),
            Some("https://github.com/o/r/actions/runs/7/attempts/2".into())
        );
        assert_eq!(
            ci_job_url(env(&[("CI_JOB_URL", "https://gitlab.com/o/r/-/jobs/9")])),
            Some("https://gitlab.com/o/r/-/jobs/9".into())
        );
        assert_eq!(
            ci_job_url(env(&[("BUILD_URL", "https://jenkins/job/x/5/")])),
            Some("https://jenkins/job/x/5/".into())
        );
        assert_eq!(
            ci_job_url(env(&[
                ("BUILDKITE_BUILD_URL", "https://buildkite.com/o/p/builds/3"),
                ("BUILDKITE_JOB_ID", "abc")
            ])),
            Some("https://buildkite.com/o/p/builds/3#abc".into())
        );
        assert_eq!(ci_job_url(env(&[])), None);
    }

    #[test]
    fn user_from_the_environment_else_the_passwd_database_else_the_uid() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let never = |_: u32| -> Option<String> { panic!("no passwd lookup when USER is set") };
        assert_eq!(user_name(env(&[("USER", "deploy")]), 0, never), "deploy");
        assert_eq!(
            user_name(env(&[("USER", ""), ("LOGNAME", "ops")]), 0, never),
            "ops"
        );
        let passwd = |uid: u32| (uid == 0).then(|| "root".to_owned());
        assert_eq!(user_name(env(&[]), 0, passwd), "root");
        assert_eq!(
            user_name(env(&[("USER", ""), ("LOGNAME", "")]), 0, passwd),
            "root"
        );
        assert_eq!(user_name(env(&[]), 4242, passwd), "uid 4242");
        assert_eq!(user_name(env(&[]), 7, |_| Some(String::new())), "uid 7");
    }

    #[test]
    fn passwd_names() {
        let passwd = "# comment\nroot:x:0:0:root:/root:/bin/bash\n+nis::::::\n\
                      ci:x:1001:1001::/home/ci:/bin/sh\nbroken\n";
        assert_eq!(passwd_name(passwd, 0).as_deref(), Some("root"));
        assert_eq!(passwd_name(passwd, 1001).as_deref(), Some("ci"));
        assert_eq!(passwd_name(passwd, 7), None);
        assert_eq!(passwd_name("", 0), None);
    }

    #[test]
    fn truncation_respects_characters() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("abcdefghijkl", 8), "abcde...");
        assert_eq!(truncate("ééééé", 6), "é...");
    }

    #[test]
    fn this_process_describes_itself() {
        let argv = vec!["./deploy.sh".into(), "v 42".into()];
        let holder = Holder::this_process("run", 7, &argv, Some("hotfix"));
        assert_eq!(holder.command.as_deref(), Some("./deploy.sh 'v 42'"));
        assert_eq!(holder.pid, Some(7));
        assert_eq!(holder.note.as_deref(), Some("hotfix"));
        assert!(holder.summary().contains("pid 7 (hotfix)"));
    }
}
