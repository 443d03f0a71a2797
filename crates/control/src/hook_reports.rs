//! The git hooks' reports on a push the server registered: the
//! pre-receive checks, the ref transaction's prepared and outcome records,
//! and HEAD pointed at a branch the push created.

use vole_git::repos::RepoName;

use crate::{ControlState, Reply};

/// The hook's push context with the actor and client the server
/// registered for its id, and the push's request span; `None` when no
/// such push is under way.
fn registered(
    app: &ControlState,
    push: vole_hooks::PushContext,
) -> Option<(vole_hooks::PushContext, tracing::Span)> {
    let registered = app.access.pushes().get(push.push_id, &push.repo)?;
    Some((
        vole_hooks::PushContext {
            actor: registered.actor(),
            client: registered.client,
            ..push
        },
        registered.span,
    ))
}

/// The pre-receive checks of a registered push's updates: the refused
/// ones, each with its reason; all of them when no such push is under way.
/// Who pushes is what the server registered when the push started, not
/// what the hook's environment says.
pub(crate) fn hook_pre_receive(
    app: &ControlState,
    push: vole_hooks::PushContext,
    updates: Vec<vole_hooks::RefUpdate>,
) -> Reply {
    let Some(registered) = app.access.pushes().get(push.push_id, &push.repo) else {
        tracing::warn!(
            repo = push.repo,
            push_id = push.push_id,
            "a pre-receive report names no push under way; refused"
        );
        let refused: Vec<_> = updates
            .iter()
            .map(|u| vole_access::Refusal {
                ref_name: u.ref_name.clone(),
                reason: "this push was not started by this server".into(),
            })
            .collect();
        return Reply::ok(serde_json::json!({ "refused": refused }));
    };
    let _request = registered.span.enter();
    let refused = app
        .access
        .check_ref_updates(&registered.principal, &registered.repo, &updates);
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

/// A registered push's ref transaction recorded as prepared, durably.
pub(crate) fn hook_ref_prepared(
    app: &ControlState,
    push: vole_hooks::PushContext,
    moves: Vec<vole_hooks::RefUpdate>,
) -> Reply {
    let Some((push, span)) = registered(app, push) else {
        return Reply::error("this push was not started by this server");
    };
    let _request = span.enter();
    match app.recorder.prepared(&push, &moves) {
        Ok(seq) => Reply::ok(serde_json::json!({ "seq": seq })),
        Err(e) => {
            tracing::error!(repo = push.repo, error = %e, "cannot record a ref transaction; git will abort it");
            Reply::error(
                "the server could not record the update durably; the server log has the detail",
            )
        }
    }
}

/// A registered push's ref transaction's outcome recorded, durably; once
/// committed, HEAD pointed at a branch and the metadata repacked if needed.
pub(crate) fn hook_ref_outcome(
    app: &ControlState,
    push: vole_hooks::PushContext,
    moves: Vec<vole_hooks::RefUpdate>,
    outcome: vole_hooks::Outcome,
) -> Reply {
    let Some((push, span)) = registered(app, push) else {
        return Reply::error("this push was not started by this server");
    };
    let _request = span.enter();
    match app.recorder.outcome(&push, &moves, outcome) {
        Ok(seq) => {
            if outcome == vole_hooks::Outcome::Committed
                && let Ok(repo) = RepoName::parse(&push.repo)
            {
                point_head_at_a_branch(app, &repo, push.push_id, &moves);
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
    }
}

/// After each committed transaction of a push: a HEAD naming a branch that
/// does not exist (a new repo's `main` when the push brought only
/// `master`, say) is pointed at one the push created
/// (`repos::default_branch_among`), or, when it created none, at one of
/// the repo's (a HEAD left dangling before is mended by the next push),
/// so a clone checks it out. git may
/// commit a push one ref at a time, so the choice is made again over all
/// the branches the push created so far while HEAD is still the push's
/// own choice; all of it before git reports the push done.
fn point_head_at_a_branch(
    app: &ControlState,
    repo: &RepoName,
    push_id: u64,
    moves: &[vole_hooks::RefUpdate],
) {
    let Some(registered) = app.access.pushes().get(push_id, &repo.to_string()) else {
        return;
    };
    let mut created = registered.created.lock();
    created.names.extend(
        moves
            .iter()
            .filter(|m| m.is_creation())
            .filter_map(|m| m.ref_name.strip_prefix("refs/heads/"))
            .map(str::to_string),
    );
    let dir = app.repos.path(repo);
    let head = vole_git::repos::head_branch(&dir);
    let exists = |branch: &str| {
        app.recorder
            .has_ref(&repo.to_string(), &format!("refs/heads/{branch}"))
    };
    if !created.head_set && head.as_deref().is_some_and(exists) {
        return;
    }
    // The branches this push created; if none of them exists (a push to
    // a repo whose HEAD was left dangling before), all of the repo's.
    let mut candidates: Vec<String> = created
        .names
        .iter()
        .filter(|b| exists(b))
        .cloned()
        .collect();
    if candidates.is_empty() {
        candidates = app.recorder.branches(&repo.to_string());
    }
    let Some(branch) = vole_git::repos::default_branch_among(candidates.iter().map(String::as_str))
        .map(str::to_string)
    else {
        return;
    };
    let branch = branch.as_str();
    if head.as_deref() == Some(branch) {
        return;
    }
    match app.recorder.point_head(
        repo,
        branch,
        registered.principal.name(),
        &registered.client,
        push_id,
    ) {
        Ok(_) => {
            created.head_set = true;
            tracing::info!(repo = %repo, branch, "HEAD named no existing branch; it now names one the push created");
        }
        Err(e) => {
            tracing::warn!(repo = %repo, error = %vole_stdx::error_chain::Chain(&e), "cannot point HEAD at the pushed branch")
        }
    }
}
