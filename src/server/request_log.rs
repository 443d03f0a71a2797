//! One log line per HTTP request: method, path (never the query, which may
//! carry tokens), status, bytes sent and duration. The line is written when
//! the response body is finished or dropped, so streamed responses are
//! counted whole and aborted ones still get their line.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http_body::Frame;

pub async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    response.map(|body| {
        let complete = http_body::Body::is_end_stream(&body);
        Body::new(LoggedBody {
            inner: body,
            line: RequestLine {
                method,
                path,
                status,
                bytes: 0,
                complete,
                started,
            },
        })
    })
}

struct RequestLine {
    method: axum::http::Method,
    path: String,
    status: u16,
    bytes: u64,
    complete: bool,
    started: Instant,
}

impl Drop for RequestLine {
    fn drop(&mut self) {
        tracing::info!(
            method = %self.method,
            path = %self.path,
            status = self.status,
            bytes = self.bytes,
            complete = self.complete,
            duration_ms = (self.started.elapsed().as_secs_f64() * 1e6).round() / 1e3,
            "request"
        );
    }
}

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
