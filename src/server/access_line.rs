//! The request line, formatted here rather than by tracing's formatter:
//! byte for byte the line `tracing_subscriber::fmt` writes for the same
//! event in the same span (text without colours, or JSON), at a fraction of
//! its cost. A warm site request costs some 13 us of the server's CPU; the
//! generic formatter added about 3 of them for this one line (field visitors,
//! a thread-local buffer, a copy), which put vole behind nginx with both
//! logging every request. The line goes to the same writer thread as every
//! other line, and only when tracing would write it (same target, level and
//! filter); with colours on (a terminal) tracing writes it as before.
//!
//! Why not a crate: the line must match the rest of the log's format,
//! which is tracing-subscriber's; no crate writes that format cheaply.

use std::io::Write;
use std::sync::OnceLock;

use tracing_subscriber::fmt::MakeWriter;

/// Where and how request lines are written, set once at start by the CLI.
pub struct AccessLine {
    pub writer: tracing_appender::non_blocking::NonBlocking,
    pub json: bool,
}

static ACCESS_LINE: OnceLock<AccessLine> = OnceLock::new();

impl AccessLine {
    /// Makes request lines go to `writer` in this format from now on.
    pub fn install(line: AccessLine) {
        let _ = ACCESS_LINE.set(line);
    }

    pub(crate) fn installed() -> Option<&'static AccessLine> {
        ACCESS_LINE.get()
    }
}

/// The fields of one request line.
pub(crate) struct Fields<'a> {
    pub id: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub bytes: u64,
    pub complete: bool,
    pub duration_ms: f64,
}

/// The target the request span and line are logged under, whichever
/// writes the line (what filters name: the request log's module).
pub(crate) const TARGET: &str = "vole::server::request_log";

impl AccessLine {
    /// Writes the line of `fields`, stamped `now`.
    pub(crate) fn write(&self, fields: &Fields<'_>, now: std::time::SystemTime) {
        let mut line = Vec::with_capacity(256);
        format(&mut line, fields, now, self.json);
        let _ = self.writer.make_writer().write_all(&line);
    }
}

/// The line as tracing-subscriber writes it: RFC 3339 with microseconds,
/// then the text or the JSON form.
pub(crate) fn format(out: &mut Vec<u8>, f: &Fields<'_>, now: std::time::SystemTime, json: bool) {
    let stamp = humantime::format_rfc3339_micros(now);
    let _ = if json {
        // The id is a plain token (`request_log::request_id`); the path is
        // escaped as serde_json escapes any string.
        writeln!(
            out,
            "{{\"timestamp\":\"{stamp}\",\"level\":\"INFO\",\"fields\":{{\"message\":\"request\",\
             \"method\":{},\"path\":{},\"status\":{},\"bytes\":{},\"complete\":{},\
             \"duration_ms\":{}}},\"target\":\"{TARGET}\",\"span\":{{\"id\":{},\"name\":\"request\"}}}}",
            json_string(f.method),
            json_string(f.path),
            f.status,
            f.bytes,
            f.complete,
            serde_json::Value::from(f.duration_ms),
            json_string(f.id),
        )
    } else {
        writeln!(
            out,
            "{stamp}  INFO request{{id={:?}}}: {TARGET}: request method={} path={} status={} \
             bytes={} complete={} duration_ms={:?}",
            f.id, f.method, f.path, f.status, f.bytes, f.complete, f.duration_ms,
        )
    };
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer tracing formats into, for the comparison.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What tracing-subscriber writes for the request line with `fields`,
    /// configured as the CLI configures it.
    fn tracing_line(fields: &Fields<'_>, json: bool) -> String {
        let captured = Captured::default();
        let writer = {
            let captured = captured.clone();
            move || captured.clone()
        };
        let builder = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false);
        let dispatch = if json {
            tracing::Dispatch::new(
                builder
                    .json()
                    .with_current_span(true)
                    .with_span_list(false)
                    .finish(),
            )
        } else {
            tracing::Dispatch::new(builder.finish())
        };
        tracing::dispatcher::with_default(&dispatch, || {
            let span = tracing::info_span!(target: TARGET, "request", id = fields.id);
            let _entered = span.enter();
            tracing::info!(
                target: TARGET,
                method = %fields.method,
                path = %fields.path,
                status = fields.status,
                bytes = fields.bytes,
                complete = fields.complete,
                duration_ms = fields.duration_ms,
                "request"
            );
        });
        String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
    }

    /// The line without its timestamp (the two were stamped apart).
    fn unstamped(line: &str) -> String {
        let at = line.find("Z").expect("a timestamp");
        let start = line[..at].rfind(['"', '\n']).map_or(0, |i| i + 1);
        format!("{}{}", &line[..start], &line[at + 1..])
    }

    #[test]
    fn the_line_is_tracings_own_in_both_formats() {
        let cases = [
            Fields {
                id: "01M91WBNHQ6SSVJCB8FGJFY3GH",
                method: "GET",
                path: "/alice/site/-/site/section1/page1.html",
                status: 200,
                bytes: 12_345,
                complete: true,
                duration_ms: 0.373,
            },
            Fields {
                id: "probe-42",
                method: "PROPFIND",
                path: "/a%22b%5Cc/\u{e9}t\u{e9}/\"q\\",
                status: 404,
                bytes: 0,
                complete: false,
                duration_ms: 12.0,
            },
        ];
        for json in [false, true] {
            for fields in &cases {
                let mut ours = Vec::new();
                format(&mut ours, fields, std::time::SystemTime::now(), json);
                let ours = String::from_utf8(ours).unwrap();
                let theirs = tracing_line(fields, json);
                assert!(!theirs.is_empty(), "tracing wrote nothing");
                assert_eq!(
                    unstamped(&ours),
                    unstamped(&theirs),
                    "json={json}: the hand-formatted request line differs from tracing's"
                );
                if json {
                    let parsed: serde_json::Value = serde_json::from_str(&ours).unwrap();
                    assert_eq!(parsed["fields"]["path"], fields.path);
                }
            }
        }
    }
}
