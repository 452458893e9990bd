//! The exit-code tables: the one source for the codes the program returns, the tables in
//! `--help`, the EXIT STATUS sections of the man pages and docs/guide.md (a test checks the
//! guide against these). Nothing else in the crate writes a numeric exit code.

/// Success (for `run`: the child's own code passes through instead).
pub const SUCCESS: u8 = 0;
/// `status`: the lock is free; `break`: there was nothing (or no longer the shown holder) to break.
pub const FREE: u8 = 1;
/// Command-line usage error: unknown flag, bad duration, empty key, missing command, bad URL.
pub const USAGE: u8 = 64;
/// The Redis key exists but does not hold a lock (another type of value lives there), or the
/// lock is used with another `--limit`.
pub const DATA: u8 = 65;
/// Redis unreachable, authentication or TLS failure, or Redis refused the command.
pub const UNAVAILABLE: u8 = 69;
/// An internal error: a bug, or the operating system refused something distlock needs.
pub const SOFTWARE: u8 = 70;
/// `acquire`: the token could not be handed over (stdout closed or broken, the `--env-file`
/// not writable or its disk full); what was taken was given back.
pub const IO_ERROR: u8 = 74;
/// The lock is busy: not acquired with `--no-wait` or within `--wait` (see `-E`).
pub const BUSY: u8 = 75;
/// `renew`/`release`: the lock is not held with this token (expired, released, broken, taken).
pub const NOT_HELD: u8 = 77;
/// The lock was lost while the child ran; the child was terminated.
pub const LOCK_LOST: u8 = 124;
/// `run --timeout`: the command ran past its time limit; it was stopped and the lock released.
pub const TIMED_OUT: u8 = 79;
/// The command was found but could not be executed.
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
pub const NOT_FOUND: u8 = 127;
/// Exit codes above this report a death by signal N as 128+N.
pub const SIGNAL_BASE: u8 = 128;

/// One row of a documented table.
pub struct Row {
    /// The code as shown to users (`"64"`, `"128+N"`, `"child's code"`).
    pub code: &'static str,
    /// What it means, one sentence.
    pub meaning: &'static str,
}

const ROW_USAGE: Row = Row {
    code: "64",
    meaning: "usage error: unknown flag, bad duration, bad key, a Redis URL of no accepted \
              form, or an inconsistent combination of flags",
};
const ROW_DATA: Row = Row {
    code: "65",
    meaning: "the Redis key exists but holds another type of value, so it is not a lock, or the \
              lock is used with another --limit (a mutex and a semaphore, or two limits); choose \
              another --key or --prefix, or the same --limit; or a newer distlock stores the \
              lock in a key layout this one does not speak: upgrade distlock",
};
const ROW_UNAVAILABLE: Row = Row {
    code: "69",
    meaning: "Redis unreachable, authentication or TLS failure, or Redis refused the command \
              (read-only replica, missing ACL permission, out of memory)",
};
const ROW_SOFTWARE: Row = Row {
    code: "70",
    meaning: "internal error: a bug, or the operating system refused something distlock needs",
};
const ROW_BUSY: Row = Row {
    code: "75",
    meaning: "lock busy: not acquired with --no-wait or within --wait, or superseded by a newer \
              waiter (change it with -E)",
};
const ROW_INTERRUPTED: Row = Row {
    code: "128+N",
    meaning: "interrupted by signal N while waiting for the lock (nothing is left in Redis)",
};

/// `distlock run`.
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
        meaning: "usage error: unknown flag, bad duration, bad key, missing command, a Redis URL of \
                  no accepted form, or an inconsistent combination of flags",
    },
    ROW_DATA,
    Row {
        code: "69",
        meaning: "Redis unreachable, authentication or TLS failure, or Redis refused the command \
                  (read-only replica, missing ACL permission, out of memory), before the command started",
    },
    ROW_SOFTWARE,
    Row {
        code: "75",
        meaning: "lock busy: not acquired with --no-wait or within --wait, or superseded by a newer \
                  waiter; or the running command was stopped because a newer run replaced it \
                  (--replace) (change it with -E)",
    },
    Row {
        code: "79",
        meaning: "the command ran past --timeout: its process group was stopped (--kill-signal, \
                  then SIGKILL) and the lock released",
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

/// `distlock acquire`.
pub const ACQUIRE_TABLE: &[Row] = &[
    Row {
        code: "0",
        meaning: "acquired; the token is on stdout, or with --env-file in FILE (stdout stays empty)",
    },
    ROW_INTERRUPTED,
    ROW_USAGE,
    ROW_DATA,
    ROW_UNAVAILABLE,
    ROW_SOFTWARE,
    Row {
        code: "74",
        meaning: "the token could not be handed over (stdout closed or broken, the --env-file not \
                  writable or its disk full); the lock was released, nothing stays held",
    },
    ROW_BUSY,
];

/// `distlock status`.
pub const STATUS_TABLE: &[Row] = &[
    Row {
        code: "0",
        meaning: "the lock is held",
    },
    Row {
        code: "1",
        meaning: "the lock is free (waiters may be in line: it is being handed to the first)",
    },
    Row {
        code: "75",
        meaning: "Redlock only: the lock is split, no holder has a majority of the nodes (after \
                  partial acquires, or a node that lost its data): nobody holds it and nobody can \
                  take it until the nodes' locks expire; retry later",
    },
    ROW_USAGE,
    ROW_DATA,
    ROW_UNAVAILABLE,
];

/// `distlock list`.
pub const LIST_TABLE: &[Row] = &[
    Row {
        code: "0",
        meaning: "listed (possibly nothing)",
    },
    ROW_USAGE,
    ROW_UNAVAILABLE,
];

/// `distlock break`.
pub const BREAK_TABLE: &[Row] = &[
    Row {
        code: "0",
        meaning: "broken: the holders shown (or the one --holder names), or some of them, were \
                  released; the lock or their slots pass to the next waiters in line (on a \
                  Redlock's split: every token that some node held, or some of them)",
    },
    Row {
        code: "1",
        meaning: "nothing was broken: the lock was free, no holder has the --holder id, the \
                  holders shown changed or left after they were shown, or the answer to the \
                  confirmation was no",
    },
    Row {
        code: "64",
        meaning: "usage error (a --holder id shorter than 4 characters, or one that matches \
                  several holders), or no confirmation possible: stdin is not a terminal and \
                  --yes was not given",
    },
    ROW_DATA,
    ROW_UNAVAILABLE,
];

/// `distlock renew` and `distlock release`.
pub const TOKEN_TABLE: &[Row] = &[
    Row {
        code: "0",
        meaning: "done",
    },
    ROW_USAGE,
    ROW_DATA,
    ROW_UNAVAILABLE,
    Row {
        code: "77",
        meaning: "the lock is not held with this token: it expired, was released or broken, or \
                  another process holds it now",
    },
];

/// `distlock log` and `distlock stats`.
pub const HISTORY_TABLE: &[Row] = &[
    Row {
        code: "0",
        meaning: "done, also when there is no history (log prints nothing; stats says so on \
                  stderr); log --follow: interrupted by SIGINT, SIGTERM or SIGHUP",
    },
    ROW_USAGE,
    ROW_UNAVAILABLE,
];

/// The table of a subcommand (by name).
pub fn table(command: &str) -> &'static [Row] {
    match command {
        "run" => RUN_TABLE,
        "acquire" => ACQUIRE_TABLE,
        "status" => STATUS_TABLE,
        "list" => LIST_TABLE,
        "break" => BREAK_TABLE,
        "renew" | "release" => TOKEN_TABLE,
        "log" | "stats" => HISTORY_TABLE,
        _ => &[],
    }
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
    fn tables_name_the_constants() {
        let codes = |t: &[Row]| t.iter().map(|r| r.code.to_owned()).collect::<Vec<_>>();
        for c in [
            USAGE,
            DATA,
            UNAVAILABLE,
            SOFTWARE,
            BUSY,
            LOCK_LOST,
            CANNOT_EXECUTE,
            NOT_FOUND,
        ] {
            assert!(codes(RUN_TABLE).contains(&c.to_string()), "{c}");
        }
        assert!(codes(STATUS_TABLE).contains(&FREE.to_string()));
        assert!(codes(STATUS_TABLE).contains(&BUSY.to_string()));
        assert!(codes(TOKEN_TABLE).contains(&NOT_HELD.to_string()));
        assert!(codes(BREAK_TABLE).contains(&FREE.to_string()));
        assert_eq!(SUCCESS, 0);
    }
}
