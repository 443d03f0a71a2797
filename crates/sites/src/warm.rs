//! [`WarmLayer`]: warm site requests answered before routing, from the
//! remembered plan and the byte cache, touching no git.

use super::*;

/// The route the metrics count a warm site answer under.
pub const WARM_ROUTE: &str = "site (warm)";

/// Answers warm requests for UI-origin sites before routing: a raw path
/// found in the warm map was routed to [`site_path`] when it was
/// remembered, and routes do not change, so the router (and its parameter
/// extraction) is skipped. Everything else, and any request to a
/// configured site domain, goes on to the router.
#[derive(Clone)]
pub struct WarmLayer {
    pub app: Arc<SitesState>,
}

impl<S> tower::Layer<S> for WarmLayer {
    type Service = Warmed<S>;

    fn layer(&self, inner: S) -> Warmed<S> {
        Warmed {
            app: self.app.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct Warmed<S> {
    app: Arc<SitesState>,
    inner: S,
}

impl<S> tower::Service<Request> for Warmed<S>
where
    S: tower::Service<Request, Response = Response, Error = std::convert::Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let warm = (request.method() == Method::GET || request.method() == Method::HEAD)
            && principal_of(&request) == Some(&Principal::Anonymous)
            && !self.app.sessions.sent(request.headers())
            && self.app.sites.domain_of(request.headers()).is_none();
        let hit = warm
            .then(|| {
                self.app
                    .sites
                    .warm_plan(request.uri().path(), Versions::now(&self.app))
            })
            .flatten();
        let Some(hit) = hit else {
            return Box::pin(self.inner.call(request));
        };
        let app = self.app.clone();
        Box::pin(async move {
            let site_request = SiteRequest {
                key: request.uri().path(),
                method: request.method(),
                headers: request.headers(),
                sandbox: true,
                principal: &Principal::Anonymous,
            };
            let mut response = site_request
                .answer(&app, &hit.plan, &hit.repo_path)
                .await
                .unwrap_or_else(IntoResponse::into_response);
            // Answered before routing: named for the metrics here.
            response
                .extensions_mut()
                .insert(vole_stdx::metrics::Route(WARM_ROUTE.into()));
            Ok(response)
        })
    }
}
