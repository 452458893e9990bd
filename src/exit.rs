//! The exit-code tables: the one source for the codes the program returns, the tables in
//! `--help`, the EXIT STATUS sections of the man pages and docs/guide.md (a test checks the
//! guide against these). Nothing else in the crate writes a numeric exit code.

/// Declares [`Code`] once: each code's name, number and doc; the number as shown in the tables
/// is the same literal, so the two cannot drift apart.
macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $n:literal,)*) => {
        /// An exit code distlock itself chooses (a child's own code passes through as a number).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum Code {
            $($(#[$doc])* $name = $n,)*
        }

        impl Code {
            /// Every code.
            pub const ALL: &'static [Code] = &[$(Code::$name),*];

            /// The code as a number.
            pub const fn get(self) -> u8 {
                self as u8
            }

            /// The code as the tables show it (`"64"`).
            pub const fn shown(self) -> &'static str {
                match self {
                    $(Code::$name => stringify!($n),)*
                }
            }
        }
    };
}

codes! {
    /// Success (for `run`: the child's own code passes through instead).
    Success = 0,
    /// `status`: the lock is free; `break`: there was nothing (or no longer the shown holder)
    /// to break.
    Free = 1,
    /// Command-line usage error: unknown flag, bad duration, empty key, missing command, bad
    /// URL.
    Usage = 64,
    /// The Redis key exists but does not hold a lock (another type of value lives there), or
    /// the lock is used with another `--limit`.
    Data = 65,
    /// Redis unreachable, authentication or TLS failure, or Redis refused the command.
    Unavailable = 69,
    /// An internal error: a bug, or the operating system refused something distlock needs.
    Software = 70,
    /// `acquire`: the token could not be handed over (stdout closed or broken, the
    /// `--env-file` not writable or its disk full); what was taken was given back.
    IoError = 74,
    /// The lock is busy: not acquired with `--no-wait` or within `--wait` (see `-E`).
    Busy = 75,
    /// `renew`/`release`: the lock is not held with this token (expired, released, broken,
    /// taken).
    NotHeld = 77,
    /// `run --timeout`: the command ran past its time limit; it was stopped and the lock
    /// released.
    TimedOut = 79,
    /// The lock was lost while the child ran; the child was terminated.
    LockLost = 124,
    /// The command was found but could not be executed.
    CannotExecute = 126,
    /// The command was not found.
    NotFound = 127,
}

impl From<Code> for u8 {
    fn from(code: Code) -> u8 {
        code.get()
    }
}

/// Exit codes above this report a death by signal N as 128+N.
pub const SIGNAL_BASE: u8 = 128;

/// How distlock ends.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// Exit with this code (one of [`Code`], or a child's own).
    Code(u8),
    /// Die of this signal (the child did, or we were interrupted).
    Signal(i32),
}

impl From<Code> for Exit {
    fn from(code: Code) -> Exit {
        Exit::Code(code.get())
    }
}

/// One row of a documented table.
pub struct Row {
    /// The code as shown to users (`"64"`, `"128+N"`, `"child's code"`).
    pub code: &'static str,
    /// What it means, one sentence.
    pub meaning: &'static str,
}

impl Row {
    /// The row of `code`.
    const fn of(code: Code, meaning: &'static str) -> Row {
        Row {
            code: code.shown(),
            meaning,
        }
    }

    /// The row of a death by signal N (`128+N`).
    const fn signal(meaning: &'static str) -> Row {
        Row {
            code: "128+N",
            meaning,
        }
    }

    /// The row of a child's own code, passed through.
    const fn child(meaning: &'static str) -> Row {
        Row {
            code: "child's code",
            meaning,
        }
    }
}

const ROW_USAGE: Row = Row::of(
    Code::Usage,
    "usage error: unknown flag, bad duration, bad key, a Redis URL of no accepted \
              form, or an inconsistent combination of flags",
);
const ROW_DATA: Row = Row::of(
    Code::Data,
    "the Redis key exists but holds another type of value, so it is not a lock, or the \
              lock is used with another --limit (a mutex and a semaphore, or two limits); choose \
              another --key or --prefix, or the same --limit; or a newer distlock stores the \
              lock in a key layout this one does not speak: upgrade distlock",
);
const ROW_UNAVAILABLE: Row = Row::of(
    Code::Unavailable,
    "Redis unreachable, authentication or TLS failure, or Redis refused the command \
              (read-only replica, missing ACL permission, out of memory)",
);
const ROW_SOFTWARE: Row = Row::of(
    Code::Software,
    "internal error: a bug, or the operating system refused something distlock needs",
);
const ROW_BUSY: Row = Row::of(
    Code::Busy,
    "lock busy: not acquired with --no-wait or within --wait, or superseded by a newer \
              waiter (change it with -E)",
);
const ROW_INTERRUPTED: Row =
    Row::signal("interrupted by signal N while waiting for the lock (nothing is left in Redis)");

/// `distlock run`.
pub const RUN_TABLE: &[Row] = &[
    Row::child(
        "the command ran to completion while the lock was held; its exit code passes through",
    ),
    Row::signal(
        "the command was killed by signal N (distlock dies of the same signal, so a calling \
                  shell sees a signal death); or distlock was interrupted by signal N while waiting \
                  for the lock (nothing is left in Redis)",
    ),
    Row::of(
        Code::Usage,
        "usage error: unknown flag, bad duration, bad key, missing command, a Redis URL of \
                  no accepted form, or an inconsistent combination of flags",
    ),
    ROW_DATA,
    Row::of(
        Code::Unavailable,
        "Redis unreachable, authentication or TLS failure, or Redis refused the command \
                  (read-only replica, missing ACL permission, out of memory), before the command started",
    ),
    ROW_SOFTWARE,
    Row::of(
        Code::Busy,
        "lock busy: not acquired with --no-wait or within --wait, or superseded by a newer \
                  waiter; or the running command was stopped because a newer run replaced it \
                  (--replace) (change it with -E)",
    ),
    Row::of(
        Code::TimedOut,
        "the command ran past --timeout: its process group was stopped (--kill-signal, \
                  then SIGKILL) and the lock released",
    ),
    Row::of(
        Code::LockLost,
        "the lock was lost while the command ran (renewal failed or the key was taken or \
                  deleted); the command's process group was terminated",
    ),
    Row::of(
        Code::CannotExecute,
        "the command was found but could not be executed",
    ),
    Row::of(Code::NotFound, "the command was not found"),
];

/// `distlock acquire`.
pub const ACQUIRE_TABLE: &[Row] = &[
    Row::of(
        Code::Success,
        "acquired; the token is on stdout, or with --env-file in FILE (stdout stays empty)",
    ),
    ROW_INTERRUPTED,
    ROW_USAGE,
    ROW_DATA,
    ROW_UNAVAILABLE,
    ROW_SOFTWARE,
    Row::of(
        Code::IoError,
        "the token could not be handed over (stdout closed or broken, the --env-file not \
                  writable or its disk full); the lock was released, nothing stays held",
    ),
    ROW_BUSY,
];

/// `distlock status`.
pub const STATUS_TABLE: &[Row] = &[
    Row::of(Code::Success, "the lock is held"),
    Row::of(
        Code::Free,
        "the lock is free (waiters may be in line: it is being handed to the first)",
    ),
    Row::of(
        Code::Busy,
        "Redlock only: the lock is split, no holder has a majority of the nodes (after \
                  partial acquires, or a node that lost its data): nobody holds it and nobody can \
                  take it until the nodes' locks expire; retry later",
    ),
    ROW_USAGE,
    ROW_DATA,
    ROW_UNAVAILABLE,
];

/// `distlock list`.
pub const LIST_TABLE: &[Row] = &[
    Row::of(Code::Success, "listed (possibly nothing)"),
    ROW_USAGE,
    ROW_UNAVAILABLE,
];

/// `distlock metrics`.
pub const METRICS_TABLE: &[Row] = &[
    Row::of(Code::Success, "written (possibly no lock)"),
    ROW_USAGE,
    Row::of(
        Code::Unavailable,
        "Redis unreachable (or a majority of a Redlock's nodes), or Redis refused the \
                  command; the metrics, distlock_up 0, are written all the same",
    ),
    Row::of(
        Code::IoError,
        "the metrics could not be written (-o FILE's directory missing or not writable, \
                  disk full, stdout closed with an error)",
    ),
];

/// `distlock break`.
pub const BREAK_TABLE: &[Row] = &[
    Row::of(
        Code::Success,
        "broken: the holders shown (or the one --holder names), or some of them, were \
                  released; the lock or their slots pass to the next waiters in line (on a \
                  Redlock's split: every token that some node held, or some of them)",
    ),
    Row::of(
        Code::Free,
        "nothing was broken: the lock was free, no holder has the --holder id, the \
                  holders shown changed or left after they were shown, or the answer to the \
                  confirmation was no",
    ),
    Row::of(
        Code::Usage,
        "usage error (a --holder id shorter than 4 characters, or one that matches \
                  several holders), or no confirmation possible: stdin is not a terminal and \
                  --yes was not given",
    ),
    ROW_DATA,
    ROW_UNAVAILABLE,
];

/// `distlock renew` and `distlock release`.
pub const TOKEN_TABLE: &[Row] = &[
    Row::of(Code::Success, "done"),
    ROW_USAGE,
    ROW_DATA,
    ROW_UNAVAILABLE,
    Row::of(
        Code::NotHeld,
        "the lock is not held with this token: it expired, was released or broken, or \
                  another process holds it now",
    ),
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

/// The states of a monitoring plugin (Nagios, Icinga, Naemon, Sensu, Consul checks), the only
/// codes `distlock check` exits with: its own refusals and failures are [`Plugin::Unknown`],
/// never 64 or 69, which a monitoring system would read as CRITICAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Plugin {
    /// All is well.
    Ok = 0,
    /// A warning threshold was crossed.
    Warning = 1,
    /// A critical threshold was crossed.
    Critical = 2,
    /// The check could not tell: Redis unreachable, a key that is not a lock, bad arguments.
    Unknown = 3,
}

impl Plugin {
    /// The exit code.
    pub const fn get(self) -> u8 {
        self as u8
    }

    /// The word of the output line: `OK`, `WARNING`, `CRITICAL`, `UNKNOWN`.
    pub const fn word(self) -> &'static str {
        match self {
            Plugin::Ok => "OK",
            Plugin::Warning => "WARNING",
            Plugin::Critical => "CRITICAL",
            Plugin::Unknown => "UNKNOWN",
        }
    }

    /// How bad it is, for combining conditions: OK < WARNING < CRITICAL. UNKNOWN is not part of
    /// this order (it says the check failed) and ranks last.
    fn rank(self) -> u8 {
        self.get()
    }

    /// The worse of two states.
    pub fn worst(self, other: Plugin) -> Plugin {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }
}

impl From<Plugin> for Exit {
    fn from(state: Plugin) -> Exit {
        Exit::Code(state.get())
    }
}

/// `distlock check`: the monitoring-plugins codes, and nothing else.
pub const CHECK_TABLE: &[Row] = &[
    Row {
        code: "0",
        meaning: "OK: no threshold crossed",
    },
    Row {
        code: "1",
        meaning: "WARNING: held longer than -w, or the oldest waiter waited longer than \
                  --warn-wait; or, on a Redlock, the lock is split",
    },
    Row {
        code: "2",
        meaning: "CRITICAL: held longer than -c, the oldest waiter waited longer than \
                  --crit-wait, or no successful run recorded within --crit-since-success",
    },
    Row {
        code: "3",
        meaning: "UNKNOWN: the check could not tell: Redis unreachable, the key is not a lock, \
                  a bad argument, or --crit-since-success on a lock without a history (never \
                  64, 65 or 69 here)",
    },
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
        "check" => CHECK_TABLE,
        "metrics" => METRICS_TABLE,
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
            Code::Usage.get(),
            Code::Data.get(),
            Code::Unavailable.get(),
            Code::Software.get(),
            Code::Busy.get(),
            Code::LockLost.get(),
            Code::CannotExecute.get(),
            Code::NotFound.get(),
        ] {
            assert!(codes(RUN_TABLE).contains(&c.to_string()), "{c}");
        }
        assert!(codes(STATUS_TABLE).contains(&Code::Free.get().to_string()));
        assert!(codes(STATUS_TABLE).contains(&Code::Busy.get().to_string()));
        assert!(codes(TOKEN_TABLE).contains(&Code::NotHeld.get().to_string()));
        assert!(codes(BREAK_TABLE).contains(&Code::Free.get().to_string()));
        assert_eq!(Code::Success.get(), 0);
    }

    #[test]
    fn codes_are_shown_as_their_numbers() {
        for code in Code::ALL {
            assert_eq!(code.shown(), code.get().to_string());
        }
        assert_eq!(Exit::from(Code::LockLost), Exit::Code(124));
    }

    #[test]
    fn the_check_table_is_the_four_plugin_states() {
        let codes: Vec<&str> = CHECK_TABLE.iter().map(|r| r.code).collect();
        let states = [
            Plugin::Ok,
            Plugin::Warning,
            Plugin::Critical,
            Plugin::Unknown,
        ];
        let shown: Vec<String> = states.iter().map(|s| s.get().to_string()).collect();
        assert_eq!(codes, shown);
        for (row, state) in CHECK_TABLE.iter().zip(states) {
            assert!(row.meaning.starts_with(state.word()), "{}", row.meaning);
        }
        assert_eq!(Plugin::Ok.worst(Plugin::Critical), Plugin::Critical);
        assert_eq!(Plugin::Critical.worst(Plugin::Warning), Plugin::Critical);
    }
}
