//! The local control socket: how CLI commands (and, later, git hooks) reach a
//! running server, so a change takes effect at once and the server stays the
//! only writer of its data dir.
//!
//! # Protocol, version 1
//!
//! - Transport: a Unix stream socket at `<data>/vole.sock`, mode `0600`
//!   (owner only). The server removes a stale one at start.
//! - Framing: one JSON object per line (UTF-8, `\n`-terminated, at most
//!   [`MAX_LINE`] bytes). Each request gets exactly one reply line, in order;
//!   a connection may carry many requests.
//! - Request: `{"v":1,"op":"<op>", ...fields}`.
//! - Reply: `{"v":1,"ok":true,"data":<value>}` or
//!   `{"v":1,"ok":false,"error":"<message for a person>"}`.
//! - A request whose `v` the server does not speak, or that does not parse,
//!   gets an error reply naming the problem; the connection stays usable.
//!
//! Operations:
//!
//! | op            | fields                                  | data on success |
//! |---------------|-----------------------------------------|-----------------|
//! | `ping`        | -                                       | `{"server":"vole","version":"…"}` |
//! | `repo_create` | `repo` (`owner/name`), `description`?   | `{"name":"owner/name","description":"…"}` |
//! | `repo_list`   | -                                       | array of the above |
//! | `hook_pre_receive` | `push` {repo, push_id, actor, client}, `updates` [{ref, old, new, fast_forward?}] | `{"refused":[{"ref","reason"}]}` |
//! | `hook_ref_prepared` | `push`, `moves` [{ref, old, new}] | `{"seq":n}` once durable |
//! | `hook_ref_outcome` | `push`, `moves`, `outcome` (`committed`/`aborted`) | `{"seq":n}` once durable and published |
//! | `log_compact` | `keep` | `{"bytes_before","bytes_after","base_seq","meta":{..same..}}` |
//!
//! A new operation is added as a new `op` (old clients keep working); a
//! change to an existing one bumps `v`.
//!
//! When no server runs, the CLI takes the data dir lock itself and calls
//! [`dispatch`] in-process: one code path for both.

pub mod client;
pub mod protocol;
pub mod server;

pub use protocol::{MAX_LINE, PROTOCOL_VERSION, Reply, Request};

use std::sync::Arc;

use crate::access::{Access, Principal};
use crate::config::Config;
use crate::git::Git;
use crate::hooks::recorder::RefRecorder;
use crate::meta::MetaStore;
use crate::repos::{RepoError, RepoInfo, RepoName, Repos};

/// What the control operations need of the server.
#[derive(Debug)]
pub struct ControlState {
    pub config: Arc<Config>,
    pub git: Git,
    pub repos: Repos,
    pub recorder: Arc<RefRecorder>,
    pub meta: Arc<MetaStore>,
    pub access: Arc<Access>,
}

impl ControlState {
    /// Creates `owner/name`, durably (blocking: runs git).
    pub fn create_repo(
        &self,
        name: &str,
        description: Option<&str>,
    ) -> Result<RepoInfo, RepoError> {
        let name = RepoName::parse(name)?;
        let info = self
            .repos
            .create(&self.git, &name, description, &self.config.default_branch)?;
        tracing::info!(repo = %name, "repository created");
        Ok(info)
    }
}

/// Carries out one request. Blocking: call it from `spawn_blocking` in
/// async code.
pub fn dispatch(app: &ControlState, request: Request) -> Reply {
    match request {
        Request::Ping => Reply::ok(serde_json::json!({
            "server": "vole",
            "version": env!("CARGO_PKG_VERSION"),
        })),
        Request::RepoCreate { repo, description } => {
            match app.create_repo(&repo, description.as_deref()) {
                Ok(info) => Reply::ok(info),
                Err(e) => Reply::error(e.to_string()),
            }
        }
        Request::RepoList => Reply::ok(app.repos.list()),
        Request::HookPreReceive { push, updates } => {
            let Ok(repo) = RepoName::parse(&push.repo) else {
                return Reply::error(format!("{:?} is not a repository name", push.repo));
            };
            // The push's principal: anonymous until accounts exist.
            let refused = app
                .access
                .check_ref_updates(&Principal::Anonymous, &repo, &updates);
            if !refused.is_empty() {
                tracing::info!(
                    repo = push.repo,
                    push_id = push.push_id,
                    refused = refused.len(),
                    "push refused by pre-receive checks"
                );
            }
            Reply::ok(serde_json::json!({ "refused": refused }))
        }
        Request::HookRefPrepared { push, moves } => match app.recorder.prepared(&push, &moves) {
            Ok(seq) => Reply::ok(serde_json::json!({ "seq": seq })),
            Err(e) => {
                tracing::error!(repo = push.repo, error = %e, "cannot record a ref transaction; git will abort it");
                Reply::error(
                    "the server could not record the update durably; the server log has the detail",
                )
            }
        },
        Request::HookRefOutcome {
            push,
            moves,
            outcome,
        } => match app.recorder.outcome(&push, &moves, outcome) {
            Ok(seq) => {
                if outcome == crate::hooks::Outcome::Committed
                    && let Ok(repo) = RepoName::parse(&push.repo)
                {
                    app.meta.repack_if_needed(&repo);
                }
                Reply::ok(serde_json::json!({ "seq": seq }))
            }
            Err(e) => {
                tracing::error!(repo = push.repo, error = %e, "a ref transaction's outcome is not durable; git is stopped before it reports");
                Reply::error(
                    "the server could not make the update durable; the server log has the detail",
                )
            }
        },
        Request::LogCompact { keep } => {
            match (app.recorder.compact(keep), app.meta.compact_log(keep)) {
                (Ok(refs), Ok(meta)) => Reply::ok(serde_json::json!({
                    "bytes_before": refs.bytes_before,
                    "bytes_after": refs.bytes_after,
                    "base_seq": refs.base_seq,
                    "meta": {
                        "bytes_before": meta.bytes_before,
                        "bytes_after": meta.bytes_after,
                        "base_seq": meta.base_seq,
                    },
                })),
                (Err(e), _) => Reply::error(format!("ref log compaction failed: {e}")),
                (_, Err(e)) => Reply::error(format!("meta log compaction failed: {e}")),
            }
        }
    }
}
