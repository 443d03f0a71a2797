//! `/{owner}/{repo}/-/pulls/{n}`: a pull request with its description and
//! comments, its commits, and the merge box (what merging now would give,
//! the methods the repo offers, the commits the form was shown);
//! `/-/pulls/{n}/files` is [`crate::pull_files`];
//! `/-/pulls/new`: the form that opens one from a branch to a branch.
//!
//! The forms go through the API's paths (`vole_api::threads`,
//! `vole_api::pulls::merge_as`), so a button left out for a viewer is a
//! 403 when its form is forged.

use std::sync::Arc;

use axum::extract::Request;
use serde::Deserialize;
use vole_access::ResolvedRepo;
use vole_api::pulls::{MergeAsk, Preview};

use crate::caches::PreviewParts;
use vole_git::merge::TestMerge;
use vole_http::repo_access::WriteMeta;
use vole_meta::NewChange;
use vole_meta::entity::{Change, ChangeState, MergeMethod, ThreadKind};

use super::*;
use crate::forms::{checked_form, client_of, session_user};
use crate::issue::{COMMENTS_PER_PAGE, PageQuery, ThreadForm, Timeline, act_on, timeline};
use crate::issues::{split_labels, tabs_rev};
use crate::read::LogEntry;
use crate::sign_in::{see_other, to_sign_in, viewer};

/// Commits a pull request's page lists at most.
const MAX_COMMITS_LISTED: usize = 250;

/// The merge box of an open pull request.
struct MergeBox {
    source: String,
    target: String,
    /// Why it cannot be merged now (none: it can).
    blocked: Option<String>,
    conflicts: Vec<String>,
    /// (method, as shown, chosen by default).
    methods: Vec<(&'static str, &'static str, bool)>,
    fast_forward: bool,
}

#[derive(Template)]
#[template(path = "pull.html")]
struct PullPage {
    repo: String,
    rev: String,
    csrf: String,
    change: Change,
    state: &'static str,
    timeline: Timeline,
    commits: Vec<LogEntry>,
    more_commits: bool,
    merge_box: Option<MergeBox>,
    may_edit: bool,
    may_label: bool,
    may_comment: bool,
    may_merge: bool,
    editing: bool,
    labels: String,
    error: Option<String>,
}

fn pull_path(name: &ResolvedRepo, number: u64) -> String {
    format!("/{name}/-/pulls/{number}")
}

pub(crate) fn pull_number(text: &str) -> Result<u64, AppError> {
    text.parse::<u64>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| AppError::not_found("There is no such pull request."))
}

/// The state as the page names it.
fn state_named(change: &Change) -> &'static str {
    match (change.state, &change.merge_commit) {
        (ChangeState::Open, _) => "Open",
        (ChangeState::Closed, _) => "Closed",
        (ChangeState::Merged, Some(_)) => "Merged",
        (ChangeState::Merged, None) => "Merged (no merge commit recorded)",
    }
}

impl MergeBox {
    /// A box that says why it cannot say whether the merge is possible.
    fn unknown(why: String) -> MergeBox {
        MergeBox {
            source: String::new(),
            target: String::new(),
            blocked: Some(why),
            conflicts: Vec::new(),
            methods: Vec::new(),
            fast_forward: false,
        }
    }
}

fn merge_box(preview: &Preview, offered: &vole_meta::entity::MergeSettings) -> MergeBox {
    let (blocked, conflicts) = match &preview.merge {
        _ if preview.merged_already => (
            Some("The target branch has every commit of this one: nothing to merge.".into()),
            Vec::new(),
        ),
        TestMerge::Clean(_) => (None, Vec::new()),
        TestMerge::Conflicts(paths) => (
            Some("This pull request has conflicts and cannot be merged.".into()),
            paths.clone(),
        ),
        TestMerge::Unrelated => (
            Some("The branches have no commit in common.".into()),
            Vec::new(),
        ),
    };
    let mut merge_box = MergeBox {
        source: preview.tips.source.to_string(),
        target: preview.tips.target.to_string(),
        blocked,
        conflicts,
        methods: offered
            .methods
            .iter()
            .filter(|m| **m != MergeMethod::FastForwardOnly || preview.fast_forward)
            .map(|m| (m.as_str(), m.named(), *m == offered.default))
            .collect(),
        fast_forward: preview.fast_forward,
    };
    if merge_box.blocked.is_none() && merge_box.methods.is_empty() {
        merge_box.blocked = Some(
            "This repository merges by fast-forward only, and the target has commits this \
             branch lacks: rebase it onto the target and push."
                .into(),
        );
    }
    merge_box
}

/// The commits of `source` not on `target` (newest first), bounded.
fn commits(
    app: &WebState,
    name: &ResolvedRepo,
    (target, source): (gix::ObjectId, gix::ObjectId),
) -> Result<(Vec<LogEntry>, bool), read::ReadError> {
    let range = format!("{target}..{source}");
    let count = format!("-n{}", MAX_COMMITS_LISTED + 1);
    let (out, _) = read::run_git(
        &app.git,
        &app.repos.path(name),
        &["log", read::LOG_FORMAT, &count, &range],
        read::MAX_LOG_BYTES,
        app.config.reads.deadline,
    )?;
    Ok(read::log_entries(&out, MAX_COMMITS_LISTED))
}

/// The preview and commits of an open pull request, under a read slot,
/// cached by the repo's incarnation and both tips: a view after the first
/// runs only the two tips' look-ups. `Err` says why there are none (empty
/// for a pull request that is not open).
async fn open_parts(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    change: &Change,
) -> Result<Result<Arc<PreviewParts>, String>, AppError> {
    if change.state != ChangeState::Open {
        return Ok(Err(String::new()));
    }
    let slot = app.reads.acquire().await?;
    let (app2, name2, change2) = (app.clone(), name.clone(), change.clone());
    let parts = vole_http::spawn_blocking(move || {
        let _slot = slot;
        let tips = match vole_api::pulls::tips(&app2.api, &name2, &change2) {
            Ok(tips) => tips,
            Err(refused) => return Ok(Err(refused.to_string())),
        };
        let key = (name2.incarnation_id().to_string(), tips.target, tips.source);
        if let Some(hit) = app2.caches.previews.get(&key) {
            return Ok(Ok(hit));
        }
        let deadline = app2.config.reads.deadline;
        let preview = match vole_api::pulls::preview(&app2.api, &name2, &change2, deadline) {
            Ok(preview) => preview,
            Err(failed) => return Ok(Err(format!("vole could not test this merge: {failed}"))),
        };
        let (commits, more) = commits(&app2, &name2, (preview.tips.target, preview.tips.source))?;
        let parts = Arc::new(PreviewParts {
            preview,
            commits,
            more,
        });
        // Keyed by the tips the preview itself read (a push between the
        // two look-ups makes it another key, not a wrong entry).
        let tips = parts.preview.tips;
        let key = (key.0, tips.target, tips.source);
        app2.caches.previews.insert(key, parts.clone());
        Ok::<_, read::ReadError>(Ok(parts))
    })
    .await
    .map_err(|e| AppError::internal("pull request read task failed", e))?;
    parts.map_err(|e| AppError::internal("git read failed", vole_stdx::error_chain::Chain(&e)))
}

async fn pull_page(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    number: u64,
    (edit, page): (&str, Pagination),
    error: Option<AppError>,
) -> Result<Response, AppError> {
    let repo = name.clone();
    let change = crate::meta_read(app, move |meta| meta.change(&repo, number)).await?;
    let timeline = timeline(
        app,
        name,
        (ThreadKind::Change, number),
        &change.body,
        Some(edit),
        page,
    )
    .await?;
    let offered = app.api.meta.settings(name)?.merge;
    let parts = open_parts(app, name, &change).await?;
    let (merge_box, commits, more_commits) = match parts {
        Ok(parts) => (
            Some(merge_box(&parts.preview, &offered)),
            parts.commits.clone(),
            parts.more,
        ),
        // A merged one lists what it brought to the target.
        Err(why) if why.is_empty() => match crate::pull_files::merged_range(&change) {
            Some(range) => {
                let slot = app.reads.acquire().await?;
                let (app2, name2) = (app.clone(), name.clone());
                let listed = vole_http::spawn_blocking(move || {
                    let _slot = slot;
                    commits(&app2, &name2, range)
                })
                .await
                .map_err(|e| AppError::internal("pull request read task failed", e))?;
                let (commits, more) = listed.unwrap_or_default();
                (None, commits, more)
            }
            None => (None, Vec::new(), false),
        },
        // The box says why it cannot tell (a branch gone, a test merge
        // past the read deadline).
        Err(why) => (Some(MergeBox::unknown(why)), Vec::new(), false),
    };
    let viewer = viewer();
    let repo = name.to_string();
    let status = error.as_ref().map_or(StatusCode::OK, AppError::status);
    let mut response = render(PullPage {
        rev: tabs_rev(app, name),
        csrf: viewer.csrf.clone(),
        state: state_named(&change),
        may_edit: viewer.may_edit(&repo, &change.author),
        may_label: viewer.may_label(&repo),
        may_comment: viewer.may_comment(&repo),
        may_merge: viewer.may_merge(&repo, &change.target_branch),
        editing: edit == "pull",
        labels: change.labels.join(", "),
        repo,
        change,
        timeline,
        commits,
        more_commits,
        merge_box,
        error: error.map(|e| e.message().to_string()),
    })?;
    *response.status_mut() = status;
    Ok(response)
}

/// `GET /{owner}/{repo}/-/pulls/{n}?page=&edit=`.
pub async fn pull(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, number)): Path<(String, String, String)>,
    Query(query): Query<PageQuery>,
    WebPage(page): WebPage<COMMENTS_PER_PAGE>,
) -> Result<Response, AppError> {
    // Gitea's `{html_url}.diff` and `.patch`.
    for (suffix, raw) in [
        (".diff", crate::pull_files::Raw::Diff),
        (".patch", crate::pull_files::Raw::Patch),
    ] {
        if let Some(number) = number.strip_suffix(suffix) {
            let number = pull_number(number)?;
            return crate::pull_files::pull_raw(&app, &name, number, raw).await;
        }
    }
    let number = pull_number(&number)?;
    pull_page(&app, &name, number, (query.edit(), page), None).await
}

/// `POST /{owner}/{repo}/-/pulls/{n}`: comment, close, reopen, edit,
/// labels.
pub async fn post_pull(
    State(app): State<Arc<WebState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<WriteMeta>,
    Path((_, _, number)): Path<(String, String, String)>,
    request: Request,
) -> Result<Response, AppError> {
    let number = pull_number(&number)?;
    let Some((_, _, form)) = checked_form::<ThreadForm>(&app, request, |f| &f.csrf).await? else {
        return Ok(to_sign_in(&pull_path(&name, number)));
    };
    match act_on::<Change>(&app, &principal, &name, number, form).await {
        Ok(()) => Ok(see_other(&pull_path(&name, number), &[])),
        Err(refused) if refused.status().is_client_error() => {
            let page = Pagination::first(COMMENTS_PER_PAGE);
            pull_page(&app, &name, number, ("", page), Some(refused)).await
        }
        Err(refused) => Err(refused),
    }
}

#[derive(Debug, Default, Deserialize)]
struct MergeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    method: String,
    #[serde(default)]
    head: String,
    #[serde(default)]
    target: String,
    /// The target branch's name the page showed (an author may retarget
    /// the pull request meanwhile).
    #[serde(default)]
    target_branch: String,
}

/// `POST /{owner}/{repo}/-/pulls/{n}/merge`: the merge box's form, with
/// the commits it was shown (refused if either branch moved since).
pub async fn merge_pull(
    State(app): State<Arc<WebState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<WriteMeta>,
    Path((_, _, number)): Path<(String, String, String)>,
    request: Request,
) -> Result<Response, AppError> {
    let number = pull_number(&number)?;
    let client = client_of(&request);
    let Some((_, _, form)) = checked_form::<MergeForm>(&app, request, |f| &f.csrf).await? else {
        return Ok(to_sign_in(&pull_path(&name, number)));
    };
    let method = MergeMethod::parse(&form.method).ok_or_else(|| {
        AppError::bad_request(format!(
            "merge method {:?} is not one of merge, fast-forward-only, squash",
            form.method
        ))
    })?;
    let ask = MergeAsk {
        number,
        method: Some(method),
        head: Some(form.head),
        target: Some(form.target),
        target_branch: Some(form.target_branch).filter(|b| !b.is_empty()),
        title: None,
        message: None,
    };
    match vole_api::pulls::merge_as(&app.api, &principal, &name, ask, &client).await {
        Ok(_) => Ok(see_other(&pull_path(&name, number), &[])),
        Err(refused) if refused.status().is_client_error() => {
            let page = Pagination::first(COMMENTS_PER_PAGE);
            pull_page(&app, &name, number, ("", page), Some(refused)).await
        }
        Err(refused) => Err(refused),
    }
}

#[derive(Template)]
#[template(path = "new_pull.html")]
struct NewPullPage {
    repo: String,
    rev: String,
    csrf: String,
    branches: Vec<String>,
    source: String,
    target: String,
    title: String,
    body: String,
    error: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct NewPullForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    target: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    body: String,
    #[serde(default)]
    labels: String,
}

async fn new_pull_page(
    app: &Arc<WebState>,
    name: &ResolvedRepo,
    csrf: String,
    form: NewPullForm,
    error: Option<AppError>,
) -> Result<Response, AppError> {
    let mut branches = app.recorder.branches(&name.to_string());
    branches.sort();
    branches.truncate(1000);
    let default = tabs_rev(app, name);
    let status = error.as_ref().map_or(StatusCode::OK, AppError::status);
    let mut response = render(NewPullPage {
        repo: name.to_string(),
        rev: default.clone(),
        csrf,
        source: if form.source.is_empty() {
            branches
                .iter()
                .find(|b| **b != default)
                .cloned()
                .unwrap_or_default()
        } else {
            form.source
        },
        target: if form.target.is_empty() {
            default
        } else {
            form.target
        },
        branches,
        title: form.title,
        body: form.body,
        error: error.map(|e| e.message().to_string()),
    })?;
    *response.status_mut() = status;
    Ok(response)
}

/// `GET /{owner}/{repo}/-/pulls/new?source=`.
pub async fn new_pull(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<WriteMeta>,
    Query(form): Query<NewPullForm>,
) -> Result<Response, AppError> {
    let Some((_, csrf)) = session_user() else {
        return Ok(to_sign_in(&format!("/{name}/-/pulls/new")));
    };
    new_pull_page(&app, &name, csrf, form, None).await
}

/// `POST /{owner}/{repo}/-/pulls/new`: opens it, then to its page.
pub async fn create_pull(
    State(app): State<Arc<WebState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<WriteMeta>,
    request: Request,
) -> Result<Response, AppError> {
    let Some((_, csrf, form)) = checked_form::<NewPullForm>(&app, request, |f| &f.csrf).await?
    else {
        return Ok(to_sign_in(&format!("/{name}/-/pulls/new")));
    };
    let known = app.recorder.branches(&name.to_string());
    let missing = [&form.source, &form.target]
        .into_iter()
        .find(|b| !known.contains(b))
        .cloned();
    let opened = match missing {
        Some(branch) => Err(AppError::bad_request(format!(
            "there is no branch {branch:?} in {name}; push it first"
        ))),
        None => {
            let new = NewChange {
                title: form.title.trim().to_string(),
                body: form.body.clone(),
                source_branch: form.source.clone(),
                target_branch: form.target.clone(),
                labels: split_labels(&form.labels),
            };
            vole_api::threads::create_thread::<Change>(&app.api, &principal, name.clone(), new)
                .await
        }
    };
    match opened {
        Ok(change) => Ok(see_other(&pull_path(&name, change.number), &[])),
        Err(refused) if refused.status().is_client_error() => {
            new_pull_page(&app, &name, csrf, form, Some(refused)).await
        }
        Err(refused) => Err(refused),
    }
}
