//! `vole serve`: boots the server (git, data dir lock, start-up cleanup,
//! listeners), runs it, and shuts it down gracefully on SIGTERM or ctrl-c.
//!
//! Routes live in [`router`]; the per-request log line in [`request_log`].

pub mod request_log;
pub mod router;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::app::App;
use crate::config::Config;
use crate::control;
use crate::datadir::DataDir;
use crate::git::Git;

pub use router::router;

/// Runs the server until a shutdown signal; returns once drained (or once
/// the drain bound passed).
pub async fn run(config: Config) -> anyhow::Result<()> {
    let git = Git::locate(config.git.as_deref())?;
    tracing::info!(path = %git.path().display(), version = git.version(), "using git");

    let data = DataDir::new(config.data_dir.clone());
    data.prepare()?;
    let lock = data.lock("vole serve")?;
    let cleanup = data.clean_leftovers(&lock, config.quarantine_max_age);
    tracing::info!(removed = cleanup.removed.len(), "start-up cleanup done");

    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let local_addr = listener.local_addr()?;
    let control_listener = control::server::bind(&data.socket_path()).with_context(|| {
        format!(
            "cannot open the control socket {}",
            data.socket_path().display()
        )
    })?;

    let shutdown_grace = config.shutdown_grace;
    let app = Arc::new(App::open(config, git)?);
    let control_task = tokio::spawn(control::server::serve(control_listener, app.clone()));

    tracing::info!(
        data_dir = %data.root().display(),
        "vole listening on http://{local_addr}"
    );
    serve_until_signal(listener, app, shutdown_grace).await?;

    control_task.abort();
    let _ = std::fs::remove_file(data.socket_path());
    drop(lock);
    tracing::info!("vole stopped");
    Ok(())
}

async fn serve_until_signal(
    listener: TcpListener,
    app: Arc<App>,
    grace: std::time::Duration,
) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let service = router(app).into_make_service_with_connect_info::<SocketAddr>();
    let mut server = tokio::spawn(async move {
        axum::serve(listener, service)
            .with_graceful_shutdown(async {
                let _ = stop_rx.await;
            })
            .await
    });

    tokio::select! {
        result = &mut server => {
            return result.context("server task failed")?.context("server failed");
        }
        signal = shutdown_signal() => {
            tracing::info!(signal, grace_s = grace.as_secs_f64(), "shutting down: no new connections, draining in-flight requests");
        }
    }
    let _ = stop_tx.send(());
    match tokio::time::timeout(grace, &mut server).await {
        Ok(result) => result
            .context("server task failed")?
            .context("server failed")?,
        Err(_) => {
            tracing::warn!(
                grace_s = grace.as_secs_f64(),
                "drain bound reached; closing the remaining connections"
            );
            server.abort();
        }
    }
    Ok(())
}

async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; only ctrl-c stops the server");
            let _ = tokio::signal::ctrl_c().await;
            return "SIGINT";
        }
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
    }
}
