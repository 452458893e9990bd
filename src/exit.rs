//! The exit-code table: the one source for the codes the program returns, the table in `--help`,
//! the README and the man pages. Nothing else in the crate writes a numeric exit code.

/// The child ran and exited: its code passes through untouched (this constant is never returned
/// by distlock itself; it names the row of the table).
pub const SUCCESS: u8 = 0;
/// Command-line usage error: unknown flag, bad duration, empty key, missing command, bad URL.
pub const USAGE: u8 = 64;
/// The Redis key exists but does not hold a lock (another type of value lives there).
pub const DATA: u8 = 65;
/// Redis unreachable, authentication or TLS failure, or Redis refused the command, before the
/// child started.
pub const UNAVAILABLE: u8 = 69;
/// An internal error: a bug, or the operating system refused something distlock needs.
pub const SOFTWARE: u8 = 70;
/// The lock is busy: not acquired with `--no-wait` or within `--wait` (see `-E`).
pub const BUSY: u8 = 75;
/// The lock was lost while the child ran; the child was terminated.
pub const LOCK_LOST: u8 = 124;
/// The command was found but could not be executed.
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
pub const NOT_FOUND: u8 = 127;
/// Exit codes above this report a death by signal N as 128+N.
pub const SIGNAL_BASE: u8 = 128;

/// One row of the documented table.
pub struct Row {
    /// The code as shown to users (`"64"`, `"128+N"`, `"child's code"`).
    pub code: &'static str,
    /// What it means, one sentence.
    pub meaning: &'static str,
}

/// The documented exit codes of `distlock run`, in the order they are shown.
pub const RUN_TABLE: &[Row] = &[
    Row {
        code: "child's code",
        meaning: "the command ran to completion while the lock was held; its exit code passes through",
    },
    Row {
        code: "128+N",
        meaning: "the command was killed by signal N (distlock dies of the same signal, so a calling \
                  shell sees a signal death); or distlock was interrupted by signal N while waiting \
                  for the lock (nothing is left in Redis)",
    },
    Row {
        code: "64",
        meaning: "usage error: unknown flag, bad duration, bad key, missing command, URL that is not \
                  redis://, rediss:// or unix://, or an inconsistent combination of flags",
    },
    Row {
        code: "65",
        meaning: "the Redis key exists but holds another type of value, so it is not a lock; choose \
                  another --key or --prefix",
    },
    Row {
        code: "69",
        meaning: "Redis unreachable, authentication or TLS failure, or Redis refused the command \
                  (read-only replica, missing ACL permission, out of memory), before the command started",
    },
    Row {
        code: "70",
        meaning: "internal error: a bug, or the operating system refused something distlock needs",
    },
    Row {
        code: "75",
        meaning: "lock busy: not acquired with --no-wait or within --wait (change it with -E)",
    },
    Row {
        code: "124",
        meaning: "the lock was lost while the command ran (renewal failed or the key was taken or \
                  deleted); the command's process group was terminated",
    },
    Row {
        code: "126",
        meaning: "the command was found but could not be executed",
    },
    Row {
        code: "127",
        meaning: "the command was not found",
    },
];

/// The table as plain text for `--help`, wrapped with a hanging indent.
pub fn help_table() -> String {
    const WIDTH: usize = 96;
    const INDENT: usize = 16;
    let mut text = String::from("Exit status:\n");
    for row in RUN_TABLE {
        let mut line = format!("  {:<13} ", row.code);
        for word in row.meaning.split_whitespace() {
            if line.len() + word.len() + 1 > WIDTH && line.trim().len() > row.code.len() {
                text.push_str(line.trim_end());
                text.push('\n');
                line = " ".repeat(INDENT);
            }
            line.push_str(word);
            line.push(' ');
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// The exit code that reports a death by `signal`.
pub fn for_signal(signal: i32) -> u8 {
    u8::try_from(signal)
        .ok()
        .and_then(|s| SIGNAL_BASE.checked_add(s))
        .unwrap_or(u8::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_codes() {
        assert_eq!(for_signal(2), 130);
        assert_eq!(for_signal(15), 143);
        assert_eq!(for_signal(9), 137);
        assert_eq!(for_signal(200), 255);
    }

    #[test]
    fn help_table_lists_every_code() {
        let text = help_table();
        for code in [
            USAGE,
            DATA,
            UNAVAILABLE,
            SOFTWARE,
            BUSY,
            LOCK_LOST,
            CANNOT_EXECUTE,
            NOT_FOUND,
        ] {
            assert!(
                text.contains(&format!("  {code} ")),
                "{code} missing from\n{text}"
            );
        }
        assert_eq!(SUCCESS, 0);
    }
}
