//! The metadata log's record kind: [`MetaWrite`], one entity document
//! written; its Arrow schema, the batch body laid out directly, and row
//! conversion.

use arrow_schema::Field;
use serde::{Deserialize, Serialize};

use vole_log::frame::BatchBody;
use vole_log::record::RecordKind;

/// One metadata entity written (issue, comment, change request, ACL, settings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaWrite {
    pub time_ns: i64,
    pub repo: String,
    pub entity_id: String,
    /// `0..=255`: the `refs/meta/shards/xx` this entity's thread lives on.
    pub shard: u8,
    /// Entity kind, e.g. `issue`, `comment`.
    pub kind: String,
    /// The entity's JSON document.
    pub body: String,
    /// The incarnation of the repo written to
    /// ([`vole_git::repos::Incarnation`]); empty for the system repo and for
    /// records written before incarnations existed (schema version 1).
    pub incarnation: String,
}

impl RecordKind for MetaWrite {
    const KIND: &'static str = "meta_write";
    const FILE_NAME: &'static str = "meta.arrow";
    const SCHEMA_VERSION: u32 = 2;

    /// Version 1: no `incarnation`.
    fn previous_fields() -> Option<Vec<Field>> {
        let mut fields = Self::fields();
        fields.retain(|field| field.name() != "incarnation");
        Some(fields)
    }

    fn body(rows: &[Self]) -> Option<BatchBody> {
        let strings: usize = rows
            .iter()
            .map(|r| {
                r.repo.len()
                    + r.entity_id.len()
                    + r.kind.len()
                    + r.body.len()
                    + r.incarnation.len()
                    + 20
            })
            .sum();
        let mut body = BatchBody::new(rows.len(), strings + rows.len() * 9);
        body.fixed(rows.iter().map(|r| r.time_ns.to_le_bytes()));
        body.utf8(rows.iter().map(|r| r.repo.as_str()));
        body.utf8(rows.iter().map(|r| r.entity_id.as_str()));
        body.fixed(rows.iter().map(|r| [r.shard]));
        body.utf8(rows.iter().map(|r| r.kind.as_str()));
        body.utf8(rows.iter().map(|r| r.body.as_str()));
        body.utf8(rows.iter().map(|r| r.incarnation.as_str()));
        Some(body)
    }

    vole_log::record_columns! {
        |r| {
            time: Time("time") = r.time_ns,
            repo: Utf8("repo") = &r.repo,
            entity_id: Utf8("entity_id") = &r.entity_id,
            shard: U8("shard") = r.shard,
            kind: Utf8("kind") = &r.kind,
            body: Utf8("body") = &r.body,
            // Absent in version 1 files: written before incarnations.
            incarnation: Utf8SinceV2("incarnation") = &r.incarnation,
        }
        |row| Ok(MetaWrite {
            time_ns: time,
            repo: repo.to_string(),
            entity_id: entity_id.to_string(),
            shard,
            kind: kind.to_string(),
            body: body.to_string(),
            incarnation: incarnation.to_string(),
        })
    }
}
