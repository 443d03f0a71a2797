//! Downloads with bounded cost (archives, raw files, site files streamed
//! from git): a pump task reads the source (a git child's stdout) and
//! hands chunks to the response body through a two-chunk channel, so the
//! client's pace is the task's. The task ends the download, dropping the
//! source (which kills the child) and freeing the slot it holds, when
//! - the client goes away (the body is dropped);
//! - the client takes less than `min_rate` bytes a second, counted over
//!   `window` of time spent waiting on it (time spent waiting on the
//!   source does not count: a slow git is bounded by the deadline);
//! - the deadline passes.
//!
//! A cut download ends with an error, so the client sees a broken
//! transfer (never a short body that looks whole).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use axum::body::{Body, Bytes};
use tokio::io::AsyncRead;
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::acked::AckedBytes;

/// The bounds of one download.
#[derive(Debug, Clone, Copy)]
pub struct StreamBounds {
    pub deadline: Duration,
    pub min_rate: u64,
    pub window: Duration,
}

impl StreamBounds {
    /// A download under `limits`, cut at `deadline`.
    pub fn of(limits: &vole_config::ReadLimits, deadline: Duration) -> StreamBounds {
        StreamBounds {
            deadline,
            min_rate: limits.min_rate,
            window: limits.rate_window,
        }
    }
}

/// `len` bytes of blob `id` from byte `skip`, streamed from a
/// `git cat-file` child under `slot`, for the raw view and site files
/// alike. The bytes before `skip` are read and dropped (within
/// `limits.deadline`) before the response starts (`cat-file` has no
/// offset), so a blob shorter than that is a 500, not a short body; a blob
/// that ends before `skip + len` ends the body short of its
/// `Content-Length`, and the connection is closed.
pub async fn blob_range(
    git: &vole_git::Git,
    repo: &std::path::Path,
    id: gix::ObjectId,
    (skip, len): (u64, u64),
    slot: OwnedSemaphorePermit,
    limits: &vole_config::ReadLimits,
    what: &'static str,
) -> Result<Body, super::AppError> {
    use super::AppError;
    use tokio::io::AsyncReadExt;
    let mut output = git
        .spawn_reader(repo, &["cat-file", "blob", &id.to_string()])
        .map_err(|e| AppError::internal("cannot start git cat-file", e))?;
    let skipped = tokio::time::timeout(
        limits.deadline,
        tokio::io::copy(&mut (&mut output).take(skip), &mut tokio::io::sink()),
    )
    .await
    .map_err(|_| AppError::busy("skipping to the range took too long; retry later", 5))?
    .map_err(|e| AppError::internal("reading a blob from git cat-file failed", e))?;
    if skipped < skip {
        return Err(AppError::internal(
            "git cat-file ended early",
            format!("blob {id}: {skipped} of the {skip} bytes before the range"),
        ));
    }
    let bounds = StreamBounds::of(limits, limits.deadline.max(limits.archive_deadline));
    Ok(pumped(output.take(len), Some(slot), bounds, what))
}

/// Bytes read from the source at a time.
const CHUNK: usize = 64 << 10;

/// Why a download was cut (for the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    Slow,
    Deadline,
}

/// The body of a download from `source`, under `bounds`, holding `permit`
/// until it ends. `what` names it in the log.
pub fn pumped<R>(
    source: R,
    permit: Option<OwnedSemaphorePermit>,
    bounds: StreamBounds,
    what: &'static str,
) -> Body
where
    R: AsyncRead + Send + Unpin + 'static,
{
    use tokio_stream::StreamExt;
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(2);
    // Set when the download is cut: the channel is full then (the client
    // is not reading), so the error cannot be queued; the body ends with
    // it once the queued chunks are taken, and never looks complete.
    let cut_flag = Arc::new(parking_lot::Mutex::new(None::<Cut>));
    let flag = cut_flag.clone();
    // Taken here, in the request's task (the pump's task has no request).
    let peer = crate::current_connection().and_then(AckedBytes::of);
    tokio::spawn(async move {
        let _permit = permit;
        if let Some(cut) = pump(source, &tx, bounds, peer).await {
            tracing::info!(what, ?cut, "download cut");
            *flag.lock() = Some(cut);
        }
    });
    let ending = tokio_stream::once(()).filter_map(move |()| {
        let cut = (*cut_flag.lock())?;
        let message = match cut {
            Cut::Slow => "the client took the download too slowly",
            Cut::Deadline => "the download ran past its deadline",
        };
        Some(Err(std::io::Error::other(message)))
    });
    Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx).chain(ending))
}

/// Copies `source` into `tx` until it ends, the receiver is dropped, or a
/// bound is crossed (returned).
async fn pump<R>(
    mut source: R,
    tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
    bounds: StreamBounds,
    peer: Option<AckedBytes>,
) -> Option<Cut>
where
    R: AsyncRead + Unpin,
{
    let end = Instant::now() + bounds.deadline;
    let mut floor = RateFloor::new(bounds.min_rate, bounds.window, peer);
    let mut buf = bytes::BytesMut::with_capacity(CHUNK);
    loop {
        buf.reserve(CHUNK);
        let left = end.saturating_duration_since(Instant::now());
        let read = tokio::select! {
            read = tokio_util::io::read_buf(&mut source, &mut buf) => read,
            () = tokio::time::sleep(left) => return Some(Cut::Deadline),
            () = tx.closed() => return None,
        };
        match read {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return None;
            }
        }
        match floor.send(tx, Ok(buf.split().freeze()), end).await {
            Sent::Taken => {}
            Sent::Gone => return None,
            Sent::Cut(cut) => return Some(cut),
        }
    }
}

/// What became of a chunk handed to a paced channel.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    Taken,
    /// The receiver is gone (the client went away).
    Gone,
    Cut(Cut),
}

/// The minimum transfer rate of one download: over any `window` of time
/// spent waiting on the client, it must take `min_rate` bytes a second.
/// Shared by these downloads and the smart-HTTP transport's pump.
///
/// The window slides (sampled every `window / 30`, at most a second): a
/// download that starts fast and then crawls is cut one window after it
/// slowed, not one window after the last fresh start. What the client
/// took is what its TCP acknowledged when the connection's socket is known
/// ([`AckedBytes`]: a clone's, and a download's made in its request's
/// task), else what the body was handed (which the buffers between
/// inflate by megabytes).
#[derive(Debug)]
pub struct RateFloor {
    need: u64,
    window: Duration,
    tick: Duration,
    waited: Duration,
    handed: u64,
    peer: Option<AckedBytes>,
    /// (time waited, bytes taken then), oldest first; the front is the
    /// newest sample at least one window old once there is one.
    samples: std::collections::VecDeque<(Duration, u64)>,
}

impl RateFloor {
    pub fn new(min_rate: u64, window: Duration, peer: Option<AckedBytes>) -> RateFloor {
        RateFloor {
            need: min_rate.saturating_mul(window.as_secs().max(1)),
            window,
            tick: (window / 30).clamp(Duration::from_millis(10), Duration::from_secs(1)),
            waited: Duration::ZERO,
            handed: 0,
            peer,
            samples: std::collections::VecDeque::from([(Duration::ZERO, 0)]),
        }
    }

    /// For the log when a download is cut: seconds spent waiting on the
    /// client, bytes handed to the body, bytes the client took.
    pub fn account(&self) -> (f64, u64, u64) {
        (self.waited.as_secs_f64(), self.handed, self.taken())
    }

    /// Bytes the client has taken so far.
    fn taken(&self) -> u64 {
        match &self.peer {
            // A socket that can no longer tell has taken nothing more.
            Some(peer) => peer
                .since_start()
                .unwrap_or(self.samples.back().map_or(0, |s| s.1)),
            None => self.handed,
        }
    }

    /// Samples what was taken now, and judges the last window.
    fn verdict(&mut self) -> Option<Cut> {
        let last = self.samples.back().map_or(Duration::ZERO, |s| s.0);
        let sample = self.waited >= last + self.tick;
        let cutoff = self.waited.checked_sub(self.window);
        if !sample && cutoff.is_none() {
            // Nothing to record or judge: no socket read for a fast client.
            return None;
        }
        let taken = self.taken();
        if sample {
            self.samples.push_back((self.waited, taken));
        }
        let cutoff = cutoff?;
        while self.samples.get(1).is_some_and(|s| s.0 <= cutoff) {
            self.samples.pop_front();
        }
        let (_, then) = self.samples.front().copied().unwrap_or_default();
        (taken.saturating_sub(then) < self.need).then_some(Cut::Slow)
    }

    /// Sends `item` on `tx` at the client's pace, by `end` at the latest.
    pub async fn send<T: Chunk>(&mut self, tx: &mpsc::Sender<T>, item: T, end: Instant) -> Sent {
        let len = item.bytes() as u64;
        let mut send = std::pin::pin!(tx.send(item));
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Sent::Cut(Cut::Deadline);
            }
            let started = Instant::now();
            let sent = tokio::time::timeout(self.tick.min(left), &mut send).await;
            self.waited += started.elapsed();
            match sent {
                Ok(Ok(())) => break,
                Ok(Err(_)) => return Sent::Gone,
                Err(_) => {}
            }
            if let Some(cut) = self.verdict() {
                return Sent::Cut(cut);
            }
        }
        self.handed += len;
        match self.verdict() {
            Some(cut) => Sent::Cut(cut),
            None => Sent::Taken,
        }
    }
}

/// What a paced channel carries: something with a length in bytes.
pub trait Chunk {
    fn bytes(&self) -> usize;
}

impl Chunk for Bytes {
    fn bytes(&self) -> usize {
        self.len()
    }
}

impl Chunk for Result<Bytes, std::io::Error> {
    fn bytes(&self) -> usize {
        self.as_ref().map_or(0, Bytes::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(window_ms: u64, min_rate: u64) -> StreamBounds {
        StreamBounds {
            deadline: Duration::from_secs(30),
            min_rate,
            window: Duration::from_millis(window_ms),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_takes_nothing_is_cut_after_one_window() {
        let source = std::io::Cursor::new(vec![7u8; 1 << 20]);
        let (tx, _rx) = mpsc::channel(2);
        let started = tokio::time::Instant::now();
        let cut = pump(source, &tx, bounds(1000, 4096), None).await;
        assert_eq!(cut, Some(Cut::Slow));
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_keeps_up_gets_everything_and_a_slow_source_is_not_its_fault() {
        // The source trickles (a slow git); the client reads at once.
        let (mut writer, reader) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(900)).await;
                writer.write_all(&[1u8; 100]).await.unwrap();
            }
        });
        let (tx, mut rx) = mpsc::channel(2);
        let pumping =
            tokio::spawn(async move { pump(reader, &tx, bounds(1000, 1 << 20), None).await });
        let mut got = 0;
        while let Some(chunk) = rx.recv().await {
            got += chunk.unwrap().len();
        }
        assert_eq!(pumping.await.unwrap(), None, "not cut");
        assert_eq!(got, 1000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_starts_fast_then_crawls_is_cut_one_window_after_it_slowed() {
        // The buffers between take a burst at once; then the client takes
        // one chunk every 40 s (1.6 KiB/s against a 4 KiB/s floor).
        let source = std::io::Cursor::new(vec![7u8; 8 << 20]);
        let (tx, mut rx) = mpsc::channel(2);
        let mut limits = bounds(30_000, 4096);
        limits.deadline = Duration::from_secs(600);
        let pumping = tokio::spawn(async move { pump(source, &tx, limits, None).await });
        for _ in 0..16 {
            rx.recv().await.unwrap().unwrap();
        }
        let slowed = tokio::time::Instant::now();
        let reader = tokio::spawn(async move {
            while rx.recv().await.is_some() {
                tokio::time::sleep(Duration::from_secs(40)).await;
            }
        });
        assert_eq!(pumping.await.unwrap(), Some(Cut::Slow));
        let after = slowed.elapsed();
        assert!(
            after <= Duration::from_secs(32),
            "cut {after:?} after the client slowed: the burst it took first \
             kept counting past one window (the window does not slide)"
        );
        reader.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_a_little_over_the_floor_is_never_cut() {
        // 64 KiB every 10 s (6.4 KiB/s against 4 KiB/s), for 160 s: every
        // 30 s window holds at least two chunks.
        let source = std::io::Cursor::new(vec![7u8; 1 << 20]);
        let (tx, mut rx) = mpsc::channel(2);
        let mut limits = bounds(30_000, 4096);
        limits.deadline = Duration::from_secs(600);
        let pumping = tokio::spawn(async move { pump(source, &tx, limits, None).await });
        let mut got = 0;
        while let Some(chunk) = rx.recv().await {
            got += chunk.unwrap().len();
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        assert_eq!(
            pumping.await.unwrap(),
            None,
            "a client over the floor was cut"
        );
        assert_eq!(got, 1 << 20);
    }

    #[tokio::test(start_paused = true)]
    async fn a_download_past_its_deadline_is_cut() {
        let (_writer, reader) = tokio::io::duplex(16); // never writes
        let (tx, _rx) = mpsc::channel(2);
        let mut limits = bounds(1000, 1);
        limits.deadline = Duration::from_secs(5);
        assert_eq!(pump(reader, &tx, limits, None).await, Some(Cut::Deadline));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cut_download_ends_in_an_error_never_a_clean_end() {
        use tokio_stream::StreamExt;
        let body = pumped(
            std::io::Cursor::new(vec![7u8; 1 << 20]),
            None,
            bounds(1000, 1 << 30),
            "test",
        );
        // The client reads nothing for a while: the download is cut.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let mut stream = body.into_data_stream();
        let (mut bytes, mut error) = (0, false);
        while let Some(frame) = stream.next().await {
            match frame {
                Ok(chunk) => bytes += chunk.len(),
                Err(_) => error = true,
            }
        }
        assert!(
            error,
            "a cut download must end in an error ({bytes} bytes came first)"
        );
        assert!(bytes < 1 << 20, "it was cut before the end");
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_goes_away_ends_the_pump() {
        let source = std::io::Cursor::new(vec![7u8; 1 << 20]);
        let (tx, rx) = mpsc::channel(2);
        drop(rx);
        assert_eq!(pump(source, &tx, bounds(1000, 4096), None).await, None);
    }
}
