//! `/-/user/settings`: a signed-in person's own account. The profile form
//! sets the display name and the email (no other user's); the password
//! form needs the current password, checked through the sign-in door (its
//! throttle and audit), and a changed password ends every session of the
//! user, this browser's being replaced by a fresh one. A save that
//! changes nothing writes nothing; a new email is tried at most
//! [`EMAIL_CHANGES_PER_HOUR`] times an hour per user, since the refusal
//! of one in use tells that some account has it.

use std::time::SystemTime;

use axum::extract::Request;
use serde::Deserialize;
use vole_accounts::AccountError;

use super::*;
use crate::forms::{checked_form, session_user};
use crate::sign_in::{see_other, to_sign_in};

const PATH: &str = "/-/user/settings";

/// New emails one user may try an hour (each tells whether another
/// account has it).
pub const EMAIL_CHANGES_PER_HOUR: u32 = 5;

/// How many new emails each user tried lately.
pub struct EmailChanges {
    per_user: governor::DefaultKeyedRateLimiter<String>,
}

impl std::fmt::Debug for EmailChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailChanges").finish_non_exhaustive()
    }
}

impl Default for EmailChanges {
    fn default() -> Self {
        EmailChanges {
            per_user: governor::RateLimiter::keyed(crate::hourly_quota(EMAIL_CHANGES_PER_HOUR)),
        }
    }
}

impl EmailChanges {
    /// Counts one new email tried by `user`; false past the limit.
    fn admit(&self, user: &str) -> bool {
        self.per_user.check_key(&user.to_ascii_lowercase()).is_ok()
    }

    /// Forgets users whose counts are full again (the maintenance task
    /// calls it).
    pub fn retain_recent(&self) {
        self.per_user.retain_recent();
    }
}

#[derive(Template)]
#[template(path = "account.html")]
struct AccountPage {
    csrf: String,
    user: String,
    full_name: String,
    email: String,
    saved: Option<&'static str>,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Saved {
    saved: Option<String>,
}

async fn page(
    app: &WebState,
    user: String,
    csrf: String,
    saved: Option<&'static str>,
    error: Option<(StatusCode, String)>,
) -> Result<Response, AppError> {
    let accounts = app.accounts.clone();
    let name = user.clone();
    let found = vole_http::spawn_blocking(move || accounts.user(&name))
        .await
        .map_err(|e| AppError::internal("user lookup task failed", e))?
        .map_err(|e| AppError::internal("cannot look a user up", e))?
        .ok_or_else(|| AppError::not_found("Your account no longer exists."))?;
    let status = error.as_ref().map_or(StatusCode::OK, |(status, _)| *status);
    let mut response = render(AccountPage {
        csrf,
        user,
        full_name: found.full_name,
        email: found.email,
        saved,
        error: error.map(|(_, message)| message),
    })?;
    *response.status_mut() = status;
    Ok(response)
}

/// What a refused account change tells the person, on the page again.
fn refusal(e: AccountError) -> Result<(StatusCode, String), AppError> {
    match e {
        AccountError::Invalid(message) => Ok((StatusCode::UNPROCESSABLE_ENTITY, message)),
        AccountError::Store(e) => {
            let refused = AppError::from(e);
            Ok((refused.status(), refused.message().to_string()))
        }
        e => Err(AppError::internal("cannot change an account", e)),
    }
}

/// `GET /-/user/settings`.
pub async fn account_page(
    State(app): State<Arc<WebState>>,
    Query(saved): Query<Saved>,
) -> Result<Response, AppError> {
    let Some((user, csrf)) = session_user() else {
        return Ok(to_sign_in(PATH));
    };
    let saved = match saved.saved.as_deref() {
        Some("profile") => Some("Your profile is saved."),
        Some("password") => Some("Your password is changed; your other sessions are signed out."),
        _ => None,
    };
    page(&app, user, csrf, saved, None).await
}

#[derive(Debug, Deserialize)]
struct ProfileForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    full_name: String,
    #[serde(default)]
    email: String,
}

/// `POST /-/user/settings`: the display name and email.
pub async fn save_profile(
    State(app): State<Arc<WebState>>,
    request: Request,
) -> Result<Response, AppError> {
    let Some((user, csrf, form)) = checked_form::<ProfileForm>(&app, request, |f| &f.csrf).await?
    else {
        return Ok(to_sign_in(PATH));
    };
    let current = app
        .accounts
        .user(&user)
        .map_err(|e| AppError::internal("cannot look a user up", e))?
        .ok_or_else(|| AppError::not_found("Your account no longer exists."))?;
    let email = form.email.trim();
    if form.full_name.trim() == current.full_name && email == current.email {
        return Ok(see_other(&format!("{PATH}?saved=profile"), &[]));
    }
    if !email.eq_ignore_ascii_case(&current.email) && !app.form_limits.email_changes.admit(&user) {
        let error = (
            StatusCode::TOO_MANY_REQUESTS,
            "You tried several new emails lately; try again in an hour.".to_string(),
        );
        return page(&app, user, csrf, None, Some(error)).await;
    }
    app.api.quotas.meta_write_by(&user)?;
    let accounts = app.accounts.clone();
    let name = user.clone();
    let saved = vole_http::spawn_blocking(move || {
        accounts.set_profile(&name, &form.full_name, form.email.trim(), &name)
    })
    .await
    .map_err(|e| AppError::internal("account task failed", e))?;
    match saved {
        Ok(_) => Ok(see_other(&format!("{PATH}?saved=profile"), &[])),
        Err(e) => page(&app, user, csrf, None, Some(refusal(e)?)).await,
    }
}

#[derive(Debug, Deserialize)]
struct PasswordForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    current: String,
    #[serde(default)]
    new: String,
    #[serde(default)]
    confirm: String,
}

/// `POST /-/user/password`: the current password, then the new one twice.
pub async fn change_password(
    State(app): State<Arc<WebState>>,
    request: Request,
) -> Result<Response, AppError> {
    let client = vole_http::auth::client_address(request.extensions());
    let Some((user, csrf, form)) = checked_form::<PasswordForm>(&app, request, |f| &f.csrf).await?
    else {
        return Ok(to_sign_in(PATH));
    };
    if form.new != form.confirm {
        let error = (
            StatusCode::UNPROCESSABLE_ENTITY,
            "The new password and its confirmation differ.".to_string(),
        );
        return page(&app, user, csrf, None, Some(error)).await;
    }
    if let Err(e) = vole_accounts::check_password_rules(&form.new) {
        return page(&app, user, csrf, None, Some(refusal(e)?)).await;
    }
    // The current password through the sign-in door: a stolen session
    // cannot guess it faster than a sign-in form could.
    if let Err(refused) = app
        .authn
        .verify_password(&user, &form.current, client)
        .await
    {
        if refused.status() != StatusCode::UNAUTHORIZED {
            return Err(refused);
        }
        let error = (
            StatusCode::FORBIDDEN,
            "The current password is wrong.".to_string(),
        );
        return page(&app, user, csrf, None, Some(error)).await;
    }
    app.api.quotas.meta_write_by(&user)?;
    // The new password's argon2 run takes a hashing slot as a check does.
    let _slot = app.authn.hashing_slot().await?;
    let accounts = app.accounts.clone();
    let name = user.clone();
    let changed = vole_http::spawn_blocking(move || {
        accounts.change_password(&name, &form.new, SystemTime::now())
    })
    .await
    .map_err(|e| AppError::internal("account task failed", e))?;
    match changed {
        Ok(secret) => {
            let [session, _] = crate::sign_in::signed_in_cookies(&app, secret.expose());
            Ok(see_other(&format!("{PATH}?saved=password"), &[session]))
        }
        Err(e) => page(&app, user, csrf, None, Some(refusal(e)?)).await,
    }
}
