//! Building a site response from a plan: headers (type, ETag and 304,
//! cache control, nosniff, sandbox), gzip, ranges, and the body from the
//! byte cache or streamed.

use super::*;
use vole_http::conditional::{accepts_gzip, not_modified, number_header, range_for};

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

/// The entity tag of a file's gzip coding: its blob's tag with `-gzip`.
fn gzip_etag(identity: &HeaderValue) -> HeaderValue {
    let text = identity.to_str().unwrap_or("\"\"");
    let inner = text.trim_matches('"');
    HeaderValue::try_from(format!("\"{inner}-gzip\"")).unwrap_or_else(|_| identity.clone())
}

impl SiteRequest<'_> {
    pub(super) async fn file_response(
        &self,
        app: &Arc<SitesState>,
        repo_path: &Arc<std::path::Path>,
        file: &FileHead,
    ) -> Result<Response, AppError> {
        let mut response = Response::new(Body::empty());
        self.representation_headers(app, file, response.headers_mut());
        let size = file.size;
        let wants_gzip = self.wants_gzip(app, file);
        let etag = if wants_gzip {
            gzip_etag(&file.etag)
        } else {
            file.etag.clone()
        };
        response.headers_mut().insert(header::ETAG, etag.clone());
        if not_modified(self.headers, &etag) && file.status == StatusCode::OK {
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            return Ok(response);
        }
        let range = match range_for(self.headers, size, &file.etag) {
            Ok(range) if file.status == StatusCode::OK => range,
            Ok(_) => None,
            Err(vole_http::conditional::Unsatisfiable) => {
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

        let bytes = cached_bytes(app, repo_path, file.id, wants_gzip).await?;
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

    /// The headers every answer for a file carries, whatever its status:
    /// its identity's entity tag and type, who may cache it, nosniff,
    /// ranges, the sandbox, and what the answer varies with.
    fn representation_headers(&self, app: &SitesState, file: &FileHead, headers: &mut HeaderMap) {
        headers.reserve(10);
        headers.insert(header::ETAG, file.etag.clone());
        headers.insert(header::CONTENT_TYPE, file.content_type.clone());
        // What a signed-in visitor reads may be a private repo's: no
        // shared cache (a proxy, a CDN) may keep it for others.
        if self.principal == &Principal::Anonymous {
            headers.insert(header::CACHE_CONTROL, app.sites.cache_control.clone());
        } else {
            headers.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, no-cache"),
            );
        }
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
        // The answer depends on who asks, by credential or session cookie
        // (the site of a private repo is not found to the anonymous).
        headers.insert(
            header::VARY,
            HeaderValue::from_static(if file.compressible {
                "Accept-Encoding, Authorization, Cookie"
            } else {
                "Authorization, Cookie"
            }),
        );
    }

    /// Whether the file is answered in its gzip coding: a compressible
    /// file small enough to be cached, asked for whole by a client that
    /// accepts gzip. The gzip coding is its own representation, with its
    /// own entity tag (RFC 9110 §8.8.3): a validator of one never matches
    /// the other. A range is served of the identity bytes only.
    fn wants_gzip(&self, app: &SitesState, file: &FileHead) -> bool {
        file.compressible
            && file.size >= 256
            && file.size <= app.sites.stream_threshold
            && !self.headers.contains_key(header::RANGE)
            && accepts_gzip(self.headers)
    }
}

/// A small file's bytes in the coding asked for, from the byte cache or
/// read (and gzipped) on a blocking thread into it.
async fn cached_bytes(
    app: &SitesState,
    repo_path: &Arc<std::path::Path>,
    id: gix::ObjectId,
    gzip: bool,
) -> Result<cache::CachedBytes, AppError> {
    let variant = if gzip {
        cache::Variant::Gzip
    } else {
        cache::Variant::Identity
    };
    let store = &app.sites.store;
    if let Some(bytes) = store.cached_blob(id, variant) {
        return Ok(bytes);
    }
    let (store, repo_path) = (store.clone(), repo_path.clone());
    vole_http::spawn_blocking(move || {
        if gzip {
            store.gzipped(&repo_path, id)
        } else {
            store.blob(&repo_path, id)
        }
    })
    .await
    .map_err(|e| AppError::internal("site read panicked", e))?
    .map_err(|e| e.into_app_error("site read failed"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
