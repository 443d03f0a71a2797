//! HTTP semantics of the file responses (sites and the web UI's raw
//! files): byte ranges (http-range-header) and `If-Range`, conditional
//! requests (`If-None-Match`, `If-Range` through the headers crate), and
//! whether the client takes gzip. Git trees carry no modification times,
//! so vole sends no `Last-Modified`; a blob's id is its entity tag.

use axum::http::{HeaderMap, HeaderValue, header};
use headers::HeaderMapExt;

/// A `Range` no part of the file satisfies: a 416.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsatisfiable;

/// A single `bytes=` range against `size`, parsed and checked by
/// http-range-header: `Ok(None)` when absent, malformed (a Range a server
/// does not understand is ignored) or asking for several ranges (served
/// whole: no multipart answers here); `Err(Unsatisfiable)` when unsatisfiable. Two
/// answers differ from the crate's, after RFC 9110 §14.1: a suffix longer
/// than the file is the whole file, and a reversed range is ignored.
pub fn parse_range(headers: &HeaderMap, size: u64) -> Result<Option<(u64, u64)>, Unsatisfiable> {
    let Some(value) = headers.get(header::RANGE).and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    let Ok(parsed) = http_range_header::parse_range_header(value) else {
        // The crate refuses a zero-length suffix as malformed; RFC 9110
        // §14.1.2 calls it a valid range no representation satisfies.
        let zero_suffix = value
            .trim()
            .strip_prefix("bytes=")
            .and_then(|r| r.trim().strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b == b'0'));
        return if zero_suffix {
            Err(Unsatisfiable)
        } else {
            Ok(None)
        };
    };
    if parsed.ranges.len() != 1 {
        return Ok(None);
    }
    if size == 0 {
        return Err(Unsatisfiable);
    }
    match parsed.validate(size) {
        Ok(ranges) => Ok(ranges.first().map(|r| (*r.start(), *r.end()))),
        Err(http_range_header::RangeUnsatisfiableError::FileSuffixOutOfBounds) => {
            Ok(Some((0, size - 1)))
        }
        // A last position before the first makes the range syntactically
        // invalid, and the header is ignored (RFC 9110 §14.1.1) -- unless
        // the first is past the end, which no range can satisfy.
        Err(http_range_header::RangeUnsatisfiableError::RangeReversed)
            if parsed.ranges.first().is_some_and(
                |r| matches!(r.start, http_range_header::StartPosition::Index(i) if i < size),
            ) =>
        {
            Ok(None)
        }
        Err(_) => Err(Unsatisfiable),
    }
}

/// `If-None-Match` (parsed by the headers crate, weak comparison) names
/// this entity tag, or is `*`.
pub fn not_modified(request: &HeaderMap, etag: &HeaderValue) -> bool {
    use headers::HeaderMapExt;
    if !tags_parse_safely(request, header::IF_NONE_MATCH) {
        return false;
    }
    let Some(condition) = request.typed_get::<headers::IfNoneMatch>() else {
        return false;
    };
    etag.to_str()
        .ok()
        .and_then(|tag| tag.parse::<headers::ETag>().ok())
        .is_some_and(|tag| !condition.precondition_passes(&tag))
}

/// The headers crate (0.4) asserts (a panic in debug builds) on an entity
/// tag holding a space or a tab, which a header value may carry (found by
/// `tests/fuzz`, target `ranges`); no valid entity tag holds one (RFC 9110
/// `etagc`), so such a header is taken as malformed.
fn tags_parse_safely(request: &HeaderMap, name: header::HeaderName) -> bool {
    request.get_all(name).iter().all(|value| {
        let mut quoted = false;
        value.as_bytes().iter().all(|&b| {
            if b == b'"' {
                quoted = !quoted;
            }
            !quoted || b > b' '
        })
    })
}

/// The range to serve against `size`, after `If-Range` (RFC 9110
/// §13.1.5): a range is honoured only when `If-Range` is absent or names
/// this entity tag by strong comparison (a weak tag, a date -- vole sends
/// no `Last-Modified` -- or another tag means the client's copy is not
/// this one: the whole file is sent).
pub fn range_for(
    request: &HeaderMap,
    size: u64,
    etag: &HeaderValue,
) -> Result<Option<(u64, u64)>, Unsatisfiable> {
    if !tags_parse_safely(request, header::IF_RANGE) {
        // Not a condition anyone could have meant: the whole file.
        return Ok(None);
    }
    if let Some(condition) = request.typed_get::<headers::IfRange>() {
        let current = etag
            .to_str()
            .ok()
            .and_then(|t| t.parse::<headers::ETag>().ok());
        if condition.is_modified(current.as_ref(), None) {
            return Ok(None);
        }
    }
    parse_range(request, size)
}

/// The client takes gzip: `Accept-Encoding` names `gzip` (or `*`) with a
/// quality above zero. Written here: the headers crate has no
/// Accept-Encoding type, and tower-http's negotiation is internal to its
/// compression layer.
pub fn accepts_gzip(request: &HeaderMap) -> bool {
    let Some(value) = request
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let mut gzip = None;
    let mut any = None;
    for item in value.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let quality = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or(p.trim().strip_prefix("Q=")))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        match coding.as_str() {
            "gzip" | "x-gzip" => gzip = Some(quality),
            "*" => any = Some(quality),
            _ => {}
        }
    }
    gzip.or(any).is_some_and(|q| q > 0.0)
}

/// A header value made of digits, spaces, `-`, `/` and `*`: always valid.
pub fn number_header(text: String) -> HeaderValue {
    HeaderValue::try_from(text).expect("digits and punctuation make a valid header")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn ranges() {
        let range = |v: &str, size| parse_range(&with(header::RANGE, v), size);
        assert_eq!(parse_range(&HeaderMap::new(), 10), Ok(None));
        assert_eq!(range("bytes=0-3", 10), Ok(Some((0, 3))));
        assert_eq!(range("bytes=5-", 10), Ok(Some((5, 9))));
        assert_eq!(range("bytes=8-100", 10), Ok(Some((8, 9))));
        assert_eq!(range("bytes=-3", 10), Ok(Some((7, 9))));
        assert_eq!(
            range("bytes=-30", 10),
            Ok(Some((0, 9))),
            "a long suffix is the whole file"
        );
        assert_eq!(range("bytes=10-", 10), Err(Unsatisfiable));
        assert_eq!(range("bytes=20-30", 10), Err(Unsatisfiable));
        assert_eq!(range("bytes=0-0", 0), Err(Unsatisfiable));
        assert_eq!(
            range("bytes=0-1,4-5", 10),
            Ok(None),
            "several ranges: served whole"
        );
        for ignored in ["bytes=a-b", "items=0-1", "bytes=", "bytes=5-2x", "0-1"] {
            assert_eq!(range(ignored, 10), Ok(None), "{ignored}");
        }
        assert_eq!(
            range("bytes=5-2", 10),
            Ok(None),
            "a reversed range is ignored"
        );
        assert_eq!(range("bytes=0-18446744073709551615", 10), Ok(Some((0, 9))));
        assert_eq!(range("bytes=18446744073709551615-", 10), Err(Unsatisfiable));
        assert_eq!(
            range("bytes=-0", 10),
            Err(Unsatisfiable),
            "an empty suffix is unsatisfiable"
        );
        assert_eq!(
            range("bytes=-5", 0),
            Err(Unsatisfiable),
            "nothing of an empty file"
        );
        assert_eq!(
            range("bytes=99999999999999999999-", 10),
            Ok(None),
            "not a number: ignored"
        );
    }

    #[test]
    fn conditional_requests() {
        let etag = HeaderValue::from_static("\"abc\"");
        let asks = |v: &str| not_modified(&with(header::IF_NONE_MATCH, v), &etag);
        assert!(asks("\"abc\""));
        assert!(asks("\"x\", \"abc\""));
        assert!(asks("W/\"abc\""), "If-None-Match compares weakly");
        assert!(asks("*"));
        assert!(!asks("\"abd\""));
        assert!(!asks("abc"), "an unquoted tag is not a tag");
        assert!(!not_modified(&HeaderMap::new(), &etag));
    }

    #[test]
    fn gzip_negotiation() {
        let takes = |v: &str| accepts_gzip(&with(header::ACCEPT_ENCODING, v));
        assert!(takes("gzip"));
        assert!(takes("br, gzip;q=0.5"));
        assert!(takes("*"));
        assert!(takes("GZIP"));
        assert!(!takes("gzip;q=0"));
        assert!(!takes("br, gzip;q=0.0"));
        assert!(!takes("*;q=0"));
        assert!(!takes("identity"));
        assert!(!takes("br, *;q=0, gzip;q=0"));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn if_range_keeps_a_range_only_for_the_same_strong_tag() {
        let etag = HeaderValue::from_static("\"abc\"");
        let ask = |if_range: &str| {
            let mut headers = with(header::RANGE, "bytes=0-1");
            headers.insert(header::IF_RANGE, HeaderValue::from_str(if_range).unwrap());
            range_for(&headers, 10, &etag)
        };
        assert_eq!(ask("\"abc\""), Ok(Some((0, 1))));
        assert_eq!(ask("\"old\""), Ok(None), "another version: the whole file");
        assert_eq!(ask("W/\"abc\""), Ok(None), "a weak tag never matches");
        assert_eq!(
            ask("Tue, 01 Dec 2026 10:00:00 GMT"),
            Ok(None),
            "no dates here"
        );
        assert_eq!(
            range_for(&with(header::RANGE, "bytes=0-1"), 10, &etag),
            Ok(Some((0, 1)))
        );
    }
}
