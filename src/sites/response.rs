//! Building a site response from a plan: headers (type, ETag and 304,
//! cache control, nosniff, sandbox), gzip, ranges, and the body from the
//! byte cache or streamed.

use super::*;

pub(super) fn plain_not_found(sandbox: bool) -> Response {
    let mut response = (StatusCode::NOT_FOUND, "not found\n").into_response();
    if sandbox {
        response.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(SANDBOX),
        );
    }
    response
}

pub(super) fn content_type(name: &str) -> (String, bool) {
    let mime = mime_guess::from_path(name).first_or_octet_stream();
    let essence = mime.essence_str().to_string();
    let textual = mime.type_() == mime_guess::mime::TEXT
        || matches!(
            essence.as_str(),
            "application/javascript" | "application/json" | "application/xml" | "image/svg+xml"
        );
    let compressible = textual || essence == "application/wasm";
    let value = if textual {
        format!("{essence}; charset=utf-8")
    } else {
        essence
    };
    (value, compressible)
}

/// A single `bytes=` range against `size`, parsed and checked by
/// http-range-header: `Ok(None)` when absent, malformed (a Range a server
/// does not understand is ignored) or asking for several ranges (served
/// whole: no multipart answers here); `Err(())` when unsatisfiable. Two
/// answers differ from the crate's, after RFC 9110 §14.1: a suffix longer
/// than the file is the whole file, and a reversed range is ignored.
pub(super) fn parse_range(headers: &HeaderMap, size: u64) -> Result<Option<(u64, u64)>, ()> {
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
        return if zero_suffix { Err(()) } else { Ok(None) };
    };
    if parsed.ranges.len() != 1 {
        return Ok(None);
    }
    if size == 0 {
        return Err(());
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
        Err(_) => Err(()),
    }
}

/// `If-None-Match` (parsed by the headers crate, weak comparison) names
/// this entity tag, or is `*`.
pub(super) fn not_modified(request: &HeaderMap, etag: &HeaderValue) -> bool {
    use headers::HeaderMapExt;
    let Some(condition) = request.typed_get::<headers::IfNoneMatch>() else {
        return false;
    };
    etag.to_str()
        .ok()
        .and_then(|tag| tag.parse::<headers::ETag>().ok())
        .is_some_and(|tag| !condition.precondition_passes(&tag))
}

/// The client takes gzip: `Accept-Encoding` names `gzip` (or `*`) with a
/// quality above zero. Written here: the headers crate has no
/// Accept-Encoding type, and tower-http's negotiation is internal to its
/// compression layer.
pub(super) fn accepts_gzip(request: &HeaderMap) -> bool {
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

impl SiteRequest<'_> {
    pub(super) async fn file_response(
        &self,
        app: &Arc<SitesState>,
        repo_path: &Arc<std::path::Path>,
        file: &FileHead,
    ) -> Result<Response, AppError> {
        let mut response = Response::new(Body::empty());
        let headers = response.headers_mut();
        headers.reserve(10);
        headers.insert(header::ETAG, file.etag.clone());
        headers.insert(header::CONTENT_TYPE, file.content_type.clone());
        headers.insert(header::CACHE_CONTROL, app.sites.cache_control.clone());
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        if self.sandbox {
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(SANDBOX),
            );
        }
        if file.compressible {
            headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
        }
        if not_modified(self.headers, &file.etag) && file.status == StatusCode::OK {
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            return Ok(response);
        }
        let size = file.size;
        let range = match parse_range(self.headers, size) {
            Ok(range) if file.status == StatusCode::OK => range,
            Ok(_) => None,
            Err(()) => {
                *response.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
                response.headers_mut().insert(
                    header::CONTENT_RANGE,
                    number_header(format!("bytes */{size}")),
                );
                return Ok(response);
            }
        };
        let (status, length) = match range {
            Some((start, end)) => {
                response.headers_mut().insert(
                    header::CONTENT_RANGE,
                    number_header(format!("bytes {start}-{end}/{size}")),
                );
                (StatusCode::PARTIAL_CONTENT, end - start + 1)
            }
            None => (file.status, size),
        };
        *response.status_mut() = status;

        if size > app.sites.stream_threshold {
            // Too big to cache: stream from a git child, one buffer per client.
            response
                .headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
            if self.method != Method::HEAD {
                let start = range.map_or(0, |(s, _)| s);
                *response.body_mut() = blob::stream(app, repo_path, file.id, start, length).await?;
            }
            return Ok(response);
        }

        let wants_gzip =
            file.compressible && range.is_none() && size >= 256 && accepts_gzip(self.headers);
        let variant = if wants_gzip {
            cache::Variant::Gzip
        } else {
            cache::Variant::Identity
        };
        let store = &app.sites.store;
        let bytes = match store.cached_blob(file.id, variant) {
            Some(bytes) => bytes,
            None => {
                let (store, repo_path, id) = (store.clone(), repo_path.clone(), file.id);
                tokio::task::spawn_blocking(move || {
                    if wants_gzip {
                        store.gzipped(&repo_path, id)
                    } else {
                        store.blob(&repo_path, id)
                    }
                })
                .await
                .map_err(|e| AppError::internal("site read panicked", e))?
                .map_err(|e| {
                    AppError::internal("site read failed", crate::error_chain::Chain(&e))
                })?
            }
        };
        let headers = response.headers_mut();
        if wants_gzip {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        let body = match range {
            Some((start, end)) => bytes.slice(start as usize..=end as usize),
            None => bytes,
        };
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        if self.method != Method::HEAD {
            *response.body_mut() = Body::from(body);
        }
        Ok(response)
    }
}

/// A header value made of digits, spaces, `-`, `/` and `*`: always valid.
pub(super) fn number_header(text: String) -> HeaderValue {
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
        assert_eq!(range("bytes=10-", 10), Err(()));
        assert_eq!(range("bytes=20-30", 10), Err(()));
        assert_eq!(range("bytes=0-0", 0), Err(()));
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
        assert_eq!(range("bytes=18446744073709551615-", 10), Err(()));
        assert_eq!(
            range("bytes=-0", 10),
            Err(()),
            "an empty suffix is unsatisfiable"
        );
        assert_eq!(range("bytes=-5", 0), Err(()), "nothing of an empty file");
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
    fn content_types() {
        assert_eq!(
            content_type("index.html"),
            ("text/html; charset=utf-8".into(), true)
        );
        assert!(content_type("app.js").1);
        assert!(content_type("app.js").0.ends_with("; charset=utf-8"));
        assert_eq!(
            content_type("logo.svg"),
            ("image/svg+xml; charset=utf-8".into(), true)
        );
        assert_eq!(content_type("photo.png"), ("image/png".into(), false));
        assert_eq!(
            content_type("module.wasm"),
            ("application/wasm".into(), true)
        );
        assert_eq!(
            content_type("no-extension"),
            ("application/octet-stream".into(), false)
        );
    }
}
