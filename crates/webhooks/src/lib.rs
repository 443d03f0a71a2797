//! Webhooks. What a hook may reach is decided here, once, for a hook's
//! creation and for every delivery alike ([`guard`]): a target's name is
//! resolved, every address it resolves to is checked, and the addresses
//! checked are the ones connected to (no second lookup a DNS answer could
//! change in between). A delivery's headers and signature
//! ([`signature`]). The events in one order and each hook's place in
//! them, kept in the webhooks log ([`queue`], [`record`], [`history`]),
//! and the deliveries that follow them ([`deliver`]). No HTTP server
//! types; no metadata (hooks are the metadata store's documents, events
//! the feed's, above).

pub mod deliver;
pub mod guard;
pub mod history;
pub mod queue;
mod queue_state;
pub mod record;
pub mod signature;
pub mod target;
