//! The local control socket: how CLI commands (and, later, git hooks) reach a
//! running server, so a change takes effect at once and the server stays the
//! only writer of its data dir.
//!
//! # Protocol, version 1
//!
//! - Transport: a Unix stream socket at `<data>/run/vole.sock`, mode
//!   `0600`, in a directory of mode `0700` made before the bind (owner
//!   only). The server removes a stale one at start.
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
//! | `repo_gc` | `repo` | [`gc::GcReport`] once the repo's unreachable objects are pruned |
//! | `log_compact` | `keep` | `{"bytes_before","bytes_after","base_seq","meta":{..same..}}` |
//! | `backup` | `dest` | `{"progress":{"done","total"}}` lines, then the summary of [`backup::Manifest`] |
//!
//! A new operation is added as a new `op` (old clients keep working); a
//! change to an existing one bumps `v`.
//!
//! When no server runs, the CLI takes the data dir lock itself and calls
//! [`dispatch`] in-process: one code path for both.

pub mod backup;
pub mod check;
pub mod client;
pub mod gc;
pub mod protocol;
pub mod server;

mod dispatch;
mod hook_reports;
mod lifecycle;
pub mod merge;
mod timeline;

pub use dispatch::dispatch;
pub use lifecycle::{Actor, LifecycleError, NewRepo};
pub use protocol::{MAX_LINE, PROTOCOL_VERSION, Reply, Request};

use std::sync::Arc;

use vole_access::Access;
use vole_accounts::Accounts;
use vole_config::Config;
use vole_git::Git;
use vole_git::repos::Repos;
use vole_hooks::recorder::RefRecorder;
use vole_meta::MetaStore;

/// What the control operations need of the server.
#[derive(Debug)]
pub struct ControlState {
    pub config: Arc<Config>,
    pub git: Git,
    pub repos: Repos,
    pub recorder: Arc<RefRecorder>,
    pub meta: Arc<MetaStore>,
    pub access: Arc<Access>,
    pub accounts: Arc<Accounts>,
    pub pack_cache: Arc<vole_pack_cache::PackCache>,
    /// The repos' gix handles, dropped for a repo deleted or pruned.
    pub gix: Arc<vole_git::GixHandles>,
    /// What else the server keeps of a repo by its incarnation (the web
    /// UI's caches), dropped when the repo is deleted: set by the
    /// assembly, as no service knows another.
    pub forget: Forget,
}

/// Drops what the server keeps of a deleted repo's incarnation.
#[derive(Clone)]
pub struct Forget(pub Arc<dyn Fn(&vole_git::repos::Incarnation) + Send + Sync>);

impl std::fmt::Debug for Forget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Forget")
    }
}

/// Every repo directory on disk with its name, the system repo (as
/// `@system`) first: what `vole check` and a backup go through (the
/// directories themselves, not the names the server knows).
pub fn repos_on_disk(data: &vole_git::datadir::DataDir) -> Vec<(String, std::path::PathBuf)> {
    let mut repos = Vec::new();
    if data.system_repo().is_dir() {
        repos.push((vole_meta::SYSTEM.to_string(), data.system_repo()));
    }
    let root = data.repos_dir();
    for dir in vole_git::datadir::bare_repo_dirs(&root) {
        let Ok(relative) = dir.strip_prefix(&root) else {
            continue;
        };
        let name = relative.to_string_lossy();
        let name = name.strip_suffix(".git").unwrap_or(&name).to_string();
        repos.push((name, dir));
    }
    repos
}
