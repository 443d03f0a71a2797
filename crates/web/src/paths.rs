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

/// Segments encoded as a URL path (see [`vole_git::tree_path::encode_segments`]).
pub(super) fn encode_path(segments: &[String]) -> String {
    vole_git::tree_path::encode_segments(segments)
}

/// A revision (which may hold slashes) as a URL path.
pub(super) fn rev_path(rev: &str) -> String {
    vole_git::tree_path::encode_segments(&rev.split('/').collect::<Vec<_>>())
}

pub(super) fn crumbs(repo: &str, rev: &str, path: &[String]) -> Vec<Crumb> {
    (0..path.len())
        .map(|i| Crumb {
            name: path[i].clone(),
            href: format!(
                "/{repo}/-/tree/{}/{}",
                rev_path(rev),
                encode_path(&path[..=i])
            ),
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

/// Template filters: `{{ rev|path }}` writes a revision (or any name
/// with slashes) into a link, each segment percent-encoded, so a branch
/// named `a#b` or `a?b` links to itself; `{{ time|when|safe }}` writes a
/// time as how long ago it was (`super::dates`).
pub(crate) mod filters {
    #[askama::filter_fn]
    pub fn path(value: impl std::fmt::Display, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(super::rev_path(&value.to_string()))
    }

    #[askama::filter_fn]
    pub fn when(value: impl std::fmt::Display, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(super::super::dates::when_html(
            &value.to_string(),
            std::time::SystemTime::now(),
        ))
    }
}
