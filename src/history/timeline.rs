//! `distlock stats --timeline`: a lock's holds and waits, from its history, as a text chart:
//! one lane per host (the least busy grouped as "others" when there are too many), a time axis
//! in UTC and a legend (docs/history.md#a-timeline---timeline).
//!
//! [`render`] is a pure function of the events and a [`Frame`] (time span, width, glyphs);
//! [`terminal_width`] and [`unicode_locale`] read what the chart adapts to.

use std::time::Duration;

use super::event::{Event, NOT_TAKEN_UP};
use super::time::rfc3339;

/// The most lanes drawn; past it, the least busy hosts share the last lane, "others".
pub const MAX_LANES: usize = 12;
/// The narrowest chart accepted (`--width`).
pub const MIN_WIDTH: usize = 40;
/// The width without a terminal.
pub const DEFAULT_WIDTH: usize = 80;
/// The longest lane label (longer host names are cut).
const LABEL_MAX: usize = 14;

/// What a cell shows, in increasing priority (a cell shows the strongest of its events).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Cell {
    Empty,
    Waiting,
    /// A hold whose end is an upper bound: its holder vanished and the lock expired.
    HeldAtMost,
    Held,
    Broken,
    Lost,
}

/// The glyphs of a chart: Unicode blocks, or plain ASCII.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Glyphs {
    /// `█ ▓ ░`, and an arrow in the header.
    Unicode,
    /// `# + .`, and `->`.
    Ascii,
}

impl Glyphs {
    fn of(self, cell: Cell) -> char {
        match (self, cell) {
            (_, Cell::Empty) => ' ',
            (Glyphs::Unicode, Cell::Waiting) => '░',
            (Glyphs::Unicode, Cell::HeldAtMost) => '▓',
            (Glyphs::Unicode, Cell::Held) => '█',
            (Glyphs::Ascii, Cell::Waiting) => '.',
            (Glyphs::Ascii, Cell::HeldAtMost) => '+',
            (Glyphs::Ascii, Cell::Held) => '#',
            (_, Cell::Broken) => '!',
            (_, Cell::Lost) => 'x',
        }
    }

    /// Text from the history (host names, the key) in these glyphs: in ASCII, each other
    /// character as `?`, so that the chart stays plain ASCII (and its columns aligned).
    fn text(self, text: &str) -> String {
        match self {
            Glyphs::Unicode => text.to_owned(),
            Glyphs::Ascii => text
                .chars()
                .map(|c| if c.is_ascii() { c } else { '?' })
                .collect(),
        }
    }

    fn arrow(self) -> &'static str {
        match self {
            Glyphs::Unicode => "→",
            Glyphs::Ascii => "->",
        }
    }
}

/// What the chart covers and how it is drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The lock's key (shown in the header).
    pub key: String,
    /// The start of the time axis (ms since the epoch, Redis clock).
    pub from_ms: u64,
    /// Its end (now, for a chart up to now).
    pub to_ms: u64,
    /// The whole line's width in characters, labels included.
    pub width: usize,
    /// Unicode or ASCII.
    pub glyphs: Glyphs,
}

/// A span of a lane: its lane (an index into the hosts), from, to (ms), what it shows, and a
/// mark at its end (lost, broken).
#[derive(Clone, Copy, Debug)]
struct Span {
    lane: usize,
    from: u64,
    to: u64,
    cell: Cell,
    end: Option<Cell>,
}

/// The hosts (lanes) and the spans drawn on them, from the events (oldest first). A hold is
/// drawn from the event that ends it (`released`, `lost`, `expired`, `broken`: it carries
/// `held_ms`), one still held from its `acquired` up to `to_ms`; a wait from the event that
/// ends it (`acquired`, `gave-up`, `superseded`: `waited_ms`). A hold recorded twice is drawn
/// once: `lost` by its holder after the next taker recorded it `expired`, as lost; `lost` after
/// `broken`, as broken.
///
/// Plain vectors searched linearly (at most 1000 events): no map type is compiled in for this.
fn spans(events: &[Event], to_ms: u64) -> (Vec<String>, Vec<Span>) {
    let mut hosts: Vec<String> = Vec::new();
    let mut spans: Vec<Span> = Vec::new();
    // Holds by (token, slot): started (its lane, when), or ended (the index of its span).
    let mut open: Vec<(&str, &str, usize, u64)> = Vec::new();
    let mut ended: Vec<(&str, &str, usize)> = Vec::new();
    for e in events {
        let host = e.get("host").map_or("?".to_owned(), crate::text::sanitize);
        let lane = match hosts.iter().position(|h| *h == host) {
            Some(i) => i,
            None => {
                hosts.push(host);
                hosts.len() - 1
            }
        };
        let (token, slot) = (
            e.get("token").unwrap_or_default(),
            e.get("slot").unwrap_or_default(),
        );
        let ms = |name: &str| e.get(name).and_then(|v| v.parse::<u64>().ok());
        let waited = |w: u64| Span {
            lane,
            from: e.at_ms.saturating_sub(w),
            to: e.at_ms,
            cell: Cell::Waiting,
            end: None,
        };
        match e.kind.as_str() {
            "acquired" => {
                if let Some(w) = ms("waited_ms").filter(|w| *w > 0) {
                    spans.push(waited(w));
                }
                open.retain(|o| (o.0, o.1) != (token, slot));
                open.push((token, slot, lane, e.at_ms));
            }
            "gave-up" | "superseded" => spans.push(waited(ms("waited_ms").unwrap_or(0))),
            "released" | "lost" | "expired" | "broken" => {
                let started = open.iter().position(|o| (o.0, o.1) == (token, slot));
                let started = started.map(|i| open.swap_remove(i).3);
                if e.kind == "expired" && e.get("why") == Some(NOT_TAKEN_UP) {
                    continue;
                }
                let from = match (ms("held_ms"), started) {
                    (Some(h), _) => e.at_ms.saturating_sub(h),
                    (None, Some(at)) => at,
                    (None, None) => e.at_ms,
                };
                let (cell, end) = match e.kind.as_str() {
                    "lost" => (Cell::Held, Some(Cell::Lost)),
                    "broken" => (Cell::Held, Some(Cell::Broken)),
                    "expired" => (Cell::HeldAtMost, None),
                    _ => (Cell::Held, None),
                };
                let span = Span {
                    lane,
                    from,
                    to: e.at_ms,
                    cell,
                    end,
                };
                let earlier = ended.iter().find(|d| (d.0, d.1) == (token, slot));
                if e.kind == "lost"
                    && let Some(earlier) = earlier.and_then(|d| spans.get_mut(d.2))
                {
                    // Expired, then reported lost by its holder: lost. Broken, then lost:
                    // the break says more (who); the holder's report adds nothing.
                    if earlier.cell == Cell::HeldAtMost {
                        *earlier = span;
                    }
                    continue;
                }
                ended.push((token, slot, spans.len()));
                spans.push(span);
            }
            _ => {}
        }
    }
    for (_, _, lane, at) in open {
        spans.push(Span {
            lane,
            from: at,
            to: to_ms.max(at),
            cell: Cell::Held,
            end: None,
        });
    }
    (hosts, spans)
}

/// A tick step for the axis (ms): the smallest of these that leaves room for a label.
const STEPS_MS: [u64; 26] = [
    1,
    5,
    10,
    50,
    100,
    250,
    500,
    1000,
    5000,
    10_000,
    30_000,
    60_000,
    300_000,
    600_000,
    900_000,
    1_800_000,
    3_600_000,
    7_200_000,
    10_800_000,
    21_600_000,
    43_200_000,
    86_400_000,
    172_800_000,
    604_800_000,
    1_209_600_000,
    2_592_000_000,
];

/// A tick's label: the date for steps of days, the time to the minute, the second or the ms.
fn tick_label(ms: u64, step_ms: u64) -> String {
    let t = rfc3339(ms, true);
    // 2026-11-25T03:00:01.234Z
    if step_ms >= 86_400_000 {
        t[5..10].to_owned()
    } else if step_ms >= 60_000 {
        t[11..16].to_owned()
    } else if step_ms >= 1000 {
        t[11..19].to_owned()
    } else {
        t[11..23].to_owned()
    }
}

/// Draw the chart. Times outside the frame are cut at its edges; a span shorter than a column
/// still takes one.
pub fn render(events: &[Event], frame: &Frame) -> String {
    let g = frame.glyphs;
    let span_ms = frame.to_ms.saturating_sub(frame.from_ms).max(1);
    let (hosts, spans) = spans(events, frame.to_ms);
    // The lanes with something drawn, by host name; the busiest keep a lane, the others share
    // one.
    let busy = |lane: usize| -> u64 {
        (spans.iter().filter(|s| s.lane == lane))
            .map(|s| s.to - s.from)
            .sum::<u64>()
            + 1
    };
    let mut names: Vec<usize> = (0..hosts.len())
        .filter(|i| spans.iter().any(|s| s.lane == *i))
        .collect();
    let mut others: Vec<usize> = Vec::new();
    if names.len() > MAX_LANES {
        names.sort_by_key(|i| (std::cmp::Reverse(busy(*i)), &hosts[*i]));
        others = names.split_off(MAX_LANES - 1);
    }
    names.sort_by_key(|i| &hosts[*i]);
    let others_label = format!("others ({})", others.len());
    let mut labels: Vec<String> = names
        .iter()
        .map(|i| {
            let n = g.text(&hosts[*i]);
            if n.chars().count() > LABEL_MAX {
                n.chars().take(LABEL_MAX - 1).chain(['~']).collect()
            } else {
                n
            }
        })
        .collect();
    if !others.is_empty() {
        labels.push(others_label);
    }
    let label_w = labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let cols = frame.width.saturating_sub(label_w + 2).max(1);
    let col_of = |t: u64| -> usize {
        let t = t.clamp(frame.from_ms, frame.to_ms) - frame.from_ms;
        usize::try_from(u128::from(t) * cols as u128 / u128::from(span_ms))
            .unwrap_or(cols)
            .min(cols - 1)
    };
    let draw = |spans: &mut dyn Iterator<Item = &Span>| -> String {
        let mut row = vec![Cell::Empty; cols];
        for s in spans {
            if s.to < frame.from_ms || s.from > frame.to_ms {
                continue;
            }
            let (a, b) = (col_of(s.from), col_of(s.to));
            for cell in &mut row[a..=b] {
                *cell = (*cell).max(s.cell);
            }
            if let Some(mark) = s.end
                && s.to <= frame.to_ms
            {
                row[b] = row[b].max(mark);
            }
        }
        row.into_iter().map(|c| g.of(c)).collect::<String>()
    };
    let mut text = String::new();
    let column = Duration::from_millis(span_ms / cols as u64);
    // Seconds in the header when the chart spans less than an hour, ms under a minute.
    let when = |ms: u64| {
        let t = rfc3339(ms, true).replace('T', " ");
        let len = match span_ms {
            0..60_000 => 23,
            60_000..3_600_000 => 19,
            _ => 16,
        };
        t[..len].to_owned()
    };
    let header = [
        g.text(&crate::text::quote(&frame.key)),
        format!(
            "{} {} {} UTC",
            when(frame.from_ms),
            g.arrow(),
            when(frame.to_ms)
        ),
        format!(
            "(one column = {})",
            crate::text::duration(column.max(Duration::from_millis(1)))
        ),
    ];
    text.push_str(&wrap(&header, frame.width));
    if names.is_empty() {
        text.push_str("  (nothing held or waited for in that time)\n");
    }
    for (name, label) in names.iter().zip(&labels) {
        let row = draw(&mut spans.iter().filter(|s| s.lane == *name));
        text.push_str(&format!("{label:<label_w$}  {}\n", row.trim_end()));
    }
    if let Some(label) = labels.get(names.len()) {
        let row = draw(&mut spans.iter().filter(|s| others.contains(&s.lane)));
        text.push_str(&format!("{label:<label_w$}  {}\n", row.trim_end()));
    }
    // The axis: a tick every `step`, aligned on UTC, labelled where the label fits.
    let label_len = |s: u64| tick_label(0, s).len() + 2;
    let step_ms = STEPS_MS
        .iter()
        .copied()
        .find(|s| {
            let per_tick = u128::from(*s) * cols as u128 / u128::from(span_ms);
            per_tick >= label_len(*s) as u128
        })
        .unwrap_or(STEPS_MS[STEPS_MS.len() - 1]);
    let mut axis = vec![' '; cols];
    let mut t = frame.from_ms.div_ceil(step_ms) * step_ms;
    while t <= frame.to_ms {
        let c = col_of(t);
        let label = format!("|{}", tick_label(t, step_ms));
        if c + label.len() <= cols && axis[c..c + label.len()].iter().all(|c| *c == ' ') {
            for (i, ch) in label.chars().enumerate() {
                axis[c + i] = ch;
            }
        }
        t += step_ms;
    }
    let axis: String = axis.into_iter().collect();
    let axis = format!("{:label_w$}  {}", "", axis.trim_end());
    text.push_str(axis.trim_end());
    text.push('\n');
    let legend = [
        (Cell::Held, "held"),
        (Cell::Waiting, "waiting"),
        (Cell::Lost, "lost"),
        (Cell::Broken, "broken"),
        (Cell::HeldAtMost, "held at most (expired)"),
    ]
    .map(|(c, what)| format!("{} {what}", g.of(c)));
    text.push_str(&wrap(&legend, frame.width));
    text
}

/// Items on lines of at most `width` characters, two spaces apart (an item longer than the
/// width has a line of its own).
fn wrap(items: &[String], width: usize) -> String {
    let mut text = String::new();
    let mut line = String::new();
    for item in items {
        if !line.is_empty() && line.chars().count() + 2 + item.chars().count() > width {
            text.push_str(&line);
            text.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push_str("  ");
        }
        line.push_str(item);
    }
    if !line.is_empty() {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// Whether the locale's characters are UTF-8: the first of `LC_ALL`, `LC_CTYPE` and `LANG` that
/// is set and not empty names UTF-8 (`C.UTF-8`, `en_US.utf8`). None set: the C locale, ASCII.
pub fn unicode_locale(var: impl Fn(&str) -> Option<String>) -> bool {
    ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|name| var(name).filter(|v| !v.is_empty()))
        .is_some_and(|v| {
            let v = v.to_ascii_lowercase();
            v.contains("utf-8") || v.contains("utf8")
        })
}

/// The width of the terminal on stdout, if stdout is one.
pub fn terminal_width() -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which points at a live,
    // properly aligned `winsize` for the duration of the call; a descriptor that is not a
    // terminal makes it fail with ENOTTY and write nothing.
    let done = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &raw mut size) };
    (done == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

#[cfg(test)]
#[path = "timeline_tests.rs"]
mod tests;
