//! Signing in from a browser: a user name (or the email that names one
//! user) and password checked as HTTP Basic's are, whatever
//! `--password-auth` says (that setting is about credentials on git and
//! the API), which begins a session ([`vole_sessions`]); a session's
//! secret then stands for the user until it ends. Ending every session of
//! a user is part of changing their password and of disabling them
//! (`Accounts::set_password`, `Accounts::disable_user`).

use std::time::SystemTime;

use std::sync::Arc;

use vole_sessions::{SessionSecret, SessionStore};

use vole_meta::MetaError;

use crate::{AccountError, Accounts, AuthFailure, Identity};

impl Accounts {
    /// The store of browser sessions (the maintenance task compacts it).
    pub fn sessions(&self) -> &Arc<SessionStore> {
        &self.sessions
    }

    /// Checks `password` for the user `login` names and begins a session.
    /// Costs argon2's time whether or not the user exists.
    pub fn sign_in(
        &self,
        login: &str,
        password: &str,
        now: SystemTime,
    ) -> Result<(Identity, SessionSecret), AuthFailure> {
        // The generation is the user's (an email names them too), read
        // before the password is: a password change (or a disable) that
        // ends the user's sessions while argon2 runs on the old password
        // ends this sign-in too.
        let name = self
            .login_name(login)
            .map_err(|_| AuthFailure::Unavailable)?;
        let generation = self.sessions.generation(&name);
        let identity = self.check_password(&name, password)?;
        let secret = match self.sessions.begin(&identity.user, generation, now) {
            Ok(secret) => secret,
            Err(vole_sessions::SessionError::Ended) => return Err(AuthFailure::WrongPassword),
            Err(_) => return Err(AuthFailure::Unavailable),
        };
        Ok((identity, secret))
    }

    /// The user name `login` stands for (an email that names one user is
    /// that user's name), or `login` itself when it names no one: what a
    /// sign-in is throttled and audited under, so a user's name and email
    /// share one count.
    pub fn login_name(&self, login: &str) -> Result<String, MetaError> {
        Ok(match self.login_user(login)? {
            Some(user) => user.name,
            None => login.to_string(),
        })
    }

    /// The user a session's secret stands for: the session is live and
    /// its user exists and is not disabled. A session carries its user's
    /// whole power, as their password does.
    pub fn by_session(&self, secret: &str, now: SystemTime) -> Result<Identity, AuthFailure> {
        let session = self
            .sessions
            .resolve(secret, now)
            .ok_or(AuthFailure::NoSession)?;
        let user = self
            .meta
            .user(&session.user)
            .map_err(|_| AuthFailure::Unavailable)?
            .ok_or(AuthFailure::UnknownUser)?;
        crate::user_identity(user)
    }

    /// Ends the session `secret` names (sign-out); false when none was
    /// live.
    pub fn sign_out(&self, secret: &str) -> Result<bool, AccountError> {
        self.sessions.end(secret).map_err(AccountError::Sessions)
    }

    /// Sets `user`'s password, which ends every session of theirs, and
    /// begins a fresh session for the browser that changed it (the caller
    /// checked the current password).
    pub fn change_password(
        &self,
        user: &str,
        new_password: &str,
        now: SystemTime,
    ) -> Result<SessionSecret, AccountError> {
        let changed = self.set_password(user, new_password, user)?;
        self.begin_session(&changed.name, now)
    }

    /// Begins a session for `user`, whose credential the caller checked
    /// just now (a new account's first session, a changed password's).
    pub fn begin_session(
        &self,
        user: &str,
        now: SystemTime,
    ) -> Result<SessionSecret, AccountError> {
        let generation = self.sessions.generation(user);
        self.sessions
            .begin(user, generation, now)
            .map_err(AccountError::Sessions)
    }

    /// Ends every session of `user`.
    pub(crate) fn end_sessions(&self, user: &str) -> Result<usize, AccountError> {
        self.sessions.end_user(user).map_err(AccountError::Sessions)
    }
}
