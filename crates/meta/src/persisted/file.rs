//! The persisted index's file: an Arrow IPC file of rows, one a document
//! of a shard tree, with its format version in the schema's metadata.
//!
//! Each record batch holds rows of one shard tree only (a large one takes
//! several batches in a row), so the reader keeps no row in memory: the
//! footer's metadata says the tree of each batch, the tree's rows, and
//! the repo and shard it was the tip of (a hint of where to look for a
//! thread directory unchanged since), a line a batch; a shard tree's
//! batches are read when that tree is. Inside a shard tree the rows of
//! one thread's directory are contiguous. Columns: `shard_tree` (each
//! batch read is checked to be its tree's), `unit` (the thread
//! directory's tree holding the document, or null), `blob` (the
//! document's blob), `body_left` (bytes of body left in that blob and not
//! in `doc`), `doc` (the document's JSON; a long body left out).

use std::collections::{HashMap, HashSet};
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
use parking_lot::Mutex;

/// The file's name, beside the meta log.
pub const FILE_NAME: &str = "meta-index.arrow";

/// The key of the format version in the schema's metadata.
const FORMAT_KEY: &str = "vole.meta-index.format";

/// Bumped whenever what a row means changes: a file of another version is
/// not read (the index is read from git and the file written again).
pub const FORMAT_VERSION: &str = "3";

/// The key, in the footer's metadata, of where each batch is: a line a
/// batch, in order, `<shard tree> <shard> <rows of the tree> <repo>` (the
/// tree's rows in all its batches, so a tree missing a batch is seen).
/// Read at open without reading the batches: a start at a million issues
/// read 350 MB to find them when they were columns.
pub(crate) const PLACES_KEY: &str = "vole.meta-index.places";

/// The key of the writer's version: a long-bodied row's `doc` is the
/// document as this build's types parse and write it back (a field an
/// older or newer build does not know would be dropped), so a file is
/// read only by the version of vole that wrote it, and the document
/// schema it knew.
const WRITER_KEY: &str = "vole.meta-index.writer";

fn writer() -> String {
    format!(
        "vole {} schema {} inline {} unit {}",
        env!("CARGO_PKG_VERSION"),
        crate::entity::SCHEMA_V,
        crate::index::stored::INLINE_BODY_BYTES,
        super::UNIT_DEPTH,
    )
}

/// The start of the name of a file being written.
pub(crate) const TMP_PREFIX: &str = ".meta-index-";

/// Rows per record batch written at most.
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
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
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

fn oid_at(column: &ArrayRef, i: usize) -> Option<ObjectId> {
    let column = column.as_fixed_size_binary();
    if column.is_null(i) {
        return None;
    }
    ObjectId::try_from(column.value(i)).ok()
}

type Reader = arrow_ipc::reader::FileReader<BufReader<File>>;

/// A file opened: which batches hold which shard tree, and where each
/// tree was a tip; rows are read a shard tree at a time.
pub struct Persisted {
    path: PathBuf,
    reader: Mutex<Reader>,
    pub(crate) shards: HashMap<ObjectId, Vec<usize>>,
    /// Each tree's rows, as the footer has them.
    tree_rows: HashMap<ObjectId, usize>,
    /// (repo, shard) → the tree the file holds for it.
    places: HashMap<(String, u8), ObjectId>,
}

impl std::fmt::Debug for Persisted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persisted")
            .field("path", &self.path)
            .field("shards", &self.shards.len())
            .finish()
    }
}

/// The rows of one shard tree, read from the file, with where each thread
/// directory's are.
pub struct ShardRows {
    batches: Vec<RecordBatch>,
    starts: Vec<usize>,
    /// Each thread directory's rows, found on first use: only a tree the
    /// file does not hold whole looks its directories up here. Made for
    /// every tree read, it was a hash map grown afresh per shard, and the
    /// fresh memory it faulted in was a quarter of a start's reading.
    units: std::cell::OnceCell<HashMap<ObjectId, Range<usize>>>,
}

impl ShardRows {
    fn new(batches: Vec<RecordBatch>) -> ShardRows {
        let mut starts = Vec::with_capacity(batches.len());
        let mut at = 0;
        for batch in &batches {
            starts.push(at);
            at += batch.num_rows();
        }
        ShardRows {
            batches,
            starts,
            units: std::cell::OnceCell::new(),
        }
    }

    /// The rows of the thread directory (or other unit) `unit`.
    pub(crate) fn unit(&self, unit: &ObjectId) -> Option<Range<usize>> {
        self.units
            .get_or_init(|| self.find_units())
            .get(unit)
            .cloned()
    }

    fn find_units(&self) -> HashMap<ObjectId, Range<usize>> {
        let mut units = HashMap::new();
        let mut unit: Option<(ObjectId, usize)> = None;
        let mut at = 0;
        for batch in &self.batches {
            for i in 0..batch.num_rows() {
                let of = oid_at(batch.column(1), i);
                if unit.map(|(u, _)| u) != of {
                    if let Some((u, from)) = unit.take() {
                        units.insert(u, from..at + i);
                    }
                    unit = of.map(|u| (u, at + i));
                }
            }
            at += batch.num_rows();
        }
        if let Some((u, from)) = unit {
            units.insert(u, from..at);
        }
        units
    }

    /// Rows in all.
    pub fn len(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `row`, its document borrowed.
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

    /// Row `row`.
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

impl Persisted {
    /// Opens the file at `path` and reads where its shard trees are.
    /// `Ok(None)`: there is none.
    pub fn read(path: &Path) -> Result<Option<Persisted>, PersistError> {
        let Some(reader) = open(path)? else {
            return Ok(None);
        };
        check_schema(path, &reader)?;
        let format = |why: String| PersistError::Format {
            path: path.to_path_buf(),
            why,
        };
        let lines = reader.custom_metadata().get(PLACES_KEY);
        let lines: Vec<&str> = lines.map_or_else(Vec::new, |l| l.lines().collect());
        if lines.len() != reader.num_batches() {
            return Err(format(format!(
                "{} batches and {} places of batches",
                reader.num_batches(),
                lines.len()
            )));
        }
        let mut shards: HashMap<ObjectId, Vec<usize>> = HashMap::new();
        let mut tree_rows = HashMap::new();
        let mut places_of = HashMap::new();
        for (index, line) in lines.into_iter().enumerate() {
            let mut parts = line.splitn(4, ' ');
            let place = (
                parts
                    .next()
                    .and_then(|t| ObjectId::from_hex(t.as_bytes()).ok()),
                parts.next().and_then(|s| s.parse::<u8>().ok()),
                parts.next().and_then(|n| n.parse::<usize>().ok()),
                parts.next(),
            );
            let (Some(tree), Some(shard), Some(rows), Some(repo)) = place else {
                return Err(format(format!(
                    "batch {index}'s place is not one: {line:?}"
                )));
            };
            if *tree_rows.entry(tree).or_insert(rows) != rows {
                return Err(format(format!(
                    "batch {index} gives tree {tree} {rows} rows where another gives {}",
                    tree_rows[&tree]
                )));
            }
            shards.entry(tree).or_default().push(index);
            places_of.insert((repo.to_string(), shard), tree);
        }
        Ok(Some(Persisted {
            path: path.to_path_buf(),
            reader: Mutex::new(reader),
            shards,
            tree_rows,
            places: places_of,
        }))
    }

    /// Whether the file holds shard tree `tree`.
    pub fn has_shard(&self, tree: &ObjectId) -> bool {
        self.shards.contains_key(tree)
    }

    /// The repo and shard `tree` was the tip of when written.
    pub fn place_of(&self, tree: &ObjectId) -> Option<(String, u8)> {
        self.places
            .iter()
            .find(|(_, t)| *t == tree)
            .map(|(place, _)| place.clone())
    }

    /// The tree the file holds of `shard` of `repo`, if any.
    pub fn tree_at(&self, repo: &str, shard: u8) -> Option<ObjectId> {
        self.places.get(&(repo.to_string(), shard)).copied()
    }

    /// The rows of shard tree `tree`, read from the file; `None`: it holds
    /// none, or they cannot be read (logged: the tree is read from git).
    pub fn shard_rows(&self, tree: &ObjectId) -> Option<ShardRows> {
        let batches = self.shards.get(tree)?;
        let mut reader = self.reader.lock();
        let mut read = Vec::with_capacity(batches.len());
        for &index in batches {
            let batch = reader
                .set_index(index)
                .and_then(|()| reader.next().transpose())
                .map(|b| {
                    b.filter(|b| b.num_rows() > 0 && oid_at(b.column(0), 0).as_ref() == Some(tree))
                });
            match batch {
                Ok(Some(batch)) => read.push(batch),
                Ok(None) => {
                    tracing::warn!(path = %self.path.display(), tree = %tree, "a batch of the persisted metadata index is not its tree's; the tree is read from git");
                    return None;
                }
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot read the persisted metadata index; the tree is read from git");
                    return None;
                }
            }
        }
        let rows: usize = read.iter().map(RecordBatch::num_rows).sum();
        if self.tree_rows.get(tree) != Some(&rows) {
            tracing::warn!(path = %self.path.display(), tree = %tree, rows, "the persisted metadata index holds another count of rows of a tree than its batches do; the tree is read from git");
            return None;
        }
        Some(ShardRows::new(read))
    }
}

fn open(path: &Path) -> Result<Option<Reader>, PersistError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(PersistError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    arrow_ipc::reader::FileReader::try_new(BufReader::new(file), None)
        .map(Some)
        .map_err(|source| PersistError::Arrow {
            path: path.to_path_buf(),
            source,
        })
}

fn check_schema(path: &Path, reader: &Reader) -> Result<(), PersistError> {
    let format = |why: String| PersistError::Format {
        path: path.to_path_buf(),
        why,
    };
    let schema = reader.schema();
    let version = schema.metadata().get(FORMAT_KEY).cloned();
    if version.as_deref() != Some(FORMAT_VERSION) {
        return Err(format(format!(
            "format version {} where this vole reads {FORMAT_VERSION}",
            version.as_deref().unwrap_or("(none)")
        )));
    }
    let written_by = schema.metadata().get(WRITER_KEY).cloned();
    if written_by.as_deref() != Some(writer().as_str()) {
        return Err(format(format!(
            "written by {} where this is {}",
            written_by.as_deref().unwrap_or("(none)"),
            writer()
        )));
    }
    if schema.fields() != crate::persisted::file::schema().fields() {
        return Err(format("its columns are not the format's".into()));
    }
    Ok(())
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
    /// The tree, shard and repo of the rows pending.
    pending_place: String,
    /// A line a batch written ([`PLACES_KEY`]).
    places: String,
    pending: usize,
    pub(crate) rows: usize,
    pub(crate) shards: HashSet<ObjectId>,
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
            pending_place: String::new(),
            places: String::new(),
            pending: 0,
            rows: 0,
            shards: HashSet::new(),
        })
    }

    /// Adds the rows of shard tree `tree`, the tip of `shard` of `repo`
    /// (each tree once: a second call for the same tree is ignored, as
    /// two repos can hold the same tree). A row whose ids are not SHA-1
    /// leaves the whole tree out.
    pub fn shard(
        &mut self,
        repo: &str,
        shard: u8,
        tree: ObjectId,
        rows: &[Row],
    ) -> Result<(), PersistError> {
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
        // No batch holds two trees.
        self.flush_batch()?;
        // A repo name (`RepoName`: letters, digits, `._-`) has no line
        // break; one that had would make the lines not one a batch, and
        // the file unread.
        self.pending_place = format!("{tree} {shard} {} {repo}", rows.len());
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
        self.writer.write(&batch).map_err(|e| self.arrow_error(e))?;
        self.places.push_str(&self.pending_place);
        self.places.push('\n');
        Ok(())
    }

    /// Ends the file, syncs it and moves it into place (the directory
    /// synced too).
    pub fn finish(mut self) -> Result<(), PersistError> {
        self.flush_batch()?;
        let places = std::mem::take(&mut self.places);
        self.writer.write_metadata(PLACES_KEY, places);
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
