//! One delivery attempt as a hook's admins see it ([`Attempt`]): what was
//! sent (headers, body) and what came back (status, headers, the first
//! [`RESPONSE_BYTES`] of the body), or why nothing did; how long it took.
//! Kept in the webhooks log, the last [`crate::queue::HISTORY`] per hook.

use serde::{Deserialize, Serialize};

/// The most of a receiver's answer kept.
pub const RESPONSE_BYTES: usize = 64 << 10;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The event's number.
    pub event: u64,
    /// The delivery's id (`X-Gitea-Delivery`), the same on every attempt.
    pub delivery: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Asked for by an admin (a redelivery or a test), not the queue.
    pub redelivery: bool,
    /// When it started, nanoseconds since the epoch.
    pub time_ns: i64,
    pub event_name: String,
    pub url: String,
    pub request_headers: Vec<(String, String)>,
    /// The body sent, its first [`RESPONSE_BYTES`] as kept.
    pub request_body: String,
    /// The body was longer than what is kept.
    #[serde(default)]
    pub request_cut: bool,
    /// The answer's status; none when no answer came.
    pub status: Option<u16>,
    pub response_headers: Vec<(String, String)>,
    /// The answer's first [`RESPONSE_BYTES`], as text.
    pub response_body: String,
    /// Why it failed, when it did.
    pub error: Option<String>,
    pub duration_ms: u64,
}

impl Attempt {
    /// Whether the answer was a 2xx.
    pub fn delivered(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// The same attempt (a checkpoint's copy of a logged one).
    pub fn same_as(&self, other: &Attempt) -> bool {
        self.event == other.event
            && self.attempt == other.attempt
            && self.time_ns == other.time_ns
            && self.delivery == other.delivery
    }
}
