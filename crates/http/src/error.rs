//! [`AppError`]: the one error type at the HTTP boundary. It carries what the
//! client can act on (status, a plain-text message, `Retry-After`); the
//! detail of an internal failure goes to the log once, never to the client.
//! git shows a `text/plain` error body to its user as `remote:` lines; the
//! web UI's routes render the same error as an HTML page (the response
//! carries its message as an [`ErrorMessage`] extension for that).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The message of an error response, for layers that render it another
/// way (the web UI's HTML error page).
#[derive(Debug, Clone)]
pub struct ErrorMessage(pub String);

#[derive(Debug, Clone)]
pub struct AppError {
    status: StatusCode,
    message: String,
    retry_after_secs: Option<u64>,
}

/// The challenge every 401 carries, so git prompts (or asks its
/// credential helper) and retries.
pub const CHALLENGE: &str = "Basic realm=\"vole\"";

impl AppError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> AppError {
        AppError {
            status,
            message: message.into(),
            retry_after_secs: None,
        }
    }

    pub fn not_found(message: impl Into<String>) -> AppError {
        AppError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn bad_request(message: impl Into<String>) -> AppError {
        AppError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 503 with `Retry-After`.
    pub fn busy(message: impl Into<String>, retry_after_secs: u64) -> AppError {
        AppError {
            retry_after_secs: Some(retry_after_secs),
            ..AppError::new(StatusCode::SERVICE_UNAVAILABLE, message)
        }
    }

    /// A store that cannot take the request now (its log failed): logged
    /// here with its detail, answered with a 503 and `Retry-After` that
    /// says nothing of the cause.
    pub fn unavailable(context: &str, detail: &(dyn std::error::Error + 'static)) -> AppError {
        tracing::error!(error = %vole_stdx::error_chain::Chain(detail), "{context}");
        AppError::busy(
            "the server cannot take this request right now; retry later, and tell the server's operator if it persists",
            30,
        )
    }

    /// 401 with the `WWW-Authenticate` challenge.
    pub fn unauthenticated(message: impl Into<String>) -> AppError {
        AppError::new(StatusCode::UNAUTHORIZED, message)
    }

    /// 429 with `Retry-After`.
    pub fn too_many(message: impl Into<String>, retry_after_secs: u64) -> AppError {
        AppError {
            retry_after_secs: Some(retry_after_secs.max(1)),
            ..AppError::new(StatusCode::TOO_MANY_REQUESTS, message)
        }
    }

    /// What git and the API answer an access refusal with: a repo a
    /// signed-in principal may not see reads as `missing` (the surface's
    /// own 404 message), one the anonymous may not see as the one 401 of
    /// [`vole_access::HIDDEN`], the others as 401 or 403 with access's
    /// message.
    pub fn denied(denied: vole_access::Denied, missing: impl FnOnce() -> String) -> AppError {
        use vole_access::Denied;
        match denied {
            Denied::Missing => AppError::not_found(missing()),
            Denied::Hidden => AppError::unauthenticated(vole_access::HIDDEN),
            Denied::Unauthenticated(message) => AppError::unauthenticated(message),
            Denied::Forbidden(message) => AppError::new(StatusCode::FORBIDDEN, message),
        }
    }

    /// What the web pages and sites answer a refusal with: a repo the
    /// visitor may not see is the page's plain 404, signed in or not.
    pub fn denied_page(denied: vole_access::Denied, missing: impl FnOnce() -> String) -> AppError {
        match denied {
            vole_access::Denied::Hidden => AppError::not_found(missing()),
            other => AppError::denied(other, missing),
        }
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `Retry-After` it answers with, in seconds.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after_secs
    }

    /// A failure that is ours, not the client's: logged here with its
    /// detail, answered with a bare 500.
    pub fn internal(context: &str, detail: impl std::fmt::Display) -> AppError {
        tracing::error!(error = %detail, "{context}");
        AppError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal server error; the details are in the server log",
        )
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let mut response = (self.status, format!("{}\n", self.message)).into_response();
        response
            .extensions_mut()
            .insert(ErrorMessage(self.message.clone()));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(CHALLENGE),
            );
        }
        response
    }
}

/// What a refused metadata request tells its client: the one mapping of
/// the store's errors to statuses, for every surface that writes metadata.
impl From<vole_meta::MetaError> for AppError {
    fn from(e: vole_meta::MetaError) -> AppError {
        let status = match &e {
            vole_meta::MetaError::NoRepo(_) | vole_meta::MetaError::NotFound(_) => {
                StatusCode::NOT_FOUND
            }
            vole_meta::MetaError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            vole_meta::MetaError::Stale(_) | vole_meta::MetaError::Taken(_) => StatusCode::CONFLICT,
            vole_meta::MetaError::OverQuota(_) => StatusCode::FORBIDDEN,
            vole_meta::MetaError::Loading(message) => {
                return AppError::busy(message.clone(), 1);
            }
            vole_meta::MetaError::Unavailable(_) => {
                return AppError::unavailable("the metadata store refused a request", &e);
            }
        };
        AppError::new(status, e.to_string())
    }
}
