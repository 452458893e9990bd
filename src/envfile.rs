//! The file `distlock acquire --env-file FILE` appends a held lock's values to, so that the
//! later steps of a CI job can renew and release it: which values go in, in which format, and
//! how they are written. When to write (only once the lock is held) and what to do when the
//! write fails belong to `commands/acquire.rs`.
//!
//! The format is what three readers agree on: GitHub Actions' `$GITHUB_ENV`, GitLab's dotenv
//! files (also as `artifacts:reports:dotenv`), and a POSIX shell's `set -a; . ./FILE`. One
//! `NAME=value` per line, no quotes, no empty lines (GitLab refuses a dotenv report with one),
//! and only values that none of the three reads differently: GitHub and GitLab take a value
//! literally, while a shell expands `$`, backquotes and `~`, removes quotes and backslashes, and
//! ends the word at whitespace, `;`, `&`, `|` or `<`. Keys and prefixes that need any of those
//! are refused before anything happens. The Redis URL is never written: it may hold a password.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::text::quote;

/// Punctuation allowed in a value besides letters and digits (the same set the key error
/// messages suggest).
const SAFE_PUNCTUATION: &str = "-_.:/@";

/// Why `--env-file` cannot be used, found before anything happens.
#[derive(Debug)]
pub enum Refused {
    /// The key or the prefix (`id`: the argument, `key` or `prefix`) holds characters the
    /// readers would disagree on. The message names the value, not where it came from.
    Value {
        /// The argument's id.
        id: &'static str,
        /// What is wrong, and what to use instead.
        message: String,
    },
    /// The file cannot be appended to.
    File(String),
}

/// Where a held lock's values go.
#[derive(Debug)]
pub struct EnvFile {
    path: PathBuf,
    /// Written as `DISTLOCK_PREFIX` when set: later steps would otherwise use the default.
    prefix: Option<String>,
}

impl EnvFile {
    /// The file at `path`, for the lock `key` under `prefix` (`None`: the default prefix).
    /// Refuses values the readers would disagree on, and a file that cannot be appended to: a
    /// typo then fails at once instead of after a long wait for the lock.
    pub fn new(path: PathBuf, key: &str, prefix: Option<&str>) -> Result<EnvFile, Refused> {
        let value = |id, what, value| {
            check_value(what, value).map_err(|message| Refused::Value { id, message })
        };
        value("key", "the lock key", key)?;
        if let Some(prefix) = prefix {
            value("prefix", "the prefix", prefix)?;
        }
        check_appendable(&path).map_err(Refused::File)?;
        Ok(EnvFile {
            path,
            prefix: prefix.map(str::to_owned),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append a set's values ([`render_set`]: key, fence, mode and token of each key, in the
    /// order typed), as [`EnvFile::append`] does one lock's.
    pub fn append_set(&self, keys: &[SetKey], ttl: Duration) -> io::Result<()> {
        let file = open_for_append(&self.path)?;
        let mut text = String::new();
        if ends_mid_line(&file) {
            text.push('\n');
        }
        text.push_str(&render_set(keys, self.prefix.as_deref(), ttl));
        write_once(&file, text.as_bytes())
    }

    /// Append the lock's values with a single `write` on an `O_APPEND` descriptor: they land
    /// whole, after whatever other writers appended, never interleaved with their lines. The
    /// file is created (mode 0600: its token lets the reader release the lock) if missing.
    pub fn append(
        &self,
        key: &str,
        ttl: Duration,
        (fence, slot): (u64, Option<u32>),
        token: &str,
    ) -> io::Result<()> {
        let file = open_for_append(&self.path)?;
        let mut text = String::new();
        // A line left unterminated by an earlier writer (`printf 'X=1' >> "$GITHUB_ENV"`) would
        // swallow our first name into its value.
        if ends_mid_line(&file) {
            text.push('\n');
        }
        text.push_str(&render(
            key,
            self.prefix.as_deref(),
            ttl,
            (fence, slot),
            token,
        ));
        write_once(&file, text.as_bytes())
    }
}

/// The lines for a held set of keys: how many (`DISTLOCK_KEY_COUNT`), and in the order typed
/// the key, fence, mode and token of each, numbered from 0, for `renew` and `release` to read
/// back. Not `DISTLOCK_KEYS` (a run's command gets it): its spaces would end the value in a
/// shell that loads the file. No `DISTLOCK_KEY`/`DISTLOCK_TOKEN`: a later step's one-key
/// command must not take the first key for the whole set. The tokens come last, as in
/// [`render`].
pub fn render_set(keys: &[SetKey], prefix: Option<&str>, ttl: Duration) -> String {
    let mut text = format!("DISTLOCK_KEY_COUNT={}\n", keys.len());
    if let Some(prefix) = prefix {
        text.push_str(&format!("DISTLOCK_PREFIX={prefix}\n"));
    }
    text.push_str(&format!("DISTLOCK_TTL_MS={}\n", ttl.as_millis()));
    for (i, k) in keys.iter().enumerate() {
        text.push_str(&format!("DISTLOCK_KEY{i}={}\n", k.key));
        text.push_str(&format!("DISTLOCK_FENCE{i}={}\n", k.fence));
        text.push_str(&format!("DISTLOCK_MODE{i}={}\n", k.mode));
    }
    for (i, k) in keys.iter().enumerate() {
        text.push_str(&format!("DISTLOCK_TOKEN{i}={}\n", k.token));
    }
    text
}

/// One key of a set, as [`render_set`] writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetKey {
    /// The key, as typed.
    pub key: String,
    /// Its fence.
    pub fence: u64,
    /// `shared` or `exclusive`.
    pub mode: &'static str,
    /// The token it is held with.
    pub token: String,
}

/// The lines for a held lock (`DISTLOCK_SLOT` for a semaphore slot). The token comes last:
/// should the write stop short (a full disk), no line holds a whole token that someone could
/// mistake for the lock's.
pub fn render(
    key: &str,
    prefix: Option<&str>,
    ttl: Duration,
    (fence, slot): (u64, Option<u32>),
    token: &str,
) -> String {
    let mut text = format!("DISTLOCK_KEY={key}\n");
    if let Some(prefix) = prefix {
        text.push_str(&format!("DISTLOCK_PREFIX={prefix}\n"));
    }
    text.push_str(&format!("DISTLOCK_TTL_MS={}\n", ttl.as_millis()));
    text.push_str(&format!("DISTLOCK_FENCE={fence}\n"));
    if let Some(slot) = slot {
        text.push_str(&format!("DISTLOCK_SLOT={slot}\n"));
    }
    text.push_str(&format!("DISTLOCK_TOKEN={token}\n"));
    text
}

/// Check that `value` reads the same in `$GITHUB_ENV`, a dotenv file and a shell.
pub fn check_value(what: &str, value: &str) -> Result<(), String> {
    match value
        .chars()
        .find(|c| !(c.is_alphanumeric() || SAFE_PUNCTUATION.contains(*c)))
    {
        None => Ok(()),
        Some(c) => Err(format!(
            "{what} {} contains {}, which a shell loading --env-file would read differently; \
             with --env-file, use only letters, digits and - _ . : / @ in it",
            quote(value),
            quote(&c.to_string())
        )),
    }
}

/// Whether `path` can be appended to, without creating or changing anything. A missing file
/// is created by the write, so then its directory must be writable.
fn check_appendable(path: &Path) -> Result<(), String> {
    let shown = quote(&path.display().to_string());
    // O_NONBLOCK: opening a FIFO nobody reads would otherwise block here.
    let opened = OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    match opened {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir = match path.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir,
                _ => Path::new("."),
            };
            use nix::unistd::{AccessFlags, access};
            access(dir, AccessFlags::W_OK | AccessFlags::X_OK).map_err(|e| {
                format!(
                    "cannot create --env-file {shown} in {} ({}); nothing was acquired",
                    quote(&dir.display().to_string()),
                    io::Error::from(e)
                )
            })
        }
        Err(e) => Err(format!(
            "cannot write to --env-file {shown} ({e}); nothing was acquired"
        )),
    }
}

/// Open for appending, creating the file if needed. Readable too when permitted, to look at
/// its last byte; a write-only file is appended to without that look.
fn open_for_append(path: &Path) -> io::Result<File> {
    let open = |read: bool| {
        OpenOptions::new()
            .read(read)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
    };
    match open(true) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => open(false),
        other => other,
    }
}

/// Whether a regular file's last byte is something other than a newline.
fn ends_mid_line(file: &File) -> bool {
    let Ok(meta) = file.metadata() else {
        return false;
    };
    if !meta.is_file() || meta.len() == 0 {
        return false;
    }
    let mut last = [0u8; 1];
    matches!(file.read_at(&mut last, meta.len() - 1), Ok(1)) && last[0] != b'\n'
}

/// One `write` call for all of `bytes`; a short write is an error (what it left is not ours to
/// truncate: other writers may have appended after it).
fn write_once(mut file: &File, bytes: &[u8]) -> io::Result<()> {
    loop {
        match file.write(bytes) {
            Ok(n) if n == bytes.len() => return Ok(()),
            Ok(n) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("only {n} of {} bytes were written", bytes.len()),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const TOKEN: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    #[test]
    fn a_sets_lines_give_each_key_its_own_mode() {
        let key = |key: &str, fence, mode, token: &str| SetKey {
            key: key.into(),
            fence,
            mode,
            token: token.into(),
        };
        let text = render_set(
            &[
                key("db", 3, "shared", "t0"),
                key("deploy", 9, "exclusive", "t1"),
            ],
            None,
            Duration::from_secs(60),
        );
        assert_eq!(
            text,
            "DISTLOCK_KEY_COUNT=2\nDISTLOCK_TTL_MS=60000\nDISTLOCK_KEY0=db\nDISTLOCK_FENCE0=3\n\
             DISTLOCK_MODE0=shared\nDISTLOCK_KEY1=deploy\nDISTLOCK_FENCE1=9\n\
             DISTLOCK_MODE1=exclusive\nDISTLOCK_TOKEN0=t0\nDISTLOCK_TOKEN1=t1\n"
        );
    }

    #[test]
    fn lines_name_key_ttl_and_token_and_the_prefix_only_when_set() {
        assert_eq!(
            render(
                "release-train",
                None,
                Duration::from_secs(2700),
                (42, None),
                TOKEN
            ),
            format!(
                "DISTLOCK_KEY=release-train\nDISTLOCK_TTL_MS=2700000\nDISTLOCK_FENCE=42\nDISTLOCK_TOKEN={TOKEN}\n"
            )
        );
        assert_eq!(
            render(
                "k",
                Some("ci:"),
                Duration::from_millis(1500),
                (7, Some(2)),
                TOKEN
            ),
            format!(
                "DISTLOCK_KEY=k\nDISTLOCK_PREFIX=ci:\nDISTLOCK_TTL_MS=1500\nDISTLOCK_FENCE=7\nDISTLOCK_SLOT=2\nDISTLOCK_TOKEN={TOKEN}\n"
            )
        );
        // An empty prefix is a prefix: later steps must not fall back to the default.
        assert!(
            render("k", Some(""), Duration::from_secs(1), (1, None), TOKEN)
                .contains("\nDISTLOCK_PREFIX=\n")
        );
    }

    #[test]
    fn only_values_every_reader_takes_literally() {
        for ok in [
            "release-train",
            "team/app:db@eu-west.1",
            "résumé",
            "distlock:",
            "",
        ] {
            assert!(check_value("the lock key", ok).is_ok(), "{ok}");
        }
        for bad in [
            "a$b", "a`b`", "~x", "a'b", "a\"b", "a;b", "a&b", "a|b", "a<b", "a>b", "a(b", "a#b",
            "a=b", "a!b", "a%b",
        ] {
            let err = check_value("the lock key", bad).unwrap_err();
            assert!(
                err.starts_with("the lock key") && err.contains("--env-file"),
                "{err}"
            );
        }
        // What we write ourselves passes too.
        assert!(check_value("the token", TOKEN).is_ok());
    }

    #[test]
    fn refuses_shell_syntax_in_key_and_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("env");
        let id = |key, prefix| match EnvFile::new(path.clone(), key, prefix) {
            Err(Refused::Value { id, .. }) => id,
            other => panic!("{other:?}"),
        };
        assert_eq!(id("a$b", None), "key");
        assert_eq!(id("k", Some("p;")), "prefix");
        assert!(EnvFile::new(path.clone(), "k", Some("ci:")).is_ok());
        assert!(!path.exists(), "checking creates nothing");
    }

    #[test]
    fn a_file_that_cannot_be_created_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let file_error = |path| match EnvFile::new(path, "k", None) {
            Err(Refused::File(message)) => message,
            other => panic!("{other:?}"),
        };
        let err = file_error(dir.path().join("missing/env"));
        assert!(
            err.contains("cannot create --env-file") && err.contains("nothing was acquired"),
            "{err}"
        );
        let err = file_error(dir.path().to_owned());
        assert!(err.contains("cannot write to --env-file"), "{err}");
        // A bare file name lives in the current directory.
        assert!(check_appendable(Path::new("distlock-test-never-created.env")).is_ok());
        assert!(!Path::new("distlock-test-never-created.env").exists());
    }

    #[test]
    fn appends_once_after_existing_lines_and_ends_an_unterminated_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("env");
        let file = EnvFile::new(path.clone(), "k", None).unwrap();
        file.append("k", Duration::from_secs(1), (1, None), TOKEN)
            .unwrap();
        let first = render("k", None, Duration::from_secs(1), (1, None), TOKEN);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");

        std::fs::write(&path, "EARLIER=1\nUNTERMINATED=2").unwrap();
        file.append("k", Duration::from_secs(1), (1, None), TOKEN)
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("EARLIER=1\nUNTERMINATED=2\n{first}")
        );
        file.append("k", Duration::from_secs(1), (1, None), TOKEN)
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("EARLIER=1\nUNTERMINATED=2\n{first}{first}"),
            "no empty line between records"
        );
    }

    #[test]
    fn a_failed_write_is_reported() {
        let full = EnvFile {
            path: PathBuf::from("/dev/full"),
            prefix: None,
        };
        let err = full
            .append("k", Duration::from_secs(1), (1, None), TOKEN)
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    }
}
