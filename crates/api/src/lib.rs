//! The JSON API under `/api/v1`: a repo's activity and pagination here,
//! the metadata API in [`meta`]. Handlers read through [`ApiState`]; they
//! never touch git or the log files directly. (`/api/v1/stats`, which
//! reads every part of the server, is the server's own: `server/router.rs`.)

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

mod routes;

pub mod feed;
pub mod gitea;
pub use routes::routes;
pub mod meta;
pub mod pulls;
pub mod quota;
pub mod repos;
pub mod threads;

use vole_access::Access;
use vole_control::ControlState;
use vole_git::repos::Repos;
use vole_hooks::recorder::{ACTIVITY_PER_REPO, RefRecorder};
use vole_http::AppError;
use vole_http::RepoAccess;
use vole_http::page::ApiPage;
use vole_http::repo_access::Read;
use vole_meta::MetaStore;
use vole_stdx::page::Pagination;

/// What the API handlers need of the server.
#[derive(Debug)]
pub struct ApiState {
    pub meta: Arc<MetaStore>,
    pub recorder: Arc<RefRecorder>,
    pub access: Arc<Access>,
    pub repos: Repos,
    /// Repo creation and deletion (shared with the CLI).
    pub control: Arc<ControlState>,
    /// What one user may make: repos, metadata writes a minute.
    pub quotas: quota::Quotas,
    /// `--public-url`: where clients reach the server (links in objects);
    /// `None`: the request's `Host`.
    pub public_url: Option<String>,
    /// The read-side git children's slots, shared with the web UI and
    /// sites: every API read that runs git or walks a tree holds one.
    pub reads: Arc<vole_http::slots::ReadSlots>,
    /// One pull request's test merge and diff counts, by the repo's
    /// incarnation and both tips ([`PULL_DETAILS`] at most).
    pub pull_details: PullDetails,
    /// Issues as a list writes them ([`IssueKey`]), [`ISSUE_JSON_BYTES`]
    /// at most.
    pub issue_json: IssueJson,
    /// What a webhook may reach (`--webhook-allow`), checked as a hook is
    /// made or its URL changed.
    pub hook_guard: vole_webhooks::guard::Guard,
    /// The deliveries to every hook, and the webhooks log they follow.
    pub webhooks: Arc<vole_webhooks::deliver::Deliveries>,
}

/// Everything an issue's written object in a list depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IssueKey {
    /// Where the server is (links are absolute).
    pub base: String,
    pub incarnation: String,
    pub repo_id: u64,
    pub number: u64,
    pub version: u64,
    pub comments: u64,
    /// The repo's labels' ids and versions, hashed.
    pub labels: u64,
    /// The author's account's version.
    pub author: u64,
    /// Whether the viewer sees the author's private fields.
    pub private: bool,
}

/// One issue as written JSON, shared: a hit is a count's increment, not
/// a copy of its bytes.
#[derive(Debug, Clone)]
pub struct SharedJson(pub Arc<serde_json::value::RawValue>);

impl serde::Serialize for SharedJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.as_ref().serialize(serializer)
    }
}

/// Written issues by what each depends on.
pub type IssueJson = moka::sync::Cache<IssueKey, SharedJson>;

/// The most bytes of written issues kept.
pub const ISSUE_JSON_BYTES: u64 = 32 * 1024 * 1024;

/// A written issue's weight in the cache: its bytes and its key's.
fn issue_json_weight(key: &IssueKey, json: &SharedJson) -> u32 {
    u32::try_from(json.0.get().len() + key.base.len() + key.incarnation.len() + 64)
        .unwrap_or(u32::MAX)
}

/// An empty cache of written issues.
pub fn issue_json() -> IssueJson {
    moka::sync::Cache::builder()
        .weigher(issue_json_weight)
        .max_capacity(ISSUE_JSON_BYTES)
        .build()
}

/// What one pull request's answer computes with git, decided by where its
/// branches are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullDetail {
    /// The test merge is clean and brings something.
    pub mergeable: bool,
    /// The branches' best common ancestor (`None`: they have none).
    pub merge_base: Option<String>,
    /// Lines added and removed, files changed.
    pub stat: (u64, u64, u64),
}

/// Pull requests' details by (incarnation, target tip, source tip).
pub type PullDetails = moka::sync::Cache<(String, String, String), PullDetail>;

/// The most pull requests' details kept.
pub const PULL_DETAILS: u64 = 4096;

/// An empty cache of pull request details.
pub fn pull_details() -> PullDetails {
    moka::sync::Cache::new(PULL_DETAILS)
}

/// The API's answer to a refused repo: one the client may not see is
/// answered as a missing one, a 404 byte for byte the same, to the
/// anonymous too, as Gitea's API answers (git keeps its 401, which makes
/// git ask for credentials).
impl vole_http::RepoSurface for ApiState {
    fn access(&self) -> &Access {
        &self.access
    }
    fn refuse(&self, denied: vole_access::Denied, owner: &str, repo: &str) -> AppError {
        AppError::denied_page(denied, || format!("repository {owner}/{repo} not found"))
    }
}

/// One ref move as the public feed shows it: who pushed what and when,
/// never the client's address or the server's internal ids (the ref log,
/// `vole log dump`, keeps those for the operator).
#[derive(Debug, Serialize)]
pub struct Activity {
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// `created`, `deleted` or `updated`.
    pub action: &'static str,
    pub old: Option<String>,
    pub new: Option<String>,
    pub actor: String,
    /// RFC 3339, UTC, to the millisecond.
    pub time: String,
}

impl From<vole_hooks::recorder::ActivityEntry> for Activity {
    fn from(entry: vole_hooks::recorder::ActivityEntry) -> Activity {
        let m = entry.ref_move;
        let action = m.action();
        Activity {
            ref_name: m.ref_name,
            action,
            old: m.old,
            new: m.new,
            actor: m.actor,
            time: vole_stdx::time::nanos_to_millis(m.time_ns),
        }
    }
}

/// `GET /api/v1/repos/{owner}/{repo}/activity?page=&per_page=`: recent ref
/// moves (committed or reconciled), newest first, with a `Link` header.
pub async fn repo_activity(
    State(app): State<Arc<ApiState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    ApiPage(page): ApiPage,
) -> Result<Response, AppError> {
    let (entries, total) = app.recorder.activity(&name.to_string(), page);
    let entries: Vec<Activity> = entries.into_iter().map(Activity::from).collect();
    Ok(paginated(
        entries,
        &format!("/api/v1/repos/{name}/activity"),
        "",
        page,
        total.min(ACTIVITY_PER_REPO),
    ))
}

/// A page of a list as JSON, with a `Link` header (first, last, prev,
/// next; `filters` is repeated in each) and `X-Total-Count`.
pub fn paginated<T: Serialize>(
    items: Vec<T>,
    base: &str,
    filters: &str,
    page: Pagination,
    total: usize,
) -> Response {
    let last = page.last(total);
    let per_page = page.per_page();
    let filters = if filters.is_empty() {
        String::new()
    } else {
        format!("&{filters}")
    };
    let link = |p: usize, rel: &str| {
        format!("<{base}?page={p}&per_page={per_page}{filters}>; rel=\"{rel}\"")
    };
    let mut links = vec![link(1, "first"), link(last, "last")];
    if let Some(prev) = page.prev() {
        links.push(link(prev, "prev"));
    }
    if page.page() < last {
        links.push(link(page.page() + 1, "next"));
    }
    // Serialized into one buffer sized for the page (growing a small one
    // reallocates a page of Gitea's objects ten times).
    let mut body = Vec::with_capacity(items.len() * 1024 + 64);
    let mut response = match serde_json::to_writer(&mut body, &items) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(e) => {
            return vole_http::AppError::internal("a list could not be written", e).into_response();
        }
    };
    if let Ok(value) = HeaderValue::from_str(&links.join(", ")) {
        response.headers_mut().insert(header::LINK, value);
    }
    response
        .headers_mut()
        .insert("x-total-count", HeaderValue::from(total));
    // A browser's script may read them, as Gitea lets it.
    response.headers_mut().insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("Link, X-Total-Count"),
    );
    response
}
