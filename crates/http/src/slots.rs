//! Read slots: the one semaphore every read-side git child of the web UI
//! and sites takes (`git log`, `git show`, archives, blob prefixes and
//! streams), separate from the transport's clone and push slots, so a
//! flood of page views can neither start unbounded git processes nor take
//! the slots clones and pushes use. A request that finds none free within
//! the queue timeout gets 503 with `Retry-After`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::AppError;

#[derive(Debug)]
pub struct ReadSlots {
    semaphore: Arc<Semaphore>,
    slots: usize,
    queue_timeout: Duration,
}

impl ReadSlots {
    pub fn new(slots: usize, queue_timeout: Duration) -> ReadSlots {
        ReadSlots {
            semaphore: Arc::new(Semaphore::new(slots)),
            slots,
            queue_timeout,
        }
    }

    /// A slot, held until the permit is dropped (when the child's output
    /// is read or its stream ends).
    pub async fn acquire(&self) -> Result<OwnedSemaphorePermit, AppError> {
        match tokio::time::timeout(self.queue_timeout, self.semaphore.clone().acquire_owned()).await
        {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(AppError::busy(
                "the server is busy reading repositories for other requests; retry in a few seconds",
                5,
            )),
        }
    }

    /// A slot if one frees within `wait`, else none: for work a page can
    /// do without (it is drawn without that part), rather than a 503.
    pub async fn acquire_within(&self, wait: Duration) -> Option<OwnedSemaphorePermit> {
        tokio::time::timeout(wait, self.semaphore.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }

    /// Slots taken now.
    pub fn in_use(&self) -> usize {
        self.slots - self.semaphore.available_permits()
    }
}
