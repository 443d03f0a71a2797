//! The audit log's record kind: [`AuditEvent`], one security-relevant
//! event (an authentication failure, the start of a sign-in throttle, a
//! user or token change, a repo created, deleted or garbage-collected, an
//! ACL changed), in its own stream (`data/log/audit.arrow`) beside the ref
//! moves and metadata writes. The kind is stored as its name
//! ([`AuditKind::as_str`]), so a kind added later leaves older records
//! as they were.

use serde::{Deserialize, Serialize};

use vole_log::record::RecordKind;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditKind {
    AuthFailed,
    /// Failed sign-ins from an address (or of a user name from one) went
    /// past the allowance: further ones are refused and counted, not
    /// recorded one by one.
    SignInThrottled,
    UserAdded,
    UserChanged,
    TokenCreated,
    TokenRevoked,
    RepoCreated,
    RepoDeleted,
    AclChanged,
    /// `vole repo gc`: a repo's unreachable objects pruned.
    RepoGc,
}

impl AuditKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::AuthFailed => "auth_failed",
            AuditKind::SignInThrottled => "sign_in_throttled",
            AuditKind::UserAdded => "user_added",
            AuditKind::UserChanged => "user_changed",
            AuditKind::TokenCreated => "token_created",
            AuditKind::TokenRevoked => "token_revoked",
            AuditKind::RepoCreated => "repo_created",
            AuditKind::RepoDeleted => "repo_deleted",
            AuditKind::AclChanged => "acl_changed",
            AuditKind::RepoGc => "repo_gc",
        }
    }
}

/// One audit record. Never carries a secret: a failed attempt records the
/// user name given and why it failed, not what was presented.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEvent {
    pub time_ns: i64,
    /// [`AuditKind::as_str`].
    pub event: String,
    /// Who did it: a user name, `anonymous`, or `cli` (the operator, over
    /// the control socket or holding the data dir lock).
    pub actor: String,
    /// What it was done to: a user, a token's name, a repo.
    pub target: String,
    /// The client address, or `local`.
    pub client: String,
    /// A few words more (the scope of a token, why a sign-in failed).
    pub detail: String,
}

impl AuditEvent {
    pub fn new(
        kind: AuditKind,
        actor: &str,
        target: &str,
        client: &str,
        detail: impl Into<String>,
    ) -> AuditEvent {
        AuditEvent {
            time_ns: vole_log::now_ns(),
            event: kind.as_str().into(),
            actor: actor.into(),
            target: target.into(),
            client: client.into(),
            detail: detail.into(),
        }
    }
}

impl RecordKind for AuditEvent {
    const KIND: &'static str = "audit";
    const FILE_NAME: &'static str = "audit.arrow";
    const SCHEMA_VERSION: u32 = 1;

    vole_log::record_columns! {
        |r| {
            time: Time("time") = r.time_ns,
            event: Utf8("event") = &r.event,
            actor: Utf8("actor") = &r.actor,
            target: Utf8("target") = &r.target,
            client: Utf8("client") = &r.client,
            detail: Utf8("detail") = &r.detail,
        }
        |row| Ok(AuditEvent {
            time_ns: time,
            event: event.to_string(),
            actor: actor.to_string(),
            target: target.to_string(),
            client: client.to_string(),
            detail: detail.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_round_trips_through_its_batch() {
        let rows = vec![
            AuditEvent::new(
                AuditKind::AuthFailed,
                "anonymous",
                "ann",
                "127.0.0.1",
                "wrong password",
            ),
            AuditEvent::new(
                AuditKind::SignInThrottled,
                "anonymous",
                "ann",
                "203.0.113.5",
                "per address, for 30s",
            ),
            AuditEvent::new(AuditKind::TokenCreated, "cli", "ci", "local", "scope=write"),
        ];
        let batch = AuditEvent::batch(&rows).unwrap();
        assert_eq!(AuditEvent::rows(&batch).unwrap(), rows);
    }
}
