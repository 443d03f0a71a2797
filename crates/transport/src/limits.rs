//! Concurrency bounds of the transport: one semaphore for upload-pack
//! (clone, fetch) and one for receive-pack (push), each waited on for at most
//! the configured queue timeout, and the budget of request-body bytes
//! spooled at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Service;
use vole_config::TransportLimits;
use vole_http::AppError;

/// Process slots and spool budget, shared by every request.
#[derive(Debug)]
pub struct Limits {
    upload_pack: Arc<Semaphore>,
    receive_pack: Arc<Semaphore>,
    upload_pack_limit: usize,
    receive_pack_limit: usize,
    /// Requests waiting for a slot, per service (upload, receive).
    waiting: [AtomicU64; 2],
    /// Bytes of push bodies taken in (for the metrics).
    pub push_bytes: AtomicU64,
    queue_timeout: Duration,
    spool_budget: Arc<SpoolBudget>,
}

/// A service's git children now: running, waiting for a slot, the limit.
#[derive(Debug, Clone, Copy)]
pub struct Children {
    pub running: usize,
    pub waiting: u64,
    pub limit: usize,
}

/// Counts a waiter for as long as it lives.
struct Waiting<'a>(&'a AtomicU64);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Limits {
    pub fn new(config: &TransportLimits) -> Limits {
        Limits {
            upload_pack: Arc::new(Semaphore::new(config.upload_pack_limit)),
            receive_pack: Arc::new(Semaphore::new(config.receive_pack_limit)),
            upload_pack_limit: config.upload_pack_limit,
            receive_pack_limit: config.receive_pack_limit,
            waiting: [AtomicU64::new(0), AtomicU64::new(0)],
            push_bytes: AtomicU64::new(0),
            queue_timeout: config.queue_timeout,
            spool_budget: Arc::new(SpoolBudget::new(config.max_spool_total)),
        }
    }

    /// A process slot for `service`, or 503 once the queue timeout passes.
    pub async fn acquire(&self, service: Service) -> Result<OwnedSemaphorePermit, AppError> {
        let (semaphore, waiting, _) = self.slots(service);
        waiting.fetch_add(1, Ordering::Relaxed);
        let waited = Waiting(waiting);
        let acquired =
            tokio::time::timeout(self.queue_timeout, semaphore.clone().acquire_owned()).await;
        drop(waited);
        match acquired {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_closed)) => Err(AppError::busy("the server is shutting down", 5)),
            Err(_elapsed) => {
                tracing::warn!(
                    service = service.as_str(),
                    waited_s = self.queue_timeout.as_secs_f64(),
                    "no free git process slot; answering 503"
                );
                Err(AppError::busy(
                    format!(
                        "the server is busy ({} requests at their limit); retry shortly",
                        service.as_str()
                    ),
                    self.queue_timeout.as_secs().max(1),
                ))
            }
        }
    }

    /// `service`'s slots, waiter count and limit.
    fn slots(&self, service: Service) -> (&Arc<Semaphore>, &AtomicU64, usize) {
        match service {
            Service::UploadPack => (&self.upload_pack, &self.waiting[0], self.upload_pack_limit),
            Service::ReceivePack => (
                &self.receive_pack,
                &self.waiting[1],
                self.receive_pack_limit,
            ),
        }
    }

    /// `service`'s git children now.
    pub fn children(&self, service: Service) -> Children {
        let (semaphore, waiting, limit) = self.slots(service);
        Children {
            running: limit.saturating_sub(semaphore.available_permits()),
            waiting: waiting.load(Ordering::Relaxed),
            limit,
        }
    }

    pub fn spool_budget(&self) -> Arc<SpoolBudget> {
        self.spool_budget.clone()
    }
}

/// Bytes of request bodies on disk or in memory right now, bounded.
#[derive(Debug)]
pub struct SpoolBudget {
    limit: u64,
    used: AtomicU64,
}

impl SpoolBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> SpoolBudget {
        SpoolBudget {
            limit,
            used: AtomicU64::new(0),
        }
    }

    /// Takes `bytes` from the budget, or `None` when it would exceed it.
    pub fn reserve(self: &Arc<Self>, bytes: u64) -> Option<SpoolReservation> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let next = used.checked_add(bytes).filter(|n| *n <= self.limit)?;
            match self
                .used
                .compare_exchange_weak(used, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Some(SpoolReservation {
                        budget: self.clone(),
                        bytes,
                    });
                }
                Err(actual) => used = actual,
            }
        }
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

/// Bytes held from the budget; given back when dropped.
#[derive(Debug)]
pub struct SpoolReservation {
    budget: Arc<SpoolBudget>,
    bytes: u64,
}

impl SpoolReservation {
    pub fn merge(&mut self, other: SpoolReservation) {
        self.bytes += other.bytes;
        let mut other = other;
        other.bytes = 0;
    }
}

impl Drop for SpoolReservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}
