//! The one way vole writes a time as text: RFC 3339 in UTC (via
//! humantime), to the second for pages, to the millisecond for logs and
//! documents. Times before 1970 print as the epoch, times after the year
//! 9999 (RFC 3339 has four digits for the year; a pushed commit may claim
//! any time) as its last second.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// 9999-12-31T23:59:59Z, the last second RFC 3339 can write.
const LAST_SECOND: u64 = 253_402_300_799;

/// A time since the epoch, clamped into what RFC 3339 can write.
fn clamped(seconds: i64, nanos: u32) -> SystemTime {
    let seconds = u64::try_from(seconds).unwrap_or(0);
    if seconds > LAST_SECOND {
        return UNIX_EPOCH + Duration::from_secs(LAST_SECOND);
    }
    UNIX_EPOCH + Duration::new(seconds, nanos)
}

/// Seconds since the epoch (a git commit's time), e.g.
/// `2026-12-01T10:45:38Z`.
pub fn seconds(unix_seconds: i64) -> String {
    humantime::format_rfc3339_seconds(clamped(unix_seconds, 0)).to_string()
}

/// Nanoseconds since the epoch (a log record's time), to the second.
pub fn nanos_to_seconds(unix_nanos: i64) -> String {
    humantime::format_rfc3339_seconds(from_nanos(unix_nanos)).to_string()
}

/// Nanoseconds since the epoch, to the millisecond, e.g.
/// `2026-12-01T10:45:38.123Z`.
pub fn nanos_to_millis(unix_nanos: i64) -> String {
    humantime::format_rfc3339_millis(from_nanos(unix_nanos)).to_string()
}

fn from_nanos(unix_nanos: i64) -> SystemTime {
    let nanos = unix_nanos.max(0);
    clamped(nanos / 1_000_000_000, (nanos % 1_000_000_000) as u32)
}

/// Now, to the millisecond.
pub fn now_millis() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// A time as a client writes it (RFC 3339: `2024-01-02T15:04:05Z`,
/// `...05.123+02:00`), in UTC to the millisecond as vole stores times, so
/// the two compare as text; `None` when it is not such a time.
pub fn parse_rfc3339_utc(text: &str) -> Option<String> {
    let text = text.trim();
    if text.len() < 20 || !text.is_char_boundary(19) {
        return None;
    }
    let (clock, zone) = text.split_at(19);
    // Fractions of a second (kept to the millisecond, as stored times
    // are), then the zone.
    let (millis, zone) = match zone.strip_prefix('.') {
        Some(rest) => {
            let zone = rest.trim_start_matches(|c: char| c.is_ascii_digit());
            let digits = &rest[..rest.len() - zone.len()];
            let millis = format!("{:0<3}", &digits[..digits.len().min(3)]);
            (millis.parse::<u64>().ok()?, zone)
        }
        None => (0, zone),
    };
    let offset: i64 = match zone {
        "Z" | "z" => 0,
        _ => {
            let (sign, hhmm) = match zone.as_bytes().first()? {
                b'+' => (1, &zone[1..]),
                b'-' => (-1, &zone[1..]),
                _ => return None,
            };
            let (h, m) = hhmm.split_once(':')?;
            // Unsigned and small: no sign inside, nothing to overflow.
            let (h, m): (u8, u8) = (h.parse().ok()?, m.parse().ok()?);
            if h > 23 || m > 59 {
                return None;
            }
            sign * (i64::from(h) * 3600 + i64::from(m) * 60)
        }
    };
    let naive = humantime::parse_rfc3339(&format!("{clock}Z")).ok()?;
    let unix = naive.duration_since(UNIX_EPOCH).ok()?.as_secs() as i64 - offset;
    let at = clamped(unix, 0) + Duration::from_millis(millis);
    Some(humantime::format_rfc3339_millis(at).to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn client_times_are_read_in_utc() {
        let utc = super::parse_rfc3339_utc;
        assert_eq!(
            utc("2024-01-02T15:04:05Z").unwrap(),
            "2024-01-02T15:04:05.000Z"
        );
        assert_eq!(
            utc("2024-01-02T17:04:05+02:00").unwrap(),
            "2024-01-02T15:04:05.000Z"
        );
        // A fraction is kept to the millisecond, as stored times are.
        assert_eq!(
            utc("2024-01-02T15:04:05.5-01:30").unwrap(),
            "2024-01-02T16:34:05.500Z"
        );
        assert_eq!(
            utc("2024-01-02T15:04:05.123456Z").unwrap(),
            "2024-01-02T15:04:05.123Z"
        );
        for bad in [
            "2024-01-02T15:04:05+00:-9223372036854775808",
            "2024-01-02T15:04:05+-1:00",
            "2024-01-02T15:04:05.Z0",
            "",
            "yesterday",
            "2024-01-02",
            "2024-01-02T15:04:05",
            "2024-01-02T15:04:05+25:00",
        ] {
            assert!(utc(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn times_print_in_utc() {
        assert_eq!(super::seconds(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::seconds(-5), "1970-01-01T00:00:00Z");
        assert_eq!(super::seconds(1_764_586_000), "2025-12-01T10:46:40Z");
        assert_eq!(
            super::nanos_to_millis(1_764_586_000_123_456_789),
            "2025-12-01T10:46:40.123Z"
        );
        assert_eq!(
            super::nanos_to_seconds(1_764_586_000_999_999_999),
            "2025-12-01T10:46:40Z"
        );
        assert!(super::now_millis().ends_with('Z'));
        // A commit may claim any time: far future and the extremes print
        // as the last second RFC 3339 can write, never a panic.
        for far in [253_402_300_800, i64::MAX, 1 << 62] {
            assert_eq!(super::seconds(far), "9999-12-31T23:59:59Z", "{far}");
        }
        assert_eq!(super::seconds(i64::MIN), "1970-01-01T00:00:00Z");
        assert_eq!(super::nanos_to_seconds(i64::MAX), "2262-04-11T23:47:16Z");
        assert_eq!(super::nanos_to_millis(i64::MIN), "1970-01-01T00:00:00.000Z");
    }
}
