//! What a record kind is ([`RecordKind`]: its file, schema and the
//! conversion between typed rows and one-batch-per-transaction
//! `RecordBatch`es), and the helpers kinds build their columns with (a
//! kind declares its columns once with [`crate::record_columns!`]). The
//! kinds themselves live with their owners: ref moves in
//! `hooks/record.rs`, metadata writes in `meta/record.rs`; the log knows
//! none of them.
//!
//! Each kind lives in its own stream file ([`RecordKind::FILE_NAME`]) with
//! its own schema; see the module doc of [`crate`] for why.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arrow_array::builder::StringBuilder;
use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};

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
pub enum BatchError {
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
    /// The columns of the schema version before this one, when a file of
    /// it can still be read: `rows` takes its batches (a column it lacks
    /// read as its default), and [`crate::Log::open`] rewrites such a
    /// file to the current schema before appending to it.
    fn previous_fields() -> Option<Vec<Field>> {
        None
    }
    /// `fields()` as a schema, built once per kind (each transaction's
    /// batch carries it; building it per batch was a dozen allocations).
    fn batch_schema() -> SchemaRef;
    /// Rows -> arrays, in `fields()` order.
    fn columns(rows: &[Self]) -> Vec<ArrayRef>;
    /// A batch (as read back) -> rows.
    fn rows(batch: &RecordBatch) -> Result<Vec<Self>, BatchError>;
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

/// A kind's batch schema, built on first use (a `static` inside a generic
/// default method would be one for all kinds, so each kind keeps its own
/// cell and passes it here).
/// The `time` column every record kind starts with: nanoseconds, UTC.
pub fn time_field() -> Field {
    Field::new(
        "time",
        DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        false,
    )
}

pub fn schema_once(cell: &'static OnceLock<SchemaRef>, fields: fn() -> Vec<Field>) -> SchemaRef {
    cell.get_or_init(|| Arc::new(Schema::new(fields()))).clone()
}

/// A string column's builder sized for exactly these rows: the default
/// (room for 1,024 values and 1,024 bytes) allocated ~5 KiB per column for
/// a one-row transaction.
pub fn string_builder<R>(rows: &[R], value: impl Fn(&R) -> &String) -> StringBuilder {
    StringBuilder::with_capacity(rows.len(), rows.iter().map(|r| value(r).len()).sum())
}

pub fn column<'a>(batch: &'a RecordBatch, name: &'static str) -> Result<&'a ArrayRef, BatchError> {
    batch.column_by_name(name).ok_or(BatchError::Column(name))
}

pub fn utf8<'a>(
    batch: &'a RecordBatch,
    name: &'static str,
) -> Result<&'a arrow_array::StringArray, BatchError> {
    column(batch, name)?
        .as_string_opt::<i32>()
        .ok_or(BatchError::Column(name))
}
