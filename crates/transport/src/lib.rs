//! Clone and push over smart HTTP: the routes' handlers, the checks before a
//! git process starts (repo, push permission, sizes, slots), and the git
//! configuration every child gets. The child itself is run by [`cgi`];
//! bodies are received by [`spool`]; bounds live in [`limits`].
//!
//! Only the three smart-HTTP requests are served: `GET
//! /{owner}/{repo}[.git]/info/refs?service=...`, `POST .../git-upload-pack`
//! and `POST .../git-receive-pack`. The path handed to git is rebuilt from
//! the validated repo name, never taken from the request, so no request can
//! reach anything but a repo's smart-HTTP service.
//!
//! # git settings for the children, and why
//!
//! - `uploadpack.allowFilter`, `uploadpack.allowReachableSHA1InWant`: partial
//!   clone over protocol v2 and v0 (v0's lazy blob fetch needs the latter).
//! - `receive.unpackLimit=1`: every push goes through `index-pack`, which
//!   streams the pack to disk; `unpack-objects` (git's default below 100
//!   objects) holds each blob in memory and was 2.6-3.4x slower on a 256 MiB
//!   push.
//! - `core.bigFileThreshold=16m`, `pack.windowMemory=64m`,
//!   `pack.deltaCacheSize=32m`, `core.packedGitLimit=256m`,
//!   `core.packedGitWindowSize=32m`: bound what one child maps and holds
//!   while packing or indexing; measured in `docs/spikes/smart-http/`.
//! - `receive.autogc=false`: git's `gc --auto` after a push runs detached,
//!   outside the request's process group, after the pusher heard "ok", and
//!   rewrites packs and `packed-refs` in directories no one syncs; vole
//!   repacks a repo itself once it holds too many packs (`meta/repack.rs`).
//! - [`vole_git::DURABLE_WRITES`] (`core.fsync=objects,derived-metadata,
//!   reference`, `core.fsyncMethod=fsync`): receive-pack and what it runs
//!   (index-pack, the ref transaction) sync the pack, its index and every
//!   ref lock file before renaming them into place. The directories they
//!   are renamed into are synced by the hooks' server side
//!   ([`vole_hooks::recorder`]), before git reports to the pusher.

mod routes;
pub use routes::routes;
pub mod cgi;
pub mod limits;
pub mod sentinel;
pub mod spool;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;

use limits::Limits;
use spool::Cap;
use vole_access::{Access, Action, Principal, ResolvedRepo};
use vole_config::{Config, TransportLimits};
use vole_git::Git;
use vole_git::datadir::DataDir;
use vole_git::repos::RepoName;
use vole_http::repo_access::{Acts, Push, Read};
use vole_http::{AppError, RepoAccess};

/// The two smart-HTTP services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    UploadPack,
    ReceivePack,
}

impl Service {
    pub fn as_str(self) -> &'static str {
        match self {
            Service::UploadPack => "git-upload-pack",
            Service::ReceivePack => "git-receive-pack",
        }
    }

    fn parse(text: &str) -> Option<Service> {
        match text {
            "git-upload-pack" => Some(Service::UploadPack),
            "git-receive-pack" => Some(Service::ReceivePack),
            _ => None,
        }
    }
}

/// The transport's state: what its handlers need, and nothing of the rest
/// of the server.
#[derive(Debug)]
pub struct Transport {
    pub limits: Limits,
    settings: TransportLimits,
    /// The pace a client must take a clone at (`--min-transfer-rate`).
    reads: vole_config::ReadLimits,
    git: Git,
    access: Arc<Access>,
    /// `data/tmp`, where push bodies are spooled.
    tmp_dir: PathBuf,
    repos_root: PathBuf,
    /// `core.hooksPath` of every child: vole's own hooks.
    hooks_dir: PathBuf,
    socket: PathBuf,
    /// This binary: the pack cache's hook is a link to it.
    vole_exe: PathBuf,
    /// Uploads run pack-objects through the pack cache's hook.
    pack_cache: bool,
}

impl Transport {
    pub fn new(config: &Config, data: &DataDir, git: Git, access: Arc<Access>) -> Transport {
        Transport {
            limits: Limits::new(&config.transport),
            settings: config.transport.clone(),
            reads: config.reads.clone(),
            git,
            access,
            tmp_dir: data.tmp_dir(),
            repos_root: data.repos_dir(),
            hooks_dir: data.root().join("hooks"),
            socket: data.socket_path(),
            vole_exe: std::env::current_exe().unwrap_or_else(|_| "vole".into()),
            pack_cache: config.pack_cache.max_bytes > 0,
        }
    }
}

impl Transport {
    pub fn hooks_dir(&self) -> &std::path::Path {
        &self.hooks_dir
    }

    pub fn vole_exe(&self) -> &std::path::Path {
        &self.vole_exe
    }
}

/// The ref advertisement's action, named by its `?service=` query:
/// `git-upload-pack` reads, `git-receive-pack` pushes; none is a 404 (dumb
/// HTTP is not served), another a 400.
#[derive(Debug, Clone, Copy)]
pub struct Advertised;

impl Acts for Advertised {
    fn action(parts: &axum::http::request::Parts) -> Result<Action, AppError> {
        let query: axum::extract::Query<std::collections::HashMap<String, String>> =
            axum::extract::Query::try_from_uri(&parts.uri)
                .map_err(|e| AppError::bad_request(e.body_text()))?;
        let Some(service) = query.get("service") else {
            return Err(AppError::not_found(
                "dumb HTTP is not served; use a git client that speaks smart HTTP (git 1.6.6 or later)",
            ));
        };
        match Service::parse(service) {
            Some(Service::UploadPack) => Ok(Action::Read),
            Some(Service::ReceivePack) => Ok(Action::Push),
            None => Err(AppError::bad_request(format!(
                "unknown service {service:?}"
            ))),
        }
    }
}

/// The transport's answer to a refused repo: one the client may not see
/// is answered as a missing one (401 to the anonymous, so git asks for
/// credentials; 404 to the signed in).
impl vole_http::RepoSurface for Transport {
    fn access(&self) -> &Access {
        &self.access
    }
    fn refuse(&self, denied: vole_access::Denied, owner: &str, repo: &str) -> AppError {
        AppError::denied(denied, || format!("repository {owner}/{repo} not found"))
    }
    /// git clients name the repo with or without `.git`.
    fn repo_segment<'a>(&self, segment: &'a str) -> &'a str {
        segment.strip_suffix(".git").unwrap_or(segment)
    }
}

/// `Git-Protocol` as `GIT_PROTOCOL` (protocol v2), if well-formed.
fn git_protocol(headers: &HeaderMap) -> Result<Option<String>, AppError> {
    let Some(value) = headers.get("git-protocol") else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .ok()
        .filter(|t| {
            t.len() <= 256
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b":=._-".contains(&b))
        })
        .ok_or_else(|| AppError::bad_request("malformed Git-Protocol header"))?;
    Ok(Some(text.to_string()))
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Which of the two request shapes: the ref advertisement or the RPC.
#[derive(Debug, Clone, Copy)]
enum Call {
    InfoRefs,
    Rpc,
}

fn cgi_request(
    transport: &Transport,
    principal: &Principal,
    repo: &RepoName,
    service: Service,
    call: Call,
    headers: &HeaderMap,
    peer: SocketAddr,
) -> Result<cgi::CgiRequest, AppError> {
    let limits = &transport.settings;
    let (method, path_suffix, query) = match call {
        Call::InfoRefs => ("GET", "info/refs", format!("service={}", service.as_str())),
        Call::Rpc => ("POST", service.as_str(), String::new()),
    };
    Ok(cgi::CgiRequest {
        backend: {
            let (program, args) = transport.git.http_backend();
            (program.to_path_buf(), args)
        },
        base_env: transport.git.child_env(),
        project_root: transport.repos_root.clone(),
        path_info: format!("/{}/{}.git/{path_suffix}", repo.owner(), repo.name()),
        query,
        method,
        content_type: header_text(headers, header::CONTENT_TYPE),
        git_protocol: git_protocol(headers)?,
        remote_addr: peer.ip().to_string(),
        remote_user: principal.identity().map(|id| id.user.clone()),
        config: {
            let mut config = git_config(service);
            config.push((
                "core.hooksPath".into(),
                transport.hooks_dir.display().to_string(),
            ));
            if service == Service::UploadPack && transport.pack_cache {
                // git honours this from command-line config only; these
                // settings reach git as GIT_CONFIG_COUNT, which counts as
                // that (`vole-pack-cache`).
                config.push((
                    "uploadpack.packObjectsHook".into(),
                    vole_hooks::scripts::pack_objects_hook(
                        &transport.hooks_dir,
                        &transport.vole_exe,
                    ),
                ));
            }
            config
        },
        hook_env: if service == Service::UploadPack {
            use vole_hooks::env;
            vec![
                (env::SOCKET, transport.socket.display().to_string()),
                (env::REPO, repo.to_string()),
            ]
        } else {
            Vec::new()
        },
        push: None,
        error_sideband: false,
        max_request_buffer: limits.max_request_size,
        body: None,
        repo: repo.to_string(),
        idle_timeout: limits.body_idle_timeout,
        min_rate: transport.reads.min_rate,
        pipe_size: cgi::pipe_size(limits.upload_pack_limit + limits.receive_pack_limit),
        connection: None,
        rate_window: transport.reads.rate_window,
    })
}

/// The push's first command line announces `side-band-64k` (or
/// `side-band`) among its capabilities.
fn wants_sideband(body: &spool::Spooled) -> bool {
    let head: Vec<u8> = match &body.content {
        spool::SpooledContent::Memory(bytes) => bytes.iter().take(4096).copied().collect(),
        spool::SpooledContent::File(file) => {
            use std::io::Read;
            let mut head = Vec::new();
            let _ =
                std::fs::File::open(file.path()).and_then(|f| f.take(4096).read_to_end(&mut head));
            head
        }
    };
    let Some(len) = std::str::from_utf8(head.get(..4).unwrap_or_default())
        .ok()
        .and_then(|h| usize::from_str_radix(h, 16).ok())
    else {
        return false;
    };
    let line = &head[..len.min(head.len())];
    let capabilities = line.splitn(2, |b| *b == 0).nth(1).unwrap_or_default();
    capabilities
        .split(|b| *b == b' ' || *b == b'\n')
        .any(|cap| cap == b"side-band-64k" || cap == b"side-band")
}

/// The git configuration of every child (see the module doc). Public so
/// the smart-http benchmark gives its baseline the very same settings.
pub fn git_config(service: Service) -> Vec<(String, String)> {
    let mut config = vec![
        ("http.uploadpack", "true"),
        // vole decides who may push before git runs; git must not refuse
        // a push for want of REMOTE_USER.
        ("http.receivepack", "true"),
        ("uploadpack.allowFilter", "true"),
        ("uploadpack.allowReachableSHA1InWant", "true"),
        ("core.bigFileThreshold", "16m"),
        ("core.packedGitLimit", "256m"),
        ("core.packedGitWindowSize", "32m"),
        ("pack.windowMemory", "64m"),
        ("pack.deltaCacheSize", "32m"),
    ];
    config.extend(vole_git::DURABLE_WRITES);
    if service == Service::UploadPack {
        // Replacement objects are no history the server serves: a replace
        // ref left on disk (vole takes none) is not advertised, and what
        // only it reaches cannot be fetched.
        config.push(("uploadpack.hideRefs", "refs/replace/"));
    }
    if service == Service::ReceivePack {
        config.push(("receive.unpackLimit", "1"));
        config.push(("receive.autogc", "false"));
        // Every pushed object is checked (index-pack --strict: git's
        // warnings are errors too, so a tree with `.git`, `.`, `..` or a
        // duplicate name, or a hostile `.gitmodules`, is refused with
        // git's own message), except the quirks old real histories carry.
        config.push(("receive.fsckObjects", "true"));
    }
    let mut config: Vec<(String, String)> = config
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if service == Service::ReceivePack {
        config.extend(
            vole_git::FSCK_IGNORED
                .iter()
                .map(|id| (format!("receive.fsck.{id}"), "ignore".to_string())),
        );
    }
    config
}

/// The repo the access decision was about must be the one git is about to
/// run in: a repo deleted and created again under the name meanwhile (a
/// request body can take long to arrive) is another repo, answered as a
/// missing one. (A push counts as running from here on, so a delete waits
/// for it.)
fn still_the_decided_repo(
    transport: &Transport,
    repo: &vole_access::ResolvedRepo,
) -> Result<(), AppError> {
    let on_disk =
        vole_git::incarnation::Incarnation::read(&transport.repos_root.join(repo.relative_path()))
            .ok()
            .flatten();
    if on_disk.as_ref().map(|i| i.id()) != repo.incarnation.as_ref().map(|i| i.id()) {
        return Err(AppError::not_found(format!(
            "repository {} not found",
            repo.name
        )));
    }
    Ok(())
}

/// `GET /{owner}/{repo}/info/refs?service=...`
pub async fn info_refs(
    State(transport): State<Arc<Transport>>,
    RepoAccess {
        repo,
        principal,
        action,
        ..
    }: RepoAccess<Advertised>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let service = match action {
        Action::Push => Service::ReceivePack,
        _ => Service::UploadPack,
    };
    let request = cgi_request(
        &transport,
        &principal,
        &repo,
        service,
        Call::InfoRefs,
        &headers,
        peer,
    )?;
    still_the_decided_repo(&transport, &repo)?;
    let permit = transport.limits.acquire(service).await?;
    cgi::run(request, permit).await
}

/// The most a request body of `service` may be, and how its refusal reads.
fn body_cap(limits: &TransportLimits, service: Service) -> Cap {
    match service {
        Service::ReceivePack => Cap {
            bytes: limits.max_push_size,
            what: "this push",
            setting: "max-push-size",
        },
        Service::UploadPack => Cap {
            bytes: limits.max_request_size,
            what: "this fetch request",
            setting: "max-request-size",
        },
    }
}

/// Registers a push with who pushes, and gives its git child what the
/// hooks need to report it (see vole_hooks): the hooks' reports are
/// believed for its id only while the push runs.
fn register_push(
    transport: &Transport,
    repo: &ResolvedRepo,
    principal: &Principal,
    request: &mut cgi::CgiRequest,
) {
    use vole_hooks::env;
    let ticket = transport
        .access
        .pushes()
        .register(vole_access::pushes::RegisteredPush {
            repo: repo.name.clone(),
            principal: principal.clone(),
            client: request.remote_addr.clone(),
            span: tracing::Span::current(),
            created: Default::default(),
        });
    request.hook_env = vec![
        (env::SOCKET, transport.socket.display().to_string()),
        (env::REPO, repo.to_string()),
        (env::PUSH_ID, ticket.id().to_string()),
        (env::ACTOR, principal.name().to_string()),
        (env::CLIENT, request.remote_addr.clone()),
        (env::GIT, transport.git.path().display().to_string()),
        (
            env::MAX_BLOB_SIZE,
            transport.settings.max_blob_size.to_string(),
        ),
    ];
    request.push = Some(ticket);
}

/// The whole body, spooled before any git process or slot is taken (a
/// slow client holds neither), and inflated here when it came gzipped,
/// so git reads plain bytes and a corrupt body is a 400.
async fn spool_body(
    transport: &Transport,
    body: Body,
    cap: &Cap,
    gzipped: bool,
) -> Result<spool::Spooled, AppError> {
    let budget = transport.limits.spool_budget();
    let spooled = spool::spool(
        body,
        cap,
        transport.settings.body_idle_timeout,
        &transport.tmp_dir,
        &budget,
    )
    .await?;
    if !gzipped {
        return Ok(spooled);
    }
    spool::inflate(spooled, cap, &transport.tmp_dir, &budget).await
}

/// `POST /{owner}/{repo}/git-upload-pack`
pub async fn upload_pack(
    state: State<Arc<Transport>>,
    access: RepoAccess<Read>,
    peer: ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, AppError> {
    service_rpc(
        Service::UploadPack,
        state,
        (access.repo, access.principal),
        peer,
        headers,
        body,
    )
    .await
}

/// `POST /{owner}/{repo}/git-receive-pack`
pub async fn receive_pack(
    state: State<Arc<Transport>>,
    access: RepoAccess<Push>,
    peer: ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, AppError> {
    service_rpc(
        Service::ReceivePack,
        state,
        (access.repo, access.principal),
        peer,
        headers,
        body,
    )
    .await
}

async fn service_rpc(
    service: Service,
    State(transport): State<Arc<Transport>>,
    // The repo RepoAccess let through, and who asked.
    (repo, principal): (ResolvedRepo, Principal),
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, AppError> {
    let limits = &transport.settings;
    let cap = body_cap(limits, service);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > cap.bytes) {
        return Err(cap.refuse());
    }
    let encoding = header_text(&headers, header::CONTENT_ENCODING);
    if let Some(encoding) = &encoding
        && !matches!(encoding.as_str(), "gzip" | "x-gzip")
    {
        return Err(AppError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Encoding {encoding:?} is not supported (only gzip)"),
        ));
    }
    let mut request = cgi_request(
        &transport,
        &principal,
        &repo,
        service,
        Call::Rpc,
        &headers,
        peer,
    )?;
    // A fetch's pack streams through a corked socket (`cgi::output::Cork`),
    // paced by what the client's TCP acknowledged.
    if service == Service::UploadPack {
        request.connection = vole_http::current_connection();
    }
    if service == Service::ReceivePack {
        register_push(&transport, &repo, &principal, &mut request);
    }
    let spooled = spool_body(&transport, body, &cap, encoding.is_some()).await?;
    request.error_sideband = service == Service::ReceivePack && wants_sideband(&spooled);
    if service == Service::ReceivePack {
        transport
            .limits
            .push_bytes
            .fetch_add(spooled.len, std::sync::atomic::Ordering::Relaxed);
    }
    request.body = Some(spooled);
    // A push's git child waits while the repo's pushes are held (a gc).
    if let Some(ticket) = request.push.as_mut() {
        let wait = limits.queue_timeout;
        ticket.start(&repo, wait).await.map_err(|held| {
            AppError::busy(format!("{held}; retry shortly"), wait.as_secs().max(1))
        })?;
    }
    still_the_decided_repo(&transport, &repo)?;
    let permit = transport.limits.acquire(service).await?;
    cgi::run(request, permit).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn pushes_run_with_syncs_on_and_gits_auto_gc_off() {
        let config: HashMap<String, String> =
            git_config(Service::ReceivePack).into_iter().collect();
        assert_eq!(config["receive.autogc"], "false");
        assert_eq!(config["receive.fsckObjects"], "true");
        assert_eq!(config["receive.fsck.zeroPaddedFilemode"], "ignore");
        assert!(
            !config.contains_key("receive.fsck.hasDotgit"),
            "a .git entry stays an error"
        );
        assert_eq!(config["receive.unpackLimit"], "1");
        assert_eq!(config["core.fsync"], "objects,derived-metadata,reference");
        assert_eq!(config["core.fsyncMethod"], "fsync");
        let fetch: HashMap<String, String> = git_config(Service::UploadPack).into_iter().collect();
        assert!(!fetch.contains_key("receive.autogc"));
        assert_eq!(fetch["core.fsync"], "objects,derived-metadata,reference");
    }
}
