//! The pagination extractors, one per kind of client: [`ApiPage`] is
//! strict (a `page` or `per_page` that is not a whole number in range is a
//! 400 saying so, bar Gitea's defaults for a `page` or `limit` of 0), [`WebPage`] is lenient (anything else is page 1, so a
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
        // As Gitea's: a `page` of 0 or less is the first, a `limit` of 0
        // or less the default and one past its most that most; `per_page`
        // is vole's, refused past its bound. Past the page bound, or not
        // a number, stays a 400.
        let limit = query.get("limit").map(|text| match text.parse::<i64>() {
            Ok(n) if n > i64::from(GITEA_MAX_LIMIT) => GITEA_MAX_LIMIT.to_string(),
            Ok(n) if n <= 0 => API_PER_PAGE.to_string(),
            _ => text.clone(),
        });
        let page = query.get("page").map(|text| match text.parse::<i64>() {
            Ok(n) if n <= 0 => "1".to_string(),
            _ => text.clone(),
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
