//! What a waiter shows while it waits, the long part of a contended run.
//!
//! * On an interactive terminal (stderr is one, neither `-q` nor `-v`, text messages): one live
//!   status line drawn by indicatif — spinner, elapsed wait, who holds the lock and for how
//!   long — cleared when the lock is acquired.
//! * Otherwise (CI logs, cron mail, `-v`, `--log-format json`): one line when the wait starts,
//!   naming the holder, a line every `--report-every` (30s by default) and whenever the lock
//!   changes hands, and a line with the total wait once the lock is acquired.
//! * While Redis fails (after having answered): a warning when it starts, with what failed, and
//!   a line at least every `--report-every` saying for how long and what distlock does next;
//!   a notice when Redis answers again. (On a terminal the spinner also says it.)
//! * `-q`: nothing.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::backend::BackendError;
use crate::lock::{HolderTtl, Holders};
use crate::output::{Ev, Format, Level, Msg, Output};
use crate::text::{duration, quote};

/// The display of one wait.
pub struct WaitDisplay {
    out: Output,
    key: String,
    /// A set's keys, quoted (`"a b"`): messages then name the key waited for, of the set.
    set: Option<String>,
    server: String,
    limit: Option<Duration>,
    every: Duration,
    start: Instant,
    style: Style,
    /// The holders as last seen, our place in line, and when.
    last: Option<(Holders, Option<u32>, Instant)>,
    next_report: Option<Instant>,
    /// Redis is failing: since when, the last error, when the wait ends, the next line.
    failing: Option<Failing>,
    /// `run --warn-wait`, until it is said.
    warn_wait: Option<Duration>,
    /// The key as typed (one key), or the set's key waited for now.
    waiting: String,
    /// Keys of ours before a key an ancestor holds (`(ours, theirs)`): the lock-order warning
    /// when one of ours turns out busy, until it is said.
    inversions: Vec<(String, String)>,
}

struct Failing {
    since: Instant,
    error: String,
    wait_end: Option<Instant>,
    next_report: Instant,
}

enum Style {
    Silent,
    Lines,
    /// The bar (once the lock was found busy), and when to refresh its message next.
    Spinner(Option<(ProgressBar, Instant)>),
}

impl WaitDisplay {
    /// A display for waiting on `key` at `server` (up to `limit`), reporting every `every`
    /// without a terminal.
    pub fn new(
        out: &Output,
        key: &str,
        server: &str,
        limit: Option<Duration>,
        every: Duration,
    ) -> Self {
        let style = match out.level() {
            Level::Quiet => Style::Silent,
            // A program that reads JSON lines wants the lines, whatever stderr is.
            Level::Normal if out.format() == Format::Text && std::io::stderr().is_terminal() => {
                Style::Spinner(None)
            }
            _ => Style::Lines,
        };
        WaitDisplay {
            out: out.clone(),
            key: quote(key),
            set: None,
            server: server.to_owned(),
            limit,
            every,
            start: Instant::now(),
            style,
            last: None,
            next_report: None,
            failing: None,
            warn_wait: None,
            waiting: key.to_owned(),
            inversions: Vec::new(),
        }
    }

    /// Warn once, naming both keys and the fix, if one of `inversions` (a key of ours, and a
    /// later key an ancestor holds) turns out busy.
    pub fn warn_on_inversion(&mut self, inversions: Vec<(String, String)>) {
        self.inversions = inversions;
    }

    /// The lock-order warning, if the key waited for now is one of ours that comes before a
    /// key an ancestor holds. Once.
    fn lock_order(&mut self) {
        let Some((ours, theirs)) = (self.inversions.iter())
            .find(|(ours, _)| *ours == self.waiting)
            .cloned()
        else {
            return;
        };
        self.inversions.clear();
        let msg = format!(
            "waiting for lock {} while the run that started this one holds {}, which comes after \
             it in key order: a run that holds {} and waits for {} would deadlock with this one; \
             take both in one outer run (-k {ours} -k {theirs}) instead",
            quote(&ours),
            quote(&theirs),
            quote(&ours),
            quote(&theirs),
        );
        self.warn(Ev::LockOrder, msg);
    }

    /// Say once, naming the holder, when the wait has lasted `after` (`run --warn-wait`).
    pub fn warn_after(&mut self, after: Option<Duration>) {
        self.warn_wait = after;
    }

    /// The `--warn-wait` warning, if it is due (whatever the style: `-q` hides the line, not
    /// the event).
    fn long_wait(&mut self, now: Instant) {
        let (Some(after), Some((holders, position, seen))) = (self.warn_wait, &self.last) else {
            return;
        };
        let waited = now.duration_since(self.start);
        if waited < after {
            return;
        }
        self.warn_wait = None;
        let msg = Msg::new(format!(
            "waited {} for lock {} (--warn-wait {}) and still waiting{}: {}",
            duration(waited),
            self.key,
            duration(after),
            in_line(*position),
            aged(holders, now.duration_since(*seen)).summary()
        ))
        .holder(holders.first.who())
        .waited(waited);
        match &self.style {
            Style::Spinner(Some((bar, _))) => bar.suspend(|| self.out.warn(Ev::LongWait, msg)),
            _ => self.out.warn(Ev::LongWait, msg),
        }
    }

    /// An attempt failed with `error` (Redis answered before, or may be slow); the wait goes on
    /// until `wait_end` (None: without limit). Says so at once the first time, then at least
    /// every `--report-every` (from [`WaitDisplay::tick`]) until Redis answers again.
    pub fn failing(&mut self, error: &BackendError, wait_end: Option<Instant>) {
        let now = Instant::now();
        let text = error.to_string();
        match &mut self.failing {
            Some(f) => {
                if f.error != text {
                    self.out
                        .verbose(Ev::RedisFailing, format!("Redis failed again: {text}"));
                }
                f.error = text;
            }
            None => {
                self.warn(
                    Ev::RedisFailing,
                    format!(
                        "Redis at {} failed while waiting for lock {} ({text}); retrying",
                        self.server, self.key
                    ),
                );
                self.failing = Some(Failing {
                    since: now,
                    error: text,
                    wait_end,
                    next_report: now + self.every,
                });
            }
        }
    }

    /// Redis answers again.
    pub fn recovered(&mut self) {
        if let Some(f) = self.failing.take() {
            let msg = format!(
                "Redis at {} answers again after failing for {}",
                self.server,
                duration(f.since.elapsed())
            );
            match &self.style {
                Style::Spinner(Some((bar, _))) => {
                    bar.suspend(|| self.out.notice(Ev::RedisRecovered, msg));
                }
                _ => self.out.notice(Ev::RedisRecovered, msg),
            }
        }
    }

    /// The periodic line while Redis fails, if it is due.
    fn failing_report(&mut self, now: Instant) {
        let Some(f) = &mut self.failing else {
            return;
        };
        if now < f.next_report {
            return;
        }
        f.next_report = now + self.every;
        let next = match f.wait_end {
            Some(end) => format!(
                "retrying until the wait for lock {} ends in {}",
                self.key,
                duration(end.saturating_duration_since(now))
            ),
            None => format!(
                "retrying without limit (--wait is not set) for lock {}",
                self.key
            ),
        };
        let msg = format!(
            "Redis at {} has been failing for {} (last error: {}); {next}",
            self.server,
            duration(now.duration_since(f.since)),
            f.error
        );
        match &self.style {
            Style::Silent => {}
            _ => self.warn(Ev::RedisFailing, msg),
        }
    }

    /// The wait is for a set of `keys` (space-separated, as typed).
    pub fn for_set(&mut self, keys: &str) {
        let set = quote(keys);
        self.key = format!("set {set}");
        self.set = Some(set);
    }

    /// A set's wait is now for `key`: messages name it. A new key is a new wait to show (its
    /// holder did not "change hands").
    pub fn waiting_for(&mut self, key: &str) {
        key.clone_into(&mut self.waiting);
        if let Some(set) = &self.set {
            let named = format!("{} of set {set}", quote(key));
            if named != self.key {
                self.key = named;
                self.last = None;
            }
        }
    }

    /// The lock is busy: `holders` is what the last attempt learned about them, `position` our
    /// place in line (if we have one).
    pub fn busy(&mut self, holders: &Holders, position: Option<u32>) {
        self.lock_order();
        let now = Instant::now();
        let first = self.last.is_none();
        let changed = self
            .last
            .as_ref()
            .is_some_and(|(last, _, _)| last.first.holder != holders.first.holder);
        self.last = Some((holders.clone(), position, now));
        let held = &holders.first;
        let place = in_line(position);
        match &mut self.style {
            Style::Silent => {}
            Style::Lines if first => {
                let limit = self
                    .limit
                    .map(|l| format!(" for up to {}", duration(l)))
                    .unwrap_or_default();
                self.out.notice(
                    Ev::Waiting,
                    Msg::new(format!(
                        "lock {} is busy; waiting{limit}{place}: {}",
                        self.key,
                        holders.summary()
                    ))
                    .holder(held.who()),
                );
                self.next_report = Some(now + self.every);
            }
            Style::Lines if changed => {
                self.out.notice(
                    Ev::ChangedHands,
                    Msg::new(format!(
                        "lock {} changed hands; still waiting{place}: {}",
                        self.key,
                        holders.summary()
                    ))
                    .holder(held.who()),
                );
            }
            Style::Lines => {}
            Style::Spinner(bar) => {
                let (bar, next) = bar.get_or_insert_with(|| {
                    let bar = ProgressBar::new_spinner();
                    // {elapsed} ticks by itself; {wide_msg} is cut to the terminal's width.
                    if let Ok(style) =
                        ProgressStyle::with_template("{spinner} waiting {elapsed} for {wide_msg}")
                    {
                        bar.set_style(style);
                    }
                    bar.enable_steady_tick(Duration::from_millis(120));
                    (bar, now)
                });
                bar.set_message(spinner_message(
                    &self.key,
                    holders,
                    position,
                    Duration::ZERO,
                ));
                *next = now + SPINNER_REFRESH;
            }
        }
    }

    /// When `tick` wants to run next, if ever.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let busy = match &self.style {
            Style::Silent => None,
            Style::Lines => self.next_report,
            Style::Spinner(Some((_, next))) => Some(*next),
            Style::Spinner(None) => None,
        };
        let failing = match self.style {
            Style::Silent => None,
            _ => self.failing.as_ref().map(|f| f.next_report),
        };
        // Once the lock was seen busy (the warning names its holder).
        let long_wait = self
            .warn_wait
            .filter(|_| self.last.is_some())
            .map(|after| self.start + after);
        [busy, failing, long_wait].into_iter().flatten().min()
    }

    /// Refresh the spinner, or print the periodic lines when they are due.
    pub fn tick(&mut self) {
        let now = Instant::now();
        self.failing_report(now);
        self.long_wait(now);
        let Some((holders, position, seen)) = &self.last else {
            return;
        };
        let since_seen = now.duration_since(*seen);
        let held = &holders.first;
        match &mut self.style {
            Style::Lines if self.next_report.is_some_and(|at| now >= at) => {
                if self.failing.is_some() {
                    // What is known of the holder is stale; the failure line says it all.
                    self.next_report = Some(now + self.every);
                    return;
                }
                let waited = now.duration_since(self.start);
                self.out.notice(
                    Ev::StillWaiting,
                    Msg::new(format!(
                        "still waiting for lock {} after {}{}: {}",
                        self.key,
                        duration(waited),
                        in_line(*position),
                        aged(holders, since_seen).summary()
                    ))
                    .holder(held.who())
                    .waited(waited),
                );
                self.next_report = Some(now + self.every);
            }
            Style::Spinner(Some((bar, next))) => {
                bar.set_message(spinner_message(&self.key, holders, *position, since_seen));
                *next = now + SPINNER_REFRESH;
            }
            _ => {}
        }
    }

    /// A set lost a key it held while it waited for a later one, and starts again: a notice
    /// (not under `-q`), once per loss.
    pub fn lost_while_waiting(&mut self, lost: &crate::lock::LostWhileWaiting) {
        let set = self.set.clone().unwrap_or_else(|| self.key.clone());
        let waiting = lost
            .waiting_for
            .as_ref()
            .map(|k| format!(" while it waited for {}", quote(k)))
            .unwrap_or_default();
        let msg = format!(
            "lock {} of set {set} was lost{waiting} (broken, expired, or Redis lost it); every \
             key was given back and the set starts again from its first key (its command has \
             not started)",
            quote(&lost.key)
        );
        // The wait shown is a new one.
        self.last = None;
        match &self.style {
            Style::Silent => {}
            Style::Spinner(Some((bar, _))) => {
                bar.suspend(|| self.out.notice(Ev::SetRestarted, msg));
            }
            _ => self.out.notice(Ev::SetRestarted, msg),
        }
    }

    /// Print a warning without tearing the spinner line.
    pub fn warn(&self, ev: Ev, msg: String) {
        match &self.style {
            Style::Spinner(Some((bar, _))) => bar.suspend(|| self.out.warn(ev, msg)),
            _ => self.out.warn(ev, msg),
        }
    }

    /// The lock is ours after `waited`.
    pub fn acquired(&mut self, waited: Duration) {
        self.clear();
        if let Some(set) = &self.set {
            self.key = format!("set {set}");
        }
        if matches!(self.style, Style::Lines) && self.last.is_some() {
            self.out.notice(
                Ev::Acquired,
                Msg::new(format!(
                    "acquired lock {} after waiting {}",
                    self.key,
                    duration(waited)
                ))
                .waited(waited),
            );
        }
    }

    /// The wait ended without the lock.
    pub fn clear(&mut self) {
        if let Style::Spinner(bar) = &mut self.style {
            if let Some((bar, _)) = bar.take() {
                bar.finish_and_clear();
            }
        }
    }

    /// Whether anything was shown about a busy lock.
    pub fn announced(&self) -> bool {
        self.last.is_some() && !matches!(self.style, Style::Silent)
    }
}

impl Drop for WaitDisplay {
    fn drop(&mut self) {
        self.clear();
    }
}

/// `held` as it stands `elapsed` after it was seen.
fn aged(holders: &Holders, elapsed: Duration) -> Holders {
    let mut holders = holders.clone();
    let held = &mut holders.first;
    held.held_for = held.held_for.map(|d| d + elapsed);
    if let HolderTtl::Expires(ttl) = held.ttl {
        held.ttl = HolderTtl::Expires(ttl.saturating_sub(elapsed));
    }
    holders
}

/// ` (3rd in line)`, or nothing without a place.
/// ` (3rd in line)`, or nothing when the lock keeps no line.
pub(crate) fn in_line(position: Option<u32>) -> String {
    position.map_or_else(String::new, |p| format!(" ({} in line)", ordinal(p)))
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`.
pub fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// How often the spinner's text (the holder's age, its time left) is refreshed.
const SPINNER_REFRESH: Duration = Duration::from_secs(1);

fn spinner_message(
    key: &str,
    holders: &Holders,
    position: Option<u32>,
    since_seen: Duration,
) -> String {
    format!(
        "lock {key}{}: {}",
        in_line(position),
        aged(holders, since_seen).summary()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_read_as_ordinals() {
        let words: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            words,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
    }
}
