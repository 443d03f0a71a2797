//! Who moved what: git's hooks report every ref move back to the server,
//! which makes it durable in the ref log before git may move the ref.
//!
//! The server points `core.hooksPath` (through the environment, never a
//! repo's config) at `data/hooks/`, where [`scripts`] writes two tiny
//! scripts that exec `vole hook ...` (`cli/hook.rs`); those talk to the server over
//! the control socket. Its op `hook_pre_receive` is decided by
//! `access::Access::check_ref_updates`; `hook_ref_prepared` and
//! `hook_ref_outcome` are handled by [`recorder::RefRecorder`].
//!
//! # What git does with each hook's exit status
//!
//! - `pre-receive` (once per push, before any ref moves): non-zero refuses
//!   the whole push; nothing moves; its stderr reaches the pusher as
//!   `remote:` lines.
//! - `reference-transaction prepared` (per ref transaction, after the
//!   objects are in place, before any ref moves): non-zero aborts the
//!   transaction; nothing moves. vole returns 0 only once the moves are
//!   durable in the log, so an unreachable server or a failed sync aborts.
//! - `reference-transaction committed` / `aborted`: the exit status is
//!   ignored (the refs have already moved, or not). vole syncs the moved
//!   refs' directories, appends the outcome and, for `committed`, returns
//!   only after the move is on the ref-move feed, so the first request
//!   after the pusher hears "ok" sees it. If the server cannot make a
//!   committed move durable (or cannot be reached), the hook kills the
//!   receive-pack running it, so git never reports "ok" for it.
//!
//! After the server's checks, pre-receive refuses a push that carries a
//! file over `--max-blob-size` ([`blob_limit`]), naming it. A repo's own
//! `hooks/pre-receive` (if any, executable) runs after vole's checks pass,
//! with the same input; its exit status then decides.

pub mod blob_limit;
mod merge_intents;
mod reconcile;
pub mod record;
pub mod recorder;
pub mod scripts;

pub use reconcile::ReconcileReport;
pub use record::{Phase, RefMove};

use serde::{Deserialize, Serialize};

/// Environment the server gives git (and so the hooks) for a push.
pub mod env {
    pub const SOCKET: &str = "VOLE_SOCKET";
    pub const REPO: &str = "VOLE_REPO";
    pub const PUSH_ID: &str = "VOLE_PUSH_ID";
    pub const ACTOR: &str = "VOLE_ACTOR";
    pub const CLIENT: &str = "VOLE_CLIENT";
    pub const GIT: &str = "VOLE_GIT";
    /// `--max-blob-size`, in bytes.
    pub const MAX_BLOB_SIZE: &str = "VOLE_MAX_BLOB_SIZE";
}

/// A line of hook input that is not `<old> <new> <ref>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected hook input line {0:?}")]
pub struct BadHookInput(pub String);

/// The all-zero object id git uses for "no object".
pub const ZERO_OID: &str = "0000000000000000000000000000000000000000";

/// One ref update as git's hooks read it: `<old> <new> <ref>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefUpdate {
    #[serde(rename = "ref")]
    pub ref_name: String,
    pub old: String,
    pub new: String,
    /// pre-receive only: `new` descends from `old` (absent when unknown or
    /// not applicable: creations and deletions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_forward: Option<bool>,
}

impl RefUpdate {
    /// Parses hook stdin.
    pub fn parse_lines(input: &str) -> Result<Vec<RefUpdate>, BadHookInput> {
        input
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let mut parts = line.splitn(3, ' ');
                match (parts.next(), parts.next(), parts.next()) {
                    (Some(old), Some(new), Some(name))
                        if vole_git::is_hex_oid(old) && vole_git::is_hex_oid(new) =>
                    {
                        Ok(RefUpdate {
                            ref_name: name.to_string(),
                            old: old.to_string(),
                            new: new.to_string(),
                            fast_forward: None,
                        })
                    }
                    _ => Err(BadHookInput(line.to_string())),
                }
            })
            .collect()
    }

    pub fn is_creation(&self) -> bool {
        is_zero(&self.old)
    }
    pub fn is_deletion(&self) -> bool {
        is_zero(&self.new)
    }
}

pub fn is_zero(oid: &str) -> bool {
    oid.bytes().all(|b| b == b'0')
}

/// Outcome of a reference transaction as reported by the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Committed,
    Aborted,
}

/// A push's identity, from the environment the server set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushContext {
    pub repo: String,
    pub push_id: u64,
    pub actor: String,
    pub client: String,
}
