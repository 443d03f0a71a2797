//! Deliveries: one task per hook takes the hook's next event from the
//! [`Queue`] (one in flight per hook: its order), sends it, and moves the
//! hook's cursor only once a 2xx is durable; a failed attempt is retried
//! after each of `--webhook-retry`'s delays (with jitter), then the hook
//! is marked failing and tried again at the last delay, its later events
//! queued meanwhile. Sends run under a bound on deliveries at once and on
//! connections per host, on their own tasks: a dead receiver never slows
//! a push (pushes only append to the logs the feed reads).
//!
//! Every connection's address comes from the guard: the HTTP client's
//! resolver is [`GuardResolver`], which answers only addresses the guard
//! checked, an address in the URL is checked before the request, no
//! connection is kept for a later attempt (each attempt resolves and is
//! checked again), and redirects are not followed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore, watch};

use crate::guard::{Guard, Refused};
use crate::history::{Attempt, RESPONSE_BYTES};
use crate::queue::{Event, Queue, Wants};
use crate::signature;

pub use crate::target::HookTarget;

/// How deliveries run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The delays between attempts; after the last, failing.
    pub retry: Vec<Duration>,
    pub timeout: Duration,
    /// Sends at once, in all.
    pub workers: usize,
    /// Connections at once to one host.
    pub per_host: usize,
}

/// Where one hook stands, for its settings page and the metrics.
#[derive(Debug, Clone, Default)]
pub struct HookStatus {
    /// Its attempts at its oldest event ran out; tried again at the last
    /// delay while later events wait.
    pub failing: bool,
    pub last_error: Option<String>,
}

struct HookHandle {
    target: watch::Sender<Arc<HookTarget>>,
    status: Arc<Mutex<HookStatus>>,
    wake: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HookHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Counts for `/metrics`.
#[derive(Debug, Default)]
pub struct Counts {
    pub delivered: AtomicU64,
    pub failed_attempts: AtomicU64,
}

/// The deliveries of every hook.
pub struct Deliveries {
    queue: Arc<Queue>,
    guard: Arc<Guard>,
    client: reqwest::Client,
    settings: Settings,
    sends: Arc<Semaphore>,
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
    hooks: Mutex<HashMap<u64, HookHandle>>,
    refreshing: Mutex<()>,
    pub counts: Counts,
}

impl std::fmt::Debug for Deliveries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliveries")
            .field("hooks", &self.hooks.lock().len())
            .finish_non_exhaustive()
    }
}

impl Deliveries {
    pub fn new(queue: Arc<Queue>, guard: Guard, settings: Settings) -> Result<Deliveries, String> {
        let guard = Arc::new(guard);
        // One process-wide TLS provider (ring); a second install is a no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardResolver(guard.clone())))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .pool_max_idle_per_host(0)
            .no_proxy()
            .user_agent(format!("vole/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("the webhooks' HTTP client: {e}"))?;
        Ok(Deliveries {
            sends: Arc::new(Semaphore::new(settings.workers.max(1))),
            queue,
            guard,
            client,
            settings,
            hosts: Mutex::default(),
            hooks: Mutex::default(),
            refreshing: Mutex::default(),
            counts: Counts::default(),
        })
    }

    pub fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }

    /// [`Deliveries::set_hooks`] with the hooks `read` gives, read and
    /// applied under one lock: two changes made at once are applied in
    /// the order they read, never an older list over a newer one.
    /// Blocking.
    pub fn refresh(self: &Arc<Self>, read: impl FnOnce() -> Option<Vec<HookTarget>>) {
        let _one_at_a_time = self.refreshing.lock();
        if let Some(targets) = read() {
            self.set_hooks(targets);
        }
    }

    /// The hooks to deliver to, all of them: a new one starts with the
    /// next event, a changed one (a new version) is tried again now, a
    /// gone one stops.
    /// Blocking (a new hook's start is made durable).
    pub fn set_hooks(self: &Arc<Self>, targets: Vec<HookTarget>) {
        let targets: Vec<Arc<HookTarget>> = targets.into_iter().map(Arc::new).collect();
        let wants = targets
            .iter()
            .map(|t| {
                let target = t.clone();
                let wants: Wants = Arc::new(move |e: &Event| target.active && target.wants(e));
                (t.id, wants)
            })
            .collect();
        if let Err(e) = self.queue.set_live(wants) {
            tracing::error!(error = %e, "webhooks: the hooks' starts could not be recorded");
        }
        let mut hooks = self.hooks.lock();
        hooks.retain(|id, _| targets.iter().any(|t| t.id == *id));
        for target in targets {
            let id = target.id;
            if let Some(handle) = hooks.get(&id) {
                if handle.target.borrow().version != target.version {
                    *handle.status.lock() = HookStatus::default();
                    handle.target.send_replace(target);
                    handle.wake.notify_one();
                }
                continue;
            }
            let (sender, receiver) = watch::channel(target);
            let status = Arc::new(Mutex::new(HookStatus::default()));
            let wake = Arc::new(Notify::new());
            let task = tokio::spawn(self.clone().run(id, receiver, status.clone(), wake.clone()));
            hooks.insert(
                id,
                HookHandle {
                    target: sender,
                    status,
                    wake,
                    task,
                },
            );
        }
    }

    /// Whether any hook would take an event of the repo of
    /// `incarnation` (its own, or the server's): the feed builds no
    /// payload nobody takes.
    pub fn wanted_by_any(&self, incarnation: &str) -> bool {
        let hooks = self.hooks.lock();
        hooks.values().any(|h| {
            let target = h.target.borrow();
            target.active && (target.incarnation.is_empty() || target.incarnation == incarnation)
        })
    }

    /// Hook `id`'s status, when it is delivered to.
    pub fn status(&self, id: u64) -> Option<HookStatus> {
        self.hooks.lock().get(&id).map(|h| h.status.lock().clone())
    }

    /// Hooks marked failing.
    pub fn failing(&self) -> usize {
        let hooks = self.hooks.lock();
        hooks.values().filter(|h| h.status.lock().failing).count()
    }

    /// One hook's loop: its next event, sent until a 2xx.
    async fn run(
        self: Arc<Self>,
        id: u64,
        mut target: watch::Receiver<Arc<HookTarget>>,
        status: Arc<Mutex<HookStatus>>,
        wake: Arc<Notify>,
    ) {
        let mut recorded = self.queue.watch();
        loop {
            let hook = target.borrow_and_update().clone();
            let head = self.queue.head();
            let Some(cursor) = self.queue.cursor(id) else {
                // No longer live (deleted meanwhile): its task ends.
                return;
            };
            let next = if hook.active {
                self.queue.next_after(cursor, |e| hook.wants(e))
            } else {
                None
            };
            let Some(event) = next else {
                // Nothing for it through `head` (an inactive hook takes
                // nothing): passed over.
                self.queue.pass(id, head, !hook.active);
                tokio::select! {
                    _ = recorded.changed() => {}
                    _ = target.changed() => {}
                    _ = wake.notified() => {}
                }
                continue;
            };
            self.queue.pass(id, event.id - 1, false);
            self.deliver_in_order(&hook, &event, &mut target, &status, &wake)
                .await;
        }
    }

    /// Sends `event` to `hook` until it takes it, the hook changes, or
    /// the event is dropped from its queue.
    async fn deliver_in_order(
        &self,
        hook: &Arc<HookTarget>,
        event: &Arc<Event>,
        target: &mut watch::Receiver<Arc<HookTarget>>,
        status: &Mutex<HookStatus>,
        wake: &Notify,
    ) {
        let delivery = hook.delivery_id(event.id);
        let mut number = 0u32;
        loop {
            number += 1;
            let attempt = self
                .attempt(
                    hook,
                    (&event.event, &event.payload),
                    (event.id, &delivery),
                    number,
                    false,
                )
                .await;
            let ok = attempt.delivered();
            let error = attempt.error.clone();
            if ok {
                self.counts.delivered.fetch_add(1, Ordering::Relaxed);
                *status.lock() = HookStatus::default();
                let queue = self.queue.clone();
                let (hook_id, through) = (hook.id, event.id);
                let recorded =
                    tokio::task::spawn_blocking(move || queue.delivered(hook_id, through, attempt))
                        .await;
                if let Ok(Err(e)) = recorded {
                    tracing::error!(hook = hook_id, error = %e, "webhooks: a delivery's cursor could not be made durable; trying again in a while");
                    // Not at once: the receiver took it; the log is failing.
                    tokio::time::sleep(retries_floor(&self.settings.retry)).await;
                }
                return;
            }
            self.counts.failed_attempts.fetch_add(1, Ordering::Relaxed);
            let queue = self.queue.clone();
            let hook_id = hook.id;
            let _ = tokio::task::spawn_blocking(move || queue.attempted(hook_id, attempt)).await;
            let retries = &self.settings.retry;
            let delay = retries
                .get(number as usize - 1)
                .or(retries.last())
                .copied()
                .unwrap_or(Duration::from_secs(60));
            {
                let mut status = status.lock();
                status.last_error = error;
                if number as usize > retries.len() && !status.failing {
                    status.failing = true;
                    tracing::warn!(
                        hook = hook.id,
                        event = event.id,
                        "webhooks: a hook's attempts ran out; marked failing, its events wait"
                    );
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(jitter(delay)) => {}
                _ = wake.notified() => {}
                _ = target.changed() => return,
            }
            if self.queue.cursor(hook.id).is_some_and(|c| c >= event.id) {
                return;
            }
        }
    }

    /// Sends `payload` once to `hook` as delivery `delivery` of event
    /// `event`, and says how it went.
    pub async fn attempt(
        &self,
        hook: &HookTarget,
        (event_name, payload): (&str, &str),
        (event, delivery): (u64, &str),
        number: u32,
        redelivery: bool,
    ) -> Attempt {
        let (content_type, body) = if hook.form {
            let encoded = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("payload", payload)
                .finish();
            ("application/x-www-form-urlencoded", encoded)
        } else {
            ("application/json", payload.to_string())
        };
        let mut headers: Vec<(String, String)> = vec![("Content-Type".into(), content_type.into())];
        // Gitea signs the payload, not the form that carries it.
        headers.extend(
            signature::headers(event_name, delivery, &hook.secret, payload.as_bytes())
                .into_iter()
                .map(|(name, value)| (name.to_string(), value)),
        );
        let started = Instant::now();
        let mut attempt = Attempt {
            event,
            delivery: delivery.to_string(),
            attempt: number,
            redelivery,
            time_ns: vole_log::now_ns(),
            event_name: event_name.to_string(),
            url: hook.url.clone(),
            request_headers: headers.clone(),
            request_body: vole_stdx::prefix(&body, RESPONSE_BYTES).to_string(),
            request_cut: body.len() > RESPONSE_BYTES,
            status: None,
            response_headers: Vec::new(),
            response_body: String::new(),
            error: None,
            duration_ms: 0,
        };
        match self.send(&hook.url, headers, body).await {
            Ok((status, headers, body)) => {
                attempt.status = Some(status);
                attempt.response_headers = headers;
                attempt.response_body = body;
                if !(200..300).contains(&status) {
                    attempt.error = Some(format!("the receiver answered {status}"));
                }
            }
            Err(why) => attempt.error = Some(why),
        }
        attempt.duration_ms = started.elapsed().as_millis() as u64;
        attempt
    }

    /// One request, within the bounds: at most `workers` at once, and
    /// `per_host` to one host.
    async fn send(
        &self,
        url: &str,
        headers: Vec<(String, String)>,
        body: String,
    ) -> Result<(u16, Vec<(String, String)>, String), String> {
        let target = Guard::parse(url).map_err(|e| e.to_string())?;
        if target.host.parse::<std::net::IpAddr>().is_ok() {
            // The resolver is not asked for an address in the URL.
            self.guard
                .resolve(&target)
                .await
                .map_err(|e| e.to_string())?;
        }
        let host = {
            let mut hosts = self.hosts.lock();
            hosts
                .entry(target.host.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(self.settings.per_host.max(1))))
                .clone()
        };
        let _host = host.acquire_owned().await.map_err(|e| e.to_string())?;
        let _send = self
            .sends
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        let mut request = self.client.post(target.url.clone()).body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let mut response = request.send().await.map_err(|e| explain(&e))?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .take(100)
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value.as_bytes());
                (
                    name.to_string(),
                    vole_stdx::prefix(&value, 1024).to_string(),
                )
            })
            .collect();
        let mut body = Vec::new();
        let mut cut = None;
        while body.len() < RESPONSE_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => {
                    cut = Some(explain(&e));
                    break;
                }
            }
        }
        body.truncate(RESPONSE_BYTES);
        if let Some(why) = cut {
            // A 2xx whose answer was cut is still a 2xx: the receiver took
            // the request. Anything else keeps its status.
            tracing::debug!(url = %target.url, error = %why, "webhooks: an answer was cut");
        }
        Ok((status, headers, String::from_utf8_lossy(&body).into_owned()))
    }

    /// Sends `payload` to hook `hook` now, outside the queue (a test, a
    /// redelivery), kept in its history.
    pub async fn send_now(
        &self,
        hook: &HookTarget,
        (event_name, payload): (&str, &str),
        (event, delivery): (u64, &str),
    ) -> Attempt {
        let attempt = self
            .attempt(hook, (event_name, payload), (event, delivery), 1, true)
            .await;
        let queue = self.queue.clone();
        let (id, kept) = (hook.id, attempt.clone());
        let _ = tokio::task::spawn_blocking(move || queue.attempted(id, kept)).await;
        if attempt.delivered()
            && let Some(handle) = self.hooks.lock().get(&hook.id)
        {
            // A failing hook's receiver answers again: on with its queue.
            handle.wake.notify_one();
        }
        attempt
    }
}

/// The shortest retry delay, at least a second.
fn retries_floor(retry: &[Duration]) -> Duration {
    retry
        .iter()
        .min()
        .copied()
        .unwrap_or(Duration::from_secs(60))
        .max(Duration::from_secs(1))
}

/// A delay give or take a tenth, so hooks that failed together are not
/// tried again together.
fn jitter(delay: Duration) -> Duration {
    let tenth = delay.as_millis() as u64 / 10;
    if tenth == 0 {
        return delay;
    }
    let offset = rand::random_range(0..=2 * tenth);
    delay - Duration::from_millis(tenth) + Duration::from_millis(offset)
}

/// A failed request in words: the guard's refusal when it refused, else
/// the error and its causes.
fn explain(error: &reqwest::Error) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut words = Vec::new();
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return refused.to_string();
        }
        let text = e.to_string();
        if !words.contains(&text) {
            words.push(text);
        }
        source = e.source();
    }
    if error.is_timeout() {
        return format!("timed out: {}", words.join(": "));
    }
    words.join(": ")
}

/// The HTTP client's resolver: a name's addresses as the guard checked
/// them, refused when any may not be reached.
struct GuardResolver(Arc<Guard>);

impl reqwest::dns::Resolve for GuardResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.0.clone();
        Box::pin(async move {
            let found: Vec<SocketAddr> = guard
                .resolve_host(name.as_str(), 0)
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok(Box::new(found.into_iter()) as reqwest::dns::Addrs)
        })
    }
}
