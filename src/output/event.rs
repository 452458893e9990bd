//! The names of distlock's messages: every line distlock prints on stderr is one of these
//! events, so that `--log-format json` can tell scripts what happened without making them parse
//! the human text.
//!
//! The names are a stable interface (documented in docs/json-log.md and in `--help`): rename one only
//! with a release note. Several call sites share a name when they report the same fact (both
//! ways of losing a lock are `lost`). This module only names and describes; printing is
//! [`super::Output`]'s.

/// Declares [`Ev`], its names and its one-line meanings from one table, so that a variant can
/// never lack a name or be missing from [`Ev::ALL`] (which the docs and their tests walk).
macro_rules! events {
    ($($(#[$attr:meta])* $variant:ident = $name:literal, $meaning:literal;)*) => {
        /// What a message is about. Every message names one: [`super::Output`] has no way to
        /// print without it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Ev {
            $($(#[$attr])* #[doc = $meaning] $variant,)*
        }

        impl Ev {
            /// Every event, in the order of the documentation.
            pub const ALL: &'static [Ev] = &[$(Ev::$variant,)*];

            /// The name scripts match on (the `event` field of a JSON line).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Ev::$variant => $name,)*
                }
            }

            /// What it means, in a few words, for `--help` (a number in parentheses is the
            /// exit code that follows).
            pub fn meaning(self) -> &'static str {
                match self {
                    $(Ev::$variant => $meaning,)*
                }
            }
        }
    };
}

events! {
    // Before anything is done: the command line and the environment.
    UsageError = "usage-error", "a refused argument or variable (64)";
    UsageTip = "usage-tip", "a hint after usage-error, e.g. a flag";
    // Taking the lock.
    Connected = "connected", "Redis answered for the first time (-v)";
    NodeFailed = "node-failed", "a Redlock node failed; the others go on";
    AttemptBusy = "attempt-busy", "an attempt found the lock held (-v)";
    Waiting = "waiting", "the lock is busy; the wait begins";
    StillWaiting = "still-waiting", "still waiting, every --report-every";
    ChangedHands = "changed-hands", "the lock passed to another holder";
    SetRestarted = "set-restarted", "a set lost a held key; it starts over";
    LockOrder = "lock-order", "a nested run inverts the key order";
    Notified = "notified", "a release notification arrived (-v)";
    SubscribeFailed = "subscribe-failed", "no release notifications; polling";
    SubscriptionLost = "subscription-lost", "release notifications were cut (-v)";
    SubscriptionRestored = "subscription-restored", "release notifications are back (-v)";
    DoorbellRefused = "doorbell-refused", "no doorbell (+blpop); subscribing (-v)";
    RedisFailing = "redis-failing", "Redis fails while waiting; retrying";
    RedisRecovered = "redis-recovered", "Redis answers again";
    TakenBack = "taken-back", "an unanswered attempt was undone (-v)";
    Acquired = "acquired", "the lock is ours";
    Busy = "busy", "gave up: the lock stayed busy (75, -E)";
    Superseded = "superseded", "a newer waiter took our place (75, -E)";
    LongWait = "long-wait", "waited --warn-wait; still waiting";
    Reentered = "reentered", "nested run under its parent's lock (-v)";
    Interrupted = "interrupted", "a signal ended the wait, or the start";
    Held = "held", "acquire: held until the TTL ends (-v)";
    HandOverFailed = "hand-over-failed", "acquire: token not handed over (74)";
    // Running the command under the lock.
    Started = "started", "the command started (-v)";
    Forwarded = "forwarded", "a signal was passed to the command (-v)";
    Renewed = "renewed", "the lock was renewed (-v)";
    RenewFailed = "renew-failed", "a renewal failed; retrying";
    RenewRecovered = "renew-recovered", "renewals succeed again";
    RenewerFailed = "renewer-failed", "the renewal thread did not start";
    HeldTooLong = "held-too-long", "held for --warn-after; still running";
    Lost = "lost", "the lock was lost; command killed (124)";
    TimedOut = "timed-out", "--timeout passed; command stopped (79)";
    Replaced = "replaced", "a newer run replaced this one (75, -E)";
    LeftProcesses = "left-processes", "processes left behind are stopped";
    KillStuck = "kill-stuck", "processes survived SIGKILL";
    GuardFailed = "guard-failed", "no guard process could be started";
    GuardReplaced = "guard-replaced", "the guard process died and was replaced";
    HookFailed = "hook-failed", "--hook failed or ran too long";
    // Releasing.
    Released = "released", "the lock was released (-v)";
    ReleaseFailed = "release-failed", "the release failed; the lock expires";
    ExpiredAtRelease = "expired-at-release", "the lock expired before the release";
    NotHeld = "not-held", "not held with this token (77)";
    // The operator commands.
    NoLocks = "no-locks", "list: no lock matches";
    Free = "free", "break: the lock is free (1)";
    ConfirmBreak = "confirm-break", "break: the question, on a terminal";
    Declined = "declined", "break: the answer was no (1)";
    NoSuchHolder = "no-such-holder", "break: no holder has that --holder (1)";
    HolderBroken = "holder-broken", "break: one of several holders broken";
    HolderNotBroken = "holder-not-broken", "break: one of several had already left";
    NotBroken = "not-broken", "break: the lock changed hands (1)";
    Broken = "broken", "break: the holder(s) were released (0)";
    MetricsNotWritten = "metrics-not-written", "metrics: the output not written (74)";
    // The history commands.
    NoHistory = "no-history", "log/stats: the lock keeps no history";
    HistoryMinority = "history-minority", "log/stats: events a minority recorded";
    HistoryReadFailed = "history-read-failed", "log --follow: a read failed; retrying";
    HistoryCleared = "history-cleared", "log --clear: the history was deleted";
    // distlock's own failures (each ends distlock with the code in `exit`).
    RedisError = "redis-error", "Redis unreachable or refusing (69, 65)";
    LockConflict = "lock-conflict", "the key has another --limit (65)";
    NewerProtocol = "newer-protocol", "a newer distlock's key layout (65)";
    CommandNotFound = "command-not-found", "the command was not found (127)";
    CommandNotExecutable = "command-not-executable", "the command cannot be executed (126)";
    InternalError = "internal-error", "a bug, or a system limit (70)";
}

/// The events as an aligned two-column list (for the long help of `--log-format`). Each line
/// starts with a space so that the man page breaks the line there rather than filling.
pub fn table() -> String {
    let width = Ev::ALL
        .iter()
        .map(|ev| ev.as_str().len())
        .max()
        .unwrap_or(0);
    Ev::ALL
        .iter()
        .map(|ev| format!(" {:<width$}  {}\n", ev.as_str(), ev.meaning()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_kebab_case_and_described() {
        let mut seen = std::collections::HashSet::new();
        for ev in Ev::ALL {
            let name = ev.as_str();
            assert!(seen.insert(name), "{name} twice");
            assert!(
                !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                    && !name.starts_with('-')
                    && !name.ends_with('-'),
                "{name}"
            );
            assert!(!ev.meaning().is_empty());
        }
    }

    #[test]
    fn the_table_fits_the_help() {
        for line in table().lines() {
            // Unwrapped on 80 columns: --help indents an option's text by 10, man by 14.
            assert!(line.chars().count() <= 64, "{line}");
        }
    }
}
