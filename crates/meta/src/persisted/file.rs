//! The persisted index's file: an Arrow IPC file of rows, one a document
//! of a shard tree, with its format version in the schema's metadata.
//!
//! Rows are written a shard tree at a time, and inside a shard tree a
//! thread's directory at a time, so the rows of each are one range: the
//! reader finds them by tree id. Columns: `shard_tree`, `unit` (the
//! thread directory's tree holding the document, or null), `blob` (the
//! document's blob), `body_left` (bytes of body left in that blob and
//! not in `doc`), `doc` (the document's JSON; a long body left out).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, FixedSizeBinaryBuilder, UInt32Builder};
use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use gix::ObjectId;

/// The file's name, beside the meta log.
pub const FILE_NAME: &str = "meta-index.arrow";

/// The key of the format version in the schema's metadata.
const FORMAT_KEY: &str = "vole.meta-index.format";

/// Bumped whenever what a row means changes: a file of another version is
/// not read (the index is read from git and the file written again).
pub const FORMAT_VERSION: &str = "1";

/// The key of the writer's version: a long-bodied row's `doc` is the
/// document as this build's types parse and write it back (a field an
/// older or newer build does not know would be dropped), so a file is
/// read only by the version of vole that wrote it, and the document
/// schema it knew.
const WRITER_KEY: &str = "vole.meta-index.writer";

fn writer() -> String {
    format!(
        "vole {} schema {}",
        env!("CARGO_PKG_VERSION"),
        crate::entity::SCHEMA_V
    )
}

/// The start of the name of a file being written.
pub(crate) const TMP_PREFIX: &str = ".meta-index-";

/// Rows per record batch written.
const BATCH_ROWS: usize = 8192;

/// Object ids as the file holds them (SHA-1, the metadata repos' kind).
const OID_BYTES: i32 = 20;

/// Why the file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not an index file vole can read: {source}")]
    Arrow {
        path: PathBuf,
        source: arrow_schema::ArrowError,
    },
    #[error("{path}: {why}")]
    Format { path: PathBuf, why: String },
}

/// One document as a row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub unit: Option<ObjectId>,
    pub blob: ObjectId,
    pub body_left: u32,
    pub doc: Vec<u8>,
}

fn schema() -> Arc<Schema> {
    let oid = DataType::FixedSizeBinary(OID_BYTES);
    let metadata = HashMap::from([
        (FORMAT_KEY.to_string(), FORMAT_VERSION.to_string()),
        (WRITER_KEY.to_string(), writer()),
    ]);
    Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("shard_tree", oid.clone(), false),
            Field::new("unit", oid.clone(), true),
            Field::new("blob", oid, false),
            Field::new("body_left", DataType::UInt32, false),
            Field::new("doc", DataType::Binary, false),
        ],
        metadata,
    ))
}

/// A file read whole: its rows, and where each tree's are.
pub struct Persisted {
    batches: Vec<RecordBatch>,
    /// The global row number each batch starts at.
    starts: Vec<usize>,
    pub(crate) shards: HashMap<ObjectId, Range<usize>>,
    pub(crate) units: HashMap<ObjectId, Range<usize>>,
}

impl std::fmt::Debug for Persisted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persisted")
            .field("rows", &self.len())
            .field("shards", &self.shards.len())
            .field("units", &self.units.len())
            .finish()
    }
}

fn oid_at(column: &ArrayRef, i: usize) -> Option<ObjectId> {
    let column = column.as_fixed_size_binary();
    if column.is_null(i) {
        return None;
    }
    ObjectId::try_from(column.value(i)).ok()
}

impl Persisted {
    /// Reads the file at `path`. `Ok(None)`: there is none.
    pub fn read(path: &Path) -> Result<Option<Persisted>, PersistError> {
        let io = |source| PersistError::Io {
            path: path.to_path_buf(),
            source,
        };
        let arrow = |source| PersistError::Arrow {
            path: path.to_path_buf(),
            source,
        };
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        let reader =
            arrow_ipc::reader::FileReader::try_new(BufReader::new(file), None).map_err(arrow)?;
        let version = reader.schema().metadata().get(FORMAT_KEY).cloned();
        if version.as_deref() != Some(FORMAT_VERSION) {
            return Err(PersistError::Format {
                path: path.to_path_buf(),
                why: format!(
                    "format version {} where this vole reads {FORMAT_VERSION}",
                    version.as_deref().unwrap_or("(none)")
                ),
            });
        }
        let written_by = reader.schema().metadata().get(WRITER_KEY).cloned();
        if written_by.as_deref() != Some(writer().as_str()) {
            return Err(PersistError::Format {
                path: path.to_path_buf(),
                why: format!(
                    "written by {} where this is {}",
                    written_by.as_deref().unwrap_or("(none)"),
                    writer()
                ),
            });
        }
        if reader.schema().fields() != schema().fields() {
            return Err(PersistError::Format {
                path: path.to_path_buf(),
                why: "its columns are not the format's".into(),
            });
        }
        let mut persisted = Persisted {
            batches: Vec::new(),
            starts: Vec::new(),
            shards: HashMap::new(),
            units: HashMap::new(),
        };
        let mut at = 0;
        let mut shard: Option<(ObjectId, usize)> = None;
        let mut unit: Option<(ObjectId, usize)> = None;
        for batch in reader {
            let batch = batch.map_err(arrow)?;
            for i in 0..batch.num_rows() {
                let row = at + i;
                let bad = || PersistError::Format {
                    path: path.to_path_buf(),
                    why: format!("row {row} has an object id that is not one"),
                };
                let tree = oid_at(batch.column(0), i).ok_or_else(bad)?;
                if shard.is_none_or(|(t, _)| t != tree)
                    && let Some((t, from)) = shard.replace((tree, row))
                {
                    persisted.shards.insert(t, from..row);
                }
                let of = oid_at(batch.column(1), i);
                if unit.map(|(u, _)| u) != of {
                    if let Some((u, from)) = unit.take() {
                        persisted.units.insert(u, from..row);
                    }
                    unit = of.map(|u| (u, row));
                }
            }
            persisted.starts.push(at);
            at += batch.num_rows();
            persisted.batches.push(batch);
        }
        if let Some((t, from)) = shard {
            persisted.shards.insert(t, from..at);
        }
        if let Some((u, from)) = unit {
            persisted.units.insert(u, from..at);
        }
        Ok(Some(persisted))
    }

    /// Rows in all.
    pub fn len(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the file holds shard tree `tree`.
    pub fn has_shard(&self, tree: &ObjectId) -> bool {
        self.shards.contains_key(tree)
    }

    /// Row `row` (global), its document borrowed.
    pub fn row_ref(&self, row: usize) -> (Option<ObjectId>, ObjectId, u32, &[u8]) {
        let b = self.starts.partition_point(|&s| s <= row) - 1;
        let batch = &self.batches[b];
        let i = row - self.starts[b];
        let blob =
            oid_at(batch.column(2), i).unwrap_or_else(|| ObjectId::null(gix::hash::Kind::Sha1));
        (
            oid_at(batch.column(1), i),
            blob,
            batch.column(3).as_primitive::<UInt32Type>().value(i),
            batch.column(4).as_binary::<i32>().value(i),
        )
    }

    /// Row `row` (global).
    pub fn row(&self, row: usize) -> Row {
        let (unit, blob, body_left, doc) = self.row_ref(row);
        Row {
            unit,
            blob,
            body_left,
            doc: doc.to_vec(),
        }
    }
}

/// A file being written, a shard tree at a time, into a temporary file
/// beside where it goes.
pub struct Writing {
    path: PathBuf,
    tmp: tempfile::NamedTempFile,
    writer: arrow_ipc::writer::FileWriter<BufWriter<File>>,
    trees: FixedSizeBinaryBuilder,
    units: FixedSizeBinaryBuilder,
    blobs: FixedSizeBinaryBuilder,
    lefts: UInt32Builder,
    docs: BinaryBuilder,
    pending: usize,
    pub(crate) rows: usize,
    pub(crate) shards: std::collections::HashSet<ObjectId>,
}

impl Writing {
    /// Starts a file that will replace `path` once finished.
    pub fn begin(path: &Path) -> Result<Writing, PersistError> {
        let io = |source| PersistError::Io {
            path: path.to_path_buf(),
            source,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let tmp = tempfile::Builder::new()
            .prefix(TMP_PREFIX)
            .tempfile_in(dir)
            .map_err(io)?;
        let file = tmp.reopen().map_err(io)?;
        let writer = arrow_ipc::writer::FileWriter::try_new(BufWriter::new(file), &schema())
            .map_err(|source| PersistError::Arrow {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Writing {
            path: path.to_path_buf(),
            tmp,
            writer,
            trees: FixedSizeBinaryBuilder::new(OID_BYTES),
            units: FixedSizeBinaryBuilder::new(OID_BYTES),
            blobs: FixedSizeBinaryBuilder::new(OID_BYTES),
            lefts: UInt32Builder::new(),
            docs: BinaryBuilder::new(),
            pending: 0,
            rows: 0,
            shards: Default::default(),
        })
    }

    /// Adds the rows of shard tree `tree` (each once: a second call for
    /// the same tree is ignored, as two repos can hold the same tree).
    /// A row whose ids are not SHA-1 leaves the whole tree out.
    pub fn shard(&mut self, tree: ObjectId, rows: &[Row]) -> Result<(), PersistError> {
        let sha1 = |id: &ObjectId| id.as_bytes().len() == OID_BYTES as usize;
        // An empty tree has no rows to find it by (and costs nothing to
        // read from git).
        if rows.is_empty()
            || !sha1(&tree)
            || rows
                .iter()
                .any(|r| !sha1(&r.blob) || r.unit.as_ref().is_some_and(|u| !sha1(u)))
            || !self.shards.insert(tree)
        {
            return Ok(());
        }
        for row in rows {
            let path = &self.path;
            let arrow = |source| PersistError::Arrow {
                path: path.clone(),
                source,
            };
            self.trees.append_value(tree.as_bytes()).map_err(arrow)?;
            match &row.unit {
                Some(unit) => self.units.append_value(unit.as_bytes()).map_err(arrow)?,
                None => self.units.append_null(),
            }
            self.blobs
                .append_value(row.blob.as_bytes())
                .map_err(arrow)?;
            self.lefts.append_value(row.body_left);
            self.docs.append_value(&row.doc);
            self.pending += 1;
            self.rows += 1;
            if self.pending >= BATCH_ROWS {
                self.flush_batch()?;
            }
        }
        Ok(())
    }

    fn arrow_error(&self, source: arrow_schema::ArrowError) -> PersistError {
        PersistError::Arrow {
            path: self.path.clone(),
            source,
        }
    }

    fn flush_batch(&mut self) -> Result<(), PersistError> {
        if self.pending == 0 {
            return Ok(());
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.trees.finish()),
            Arc::new(self.units.finish()),
            Arc::new(self.blobs.finish()),
            Arc::new(self.lefts.finish()),
            Arc::new(self.docs.finish()),
        ];
        self.pending = 0;
        let batch = RecordBatch::try_new(schema(), columns).map_err(|e| self.arrow_error(e))?;
        self.writer.write(&batch).map_err(|e| self.arrow_error(e))
    }

    /// Ends the file, syncs it and moves it into place (the directory
    /// synced too).
    pub fn finish(mut self) -> Result<(), PersistError> {
        self.flush_batch()?;
        self.writer.finish().map_err(|e| self.arrow_error(e))?;
        let path = self.path.clone();
        let io = |source| PersistError::Io {
            path: path.clone(),
            source,
        };
        let arrow = |source| PersistError::Arrow {
            path: path.clone(),
            source,
        };
        let mut inner = self.writer.into_inner().map_err(arrow)?;
        std::io::Write::flush(&mut inner).map_err(io)?;
        inner.get_ref().sync_all().map_err(io)?;
        drop(inner);
        self.tmp.persist(&path).map_err(|e| io(e.error))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        vole_git::durable::sync_dir(dir).map_err(io)
    }
}
