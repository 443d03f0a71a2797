//! `/-/user/tokens`: a signed-in person's tokens. The page lists them
//! (name, scope, repos, created, last used; never a secret), makes one (its text shown
//! on the answer to the form, once, and never again), and revokes one of
//! the person's own. Every form needs the session's CSRF token and this
//! server's origin; a visitor without a session is sent to sign in.

use axum::extract::Request;
use serde::Deserialize;
use vole_accounts::{AccountError, NewTokenRequest};
use vole_meta::entity::Scope;

use super::*;
use crate::forms::{checked_form, session_user};
use crate::sign_in::{see_other, to_sign_in};

/// Revoked tokens the page lists, the latest first; live ones are all listed.
pub const REVOKED_SHOWN: usize = 20;

const PATH: &str = "/-/user/tokens";

struct TokenRow {
    name: String,
    scope: String,
    repos: Vec<String>,
    /// `<time>` HTML ([`crate::dates::when_html`]).
    created: String,
    /// `<time>` HTML, or none when it has not been used.
    last_used: Option<String>,
    revoked: bool,
}

struct Made {
    name: String,
    text: String,
}

#[derive(Template)]
#[template(path = "tokens.html")]
struct TokensPage {
    csrf: String,
    tokens: Vec<TokenRow>,
    /// Revoked tokens not listed, older than those that are.
    older_revoked: usize,
    made: Option<Made>,
    error: Option<String>,
}

async fn page(
    app: &WebState,
    user: String,
    csrf: String,
    made: Option<Made>,
    error: Option<(StatusCode, String)>,
) -> Result<Response, AppError> {
    let accounts = app.accounts.clone();
    let listed = vole_http::spawn_blocking(move || accounts.tokens(Some(&user)))
        .await
        .map_err(|e| AppError::internal("token list task failed", e))?
        .map_err(|e| AppError::internal("cannot list tokens", e))?;
    let now = std::time::SystemTime::now();
    // Every live token (at most MAX_LIVE_TOKENS_PER_USER), the latest
    // revoked ones: the page stays short however many were revoked.
    let (live, mut revoked): (Vec<_>, Vec<_>) = listed.into_iter().partition(|t| !t.revoked);
    revoked.sort_by(|a, b| b.revoked_at.cmp(&a.revoked_at));
    let older_revoked = revoked.len().saturating_sub(REVOKED_SHOWN);
    revoked.truncate(REVOKED_SHOWN);
    let tokens = live
        .into_iter()
        .chain(revoked)
        .map(|token| TokenRow {
            name: token.name,
            scope: format!("{:?}", token.scope).to_lowercase(),
            repos: token.repos,
            created: crate::dates::when_html(&token.created_at, now),
            last_used: token
                .last_used_at
                .map(|at| crate::dates::when_html(&at, now)),
            revoked: token.revoked,
        })
        .collect();
    let status = error.as_ref().map_or(StatusCode::OK, |(status, _)| *status);
    let mut response = render(TokensPage {
        csrf,
        tokens,
        older_revoked,
        made,
        error: error.map(|(_, message)| message),
    })?;
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `GET /-/user/tokens`.
pub async fn tokens_page(State(app): State<Arc<WebState>>) -> Result<Response, AppError> {
    let Some((user, csrf)) = session_user() else {
        return Ok(to_sign_in(PATH));
    };
    page(&app, user, csrf, None, None).await
}

#[derive(Debug, Deserialize)]
struct CreateForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    scope: String,
    #[serde(default)]
    repos: String,
}

#[derive(Debug, Deserialize)]
struct RevokeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
}

/// `POST /-/user/tokens`: makes a token and shows its text, once.
pub async fn create_token(
    State(app): State<Arc<WebState>>,
    request: Request,
) -> Result<Response, AppError> {
    let checked = checked_form::<CreateForm>(&app, request, |f| &f.csrf).await?;
    let Some((user, csrf, form)) = checked else {
        return Ok(to_sign_in(PATH));
    };
    let scope = match form.scope.as_str() {
        "read" => Scope::Read,
        "write" => Scope::Write,
        "admin" => Scope::Admin,
        other => {
            return Err(AppError::bad_request(format!(
                "scope {other:?} is not one of read, write, admin"
            )));
        }
    };
    app.api.quotas.meta_write_by(&user)?;
    let request = NewTokenRequest {
        name: form.name.trim().to_string(),
        user: user.clone(),
        scope,
        repos: form.repos.split_whitespace().map(str::to_string).collect(),
        expires_in: None,
    };
    let accounts = app.accounts.clone();
    let actor = user.clone();
    let made = vole_http::spawn_blocking(move || accounts.create_token(request, &actor))
        .await
        .map_err(|e| AppError::internal("token task failed", e))?;
    match made {
        Ok((view, text)) => {
            let made = Made {
                name: view.name,
                text,
            };
            page(&app, user, csrf, Some(made), None).await
        }
        Err(AccountError::Invalid(message)) => {
            let error = (StatusCode::UNPROCESSABLE_ENTITY, message);
            page(&app, user, csrf, None, Some(error)).await
        }
        Err(AccountError::Store(e)) => {
            let refused = AppError::from(e);
            let error = (refused.status(), refused.message().to_string());
            page(&app, user, csrf, None, Some(error)).await
        }
        Err(e) => Err(AppError::internal("cannot make a token", e)),
    }
}

/// `POST /-/user/tokens/revoke`: revokes one of the person's own tokens.
pub async fn revoke_token(
    State(app): State<Arc<WebState>>,
    request: Request,
) -> Result<Response, AppError> {
    let checked = checked_form::<RevokeForm>(&app, request, |f| &f.csrf).await?;
    let Some((user, _, form)) = checked else {
        return Ok(to_sign_in(PATH));
    };
    app.api.quotas.meta_write_by(&user)?;
    let accounts = app.accounts.clone();
    let revoked = vole_http::spawn_blocking(move || {
        let own = accounts.tokens(Some(&user))?;
        if !own.iter().any(|token| token.name == form.name) {
            return Ok(false);
        }
        accounts.revoke_token(&form.name, &user).map(|_| true)
    })
    .await
    .map_err(|e| AppError::internal("token task failed", e))?
    .map_err(|e: AccountError| AppError::internal("cannot revoke a token", e))?;
    if !revoked {
        return Err(AppError::not_found("You have no token of that name."));
    }
    Ok(see_other(PATH, &[]))
}
