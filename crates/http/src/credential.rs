//! A credential as a request's `Authorization` header gives it, in each
//! form Gitea's clients send: HTTP Basic (a user name and a token or
//! password, or a token as the user name), `Bearer <token>` and `token
//! <token>`, the scheme in any case. [`crate::auth`] checks it.

use headers::HeaderMapExt;
use headers::authorization::{Authorization, Basic};
use vole_accounts::Presented;

use crate::AppError;

/// A credential as the `Authorization` header gave it.
pub(crate) struct Credential {
    /// The user name of HTTP Basic (empty for Bearer).
    pub(crate) user: String,
    pub(crate) secret: String,
    pub(crate) bearer: bool,
}

impl Credential {
    /// The header's credential; `None`: no header (anonymous). Schemes
    /// as Gitea's clients send them, their names in any case: `Basic`
    /// (a user name and a token or password, or a token as the user name
    /// with no password), `Bearer <token>` and `token <token>`.
    pub(crate) fn read(headers: &axum::http::HeaderMap) -> Result<Option<Credential>, AppError> {
        let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
            return Ok(None);
        };
        let refused = || {
            AppError::bad_request(
                "the Authorization header must be Basic (your user name and a token), Bearer <token> or token <token>",
            )
        };
        let text = value.to_str().map_err(|_| refused())?.trim();
        let (scheme, rest) = text.split_once(' ').ok_or_else(refused)?;
        let rest = rest.trim();
        if scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token") {
            if rest.is_empty() || rest.contains(' ') {
                return Err(refused());
            }
            return Ok(Some(Credential {
                user: String::new(),
                secret: rest.to_string(),
                bearer: true,
            }));
        }
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(refused());
        }
        // The scheme as the headers crate reads it.
        let mut normal = axum::http::HeaderMap::new();
        let value =
            axum::http::HeaderValue::from_str(&format!("Basic {rest}")).map_err(|_| refused())?;
        normal.insert(axum::http::header::AUTHORIZATION, value);
        let basic = normal
            .typed_try_get::<Authorization<Basic>>()
            .ok()
            .flatten()
            .ok_or_else(refused)?;
        if basic.password().is_empty() && !basic.username().is_empty() {
            // The token as the user name, as Gitea takes it.
            return Ok(Some(Credential {
                user: String::new(),
                secret: basic.username().to_string(),
                bearer: true,
            }));
        }
        Ok(Some(Credential {
            user: basic.username().to_string(),
            secret: basic.password().to_string(),
            bearer: false,
        }))
    }

    pub(crate) fn presented(&self) -> Presented<'_> {
        if self.bearer {
            Presented::Bearer(&self.secret)
        } else {
            Presented::Basic {
                user: &self.user,
                secret: &self.secret,
            }
        }
    }
}
