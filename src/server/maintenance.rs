//! Background upkeep every few seconds: the pack cache's expired entries
//! are dropped (`vole-pack-cache`: otherwise only a request's end
//! evicts, and an idle server would keep them); the browser sessions'
//! file is compacted once it has grown (`vole_sessions`), and the
//! registration limiter forgets addresses whose hour is over; the
//! metadata's body readers let go of repo handles they no longer use;
//! past its configured size
//! a log is compacted by the server itself, so start-up replays only what
//! is not yet folded (the meta log) and the disk holds what matters. A
//! compaction copies while writes go on (`log::Log::compact`); a backup
//! under way defers it.
//!
//! The meta log drops the writes already folded into git; the webhooks
//! log, past 16 MiB, what every hook has taken; the ref log, the
//! audit trail, is compacted only when `--ref-log-compact-size` asks (a
//! checkpoint of every ref, then its last [`REF_LOG_KEEP`] transactions).

use std::sync::Arc;
use std::time::Duration;

use crate::app::App;

/// How often the logs' sizes are looked at.
const EVERY: Duration = Duration::from_secs(5);

/// Ref log transactions kept after the checkpoint when it is compacted.
pub const REF_LOG_KEEP: u64 = 10_000;

/// The webhooks log's size past which it is compacted (what a hook has
/// not taken, the cursors and the last attempts kept).
const WEBHOOKS_LOG_COMPACT_SIZE: u64 = 16 << 20;

/// When to compact one log: past `limit`, and past twice what the last
/// compaction left (a log whose kept part alone is above the limit is not
/// compacted again and again for nothing).
#[derive(Debug, Clone, Copy)]
struct Trigger {
    limit: u64,
    left: u64,
}

impl Trigger {
    fn due(&self, size: u64) -> bool {
        self.limit > 0 && size > self.limit && size > self.left.saturating_mul(2)
    }
}

/// Runs until the task is dropped.
pub async fn run(app: Arc<App>) {
    let mut meta = Trigger {
        limit: app.config.meta_log_compact_size,
        left: 0,
    };
    let mut refs = Trigger {
        limit: app.config.ref_log_compact_size,
        left: 0,
    };
    let mut webhooks = Trigger {
        limit: WEBHOOKS_LOG_COMPACT_SIZE,
        left: 0,
    };
    loop {
        tokio::time::sleep(EVERY).await;
        let cache = app.control.pack_cache.clone();
        // Unlinking a big file takes a while: off the async workers.
        let _ = tokio::task::spawn_blocking(move || cache.evict()).await;
        // The sessions file, once it has grown well past what is live.
        let sessions = app.accounts.sessions().clone();
        let now = std::time::SystemTime::now();
        match tokio::task::spawn_blocking(move || sessions.compact(now, false)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "sessions compaction failed"),
            Err(e) => tracing::warn!(error = %e, "sessions compaction panicked"),
        }
        // Form counts of addresses and users whose hour is over.
        app.web.form_limits.retain_recent();
        // Repo handles the metadata's body readers no longer use.
        let store = app.meta.clone();
        let _ = tokio::task::spawn_blocking(move || store.release_idle_handles()).await;
        if app.meta.maintenance_held() {
            continue;
        }
        let size = |path: &std::path::Path| std::fs::metadata(path).map_or(0, |m| m.len());
        if meta.due(size(app.meta.log().path())) {
            let store = app.meta.clone();
            match tokio::task::spawn_blocking(move || store.compact_log(0)).await {
                Ok(Ok(report)) => meta.left = report.bytes_after,
                Ok(Err(e)) => tracing::warn!(error = %e, "meta log compaction failed"),
                Err(e) => tracing::warn!(error = %e, "meta log compaction panicked"),
            }
        }
        let queue = app.api.webhooks.queue().clone();
        if webhooks.due(queue.file_bytes()) {
            match tokio::task::spawn_blocking(move || queue.compact().map(|()| queue.file_bytes()))
                .await
            {
                Ok(Ok(left)) => webhooks.left = left,
                Ok(Err(e)) => tracing::warn!(error = %e, "webhooks log compaction failed"),
                Err(e) => tracing::warn!(error = %e, "webhooks log compaction panicked"),
            }
        }
        if refs.due(size(app.recorder.log().path())) {
            let recorder = app.recorder.clone();
            match tokio::task::spawn_blocking(move || recorder.compact(REF_LOG_KEEP)).await {
                Ok(Ok(report)) => refs.left = report.bytes_after,
                Ok(Err(e)) => tracing::warn!(error = %e, "ref log compaction failed"),
                Err(e) => tracing::warn!(error = %e, "ref log compaction panicked"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Trigger;

    #[test]
    fn a_log_is_compacted_past_its_limit_and_not_again_for_what_it_keeps() {
        let trigger = Trigger {
            limit: 100,
            left: 0,
        };
        assert!(!trigger.due(100));
        assert!(trigger.due(101));
        // The last compaction left 80 bytes (unfolded writes): not again
        // until it has grown past twice that.
        let trigger = Trigger {
            limit: 100,
            left: 80,
        };
        assert!(!trigger.due(150));
        assert!(trigger.due(161));
        assert!(
            !Trigger { limit: 0, left: 0 }.due(u64::MAX),
            "0 turns it off"
        );
    }
}
