//! What a waiter shows while it waits, the long part of a contended run.
//!
//! * On an interactive terminal (stderr is one, and neither `-q` nor `-v`): one live status line
//!   drawn by indicatif — spinner, elapsed wait, who holds the lock and for how long — cleared
//!   when the lock is acquired.
//! * Otherwise (CI logs, cron mail, `-v`): one line when the wait starts, naming the holder, a
//!   line every `--report-every` (30s by default) and whenever the lock changes hands, and a line
//!   with the total wait once the lock is acquired.
//! * `-q`: nothing.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::{Level, Output, duration, quote};
use crate::lock::{HeldBy, HolderTtl};

/// The display of one wait.
pub struct WaitDisplay {
    out: Output,
    key: String,
    limit: Option<Duration>,
    every: Duration,
    start: Instant,
    style: Style,
    /// The holder as last seen, and when.
    last: Option<(HeldBy, Instant)>,
    next_report: Option<Instant>,
}

enum Style {
    Silent,
    Lines,
    /// The bar (once the lock was found busy), and when to refresh its message next.
    Spinner(Option<(ProgressBar, Instant)>),
}

impl WaitDisplay {
    /// A display for waiting on `key` (up to `limit`), reporting every `every` without a
    /// terminal.
    pub fn new(out: &Output, key: &str, limit: Option<Duration>, every: Duration) -> Self {
        let style = match out.level() {
            Level::Quiet => Style::Silent,
            Level::Normal if std::io::stderr().is_terminal() => Style::Spinner(None),
            _ => Style::Lines,
        };
        WaitDisplay {
            out: out.clone(),
            key: quote(key),
            limit,
            every,
            start: Instant::now(),
            style,
            last: None,
            next_report: None,
        }
    }

    /// The lock is busy; `held` is what the last attempt learned about the holder.
    pub fn busy(&mut self, held: &HeldBy) {
        let now = Instant::now();
        let first = self.last.is_none();
        let changed = self
            .last
            .as_ref()
            .is_some_and(|(last, _)| last.holder != held.holder);
        self.last = Some((held.clone(), now));
        match &mut self.style {
            Style::Silent => {}
            Style::Lines if first => {
                let limit = self
                    .limit
                    .map(|l| format!(" for up to {}", duration(l)))
                    .unwrap_or_default();
                self.out.notice(format!(
                    "lock {} is busy; waiting{limit}: {}",
                    self.key,
                    held.summary()
                ));
                self.next_report = Some(now + self.every);
            }
            Style::Lines if changed => {
                self.out.notice(format!(
                    "lock {} changed hands; still waiting: {}",
                    self.key,
                    held.summary()
                ));
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
                bar.set_message(spinner_message(&self.key, held, Duration::ZERO));
                *next = now + SPINNER_REFRESH;
            }
        }
    }

    /// When `tick` wants to run next, if ever.
    pub fn next_wakeup(&self) -> Option<Instant> {
        match &self.style {
            Style::Silent => None,
            Style::Lines => self.next_report,
            Style::Spinner(Some((_, next))) => Some(*next),
            Style::Spinner(None) => None,
        }
    }

    /// Refresh the spinner, or print the periodic line when it is due.
    pub fn tick(&mut self) {
        let now = Instant::now();
        let Some((held, seen)) = &self.last else {
            return;
        };
        let since_seen = now.duration_since(*seen);
        match &mut self.style {
            Style::Lines if self.next_report.is_some_and(|at| now >= at) => {
                self.out.notice(format!(
                    "still waiting for lock {} after {}: {}",
                    self.key,
                    duration(now.duration_since(self.start)),
                    aged(held, since_seen).summary()
                ));
                self.next_report = Some(now + self.every);
            }
            Style::Spinner(Some((bar, next))) => {
                bar.set_message(spinner_message(&self.key, held, since_seen));
                *next = now + SPINNER_REFRESH;
            }
            _ => {}
        }
    }

    /// Print a warning without tearing the spinner line.
    pub fn warn(&self, msg: String) {
        match &self.style {
            Style::Spinner(Some((bar, _))) => bar.suspend(|| self.out.warn(msg)),
            _ => self.out.warn(msg),
        }
    }

    /// The lock is ours after `waited`.
    pub fn acquired(&mut self, waited: Duration) {
        self.clear();
        if matches!(self.style, Style::Lines) && self.last.is_some() {
            self.out.notice(format!(
                "acquired lock {} after waiting {}",
                self.key,
                duration(waited)
            ));
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
fn aged(held: &HeldBy, elapsed: Duration) -> HeldBy {
    let mut held = held.clone();
    held.held_for = held.held_for.map(|d| d + elapsed);
    if let HolderTtl::Expires(ttl) = held.ttl {
        held.ttl = HolderTtl::Expires(ttl.saturating_sub(elapsed));
    }
    held
}

/// How often the spinner's text (the holder's age, its time left) is refreshed.
const SPINNER_REFRESH: Duration = Duration::from_secs(1);

fn spinner_message(key: &str, held: &HeldBy, since_seen: Duration) -> String {
    format!("lock {key}: {}", aged(held, since_seen).summary())
}
