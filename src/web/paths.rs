//! Paths in the web UI: a request's tree path checked ([`TreePath`]),
//! segments encoded back into links, breadcrumbs, redirects.

use super::*;

/// One link of a page's breadcrumb trail.
pub struct Crumb {
    pub(super) name: String,
    pub(super) href: String,
}

/// Path segments of a repo path, refused when they could not name a tree
/// entry (empty, `.`, `..`, NUL).
pub(crate) fn segments(path: &str) -> Result<Vec<String>, AppError> {
    TreePath::parse(path)
        .map(TreePath::into_segments)
        .map_err(|_| AppError::not_found("There is no such path."))
}

pub(super) fn encode_path(segments: &[String]) -> String {
    segments
        .iter()
        .map(|s| percent_encoding::utf8_percent_encode(s, PATH_SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// Characters escaped in one URL path segment.
pub(super) const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

pub(super) fn crumbs(repo: &str, rev: &str, path: &[String]) -> Vec<Crumb> {
    (0..path.len())
        .map(|i| Crumb {
            name: path[i].clone(),
            href: format!("/{repo}/-/tree/{rev}/{}", encode_path(&path[..=i])),
        })
        .collect()
}

pub(super) fn redirect(to: &str) -> Response {
    let mut response = StatusCode::FOUND.into_response();
    if let Ok(value) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}
