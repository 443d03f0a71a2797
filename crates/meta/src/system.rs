//! The system repo's documents: users and tokens. Stored, folded,
//! logged and recovered like every other document; what a credential
//! means is `vole_accounts`'s, not this file's. Each write is decided
//! under the system repo's lock, so two writers cannot both take a name.

use super::*;

impl MetaStore {
    // ---- users ----

    /// Stores a new user; its name must be free (case-insensitively).
    pub fn create_user(&self, user: User) -> Result<User, MetaError> {
        entity::check_user_name(&user.name)?;
        let serial = self.next_serial(entity::SerialKind::User)?;
        self.write_system(|state| {
            if let Some(taken) = state.index.user(&user.name) {
                return Err(MetaError::Taken(format!(
                    "user name {:?} is taken (by {:?})",
                    user.name, taken.name
                )));
            }
            email_free(state, &user.email, &user.name)?;
            let now = now_text();
            Ok(User {
                v: SCHEMA_V,
                serial,
                created_at: now.clone(),
                updated_at: now,
                version: 1,
                replaces: None,
                ..user
            })
        })
    }

    /// Applies `edit` to the stored user `name` and stores the result as
    /// its next version. An email it changes must be no other user's.
    pub fn edit_user(&self, name: &str, edit: impl FnOnce(&mut User)) -> Result<User, MetaError> {
        self.write_system(|state| {
            let mut user = state
                .index
                .user(name)
                .cloned()
                .ok_or_else(|| MetaError::NotFound(format!("no user named {name:?}")))?;
            let before = user.email.clone();
            edit(&mut user);
            if !user.has_email(&before) {
                email_free(state, &user.email, &user.name)?;
            }
            user.replaces = Some(user.version);
            user.version += 1;
            user.updated_at = now_text();
            Ok(user)
        })
    }

    /// A user by name, case-insensitively.
    pub fn user(&self, name: &str) -> Result<Option<User>, MetaError> {
        self.read_system(|state| Ok(state.index.user(name).cloned()))
    }

    /// Every user, by lowercased name.
    pub fn users(&self) -> Result<Vec<User>, MetaError> {
        self.read_system(|state| Ok(state.index.users().cloned().collect()))
    }

    /// The users whose email is `email` (more than one only for
    /// duplicates from before emails were unique); an index lookup.
    pub fn users_with_email(&self, email: &str) -> Result<Vec<User>, MetaError> {
        self.read_system(|state| Ok(state.index.users_with_email(email).cloned().collect()))
    }

    /// Does a repo's ACL name `user`, owner or member? A name no user has
    /// yet but an ACL grants a role is not free to register: whoever took
    /// it would hold that role.
    pub fn acls_name(&self, user: &str) -> Result<bool, MetaError> {
        self.read_system(|state| Ok(state.index.acls_name(user)))
    }

    // ---- tokens ----

    /// Stores a new token; its name must be free, its user exist and hold
    /// fewer than `limits` (counted under the system repo's lock, so
    /// tokens made at once cannot pass them together).
    pub fn create_token(&self, token: Token, limits: TokenLimits) -> Result<Token, MetaError> {
        if token.name.is_empty()
            || token.name.len() > 64
            || token.name.chars().any(|c| c.is_control() || c == '/')
        {
            return Err(MetaError::Invalid(format!(
                "token name {:?} must be 1 to 64 characters without '/' or control characters",
                token.name
            )));
        }
        let serial = self.next_serial(entity::SerialKind::Token)?;
        self.write_system(|state| {
            let user = state
                .index
                .user(&token.user)
                .ok_or_else(|| MetaError::NotFound(format!("no user named {:?}", token.user)))?;
            if user.disabled {
                return Err(MetaError::Invalid(format!(
                    "user {:?} is disabled; a token of theirs would be refused",
                    user.name
                )));
            }
            let (made, live) = state
                .index
                .tokens_of(&user.name)
                .fold((0, 0), |(made, live), t| {
                    (made + 1, live + usize::from(!t.revoked))
                });
            if made >= limits.made {
                return Err(MetaError::Invalid(format!(
                    "{} has made {made} tokens, revoked ones counted, the most one user \
                     may make ({}); use one of the live ones",
                    user.name, limits.made
                )));
            }
            if live >= limits.live {
                return Err(MetaError::Invalid(format!(
                    "{} holds {live} tokens, the most one user may hold ({}); revoke one first",
                    user.name, limits.live
                )));
            }
            if state.index.token_named(&token.name).is_some() {
                // Revoked tokens keep their names: the audit log and the
                // listing name each token once.
                return Err(MetaError::Taken(format!(
                    "a token named {:?} exists (revoked ones keep their names); pick another name",
                    token.name
                )));
            }
            if state.index.token(&token.id).is_some() {
                return Err(MetaError::Taken("token id collision; try again".into()));
            }
            let now = now_text();
            Ok(Token {
                v: SCHEMA_V,
                serial,
                user: user.name.clone(),
                created_at: now.clone(),
                updated_at: now,
                version: 1,
                replaces: None,
                ..token
            })
        })
    }

    /// Marks the token `name` revoked (a revoked token stays listed).
    pub fn revoke_token(&self, name: &str) -> Result<Token, MetaError> {
        self.write_system(|state| {
            let mut token = state
                .index
                .token_named(name)
                .cloned()
                .ok_or_else(|| MetaError::NotFound(format!("no token named {name:?}")))?;
            if token.revoked {
                return Err(MetaError::Invalid(format!(
                    "token {name:?} is revoked already"
                )));
            }
            token.revoked = true;
            token.replaces = Some(token.version);
            token.version += 1;
            token.updated_at = now_text();
            Ok(token)
        })
    }

    /// A token and its user, by token id: what every authenticated
    /// request looks up (one lock, two map lookups).
    pub fn token_and_user(&self, id: &str) -> Result<Option<(Token, User)>, MetaError> {
        self.read_system(|state| {
            Ok(state.index.token(id).and_then(|token| {
                let user = state.index.user(&token.user)?;
                Some((token.clone(), user.clone()))
            }))
        })
    }

    /// Every token (of `user` only, when given), by id.
    pub fn tokens(&self, user: Option<&str>) -> Result<Vec<Token>, MetaError> {
        self.read_system(|state| {
            Ok(match user {
                Some(user) => state.index.tokens_of(user).cloned().collect(),
                None => state.index.tokens().cloned().collect(),
            })
        })
    }
}

/// Refuses `email` when a user other than `owner` has it. The message
/// does not say whose it is: a registrant or a user editing their profile
/// must not learn which login an email belongs to.
fn email_free(state: &RepoState, email: &str, owner: &str) -> Result<(), MetaError> {
    let owner = User::id_of(owner);
    match state
        .index
        .users_with_email(email)
        .find(|user| User::id_of(&user.name) != owner)
    {
        Some(_) => Err(MetaError::Taken(format!(
            "email {email:?} is in use by another account"
        ))),
        None => Ok(()),
    }
}

/// How many tokens one user may hold ([`MetaStore::create_token`]).
#[derive(Debug, Clone, Copy)]
pub struct TokenLimits {
    /// Not revoked.
    pub live: usize,
    /// Ever made, revoked ones counted (they keep their records).
    pub made: usize,
}
