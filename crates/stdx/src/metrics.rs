//! Prometheus metrics: the families measured where things happen (request
//! latency, fsync latency, group and batch sizes) and the helpers that
//! encode the counters other parts already keep, at scrape time, in the
//! text exposition format (`prometheus-client`).
//!
//! No label carries a repo, user or path: a label value is a route
//! template, a service, a log's name or a status code, so a scrape never
//! names a private repo. What the server exposes, and where, lives in
//! `server::metrics`; this module knows nothing of the rest of vole.

use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// The route that answered a request, as its template
/// (`/{owner}/{repo}/info/refs`), put in the response's extensions; a
/// response without one is counted as `none`.
#[derive(Debug, Clone)]
pub struct Route(pub std::sync::Arc<str>);

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: String,
    pub status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
}

/// Requests by route and status, and their latency by route (to the end
/// of the response body).
#[derive(Debug)]
pub struct HttpMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<RouteLabels, Histogram, fn() -> Histogram>,
}

impl Default for HttpMetrics {
    fn default() -> HttpMetrics {
        HttpMetrics::new()
    }
}

impl HttpMetrics {
    pub fn new() -> HttpMetrics {
        HttpMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
        }
    }

    pub fn observe(&self, route: Option<&str>, status: u16, took: Duration) {
        let route = route.unwrap_or("none").to_string();
        self.requests
            .get_or_create(&RequestLabels {
                route: route.clone(),
                status,
            })
            .inc();
        self.duration
            .get_or_create(&RouteLabels { route })
            .observe(took.as_secs_f64());
    }

    pub fn encode(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let metric = encoder.encode_descriptor(
            "vole_http_requests",
            "HTTP requests answered, by route template and status",
            None,
            self.requests.metric_type(),
        )?;
        self.requests.encode(metric)?;
        let metric = encoder.encode_descriptor(
            "vole_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response body, by route template",
            None,
            self.duration.metric_type(),
        )?;
        self.duration.encode(metric)
    }
}

/// Buckets for latencies from 50 µs to about 100 s.
pub fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.5, 17))
}

/// Buckets for counts from 1 to about 4,000 (group and batch sizes).
pub fn size_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 13))
}

/// Encodes an unlabelled counter kept elsewhere (`name` without
/// `_total`, which the encoder adds).
pub fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> std::fmt::Result {
    unlabelled(encoder, name, help, &ConstCounter::new(value))
}

/// Encodes an unlabelled gauge kept elsewhere.
pub fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> std::fmt::Result {
    unlabelled(encoder, name, help, &ConstGauge::new(value))
}

/// Encodes one unlabelled metric (a histogram kept elsewhere, say).
pub fn unlabelled(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: &impl EncodeMetric,
) -> std::fmt::Result {
    let family = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(family)
}

/// Encodes one family of `values`, one labelled series each: a metric of
/// one type named once, as the exposition format wants.
pub fn series<L: EncodeLabelSet, M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: &[(L, M)],
) -> std::fmt::Result {
    let Some((_, first)) = values.first() else {
        return Ok(());
    };
    let mut family = encoder.encode_descriptor(name, help, None, first.metric_type())?;
    for (labels, metric) in values {
        metric.encode(family.encode_family(labels)?)?;
    }
    Ok(())
}
