//! Dates on pages: how long ago, in words ("3 days ago"), with the
//! absolute time on hover and in the `<time>` element's `datetime`. What
//! does not live here: writing a time as text (`vole_stdx::time`, RFC 3339 in
//! UTC, which is what the pages are handed).

use std::time::{Duration, SystemTime};

use askama::Template;

/// A date as the pages write it: how long ago, the absolute time on hover.
#[derive(Template)]
#[template(
    source = r#"<time datetime="{{ datetime }}" title="{{ absolute }}">{{ ago }}</time>"#,
    ext = "html"
)]
struct When<'a> {
    datetime: &'a str,
    absolute: String,
    ago: String,
}

/// `<time datetime="ISO" title="YYYY-MM-DD HH:MM:SS UTC">… ago</time>` for
/// an RFC 3339 time, as of `now`; a value that does not parse is written
/// as it is (escaped).
pub fn when_html(rfc3339: &str, now: SystemTime) -> String {
    let Ok(time) = humantime::parse_rfc3339(rfc3339) else {
        return crate::highlight::escape(rfc3339);
    };
    let when = When {
        datetime: rfc3339,
        absolute: rfc3339.replacen('T', " ", 1).replace('Z', " UTC"),
        ago: ago(time, now),
    };
    when.render()
        .unwrap_or_else(|_| crate::highlight::escape(rfc3339))
}

/// How long before `now` `time` was, in the words forges use; a time
/// ahead of `now` by more than a minute (a commit may claim any time) is
/// "in the future".
fn ago(time: SystemTime, now: SystemTime) -> String {
    const MINUTE: u64 = 60;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    let seconds = match now.duration_since(time) {
        Ok(past) => past.as_secs(),
        Err(ahead) if ahead.duration() <= Duration::from_secs(MINUTE) => 0,
        Err(_) => return "in the future".into(),
    };
    let count = |n: u64, unit: &str| {
        if n == 1 {
            format!("1 {unit} ago")
        } else {
            format!("{n} {unit}s ago")
        }
    };
    match seconds {
        s if s < 45 => "just now".into(),
        s if s < 45 * MINUTE => count(s.div_ceil(MINUTE).max(1), "minute"),
        s if s < 22 * HOUR => count(((s + HOUR / 2) / HOUR).max(1), "hour"),
        s if s < 26 * DAY => count(((s + DAY / 2) / DAY).max(1), "day"),
        s if s < 320 * DAY => count(((s + 15 * DAY) / (30 * DAY)).max(1), "month"),
        s => count(((s + 182 * DAY) / (365 * DAY)).max(1), "year"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    fn at(rfc3339: &str) -> SystemTime {
        humantime::parse_rfc3339(rfc3339).unwrap()
    }

    #[test]
    fn a_date_says_how_long_ago_with_the_absolute_time_on_hover() {
        let now = at("2026-12-04T12:00:00Z");
        assert_eq!(
            super::when_html("2026-12-01T10:45:38Z", now),
            r#"<time datetime="2026-12-01T10:45:38Z" title="2026-12-01 10:45:38 UTC">3 days ago</time>"#
        );
        let ago = |d: u64| super::ago(now - Duration::from_secs(d), now);
        assert_eq!(ago(10), "just now");
        assert_eq!(ago(60), "1 minute ago");
        assert_eq!(ago(150), "3 minutes ago");
        assert_eq!(ago(3600), "1 hour ago");
        assert_eq!(ago(5 * 3600), "5 hours ago");
        assert_eq!(ago(86_400), "1 day ago");
        assert_eq!(ago(40 * 86_400), "1 month ago");
        assert_eq!(ago(100 * 86_400), "3 months ago");
        assert_eq!(ago(400 * 86_400), "1 year ago");
        assert_eq!(ago(3 * 365 * 86_400), "3 years ago");
        assert_eq!(
            super::ago(now + Duration::from_secs(30), now),
            "just now",
            "a clock a little ahead is now"
        );
        assert_eq!(
            super::ago(now + Duration::from_secs(86_400), now),
            "in the future"
        );
    }

    #[test]
    fn what_is_not_a_time_is_written_as_it_is_escaped() {
        let now = SystemTime::now();
        assert_eq!(
            super::when_html("<b>soon</b>", now),
            "&lt;b&gt;soon&lt;/b&gt;"
        );
        assert_eq!(super::when_html("", now), "");
    }
}
