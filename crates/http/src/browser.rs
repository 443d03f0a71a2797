//! What a browser's requests need that git's and the API's do not: the
//! session cookie (read only by the web pages' layer, never by git or the
//! API, which a browser would otherwise let any site call with it), the
//! CSRF token every state-changing form carries, the same-origin check of
//! a POST, and the `next=` a sign-in returns to.
//!
//! - Cookies: `HttpOnly; SameSite=Lax; Path=/`, and, when `--public-url`
//!   is https, `Secure` with the `__Host-` prefix (no subdomain can set
//!   or shadow it).
//! - CSRF: a form's token is derived from the secret of the cookie it goes
//!   with (the session's, or before sign-in a pre-session cookie's), so
//!   only a page that could read the cookie can make it, and a token of
//!   another session does not match.
//! - A POST is refused when its `Origin` is present and not vole's own
//!   (the origin of `--public-url`, else the request's `Host`), when it is
//!   `null` (a sandboxed page, a site page served with a sandbox CSP), or
//!   when `Sec-Fetch-Site` says `cross-site`.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use headers::HeaderMapExt;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::AppError;
use crate::auth::Authn;
use vole_access::Principal;

/// The names and attributes of vole's browser cookies on this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookies {
    /// `--public-url` is https: `Secure` and the `__Host-` names.
    pub secure: bool,
}

impl Cookies {
    pub fn for_public_url(public_url: Option<&str>) -> Cookies {
        Cookies {
            secure: public_url.is_some_and(|u| u.starts_with("https://")),
        }
    }

    /// The session cookie's name.
    pub fn session(&self) -> &'static str {
        if self.secure {
            "__Host-vole_session"
        } else {
            "vole_session"
        }
    }

    /// The pre-session cookie's name (what a sign-in form's token is bound
    /// to before there is a session).
    pub fn pre_session(&self) -> &'static str {
        if self.secure {
            "__Host-vole_pre"
        } else {
            "vole_pre"
        }
    }

    /// A `Set-Cookie` value giving `name` the value `value` for `max_age`
    /// (`None`: until the browser closes; zero: removed).
    pub fn set(&self, name: &str, value: &str, max_age: Option<Duration>) -> HeaderValue {
        let mut text = format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax");
        if let Some(age) = max_age {
            text.push_str(&format!("; Max-Age={}", age.as_secs()));
        }
        if self.secure {
            text.push_str("; Secure");
        }
        HeaderValue::from_str(&text).expect("cookie names and secrets are visible ASCII")
    }

    /// A `Set-Cookie` value removing `name`.
    pub fn clear(&self, name: &str) -> HeaderValue {
        self.set(name, "", Some(Duration::ZERO))
    }
}

/// The session cookie of the web pages and the UI-origin sites: who it
/// stands for. Only the layers of those routes ask (git and the API never
/// do).
#[derive(Debug, Clone)]
pub struct Sessions {
    pub authn: Arc<Authn>,
    pub cookies: Cookies,
}

impl Sessions {
    /// The principal of the request's session cookie and the cookie's
    /// secret: none when the request carries a credential of its own
    /// (`Authorization`) or no live session's cookie.
    pub fn of<'h>(&self, headers: &'h HeaderMap) -> Option<(Principal, &'h str)> {
        if headers.contains_key(header::AUTHORIZATION) {
            return None;
        }
        let secret = cookie(headers, self.cookies.session())?;
        Some((self.authn.session_principal(secret)?, secret))
    }

    /// The request carries a session cookie, live or not (an answer to it
    /// may not be the anonymous one).
    pub fn sent(&self, headers: &HeaderMap) -> bool {
        cookie(headers, self.cookies.session()).is_some()
    }
}

/// The route layer of the pages that a session signs in: a request with
/// no credential of its own and a live session's cookie is that session's
/// user.
pub async fn session_principal(
    axum::extract::State(sessions): axum::extract::State<Arc<Sessions>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let anonymous = request
        .extensions()
        .get::<Principal>()
        .is_none_or(|p| *p == Principal::Anonymous);
    if anonymous && let Some((principal, _)) = sessions.of(request.headers()) {
        request.extensions_mut().insert(principal);
    }
    next.run(request).await
}

/// A new pre-session secret (random, the shape of a session's).
pub fn new_pre_session() -> String {
    vole_sessions::random_secret().expose().to_string()
}

/// `text` could be a secret vole made (checked before it is used).
pub fn is_secret_shaped(text: &str) -> bool {
    vole_sessions::is_secret_shaped(text)
}

/// The value of the cookie `name` in the request, if it sent one.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// The CSRF token of forms that go with the cookie secret `secret`.
pub fn csrf_token(secret: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"vole csrf token\0");
    hash.update(secret.as_bytes());
    hex::encode(&hash.finalize()[..20])
}

/// `presented` is the CSRF token of `secret`.
pub fn csrf_matches(secret: &str, presented: &str) -> bool {
    let expected = csrf_token(secret);
    expected.as_bytes().ct_eq(presented.as_bytes()).into()
}

/// Two CSRF tokens are the same (compared in constant time); an empty one
/// matches nothing.
pub fn same_token(expected: &str, presented: &str) -> bool {
    !expected.is_empty() && bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
}

/// Refuses a state-changing request that did not come from vole's own
/// pages (see the module doc): 403 with a message.
pub fn check_origin(headers: &HeaderMap, public_url: Option<&str>) -> Result<(), AppError> {
    let refused = |why: &str| {
        Err(AppError::new(
            StatusCode::FORBIDDEN,
            format!(
                "this form was sent from another site ({why}); use the form on this server's own page"
            ),
        ))
    };
    if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"))
    {
        return refused("Sec-Fetch-Site: cross-site");
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("null").trim();
    if origin.eq_ignore_ascii_case("null") {
        return refused("Origin: null");
    }
    let Some(sent) = origin_of(origin) else {
        return refused(&format!("Origin: {origin}"));
    };
    let own = match public_url {
        Some(url) => origin_of(url).into_iter().collect::<Vec<_>>(),
        // vole speaks plain HTTP; a proxy in front that speaks https
        // should say so with --public-url. Both schemes are taken, on the
        // request's own host only.
        None => match headers.typed_get::<headers::Host>() {
            Some(host) => ["http", "https"]
                .iter()
                .filter_map(|scheme| origin_of(&format!("{scheme}://{host}")))
                .collect(),
            None => Vec::new(),
        },
    };
    if own.contains(&sent) {
        Ok(())
    } else {
        refused(&format!("Origin: {origin}"))
    }
}

/// The path (and query) of the page a form was sent from, when its
/// `Referer` is of this server's origin (the rule [`check_origin`] keeps
/// for `Origin`) and the path is one [`safe_next`] returns to: where a
/// visitor whose session ended while a form was open comes back to after
/// signing in again.
pub fn referring_path(headers: &HeaderMap, public_url: Option<&str>) -> Option<String> {
    let referer = headers.get(header::REFERER)?.to_str().ok()?;
    let url = url::Url::parse(referer).ok()?;
    let origin = url.origin().ascii_serialization();
    let mut path = url.path().to_string();
    if let Some(query) = url.query() {
        path = format!("{path}?{query}");
    }
    let mut as_origin = headers.clone();
    as_origin.remove("sec-fetch-site");
    as_origin.insert(header::ORIGIN, origin.parse().ok()?);
    check_origin(&as_origin, public_url).ok()?;
    let safe = safe_next(Some(&path));
    (safe == path).then_some(path)
}

/// The origin of a URL as a browser sends it in `Origin`
/// (`scheme://host[:port]`, the host lowercased, a scheme's default port
/// left out), by the URL standard's rules (the `url` crate); none for a
/// URL that is not one or has an opaque origin.
fn origin_of(text: &str) -> Option<String> {
    let origin = url::Url::parse(text).ok()?.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

/// Where a sign-in may return to: `next` when it is a path on this server
/// (one `/`, then no `/` or `\`, no scheme, nothing encoded that a browser
/// or proxy could read as those, printable ASCII only, no `.` or `..`
/// segment), else `/`.
pub fn safe_next(next: Option<&str>) -> &str {
    let Some(next) = next else { return "/" };
    let lower = next.to_ascii_lowercase();
    let second = next.as_bytes().get(1).copied();
    let dots = next
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .split('/')
        .any(|segment| {
            matches!(
                segment.to_ascii_lowercase().as_str(),
                "." | ".." | "%2e" | "%2e%2e" | ".%2e" | "%2e."
            )
        });
    let fine = next.starts_with('/')
        && next.bytes().all(|b| b.is_ascii_graphic())
        && !dots
        && !matches!(second, Some(b'/') | Some(b'\\'))
        && !next.contains('\\')
        && !lower.contains("%2f")
        && !lower.contains("%5c")
        && !lower.contains("%09")
        && !lower.contains("%0a")
        && !lower.contains("%0d")
        && !next.chars().any(|c| c.is_control() || c.is_whitespace())
        && next.len() <= 2048;
    if fine { next } else { "/" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_returns_only_to_a_path_of_this_server() {
        for good in ["/", "/alice/demo", "/alice/demo/-/tree/main?x=1", "/a%20b"] {
            assert_eq!(safe_next(Some(good)), good);
        }
        for bad in [
            "//evil",
            "/\\evil",
            "\\\\evil",
            "https:evil",
            "https://evil",
            "%2F%2Fevil",
            "/%2F%2Fevil",
            "/%2fevil",
            "/%5cevil",
            "evil",
            "/ /evil",
            "/\tevil",
            "/%09/evil",
            "javascript:alert(1)",
            "",
            "/\u{ff0f}evil.com",
            "/%2e%2e/%2e%2e//evil.com",
            "/../..//evil.com",
            "/a/./b",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad:?} was let through");
        }
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn csrf_tokens_are_bound_to_their_secret() {
        let token = csrf_token("secret-one");
        assert!(csrf_matches("secret-one", &token));
        assert!(!csrf_matches("secret-two", &token));
        assert!(!csrf_matches("secret-one", ""));
        assert!(!csrf_matches("secret-one", &token[1..]));
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn a_post_from_another_origin_is_refused() {
        let public = Some("https://git.example.org/vole");
        let own = headers(&[("origin", "https://git.example.org")]);
        assert!(check_origin(&own, public).is_ok());
        assert!(
            check_origin(&headers(&[]), public).is_ok(),
            "no Origin at all"
        );
        for bad in [
            headers(&[("origin", "https://evil.example")]),
            headers(&[("origin", "null")]),
            headers(&[("origin", "http://git.example.org")]),
            headers(&[("origin", "https://git.example.org.evil")]),
            headers(&[("sec-fetch-site", "cross-site")]),
        ] {
            let refused = check_origin(&bad, public).unwrap_err();
            assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{bad:?}");
        }
        // Without --public-url, the request's Host is vole's own.
        let by_host = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ]);
        assert!(check_origin(&by_host, None).is_ok());
        let other = headers(&[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:9")]);
        assert!(check_origin(&other, None).is_err());
        let scheme = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "evil://127.0.0.1:8080"),
        ]);
        assert!(check_origin(&scheme, None).is_err());
        // A default port, in the public URL or the Host, is no other
        // origin; a host's case neither.
        let with_port = Some("https://Git.Example.org:443/vole");
        assert!(
            check_origin(&own, with_port).is_ok(),
            "the :443 of --public-url"
        );
        let host_port = headers(&[("host", "127.0.0.1:80"), ("origin", "http://127.0.0.1")]);
        assert!(check_origin(&host_port, None).is_ok(), "the :80 of Host");
        let other_port = headers(&[("origin", "https://git.example.org:8443")]);
        assert!(check_origin(&other_port, with_port).is_err());
    }

    #[test]
    fn a_referer_of_this_server_names_the_page_to_come_back_to() {
        let public = Some("https://git.example.org");
        let from = |referer: &str| referring_path(&headers(&[("referer", referer)]), public);
        assert_eq!(
            from("https://git.example.org:443/alice/demo?tab=1#x").as_deref(),
            Some("/alice/demo?tab=1")
        );
        assert_eq!(from("https://evil.example/alice/demo"), None);
        assert_eq!(from("https://git.example.org//evil.example/"), None);
        assert_eq!(from("not a url"), None);
    }

    #[test]
    fn cookies_are_read_by_exact_name_and_set_with_their_attributes() {
        let sent = headers(&[("cookie", "a=1; vole_session=abc; vole_sessionx=no")]);
        assert_eq!(cookie(&sent, "vole_session"), Some("abc"));
        assert_eq!(cookie(&sent, "vole_sess"), None);
        let plain = Cookies::for_public_url(Some("http://h"));
        let set = plain.set(plain.session(), "v", None);
        assert_eq!(set, "vole_session=v; Path=/; HttpOnly; SameSite=Lax");
        let secure = Cookies::for_public_url(Some("https://h"));
        let set = secure.set(secure.session(), "v", Some(Duration::from_secs(60)));
        assert_eq!(
            set,
            "__Host-vole_session=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=60; Secure"
        );
    }
}
