//! The record kinds the log stores, their Arrow schemas, and the conversion
//! between typed rows and one-batch-per-transaction `RecordBatch`es.
//!
//! Each kind lives in its own stream file ([`RecordKind::FILE_NAME`]) with
//! its own schema; see the module doc of [`crate::log`] for why.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arrow_array::builder::{
    FixedSizeBinaryBuilder, StringBuilder, TimestampNanosecondBuilder, UInt8Builder, UInt64Builder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt8Type, UInt64Type};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};

use super::frame::BatchBody;

/// Schema metadata keys every log stream carries.
pub mod meta_keys {
    /// The record kind, e.g. `ref_move`.
    pub const KIND: &str = "vole.kind";
    /// The schema version of that kind, e.g. `1`.
    pub const VERSION: &str = "vole.schema_version";
    /// Sequence number of the first transaction frame in this file.
    pub const BASE_SEQ: &str = "vole.base_seq";
    /// How many leading batches are a checkpoint (carry no sequence number).
    pub const CHECKPOINT_FRAMES: &str = "vole.checkpoint_frames";
}

/// Why a batch could not be turned back into rows.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("arrow: {0}")]
    Arrow(#[from] ArrowError),
    #[error("column {0:?} is missing or has the wrong type")]
    Column(&'static str),
    #[error("column {column:?} row {row}: {reason}")]
    Value {
        column: &'static str,
        row: usize,
        reason: String,
    },
}

/// One kind of log record: its file, schema, and row conversion.
pub trait RecordKind: Sized + Clone + Send + Sync + 'static {
    /// Written into the schema metadata as `vole.kind`.
    const KIND: &'static str;
    /// The stream file under `data/log/`.
    const FILE_NAME: &'static str;
    const SCHEMA_VERSION: u32;

    /// The columns, without metadata (the log adds `vole.*` keys).
    fn fields() -> Vec<Field>;
    /// `fields()` as a schema, built once per kind (each transaction's
    /// batch carries it; building it per batch was a dozen allocations).
    fn batch_schema() -> SchemaRef;
    /// Rows -> arrays, in `fields()` order.
    fn columns(rows: &[Self]) -> Vec<ArrayRef>;
    /// A batch (as read back) -> rows.
    fn rows(batch: &RecordBatch) -> Result<Vec<Self>, RecordError>;
    /// The batch's IPC body laid out directly, for a kind on a hot path
    /// (see [`BatchBody`]); it must encode to the same bytes as
    /// [`RecordKind::batch`]. `None`: arrow encodes the batch.
    fn body(_rows: &[Self]) -> Option<BatchBody> {
        None
    }

    /// The schema a stream file of this kind starts with.
    fn schema(base_seq: u64, checkpoint_frames: u64) -> SchemaRef {
        let metadata = HashMap::from([
            (meta_keys::KIND.to_string(), Self::KIND.to_string()),
            (
                meta_keys::VERSION.to_string(),
                Self::SCHEMA_VERSION.to_string(),
            ),
            (meta_keys::BASE_SEQ.to_string(), base_seq.to_string()),
            (
                meta_keys::CHECKPOINT_FRAMES.to_string(),
                checkpoint_frames.to_string(),
            ),
        ]);
        Arc::new(Schema::new_with_metadata(Self::fields(), metadata))
    }

    /// One transaction's rows as a batch (schema without metadata: the
    /// stream's schema message carries it once).
    fn batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        RecordBatch::try_new(Self::batch_schema(), Self::columns(rows))
    }
}

/// Where a ref move stands in git's reference transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Phase {
    /// git is about to move the ref (logged and durable before it may).
    Prepared = 0,
    /// git moved it.
    Committed = 1,
    /// git gave up; nothing moved.
    Aborted = 2,
    /// Found at start-up: a `prepared` without outcome resolved, or a ref
    /// moved on disk outside vole.
    Reconciled = 3,
    /// A compaction checkpoint row: the ref's value at the checkpoint.
    Checkpoint = 4,
    /// Found at start-up: a committed move whose write git lost (the ref
    /// file empty, unreadable, or back at the move's old value, as a power
    /// cut leaves it), written again from the log. `old` is what the disk
    /// held (none when unreadable), `new` the committed value.
    Restored = 5,
}

impl Phase {
    pub fn from_u8(value: u8) -> Option<Phase> {
        Some(match value {
            0 => Phase::Prepared,
            1 => Phase::Committed,
            2 => Phase::Aborted,
            3 => Phase::Reconciled,
            4 => Phase::Checkpoint,
            5 => Phase::Restored,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Prepared => "prepared",
            Phase::Committed => "committed",
            Phase::Aborted => "aborted",
            Phase::Reconciled => "reconciled",
            Phase::Checkpoint => "checkpoint",
            Phase::Restored => "restored",
        }
    }
}

/// One ref moved (or about to be) by one transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefMove {
    /// Nanoseconds since the Unix epoch (UTC).
    pub time_ns: i64,
    pub repo: String,
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// Hex object id before; `None` when the ref is created.
    pub old: Option<String>,
    /// Hex object id after; `None` when the ref is deleted.
    pub new: Option<String>,
    /// Who moved it: the authenticated user, or `anonymous`.
    pub actor: String,
    /// The client's IP address as the server saw it (no port).
    pub client: String,
    /// Shared by the moves of one push.
    pub push_id: u64,
    pub phase: Phase,
}

/// Bytes of a SHA-1 object id.
pub const OID_LEN: usize = 20;

/// Raw bytes of a hex oid; `None` (and anything that is not 40 hex digits)
/// becomes git's all-zero oid, which is how git itself says "no object".
fn oid_bytes(hex_oid: &Option<String>) -> [u8; OID_LEN] {
    let mut out = [0u8; OID_LEN];
    if let Some(h) = hex_oid
        && hex::decode_to_slice(h, &mut out).is_err()
    {
        out = [0u8; OID_LEN];
    }
    out
}

fn oid_hex(bytes: &[u8]) -> Option<String> {
    bytes.iter().any(|&b| b != 0).then(|| hex::encode(bytes))
}

impl RecordKind for RefMove {
    const KIND: &'static str = "ref_move";
    const FILE_NAME: &'static str = "refs.arrow";
    const SCHEMA_VERSION: u32 = 1;

    fn batch_schema() -> SchemaRef {
        static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
        schema_once(&SCHEMA, Self::fields)
    }

    fn fields() -> Vec<Field> {
        vec![
            Field::new(
                "time",
                DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
                false,
            ),
            Field::new("repo", DataType::Utf8, false),
            Field::new("ref", DataType::Utf8, false),
            // git's all-zero oid stands for "none" (creation / deletion),
            // as in git's own hook input; no validity bitmap needed.
            Field::new("old", DataType::FixedSizeBinary(OID_LEN as i32), false),
            Field::new("new", DataType::FixedSizeBinary(OID_LEN as i32), false),
            // `user@client-address`, e.g. `alice@127.0.0.1`: one column,
            // because every column costs 48-64 bytes of IPC metadata per
            // batch, and this keeps a one-ref move within 680 bytes.
            // User names never contain '@'.
            Field::new("actor", DataType::Utf8, false),
            Field::new("push_id", DataType::UInt64, false),
            Field::new("phase", DataType::UInt8, false),
        ]
    }

    fn columns(rows: &[Self]) -> Vec<ArrayRef> {
        let mut time = TimestampNanosecondBuilder::with_capacity(rows.len()).with_timezone("UTC");
        let mut repo = string_builder(rows, |r| &r.repo);
        let mut ref_name = string_builder(rows, |r| &r.ref_name);
        let mut old = FixedSizeBinaryBuilder::with_capacity(rows.len(), OID_LEN as i32);
        let mut new = FixedSizeBinaryBuilder::with_capacity(rows.len(), OID_LEN as i32);
        let mut actor = StringBuilder::with_capacity(
            rows.len(),
            rows.iter()
                .map(|r| r.actor.len() + 1 + r.client.len())
                .sum(),
        );
        let mut push_id = UInt64Builder::with_capacity(rows.len());
        let mut phase = UInt8Builder::with_capacity(rows.len());
        for row in rows {
            time.append_value(row.time_ns);
            repo.append_value(&row.repo);
            ref_name.append_value(&row.ref_name);
            old.append_value(oid_bytes(&row.old))
                .expect("oid_bytes returns OID_LEN bytes");
            new.append_value(oid_bytes(&row.new))
                .expect("oid_bytes returns OID_LEN bytes");
            actor.append_value(format!("{}@{}", row.actor, row.client));
            push_id.append_value(row.push_id);
            phase.append_value(row.phase as u8);
        }
        vec![
            Arc::new(time.finish()),
            Arc::new(repo.finish()),
            Arc::new(ref_name.finish()),
            Arc::new(old.finish()),
            Arc::new(new.finish()),
            Arc::new(actor.finish()),
            Arc::new(push_id.finish()),
            Arc::new(phase.finish()),
        ]
    }

    fn rows(batch: &RecordBatch) -> Result<Vec<Self>, RecordError> {
        let time = column(batch, "time")?
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or(RecordError::Column("time"))?;
        let repo = utf8(batch, "repo")?;
        let ref_name = utf8(batch, "ref")?;
        let old = binary(batch, "old")?;
        let new = binary(batch, "new")?;
        let actor = utf8(batch, "actor")?;
        let push_id = column(batch, "push_id")?
            .as_primitive_opt::<UInt64Type>()
            .ok_or(RecordError::Column("push_id"))?;
        let phase = column(batch, "phase")?
            .as_primitive_opt::<UInt8Type>()
            .ok_or(RecordError::Column("phase"))?;
        (0..batch.num_rows())
            .map(|row| {
                let (who, client) = actor
                    .value(row)
                    .split_once('@')
                    .unwrap_or((actor.value(row), ""));
                Ok(RefMove {
                    time_ns: time.value(row),
                    repo: repo.value(row).to_string(),
                    ref_name: ref_name.value(row).to_string(),
                    old: oid_hex(old.value(row)),
                    new: oid_hex(new.value(row)),
                    actor: who.to_string(),
                    client: client.to_string(),
                    push_id: push_id.value(row),
                    phase: Phase::from_u8(phase.value(row)).ok_or_else(|| RecordError::Value {
                        column: "phase",
                        row,
                        reason: format!("unknown phase {}", phase.value(row)),
                    })?,
                })
            })
            .collect()
    }
}

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
}

/// A kind's batch schema, built on first use (a `static` inside a generic
/// default method would be one for all kinds, so each kind keeps its own
/// cell and passes it here).
fn schema_once(cell: &'static OnceLock<SchemaRef>, fields: fn() -> Vec<Field>) -> SchemaRef {
    cell.get_or_init(|| Arc::new(Schema::new(fields()))).clone()
}

/// A string column's builder sized for exactly these rows: the default
/// (room for 1,024 values and 1,024 bytes) allocated ~5 KiB per column for
/// a one-row transaction.
fn string_builder<R>(rows: &[R], value: impl Fn(&R) -> &String) -> StringBuilder {
    StringBuilder::with_capacity(rows.len(), rows.iter().map(|r| value(r).len()).sum())
}

impl RecordKind for MetaWrite {
    const KIND: &'static str = "meta_write";
    const FILE_NAME: &'static str = "meta.arrow";
    const SCHEMA_VERSION: u32 = 1;

    fn batch_schema() -> SchemaRef {
        static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
        schema_once(&SCHEMA, Self::fields)
    }

    fn fields() -> Vec<Field> {
        vec![
            Field::new(
                "time",
                DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
                false,
            ),
            Field::new("repo", DataType::Utf8, false),
            Field::new("entity_id", DataType::Utf8, false),
            Field::new("shard", DataType::UInt8, false),
            Field::new("kind", DataType::Utf8, false),
            Field::new("body", DataType::Utf8, false),
        ]
    }

    fn body(rows: &[Self]) -> Option<BatchBody> {
        let strings: usize = rows
            .iter()
            .map(|r| r.repo.len() + r.entity_id.len() + r.kind.len() + r.body.len() + 16)
            .sum();
        let mut body = BatchBody::new(rows.len(), strings + rows.len() * 9);
        body.fixed(rows.iter().map(|r| r.time_ns.to_le_bytes()));
        body.utf8(rows.iter().map(|r| r.repo.as_str()));
        body.utf8(rows.iter().map(|r| r.entity_id.as_str()));
        body.fixed(rows.iter().map(|r| [r.shard]));
        body.utf8(rows.iter().map(|r| r.kind.as_str()));
        body.utf8(rows.iter().map(|r| r.body.as_str()));
        Some(body)
    }

    fn columns(rows: &[Self]) -> Vec<ArrayRef> {
        let mut time = TimestampNanosecondBuilder::with_capacity(rows.len()).with_timezone("UTC");
        let mut repo = string_builder(rows, |r| &r.repo);
        let mut entity_id = string_builder(rows, |r| &r.entity_id);
        let mut shard = UInt8Builder::with_capacity(rows.len());
        let mut kind = string_builder(rows, |r| &r.kind);
        let mut body = string_builder(rows, |r| &r.body);
        for row in rows {
            time.append_value(row.time_ns);
            repo.append_value(&row.repo);
            entity_id.append_value(&row.entity_id);
            shard.append_value(row.shard);
            kind.append_value(&row.kind);
            body.append_value(&row.body);
        }
        vec![
            Arc::new(time.finish()),
            Arc::new(repo.finish()),
            Arc::new(entity_id.finish()),
            Arc::new(shard.finish()),
            Arc::new(kind.finish()),
            Arc::new(body.finish()),
        ]
    }

    fn rows(batch: &RecordBatch) -> Result<Vec<Self>, RecordError> {
        let time = column(batch, "time")?
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or(RecordError::Column("time"))?;
        let repo = utf8(batch, "repo")?;
        let entity_id = utf8(batch, "entity_id")?;
        let shard = column(batch, "shard")?
            .as_primitive_opt::<UInt8Type>()
            .ok_or(RecordError::Column("shard"))?;
        let kind = utf8(batch, "kind")?;
        let body = utf8(batch, "body")?;
        Ok((0..batch.num_rows())
            .map(|row| MetaWrite {
                time_ns: time.value(row),
                repo: repo.value(row).to_string(),
                entity_id: entity_id.value(row).to_string(),
                shard: shard.value(row),
                kind: kind.value(row).to_string(),
                body: body.value(row).to_string(),
            })
            .collect())
    }
}

fn column<'a>(batch: &'a RecordBatch, name: &'static str) -> Result<&'a ArrayRef, RecordError> {
    batch.column_by_name(name).ok_or(RecordError::Column(name))
}

fn utf8<'a>(
    batch: &'a RecordBatch,
    name: &'static str,
) -> Result<&'a arrow_array::StringArray, RecordError> {
    column(batch, name)?
        .as_string_opt::<i32>()
        .ok_or(RecordError::Column(name))
}

fn binary<'a>(
    batch: &'a RecordBatch,
    name: &'static str,
) -> Result<&'a arrow_array::FixedSizeBinaryArray, RecordError> {
    column(batch, name)?
        .as_fixed_size_binary_opt()
        .filter(|a| a.value_length() == OID_LEN as i32)
        .ok_or(RecordError::Column(name))
}
