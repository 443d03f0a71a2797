//! `GET /metrics`: every part's figures in the Prometheus text format, on
//! the metrics listener (`--metrics-listen`, loopback by default, no
//! sign-in: whoever can reach it is the operator) and, for server admins,
//! on the main address.
//!
//! The counters the parts keep anyway (logs, metadata, caches, git slots)
//! are read at scrape time; histograms are observed where things happen
//! (`vole_stdx::metrics`). No label names a repo, a user or a path.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::app::App;
use vole_access::{Principal, ServerAction};
use vole_http::AppError;
use vole_stdx::metrics::{counter, gauge, series, unlabelled};
use vole_transport::Service;

/// The content type of the text format, version 0.0.4.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceLabel {
    service: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LogLabel {
    log: String,
}

/// Reads the app's figures at each scrape.
struct AppCollector(Arc<App>);

impl std::fmt::Debug for AppCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AppCollector")
    }
}

impl Collector for AppCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let app = &self.0;
        let e = &mut encoder;
        app.http_metrics.encode(e)?;

        encode_transport(app, e)?;
        encode_sign_ins(app, e)?;
        encode_logs(app, e)?;
        encode_meta(app, e)?;
        encode_site_cache(app, e)?;
        encode_pack_cache(app, e)?;
        encode_webhooks(app, e)?;
        Ok(())
    }
}

/// The transport: its git children per service, the push bytes taken in.
fn encode_transport(app: &App, e: &mut DescriptorEncoder) -> std::fmt::Result {
    let services = [Service::UploadPack, Service::ReceivePack];
    let children: Vec<_> = services
        .iter()
        .map(|s| {
            (
                ServiceLabel {
                    service: s.as_str().trim_start_matches("git-").to_string(),
                },
                app.transport.limits.children(*s),
            )
        })
        .collect();
    let each = |f: fn(&vole_transport::limits::Children) -> i64| -> Vec<_> {
        children
            .iter()
            .map(|(l, c)| {
                (
                    l.clone(),
                    prometheus_client::metrics::gauge::ConstGauge::new(f(c)),
                )
            })
            .collect()
    };
    series(
        e,
        "vole_git_children_running",
        "git children running, per service",
        &each(|c| c.running as i64),
    )?;
    series(
        e,
        "vole_git_children_waiting",
        "Requests waiting for a git process slot, per service",
        &each(|c| c.waiting as i64),
    )?;
    series(
        e,
        "vole_git_children_limit",
        "git process slots, per service",
        &each(|c| c.limit as i64),
    )?;
    counter(
        e,
        "vole_push_bytes",
        "Bytes of push bodies taken in",
        app.transport.limits.push_bytes.load(Ordering::Relaxed),
    )?;
    Ok(())
}

/// Sign-ins refused and throttled.
fn encode_sign_ins(app: &App, e: &mut DescriptorEncoder) -> std::fmt::Result {
    let sign_ins = app.authn.counts();
    counter(
        e,
        "vole_sign_in_failures",
        "Credentials checked and refused (each in the audit log)",
        sign_ins.failed,
    )?;
    counter(
        e,
        "vole_sign_ins_throttled",
        "Sign-ins refused with 429 because their address had failed too often (not audited one by one)",
        sign_ins.throttled,
    )?;
    Ok(())
}

/// The logs: frames, bytes and fsyncs per log, and their histograms.
fn encode_logs(app: &App, e: &mut DescriptorEncoder) -> std::fmt::Result {
    let logs = [
        ("refs", app.logs.refs.live_counters()),
        ("meta", app.logs.meta.live_counters()),
    ];
    let label = |name: &str| LogLabel {
        log: name.to_string(),
    };
    let per_log = |f: fn(&vole_log::Counters) -> u64| -> Vec<_> {
        logs.iter()
            .map(|(n, c)| {
                (
                    label(n),
                    prometheus_client::metrics::counter::ConstCounter::new(f(c)),
                )
            })
            .collect()
    };
    series(
        e,
        "vole_log_frames",
        "Frames appended, per log",
        &per_log(|c| c.frames.load(Ordering::Relaxed)),
    )?;
    series(
        e,
        "vole_log_bytes",
        "Bytes appended, per log",
        &per_log(|c| c.bytes.load(Ordering::Relaxed)),
    )?;
    series(
        e,
        "vole_log_fsyncs",
        "fsyncs that made appended frames durable, per log",
        &per_log(|c| c.syncs.load(Ordering::Relaxed)),
    )?;
    let histograms = |f: fn(&vole_log::Counters) -> &Histogram| -> Vec<(LogLabel, Histogram)> {
        logs.iter().map(|(n, c)| (label(n), f(c).clone())).collect()
    };
    series(
        e,
        "vole_log_fsync_seconds",
        "Time of each log fsync, per log",
        &histograms(|c| &c.sync_seconds),
    )?;
    series(
        e,
        "vole_log_group_frames",
        "Frames each fsync made durable (group commit size), per log",
        &histograms(|c| &c.group_frames),
    )?;
    Ok(())
}

/// The metadata store's fold.
fn encode_meta(app: &App, e: &mut DescriptorEncoder) -> std::fmt::Result {
    let meta = app.meta.stats();
    counter(
        e,
        "vole_meta_fold_commits",
        "Commits written to shard refs by the fold",
        meta.fold_commits,
    )?;
    counter(
        e,
        "vole_meta_folded_writes",
        "Metadata writes folded into shard refs",
        meta.folded_writes,
    )?;
    counter(
        e,
        "vole_meta_fold_cas_retries",
        "Shard ref updates that found the ref moved and went again",
        meta.foreign_moves,
    )?;
    counter(
        e,
        "vole_meta_fold_errors",
        "Fold cycles that failed (retried)",
        meta.fold_errors,
    )?;
    gauge(
        e,
        "vole_meta_fold_lag_writes",
        "Metadata writes acknowledged but not yet folded",
        meta.pending as i64,
    )?;
    unlabelled(
        e,
        "vole_meta_fold_batch_writes",
        "Writes folded per fold cycle",
        &app.meta.fold_batches().0,
    )?;
    Ok(())
}

/// Webhook deliveries.
fn encode_webhooks(app: &App, e: &mut DescriptorEncoder) -> std::fmt::Result {
    use std::sync::atomic::Ordering;
    let webhooks = &app.api.webhooks;
    counter(
        e,
        "vole_webhook_deliveries",
        "Webhook deliveries a receiver took (a 2xx)",
        webhooks.counts.delivered.load(Ordering::Relaxed),
    )?;
    counter(
        e,
        "vole_webhook_failed_attempts",
        "Webhook delivery attempts without a 2xx (each retried)",
        webhooks.counts.failed_attempts.load(Ordering::Relaxed),
    )?;
    counter(
        e,
        "vole_webhook_dropped_events",
        "Events dropped from a hook's queue past its bound, oldest first",
        webhooks.queue().dropped(0).1,
    )?;
    gauge(
        e,
        "vole_webhook_failing_hooks",
        "Hooks whose attempts at their oldest event ran out",
        webhooks.failing() as i64,
    )?;
    Ok(())
}

/// The site cache.
fn encode_site_cache(app: &App, e: &mut DescriptorEncoder) -> std::fmt::Result {
    let site = app.sites.sites.store.cache_counts();
    counter(
        e,
        "vole_site_cache_hits",
        "Site blob lookups answered from the cache",
        site.hits,
    )?;
    counter(
        e,
        "vole_site_cache_misses",
        "Site blob lookups the cache did not hold",
        site.misses,
    )?;
    counter(
        e,
        "vole_site_cache_evictions",
        "Site cache entries evicted to keep its byte bound",
        site.evictions,
    )?;
    gauge(
        e,
        "vole_site_cache_bytes",
        "Bytes the site cache holds",
        site.bytes as i64,
    )?;
    gauge(
        e,
        "vole_site_cache_limit_bytes",
        "The site cache's byte bound",
        site.limit as i64,
    )?;
    Ok(())
}

/// The pack cache.
fn encode_pack_cache(app: &App, e: &mut DescriptorEncoder) -> std::fmt::Result {
    let packs = app.control.pack_cache.stats();
    for (name, help, value) in [
        (
            "vole_pack_cache_hits",
            "Pack requests served from a complete cached pack",
            packs.hits,
        ),
        (
            "vole_pack_cache_misses",
            "Pack requests that started pack-objects for the cache",
            packs.misses,
        ),
        (
            "vole_pack_cache_followers",
            "Pack requests that followed a pack being made",
            packs.followers,
        ),
        (
            "vole_pack_cache_bypasses",
            "Pack requests that ran pack-objects without the cache",
            packs.bypasses,
        ),
        (
            "vole_pack_cache_served_bytes",
            "Bytes of cached packs served",
            packs.bytes_served,
        ),
        (
            "vole_pack_cache_evictions",
            "Cached packs evicted by size or age",
            packs.evictions,
        ),
        (
            "vole_pack_cache_failures",
            "Packs for the cache that were not made",
            packs.failures,
        ),
    ] {
        counter(e, name, help, value)?;
    }
    gauge(
        e,
        "vole_pack_cache_bytes",
        "Bytes of packs the cache holds on disk",
        packs.bytes as i64,
    )?;
    Ok(())
}

/// The whole exposition, as of now.
pub fn render(app: &Arc<App>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(AppCollector(app.clone())));
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}

fn exposition(app: &Arc<App>) -> Response {
    ([(header::CONTENT_TYPE, TEXT_FORMAT)], render(app)).into_response()
}

/// `GET /metrics` on the main address: server admins only.
pub async fn admin_metrics(
    State(app): State<Arc<App>>,
    axum::Extension(principal): axum::Extension<Principal>,
) -> Result<Response, AppError> {
    app.access
        .check_server(&principal, ServerAction::ReadStats)
        .map_err(|denied| AppError::denied(denied, || "not found".to_string()))?;
    Ok(exposition(&app))
}

/// Serves `/metrics` (and nothing else) on `listener` until the task is
/// dropped.
pub async fn serve(listener: tokio::net::TcpListener, app: Arc<App>) {
    let router = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(|State(app): State<Arc<App>>| async move { exposition(&app) }),
        )
        .with_state(app);
    if let Err(e) = axum::serve(listener, router).await {
        tracing::warn!(error = %e, "the metrics listener stopped");
    }
}
