//! Issues and change requests, one generic path: a [`Thread`] says what
//! differs between the two (its store calls, its states, its noun in
//! URLs, whether it has labels), and the handlers here list, create, read,
//! edit and comment on either through it.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ApiState;
use crate::meta::blocking;
use vole_access::{Principal, ResolvedRepo};
use vole_git::repos::RepoName;
use vole_http::AppError;
use vole_meta::entity::{Change, ChangeState, Comment, Issue, IssueState, ThreadKind};
use vole_meta::{
    ChangePatch, CommentPatch, Filter, IssuePatch, MetaError, MetaStore, NewChange, NewComment,
    NewIssue, Page,
};
use vole_stdx::page::Pagination;

fn label_set(labels: &[String]) -> std::collections::BTreeSet<&str> {
    labels.iter().map(String::as_str).collect()
}

/// What an issue and a change request do not share.
pub trait Thread: Serialize + Send + Sized + 'static {
    type New: DeserializeOwned + Send + 'static;
    type Patch: DeserializeOwned + Send + 'static;
    type State: DeserializeOwned;
    const KIND: ThreadKind;
    /// The collection's segment in URLs (`issues`, `changes`).
    const NOUN: &'static str;
    /// The states a list may be filtered by, as a person reads them.
    const STATES: &'static str;

    fn author(&self) -> &str;
    fn version(&self) -> u64;
    /// Whether `new` sets labels (only writers may).
    fn labels_new(new: &Self::New) -> bool;
    /// Whether `patch` changes this one's labels (only writers may).
    fn relabels(&self, patch: &Self::Patch) -> bool;
    fn list(
        meta: &MetaStore,
        repo: &RepoName,
        filter: &Filter<Self::State>,
        page: Pagination,
    ) -> Result<Page<Self>, MetaError>;
    fn create(
        meta: &MetaStore,
        repo: &RepoName,
        new: Self::New,
        author: &str,
    ) -> Result<Self, MetaError>;
    fn get(meta: &MetaStore, repo: &RepoName, number: u64) -> Result<Self, MetaError>;
    fn edit(
        meta: &MetaStore,
        repo: &RepoName,
        number: u64,
        patch: Self::Patch,
    ) -> Result<Self, MetaError>;
}

impl Thread for Issue {
    type New = NewIssue;
    type Patch = IssuePatch;
    type State = IssueState;
    const KIND: ThreadKind = ThreadKind::Issue;
    const NOUN: &'static str = "issues";
    const STATES: &'static str = "open, closed";

    fn author(&self) -> &str {
        &self.author
    }
    fn version(&self) -> u64 {
        self.version
    }
    fn labels_new(new: &NewIssue) -> bool {
        !new.labels.is_empty()
    }
    fn relabels(&self, patch: &IssuePatch) -> bool {
        patch
            .labels
            .as_ref()
            .is_some_and(|labels| label_set(labels) != label_set(&self.labels))
    }
    fn list(
        meta: &MetaStore,
        repo: &RepoName,
        filter: &Filter<IssueState>,
        page: Pagination,
    ) -> Result<Page<Self>, MetaError> {
        meta.list_issues(repo, filter, page)
    }
    fn create(
        meta: &MetaStore,
        repo: &RepoName,
        new: NewIssue,
        author: &str,
    ) -> Result<Self, MetaError> {
        meta.create_issue(repo, new, author)
    }
    fn get(meta: &MetaStore, repo: &RepoName, number: u64) -> Result<Self, MetaError> {
        meta.issue(repo, number)
    }
    fn edit(
        meta: &MetaStore,
        repo: &RepoName,
        number: u64,
        patch: IssuePatch,
    ) -> Result<Self, MetaError> {
        meta.edit_issue(repo, number, patch)
    }
}

impl Thread for Change {
    type New = NewChange;
    type Patch = ChangePatch;
    type State = ChangeState;
    const KIND: ThreadKind = ThreadKind::Change;
    const NOUN: &'static str = "changes";
    const STATES: &'static str = "open, merged, closed";

    fn author(&self) -> &str {
        &self.author
    }
    fn version(&self) -> u64 {
        self.version
    }
    fn labels_new(new: &NewChange) -> bool {
        !new.labels.is_empty()
    }
    fn relabels(&self, patch: &ChangePatch) -> bool {
        patch
            .labels
            .as_ref()
            .is_some_and(|labels| label_set(labels) != label_set(&self.labels))
    }
    fn list(
        meta: &MetaStore,
        repo: &RepoName,
        filter: &Filter<ChangeState>,
        page: Pagination,
    ) -> Result<Page<Self>, MetaError> {
        meta.list_changes(repo, filter, page)
    }
    fn create(
        meta: &MetaStore,
        repo: &RepoName,
        new: NewChange,
        author: &str,
    ) -> Result<Self, MetaError> {
        meta.create_change(repo, new, author)
    }
    fn get(meta: &MetaStore, repo: &RepoName, number: u64) -> Result<Self, MetaError> {
        meta.change(repo, number)
    }
    fn edit(
        meta: &MetaStore,
        repo: &RepoName,
        number: u64,
        patch: ChangePatch,
    ) -> Result<Self, MetaError> {
        meta.edit_change(repo, number, patch)
    }
}

// ---- the writes, shared by the API's handlers and the web's forms ----

/// A denial by `access` as the response it is.
fn refused(denied: vole_access::Denied) -> AppError {
    AppError::denied(denied, || "not found".into())
}

/// A new issue or change request by `principal` (who has `WriteMeta` on
/// the repo); labels only from those who may push.
pub async fn create_thread<T: Thread>(
    app: &Arc<ApiState>,
    principal: &Principal,
    name: ResolvedRepo,
    new: T::New,
) -> Result<T, AppError> {
    app.quotas.meta_write(principal)?;
    if T::labels_new(&new) {
        app.access.check_label(principal, &name).map_err(refused)?;
    }
    let author = principal.name().to_string();
    blocking(app, &name.clone(), move |app| {
        T::create(&app.meta, &name, new, &author)
    })
    .await
}

/// An edit of title, body, state or labels: by its author or those who
/// may push; labels by those who may push only.
pub async fn edit_thread<T: Thread>(
    app: &Arc<ApiState>,
    principal: &Principal,
    name: ResolvedRepo,
    number: u64,
    patch: T::Patch,
) -> Result<T, AppError> {
    app.quotas.meta_write(principal)?;
    let current = T::get(&app.meta, &name, number)?;
    app.access
        .check_edit(principal, &name, current.author())
        .map_err(refused)?;
    if current.relabels(&patch) {
        app.access.check_label(principal, &name).map_err(refused)?;
    }
    blocking(app, &name.clone(), move |app| {
        T::edit(&app.meta, &name, number, patch)
    })
    .await
}

/// A comment by `principal` on thread `number`.
pub async fn comment_on<T: Thread>(
    app: &Arc<ApiState>,
    principal: &Principal,
    name: ResolvedRepo,
    number: u64,
    new: NewComment,
) -> Result<Comment, AppError> {
    app.quotas.meta_write(principal)?;
    let author = principal.name().to_string();
    blocking(app, &name.clone(), move |app| {
        app.meta.comment(&name, T::KIND, number, new, &author)
    })
    .await
}

/// A comment's body replaced (`Some`) or the comment deleted (`None`): by
/// its author or an admin of the repo.
pub async fn rewrite_comment<T: Thread>(
    app: &Arc<ApiState>,
    principal: &Principal,
    name: ResolvedRepo,
    (number, id): (u64, String),
    version: u64,
    body: Option<String>,
) -> Result<Comment, AppError> {
    app.quotas.meta_write(principal)?;
    let current = app.meta.thread_comment(&name, T::KIND, number, &id)?;
    app.access
        .check_comment_edit(principal, &name, &current.author)
        .map_err(refused)?;
    // Without a version (0: Gitea's edits and deletions), whatever
    // version is current when the write applies, as Gitea's do.
    let version = Some(version).filter(|v| *v != 0);
    blocking(app, &name.clone(), move |app| match body {
        Some(body) => {
            app.meta
                .edit_comment(&name, T::KIND, number, &id, CommentPatch { version, body })
        }
        None => app
            .meta
            .delete_comment(&name, T::KIND, number, &id, version),
    })
    .await
}
