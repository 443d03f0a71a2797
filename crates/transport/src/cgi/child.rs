//! The http-backend child: its command line and environment, its process
//! group (killed when the request is dropped), the body fed to its stdin
//! and its stderr logged.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::CgiRequest;
use crate::spool::{Spooled, SpooledContent};
use vole_http::AppError;

/// Lines of git's stderr kept to explain a refused request.
const MAX_STDERR_LINES_KEPT: usize = 8;

/// The child and its process group: the group is killed when this is
/// dropped before the child was reaped (client gone, request cancelled).
pub(super) struct ChildGroup {
    child: Child,
    pgid: Option<rustix::process::Pid>,
}

impl ChildGroup {
    pub(super) fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // The group id is the unreaped child's pid, so it cannot have
            // been reused.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }

    pub(super) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait().await;
        // Reaped: its pid (our group id) may now be reused; never signal it.
        self.pgid = None;
        status
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A started http-backend: its group and its three pipes.
pub(super) struct Spawned {
    pub group: ChildGroup,
    pub stdin: Option<ChildStdin>,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

/// Starts http-backend in its own process group with a cleared environment
/// plus the CGI variables, the git config and the hooks' variables.
pub(super) fn spawn(request: &CgiRequest) -> Result<Spawned, AppError> {
    let mut command = vole_git::grouped(&request.backend.0);
    command
        .args(request.backend.1)
        .env_clear()
        .envs(request.base_env.iter().map(|(k, v)| (*k, v)))
        .env("GIT_PROJECT_ROOT", &request.project_root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env(
            "GIT_HTTP_MAX_REQUEST_BUFFER",
            request.max_request_buffer.to_string(),
        )
        .env("PATH_INFO", &request.path_info)
        .env("QUERY_STRING", &request.query)
        .env("REQUEST_METHOD", request.method)
        .env("REMOTE_ADDR", &request.remote_addr)
        .env("GIT_CONFIG_COUNT", request.config.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (i, (key, value)) in request.config.iter().enumerate() {
        command.env(format!("GIT_CONFIG_KEY_{i}"), key);
        command.env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }
    for (key, value) in &request.hook_env {
        command.env(key, value);
    }
    if let Some(content_type) = &request.content_type {
        command.env("CONTENT_TYPE", content_type);
    }
    if let Some(protocol) = &request.git_protocol {
        command.env("GIT_PROTOCOL", protocol);
    }
    if let Some(user) = &request.remote_user {
        command.env("REMOTE_USER", user);
    }
    if let Some(body) = &request.body {
        command.env("CONTENT_LENGTH", body.len.to_string());
    }
    let mut child = command
        .spawn()
        .map_err(|e| AppError::internal("cannot start git http-backend", e))?;
    let pgid = child
        .id()
        .and_then(|pid| rustix::process::Pid::from_raw(pid as i32));
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("stdout is piped");
    // A clone's pack comes through this pipe: more room than the default
    // 64 KiB lets git write ahead and the pump read more at a time (fewer
    // wake-ups for both). Best effort: the kernel may refuse it.
    let _ = rustix::pipe::fcntl_setpipe_size(&stdout, request.pipe_size);
    let stderr = child.stderr.take().expect("stderr is piped");
    Ok(Spawned {
        group: ChildGroup { child, pgid },
        stdin,
        stdout,
        stderr,
    })
}

/// Feeds the body to http-backend's stdin on a task of its own, so that
/// its stdout is read meanwhile (feeding first could deadlock on full
/// pipes). Dropping stdin at the end closes it: http-backend sees the end
/// of the body.
pub(super) fn feed_stdin(stdin: Option<ChildStdin>, body: Option<Spooled>) {
    tokio::spawn(
        async move {
            let Some(mut stdin) = stdin else { return };
            let fed = match body.map(|b| b.content) {
                None => Ok(()),
                Some(SpooledContent::Memory(bytes)) => stdin.write_all(&bytes).await,
                // A spooled file is copied by a blocking thread with std's copy
                // (which splices file to pipe in the kernel): tokio's file reads
                // go through the blocking pool in small chunks and cost ~0.1 s
                // on a 16 MiB push.
                Some(SpooledContent::File(file)) => match stdin.into_owned_fd() {
                    Ok(fd) => vole_http::spawn_blocking(move || copy_to_pipe(file.path(), fd))
                        .await
                        .unwrap_or_else(|e| Err(std::io::Error::other(e))),
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = fed {
                tracing::debug!(error = %e, "feeding http-backend stopped");
            }
        }
        .in_current_span(),
    );
}

/// Copies a file into a pipe, blocking (the pipe is switched back to
/// blocking mode: tokio created it non-blocking). Closes the pipe at the end.
fn copy_to_pipe(source: &std::path::Path, pipe: std::os::fd::OwnedFd) -> std::io::Result<()> {
    use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
    let flags = fcntl_getfl(&pipe)?;
    fcntl_setfl(&pipe, flags.difference(OFlags::NONBLOCK))?;
    let mut source = std::fs::File::open(source)?;
    let mut sink = std::fs::File::from(pipe);
    std::io::copy(&mut source, &mut sink).map(drop)
}

/// Logs git's stderr line by line on a task of its own; the task's result
/// is the first lines, kept to explain a refused request.
pub(super) fn log_stderr(stderr: ChildStderr, repo: String) -> JoinHandle<Vec<String>> {
    tokio::spawn(
        async move {
            let mut kept = Vec::new();
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::warn!(repo, "git http-backend: {line}");
                if kept.len() < MAX_STDERR_LINES_KEPT {
                    kept.push(line);
                }
            }
            kept
        }
        .in_current_span(),
    )
}

/// The stderr lines kept by [`log_stderr`], waited for at most 5 s (none
/// if they did not come by then).
pub(super) async fn stderr_said(task: JoinHandle<Vec<String>>) -> Vec<String> {
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
}
