//! Accounts: who a request can be. This module holds the credential
//! primitives the access decisions build on: API and git tokens
//! ([`token`]) and password hashes ([`password`]). It knows nothing of
//! HTTP; `crate::access` turns a presented credential into a principal.
//!
//! Users and tokens are stored by the server-level metadata store (the
//! accounts issue); what is here is what that store keeps and compares.

pub mod password;
pub mod token;
