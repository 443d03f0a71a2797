//! Errors as pages: the web routes answer with [`AppError`] like every
//! other surface; [`as_page`], a layer on those routes, renders an error
//! response's message as a friendly HTML page with the same status.
//! Internal detail never reaches it (`AppError::internal` logs it).

use super::*;
use vole_http::error::ErrorMessage;

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    title: &'a str,
    message: &'a str,
}

/// Renders an error response of the web routes as a page.
pub async fn as_page(response: Response) -> Response {
    let Some(ErrorMessage(message)) = response.extensions().get::<ErrorMessage>().cloned() else {
        return response;
    };
    let status = response.status();
    let title = match status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::BAD_REQUEST => "Bad request",
        StatusCode::FORBIDDEN => "Forbidden",
        StatusCode::UNAUTHORIZED => "Sign-in needed",
        s if s.is_server_error() => "Server error",
        _ => "Error",
    };
    let page = ErrorPage {
        title,
        message: &message,
    };
    match page.render() {
        Ok(html) => {
            let (mut parts, _) = response.into_parts();
            // The page replaces the body; every other header (Retry-After,
            // say) stays.
            parts.headers.remove(header::CONTENT_LENGTH);
            parts.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            Response::from_parts(parts, axum::body::Body::from(html))
        }
        Err(_) => response,
    }
}
