//! Request bodies spooled before a git process starts, so a slow or broken
//! client never holds a process slot: small bodies in memory, larger ones in
//! a temp file under `data/tmp` that is deleted on every path (drop).
//! Enforces the size cap (413), the idle timeout (408) and the global spool
//! budget (503).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use http_body_util::BodyExt;
use tempfile::NamedTempFile;

use super::limits::{SpoolBudget, SpoolReservation};
use crate::http::AppError;

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

/// Reads the whole body, or fails with the status the client has earned.
pub async fn spool(
    body: Body,
    cap: &Cap,
    idle: Duration,
    dir: &Path,
    budget: &Arc<SpoolBudget>,
) -> Result<Spooled, AppError> {
    let mut body = body;
    let mut memory: Vec<u8> = Vec::new();
    let mut file: Option<NamedTempFile> = None;
    let mut len: u64 = 0;
    let mut reservation: Option<SpoolReservation> = None;
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
                return Err(AppError::bad_request(format!(
                    "request body could not be read: {e}"
                )));
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        len += data.len() as u64;
        if len > cap.bytes {
            // Free what was spooled at once, then read and discard a bounded
            // amount more so the client, still sending, reads the 413
            // instead of a broken pipe.
            drop((file.take(), std::mem::take(&mut memory), reservation.take()));
            drain(body, idle.min(DRAIN_IDLE)).await;
            return Err(cap.refuse());
        }
        let Some(more) = budget.reserve(data.len() as u64) else {
            tracing::warn!(
                spooled = budget.used(),
                "spool budget exhausted; answering 503"
            );
            return Err(AppError::busy(
                "the server is receiving too much data at once; retry shortly",
                10,
            ));
        };
        match &mut reservation {
            Some(held) => held.merge(more),
            None => reservation = Some(more),
        }
        match &mut file {
            Some(file) => write_blocking(file, &data).await?,
            None if memory.len() + data.len() <= IN_MEMORY_MAX => memory.extend_from_slice(&data),
            None => {
                let mut spill = tempfile::Builder::new()
                    .prefix("spool-")
                    .tempfile_in(dir)
                    .map_err(|e| AppError::internal("cannot create a spool file", e))?;
                write_blocking(&mut spill, &std::mem::take(&mut memory)).await?;
                write_blocking(&mut spill, &data).await?;
                file = Some(spill);
            }
        }
    }
    Ok(Spooled {
        len,
        content: match file {
            Some(file) => SpooledContent::File(file),
            None => SpooledContent::Memory(memory),
        },
        _reservation: reservation,
    })
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

/// Writes to the spool file off the async workers.
async fn write_blocking(file: &mut NamedTempFile, data: &[u8]) -> Result<(), AppError> {
    tokio::task::block_in_place(|| file.as_file_mut().write_all(data))
        .map_err(|e| AppError::internal("writing the spool file failed", e))
}
