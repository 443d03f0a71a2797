//! [`dispatch`]: one control request carried out, by op group (the
//! repos, the users and tokens, the hooks' reports, the logs).

use vole_accounts::{NewTokenRequest, NewUser};
use vole_git::repos::RepoName;

use crate::hook_reports::{hook_pre_receive, hook_ref_outcome, hook_ref_prepared};
use crate::{Actor, ControlState, NewRepo, Reply, Request};

fn reply<T: serde::Serialize, E: std::fmt::Display>(result: Result<T, E>) -> Reply {
    match result {
        Ok(data) => Reply::ok(data),
        Err(e) => Reply::error(e.to_string()),
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
        Request::RepoCreate {
            repo,
            description,
            private,
            owner,
        } => reply(app.create_repo(
            NewRepo {
                name: repo,
                description,
                private,
                owner,
            },
            Actor::CLI,
        )),
        Request::RepoList => Reply::ok(app.repos.list()),
        Request::RepoDelete { repo } => match RepoName::parse(&repo) {
            Ok(name) => reply(app.delete_repo(&name, Actor::CLI).map(|()| &repo)),
            Err(e) => Reply::error(e.to_string()),
        },
        Request::RepoVisibility { repo, private } => match RepoName::parse(&repo) {
            Ok(name) => reply(app.set_visibility(&name, private, Actor::CLI)),
            Err(e) => Reply::error(e.to_string()),
        },
        Request::RepoDefaultBranch { repo, branch } => match RepoName::parse(&repo) {
            Ok(name) => match branch {
                Some(branch) => reply(
                    app.set_default_branch(&name, &branch, Actor::CLI)
                        .map(|()| &branch),
                ),
                None => reply(app.default_branch(&name)),
            },
            Err(e) => Reply::error(e.to_string()),
        },
        Request::RepoGc { repo } => match RepoName::parse(&repo) {
            Ok(name) => reply(app.gc_repo(&name, Actor::CLI)),
            Err(e) => Reply::error(e.to_string()),
        },
        Request::UserAdd {
            name,
            email,
            full_name,
            admin,
            password,
        } => reply(app.accounts.add_user(
            NewUser {
                name,
                full_name,
                email,
                admin,
                password,
            },
            "cli",
        )),
        Request::UserList => reply(app.accounts.users()),
        Request::UserEdit {
            name,
            full_name,
            email,
        } => reply(user_edit(app, &name, full_name, email)),
        Request::UserPasswd { name, password } => {
            reply(app.accounts.set_password(&name, &password, "cli"))
        }
        Request::UserDisable { name } => reply(app.accounts.disable_user(&name, "cli")),
        Request::TokenCreate {
            name,
            user,
            scope,
            repos,
            expires_in_secs,
        } => token_create(
            app,
            NewTokenRequest {
                name,
                user,
                scope,
                repos,
                expires_in: expires_in_secs.map(std::time::Duration::from_secs),
            },
        ),
        Request::TokenList { user } => reply(app.accounts.tokens(user.as_deref())),
        Request::TokenRevoke { name } => reply(app.accounts.revoke_token(&name, "cli")),
        Request::HookPreReceive { push, updates } => hook_pre_receive(app, push, updates),
        Request::HookRefPrepared { push, moves } => hook_ref_prepared(app, push, moves),
        Request::HookRefOutcome {
            push,
            moves,
            outcome,
        } => hook_ref_outcome(app, push, moves, outcome),
        Request::LogCompact { keep } => log_compact(app, keep),
        // Served by the connection (`server.rs`), which must hold it.
        Request::PackObjects { .. } => Reply::error("pack_objects is answered by its connection"),
        Request::Backup { .. } => Reply::error("backup is answered by its connection"),
    }
}

/// A token made for the operator: its view and, once only, its text.
fn token_create(app: &ControlState, request: NewTokenRequest) -> Reply {
    reply(
        app.accounts
            .create_token(request, "cli")
            .map(|(view, text)| serde_json::json!({ "token": view, "text": text })),
    )
}

fn log_compact(app: &ControlState, keep: u64) -> Reply {
    if app.meta.maintenance_held() {
        return Reply::error("a backup or a gc is under way; compact the logs once it is done");
    }
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

/// `vole user edit`: the fields given change, the others are kept.
fn user_edit(
    app: &ControlState,
    name: &str,
    full_name: Option<String>,
    email: Option<String>,
) -> Result<vole_accounts::UserView, vole_accounts::AccountError> {
    let current = app
        .accounts
        .user(name)?
        .ok_or_else(|| vole_accounts::AccountError::Invalid(format!("no user named {name:?}")))?;
    app.accounts.set_profile(
        name,
        full_name.as_deref().unwrap_or(&current.full_name),
        email.as_deref().unwrap_or(&current.email),
        "cli",
    )
}
