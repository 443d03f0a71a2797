//! Who a request is: the middleware every request passes before routing.
//! It reads `Authorization` (HTTP Basic with a user name and a token or,
//! where the server allows it, a password; or `Bearer <token>`) with the
//! `headers` crate, checks it through [`Accounts`], and puts the
//! [`Principal`] into the request's extensions for the handlers (no
//! header: [`Principal::Anonymous`]). A refused credential is a 401 with
//! the challenge, recorded in the audit log.
//!
//! Rate limits (governor's keyed GCRA limiters):
//! - failed sign-ins, per client address and per (user name, address):
//!   past `--auth-failures` per `--auth-failure-window`, every sign-in
//!   from there gets 429 with `Retry-After` until the bucket refills, so
//!   the right password from an address that is not throttled always works;
//! - API requests, per token (or per password-signed-in user): past
//!   `--api-rate` a minute, 429.
//!
//! What does not live here: what a principal may do (`crate::access`).

use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use headers::authorization::{Basic, Bearer};
use headers::{Authorization, HeaderMapExt};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::AppError;
use crate::access::Principal;
use crate::accounts::audit::{AuditEvent, AuditKind};
use crate::accounts::{Accounts, AuthFailure, Presented};
use crate::config::AuthSettings;

/// Keys a limiter keeps at most before it forgets the idle ones (an
/// attacker rotating addresses makes one key per address).
const MAX_KEYS: usize = 100_000;

/// How long a sign-in waits for one of the password-hashing slots.
const HASH_QUEUE_TIMEOUT: Duration = Duration::from_secs(10);

/// A keyed limiter that can say "throttled" without spending a cell:
/// governor's check spends one, so only failures are checked, and a key
/// whose check failed is remembered as blocked until its cell comes back.
/// Both maps are bounded ([`MAX_KEYS`]): governor's forgets idle keys, the
/// blocked map is an LRU (an attacker with more addresses than it holds
/// could push the oldest throttles out; an IPv6 address counts by its
/// /64, so that takes that many networks).
struct FailureLimiter<K: Hash + Eq + Clone> {
    limiter: DefaultKeyedRateLimiter<K>,
    blocked: Mutex<lru::LruCache<K, Instant>>,
    failures: std::sync::atomic::AtomicU64,
}

impl<K: Hash + Eq + Clone> FailureLimiter<K> {
    fn new(quota: Quota) -> Self {
        FailureLimiter {
            limiter: RateLimiter::keyed(quota),
            blocked: Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(MAX_KEYS).expect("MAX_KEYS is positive"),
            )),
            failures: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How long `key` is still throttled, if it is.
    fn blocked_for(&self, key: &K) -> Option<Duration> {
        let blocked = self.blocked.lock();
        let until = *blocked.peek(key)?;
        until.checked_duration_since(Instant::now())
    }

    /// Counts a failure of `key`; returns how long it is now throttled
    /// for, if this failure was one past the allowance.
    fn fail(&self, key: &K) -> Option<Duration> {
        // Idle keys are dropped every so often, not on every failure (a
        // sweep is a walk of the whole map).
        let n = self
            .failures
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n.is_multiple_of(1024) && self.limiter.len() > MAX_KEYS {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
        let not_until = self.limiter.check_key(key).err()?;
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        self.blocked.lock().put(key.clone(), Instant::now() + wait);
        Some(wait)
    }
}

/// What an address is counted as: itself, or for IPv6 its /64 (one
/// client's network; an address inside it costs nothing to change).
fn counted_as(client: IpAddr) -> IpAddr {
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

/// The middleware's state.
pub struct Authn {
    accounts: Arc<Accounts>,
    by_address: FailureLimiter<IpAddr>,
    by_user: FailureLimiter<(String, IpAddr)>,
    api: DefaultKeyedRateLimiter<String>,
    /// argon2 runs take one each (one per core): a burst of password
    /// sign-ins queues here instead of taking every blocking thread.
    hashing: Semaphore,
}

impl std::fmt::Debug for Authn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authn").finish_non_exhaustive()
    }
}

impl Authn {
    pub fn new(accounts: Arc<Accounts>, settings: &AuthSettings) -> Authn {
        let failures = settings.failures;
        let refill = settings.failure_window / failures.get();
        let failure_quota = Quota::with_period(refill.max(Duration::from_millis(1)))
            .expect("a positive period")
            .allow_burst(failures);
        Authn {
            accounts,
            by_address: FailureLimiter::new(failure_quota),
            by_user: FailureLimiter::new(failure_quota),
            api: RateLimiter::keyed(Quota::per_minute(settings.api_rate)),
            hashing: Semaphore::new(crate::config::defaults::cores()),
        }
    }

    /// Decides who the request is; see the module doc.
    async fn principal(
        &self,
        headers: &axum::http::HeaderMap,
        client: IpAddr,
    ) -> Result<Principal, AppError> {
        if !headers.contains_key(axum::http::header::AUTHORIZATION) {
            return Ok(Principal::Anonymous);
        }
        let basic = headers
            .typed_try_get::<Authorization<Basic>>()
            .ok()
            .flatten();
        let bearer = headers
            .typed_try_get::<Authorization<Bearer>>()
            .ok()
            .flatten();
        let (user, secret, is_bearer) = match (&basic, &bearer) {
            (Some(basic), _) => (
                basic.username().to_string(),
                basic.password().to_string(),
                false,
            ),
            (None, Some(bearer)) => (String::new(), bearer.token().to_string(), true),
            (None, None) => {
                return Err(AppError::bad_request(
                    "the Authorization header must be Basic (your user name and a token) or Bearer (a token)",
                ));
            }
        };
        let client = counted_as(client);
        let shown = recorded_name(&user);
        let user_key = (shown.to_ascii_lowercase(), client);
        let throttled = || {
            self.by_address
                .blocked_for(&client)
                .into_iter()
                .chain(self.by_user.blocked_for(&user_key))
                .max()
        };
        if let Some(wait) = throttled() {
            return Err(throttled_error(wait));
        }
        let presented = if is_bearer {
            Presented::Bearer(&secret)
        } else {
            Presented::Basic {
                user: &user,
                secret: &secret,
            }
        };
        // Held until the outcome is counted, so the next attempt from the
        // same address sees this one's failure.
        let mut _slot = None;
        let result = if presented.is_password() {
            let Ok(Ok(slot)) =
                tokio::time::timeout(HASH_QUEUE_TIMEOUT, self.hashing.acquire()).await
            else {
                return Err(AppError::busy(
                    "too many sign-ins at once; retry shortly",
                    5,
                ));
            };
            _slot = Some(slot);
            // Asked again with the slot held: attempts that queued behind
            // the ones that just failed must not be checked past the limit.
            if let Some(wait) = throttled() {
                return Err(throttled_error(wait));
            }
            let accounts = self.accounts.clone();
            let (user, secret) = (user.clone(), secret.clone());
            crate::http::spawn_blocking(move || {
                accounts.authenticate(Presented::Basic {
                    user: &user,
                    secret: &secret,
                })
            })
            .await
            .unwrap_or(Err(AuthFailure::Unavailable))
        } else {
            self.accounts.authenticate(presented)
        };
        match result {
            Ok(identity) => Ok(Principal::User(Arc::new(identity))),
            Err(AuthFailure::Unavailable) => Err(AppError::busy(
                "the server cannot check credentials right now; retry later",
                30,
            )),
            Err(failure) => {
                let event = AuditEvent::new(
                    AuditKind::AuthFailed,
                    "anonymous",
                    &shown,
                    &client.to_string(),
                    failure.to_string(),
                );
                if let Err(e) = self.accounts.audit_log().commit_async(vec![event]).await {
                    tracing::error!(error = %crate::error_chain::Chain(&e), "cannot record a failed sign-in in the audit log");
                }
                tracing::info!(%client, user = shown, reason = %failure, "sign-in refused");
                let over = self
                    .by_address
                    .fail(&client)
                    .into_iter()
                    .chain(self.by_user.fail(&user_key))
                    .max();
                match over {
                    Some(wait) => Err(throttled_error(wait)),
                    None => Err(AppError::unauthenticated(
                        "the credentials were refused: use your user name and a valid token (`vole token create`)",
                    )),
                }
            }
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
pub async fn authenticate(
    State(authn): State<Arc<Authn>>,
    mut request: Request,
    next: Next,
) -> Response {
    // The server puts the client's address in every request; a router
    // driven in-process has none, and counts as one unknown address.
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |info| info.0.ip());
    let principal = match authn.principal(request.headers(), client).await {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let limiter = FailureLimiter::new(Quota::per_hour(std::num::NonZeroU32::new(3).unwrap()));
        let key = IpAddr::from([127, 0, 0, 1]);
        for _ in 0..3 {
            assert_eq!(limiter.fail(&key), None);
            assert_eq!(
                limiter.blocked_for(&key),
                None,
                "blocked within the allowance"
            );
        }
        let wait = limiter
            .fail(&key)
            .expect("the fourth failure is one too many");
        assert!(wait > Duration::from_secs(60), "{wait:?}");
        assert!(limiter.blocked_for(&key).is_some());
        assert_eq!(limiter.blocked_for(&IpAddr::from([127, 0, 0, 2])), None);
    }
}
