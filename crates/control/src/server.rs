//! The server's side of the control socket: accepts connections on the Unix
//! socket and answers each request line through [`super::dispatch`], on
//! the control socket's own threads ([`Dispatcher`]): a hook never waits
//! behind page views, archives or highlighting on tokio's blocking pool,
//! so a flood of requests cannot time a push's hooks out.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::ControlState;
use super::protocol::{MAX_LINE, Reply};

/// Binds the socket with owner-only permissions. `path` is in a directory
/// only the owner may enter (`DataDir::prepare_run_dir`): between the bind
/// and the chmod the socket has the umask's mode.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// A request and where its reply goes.
type Job = (super::Request, tokio::sync::oneshot::Sender<Reply>);

/// Threads that run [`super::dispatch`] and nothing else.
pub struct Dispatcher {
    jobs: std::sync::mpsc::SyncSender<Job>,
    app: Arc<ControlState>,
}

/// Requests waiting for a dispatch thread before new ones are refused.
const QUEUED_JOBS: usize = 1024;

impl Dispatcher {
    /// `threads` dispatch threads: enough for every push's hooks at once
    /// (the push cap) and a few CLI requests besides.
    pub fn start(app: Arc<ControlState>, threads: usize) -> std::io::Result<Arc<Dispatcher>> {
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Job>(QUEUED_JOBS);
        let queue = Arc::new(parking_lot::Mutex::new(queue));
        for i in 0..threads.max(1) {
            let (app, queue) = (app.clone(), queue.clone());
            std::thread::Builder::new()
                .name(format!("vole-control-{i}"))
                .spawn(move || {
                    loop {
                        // The lock is held only to take one job.
                        let job = queue.lock().recv();
                        let Ok((request, reply_to)) = job else {
                            return; // the dispatcher is gone
                        };
                        let op = request.op();
                        let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            super::dispatch(&app, request)
                        }))
                        .unwrap_or_else(|_| {
                            tracing::error!(op, "control request panicked");
                            Reply::error("internal error; see the server log")
                        });
                        let _ = reply_to.send(reply);
                    }
                })?;
        }
        Ok(Arc::new(Dispatcher { jobs, app }))
    }

    async fn run(&self, request: super::Request) -> Reply {
        let (reply_to, reply) = tokio::sync::oneshot::channel();
        match self.jobs.try_send((request, reply_to)) {
            Ok(()) => reply
                .await
                .unwrap_or_else(|_| Reply::error("internal error; see the server log")),
            Err(_) => Reply::error("the server is busy; try again shortly"),
        }
    }
}

/// Serves connections until the task is dropped.
pub async fn serve(listener: UnixListener, dispatcher: Arc<Dispatcher>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(handle_connection(stream, dispatcher.clone()));
            }
            Err(e) => {
                tracing::warn!(error = %e, "control socket accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

async fn handle_connection(stream: UnixStream, dispatcher: Arc<Dispatcher>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = String::new();
    loop {
        line.clear();
        let read = match (&mut reader)
            .take(MAX_LINE as u64)
            .read_line(&mut line)
            .await
        {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) => {
                tracing::debug!(error = %e, "control connection read failed");
                return;
            }
        };
        let reply = if read == MAX_LINE && !line.ends_with('\n') {
            Reply::error(format!("request longer than {MAX_LINE} bytes"))
        } else {
            match Reply::parse_request(&line) {
                Err(reply) => reply,
                Ok(super::Request::PackObjects { repo, args, stdin }) => {
                    // The connection is this pack's reader from here on.
                    serve_pack(&dispatcher.app, repo, args, stdin, &mut reader, &mut write).await;
                    return;
                }
                Ok(super::Request::Backup { dest }) => {
                    serve_backup(&dispatcher.app, dest, &mut write).await;
                    return;
                }
                Ok(request) => dispatcher.run(request).await,
            }
        };
        let mut out = serde_json::to_vec(&reply).unwrap_or_else(|_| b"{}".to_vec());
        out.push(b'\n');
        if write.write_all(&out).await.is_err() {
            return;
        }
        if read == MAX_LINE && !line.ends_with('\n') {
            return; // the rest of the oversized line would be misread as requests
        }
    }
}

/// A `backup` request: the copy runs on a blocking thread; its progress
/// goes out as lines (at most every 100 ms), then the summary or the error.
async fn serve_backup(
    app: &Arc<ControlState>,
    dest: String,
    write: &mut tokio::net::unix::OwnedWriteHalf,
) {
    use super::backup;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u64, u64)>(4);
    let state = app.clone();
    let job = tokio::task::spawn_blocking(move || {
        let data = vole_git::datadir::DataDir::new(state.config.data_dir.clone());
        // Nothing rewrites what is being copied until it is done.
        let _hold = state.meta.hold_maintenance();
        state.recorder.log().wait_compaction();
        let cut = backup::cut_live(&state, &data)?;
        let mut last = std::time::Instant::now() - std::time::Duration::from_secs(1);
        let mut progress = |done: u64, total: u64| {
            if done == total || last.elapsed() >= std::time::Duration::from_millis(100) {
                last = std::time::Instant::now();
                // A reader that stops reading loses progress lines, and
                // never stalls the copy (which holds maintenance off).
                let _ = tx.try_send((done, total));
            }
        };
        backup::write(&data, cut, std::path::Path::new(&dest), &mut progress)
    });
    let mut job = std::pin::pin!(job);
    let outcome = loop {
        tokio::select! {
            Some((done, total)) = rx.recv() => {
                let line = Reply::ok(serde_json::json!({ "progress": { "done": done, "total": total } }));
                // A CLI gone away does not stop the backup: it finishes.
                let _ = write_reply(write, &line).await;
            }
            outcome = &mut job => break outcome,
        }
    };
    let reply = match outcome {
        Ok(Ok(manifest)) => Reply::ok(backup::summary(&manifest)),
        Ok(Err(e)) => Reply::error(format!("backup failed: {e}")),
        Err(e) => Reply::error(format!("backup failed: {e}")),
    };
    let _ = write_reply(write, &reply).await;
}

async fn write_reply(write: &mut tokio::net::unix::OwnedWriteHalf, reply: &Reply) -> bool {
    let mut out = serde_json::to_vec(reply).unwrap_or_else(|_| b"{}".to_vec());
    out.push(b'\n');
    write.write_all(&out).await.is_ok()
}

/// A `pack_objects` request: the reply (a file to stream, or "bypass"),
/// then, once the pack is complete, `{"done": bytes}` (or an error line
/// when making it failed). The connection holds the reader until the hook
/// closes it (or dies with its client).
async fn serve_pack(
    app: &Arc<ControlState>,
    repo: String,
    args: Vec<String>,
    stdin: String,
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    write: &mut tokio::net::unix::OwnedWriteHalf,
) {
    use vole_pack_cache::{Open, State};
    let (request, generation) = match pack_request(app, repo, args, stdin) {
        Ok(found) => found,
        Err(refusal) => {
            let _ = write_reply(write, &refusal).await;
            return;
        }
    };
    // Opening creates files and reads a shallow file: off the async workers.
    let cache = app.pack_cache.clone();
    let opened = tokio::task::spawn_blocking(move || cache.open(request, generation)).await;
    let Ok(opened) = opened else {
        let _ = write_reply(write, &Reply::error("the pack cache failed")).await;
        return;
    };
    let pack = match opened {
        Open::Bypass(why) => {
            let _ = write_reply(write, &Reply::ok(serde_json::json!({ "bypass": why }))).await;
            return;
        }
        Open::Read(pack) => pack,
    };
    let done = match *pack.state.borrow() {
        State::Done(size) => Some(size),
        _ => None,
    };
    let reply = Reply::ok(serde_json::json!({
        "tmp": pack.tmp.display().to_string(),
        "pack": pack.pack.display().to_string(),
        "done": done,
    }));
    if !write_reply(write, &reply).await {
        return;
    }
    follow_pack(app, pack, done.is_some(), reader, write).await;
}

/// The pack cache's request for a repo's pack and the repo's ref state (its
/// last recorded ref move); the error reply when there is no such repo.
fn pack_request(
    app: &ControlState,
    repo: String,
    args: Vec<String>,
    stdin: String,
) -> Result<(vole_pack_cache::PackRequest, u64), Reply> {
    let Ok(name) = vole_git::repos::RepoName::parse(&repo) else {
        return Err(Reply::error(format!("{repo:?} is not a repository name")));
    };
    if !app.access.exists(&name) {
        return Err(Reply::error(format!("repository {name} not found")));
    }
    // Keyed by the repo and its incarnation: a repo created again under
    // the name never gets the first one's packs.
    let incarnation = app.meta.incarnation(&name).ok().flatten();
    let request = vole_pack_cache::PackRequest {
        repo_dir: app.repos.path(&name),
        repo: format!("{repo}#{}", incarnation.as_ref().map_or("", |i| i.id())),
        args,
        stdin: stdin.into_bytes(),
    };
    // The repo's ref state: its last recorded ref move.
    let generation = app
        .recorder
        .activity(&name.to_string(), vole_stdx::page::Pagination::first(1))
        .0
        .first()
        .map_or(0, |entry| entry.seq);
    Ok((request, generation))
}

/// Tells the hook how the pack it reads ends (unless `told` already), and
/// holds the reader until the hook is done or gone.
async fn follow_pack(
    app: &ControlState,
    mut pack: vole_pack_cache::Reader,
    mut told: bool,
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    write: &mut tokio::net::unix::OwnedWriteHalf,
) {
    use vole_pack_cache::State;
    let mut line = String::new();
    loop {
        tokio::select! {
            changed = pack.state.changed(), if !told => {
                let state = *pack.state.borrow();
                let reply = match (changed, state) {
                    (Ok(()), State::Done(size)) => {
                        // A follower is served the whole pack too (the
                        // request that started the pack is a miss).
                        if pack.follower {
                            app.pack_cache.count_served(size);
                        }
                        Reply::ok(serde_json::json!({ "done": size }))
                    }
                    (Ok(()), State::Producing) => continue,
                    // pack-objects itself failed: the request fails as it
                    // would have without the cache.
                    (Ok(()), State::Failed { cache: false }) => {
                        Reply::error("pack-objects failed")
                    }
                    // The cache failed (or its producer is gone): a reader
                    // that has sent nothing runs pack-objects itself.
                    _ => Reply::ok(serde_json::json!({ "failed": "cache" })),
                };
                told = true;
                if !write_reply(write, &reply).await {
                    return;
                }
            }
            read = reader.read_line(&mut line) => {
                // The hook is done (or gone): the reader drops here.
                if matches!(read, Ok(0) | Err(_)) {
                    return;
                }
                line.clear();
            }
        }
    }
}
