//! [`RepoAccess`]: the one extractor a handler that acts on a repo takes.
//! It takes the principal the authentication middleware put into the
//! request, resolves the route's `{owner}` and `{repo}` through
//! [`Access`] for the action its marker names ([`Read`], [`ReadSite`],
//! [`Push`], [`WriteMeta`], [`Administer`], or one a service defines, such
//! as the transport's ref advertisement, whose query names it), and answers a refusal the way the surface does
//! ([`RepoSurface::refuse`]: plain 401/404/403 for git and the API, the
//! page's 404 for the web and sites), once for every handler.
//!
//! The guarantee is kept at the router too: [`require_repo_access`], a
//! route layer on every service's routes, gives each request whose route
//! template names `{repo}` a ticket that only this extractor punches; a
//! response to such a request with its ticket unpunched (a handler that
//! looked the repo up some other way) is replaced with a 500 that names
//! the route, and logged. A handler that forgets the extractor fails
//! closed, and every test that reaches its route says so.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{FromRequestParts, MatchedPath, Path, Request};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use vole_access::{Access, Action, Denied, Principal, ResolvedRepo};

use crate::AppError;

/// What a service's state gives the extractor: its [`Access`] and how its
/// surface answers a refusal.
pub trait RepoSurface: Send + Sync {
    fn access(&self) -> &Access;
    /// The answer to a refusal of `owner/repo` (as the route named it).
    fn refuse(&self, denied: Denied, owner: &str, repo: &str) -> AppError;
    /// The repo's name in the route's `{repo}` segment: git clients name
    /// it with or without `.git`, the other surfaces without.
    fn repo_segment<'a>(&self, segment: &'a str) -> &'a str {
        segment
    }
}

impl<T: RepoSurface> RepoSurface for Arc<T> {
    fn access(&self) -> &Access {
        T::access(self)
    }
    fn refuse(&self, denied: Denied, owner: &str, repo: &str) -> AppError {
        T::refuse(self, denied, owner, repo)
    }
    fn repo_segment<'a>(&self, segment: &'a str) -> &'a str {
        T::repo_segment(self, segment)
    }
}

/// The action a handler acts on its repo for.
pub trait Acts: Send + Sync + 'static {
    /// The action, from the request (a fixed one for the markers here).
    fn action(parts: &Parts) -> Result<Action, AppError>;
}

macro_rules! fixed_action {
    ($($(#[$doc:meta])* $marker:ident => $action:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $marker;
        impl Acts for $marker {
            fn action(_: &Parts) -> Result<Action, AppError> {
                Ok(Action::$action)
            }
        }
    )*};
}

fixed_action! {
    /// Clone, fetch, browse, API reads.
    Read => Read;
    /// Read the repo's site.
    ReadSite => ReadSite;
    /// Push.
    Push => Push;
    /// Write issues, change requests, comments.
    WriteMeta => WriteMeta;
    /// Change the ACL or settings, delete the repo.
    Administer => Administer;
}

/// A repo the principal may act on for `A`, resolved once per request:
/// the repo (its name and the incarnation the decision was about; it
/// dereferences to it) and who asked.
#[derive(Debug, Clone)]
pub struct RepoAccess<A> {
    pub repo: ResolvedRepo,
    pub principal: Principal,
    /// What was decided (for a marker whose action the request names, the
    /// one it named).
    pub action: Action,
    acts: PhantomData<A>,
}

impl<A> std::ops::Deref for RepoAccess<A> {
    type Target = ResolvedRepo;
    fn deref(&self) -> &ResolvedRepo {
        &self.repo
    }
}

impl<S: RepoSurface, A: Acts> FromRequestParts<S> for RepoAccess<A> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        // Punched first: a refusal is this extractor's answer too.
        if let Some(ticket) = parts.extensions.get::<AccessTicket>() {
            ticket.0.store(true, Ordering::Release);
        }
        let principal = parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| {
                AppError::internal(
                    "a repo route ran without the authentication layer",
                    "no principal in the request",
                )
                .into_response()
            })?;
        let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let (Some(owner), Some(segment)) = (params.get("owner"), params.get("repo")) else {
            return Err(AppError::internal(
                "RepoAccess on a route without {owner} and {repo}",
                parts.uri.path(),
            )
            .into_response());
        };
        let action = A::action(parts).map_err(IntoResponse::into_response)?;
        let name = state.repo_segment(segment);
        match state.access().resolve(&principal, owner, name, action) {
            Ok(repo) => Ok(RepoAccess {
                repo,
                principal,
                action,
                acts: PhantomData,
            }),
            Err(denied) => Err(state.refuse(denied, owner, name).into_response()),
        }
    }
}

/// Set by [`require_repo_access`] on a repo route's request; punched by
/// [`RepoAccess`].
#[derive(Debug, Clone)]
struct AccessTicket(Arc<AtomicBool>);

/// The route layer that keeps every handler of a repo route behind
/// [`RepoAccess`] (see the module doc).
pub async fn require_repo_access(request: Request, next: Next) -> Response {
    // Only a repo route's template is copied (for the log line below).
    let Some(route) = request
        .extensions()
        .get::<MatchedPath>()
        .filter(|m| m.as_str().contains("{repo}"))
        .map(|m| m.as_str().to_string())
    else {
        return next.run(request).await;
    };
    let ticket = Arc::new(AtomicBool::new(false));
    let mut request = request;
    request
        .extensions_mut()
        .insert(AccessTicket(ticket.clone()));
    let response = next.run(request).await;
    if ticket.load(Ordering::Acquire) {
        return response;
    }
    // The router's own answer to a method the route does not take (an
    // empty 405; the router adds `Allow` after this layer): no handler
    // ran, and it says nothing of the repo (the same for a private, a
    // public and a missing one).
    if response.status() == axum::http::StatusCode::METHOD_NOT_ALLOWED
        && axum::body::HttpBody::size_hint(response.body()).exact() == Some(0)
    {
        return response;
    }
    AppError::internal(
        "a repo route answered without RepoAccess; the answer was withheld",
        &route,
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::get;
    use tower::ServiceExt;

    async fn status(router: &Router, path: &str) -> (StatusCode, String) {
        let response = router
            .clone()
            .oneshot(Request::builder().uri(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn a_repo_route_whose_handler_skips_the_extractor_is_withheld() {
        let router = Router::new()
            // Looks the repo up itself: what the layer is there to stop.
            .route("/{owner}/{repo}", get(|| async { "the repo's page" }))
            .route("/healthz", get(|| async { "ok" }))
            .route_layer(axum::middleware::from_fn(require_repo_access));
        let (code, body) = status(&router, "/alice/secret").await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        assert!(!body.contains("the repo's page"), "{body}");
        // A route that names no repo is not the layer's business.
        assert_eq!(status(&router, "/healthz").await.0, StatusCode::OK);
        // A method the route does not take is the router's 405, which no
        // handler answered and which says nothing of the repo.
        let response = router
            .clone()
            .oneshot(
                Request::builder()
                    .method("PUT")
                    .uri("/alice/secret")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
