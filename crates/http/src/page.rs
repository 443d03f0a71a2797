//! The pagination extractors, one per kind of client: [`ApiPage`] reads
//! Gitea's `page` and `limit` as Gitea does (not a number above 0: the
//! first page, the default size; a limit past 50: 50) and answers a 400
//! that says so to a page past the bound or a vole `per_page` out of
//! range; [`WebPage`] is lenient (anything else is page 1, so a
//! mangled link still shows something). Both give a bounded
//! [`Pagination`].

use std::collections::HashMap;

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;

use super::AppError;
use vole_stdx::page::Pagination;

/// Items on an API page when the client does not say.
pub const API_PER_PAGE: u32 = 30;

/// The most a `?limit=` asks for (Gitea's default `MAX_RESPONSE_ITEMS`);
/// a larger one is taken as this.
pub const GITEA_MAX_LIMIT: u32 = 50;

/// `?page=&per_page=` (or Gitea's `?page=&limit=`) of an API list.
#[derive(Debug, Clone, Copy)]
pub struct ApiPage(pub Pagination);

/// `?page=` of a web page listing `PER_PAGE` items a page.
#[derive(Debug, Clone, Copy)]
pub struct WebPage<const PER_PAGE: u32>(pub Pagination);

fn query(parts: &Parts) -> HashMap<String, String> {
    Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
        .map(|Query(q)| q)
        .unwrap_or_default()
}

impl<S: Send + Sync> FromRequestParts<S> for ApiPage {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, AppError> {
        let query = Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
            .map_err(|e| AppError::bad_request(format!("malformed query string: {e}")))?
            .0;
        // As Gitea reads them: a `page` that is not a number above 0 is
        // the first, a `limit` that is not a number above 0 the default
        // and one past its most that most. Past the page bound stays a
        // 400; `per_page` is vole's, strict.
        let limit = query
            .get("limit")
            .map(|text| match text.trim().parse::<i64>() {
                Ok(n) if n > i64::from(GITEA_MAX_LIMIT) => GITEA_MAX_LIMIT.to_string(),
                Ok(n) if n > 0 => n.to_string(),
                _ => API_PER_PAGE.to_string(),
            });
        let page = query
            .get("page")
            .map(|text| match text.trim().parse::<i64>() {
                Ok(n) if n > 0 => n.to_string(),
                // Past i64: a number past every bound, refused as one.
                Err(_) if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => {
                    text.clone()
                }
                _ => "1".to_string(),
            });
        Pagination::parse(
            page.as_deref(),
            limit
                .as_deref()
                .or(query.get("per_page").map(String::as_str)),
            API_PER_PAGE,
        )
        .map(ApiPage)
        .map_err(|e| AppError::bad_request(e.to_string()))
    }
}

impl<S: Send + Sync, const PER_PAGE: u32> FromRequestParts<S> for WebPage<PER_PAGE> {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> Result<Self, std::convert::Infallible> {
        let query = query(parts);
        Ok(WebPage(Pagination::lenient(
            query.get("page").map(String::as_str),
            PER_PAGE,
        )))
    }
}
