//! What the HTTP services share and nothing else: the one error type at
//! the boundary ([`AppError`]), and the sealed-memfd buffers with the
//! connection that sends them with `sendfile` ([`zero_copy`]), the
//! pagination extractors ([`page`]). No handler
//! lives here; routes are in `server/router.rs`, handlers in the services.

pub mod auth;
pub mod conditional;
pub mod error;
pub mod page;
pub mod slots;
pub mod stream;
pub mod zero_copy;

pub use error::AppError;
