//! Request bodies spooled before a git process starts, so a slow or broken
//! client never holds a process slot: small bodies in memory, larger ones in
//! a temp file under `data/tmp` that is deleted on every path (drop).
//! Enforces the size cap (413), the idle timeout (408) and the global spool
//! budget (503). A gzip-encoded body is inflated here too, against the same
//! cap, so git reads plain bytes and a body that does not inflate is a 400.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use http_body_util::BodyExt;
use tempfile::NamedTempFile;

use super::limits::{SpoolBudget, SpoolReservation};
use vole_http::AppError;

/// Bodies up to this size stay in memory.
const IN_MEMORY_MAX: usize = 256 << 10;

/// A fully received request body.
#[derive(Debug)]
pub struct Spooled {
    pub len: u64,
    pub content: SpooledContent,
    _reservation: Option<SpoolReservation>,
}

#[derive(Debug)]
pub enum SpooledContent {
    Memory(Vec<u8>),
    File(NamedTempFile),
}

/// What to say when the cap is crossed.
#[derive(Debug, Clone)]
pub struct Cap {
    pub bytes: u64,
    pub what: &'static str,
    pub setting: &'static str,
}

impl Cap {
    pub fn refuse(&self) -> AppError {
        AppError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{} is larger than this server accepts ({}); the limit is set with --{}",
                self.what,
                bytesize::ByteSize::b(self.bytes).display().iec(),
                self.setting
            ),
        )
    }
}

/// Where a body's bytes go as they arrive: memory up to
/// [`IN_MEMORY_MAX`], then a temp file; each byte counted against the cap
/// and reserved from the spool budget.
struct Sink {
    cap: Cap,
    dir: std::path::PathBuf,
    budget: Arc<SpoolBudget>,
    memory: Vec<u8>,
    file: Option<NamedTempFile>,
    len: u64,
    reservation: Option<SpoolReservation>,
}

/// Why a sink took no more.
enum Refused {
    /// Over the cap: what was spooled is freed.
    OverCap,
    Error(AppError),
}

impl Sink {
    fn new(cap: &Cap, dir: &Path, budget: &Arc<SpoolBudget>) -> Sink {
        Sink {
            cap: cap.clone(),
            dir: dir.to_path_buf(),
            budget: budget.clone(),
            memory: Vec::new(),
            file: None,
            len: 0,
            reservation: None,
        }
    }

    /// Takes `data`; blocks on file writes (callers are off the async
    /// workers: on the blocking pool).
    fn take(&mut self, data: &[u8]) -> Result<(), Refused> {
        self.len += data.len() as u64;
        if self.len > self.cap.bytes {
            drop((
                self.file.take(),
                std::mem::take(&mut self.memory),
                self.reservation.take(),
            ));
            return Err(Refused::OverCap);
        }
        let Some(more) = self.budget.reserve(data.len() as u64) else {
            tracing::warn!(
                spooled = self.budget.used(),
                "spool budget exhausted; answering 503"
            );
            return Err(Refused::Error(AppError::busy(
                "the server is receiving too much data at once; retry shortly",
                10,
            )));
        };
        match &mut self.reservation {
            Some(held) => held.merge(more),
            None => self.reservation = Some(more),
        }
        let write = |file: &mut NamedTempFile, data: &[u8]| {
            file.as_file_mut()
                .write_all(data)
                .map_err(|e| Refused::Error(AppError::internal("writing the spool file failed", e)))
        };
        match &mut self.file {
            Some(file) => write(file, data)?,
            None if self.memory.len() + data.len() <= IN_MEMORY_MAX => {
                self.memory.extend_from_slice(data)
            }
            None => {
                let mut spill = tempfile::Builder::new()
                    .prefix("spool-")
                    .tempfile_in(&self.dir)
                    .map_err(|e| {
                        Refused::Error(AppError::internal("cannot create a spool file", e))
                    })?;
                write(&mut spill, &std::mem::take(&mut self.memory))?;
                write(&mut spill, data)?;
                self.file = Some(spill);
            }
        }
        Ok(())
    }

    fn finish(self) -> Spooled {
        Spooled {
            len: self.len,
            content: match self.file {
                Some(file) => SpooledContent::File(file),
                None => SpooledContent::Memory(self.memory),
            },
            _reservation: self.reservation,
        }
    }
}

/// Reads the whole body, or fails with the status the client has earned.
pub async fn spool(
    body: Body,
    cap: &Cap,
    idle: Duration,
    dir: &Path,
    budget: &Arc<SpoolBudget>,
) -> Result<Spooled, AppError> {
    let mut body = body;
    let mut sink = Sink::new(cap, dir, budget);
    // Bytes bound for the file, written a batch at a time (hyper's frames
    // can be a few KiB; one hop to the blocking pool per frame would cost
    // more than the write).
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let frame = match tokio::time::timeout(idle, body.frame()).await {
            Err(_) => {
                return Err(AppError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "request body stalled: nothing received for {}s",
                        idle.as_secs()
                    ),
                ));
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                tracing::debug!(error = %e, "a request body could not be read");
                return Err(AppError::bad_request(
                    "the request body could not be read: the connection failed or its framing was malformed",
                ));
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        // In memory while it fits and nothing is waiting for the file
        // (bytes must reach the sink in the order they came).
        let in_memory = pending.is_empty()
            && sink.file.is_none()
            && sink.memory.len() + data.len() <= IN_MEMORY_MAX;
        let taken = if in_memory {
            sink.take(&data)
        } else {
            pending.extend_from_slice(&data);
            if pending.len() < WRITE_BATCH {
                continue;
            }
            let taken;
            (sink, pending, taken) = write_off_pool(sink, pending).await?;
            taken
        };
        if let Err(refused) = taken {
            return Err(refuse(refused, body, cap, idle).await);
        }
    }
    if !pending.is_empty() {
        let taken;
        (sink, _, taken) = write_off_pool(sink, pending).await?;
        if let Err(refused) = taken {
            return Err(refuse(refused, body, cap, idle).await);
        }
    }
    Ok(sink.finish())
}

/// Bytes of a request body gathered before they are written to its spool
/// file.
const WRITE_BATCH: usize = 256 << 10;

/// `batch` into the sink on the blocking pool, whose threads are kept and
/// reused. (`block_in_place` here handed each push's worker over to a
/// fresh thread: the thread churn made mimalloc keep about an eighth of
/// every push's bytes, 13 MiB per 100 MiB push, under steady load.)
/// Returns the sink and the emptied batch buffer, for reuse.
async fn write_off_pool(
    mut sink: Sink,
    mut batch: Vec<u8>,
) -> Result<(Sink, Vec<u8>, Result<(), Refused>), AppError> {
    vole_http::spawn_blocking(move || {
        let taken = sink.take(&batch);
        batch.clear();
        (sink, batch, taken)
    })
    .await
    .map_err(|e| AppError::internal("the spool writer failed", e))
}

/// The answer to a refused body: over the cap, what was spooled is freed
/// and a bounded amount more is read and discarded so the client, still
/// sending, reads the 413 instead of a broken pipe.
async fn refuse(refused: Refused, body: Body, cap: &Cap, idle: Duration) -> AppError {
    match refused {
        Refused::OverCap => {
            drain(body, idle.min(DRAIN_IDLE)).await;
            cap.refuse()
        }
        Refused::Error(e) => e,
    }
}

/// A `Content-Encoding: gzip` body, inflated into a new spool against the
/// same cap (the cap is on what git reads, so a small gzip bomb is a 413);
/// a body that is not gzip, or does not inflate to its end, is a 400.
pub async fn inflate(
    spooled: Spooled,
    cap: &Cap,
    dir: &Path,
    budget: &Arc<SpoolBudget>,
) -> Result<Spooled, AppError> {
    // On the blocking pool (its threads are reused), not `block_in_place`.
    let (cap, dir, budget) = (cap.clone(), dir.to_path_buf(), budget.clone());
    vole_http::spawn_blocking(move || {
        let reader: Box<dyn std::io::Read + '_> = match &spooled.content {
            SpooledContent::Memory(bytes) => Box::new(&bytes[..]),
            SpooledContent::File(file) => {
                Box::new(std::io::BufReader::new(file.reopen().map_err(|e| {
                    AppError::internal("cannot reopen a spool file", e)
                })?))
            }
        };
        let mut decoder = flate2::read::MultiGzDecoder::new(reader);
        let mut sink = Sink::new(&cap, &dir, &budget);
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match std::io::Read::read(&mut decoder, &mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    return Err(AppError::bad_request(
                        "the request body says Content-Encoding: gzip but is not valid gzip data \
                         (it does not inflate to its end)",
                    ));
                }
            };
            match sink.take(&buf[..n]) {
                Ok(()) => {}
                Err(Refused::OverCap) => return Err(cap.refuse()),
                Err(Refused::Error(e)) => return Err(e),
            }
        }
        Ok(sink.finish())
    })
    .await
    .map_err(|e| AppError::internal("inflating a request body failed", e))?
}

/// Most bytes read and discarded after a body crossed its cap.
const DRAIN_LIMIT: u64 = 64 << 20;
const DRAIN_IDLE: Duration = Duration::from_secs(2);

async fn drain(mut body: Body, idle: Duration) {
    let mut drained = 0u64;
    while drained < DRAIN_LIMIT {
        match tokio::time::timeout(idle, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                drained += frame.data_ref().map_or(0, |d| d.len() as u64);
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Frames of every size, across the memory bound and the write batch:
    /// the spool holds exactly the bytes sent, in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_byte_arrives_in_order_across_memory_and_file() {
        let sizes = [
            1usize,
            200 << 10,
            70 << 10,
            3,
            300 << 10,
            5 << 10,
            1,
            600 << 10,
            17,
        ];
        let mut sent = Vec::new();
        let mut frames = Vec::new();
        for (i, size) in sizes.iter().enumerate() {
            let frame: Vec<u8> = (0..*size).map(|j| (i * 31 + j * 7) as u8).collect();
            sent.extend_from_slice(&frame);
            frames.push(Ok::<_, std::io::Error>(axum::body::Bytes::from(frame)));
        }
        let body = Body::from_stream(tokio_stream::iter(frames));
        let dir = tempfile::tempdir().unwrap();
        let cap = Cap {
            bytes: 64 << 20,
            what: "this test",
            setting: "none",
        };
        let budget = Arc::new(SpoolBudget::new(1 << 30));
        let spooled = spool(body, &cap, Duration::from_secs(5), dir.path(), &budget)
            .await
            .unwrap();
        assert_eq!(spooled.len, sent.len() as u64);
        let got = match &spooled.content {
            SpooledContent::Memory(bytes) => bytes.clone(),
            SpooledContent::File(file) => {
                let mut bytes = Vec::new();
                file.reopen().unwrap().read_to_end(&mut bytes).unwrap();
                bytes
            }
        };
        assert!(
            got == sent,
            "the spool reordered or lost bytes ({} of {})",
            got.len(),
            sent.len()
        );
    }
}
