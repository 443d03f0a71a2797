//! Who a request is: the middleware every request passes before routing.
//! It reads `Authorization` (HTTP Basic with a user name and a token or,
//! where the server allows it, a password, or a token as the user name;
//! `Bearer <token>` or `token <token>`, as Gitea's clients send them; the
//! scheme in any case), checks it through [`Accounts`], and puts the
//! [`Principal`] into the request's extensions for the handlers (no
//! header: [`Principal::Anonymous`]). A refused credential is a 401 with
//! the challenge, recorded in the audit log.
//!
//! Rate limits (governor's keyed GCRA limiters):
//! - failed sign-ins, per client address and per (user name, address):
//!   past `--auth-failures` per `--auth-failure-window`, every password
//!   sign-in and every refused token from there gets 429 with
//!   `Retry-After` until the bucket refills, so the right password from
//!   an address that is not throttled always works. A valid token is
//!   accepted before the throttle is asked (256 random bits, checked
//!   with one hash): clients behind one address (a proxy, a NAT) are not
//!   locked out by another's failures. A refusal from a throttled key is
//!   counted ([`SignInCounts`]), not audited; the throttle is audited
//!   once per key and window as it starts;
//! - API requests, per token (or per password-signed-in user): past
//!   `--api-rate` a minute, 429.
//!
//! What does not live here: what a principal may do (`vole_access`).

use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::credential::Credential;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::AppError;
use vole_access::Principal;
use vole_accounts::audit::{AuditEvent, AuditKind};
use vole_accounts::{Accounts, AuthFailure, Presented};
use vole_config::AuthSettings;

mod sign_in;

/// Keys a limiter keeps at most before it forgets the idle ones (an
/// attacker rotating addresses makes one key per address).
const MAX_KEYS: usize = 100_000;

/// How long a sign-in waits for one of the password-hashing slots.
const HASH_QUEUE_TIMEOUT: Duration = Duration::from_secs(10);

/// A key's throttle: until when, and when a throttle of the key was
/// last recorded in the audit log.
#[derive(Debug, Clone, Copy)]
struct Block {
    until: Instant,
    recorded: Instant,
}

/// What one failure did to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failed {
    /// Counted, within the allowance.
    Counted,
    /// One past the allowance: the key is throttled for `wait`. `record`:
    /// the key's first throttle in a failure window, for the audit log.
    Throttles { wait: Duration, record: bool },
    /// The key was throttled already (a failure of another request got
    /// there first): this one is refused as throttled.
    Throttled(Duration),
}

/// A keyed limiter that can say "throttled" without spending a cell:
/// governor's check spends one, so only failures are checked, and a key
/// whose check failed is remembered as blocked until its cell comes back.
/// Both maps are bounded ([`MAX_KEYS`]): governor's forgets idle keys, the
/// blocked map is an LRU (an attacker with more addresses than it holds
/// could push the oldest throttles out; an IPv6 address counts by its
/// /64, so that takes that many networks).
struct FailureLimiter<K: Hash + Eq + Clone> {
    limiter: DefaultKeyedRateLimiter<K>,
    blocked: Mutex<lru::LruCache<K, Block>>,
    failures: AtomicU64,
    /// A key's throttle is recorded at most once in this long.
    window: Duration,
}

impl<K: Hash + Eq + Clone> FailureLimiter<K> {
    fn new(quota: Quota, window: Duration) -> Self {
        FailureLimiter {
            limiter: RateLimiter::keyed(quota),
            blocked: Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(MAX_KEYS).expect("MAX_KEYS is positive"),
            )),
            failures: AtomicU64::new(0),
            window,
        }
    }

    /// How long `key` is still throttled, if it is.
    fn blocked_for(&self, key: &K) -> Option<Duration> {
        let blocked = self.blocked.lock();
        let until = blocked.peek(key)?.until;
        until.checked_duration_since(Instant::now())
    }

    /// Counts a failure of `key`.
    fn fail(&self, key: &K) -> Failed {
        // Idle keys are dropped every so often, not on every failure (a
        // sweep is a walk of the whole map).
        let n = self.failures.fetch_add(1, Ordering::Relaxed);
        if n.is_multiple_of(1024) && self.limiter.len() > MAX_KEYS {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
        let Err(not_until) = self.limiter.check_key(key) else {
            return Failed::Counted;
        };
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        let now = Instant::now();
        let mut blocked = self.blocked.lock();
        let before = blocked.get(key).copied();
        if let Some(left) = before.and_then(|b| b.until.checked_duration_since(now))
            && !left.is_zero()
        {
            return Failed::Throttled(left);
        }
        let recorded = before
            .map(|b| b.recorded)
            .filter(|at| now.duration_since(*at) < self.window);
        blocked.put(
            key.clone(),
            Block {
                until: now + wait,
                recorded: recorded.unwrap_or(now),
            },
        );
        Failed::Throttles {
            wait,
            record: recorded.is_none(),
        }
    }
}

/// What an address is counted as: itself, or for IPv6 its /64 (one
/// client's network; an address inside it costs nothing to change). Every
/// per-address limit keys by it.
pub fn counted_as(client: IpAddr) -> IpAddr {
    match client {
        IpAddr::V4(_) => client,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
    }
}

/// The user name as it is counted and recorded: at most 64 characters
/// (no user name is longer), control characters shown escaped, so a
/// name cannot forge lines of `vole log dump`.
fn recorded_name(user: &str) -> String {
    user.chars()
        .take(64)
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// The answer when the account store cannot be asked.
fn unavailable() -> AppError {
    AppError::busy(
        "the server cannot check credentials right now; retry later",
        30,
    )
}

/// What a sign-in is counted and recorded as.
struct Keys {
    /// The client address as counted ([`counted_as`]).
    client: IpAddr,
    /// The user name as recorded ([`recorded_name`]).
    shown: String,
    /// The (user name, address) key.
    user: (String, IpAddr),
}

impl Keys {
    fn of(user: &str, client: IpAddr) -> Keys {
        let client = counted_as(client);
        let shown = recorded_name(user);
        let user = (shown.to_ascii_lowercase(), client);
        Keys {
            client,
            shown,
            user,
        }
    }
}

/// The sign-in counters, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignInCounts {
    /// Credentials checked and refused (each one audited).
    pub failed: u64,
    /// Sign-ins refused with 429 because their address (or user name and
    /// address) was throttled: counted here, not audited one by one.
    pub throttled: u64,
}

/// The middleware's state.
pub struct Authn {
    accounts: Arc<Accounts>,
    by_address: FailureLimiter<IpAddr>,
    by_user: FailureLimiter<(String, IpAddr)>,
    api: DefaultKeyedRateLimiter<String>,
    /// argon2 runs take one each (one per core): a burst of password
    /// sign-ins queues here instead of taking every blocking thread.
    hashing: Semaphore,
    failed: AtomicU64,
    throttled: AtomicU64,
    /// `--api-query-tokens`.
    query_tokens: bool,
}

impl std::fmt::Debug for Authn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authn").finish_non_exhaustive()
    }
}

impl Authn {
    pub fn new(accounts: Arc<Accounts>, settings: &AuthSettings) -> Authn {
        let failures = settings.failures;
        let window = settings.failure_window;
        let refill = window / failures.get();
        let failure_quota = Quota::with_period(refill.max(Duration::from_millis(1)))
            .expect("a positive period")
            .allow_burst(failures);
        Authn {
            accounts,
            by_address: FailureLimiter::new(failure_quota, window),
            by_user: FailureLimiter::new(failure_quota, window),
            api: RateLimiter::keyed(Quota::per_minute(settings.api_rate)),
            hashing: Semaphore::new(vole_config::defaults::cores()),
            failed: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            query_tokens: settings.api_query_tokens,
        }
    }

    /// The API request's headers with its query-string token as its
    /// `Authorization` (with `--api-query-tokens`); `None`: none to add.
    /// Refused when the setting is off, or when the request carries a
    /// header too.
    fn query_token(&self, request: &Request) -> Result<Option<axum::http::HeaderMap>, AppError> {
        let query = request.uri().query().unwrap_or_default();
        let token = url::form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == "token" || key == "access_token")
            .map(|(_, value)| value.into_owned());
        let Some(token) = token else {
            return Ok(None);
        };
        if !self.query_tokens {
            return Err(AppError::bad_request(
                "a token in the query string is not taken here (it would reach logs): send it as Authorization: token <token>, or start the server with --api-query-tokens",
            ));
        }
        if request
            .headers()
            .contains_key(axum::http::header::AUTHORIZATION)
        {
            return Err(AppError::bad_request(
                "the request carries a token in its query string and an Authorization header: send one",
            ));
        }
        let value = axum::http::HeaderValue::from_str(&format!("token {token}"))
            .map_err(|_| AppError::bad_request("the query string's token is not a token"))?;
        let mut headers = request.headers().clone();
        headers.insert(axum::http::header::AUTHORIZATION, value);
        Ok(Some(headers))
    }

    /// The sign-in counters so far.
    pub fn counts(&self) -> SignInCounts {
        SignInCounts {
            failed: self.failed.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
        }
    }

    /// Decides who the request is; see the module doc.
    async fn principal(
        &self,
        headers: &axum::http::HeaderMap,
        client: IpAddr,
        password_always: bool,
    ) -> Result<Principal, AppError> {
        let Some(credential) = Credential::read(headers)? else {
            return Ok(Principal::Anonymous);
        };
        let keys = Keys::of(&credential.user, client);
        let presented = credential.presented();
        if presented.is_password() {
            let accounts = self.accounts.clone();
            let (user, secret) = (credential.user.clone(), credential.secret.clone());
            let identity = self
                .password_check(&keys, move || {
                    if password_always {
                        accounts.check_password(&user, &secret)
                    } else {
                        accounts.authenticate(Presented::Basic {
                            user: &user,
                            secret: &secret,
                        })
                    }
                })
                .await?;
            return Ok(Principal::User(Arc::new(identity)));
        }
        // A token is checked before the throttle: it is 256 random bits (no
        // guessing one) and its check is one hash, so a valid token works
        // from a throttled address too, and clients behind one address are
        // not locked out by another's failures.
        match self.accounts.authenticate(presented) {
            Ok(identity) => Ok(Principal::User(Arc::new(identity))),
            Err(AuthFailure::Unavailable) => Err(unavailable()),
            Err(failure) => Err(self.refused(failure, &keys).await),
        }
    }

    /// Runs `check`, a password check (argon2), for a sign-in counted as
    /// `keys`: refused at once when they are throttled (a password is what
    /// can be guessed: a throttled address gets no argon2 run), else on a
    /// blocking thread under one of the hashing slots, its failure counted
    /// and audited ([`Authn::refused`]) before the slot is let go, so the
    /// next attempt from the same address sees it.
    async fn password_check<T: Send + 'static>(
        &self,
        keys: &Keys,
        check: impl FnOnce() -> Result<T, AuthFailure> + Send + 'static,
    ) -> Result<T, AppError> {
        self.refuse_if_throttled(keys)?;
        let _slot = self.hashing_slot().await?;
        // Asked again with the slot held: attempts that queued behind the
        // ones that just failed must not be checked past the limit.
        self.refuse_if_throttled(keys)?;
        let result = crate::spawn_blocking(check)
            .await
            .unwrap_or(Err(AuthFailure::Unavailable));
        match result {
            Ok(value) => Ok(value),
            Err(AuthFailure::Unavailable) => Err(unavailable()),
            Err(failure) => Err(self.refused(failure, keys).await),
        }
    }

    /// One of the password-hashing slots (one per core), waited for at
    /// most [`HASH_QUEUE_TIMEOUT`]: every argon2 run holds one, a new
    /// password's hashing (registration, a change) as a check's.
    pub async fn hashing_slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>, AppError> {
        match tokio::time::timeout(HASH_QUEUE_TIMEOUT, self.hashing.acquire()).await {
            Ok(Ok(slot)) => Ok(slot),
            _ => Err(AppError::busy(
                "too many sign-ins at once; retry shortly",
                5,
            )),
        }
    }

    /// How long the sign-in's keys are still throttled, if they are.
    fn throttled_for(&self, keys: &Keys) -> Option<Duration> {
        self.by_address
            .blocked_for(&keys.client)
            .into_iter()
            .chain(self.by_user.blocked_for(&keys.user))
            .max()
    }

    /// A 429 if the sign-in's keys are throttled (counted, not audited).
    fn refuse_if_throttled(&self, keys: &Keys) -> Result<(), AppError> {
        match self.throttled_for(keys) {
            Some(wait) => {
                self.throttled.fetch_add(1, Ordering::Relaxed);
                Err(throttled_error(wait))
            }
            None => Ok(()),
        }
    }

    /// A refused credential: counted against its keys and audited, or,
    /// when its keys were throttled already, only counted (a flood from a
    /// throttled address appends nothing to the audit log). A throttle is
    /// audited as it starts, once per key and failure window.
    async fn refused(&self, failure: AuthFailure, keys: &Keys) -> AppError {
        if let Err(throttled) = self.refuse_if_throttled(keys) {
            return throttled;
        }
        let failed = [
            (self.by_address.fail(&keys.client), "address"),
            (self.by_user.fail(&keys.user), "user name and address"),
        ];
        let client = keys.client.to_string();
        let raced = failed
            .iter()
            .any(|(f, _)| matches!(f, Failed::Throttled(_)));
        let mut events = Vec::new();
        if raced {
            self.throttled.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
            tracing::info!(client, user = keys.shown, reason = %failure, "sign-in refused");
            events.push(AuditEvent::new(
                AuditKind::AuthFailed,
                "anonymous",
                &keys.shown,
                &client,
                failure.to_string(),
            ));
        }
        let mut wait = None;
        let mut started = Vec::new();
        for (failed, per) in failed {
            match failed {
                Failed::Counted => {}
                Failed::Throttled(w) => wait = wait.max(Some(w)),
                Failed::Throttles { wait: w, record } => {
                    wait = wait.max(Some(w));
                    if record {
                        started.push(per);
                    }
                }
            }
        }
        if let (false, Some(wait)) = (started.is_empty(), wait) {
            // One record however many of the keys this failure throttled.
            let detail = format!(
                "per {}, for {}s",
                started.join(" and per "),
                wait.as_secs_f64().ceil()
            );
            tracing::warn!(client, user = keys.shown, detail, "sign-ins throttled");
            events.push(AuditEvent::new(
                AuditKind::SignInThrottled,
                "anonymous",
                &keys.shown,
                &client,
                detail,
            ));
        }
        if !events.is_empty()
            && let Err(e) = self.accounts.audit_log().commit_async(events).await
        {
            tracing::error!(error = %vole_stdx::error_chain::Chain(&e), "cannot record a failed sign-in in the audit log");
        }
        match wait {
            Some(wait) => throttled_error(wait),
            None => AppError::unauthenticated(
                "the credentials were refused: use your user name and a valid token (`vole token create`)",
            ),
        }
    }

    /// An API request of `principal`: within its per-token rate?
    fn api_allowed(&self, principal: &Principal) -> Result<(), AppError> {
        let Some(identity) = principal.identity() else {
            return Ok(());
        };
        let key = match &identity.token {
            Some(token) => format!("token:{}", token.id),
            None => format!("user:{}", identity.user.to_ascii_lowercase()),
        };
        if self.api.len() > MAX_KEYS {
            self.api.retain_recent();
        }
        match self.api.check_key(&key) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                Err(AppError::too_many(
                    "too many API requests with this credential; slow down",
                    wait.as_secs_f64().ceil() as u64,
                ))
            }
        }
    }
}

fn throttled_error(wait: Duration) -> AppError {
    AppError::too_many(
        "too many failed sign-ins from this address; wait before trying again",
        wait.as_secs_f64().ceil() as u64,
    )
}

/// The middleware: puts the request's [`Principal`] into its extensions.
/// The address a request came from. The server puts the client's address
/// in every request; a router driven in-process has none, and counts as
/// one unknown address.
pub fn client_address(extensions: &axum::http::Extensions) -> IpAddr {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |info| info.0.ip())
}

pub async fn authenticate(
    State(authn): State<Arc<Authn>>,
    mut request: Request,
    next: Next,
) -> Response {
    let client = client_address(request.extensions());
    let with_token = if request.uri().path().starts_with("/api/") {
        match authn.query_token(&request) {
            Ok(headers) => headers,
            Err(e) => return e.into_response(),
        }
    } else {
        None
    };
    let headers = with_token.as_ref().unwrap_or(request.headers());
    let password_always = takes_password_always(request.uri().path());
    let principal = match authn.principal(headers, client, password_always).await {
        Ok(principal) => principal,
        Err(e) => return e.into_response(),
    };
    if request.uri().path().starts_with("/api/")
        && let Err(e) = authn.api_allowed(&principal)
    {
        return e.into_response();
    }
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// Whether `path` is one of the API's token endpoints
/// (`/api/v1/users/{name}/tokens[/{token}]`), which take the user's
/// password with HTTP Basic whatever `--password-auth` says, as Gitea's
/// do: a token is made with the password (throttled as a sign-in is).
fn takes_password_always(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/api/v1/users/") else {
        return false;
    };
    let mut parts = rest.split('/');
    let (Some(user), Some("tokens")) = (parts.next(), parts.next()) else {
        return false;
    };
    let token = parts.next();
    !user.is_empty() && parts.next().is_none() && token.is_none_or(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_endpoints_take_a_password_always() {
        for yes in ["/api/v1/users/ann/tokens", "/api/v1/users/ann/tokens/7"] {
            assert!(takes_password_always(yes), "{yes}");
        }
        for no in [
            "/api/v1/users/ann",
            "/api/v1/users/ann/repos",
            "/api/v1/users//tokens",
            "/api/v1/users/ann/tokens/7/x",
            "/api/v1/users/ann/tokens/",
            "/api/v1/repos/ann/x/issues",
            "/ann/tokens",
        ] {
            assert!(!takes_password_always(no), "{no}");
        }
    }

    #[test]
    fn an_ipv6_client_counts_by_its_64_and_a_mapped_v4_as_itself() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(counted_as(a), counted_as(b), "one /64, one client");
        assert_ne!(counted_as(a), counted_as(other));
        let mapped: IpAddr = "::ffff:203.0.113.5".parse().unwrap();
        assert_eq!(counted_as(mapped), "203.0.113.5".parse::<IpAddr>().unwrap());
        let v4: IpAddr = "198.51.100.7".parse().unwrap();
        assert_eq!(counted_as(v4), v4);
    }

    #[test]
    fn a_recorded_name_is_one_short_line() {
        assert_eq!(recorded_name("ann"), "ann");
        let forged = recorded_name("x\naudit seq=1 user_added\r\u{1b}[2J");
        assert!(!forged.chars().any(char::is_control), "{forged:?}");
        assert!(forged.starts_with("x\\naudit"), "{forged:?}");
        assert_eq!(recorded_name(&"a".repeat(10_000)).len(), 64);
    }

    #[test]
    fn a_key_is_throttled_past_its_allowance_and_only_then() {
        let limiter = FailureLimiter::new(
            Quota::per_hour(std::num::NonZeroU32::new(3).unwrap()),
            Duration::from_secs(3600),
        );
        let key = IpAddr::from([127, 0, 0, 1]);
        for _ in 0..3 {
            assert_eq!(limiter.fail(&key), Failed::Counted);
            assert_eq!(
                limiter.blocked_for(&key),
                None,
                "blocked within the allowance"
            );
        }
        let Failed::Throttles { wait, record } = limiter.fail(&key) else {
            panic!("the fourth failure is one too many");
        };
        assert!(wait > Duration::from_secs(60), "{wait:?}");
        assert!(record, "the first throttle of a window is recorded");
        assert!(limiter.blocked_for(&key).is_some());
        assert_eq!(limiter.blocked_for(&IpAddr::from([127, 0, 0, 2])), None);
        assert!(
            matches!(limiter.fail(&key), Failed::Throttled(_)),
            "a failure while throttled"
        );
    }

    /// Fails `key` until it is throttled (a few failures at most).
    fn throttle(limiter: &FailureLimiter<IpAddr>, key: IpAddr) -> bool {
        for _ in 0..10 {
            if let Failed::Throttles { record, .. } = limiter.fail(&key) {
                return record;
            }
        }
        panic!("not throttled after 10 failures");
    }

    /// Waits (bounded) until `key` is no longer blocked.
    fn until_unblocked(limiter: &FailureLimiter<IpAddr>, key: IpAddr) {
        let start = Instant::now();
        while limiter.blocked_for(&key).is_some() {
            assert!(start.elapsed() < Duration::from_secs(10), "still blocked");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_throttle_is_recorded_once_a_window_however_often_it_starts() {
        let quota = Quota::with_period(Duration::from_millis(20))
            .unwrap()
            .allow_burst(std::num::NonZeroU32::new(2).unwrap());
        let key = IpAddr::from([127, 0, 0, 1]);
        let long = FailureLimiter::new(quota, Duration::from_secs(3600));
        assert!(throttle(&long, key), "the first throttle is recorded");
        for _ in 0..3 {
            until_unblocked(&long, key);
            assert!(
                !throttle(&long, key),
                "a throttle again within the window is not"
            );
        }
        let short = FailureLimiter::new(quota, Duration::from_millis(1));
        assert!(throttle(&short, key));
        until_unblocked(&short, key);
        std::thread::sleep(Duration::from_millis(2));
        assert!(throttle(&short, key), "a throttle in a new window is");
    }
}
