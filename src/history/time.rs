//! Times of events: milliseconds since the Unix epoch (the Redis server's clock), written and
//! read as RFC 3339 in UTC, without a date library.

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `2026-11-25T03:00:01Z` (seconds), or with `millis` `2026-11-25T03:00:01.234Z`.
pub fn rfc3339(ms: u64, millis: bool) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    let secs = ms.div_euclid(1000);
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    let (h, mi, se) = (s / 3600, s / 60 % 60, s % 60);
    if millis {
        format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}.{:03}Z",
            ms.rem_euclid(1000)
        )
    } else {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}Z")
    }
}

/// Parse `2026-11-25T03:00:01Z`, `2026-11-25T03:00:01.5Z`, `2026-11-25 03:00:01`,
/// `2026-11-25T03:00:01+01:00` or a bare date `2026-11-25` (midnight UTC) into ms since the
/// epoch. Without a zone, UTC.
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let text = text.trim();
    let (date, rest) = match text.find(['T', 't', ' ']) {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => (text, ""),
    };
    let mut parts = date.split('-');
    let y: i64 = parts.next()?.parse().ok()?;
    let mo: i64 = parts.next()?.parse().ok()?;
    let d: i64 = parts.next()?.parse().ok()?;
    if parts.next().is_some()
        || !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
        || date.len() != 10
    {
        return None;
    }
    let (clock, offset_min) = if rest.is_empty() {
        ("00:00:00", 0)
    } else if let Some(c) = rest.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let (c, zone) = (&rest[..i], &rest[i..]);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (zh, zm) = zone[1..].split_once(':')?;
        (
            c,
            sign * (zh.parse::<i64>().ok()? * 60 + zm.parse::<i64>().ok()?),
        )
    } else {
        (rest, 0)
    };
    let mut hms = clock.split(':');
    let h: i64 = hms.next()?.parse().ok()?;
    let mi: i64 = hms.next()?.parse().ok()?;
    let sec: f64 = hms.next().unwrap_or("0").parse().ok()?;
    if hms.next().is_some() || h > 23 || mi > 59 || !(0.0..61.0).contains(&sec) {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    let ms = (days * 86_400 + h * 3600 + mi * 60 - offset_min * 60) * 1000
        + (sec * 1000.0).round() as i64;
    u64::try_from(ms).ok()
}

/// Now, in ms since the epoch (this machine's clock).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        assert_eq!(rfc3339(0, false), "1970-01-01T00:00:00Z");
        let t = parse_rfc3339("2026-11-25T03:00:01Z").unwrap();
        assert_eq!(rfc3339(t, false), "2026-11-25T03:00:01Z");
        assert_eq!(rfc3339(t + 234, true), "2026-11-25T03:00:01.234Z");
        assert_eq!(parse_rfc3339("2026-11-25T04:00:01+01:00"), Some(t));
        assert_eq!(parse_rfc3339("2026-11-25 03:00:01"), Some(t));
        assert_eq!(parse_rfc3339("2026-11-25T03:00:01.5Z"), Some(t + 500));
        assert_eq!(parse_rfc3339("2024-02-29"), Some(1_709_164_800_000));
        assert_eq!(parse_rfc3339("yesterday"), None);
        assert_eq!(parse_rfc3339("2026-13-01"), None);
    }
}
