//! The metadata log's record kind: [`MetaWrite`], one entity document
//! written; its Arrow schema, the batch body laid out directly, and row
//! conversion.

use std::sync::{Arc, OnceLock};

use arrow_array::builder::{TimestampNanosecondBuilder, UInt8Builder};
use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt8Type};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, SchemaRef};
use serde::{Deserialize, Serialize};

use vole_log::frame::BatchBody;
use vole_log::record::{
    BatchError, RecordKind, column, schema_once, string_builder, time_field, utf8,
};

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

    fn batch_schema() -> SchemaRef {
        static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
        schema_once(&SCHEMA, Self::fields)
    }

    fn fields() -> Vec<Field> {
        let mut fields = Self::previous_fields().expect("version 1 is readable");
        fields.push(Field::new("incarnation", DataType::Utf8, false));
        fields
    }

    /// Version 1: no `incarnation`.
    fn previous_fields() -> Option<Vec<Field>> {
        Some(vec![
            time_field(),
            Field::new("repo", DataType::Utf8, false),
            Field::new("entity_id", DataType::Utf8, false),
            Field::new("shard", DataType::UInt8, false),
            Field::new("kind", DataType::Utf8, false),
            Field::new("body", DataType::Utf8, false),
        ])
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

    fn columns(rows: &[Self]) -> Vec<ArrayRef> {
        let mut time = TimestampNanosecondBuilder::with_capacity(rows.len()).with_timezone("UTC");
        let mut repo = string_builder(rows, |r| &r.repo);
        let mut entity_id = string_builder(rows, |r| &r.entity_id);
        let mut shard = UInt8Builder::with_capacity(rows.len());
        let mut kind = string_builder(rows, |r| &r.kind);
        let mut body = string_builder(rows, |r| &r.body);
        let mut incarnation = string_builder(rows, |r| &r.incarnation);
        for row in rows {
            time.append_value(row.time_ns);
            repo.append_value(&row.repo);
            entity_id.append_value(&row.entity_id);
            shard.append_value(row.shard);
            kind.append_value(&row.kind);
            body.append_value(&row.body);
            incarnation.append_value(&row.incarnation);
        }
        vec![
            Arc::new(time.finish()),
            Arc::new(repo.finish()),
            Arc::new(entity_id.finish()),
            Arc::new(shard.finish()),
            Arc::new(kind.finish()),
            Arc::new(body.finish()),
            Arc::new(incarnation.finish()),
        ]
    }

    fn rows(batch: &RecordBatch) -> Result<Vec<Self>, BatchError> {
        let time = column(batch, "time")?
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or(BatchError::Column("time"))?;
        let repo = utf8(batch, "repo")?;
        let entity_id = utf8(batch, "entity_id")?;
        let shard = column(batch, "shard")?
            .as_primitive_opt::<UInt8Type>()
            .ok_or(BatchError::Column("shard"))?;
        let kind = utf8(batch, "kind")?;
        let body = utf8(batch, "body")?;
        // Absent in version 1 files: written before incarnations.
        let incarnation = batch
            .column_by_name("incarnation")
            .map(|_| utf8(batch, "incarnation"))
            .transpose()?;
        Ok((0..batch.num_rows())
            .map(|row| MetaWrite {
                time_ns: time.value(row),
                repo: repo.value(row).to_string(),
                entity_id: entity_id.value(row).to_string(),
                shard: shard.value(row),
                kind: kind.value(row).to_string(),
                body: body.value(row).to_string(),
                incarnation: incarnation
                    .map(|c| c.value(row).to_string())
                    .unwrap_or_default(),
            })
            .collect())
    }
}
