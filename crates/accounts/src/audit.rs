//! The audit log's record kind: [`AuditEvent`], one security-relevant
//! event (an authentication failure, the start of a sign-in throttle, a
//! user or token change, a repo created, deleted or garbage-collected, an
//! ACL changed), in its own stream (`data/log/audit.arrow`) beside the ref
//! moves and metadata writes. The kind is stored as its name
//! ([`AuditKind::as_str`]), so a kind added later leaves older records
//! as they were.

use std::sync::{Arc, OnceLock};

use arrow_array::builder::TimestampNanosecondBuilder;
use arrow_array::cast::AsArray;
use arrow_array::types::TimestampNanosecondType;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, SchemaRef};
use serde::{Deserialize, Serialize};

use vole_log::record::{
    BatchError, RecordKind, column, schema_once, string_builder, time_field, utf8,
};

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

    fn batch_schema() -> SchemaRef {
        static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
        schema_once(&SCHEMA, Self::fields)
    }

    fn fields() -> Vec<Field> {
        vec![
            time_field(),
            Field::new("event", DataType::Utf8, false),
            Field::new("actor", DataType::Utf8, false),
            Field::new("target", DataType::Utf8, false),
            Field::new("client", DataType::Utf8, false),
            Field::new("detail", DataType::Utf8, false),
        ]
    }

    fn columns(rows: &[Self]) -> Vec<ArrayRef> {
        let mut time = TimestampNanosecondBuilder::with_capacity(rows.len()).with_timezone("UTC");
        let mut event = string_builder(rows, |r| &r.event);
        let mut actor = string_builder(rows, |r| &r.actor);
        let mut target = string_builder(rows, |r| &r.target);
        let mut client = string_builder(rows, |r| &r.client);
        let mut detail = string_builder(rows, |r| &r.detail);
        for row in rows {
            time.append_value(row.time_ns);
            event.append_value(&row.event);
            actor.append_value(&row.actor);
            target.append_value(&row.target);
            client.append_value(&row.client);
            detail.append_value(&row.detail);
        }
        vec![
            Arc::new(time.finish()),
            Arc::new(event.finish()),
            Arc::new(actor.finish()),
            Arc::new(target.finish()),
            Arc::new(client.finish()),
            Arc::new(detail.finish()),
        ]
    }

    fn rows(batch: &RecordBatch) -> Result<Vec<Self>, BatchError> {
        let time = column(batch, "time")?
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or(BatchError::Column("time"))?;
        let event = utf8(batch, "event")?;
        let actor = utf8(batch, "actor")?;
        let target = utf8(batch, "target")?;
        let client = utf8(batch, "client")?;
        let detail = utf8(batch, "detail")?;
        Ok((0..batch.num_rows())
            .map(|row| AuditEvent {
                time_ns: time.value(row),
                event: event.value(row).to_string(),
                actor: actor.value(row).to_string(),
                target: target.value(row).to_string(),
                client: client.value(row).to_string(),
                detail: detail.value(row).to_string(),
            })
            .collect())
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
