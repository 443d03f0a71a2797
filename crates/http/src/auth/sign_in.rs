//! Browser sign-in through the same door as HTTP Basic's passwords: the
//! same per-address and per-(user, address) throttle, the same hashing
//! slots, the same audit records; and the principal a session's secret
//! stands for, which only the web pages ask for (`crate::browser`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

use vole_access::Principal;
use vole_accounts::Identity;
use vole_sessions::SessionSecret;

use super::{Authn, Keys};
use crate::AppError;

impl Authn {
    /// Checks `password` for `login` from `client` and begins a session.
    /// A refusal is the 401 (or 429 once throttled) that Basic gets.
    pub async fn sign_in(
        &self,
        login: &str,
        password: &str,
        client: IpAddr,
    ) -> Result<(Identity, SessionSecret), AppError> {
        // A user's name and email share one count.
        let name = self
            .accounts
            .login_name(login)
            .map_err(|e| AppError::unavailable("cannot look a user up", &e))?;
        let keys = Keys::of(&name, client);
        let accounts = self.accounts.clone();
        let (login, password) = (login.to_string(), password.to_string());
        self.password_check(&keys, move || {
            accounts.sign_in(&login, &password, SystemTime::now())
        })
        .await
    }

    /// Checks `password` for the user `user` from `client` (the current
    /// password before a change), through the same throttle, slots and
    /// audit as a sign-in; begins no session.
    pub async fn verify_password(
        &self,
        user: &str,
        password: &str,
        client: IpAddr,
    ) -> Result<Identity, AppError> {
        let keys = Keys::of(user, client);
        let accounts = self.accounts.clone();
        let (user, password) = (user.to_string(), password.to_string());
        self.password_check(&keys, move || accounts.check_password(&user, &password))
            .await
    }

    /// The user a session's secret stands for, if the session is live and
    /// the user still may sign in.
    pub fn session_principal(&self, secret: &str) -> Option<Principal> {
        self.accounts
            .by_session(secret, SystemTime::now())
            .ok()
            .map(|identity| Principal::User(Arc::new(identity)))
    }

    /// Ends the session `secret` names.
    pub fn sign_out(&self, secret: &str) -> Result<bool, AppError> {
        self.accounts
            .sign_out(secret)
            .map_err(|e| AppError::internal("cannot end the session", e))
    }
}
