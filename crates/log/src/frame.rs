//! Framing: encoding a schema or a transaction's batch as one Arrow IPC
//! stream message at 8-byte alignment, and reading messages back one at a
//! time with their offsets, telling a clean end from a torn or malformed one.
//!
//! An encapsulated IPC message is `0xFFFFFFFF`, a little-endian `u32`
//! metadata length, the flatbuffer `Message` (padded to the alignment), then
//! `bodyLength` bytes of buffers. Every message carries its own lengths, so
//! a stream written at 64-byte alignment and appended to at 8 reads fine.

use std::io::{self, Read};

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::convert::try_fb_to_schema;
use arrow_ipc::reader::read_record_batch;
use arrow_ipc::writer::{
    DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions, write_message,
};
use arrow_ipc::{MessageHeader, MetadataVersion};
use arrow_schema::{ArrowError, Schema, SchemaRef};

/// Buffer alignment of every frame vole writes. 8 is the IPC format's
/// minimum; the default 64 cost 2.26x the bytes for a one-row batch.
pub const ALIGNMENT: usize = 8;

const CONTINUATION: [u8; 4] = [0xFF; 4];
/// Sanity bounds: a length beyond these is garbage, not a frame.
const MAX_METADATA_LEN: u32 = 16 << 20;
const MAX_BODY_LEN: i64 = 1 << 30;

/// Encodes frames; one per log writer (it keeps the dictionary state arrow
/// needs, though vole's schemas use no dictionaries).
pub struct FrameEncoder {
    generator: IpcDataGenerator,
    tracker: DictionaryTracker,
    options: IpcWriteOptions,
    context: IpcWriteContext,
    /// For [`FrameEncoder::body`]'s messages.
    fbb: flatbuffers::FlatBufferBuilder<'static>,
}

impl Default for FrameEncoder {
    fn default() -> Self {
        FrameEncoder::new()
    }
}

impl FrameEncoder {
    pub fn new() -> FrameEncoder {
        FrameEncoder {
            generator: IpcDataGenerator::default(),
            tracker: DictionaryTracker::new(false),
            options: IpcWriteOptions::try_new(ALIGNMENT, false, MetadataVersion::V5)
                .expect("8 is a valid IPC alignment"),
            context: IpcWriteContext::default(),
            fbb: flatbuffers::FlatBufferBuilder::new(),
        }
    }

    /// The schema message a stream file starts with.
    pub fn schema(&mut self, schema: &Schema) -> Vec<u8> {
        let encoded = self.generator.schema_to_bytes_with_dictionary_tracker(
            schema,
            &mut self.tracker,
            &self.options,
        );
        let mut out = Vec::new();
        write_message(&mut out, encoded, &self.options).expect("writing to a Vec cannot fail");
        out
    }

    /// One transaction's batch as one message.
    pub fn batch(&mut self, batch: &RecordBatch) -> Result<Vec<u8>, ArrowError> {
        let (dictionaries, encoded) =
            self.generator
                .encode(batch, &mut self.tracker, &self.options, &mut self.context)?;
        debug_assert!(dictionaries.is_empty(), "log schemas use no dictionaries");
        let mut out = Vec::with_capacity(encoded.ipc_message.len() + encoded.arrow_data.len() + 8);
        write_message(&mut out, encoded, &self.options)?;
        Ok(out)
    }

    /// One transaction's batch as one message, from a body its kind laid
    /// out itself: the same bytes as [`FrameEncoder::batch`] gives for the
    /// same rows (a test holds them equal), without building arrays.
    pub fn body(&mut self, body: &BatchBody) -> Vec<u8> {
        let fbb = &mut self.fbb;
        fbb.reset();
        let buffers = fbb.create_vector(&body.buffers);
        let nodes = fbb.create_vector(&body.nodes);
        let mut batch = arrow_ipc::RecordBatchBuilder::new(fbb);
        batch.add_length(body.rows);
        batch.add_nodes(nodes);
        batch.add_buffers(buffers);
        let batch = batch.finish();
        let mut message = arrow_ipc::MessageBuilder::new(fbb);
        message.add_version(MetadataVersion::V5);
        message.add_header_type(MessageHeader::RecordBatch);
        message.add_bodyLength(body.bytes.len() as i64);
        message.add_header(batch.as_union_value());
        let message = message.finish();
        fbb.finish(message, None);
        let metadata = fbb.finished_data();
        let padded = (8 + metadata.len()).next_multiple_of(ALIGNMENT) - 8;
        let mut out = Vec::with_capacity(8 + padded + body.bytes.len());
        out.extend_from_slice(&CONTINUATION);
        out.extend_from_slice(&(padded as i32).to_le_bytes());
        out.extend_from_slice(metadata);
        out.resize(8 + padded, 0);
        out.extend_from_slice(&body.bytes);
        out
    }
}

/// A record batch's IPC body laid out column by column, for kinds whose
/// columns have no nulls: each column is a field node, an empty validity
/// buffer, then its data buffers, each padded to [`ALIGNMENT`].
///
/// Written here rather than built as arrow arrays: arrow's encoder walks
/// generic `ArrayData` (builders, buffers, data types cloned per column),
/// which for the one-row batch of a metadata write cost a fifth of the
/// writing thread's time; the body layout itself is fixed by the format.
#[derive(Debug)]
pub struct BatchBody {
    rows: i64,
    nodes: Vec<arrow_ipc::FieldNode>,
    buffers: Vec<arrow_ipc::Buffer>,
    bytes: Vec<u8>,
}

impl BatchBody {
    /// A body for `rows` rows, with room for `bytes` bytes of values.
    pub fn new(rows: usize, bytes: usize) -> BatchBody {
        BatchBody {
            rows: rows as i64,
            nodes: Vec::with_capacity(8),
            buffers: Vec::with_capacity(16),
            bytes: Vec::with_capacity(bytes + 16 * ALIGNMENT),
        }
    }

    fn column(&mut self) {
        self.nodes.push(arrow_ipc::FieldNode::new(self.rows, 0));
        // No nulls: a zero-length validity buffer (see FieldNode in Message.fbs).
        self.buffers
            .push(arrow_ipc::Buffer::new(self.bytes.len() as i64, 0));
    }

    fn buffer(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        write(&mut self.bytes);
        let len = self.bytes.len() - start;
        self.buffers
            .push(arrow_ipc::Buffer::new(start as i64, len as i64));
        self.bytes
            .resize(self.bytes.len().next_multiple_of(ALIGNMENT), 0);
    }

    /// A fixed-width column (Timestamp, UInt8, FixedSizeBinary, ...): each
    /// row's value as its little-endian bytes.
    pub fn fixed<const WIDTH: usize>(&mut self, values: impl Iterator<Item = [u8; WIDTH]>) {
        self.column();
        self.buffer(|out| values.for_each(|v| out.extend_from_slice(&v)));
    }

    /// A `Utf8` column.
    pub fn utf8<'a>(&mut self, values: impl Iterator<Item = &'a str> + Clone) {
        self.column();
        self.buffer(|out| {
            let mut end = 0i32;
            out.extend_from_slice(&end.to_le_bytes());
            for value in values.clone() {
                end += value.len() as i32;
                out.extend_from_slice(&end.to_le_bytes());
            }
        });
        self.buffer(|out| values.for_each(|v| out.extend_from_slice(v.as_bytes())));
    }
}

/// One complete message as read from a stream.
#[derive(Debug)]
pub struct RawFrame {
    /// Byte offset of the frame's first byte in the file.
    pub offset: u64,
    pub bytes: Vec<u8>,
    pub header: MessageHeader,
}

impl RawFrame {
    pub fn end(&self) -> u64 {
        self.offset + self.bytes.len() as u64
    }
}

/// Why the next frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The file ends inside this frame: a write that did not finish.
    #[error("frame at offset {offset} is incomplete: {reason}")]
    Incomplete { offset: u64, reason: String },
    /// The bytes at this offset are not a frame.
    #[error("bytes at offset {offset} are not a log frame: {reason}")]
    Malformed { offset: u64, reason: String },
    #[error("reading the log failed: {0}")]
    Io(#[from] io::Error),
}

/// Reads frames one at a time (constant memory: one frame buffered).
pub struct FrameReader<R> {
    inner: R,
    offset: u64,
}

impl<R: Read> FrameReader<R> {
    pub fn new(inner: R) -> FrameReader<R> {
        FrameReader::at(inner, 0)
    }

    /// A reader whose first byte is at file offset `offset`.
    pub fn at(inner: R, offset: u64) -> FrameReader<R> {
        FrameReader { inner, offset }
    }

    /// Offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next frame, `Ok(None)` at a clean end (EOF on a frame boundary).
    pub fn next_frame(&mut self) -> Result<Option<RawFrame>, FrameError> {
        let offset = self.offset;
        let mut prefix = [0u8; 8];
        let got = read_full(&mut self.inner, &mut prefix)?;
        self.offset += got as u64;
        if got == 0 {
            return Ok(None);
        }
        if got < prefix.len() {
            return Err(FrameError::Incomplete {
                offset,
                reason: format!("{got} of 8 header bytes"),
            });
        }
        if prefix[..4] != CONTINUATION {
            return Err(FrameError::Malformed {
                offset,
                reason: format!("header {:02x?} has no continuation marker", &prefix[..4]),
            });
        }
        let metadata_len = u32::from_le_bytes(prefix[4..].try_into().expect("4 bytes"));
        if metadata_len == 0 {
            return Err(FrameError::Malformed {
                offset,
                reason: "end-of-stream marker".into(),
            });
        }
        if metadata_len > MAX_METADATA_LEN || metadata_len % 8 != 0 {
            return Err(FrameError::Malformed {
                offset,
                reason: format!("implausible metadata length {metadata_len}"),
            });
        }
        let mut bytes = Vec::with_capacity(8 + metadata_len as usize);
        bytes.extend_from_slice(&prefix);
        bytes.resize(8 + metadata_len as usize, 0);
        let got = read_full(&mut self.inner, &mut bytes[8..])?;
        self.offset += got as u64;
        if got < metadata_len as usize {
            return Err(FrameError::Incomplete {
                offset,
                reason: format!("{got} of {metadata_len} metadata bytes"),
            });
        }
        let (header, body_len) = match arrow_ipc::root_as_message(&bytes[8..]) {
            Ok(message) => (message.header_type(), message.bodyLength()),
            Err(e) => {
                return Err(FrameError::Malformed {
                    offset,
                    reason: format!("metadata is not an IPC message: {e}"),
                });
            }
        };
        if !(0..=MAX_BODY_LEN).contains(&body_len) {
            return Err(FrameError::Malformed {
                offset,
                reason: format!("implausible body length {body_len}"),
            });
        }
        let head_len = bytes.len();
        // Grown as the bytes arrive: a corrupt length near the bound costs
        // what the file holds, not the length it claims.
        let got = std::io::Read::read_to_end(
            &mut std::io::Read::take(&mut self.inner, body_len as u64),
            &mut bytes,
        )?;
        debug_assert_eq!(bytes.len(), head_len + got);
        self.offset += got as u64;
        if got < body_len as usize {
            return Err(FrameError::Incomplete {
                offset,
                reason: format!("{got} of {body_len} body bytes"),
            });
        }
        Ok(Some(RawFrame {
            offset,
            bytes,
            header,
        }))
    }

    /// Reads to EOF; true when every remaining byte is zero (a zero-filled
    /// tail, as a filesystem may leave past the last synced byte).
    pub fn rest_is_zero(&mut self) -> io::Result<bool> {
        let mut buf = [0u8; 8192];
        loop {
            let n = self.inner.read(&mut buf)?;
            if n == 0 {
                return Ok(true);
            }
            self.offset += n as u64;
            if buf[..n].iter().any(|&b| b != 0) {
                return Ok(false);
            }
        }
    }
}

/// Decodes whole frames into batches (the schema frame first). Works on
/// one complete message at a time, which arrow's push decoder does not
/// (it waits for more bytes after a message with an empty body).
#[derive(Default)]
pub struct FrameDecoder {
    schema: Option<SchemaRef>,
    dictionaries: HashMap<i64, ArrayRef>,
}

/// arrow-ipc's decoder trusts a message's buffer offsets and panics on
/// ones outside the body (found by `tests/fuzz`, target `log_replay`); a
/// frame that makes it panic is a corrupt frame like any other, judged by
/// replay's torn-tail rules instead of aborting the server's start.
fn catch_decode_panic<T>(decode: impl FnOnce() -> Result<T, ArrowError>) -> Result<T, ArrowError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)).unwrap_or_else(|_| {
        Err(ArrowError::IpcError(
            "the message does not decode (its buffers lie outside its body)".into(),
        ))
    })
}

impl FrameDecoder {
    /// Feeds one whole frame; a record batch frame yields its batch.
    pub fn decode(&mut self, frame: &RawFrame) -> Result<Option<RecordBatch>, ArrowError> {
        let bytes = &frame.bytes;
        let metadata_len = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes")) as usize;
        let metadata = &bytes[8..8 + metadata_len];
        let message = arrow_ipc::root_as_message(metadata)
            .map_err(|e| ArrowError::IpcError(format!("not an IPC message: {e}")))?;
        match message.header_type() {
            MessageHeader::Schema => {
                let schema = message
                    .header_as_schema()
                    .ok_or_else(|| ArrowError::IpcError("schema header missing".into()))?;
                let decoded = catch_decode_panic(|| try_fb_to_schema(schema))?;
                self.schema = Some(Arc::new(decoded));
                Ok(None)
            }
            MessageHeader::RecordBatch => {
                let schema = self
                    .schema
                    .clone()
                    .ok_or_else(|| ArrowError::IpcError("record batch before schema".into()))?;
                let header = message
                    .header_as_record_batch()
                    .ok_or_else(|| ArrowError::IpcError("record batch header missing".into()))?;
                let body = Buffer::from(&bytes[8 + metadata_len..]);
                catch_decode_panic(|| {
                    read_record_batch(
                        &body,
                        header,
                        schema,
                        &self.dictionaries,
                        None,
                        &message.version(),
                    )
                })
                .map(Some)
            }
            other => Err(ArrowError::IpcError(format!(
                "unexpected message {other:?} in a log stream"
            ))),
        }
    }

    pub fn schema(&self) -> Option<SchemaRef> {
        self.schema.clone()
    }
}

fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
