//! Webhooks. What a hook may reach is decided here, once, for a hook's
//! creation and for every delivery alike ([`guard`]): a target's name is
//! resolved, every address it resolves to is checked, and the addresses
//! checked are the ones connected to (no second lookup a DNS answer could
//! change in between). A delivery's headers and signature
//! ([`signature`]). No HTTP server types; no store (hooks are the
//! metadata store's documents).

pub mod guard;
pub mod signature;
