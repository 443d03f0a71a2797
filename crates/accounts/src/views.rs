//! Users and tokens as they are listed: never a password hash, a token's
//! secret or its hash.

use serde::Serialize;

use vole_meta::entity::{Scope, Token, User};

/// A user as listed (never the password hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserView {
    pub name: String,
    /// The display name; empty: none given.
    pub full_name: String,
    pub email: String,
    pub admin: bool,
    pub disabled: bool,
    pub has_password: bool,
    pub created_at: String,
}

impl From<&User> for UserView {
    fn from(user: &User) -> Self {
        UserView {
            name: user.name.clone(),
            full_name: user.full_name.clone(),
            email: user.email.clone(),
            admin: user.admin,
            disabled: user.disabled,
            has_password: user.password.is_some(),
            created_at: user.created_at.clone(),
        }
    }
}

/// A token as listed (never its secret or the secret's hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenView {
    pub id: String,
    /// Its numeric id (Gitea's `AccessToken.id`).
    pub serial: u64,
    pub name: String,
    pub user: String,
    pub scope: Scope,
    pub repos: Vec<String>,
    pub expires_at: Option<String>,
    pub revoked: bool,
    /// When it was revoked, if it was.
    pub revoked_at: Option<String>,
    pub created_at: String,
    /// When it last authenticated (RFC 3339, to ten minutes), if it has
    /// since it was made; [`crate::Accounts::tokens`] fills it in.
    pub last_used_at: Option<String>,
}

impl From<&Token> for TokenView {
    fn from(token: &Token) -> Self {
        TokenView {
            id: token.id.clone(),
            serial: token.serial,
            name: token.name.clone(),
            user: token.user.clone(),
            scope: token.scope,
            repos: token.repos.clone(),
            expires_at: token.expires_at.clone(),
            revoked: token.revoked,
            revoked_at: token.revoked.then(|| token.updated_at.clone()),
            created_at: token.created_at.clone(),
            last_used_at: None,
        }
    }
}
