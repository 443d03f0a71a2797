//! [`PageError`]: a page-shaped error, a friendly page with a status;
//! internal detail goes to the log, never to the browser.

use super::*;

/// A page-shaped error: a friendly page with a status; internal detail
/// goes to the log, never to the browser.
pub struct PageError {
    pub(super) status: StatusCode,
    pub(super) message: String,
}

impl PageError {
    pub(crate) fn not_found(message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    pub(crate) fn internal(context: &str, detail: impl std::fmt::Display) -> PageError {
        tracing::error!(error = %detail, "{context}");
        PageError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: "Something went wrong on our side; the details are in the server log.".into(),
        }
    }
}

#[derive(Template)]
#[template(path = "error.html")]
pub(super) struct ErrorPage<'a> {
    title: &'a str,
    message: &'a str,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let title = match self.status {
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::BAD_REQUEST => "Bad request",
            _ => "Server error",
        };
        let page = ErrorPage {
            title,
            message: &self.message,
        };
        match page.render() {
            Ok(html) => (self.status, Html(html)).into_response(),
            Err(_) => (self.status, self.message).into_response(),
        }
    }
}
