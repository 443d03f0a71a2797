//! `/{owner}/{repo}/-/issues/{n}`: an issue with its comments in order,
//! their text rendered by [`crate::markdown`], and its forms: comment,
//! close and reopen (with or without a comment), edit title and body,
//! labels; `/-/issues/{n}/comments/{id}`: edit or delete a comment.
//!
//! Every write goes through the API's own path (`vole_api::threads`:
//! quotas, the rules in `access`), so a button the page leaves out (a
//! reader's close, a non-author's comment edit) is a 403 when its form is
//! forged. `?edit=issue` and `?edit=<comment id>` show that text as a
//! form, so that editing needs no JavaScript.

use std::collections::HashMap;

use axum::extract::Request;
use serde::Deserialize;
use vole_access::{Principal, ResolvedRepo};
use vole_api::threads::Thread;
use vole_http::repo_access::WriteMeta;
use vole_meta::entity::{ChangeState, Comment, Issue, IssueState, ThreadKind};
use vole_meta::{ChangePatch, IssuePatch, NewComment};

use super::*;
use crate::forms::checked_form;
use crate::issues::{split_labels, tabs_rev};
use crate::markdown::{Links, references};
use crate::sign_in::{see_other, to_sign_in, viewer};

/// Comments a page of a thread shows.
pub(crate) const COMMENTS_PER_PAGE: u32 = 200;

/// Most bytes of comment text one page renders (past it, the next
/// comment starts the next page): 200 comments of the largest body the
/// store takes would be 50 MiB to render on every view.
const COMMENT_PAGE_BYTES: usize = 512 * 1024;

pub(crate) struct CommentView {
    pub id: String,
    pub author: String,
    pub created_at: String,
    pub edited: bool,
    pub html: String,
    pub body: String,
    pub version: u64,
    pub may_edit: bool,
    pub editing: bool,
    /// A timeline entry the server recorded (a push), not a comment.
    pub event: bool,
}

/// A thread's text and comments, rendered, with the viewer's rights.
pub(crate) struct Timeline {
    pub body_html: String,
    pub comments: Vec<CommentView>,
    /// The page shown (a comment's edit link keeps it).
    pub page: usize,
    pub prev_page: Option<usize>,
    pub next_page: Option<usize>,
}

/// Renders `body` and a page of the thread's comments, each `#N` linked
/// (one store read for every number the page names).
pub(crate) async fn timeline(
    app: &WebState,
    name: &ResolvedRepo,
    (kind, number): (ThreadKind, u64),
    body: &str,
    editing: Option<&str>,
    page: Pagination,
) -> Result<Timeline, AppError> {
    let repo = name.clone();
    let found = crate::meta_read(app, move |meta| {
        meta.comment_page(
            &repo,
            (kind, number),
            page.page(),
            (page.per_page(), COMMENT_PAGE_BYTES),
        )
    })
    .await?;
    let numbers =
        references(std::iter::once(body).chain(found.items.iter().map(|c| c.body.as_str())));
    let kinds = if numbers.is_empty() {
        HashMap::new()
    } else {
        app.api.meta.thread_kinds(name, &numbers)?
    };
    let repo = name.to_string();
    // The Markdown off the async workers: a page renders up to its body
    // and 512 KiB of comments.
    let texts: Vec<String> = std::iter::once(body.to_string())
        .chain(found.items.iter().map(|c| c.body.clone()))
        .collect();
    let repo_name = repo.clone();
    let mut rendered = vole_http::spawn_blocking(move || {
        let links = Links {
            repo: &repo_name,
            kinds: &kinds,
        };
        texts
            .iter()
            .map(|text| crate::markdown::render(text, &links))
            .collect::<Vec<String>>()
    })
    .await
    .map_err(|e| AppError::internal("rendering a thread failed", e))?
    .into_iter();
    let body_html = rendered.next().unwrap_or_default();
    let viewer = viewer();
    // The comment rule asked once a page, not once a comment: the
    // viewer's own comments, and everyone's when they may moderate (no
    // user is named "", so that asks for the moderator's right alone).
    let may_write = viewer.may_comment(&repo);
    let moderates = viewer.may_edit_comment(&repo, "");
    let own = |author: &str| {
        viewer
            .user
            .as_deref()
            .is_some_and(|user| user.eq_ignore_ascii_case(author))
    };
    let comments = found
        .items
        .into_iter()
        .zip(rendered)
        .map(|(c, html): (Comment, String)| CommentView {
            html,
            may_edit: c.event.is_none() && may_write && (moderates || own(&c.author)),
            event: c.event.is_some(),
            editing: editing == Some(c.id.as_str()),
            edited: c.version > 1,
            id: c.id,
            author: c.author,
            created_at: c.created_at,
            body: c.body,
            version: c.version,
        })
        .collect();
    Ok(Timeline {
        body_html,
        comments,
        page: page.page(),
        prev_page: page.prev(),
        next_page: page.next().filter(|&next| next <= found.pages),
    })
}

#[derive(Template)]
#[template(path = "issue.html")]
struct IssuePage {
    repo: String,
    rev: String,
    csrf: String,
    issue: Issue,
    open: bool,
    timeline: Timeline,
    may_edit: bool,
    may_label: bool,
    may_comment: bool,
    editing_issue: bool,
    labels: String,
    error: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    #[serde(default)]
    edit: String,
}

impl PageQuery {
    /// What `?edit=` asks to edit (`issue`/`pull`, or a comment's id).
    pub(crate) fn edit(&self) -> &str {
        &self.edit
    }
}

fn issue_path(name: &ResolvedRepo, number: u64) -> String {
    format!("/{name}/-/issues/{number}")
}

fn issue_number(text: &str) -> Result<u64, AppError> {
    text.parse::<u64>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| AppError::not_found("There is no such issue."))
}

async fn issue_page(
    app: &WebState,
    name: &ResolvedRepo,
    number: u64,
    (edit, page): (&str, Pagination),
    error: Option<AppError>,
) -> Result<Response, AppError> {
    let repo = name.clone();
    let issue = crate::meta_read(app, move |meta| meta.issue(&repo, number)).await?;
    let timeline = timeline(
        app,
        name,
        (ThreadKind::Issue, number),
        &issue.body,
        Some(edit),
        page,
    )
    .await?;
    let viewer = viewer();
    let repo = name.to_string();
    let status = error.as_ref().map_or(StatusCode::OK, AppError::status);
    let mut response = render(IssuePage {
        rev: tabs_rev(app, name),
        csrf: viewer.csrf.clone(),
        open: issue.state == IssueState::Open,
        may_edit: viewer.may_edit(&repo, &issue.author),
        may_label: viewer.may_label(&repo),
        may_comment: viewer.may_comment(&repo),
        editing_issue: edit == "issue",
        labels: issue.labels.join(", "),
        repo,
        issue,
        timeline,
        error: error.map(|e| e.message().to_string()),
    })?;
    *response.status_mut() = status;
    Ok(response)
}

/// `GET /{owner}/{repo}/-/issues/{n}?page=&edit=`.
pub async fn issue(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Path((_, _, number)): Path<(String, String, String)>,
    Query(query): Query<PageQuery>,
    WebPage(page): WebPage<COMMENTS_PER_PAGE>,
) -> Result<Response, AppError> {
    let number = issue_number(&number)?;
    issue_page(&app, &name, number, (&query.edit, page), None).await
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ThreadForm {
    #[serde(default)]
    pub(crate) csrf: String,
    /// comment, close, reopen, edit, labels.
    #[serde(default)]
    action: String,
    #[serde(default)]
    body: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    labels: String,
    #[serde(default)]
    version: u64,
}

/// An edit a thread's forms make, for either kind.
pub(crate) trait FormPatch: Sized {
    fn versioned(version: u64) -> Self;
    fn state(self, open: bool) -> Self;
    fn text(self, title: String, body: String) -> Self;
    fn labels(self, labels: Vec<String>) -> Self;
}

/// Both kinds' patches have the same optional fields; only the states'
/// types differ.
macro_rules! form_patch {
    ($patch:ty, $state:ident) => {
        impl FormPatch for $patch {
            fn versioned(version: u64) -> Self {
                Self {
                    version: Some(version),
                    ..Self::default()
                }
            }
            fn state(mut self, open: bool) -> Self {
                self.state = Some(if open { $state::Open } else { $state::Closed });
                self
            }
            fn text(mut self, title: String, body: String) -> Self {
                (self.title, self.body) = (Some(title), Some(body));
                self
            }
            fn labels(mut self, labels: Vec<String>) -> Self {
                self.labels = Some(labels);
                self
            }
        }
    };
}

form_patch!(IssuePatch, IssueState);
form_patch!(ChangePatch, ChangeState);

/// What a thread form asks, done through the API's path.
pub(crate) async fn act_on<T: Thread>(
    app: &WebState,
    principal: &Principal,
    name: &ResolvedRepo,
    number: u64,
    form: ThreadForm,
) -> Result<(), AppError>
where
    T::Patch: FormPatch,
{
    use vole_api::threads::{comment_on, edit_thread};
    let api = &app.api;
    let comment =
        |body: String| comment_on::<T>(api, principal, name.clone(), number, NewComment { body });
    let current = || T::get(&api.meta, name, number).map(|t| t.version());
    let edit = |patch: T::Patch| edit_thread::<T>(api, principal, name.clone(), number, patch);
    match form.action.as_str() {
        "comment" => comment(form.body).await.map(drop),
        "close" | "reopen" => {
            // The state first, then the comment sent with the button: a
            // refused close (not the viewer's to close, or a merged pull
            // request) writes nothing.
            let patch = T::Patch::versioned(current()?).state(form.action == "reopen");
            edit(patch).await?;
            if !form.body.trim().is_empty() {
                comment(form.body).await?;
            }
            Ok(())
        }
        "edit" => {
            let patch =
                T::Patch::versioned(form.version).text(form.title.trim().to_string(), form.body);
            edit(patch).await.map(drop)
        }
        "labels" => {
            let patch = T::Patch::versioned(current()?).labels(split_labels(&form.labels));
            edit(patch).await.map(drop)
        }
        other => Err(AppError::bad_request(format!(
            "{other:?} is not something this form does (comment, close, reopen, edit, labels)"
        ))),
    }
}

/// `POST /{owner}/{repo}/-/issues/{n}`: one of the page's forms.
pub async fn post_issue(
    State(app): State<Arc<WebState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<WriteMeta>,
    Path((_, _, number)): Path<(String, String, String)>,
    request: Request,
) -> Result<Response, AppError> {
    let number = issue_number(&number)?;
    let Some((_, _, form)) = checked_form::<ThreadForm>(&app, request, |f| &f.csrf).await? else {
        return Ok(to_sign_in(&issue_path(&name, number)));
    };
    match act_on::<Issue>(&app, &principal, &name, number, form).await {
        Ok(()) => Ok(see_other(&issue_path(&name, number), &[])),
        Err(refused) if refused.status().is_client_error() => {
            let page = Pagination::first(COMMENTS_PER_PAGE);
            issue_page(&app, &name, number, ("", page), Some(refused)).await
        }
        Err(refused) => Err(refused),
    }
}

#[derive(Debug, Default, Deserialize)]
struct CommentForm {
    #[serde(default)]
    csrf: String,
    /// edit, delete.
    #[serde(default)]
    action: String,
    #[serde(default)]
    body: String,
    #[serde(default)]
    version: u64,
}

/// `POST /{owner}/{repo}/-/{issues,pulls}/{n}/comments/{id}`: a comment
/// edited or deleted, by its author or an admin of the repo.
pub async fn post_comment(
    State(app): State<Arc<WebState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<WriteMeta>,
    Path((_, _, number, id)): Path<(String, String, String, String)>,
    request: Request,
) -> Result<Response, AppError> {
    let number = issue_number(&number)?;
    let kind = app
        .api
        .meta
        .thread_kinds(&name, &[number])?
        .remove(&number)
        .ok_or_else(|| AppError::not_found("There is no such issue or pull request."))?;
    let back = format!("/{name}/-/{}/{number}", crate::issues::noun_of(kind));
    let Some((_, _, form)) = checked_form::<CommentForm>(&app, request, |f| &f.csrf).await? else {
        return Ok(to_sign_in(&back));
    };
    let body = match form.action.as_str() {
        "edit" => Some(form.body),
        "delete" => None,
        other => {
            return Err(AppError::bad_request(format!(
                "{other:?} is not something a comment's form does (edit, delete)"
            )));
        }
    };
    let version = form.version.max(1);
    let done = match kind {
        ThreadKind::Issue => {
            vole_api::threads::rewrite_comment::<Issue>(
                &app.api,
                &principal,
                name.clone(),
                (number, id),
                version,
                body,
            )
            .await
        }
        ThreadKind::Change => {
            vole_api::threads::rewrite_comment::<vole_meta::entity::Change>(
                &app.api,
                &principal,
                name.clone(),
                (number, id),
                version,
                body,
            )
            .await
        }
    };
    match done {
        Ok(_) => Ok(see_other(&back, &[])),
        Err(refused) if refused.status().is_client_error() && kind == ThreadKind::Issue => {
            let page = Pagination::first(COMMENTS_PER_PAGE);
            issue_page(&app, &name, number, ("", page), Some(refused)).await
        }
        Err(refused) => Err(refused),
    }
}
