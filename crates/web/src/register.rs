//! `/-/register`: a visitor makes their own account, when the server's
//! `--registration` is `open` (closed, the default: a 404, as a route
//! that is not there). The form is bound to a pre-session cookie as the
//! sign-in form is and takes a user name, an email and a password twice;
//! the account is made by `vole_accounts` as `vole user add` makes one
//! (never an admin), and the new user is signed in. At most
//! [`PER_ADDRESS_PER_HOUR`] tries an hour from one address (an IPv6 /64
//! counts as one), counted before the name and email are looked up (so
//! they cannot be probed faster), and [`PER_HOUR`] accounts from all
//! (governor), counted before the password is hashed under one of the
//! sign-in door's hashing slots. A name or an email in use is refused
//! without saying whose it is.

use std::net::IpAddr;
use std::time::SystemTime;

use axum::Form;
use axum::extract::{FromRequest, Request};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, RateLimiter};
use serde::Deserialize;
use vole_accounts::{AccountError, NewUser};
use vole_http::browser::check_origin;

use super::*;
use crate::sign_in::{
    checked_pre_session, end_replaced_session, pre_session_form, see_other, signed_in_cookies,
};

/// Accounts one address may make an hour.
pub const PER_ADDRESS_PER_HOUR: u32 = 5;
/// Accounts all visitors together may make an hour.
pub const PER_HOUR: u32 = 60;

/// The registration limits (see the module doc).
pub struct Registrations {
    per_address: DefaultKeyedRateLimiter<IpAddr>,
    all: DefaultDirectRateLimiter,
}

impl std::fmt::Debug for Registrations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registrations").finish_non_exhaustive()
    }
}

impl Default for Registrations {
    fn default() -> Self {
        Registrations {
            per_address: RateLimiter::keyed(crate::hourly_quota(PER_ADDRESS_PER_HOUR)),
            all: RateLimiter::direct(crate::hourly_quota(PER_HOUR)),
        }
    }
}

impl Registrations {
    /// Counts one try from `client` (its /64 for IPv6); false past the
    /// per-address limit.
    fn admit_address(&self, client: IpAddr) -> bool {
        let key = vole_http::auth::counted_as(client);
        self.per_address.check_key(&key).is_ok()
    }

    /// Counts one account made; false past the overall limit.
    fn admit_account(&self) -> bool {
        self.all.check().is_ok()
    }

    /// Forgets addresses whose counts are full again (the maintenance
    /// task calls it), so the map stays as large as the last hour's.
    pub fn retain_recent(&self) {
        self.per_address.retain_recent();
    }
}

#[derive(Template)]
#[template(path = "register.html")]
struct RegisterPage {
    csrf: String,
    user: String,
    email: String,
    error: Option<String>,
}

fn closed() -> AppError {
    AppError::not_found("This server makes accounts through its administrators.")
}

/// `GET /-/register`.
pub async fn register_page(
    State(app): State<Arc<WebState>>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    if !app.config.auth.registration_open {
        return Err(closed());
    }
    if crate::sign_in::viewer().user.is_some() {
        return Ok(see_other("/", &[]));
    }
    pre_session_form(&app, &headers, |csrf| {
        render(RegisterPage {
            csrf,
            user: String::new(),
            email: String::new(),
            error: None,
        })
    })
}

#[derive(Debug, Deserialize)]
struct RegisterForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    user: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    confirm: String,
}

/// `POST /-/register`: makes the account and signs its user in.
pub async fn register(
    State(app): State<Arc<WebState>>,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, AppError> {
    if !app.config.auth.registration_open {
        return Err(closed());
    }
    check_origin(&headers, app.config.public_url.as_deref())?;
    let client: IpAddr = vole_http::auth::client_address(request.extensions());
    let Form(form) = Form::<RegisterForm>::from_request(request, &())
        .await
        .map_err(|e| AppError::bad_request(format!("the form is not readable: {e}")))?;
    let pre = checked_pre_session(&app, &headers, &form.csrf)?.to_string();
    let again = |status: StatusCode, message: String| -> Result<Response, AppError> {
        let mut response = render(RegisterPage {
            csrf: vole_http::browser::csrf_token(&pre),
            user: form.user.clone(),
            email: form.email.clone(),
            error: Some(message),
        })?;
        *response.status_mut() = status;
        Ok(response)
    };
    if form.password != form.confirm {
        let message = "The password and its confirmation differ.".to_string();
        return again(StatusCode::UNPROCESSABLE_ENTITY, message);
    }
    if let Err(AccountError::Invalid(message)) = vole_accounts::check_password_rules(&form.password)
    {
        return again(StatusCode::UNPROCESSABLE_ENTITY, message);
    }
    let too_many = |message: &str| -> Result<Response, AppError> {
        let mut response = again(StatusCode::TOO_MANY_REQUESTS, message.to_string())?;
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(3600u32));
        Ok(response)
    };
    if !app.form_limits.registrations.admit_address(client) {
        return too_many("Too many accounts were tried from here lately; try again in an hour.");
    }
    // A name that already owns repos (made by an operator under a name
    // no user had), or that an ACL grants a role, would give its
    // registrant those repos: not taken here.
    let wanted = form.user.trim().to_string();
    let owns_repos = app
        .repos
        .list()
        .iter()
        .any(|info| info.name.owner().eq_ignore_ascii_case(&wanted));
    if owns_repos || app.api.meta.acls_name(&wanted)? {
        let message = format!("The name {wanted:?} is taken; choose another.");
        return again(StatusCode::CONFLICT, message);
    }
    // Names and emails in use are refused before the overall count (and
    // again, for good, under the store's lock as the account is made).
    if let Some(refused) = in_use(&app, &wanted, form.email.trim()).await? {
        return again(StatusCode::CONFLICT, refused);
    }
    if !app.form_limits.registrations.admit_account() {
        return too_many("Too many accounts were made lately; try again in an hour.");
    }
    let _slot = app.authn.hashing_slot().await?;
    let accounts = app.accounts.clone();
    let new = NewUser {
        name: form.user.trim().to_string(),
        full_name: String::new(),
        email: form.email.trim().to_string(),
        admin: false,
        password: Some(form.password.clone()),
    };
    let actor = format!("register:{client}");
    let made = vole_http::spawn_blocking(move || {
        let user = accounts.add_user(new, &actor)?;
        let secret = accounts.begin_session(&user.name, SystemTime::now())?;
        Ok::<_, AccountError>(secret)
    })
    .await
    .map_err(|e| AppError::internal("registration task failed", e))?;
    match made {
        Ok(secret) => {
            end_replaced_session(&app, &headers);
            Ok(see_other("/", &signed_in_cookies(&app, secret.expose())))
        }
        Err(AccountError::Invalid(message)) => again(StatusCode::UNPROCESSABLE_ENTITY, message),
        Err(AccountError::Store(e)) => {
            let refused = AppError::from(e);
            if refused.status().is_client_error() {
                again(refused.status(), refused.message().to_string())
            } else {
                Err(refused)
            }
        }
        Err(e) => Err(AppError::internal("cannot make an account", e)),
    }
}

/// Why `name` or `email` cannot be registered, if one is in use (a lookup
/// in the user index; not whose they are).
async fn in_use(app: &WebState, name: &str, email: &str) -> Result<Option<String>, AppError> {
    let accounts = app.accounts.clone();
    let (name, email) = (name.to_string(), email.to_string());
    vole_http::spawn_blocking(move || {
        if accounts.user(&name)?.is_some() {
            return Ok(Some(format!("The name {name:?} is taken; choose another.")));
        }
        if !email.is_empty() && accounts.email_in_use(&email)? {
            return Ok(Some(format!(
                "The email {email:?} is in use by another account."
            )));
        }
        Ok(None)
    })
    .await
    .map_err(|e| AppError::internal("registration task failed", e))?
    .map_err(|e: AccountError| AppError::internal("cannot look a user up", e))
}
