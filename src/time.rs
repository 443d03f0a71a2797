//! The one way vole writes a time as text: RFC 3339 in UTC (via
//! humantime), to the second for pages, to the millisecond for logs and
//! documents. Times before 1970 print as the epoch.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds since the epoch (a git commit's time), e.g.
/// `2026-12-01T10:45:38Z`.
pub fn seconds(unix_seconds: i64) -> String {
    let time = UNIX_EPOCH + Duration::from_secs(unix_seconds.max(0) as u64);
    humantime::format_rfc3339_seconds(time).to_string()
}

/// Nanoseconds since the epoch (a log record's time), to the second.
pub fn nanos_to_seconds(unix_nanos: i64) -> String {
    let time = UNIX_EPOCH + Duration::from_nanos(unix_nanos.max(0) as u64);
    humantime::format_rfc3339_seconds(time).to_string()
}

/// Nanoseconds since the epoch, to the millisecond, e.g.
/// `2026-12-01T10:45:38.123Z`.
pub fn nanos_to_millis(unix_nanos: i64) -> String {
    let time = UNIX_EPOCH + Duration::from_nanos(unix_nanos.max(0) as u64);
    humantime::format_rfc3339_millis(time).to_string()
}

/// Now, to the millisecond.
pub fn now_millis() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
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
    }
}
