//! Signing in and out in the browser, and who the pages are for.
//!
//! - [`session_layer`], around every page: a request with no credential
//!   of its own (no `Authorization`) and a live session's cookie is that
//!   session's user, for the pages only (git and the API never read the
//!   cookie: `vole_http::browser`). The viewer (who is signed in, the
//!   sign-out form's CSRF token) is a task-local the header reads
//!   ([`viewer`]); pages for a signed-in viewer are `Cache-Control:
//!   private`. A visitor refused for want of signing in (a 401: an
//!   admin's page of a public repo, say) is sent to sign in (303, with
//!   `next` the page asked for).
//! - `GET /-/login`: the form, its CSRF token bound to a pre-session
//!   cookie made here; `POST /-/login`: the token and the `Origin`
//!   checked, then the password through `vole_http::auth`'s door (its
//!   throttle and audit), a session begun, its cookie set, and a 303 to
//!   `next` (only a path of this server).
//! - `POST /-/logout`: the session's own CSRF token, then the session is
//!   ended (durably) and its cookie removed.

use std::net::IpAddr;

use axum::Form;
use axum::extract::{FromRequest, Request};
use axum::http::header::{CACHE_CONTROL, LOCATION, SET_COOKIE};
use axum::middleware::Next;
use serde::Deserialize;
use vole_http::auth::client_address;
use vole_http::browser::{
    Cookies, check_origin, cookie, csrf_matches, csrf_token, is_secret_shaped, new_pre_session,
    safe_next,
};

use super::*;

/// Who the page being rendered is for.
#[derive(Debug, Clone, Default)]
pub struct Viewer {
    /// The signed-in user's name.
    pub user: Option<String>,
    /// Their display name, when they have one (the header shows it).
    pub full_name: Option<String>,
    /// The sign-out form's CSRF token (empty when the request was
    /// signed in by a credential of its own, with no session to end).
    pub csrf: String,
    /// Whom the request is for and the rules, to tell which links to
    /// show (a settings tab for a repo's admins only).
    rules: Option<(Principal, Arc<Access>)>,
    /// The metadata store, for the repo tabs' open counts.
    meta: Option<Arc<vole_meta::MetaStore>>,
}

impl Viewer {
    /// How many issues and pull requests of `repo` are open (the repo
    /// tabs show them; an in-memory count, no I/O, no wait): `None` while
    /// the repo's issues are still being read after a start.
    pub fn open_counts(&self, repo: &str) -> Option<vole_meta::OpenCounts> {
        RepoName::parse(repo)
            .ok()
            .zip(self.meta.as_ref())
            .and_then(|(name, meta)| meta.open_counts_now(&name))
    }

    /// Whether the viewer may administer repo `repo` (`owner/name`): the
    /// settings tab shows only then. The routes check again.
    pub fn may_administer(&self, repo: &str) -> bool {
        self.allows(repo, |access, principal, name| {
            access.check(principal, vole_access::Action::Administer, name)
        })
    }

    /// Whether `rule` lets the viewer act on repo `repo` (`owner/name`):
    /// a page shows a button only then; its route asks the same rule.
    pub fn allows(
        &self,
        repo: &str,
        rule: impl FnOnce(&Access, &Principal, &RepoName) -> Result<(), vole_access::Denied>,
    ) -> bool {
        let Some((principal, access)) = &self.rules else {
            return false;
        };
        RepoName::parse(repo).is_ok_and(|name| rule(access, principal, &name).is_ok())
    }

    /// Whether the viewer may close, reopen and edit a thread by `author`.
    pub fn may_edit(&self, repo: &str, author: &str) -> bool {
        self.may_write(repo, |access, principal, name| {
            access.check_edit(principal, name, author)
        })
    }

    /// Whether the viewer may set labels (and merge): a writer.
    pub fn may_label(&self, repo: &str) -> bool {
        self.may_write(repo, |access, principal, name| {
            access.check_label(principal, name)
        })
    }

    /// Whether the viewer may merge into `target` (a branch): a writer,
    /// whom the branch's protection does not refuse a fast-forward of it
    /// (what every merge method gives the target).
    pub fn may_merge(&self, repo: &str, target: &str) -> bool {
        self.may_write(repo, |access, principal, name| {
            access.check_merge(principal, name)?;
            let update = vole_hooks::RefUpdate {
                ref_name: format!("refs/heads/{target}"),
                old: "1".repeat(40),
                new: "2".repeat(40),
                fast_forward: Some(true),
            };
            match access.check_ref_updates(principal, name, &[update]).first() {
                None => Ok(()),
                Some(refused) => Err(vole_access::Denied::Forbidden(refused.reason.clone())),
            }
        })
    }

    /// Whether the viewer may edit or delete a comment by `author`.
    pub fn may_edit_comment(&self, repo: &str, author: &str) -> bool {
        self.may_write(repo, |access, principal, name| {
            access.check_comment_edit(principal, name, author)
        })
    }

    /// Whether the viewer may open issues and comment.
    pub fn may_comment(&self, repo: &str) -> bool {
        self.may_write(repo, |_, _, _| Ok(()))
    }

    /// A form's rule, for a session (a request signed in by a credential
    /// of its own has no forms) that may write the repo's metadata.
    fn may_write(
        &self,
        repo: &str,
        rule: impl FnOnce(&Access, &Principal, &RepoName) -> Result<(), vole_access::Denied>,
    ) -> bool {
        !self.csrf.is_empty()
            && self.allows(repo, |access, principal, name| {
                access.check(principal, vole_access::Action::WriteMeta, name)?;
                rule(access, principal, name)
            })
    }
}

tokio::task_local! {
    static VIEWER: Viewer;
}

/// The viewer of the page being rendered (anonymous outside a page).
pub fn viewer() -> Viewer {
    VIEWER.try_with(Viewer::clone).unwrap_or_default()
}

fn cookies(app: &WebState) -> Cookies {
    app.sessions.cookies
}

/// See the module doc.
pub async fn session_layer(
    State(app): State<Arc<WebState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let mut viewer = Viewer {
        meta: Some(app.api.meta.clone()),
        ..Viewer::default()
    };
    let given = request
        .extensions()
        .get::<Principal>()
        .and_then(|p| p.identity().map(|id| id.user.clone()));
    if let Some(user) = given {
        viewer.user = Some(user);
    } else if let Some((principal, secret)) = app.sessions.of(request.headers()) {
        viewer.user = Some(principal.name().to_string());
        viewer.csrf = csrf_token(secret);
        request.extensions_mut().insert(principal);
    }
    let signed_in = viewer.user.is_some();
    if let Some(user) = &viewer.user {
        // The user index is in memory: no I/O per page.
        viewer.full_name = app
            .accounts
            .user(user)
            .ok()
            .flatten()
            .map(|u| u.full_name)
            .filter(|name| !name.trim().is_empty());
    }
    if signed_in && let Some(principal) = request.extensions().get::<Principal>() {
        viewer.rules = Some((principal.clone(), app.access.clone()));
    }
    let is_static = request.uri().path().starts_with("/static/");
    // Where a visitor who must sign in first comes back to: the page
    // asked for, or for a form the page it was sent from.
    let back = match request.method() {
        &axum::http::Method::GET | &axum::http::Method::HEAD => request
            .uri()
            .path_and_query()
            .map_or("/".to_string(), |p| p.as_str().to_string()),
        _ => {
            vole_http::browser::referring_path(request.headers(), app.config.public_url.as_deref())
                .unwrap_or_else(|| "/".to_string())
        }
    };
    let mut response = VIEWER.scope(viewer, next.run(request)).await;
    // An action that needs a signed-in person, asked by a visitor who is
    // not: to the sign-in page, and back once signed in.
    if !signed_in && response.status() == StatusCode::UNAUTHORIZED {
        return to_sign_in(&back);
    }
    // A page that must not be kept at all (a new token's) stays no-store.
    let no_store = response
        .headers()
        .get(CACHE_CONTROL)
        .is_some_and(|v| v.as_bytes().windows(8).any(|w| w == b"no-store"));
    if signed_in && !is_static && !no_store {
        response
            .headers_mut()
            .insert(CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    }
    response
}

#[derive(Template)]
#[template(path = "sign_in.html")]
struct SignInPage {
    csrf: String,
    /// `/-/register` is open.
    registration: bool,
    next: String,
    user: String,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

/// `GET /-/login?next=`: the form (or, signed in already, on to `next`).
pub async fn sign_in_page(
    State(app): State<Arc<WebState>>,
    Query(query): Query<NextQuery>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let next = safe_next(query.next.as_deref()).to_string();
    if !viewer().csrf.is_empty() {
        return Ok(see_other(&next, &[]));
    }
    pre_session_form(&app, &headers, |csrf| {
        render(SignInPage {
            csrf,
            registration: app.config.auth.registration_open,
            next,
            user: String::new(),
            error: None,
        })
    })
}

/// A form for a visitor not signed in yet (sign-in, registration): its
/// CSRF token bound to the pre-session cookie, made here when the visitor
/// has none; never stored by a cache.
pub(crate) fn pre_session_form(
    app: &WebState,
    headers: &HeaderMap,
    render_with: impl FnOnce(String) -> Result<Response, AppError>,
) -> Result<Response, AppError> {
    let cookies = cookies(app);
    let (pre, fresh) = match cookie(headers, cookies.pre_session()) {
        Some(pre) if is_secret_shaped(pre) => (pre.to_string(), false),
        _ => (new_pre_session(), true),
    };
    let mut response = render_with(csrf_token(&pre))?;
    if fresh {
        response
            .headers_mut()
            .append(SET_COOKIE, cookies.set(cookies.pre_session(), &pre, None));
    }
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The pre-session cookie a form of [`pre_session_form`] was posted with,
/// when the form's token was made for it (403 otherwise).
pub(crate) fn checked_pre_session<'h>(
    app: &WebState,
    headers: &'h HeaderMap,
    csrf: &str,
) -> Result<&'h str, AppError> {
    let cookies = cookies(app);
    let pre = cookie(headers, cookies.pre_session()).unwrap_or_default();
    // The token binds the form to the cookie the browser holds. It is no
    // secret from whoever chose that cookie: a value planted by a sibling
    // host (cookie tossing) has a token its planter can work out, so what
    // refuses their cross-site post is `check_origin`, which every form
    // of this kind passes first. A value not shaped as vole's is refused.
    if !is_secret_shaped(pre) || !csrf_matches(pre, csrf) {
        return Err(AppError::new(
            StatusCode::FORBIDDEN,
            "this form has expired or was not made by this server; load the page again",
        ));
    }
    Ok(pre)
}

/// Ends the session this browser had, if it sent one, as a sign-in or a
/// registration (from a form kept from before it signed in) replaces its
/// cookie: a session no cookie holds should not stay live until it
/// expires. A failure is logged; the new session stands.
pub(crate) fn end_replaced_session(app: &WebState, headers: &HeaderMap) {
    let had = cookie(headers, cookies(app).session()).filter(|s| is_secret_shaped(s));
    if let Some(had) = had
        && let Err(e) = app.authn.sign_out(had)
    {
        tracing::warn!(error = %e.message(), "the session a sign-in replaced did not end");
    }
}

/// The cookies that make a browser signed in with `secret` (its
/// pre-session cookie cleared).
pub(crate) fn signed_in_cookies(app: &WebState, secret: &str) -> [HeaderValue; 2] {
    let cookies = cookies(app);
    [
        cookies.set(
            cookies.session(),
            secret,
            Some(app.config.auth.session_absolute),
        ),
        cookies.clear(cookies.pre_session()),
    ]
}

#[derive(Debug, Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    user: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    csrf: String,
    next: Option<String>,
}

/// `POST /-/login`.
pub async fn sign_in(
    State(app): State<Arc<WebState>>,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, AppError> {
    check_origin(&headers, app.config.public_url.as_deref())?;
    let client: IpAddr = client_address(request.extensions());
    let Form(form) = Form::<SignInForm>::from_request(request, &())
        .await
        .map_err(|e| AppError::bad_request(format!("the sign-in form is not readable: {e}")))?;
    let pre = checked_pre_session(&app, &headers, &form.csrf)?;
    let next = safe_next(form.next.as_deref()).to_string();
    match app
        .authn
        .sign_in(form.user.trim(), &form.password, client)
        .await
    {
        Ok((_, secret)) => {
            end_replaced_session(&app, &headers);
            Ok(see_other(&next, &signed_in_cookies(&app, secret.expose())))
        }
        Err(refused) => {
            // A wrong password is the form again with a message (200, as
            // a 401 would need a Basic challenge); a throttle keeps its 429
            // and Retry-After, a busy server its 503.
            let (status, error) = match refused.status() {
                StatusCode::UNAUTHORIZED => {
                    (StatusCode::OK, "Wrong user name or password.".to_string())
                }
                status => (status, refused.message().to_string()),
            };
            let mut response = render(SignInPage {
                csrf: csrf_token(pre),
                registration: app.config.auth.registration_open,
                next,
                user: form.user,
                error: Some(error),
            })?;
            *response.status_mut() = status;
            if let Some(secs) = refused.retry_after_secs() {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            Ok(response)
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct SignOutForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /-/logout`.
pub async fn sign_out(
    State(app): State<Arc<WebState>>,
    headers: HeaderMap,
    Form(form): Form<SignOutForm>,
) -> Result<Response, AppError> {
    check_origin(&headers, app.config.public_url.as_deref())?;
    let cookies = cookies(&app);
    let Some(secret) = cookie(&headers, cookies.session()) else {
        return Ok(see_other("/", &[cookies.clear(cookies.session())]));
    };
    if !csrf_matches(secret, &form.csrf) {
        return Err(AppError::new(
            StatusCode::FORBIDDEN,
            "this sign-out form was not made for your session; sign out from a page of this server",
        ));
    }
    app.authn.sign_out(secret)?;
    Ok(see_other("/", &[cookies.clear(cookies.session())]))
}

/// A 303 to the sign-in page, which returns to `next` (a path of this
/// server) once signed in.
pub(crate) fn to_sign_in(next: &str) -> Response {
    let next = percent_encoding::utf8_percent_encode(next, percent_encoding::NON_ALPHANUMERIC);
    see_other(&format!("/-/login?next={next}"), &[])
}

/// A 303 to `to`, setting `cookies`.
pub(crate) fn see_other(to: &str, cookies: &[HeaderValue]) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    headers.insert(
        LOCATION,
        HeaderValue::from_str(to).unwrap_or(HeaderValue::from_static("/")),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    for value in cookies {
        headers.append(SET_COOKIE, value.clone());
    }
    response
}
