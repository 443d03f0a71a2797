//! Accounts: who a request can be. [`Accounts`] keeps the server's users
//! and tokens (as documents of the metadata store's system repo, see
//! `vole_meta::system`), turns a presented credential into an
//! [`Identity`], and writes the audit log ([`audit`]). The credential
//! primitives are [`token`] and [`password`].
//!
//! What does not live here: HTTP (reading `Authorization`, rate limits:
//! `vole_http::auth`) and what an identity may do (`vole_access`).

pub mod audit;
pub mod password;
mod session;
pub mod token;
mod users;
mod views;

pub use users::check_password_rules;
pub use views::{TokenView, UserView};

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use audit::{AuditEvent, AuditKind};
use vole_git::repos::{Incarnation, RepoName};
use vole_log::{Log, LogError};
use vole_meta::MetaError;
use vole_meta::MetaStore;
use vole_meta::entity::{SCHEMA_V, Scope, Token, User};

/// Longest password accepted, in bytes (argon2 hashes any length; this
/// bounds what one request makes it read).
pub const MAX_PASSWORD_BYTES: usize = 1024;
/// Shortest password accepted, in characters.
pub const MIN_PASSWORD_CHARS: usize = 8;
/// Most repos one token may be limited to.
pub const MAX_TOKEN_REPOS: usize = 100;
/// Most tokens one user holds that are not revoked: one more is refused
/// until one is revoked (a script that makes tokens forever holds no more).
pub const MAX_LIVE_TOKENS_PER_USER: usize = 100;
/// Most tokens one user may ever make, revoked ones counted: a revoked
/// token keeps its record (its name stays taken, the listing and the audit
/// log name it), so without this a loop of create and revoke would grow
/// the system repo's index for as long as it ran.
pub const MAX_TOKENS_PER_USER: usize = 5000;

/// Who a request is, once its credential checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user's name as stored.
    pub user: String,
    /// A server administrator.
    pub admin: bool,
    /// The token presented; `None`: the user's password.
    pub token: Option<TokenGrant>,
}

/// What a token carries into a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenGrant {
    pub id: String,
    pub name: String,
    pub scope: Scope,
    /// Limited to `repos` (else it reaches every repo its user may).
    pub limited: bool,
    /// The repos it is limited to, each with the incarnation it was made
    /// for (`None`: made before incarnations existed).
    pub repos: Vec<(RepoName, Option<String>)>,
}

impl Identity {
    /// The most this credential may do: a password carries the user's
    /// whole power, a token its scope.
    pub fn scope(&self) -> Scope {
        self.token.as_ref().map_or(Scope::Admin, |t| t.scope)
    }

    /// The credential reaches `repo`, whose incarnation is `incarnation`:
    /// no token, or a token not limited to other repos. A token limited to
    /// a name reaches the repo it was made for, not one created under the
    /// name since.
    pub fn reaches(&self, repo: &RepoName, incarnation: Option<&Incarnation>) -> bool {
        self.token.as_ref().is_none_or(|t| {
            !t.limited
                || t.repos.iter().any(|(name, made_for)| {
                    name == repo && incarnation.is_some_and(|i| i.owns(made_for.as_deref()))
                })
        })
    }

    /// The credential is limited to no repos: it carries its user's power
    /// over the server (creating repos, a server admin's counters).
    pub fn unlimited(&self) -> bool {
        self.token.as_ref().is_none_or(|t| !t.limited)
    }
}

/// A credential as presented.
#[derive(Debug, Clone, Copy)]
pub enum Presented<'a> {
    /// HTTP Basic: a user name and a token (or, where the server allows
    /// it, the user's password).
    Basic { user: &'a str, secret: &'a str },
    /// `Authorization: Bearer <token>`.
    Bearer(&'a str),
}

impl Presented<'_> {
    /// Checking it runs argon2 (a password, not a token): tens of
    /// milliseconds, so callers run it off the async workers.
    pub fn is_password(&self) -> bool {
        match self {
            Presented::Basic { secret, .. } => token::parse(secret).is_none(),
            Presented::Bearer(_) => false,
        }
    }
}

/// Why a credential was refused: for the audit log and the server's log
/// only; a client is told no more than that it was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    #[error("no such user")]
    UnknownUser,
    #[error("wrong password")]
    WrongPassword,
    #[error("the user has no password")]
    NoPassword,
    #[error("passwords are not accepted on this server")]
    PasswordsOff,
    #[error("not a token")]
    Malformed,
    #[error("no such token")]
    UnknownToken,
    #[error("wrong token secret")]
    WrongSecret,
    #[error("the token is revoked")]
    Revoked,
    #[error("the token has expired")]
    Expired,
    #[error("the user is disabled")]
    Disabled,
    #[error("no live session")]
    NoSession,
    #[error("the account store is unavailable")]
    Unavailable,
}

/// Why an account operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] MetaError),
    #[error(transparent)]
    Hash(#[from] password::HashError),
    #[error("the audit log failed")]
    Audit(#[source] LogError),
    #[error(transparent)]
    Sessions(vole_sessions::SessionError),
}

/// A new user, as `vole user add` gives it.
#[derive(Debug, Clone)]
pub struct NewUser {
    pub name: String,
    /// Shown on pages; empty: none.
    pub full_name: String,
    pub email: String,
    pub admin: bool,
    pub password: Option<String>,
}

/// A new token, as `vole token create` gives it.
#[derive(Debug, Clone)]
pub struct NewTokenRequest {
    pub name: String,
    pub user: String,
    pub scope: Scope,
    pub repos: Vec<String>,
    pub expires_in: Option<Duration>,
}

/// The server's users and tokens, and its audit log.
pub struct Accounts {
    meta: Arc<MetaStore>,
    audit: Arc<Log<AuditEvent>>,
    /// HTTP Basic may carry a user's password, not only a token.
    passwords: bool,
    /// Browser sessions ([`session`]).
    sessions: Arc<vole_sessions::SessionStore>,
    /// Verified against when the user is unknown or has no password, so
    /// those answers take argon2's time too (made on first use: argon2
    /// takes its time, and a server without passwords never needs it).
    decoy_hash: std::sync::OnceLock<String>,
}

impl std::fmt::Debug for Accounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accounts")
            .field("passwords", &self.passwords)
            .finish_non_exhaustive()
    }
}

impl Accounts {
    pub fn new(
        meta: Arc<MetaStore>,
        audit: Arc<Log<AuditEvent>>,
        passwords: bool,
        sessions: Arc<vole_sessions::SessionStore>,
    ) -> Accounts {
        Accounts {
            meta,
            audit,
            passwords,
            sessions,
            decoy_hash: std::sync::OnceLock::new(),
        }
    }

    /// Appends an audit record and returns once it is durable.
    pub fn audit(&self, event: AuditEvent) -> Result<(), AccountError> {
        self.audit
            .commit(std::slice::from_ref(&event))
            .map(|_| ())
            .map_err(AccountError::Audit)
    }

    /// The audit log, for async callers ([`Log::commit_async`]).
    pub fn audit_log(&self) -> &Arc<Log<AuditEvent>> {
        &self.audit
    }

    // ---- tokens ----

    /// Makes a token; returns it as listed and its text, which is shown
    /// once and never stored.
    pub fn create_token(
        &self,
        request: NewTokenRequest,
        actor: &str,
    ) -> Result<(TokenView, String), AccountError> {
        if request.repos.len() > MAX_TOKEN_REPOS {
            return Err(AccountError::Invalid(format!(
                "a token may be limited to at most {MAX_TOKEN_REPOS} repos"
            )));
        }
        let mut repos = Vec::new();
        let mut incarnations = std::collections::BTreeMap::new();
        for repo in &request.repos {
            let name =
                RepoName::parse(repo).map_err(|e| AccountError::Invalid(format!("--repo: {e}")))?;
            if !repos.contains(&name.to_string()) {
                // The repo of that name now, and no later one.
                let incarnation = match self.meta.incarnation(&name) {
                    Ok(Some(incarnation)) => incarnation.id().to_string(),
                    Ok(None) | Err(MetaError::NoRepo(_)) => {
                        vole_meta::entity::NO_SUCH_REPO.to_string()
                    }
                    Err(e) => return Err(e.into()),
                };
                incarnations.insert(name.to_string(), incarnation);
                repos.push(name.to_string());
            }
        }
        let expires_at = match request.expires_in {
            None => None,
            Some(d) if d.is_zero() => {
                return Err(AccountError::Invalid(
                    "--expires must be longer than 0".into(),
                ));
            }
            Some(d) => {
                // RFC 3339 writes four-digit years.
                let too_far = || AccountError::Invalid("--expires is too far in the future".into());
                let at = SystemTime::now().checked_add(d).ok_or_else(too_far)?;
                let secs = at
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                if secs > 253_402_300_799 {
                    return Err(too_far());
                }
                Some(humantime::format_rfc3339_seconds(at).to_string())
            }
        };
        let made = token::generate();
        let limits = vole_meta::TokenLimits {
            live: MAX_LIVE_TOKENS_PER_USER,
            made: MAX_TOKENS_PER_USER,
        };
        let stored = self.meta.create_token(
            Token {
                serial: 0,
                v: SCHEMA_V,
                id: made.id.to_string(),
                name: request.name,
                user: request.user,
                scope: request.scope,
                repos,
                incarnations,
                secret_sha256: made.hash.to_hex(),
                expires_at,
                revoked: false,
                created_at: String::new(),
                updated_at: String::new(),
                version: 0,
                replaces: None,
            },
            limits,
        )?;
        let view = TokenView::from(&stored);
        let scope = serde_json::to_value(view.scope).unwrap_or_default();
        self.audit(AuditEvent::new(
            AuditKind::TokenCreated,
            actor,
            &view.name,
            "local",
            format!(
                "user={} id={} scope={} repos={}",
                view.user,
                view.id,
                scope.as_str().unwrap_or_default(),
                view.repos.join(",")
            ),
        ))?;
        Ok((view, made.text))
    }

    pub fn tokens(&self, user: Option<&str>) -> Result<Vec<TokenView>, AccountError> {
        Ok(self
            .meta
            .tokens(user)?
            .iter()
            .map(|token| {
                let mut view = TokenView::from(token);
                view.last_used_at = self
                    .sessions
                    .token_last_used(&token.id)
                    .map(|at| humantime::format_rfc3339_seconds(at).to_string());
                view
            })
            .collect())
    }

    /// Revokes a token: refused from the next request on.
    pub fn revoke_token(&self, name: &str, actor: &str) -> Result<TokenView, AccountError> {
        let token = self.meta.revoke_token(name)?;
        self.sessions.forget_token(&token.id);
        self.audit(AuditEvent::new(
            AuditKind::TokenRevoked,
            actor,
            &token.name,
            "local",
            format!("user={} id={}", token.user, token.id),
        ))?;
        Ok(TokenView::from(&token))
    }

    // ---- authentication ----

    /// Checks a presented credential. A password costs argon2's time
    /// whether or not the user exists (see [`Presented::is_password`]); a
    /// token costs one SHA-256 and a constant-time comparison.
    pub fn authenticate(&self, presented: Presented<'_>) -> Result<Identity, AuthFailure> {
        match presented {
            Presented::Bearer(text) => self.by_token(text),
            Presented::Basic { secret, .. } if token::parse(secret).is_some() => {
                // The token is the credential; the user name git sends
                // along is whatever the credential helper had.
                self.by_token(secret)
            }
            Presented::Basic { user, secret } => self.by_password(user, secret),
        }
    }

    fn by_token(&self, text: &str) -> Result<Identity, AuthFailure> {
        let (id, secret) = token::parse(text).ok_or(AuthFailure::Malformed)?;
        let (stored, user) = self
            .meta
            .token_and_user(id.as_str())
            .map_err(|_| AuthFailure::Unavailable)?
            .ok_or(AuthFailure::UnknownToken)?;
        let hash =
            token::SecretHash::from_hex(&stored.secret_sha256).ok_or(AuthFailure::WrongSecret)?;
        if !hash.matches(secret) {
            return Err(AuthFailure::WrongSecret);
        }
        if stored.revoked {
            return Err(AuthFailure::Revoked);
        }
        if let Some(expires) = &stored.expires_at {
            let at = humantime::parse_rfc3339(expires).map_err(|_| AuthFailure::Expired)?;
            if SystemTime::now() >= at {
                return Err(AuthFailure::Expired);
            }
        }
        if user.disabled {
            return Err(AuthFailure::Disabled);
        }
        self.sessions.mark_token_used(&stored.id, SystemTime::now());
        // A stored name that no longer parses matches nothing; the token
        // stays limited (never widened to every repo).
        let limited = !stored.repos.is_empty();
        let repos = stored
            .repos
            .iter()
            .filter_map(|r| {
                let name = RepoName::parse(r).ok()?;
                Some((name, stored.incarnations.get(r).cloned()))
            })
            .collect();
        Ok(Identity {
            user: user.name,
            admin: user.admin,
            token: Some(TokenGrant {
                id: stored.id,
                name: stored.name,
                scope: stored.scope,
                limited,
                repos,
            }),
        })
    }

    /// Spends argon2's time on a password that matches nothing.
    fn verify_decoy(&self, secret: &str) {
        let decoy = self
            .decoy_hash
            .get_or_init(|| password::hash("vole decoy password").unwrap_or_default());
        password::verify(decoy, secret);
    }

    fn by_password(&self, name: &str, secret: &str) -> Result<Identity, AuthFailure> {
        if !self.passwords {
            return Err(AuthFailure::PasswordsOff);
        }
        self.check_password(name, secret)
    }

    /// The user `name` is, if `secret` is their password and they are not
    /// disabled (argon2's time either way).
    /// (`name` may be the email that names one user.)
    pub fn check_password(&self, name: &str, secret: &str) -> Result<Identity, AuthFailure> {
        if secret.len() > MAX_PASSWORD_BYTES {
            return Err(AuthFailure::WrongPassword);
        }
        let user = self
            .login_user(name)
            .map_err(|_| AuthFailure::Unavailable)?;
        let Some(user) = user else {
            self.verify_decoy(secret);
            return Err(AuthFailure::UnknownUser);
        };
        let Some(stored) = &user.password else {
            self.verify_decoy(secret);
            return Err(AuthFailure::NoPassword);
        };
        if !password::verify(stored, secret) {
            return Err(AuthFailure::WrongPassword);
        }
        user_identity(user)
    }
}

/// The identity a user's own password (or their session) carries: their
/// whole power, unless they are disabled.
fn user_identity(user: User) -> Result<Identity, AuthFailure> {
    if user.disabled {
        return Err(AuthFailure::Disabled);
    }
    Ok(Identity {
        user: user.name,
        admin: user.admin,
        token: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited_to(repos: Vec<(RepoName, Option<String>)>) -> Identity {
        Identity {
            user: "bob".into(),
            admin: false,
            token: Some(TokenGrant {
                id: "0123456789abcdef".into(),
                name: "t".into(),
                scope: Scope::Write,
                limited: true,
                repos,
            }),
        }
    }

    #[test]
    fn a_limited_token_reaches_the_incarnation_it_was_made_for_only() {
        let name = RepoName::parse("alice/tmp").unwrap();
        let first = Incarnation::mint();
        let second = Incarnation::mint();
        let adopted = Incarnation::mint_adopting_legacy();
        let made_for_first = limited_to(vec![(name.clone(), Some(first.id().to_string()))]);
        assert!(made_for_first.reaches(&name, Some(&first)));
        assert!(
            !made_for_first.reaches(&name, Some(&second)),
            "a token reached a repo created again under the name"
        );
        assert!(!made_for_first.reaches(&name, None));
        let other = RepoName::parse("alice/other").unwrap();
        assert!(!made_for_first.reaches(&other, Some(&first)));
        // Made before incarnations: the repo present at the upgrade only.
        let legacy = limited_to(vec![(name.clone(), None)]);
        assert!(legacy.reaches(&name, Some(&adopted)));
        assert!(!legacy.reaches(&name, Some(&second)));
        // Made for a repo that did not exist: none, ever.
        let none = limited_to(vec![(
            name.clone(),
            Some(vole_meta::entity::NO_SUCH_REPO.to_string()),
        )]);
        assert!(!none.reaches(&name, Some(&second)));
        assert!(!none.reaches(&name, Some(&adopted)));
        // Not limited: every repo.
        let password = Identity {
            token: None,
            ..limited_to(Vec::new())
        };
        assert!(password.reaches(&name, Some(&second)));
    }
}
