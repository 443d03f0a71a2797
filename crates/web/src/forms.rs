//! What every form of a signed-in person shares: the session's user and
//! CSRF token ([`session_user`]), and a posted form read only once this
//! server's origin and the session's token are checked ([`checked_form`]).
//! A request signed in by a credential of its own (a token in
//! `Authorization`) has no session, and so no forms.

use axum::Form;
use axum::extract::{FromRequest, Request};
use vole_http::browser::{check_origin, same_token};

use super::*;
use crate::sign_in::viewer;

/// The session's user and its CSRF token; none: the visitor is to sign
/// in first.
pub(crate) fn session_user() -> Option<(String, String)> {
    let viewer = viewer();
    match viewer.user {
        Some(user) if !viewer.csrf.is_empty() => Some((user, viewer.csrf)),
        _ => None,
    }
}

/// A form a session's user posted, after the `Origin` and CSRF checks
/// (403 with a message when either fails, before the form is used); none:
/// the visitor is to sign in first. `csrf_of` picks the form's token.
pub(crate) async fn checked_form<T: serde::de::DeserializeOwned>(
    app: &WebState,
    request: Request,
    csrf_of: fn(&T) -> &str,
) -> Result<Option<(String, String, T)>, AppError> {
    check_origin(request.headers(), app.config.public_url.as_deref())?;
    let Some((user, csrf)) = session_user() else {
        return Ok(None);
    };
    let Form(form) = Form::<T>::from_request(request, &())
        .await
        .map_err(|e| AppError::bad_request(format!("the form is not readable: {e}")))?;
    if !same_token(&csrf, csrf_of(&form)) {
        return Err(AppError::new(
            StatusCode::FORBIDDEN,
            "this form was not made for your session; load the page again and send it from there",
        ));
    }
    Ok(Some((user, csrf, form)))
}

/// The client's address as the audit log records it.
pub(crate) fn client_of(request: &Request) -> String {
    vole_http::auth::client_address(request.extensions()).to_string()
}
