//! Users: made (`vole user add`, registration), their profile (display
//! name, an email no other user has), password and being disabled; the
//! login a sign-in names (a user name, or an email that is exactly one
//! user's); the rules a password, a display name and an email follow.

use vole_meta::MetaError;
use vole_meta::entity::{SCHEMA_V, User};

use crate::audit::{AuditEvent, AuditKind};
use crate::{
    AccountError, Accounts, MAX_PASSWORD_BYTES, MIN_PASSWORD_CHARS, NewUser, UserView, password,
};

impl Accounts {
    pub fn add_user(&self, new: NewUser, actor: &str) -> Result<UserView, AccountError> {
        // A user owns the repos under their name: a name no owner may
        // take is no user's either.
        let lower = new.name.to_ascii_lowercase();
        if vole_git::repos::RESERVED_OWNERS.contains(&lower.as_str())
            || vole_git::repos::RESERVED_NAMES.contains(&lower.as_str())
            || lower == "anonymous"
            || lower == "cli"
        {
            return Err(AccountError::Invalid(format!(
                "user name {:?} is reserved",
                new.name
            )));
        }
        check_email(&new.email)?;
        check_full_name(&new.full_name)?;
        let password = new.password.as_deref().map(hash_password).transpose()?;
        let user = self.meta.create_user(User {
            v: SCHEMA_V,
            serial: 0,
            name: new.name,
            full_name: new.full_name.trim().to_string(),
            email: new.email,
            admin: new.admin,
            disabled: false,
            password,
            created_at: String::new(),
            updated_at: String::new(),
            version: 0,
            replaces: None,
        })?;
        let detail = if user.admin { "admin" } else { "" };
        self.audit(AuditEvent::new(
            AuditKind::UserAdded,
            actor,
            &user.name,
            "local",
            detail,
        ))?;
        Ok(UserView::from(&user))
    }

    pub fn users(&self) -> Result<Vec<UserView>, AccountError> {
        Ok(self.meta.users()?.iter().map(UserView::from).collect())
    }

    pub fn user(&self, name: &str) -> Result<Option<UserView>, AccountError> {
        Ok(self.meta.user(name)?.as_ref().map(UserView::from))
    }

    pub fn set_password(
        &self,
        name: &str,
        password: &str,
        actor: &str,
    ) -> Result<UserView, AccountError> {
        let hash = hash_password(password)?;
        // The sessions end before the password changes, so a failure to
        // write their end leaves the old password in place (they are ended
        // in this server all the same), and again after, for one begun in
        // between with the old password. A change made is audited even
        // when that second end fails.
        self.end_sessions(name)?;
        let user = self
            .meta
            .edit_user(name, |user| user.password = Some(hash))?;
        let ended = self.end_sessions(&user.name);
        let view = self.changed(&user, actor, "password set")?;
        ended?;
        Ok(view)
    }

    /// Sets a user's display name and email (the email no other user's).
    pub fn set_profile(
        &self,
        name: &str,
        full_name: &str,
        email: &str,
        actor: &str,
    ) -> Result<UserView, AccountError> {
        check_email(email)?;
        check_full_name(full_name)?;
        let user = self.meta.edit_user(name, |user| {
            user.full_name = full_name.trim().to_string();
            user.email = email.to_string();
        })?;
        self.changed(&user, actor, "profile set")
    }

    /// Disables a user: every credential of theirs is refused from the
    /// next request on.
    pub fn disable_user(&self, name: &str, actor: &str) -> Result<UserView, AccountError> {
        let user = self.meta.edit_user(name, |user| user.disabled = true)?;
        self.end_sessions(&user.name)?;
        self.changed(&user, actor, "disabled")
    }

    /// Audits a change of `user` by `actor` and answers the user as
    /// listed.
    fn changed(&self, user: &User, actor: &str, detail: &str) -> Result<UserView, AccountError> {
        self.audit(AuditEvent::new(
            AuditKind::UserChanged,
            actor,
            &user.name,
            "local",
            detail,
        ))?;
        Ok(UserView::from(user))
    }

    /// Whether some user has `email` (case aside).
    pub fn email_in_use(&self, email: &str) -> Result<bool, AccountError> {
        Ok(!self.meta.users_with_email(email)?.is_empty())
    }

    /// The user a login names: a user name, or else an email that is
    /// exactly one user's (an email two users share from before emails
    /// were unique names no one).
    pub(crate) fn login_user(&self, login: &str) -> Result<Option<User>, MetaError> {
        if let Some(user) = self.meta.user(login)? {
            return Ok(Some(user));
        }
        if !login.contains('@') {
            return Ok(None);
        }
        let mut found = self.meta.users_with_email(login)?;
        Ok(if found.len() == 1 { found.pop() } else { None })
    }
}

pub(crate) fn hash_password(password: &str) -> Result<String, AccountError> {
    check_password_rules(password)?;
    Ok(password::hash(password)?)
}

/// Whether `password` may be a password: long enough, and not longer
/// than a credential is read.
pub fn check_password_rules(password: &str) -> Result<(), AccountError> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(AccountError::Invalid(format!(
            "a password must be at least {MIN_PASSWORD_CHARS} characters"
        )));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(AccountError::Invalid(format!(
            "a password must be at most {MAX_PASSWORD_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Longest display name, in characters.
const MAX_FULL_NAME_CHARS: usize = 100;

fn check_full_name(full_name: &str) -> Result<(), AccountError> {
    if full_name.trim().chars().count() > MAX_FULL_NAME_CHARS {
        return Err(AccountError::Invalid(format!(
            "a display name must be at most {MAX_FULL_NAME_CHARS} characters"
        )));
    }
    if full_name.chars().any(char::is_control) {
        return Err(AccountError::Invalid(
            "a display name must not hold control characters (a line break, a tab)".into(),
        ));
    }
    Ok(())
}

fn check_email(email: &str) -> Result<(), AccountError> {
    let ok = email.len() <= 254
        && email
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'))
        && !email.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(AccountError::Invalid(format!(
            "{email:?} is not an email address"
        )))
    }
}
