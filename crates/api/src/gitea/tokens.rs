//! A user's tokens at Gitea's paths: `GET/POST /users/{name}/tokens`,
//! `DELETE /users/{name}/tokens/{token}` (its id or name). As Gitea's,
//! they take the user's password with HTTP Basic whatever
//! `--password-auth` says (the authentication middleware checks it,
//! throttled as a sign-in is); a token cannot list, make or revoke
//! tokens. Gitea's scopes map onto vole's three, never granting more
//! than asked: any of `all`, `sudo` or `write:admin` is admin,
//! `write:repository` write (vole's write covers pushes, issues and pull
//! requests alike), the rest (none given, `write:issue` alone included)
//! read.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::ApiState;
use crate::meta::body;
use vole_access::Principal;
use vole_accounts::{AccountError, NewTokenRequest, TokenView};
use vole_http::AppError;
use vole_meta::entity::Scope;

/// Gitea's `AccessToken`.
#[derive(Debug, Serialize)]
pub struct AccessToken {
    pub id: u64,
    pub name: String,
    /// The token's text: only in the answer that made it.
    pub sha1: String,
    pub token_last_eight: String,
    pub scopes: Vec<String>,
}

impl AccessToken {
    fn of(view: &TokenView, text: Option<&str>) -> AccessToken {
        let scopes = match view.scope {
            Scope::Read => vec!["read:repository", "read:issue", "read:user"],
            Scope::Write => vec!["write:repository", "write:issue", "read:user"],
            Scope::Admin => vec!["all"],
        };
        AccessToken {
            id: view.serial,
            name: view.name.clone(),
            sha1: text.unwrap_or_default().to_string(),
            token_last_eight: text
                .map(|t| t[t.len().saturating_sub(8)..].to_string())
                .unwrap_or_default(),
            scopes: scopes.into_iter().map(str::to_string).collect(),
        }
    }
}

/// Gitea's scopes as vole's scope (see the module doc).
pub fn scope_of(scopes: &[String]) -> Scope {
    let lower: Vec<String> = scopes
        .iter()
        .map(|s| s.trim().to_ascii_lowercase())
        .collect();
    if lower
        .iter()
        .any(|s| s == "all" || s == "sudo" || s == "write:admin")
    {
        Scope::Admin
    } else if lower.iter().any(|s| s == "write:repository") {
        Scope::Write
    } else {
        Scope::Read
    }
}

/// The user `name`, signed in with their password (not a token).
fn password_user(principal: &Principal, name: &str) -> Result<String, AppError> {
    let Some(identity) = principal.identity() else {
        return Err(AppError::unauthenticated(
            "tokens are listed, made and revoked with your user name and password (HTTP Basic)",
        ));
    };
    if identity.token.is_some() {
        return Err(AppError::new(
            StatusCode::FORBIDDEN,
            "a token cannot list, make or revoke tokens: use your user name and password (HTTP Basic)",
        ));
    }
    if !identity.user.eq_ignore_ascii_case(name) {
        return Err(AppError::new(
            StatusCode::FORBIDDEN,
            format!("{} may not see or change {name}'s tokens", identity.user),
        ));
    }
    Ok(identity.user.clone())
}

fn account_error(e: AccountError) -> AppError {
    match e {
        AccountError::Invalid(message) => AppError::new(StatusCode::UNPROCESSABLE_ENTITY, message),
        AccountError::Store(e) => e.into(),
        e => AppError::internal("the token could not be made or revoked", e),
    }
}

/// `GET /users/{name}/tokens`: the user's live tokens.
pub async fn list(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Response, AppError> {
    let user = password_user(&principal, &name)?;
    let accounts = app.control.accounts.clone();
    let views = vole_http::spawn_blocking(move || accounts.tokens(Some(&user)))
        .await
        .map_err(|e| AppError::internal("token task failed", e))?
        .map_err(account_error)?;
    let shown: Vec<AccessToken> = views
        .iter()
        .filter(|v| !v.revoked)
        .map(|v| AccessToken::of(v, None))
        .collect();
    Ok(Json(shown).into_response())
}

/// Gitea's `CreateAccessTokenOption`.
#[derive(Debug, Deserialize)]
pub struct CreateAccessTokenOption {
    pub name: String,
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
}

/// `POST /users/{name}/tokens`: 201 with the token, its text in `sha1`
/// (shown this once).
pub async fn create(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    payload: Result<Json<CreateAccessTokenOption>, JsonRejection>,
) -> Result<Response, AppError> {
    let user = password_user(&principal, &name)?;
    let option = body(payload)?;
    app.quotas.meta_write(&principal)?;
    let request = NewTokenRequest {
        name: option.name.trim().to_string(),
        user: user.clone(),
        scope: scope_of(&option.scopes.unwrap_or_default()),
        repos: Vec::new(),
        expires_in: None,
    };
    let accounts = app.control.accounts.clone();
    let (view, text) = vole_http::spawn_blocking(move || accounts.create_token(request, &user))
        .await
        .map_err(|e| AppError::internal("token task failed", e))?
        .map_err(account_error)?;
    Ok((
        StatusCode::CREATED,
        Json(AccessToken::of(&view, Some(&text))),
    )
        .into_response())
}

/// `DELETE /users/{name}/tokens/{token}` (its numeric id or its name):
/// 204, the token refused from the next request on.
pub async fn delete(
    State(app): State<Arc<ApiState>>,
    Extension(principal): Extension<Principal>,
    Path((name, token)): Path<(String, String)>,
) -> Result<Response, AppError> {
    let user = password_user(&principal, &name)?;
    app.quotas.meta_write(&principal)?;
    let accounts = app.control.accounts.clone();
    vole_http::spawn_blocking(move || -> Result<(), AppError> {
        let views = accounts.tokens(Some(&user)).map_err(account_error)?;
        let found = views
            .iter()
            // A number is an id, as Gitea takes it; anything else a name.
            .find(|v| {
                !v.revoked
                    && match token.parse::<u64>() {
                        Ok(id) => v.serial == id,
                        Err(_) => v.name == token,
                    }
            })
            .ok_or_else(|| AppError::not_found(format!("{user} has no live token {token:?}")))?;
        accounts
            .revoke_token(&found.name, &user)
            .map(drop)
            .map_err(account_error)
    })
    .await
    .map_err(|e| AppError::internal("token task failed", e))??;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn giteas_scopes_map_onto_read_write_and_admin() {
        let of = |s: &[&str]| scope_of(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(of(&[]), Scope::Read);
        assert_eq!(of(&["read:repository", "read:user"]), Scope::Read);
        assert_eq!(of(&["write:issue"]), Scope::Read);
        assert_eq!(of(&["write:user", "write:notification"]), Scope::Read);
        assert_eq!(of(&["read:user", "write:repository"]), Scope::Write);
        assert_eq!(of(&["all"]), Scope::Admin);
        assert_eq!(of(&["Write:Admin"]), Scope::Admin);
    }
}
