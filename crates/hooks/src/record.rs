//! The ref log's record kind: [`RefMove`], one ref moved (or about to be)
//! by one push's transaction, and its [`Phase`]; its Arrow schema and row
//! conversion. Written by the recorder, read back at start and by
//! `vole log dump`.

use std::sync::{Arc, OnceLock};

use arrow_array::builder::{
    FixedSizeBinaryBuilder, StringBuilder, TimestampNanosecondBuilder, UInt8Builder, UInt64Builder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt8Type, UInt64Type};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, SchemaRef};
use serde::{Deserialize, Serialize};

use vole_log::record::{
    BatchError, RecordKind, column, schema_once, string_builder, time_field, utf8,
};

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
    /// HEAD (the repo's default branch) was pointed at `ref`: by a push
    /// that left it naming a missing branch, by the settings or by `vole
    /// repo default-branch`. `new` is that branch's tip then, `old` none.
    /// Not a move of `ref`: the ref state ignores it.
    Head = 6,
    /// `vole repo gc` pruned the repo's unreachable objects: no ref moved
    /// (`ref` empty, `old` and `new` none). The ref state ignores it.
    Gc = 7,
    /// A repo was created under the name: `ref` holds its incarnation
    /// ([`vole_git::repos::Incarnation`]), `old` and `new` none. The rows of
    /// the name before it belong to earlier repos of the name (deleted
    /// since), the rows after it to this one. In a compaction's checkpoint
    /// (actor `vole-checkpoint`): the incarnation the checkpoint's rows of
    /// the name are of.
    Born = 8,
    /// The upgrade to incarnations: the repo of the name present then took
    /// incarnation `ref`, and the rows of the name before it are its.
    Adopted = 9,
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
            6 => Phase::Head,
            7 => Phase::Gc,
            8 => Phase::Born,
            9 => Phase::Adopted,
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
            Phase::Head => "head",
            Phase::Gc => "gc",
            Phase::Born => "born",
            Phase::Adopted => "adopted",
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

impl RefMove {
    /// What the move did to its ref: `created`, `deleted` or `updated`.
    pub fn action(&self) -> &'static str {
        match (&self.old, &self.new) {
            (None, Some(_)) => "created",
            (Some(_), None) => "deleted",
            _ => "updated",
        }
    }
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
            time_field(),
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

    fn rows(batch: &RecordBatch) -> Result<Vec<Self>, BatchError> {
        let time = column(batch, "time")?
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or(BatchError::Column("time"))?;
        let repo = utf8(batch, "repo")?;
        let ref_name = utf8(batch, "ref")?;
        let old = binary(batch, "old")?;
        let new = binary(batch, "new")?;
        let actor = utf8(batch, "actor")?;
        let push_id = column(batch, "push_id")?
            .as_primitive_opt::<UInt64Type>()
            .ok_or(BatchError::Column("push_id"))?;
        let phase = column(batch, "phase")?
            .as_primitive_opt::<UInt8Type>()
            .ok_or(BatchError::Column("phase"))?;
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
                    phase: Phase::from_u8(phase.value(row)).ok_or_else(|| BatchError::Value {
                        column: "phase",
                        row,
                        reason: format!("unknown phase {}", phase.value(row)),
                    })?,
                })
            })
            .collect()
    }
}

fn binary<'a>(
    batch: &'a RecordBatch,
    name: &'static str,
) -> Result<&'a arrow_array::FixedSizeBinaryArray, BatchError> {
    column(batch, name)?
        .as_fixed_size_binary_opt()
        .filter(|a| a.value_length() == OID_LEN as i32)
        .ok_or(BatchError::Column(name))
}
