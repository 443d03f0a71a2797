//! `vole serve`: boots the server (git, data dir lock, start-up cleanup,
//! listeners), runs it, and shuts it down gracefully on SIGTERM or ctrl-c.
//!
//! Routes live in [`router`]; the per-request log line in [`request_log`].

pub mod access_line;
pub mod maintenance;
pub mod metrics;
pub mod request_log;
pub mod router;

use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::app::App;
use vole_config::Config;
use vole_git::Git;
use vole_git::datadir::DataDir;

pub use router::router;

/// Runs the server until a shutdown signal; returns once drained (or once
/// the drain bound passed).
pub async fn run(config: Config) -> anyhow::Result<()> {
    let git = Git::locate(config.git.as_deref())?;
    tracing::info!(path = %git.path().display(), version = git.version(), "using git");
    raise_fd_limit();
    ignore_file_size_signal();

    let mut config = config;
    DataDir::new(config.data_dir.clone()).prepare()?;
    // Absolute from here on: git runs hooks and the socket path from other
    // working directories.
    config.data_dir = std::fs::canonicalize(&config.data_dir)
        .with_context(|| format!("cannot resolve the data dir {}", config.data_dir.display()))?;
    let data = DataDir::new(config.data_dir.clone());
    let lock = data.lock("vole serve")?;
    let cleanup = data.clean_leftovers(&lock, config.quarantine_max_age);
    tracing::info!(removed = cleanup.removed.len(), "start-up cleanup done");
    // Before any git child starts: each one carries the mark.
    let mark = vole_transport::sentinel::new_mark();
    let exe = std::env::current_exe().context("cannot find the vole binary")?;
    let _sentinel = vole_transport::sentinel::start(&exe, &mark)
        .context("cannot start the sentinel that outlives the server")?;
    vole_git::mark_children(mark);

    // Registered before the server announces itself: a SIGTERM that
    // arrives once "listening" is logged must drain, never kill.
    let shutdown = ShutdownSignal::register()?;
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let local_addr = listener.local_addr()?;
    // Bound inside an owner-only directory made first (the umask is the
    // process's, so the socket's own mode is set only after the bind).
    let control_listener = data
        .prepare_run_dir()
        .and_then(|socket| vole_control::server::bind(&socket))
        .with_context(|| {
            format!(
                "cannot open the control socket {}",
                data.socket_path().display()
            )
        })?;

    let shutdown_grace = config.shutdown_grace;
    let app = Arc::new(App::open(config, git)?);
    vole_hooks::scripts::install(app.transport.hooks_dir(), app.transport.vole_exe())
        .context("cannot write the git hooks")?;
    reconcile_refs(&app)?;
    start_webhooks(&app, local_addr).await?;
    // Every push's hooks at once, and a few CLI requests besides.
    let dispatcher = vole_control::server::Dispatcher::start(
        app.control.clone(),
        app.config.transport.receive_pack_limit + 4,
    )
    .context("cannot start the control socket's threads")?;
    let control_task = tokio::spawn(vole_control::server::serve(control_listener, dispatcher));
    let metrics_task = start_metrics_listener(&app).await?;

    let maintenance_task = tokio::spawn(maintenance::run(app.clone()));
    let timeline_task = tokio::spawn(record_pushes(app.clone()));
    // Listings viewed at a branch's old tip are walked at its new tip.
    let listing_task = tokio::spawn(vole_web::listing_warm::follow_pushes(app.web.clone()));
    if app.config.anonymous_push {
        tracing::warn!(
            "anonymous push is ON: anyone who can reach this server can push (development only)"
        );
    }
    tracing::info!(
        data_dir = %data.root().display(),
        "vole listening on http://{local_addr}"
    );
    serve_until_signal(listener, app.clone(), shutdown, shutdown_grace).await?;
    // Fold what is queued so the refs are current; anything left is
    // folded again from the log at the next start.
    let closing = app.clone();
    let _ =
        tokio::task::spawn_blocking(move || closing.meta.close(std::time::Duration::from_secs(5)))
            .await;

    control_task.abort();
    maintenance_task.abort();
    timeline_task.abort();
    listing_task.abort();
    if let Some(task) = metrics_task {
        task.abort();
    }
    let _ = std::fs::remove_file(data.socket_path());
    drop(lock);
    tracing::info!("vole stopped");
    Ok(())
}

/// Follows the ref-move feed: a push to an open pull request's source
/// branch goes into its timeline ("pushed N commits"). A feed the task
/// fell behind on skips what it missed, and says so.
async fn record_pushes(app: Arc<App>) {
    let mut feed = app.recorder.subscribe();
    loop {
        match feed.recv().await {
            Ok(event) => {
                let control = app.control.clone();
                let _ = tokio::task::spawn_blocking(move || control.record_pushes(&event)).await;
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "the pull request timelines missed pushes (the feed ran ahead)"
                );
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Checks the ref log against every repo's refs on disk, and says what it
/// resolved, restored and reconciled.
fn reconcile_refs(app: &App) -> anyhow::Result<()> {
    let repos: Vec<(String, std::path::PathBuf)> = app
        .repos
        .list()
        .into_iter()
        .map(|info| {
            let path = app.repos.path(&info.name);
            (info.name.to_string(), path)
        })
        .collect();
    let report = app.recorder.reconcile(&app.git, &repos)?;
    tracing::info!(
        resolved = report.resolved,
        restored = report.restored,
        reconciled = report.reconciled,
        "ref log checked against the refs on disk"
    );
    // After the refs are right: a merge whose target moved before a crash
    // is recorded now.
    for line in app.control.recover_merges() {
        tracing::info!(merge = %line, "a merge cut short settled");
    }
    Ok(())
}

/// The metrics listener's task, or `None` when it is off or its address is
/// taken. A metrics address that is taken (another server, Prometheus
/// itself) does not stop the forge: it is said, and admins still read
/// /metrics on the main address.
async fn start_metrics_listener(
    app: &Arc<App>,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    Ok(match app.config.metrics_listen {
        Some(addr) => match TcpListener::bind(addr).await {
            Ok(metrics_listener) => {
                tracing::info!(
                    "metrics on http://{}/metrics",
                    metrics_listener.local_addr()?
                );
                Some(tokio::spawn(metrics::serve(metrics_listener, app.clone())))
            }
            Err(e) => {
                tracing::warn!(%addr, error = %e, "cannot listen for metrics; serving without the metrics listener");
                None
            }
        },
        None => None,
    })
}

/// A write past the file-size limit (`ulimit -f`) fails with EFBIG, as a
/// full disk does, instead of killing the server with SIGXFSZ: the pack
/// cache and the logs treat it as the error it is. git children inherit
/// the ignored signal (and fail the write, not die mid-way).
#[allow(unsafe_code)]
fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to "ignore" touches no memory.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Most open files the server asks for: every connection, git child pipe
/// and sealed site-cache buffer takes one.
const FD_LIMIT_WANTED: u64 = 65_536;

/// Raises the soft open-file limit (often 1,024) towards the hard one, as
/// servers do; children (git) inherit it. Left as it is if not allowed.
fn raise_fd_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let wanted = limit
        .maximum
        .map_or(FD_LIMIT_WANTED, |max| max.min(FD_LIMIT_WANTED));
    if limit.current.is_some_and(|current| current >= wanted) {
        return;
    }
    let raised = Rlimit {
        current: Some(wanted),
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => tracing::info!(from = ?limit.current, to = wanted, "raised the open-file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
    }
}

/// Accepts connections until a shutdown signal, then stops accepting and
/// waits (at most `grace`) for in-flight requests. hyper is driven directly
/// (not `axum::serve`) for its header-read timeout: a client that trickles
/// its headers is dropped without ever reaching a handler.
async fn serve_until_signal(
    listener: TcpListener,
    app: Arc<App>,
    mut shutdown: ShutdownSignal,
    grace: std::time::Duration,
) -> anyhow::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::ServiceExt;

    let header_read_timeout = app.config.transport.header_read_timeout;
    // Open connections at most; each holds a permit until it ends.
    let connections = Arc::new(tokio::sync::Semaphore::new(app.config.max_connections));
    // Refusals being written at once (each holds its socket up to 1 s).
    let refusals = Arc::new(tokio::sync::Semaphore::new(64));
    let trusted_proxies: Arc<[ipnet::IpNet]> = app.config.trusted_proxies.clone().into();
    let router = router(app);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // writev: response bodies (site files from the cache, git output) reach
    // the connection as they are instead of being copied into hyper's
    // buffer, so a sealed cached body can go out with sendfile.
    http.timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .writev(true);
    let signal = shutdown.recv();
    tokio::pin!(signal);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = connections.clone().try_acquire_owned() else {
                    // Answered while few are being refused; beyond that the
                    // connection is just closed.
                    if let Ok(refusing) = refusals.clone().try_acquire_owned() {
                        tokio::spawn(async move {
                            let _refusing = refusing;
                            refuse_connection(stream).await;
                        });
                    }
                    continue;
                };
                // Responses go out as headers then body: without this, Nagle
                // holds the body until the client's delayed ACK (~40 ms).
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
                }
                let socket_fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
                let router = router.clone();
                let trusted = trusted_proxies.clone();
                let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
                    // Every part of vole sees the client's address: the
                    // proxy's X-Forwarded-For when the peer is trusted.
                    let client = vole_http::client::client_ip(peer.ip(), request.headers(), &trusted);
                    request.extensions_mut().insert(axum::extract::ConnectInfo(std::net::SocketAddr::new(client, peer.port())));
                    vole_http::on_connection(
                        vole_http::ConnectionFd(socket_fd),
                        router.clone().oneshot(request.map(axum::body::Body::new)),
                    )
                });
                let connection = graceful.watch(http.serve_connection(TokioIo::new(vole_http::zero_copy::Connection::new(stream)), service));
                tokio::spawn(async move {
                    let _permit = permit;
                    if let Err(e) = connection.await {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                });
            }
            signal = &mut signal => {
                tracing::info!(signal, grace_s = grace.as_secs_f64(), "shutting down: no new connections, draining in-flight requests");
                break;
            }
        }
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_s = grace.as_secs_f64(),
            "drain bound reached; closing the remaining connections"
        );
    }
    Ok(())
}

/// A connection over `--max-connections`: a 503 with `Retry-After`, written
/// without reading the request (at most a second is spent on it), then
/// closed.
async fn refuse_connection(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    const BODY: &str = "the server has too many open connections; retry shortly\n";
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let written = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        use tokio::io::AsyncReadExt;
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        // Read what the client sent (bounded) before closing, so the close
        // is no reset that could discard the answer before it is read.
        let mut sink = [0u8; 4096];
        let mut read = 0;
        while read < 64 << 10 {
            match stream.read(&mut sink).await? {
                0 => break,
                n => read += n,
            }
        }
        Ok::<(), std::io::Error>(())
    })
    .await;
    tracing::debug!(
        ok = matches!(written, Ok(Ok(()))),
        "connection refused: over --max-connections"
    );
}

/// SIGTERM and SIGINT, with their handlers installed when this is built
/// (tokio installs a signal handler only when asked; an `async fn` that
/// asks on its first poll leaves a window in which the default action,
/// death, still applies).
struct ShutdownSignal {
    term: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl ShutdownSignal {
    fn register() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
            interrupt: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
        })
    }

    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        }
    }
}

/// The webhooks' feed (from where it stopped) on its own thread, and a
/// delivery task per hook.
async fn start_webhooks(app: &Arc<App>, local_addr: std::net::SocketAddr) -> anyhow::Result<()> {
    let api = app.api.clone();
    let base = app
        .config
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{local_addr}"));
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let queue = api.webhooks.queue().clone();
        vole_api::feed::Feed::start(api.clone(), queue, base)
            .context("cannot start the webhooks' feed")?
            .spawn()
            .context("cannot start the webhooks' feed thread")?;
        vole_api::gitea::hooks::deliver_to_current_hooks(&api);
        Ok(())
    })
    .await
    .context("the webhooks' start failed")?
}
