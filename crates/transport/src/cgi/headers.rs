//! The CGI header block http-backend writes before its output: read
//! within the idle timeout, and parsed into a status and headers.

use axum::http::{HeaderName, HeaderValue, StatusCode};
use tokio::io::AsyncReadExt;
use tokio::process::ChildStdout;

use super::child::ChildGroup;
use vole_http::AppError;

/// Largest CGI header block accepted from http-backend.
const MAX_CGI_HEADERS: usize = 64 << 10;

/// Reads the CGI headers within `idle`; a child that gave no usable
/// headers is reaped (or, past `idle`, killed) and the request fails.
pub(super) async fn read_in_time(
    stdout: &mut ChildStdout,
    group: &mut ChildGroup,
    idle: std::time::Duration,
    repo: &str,
) -> Result<(CgiHead, Vec<u8>), AppError> {
    match tokio::time::timeout(idle, read_cgi_headers(stdout)).await {
        Ok(Ok(parsed)) => Ok(parsed),
        Ok(Err(e)) => {
            let status = group.wait().await;
            Err(AppError::internal(
                "git http-backend gave no usable response",
                format!("{e}; exit {status:?}"),
            ))
        }
        Err(_) => {
            group.kill();
            Err(AppError::internal(
                "git http-backend sent no headers in time",
                repo,
            ))
        }
    }
}

/// Parsed CGI header block.
#[derive(Debug)]
pub struct CgiHead {
    pub status: StatusCode,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// Reads up to the blank line ending the CGI headers; returns them and the
/// body bytes read past it.
async fn read_cgi_headers(stdout: &mut ChildStdout) -> std::io::Result<(CgiHead, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((end, sep)) = find_header_end(&buf) {
            let head = parse_cgi_headers(&buf[..end])?;
            return Ok((head, buf[end + sep..].to_vec()));
        }
        if buf.len() > MAX_CGI_HEADERS {
            return Err(std::io::Error::other("CGI headers too long"));
        }
        let n = stdout.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::other(format!(
                "output ended before the CGI headers did ({} bytes)",
                buf.len()
            )));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

pub fn find_header_end(buf: &[u8]) -> Option<(usize, usize)> {
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

pub fn parse_cgi_headers(block: &[u8]) -> std::io::Result<CgiHead> {
    let text = std::str::from_utf8(block).map_err(std::io::Error::other)?;
    let mut head = CgiHead {
        status: StatusCode::OK,
        headers: Vec::new(),
    };
    for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| std::io::Error::other(format!("bad CGI header line {line:?}")))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().unwrap_or_default();
            head.status = code
                .parse::<u16>()
                .ok()
                .and_then(|c| StatusCode::from_u16(c).ok())
                .ok_or_else(|| std::io::Error::other(format!("bad CGI status {value:?}")))?;
        } else {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(std::io::Error::other)?;
            let value = HeaderValue::from_str(value).map_err(std::io::Error::other)?;
            head.headers.push((name, value));
        }
    }
    Ok(head)
}
