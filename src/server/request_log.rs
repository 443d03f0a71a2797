//! One log line per HTTP request: method, path (never the query, which may
//! carry tokens), status, bytes sent and duration. The line is written when
//! the response body is finished or dropped, so streamed responses are
//! counted whole and aborted ones still get their line; the request is
//! counted in the metrics then too, by its route's template.
//!
//! Every request runs in a `request` span with its id (its own
//! `X-Request-Id`, from a proxy say, when that is a plain token, and then
//! sent back; else a new ULID, not sent, so that the same request gets the
//! same bytes), so every line logged while it is handled names it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{Method, Uri};
use axum::response::Response;
use http_body::Frame;

use axum::http::{HeaderMap, HeaderValue};
use tracing::Instrument;

use super::access_line::{self, AccessLine};
use vole_stdx::metrics::{HttpMetrics, Route};

const REQUEST_ID: axum::http::HeaderName = axum::http::HeaderName::from_static("x-request-id");

/// The request's id, and whether it came with the request: the one it
/// sent (from a proxy, say) when that is a plain token (at most 64 letters,
/// digits, `-`, `_`, `.`: nothing that could forge a log line), else a new
/// ULID.
fn request_id(headers: &HeaderMap) -> (HeaderValue, bool) {
    let sent = headers.get(&REQUEST_ID).filter(|value| {
        let bytes = value.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= 64
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    });
    match sent {
        Some(value) => (value.clone(), true),
        None => (
            HeaderValue::from_str(&ulid::Ulid::new().to_string())
                .expect("a ULID is a valid header value"),
            false,
        ),
    }
}

/// The layer that logs every request (a hand-written tower layer rather than
/// `from_fn`: no boxed future and no service clone per request).
#[derive(Debug, Clone)]
pub struct RequestLogLayer {
    pub metrics: Arc<HttpMetrics>,
}

impl<S> tower::Layer<S> for RequestLogLayer {
    type Service = RequestLog<S>;

    fn layer(&self, inner: S) -> RequestLog<S> {
        RequestLog {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct RequestLog<S> {
    inner: S,
    metrics: Arc<HttpMetrics>,
}

impl<S> tower::Service<Request> for RequestLog<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = LoggedResponse<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let started = Instant::now();
        let method = request.method().clone();
        // A `Uri` clone shares its bytes; only the path is logged.
        let uri = request.uri().clone();
        let (id, sent) = request_id(request.headers());
        // Only visible ASCII (checked, or a ULID).
        let span = tracing::info_span!(target: access_line::TARGET, "request", id = id.to_str().unwrap_or("-"));
        let inner = {
            let _entered = span.enter();
            self.inner.call(request)
        };
        LoggedResponse {
            inner: inner.instrument(span.clone()),
            line: Some((method, uri, started, id.clone())),
            metrics: self.metrics.clone(),
            echo: sent.then(|| id.clone()),
            span,
        }
    }
}

pin_project_lite::pin_project! {
    /// The inner response, its body wrapped to write the line at its end.
    pub struct LoggedResponse<F> {
        #[pin]
        inner: tracing::instrument::Instrumented<F>,
        line: Option<(Method, Uri, Instant, HeaderValue)>,
        metrics: Arc<HttpMetrics>,
        // Sent back only when the request brought it: a response that is
        // otherwise the same stays byte for byte the same (a hidden repo
        // answers exactly as a missing one).
        echo: Option<HeaderValue>,
        span: tracing::Span,
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for LoggedResponse<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(mut response) = ready!(this.inner.poll(cx));
        if let Some(id) = this.echo.take() {
            response.headers_mut().insert(REQUEST_ID, id);
        }
        let (method, uri, started, id) = this.line.take().expect("polled after completion");
        let status = response.status().as_u16();
        let route = response
            .extensions()
            .get::<Route>()
            .map(|route| route.0.clone());
        let metrics = this.metrics.clone();
        Poll::Ready(Ok(response.map(|body| {
            let complete = http_body::Body::is_end_stream(&body);
            Body::new(LoggedBody {
                inner: body,
                line: RequestLine {
                    method,
                    uri,
                    status,
                    bytes: 0,
                    complete,
                    started,
                    route,
                    metrics,
                    span: this.span.clone(),
                    id,
                },
            })
        })))
    }
}

struct RequestLine {
    method: Method,
    uri: Uri,
    status: u16,
    bytes: u64,
    complete: bool,
    started: Instant,
    route: Option<Arc<str>>,
    metrics: Arc<HttpMetrics>,
    span: tracing::Span,
    id: HeaderValue,
}

impl Drop for RequestLine {
    fn drop(&mut self) {
        let elapsed = self.started.elapsed();
        self.metrics
            .observe(self.route.as_deref(), self.status, elapsed);
        let duration_ms = (elapsed.as_secs_f64() * 1e6).round() / 1e3;
        // In the request's span: a filter may name it.
        let _entered = self.span.enter();
        // The same line as below, formatted cheaply, where tracing would
        // write it (`access_line`).
        if let Some(line) = AccessLine::installed()
            && !self.span.is_disabled()
            && tracing::enabled!(target: access_line::TARGET, tracing::Level::INFO)
        {
            let fields = access_line::Fields {
                id: self.id.to_str().unwrap_or("-"),
                method: self.method.as_str(),
                path: self.uri.path(),
                status: self.status,
                bytes: self.bytes,
                complete: self.complete,
                duration_ms,
            };
            line.write(&fields, std::time::SystemTime::now());
            return;
        }
        tracing::info!(
            target: access_line::TARGET,
            method = %self.method,
            path = %self.uri.path(),
            status = self.status,
            bytes = self.bytes,
            complete = self.complete,
            duration_ms,
            "request"
        );
    }
}

/// A response body that writes the request's log line when it ends
/// (sent, or dropped). Hand-written: it does what no body adapter of
/// http-body-util does, act on the end of the body.
struct LoggedBody {
    inner: Body,
    line: RequestLine,
}

impl http_body::Body for LoggedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.line.bytes += data.len() as u64;
                }
                if self.inner.is_end_stream() {
                    self.line.complete = true;
                }
            }
            Poll::Ready(None) => self.line.complete = true,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
