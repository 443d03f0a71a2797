//! The lists of a repo's issues (`/{owner}/{repo}/-/issues`) and pull
//! requests (`/-/pulls`): tabs by state with their counts, filters by
//! label and author, a page at a time; and the new-issue form
//! (`/-/issues/new`), written through the API's own path
//! (`vole_api::threads::create_thread`: quotas, `access`, labels for
//! writers only).

use axum::extract::Request;
use serde::Deserialize;
use vole_access::ResolvedRepo;
use vole_http::repo_access::WriteMeta;
use vole_meta::entity::{Change, ChangeState, Issue, IssueState, ThreadKind};
use vole_meta::{Filter, NewIssue};

use super::*;
use crate::forms::{checked_form, session_user};
use crate::sign_in::{see_other, to_sign_in};

/// Issues or pull requests a page.
const THREADS_PER_PAGE: u32 = 50;

pub(crate) struct ThreadRow {
    pub number: u64,
    pub title: String,
    pub author: String,
    pub labels: Vec<String>,
    pub created_at: String,
    /// What the row's state does not say (a merge with no commit).
    pub note: Option<&'static str>,
}

/// A state tab: its name in the query, as shown, its count, whether shown.
pub(crate) struct StateTab {
    pub state: &'static str,
    pub named: &'static str,
    pub count: usize,
    pub current: bool,
}

#[derive(Template)]
#[template(path = "threads.html")]
struct ThreadsPage {
    repo: String,
    rev: String,
    /// `issues` or `pulls`.
    noun: &'static str,
    heading: &'static str,
    tabs: Vec<StateTab>,
    label: String,
    author: String,
    /// The filters as a query (`&label=..&author=..`), for the tabs and
    /// pager.
    filters: String,
    state: &'static str,
    rows: Vec<ThreadRow>,
    prev_page: Option<usize>,
    next_page: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    state: String,
    #[serde(default)]
    label: String,
    #[serde(default)]
    author: String,
}

/// The repo's default branch, which the tabs' links follow.
pub(crate) fn tabs_rev(app: &WebState, name: &ResolvedRepo) -> String {
    vole_git::repos::head_branch(&app.repos.path(name))
        .unwrap_or_else(|| app.config.default_branch.clone())
}

fn filters_query(query: &ListQuery) -> String {
    let mut out = String::new();
    for (key, value) in [("label", &query.label), ("author", &query.author)] {
        if !value.is_empty() {
            out.push_str(&format!(
                "&{key}={}",
                percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
            ));
        }
    }
    out
}

fn some_text(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// `GET /{owner}/{repo}/-/issues?state=open|closed&label=&author=&page=`.
pub async fn issues(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Query(query): Query<ListQuery>,
    WebPage(page): WebPage<THREADS_PER_PAGE>,
) -> Result<Response, AppError> {
    let state = if query.state == "closed" {
        IssueState::Closed
    } else {
        IssueState::Open
    };
    let mut filter = Filter::<IssueState> {
        state: None,
        label: some_text(&query.label),
        author: some_text(&query.author),
    };
    let counts = app.api.meta.issue_counts(&name, &filter)?;
    filter.state = Some(state);
    let (repo, listed) = (name.clone(), filter.clone());
    let found =
        crate::meta_read(&app, move |meta| meta.list_issue_rows(&repo, &listed, page)).await?;
    let tabs = [
        (IssueState::Open, "open", "Open"),
        (IssueState::Closed, "closed", "Closed"),
    ]
    .into_iter()
    .map(|(s, key, named)| StateTab {
        state: key,
        named,
        count: counts.of(s),
        current: s == state,
    })
    .collect();
    let rows = found.items.into_iter().map(issue_row).collect();
    list_page(&app, &name, "issues", tabs, &query, rows, page, found.total)
}

/// `GET /{owner}/{repo}/-/pulls?state=open|merged|closed&author=&page=`.
pub async fn pulls(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<Read>,
    Query(query): Query<ListQuery>,
    WebPage(page): WebPage<THREADS_PER_PAGE>,
) -> Result<Response, AppError> {
    let state = match query.state.as_str() {
        "merged" => ChangeState::Merged,
        "closed" => ChangeState::Closed,
        _ => ChangeState::Open,
    };
    let mut filter = Filter::<ChangeState> {
        state: None,
        label: some_text(&query.label),
        author: some_text(&query.author),
    };
    let counts = app.api.meta.change_counts(&name, &filter)?;
    filter.state = Some(state);
    let (repo, listed) = (name.clone(), filter.clone());
    let found = crate::meta_read(&app, move |meta| {
        meta.list_change_rows(&repo, &listed, page)
    })
    .await?;
    let tabs = [
        (ChangeState::Open, "open", "Open"),
        (ChangeState::Merged, "merged", "Merged"),
        (ChangeState::Closed, "closed", "Closed"),
    ]
    .into_iter()
    .map(|(s, key, named)| StateTab {
        state: key,
        named,
        count: counts.of(s),
        current: s == state,
    })
    .collect();
    let rows = found.items.into_iter().map(change_row).collect();
    list_page(&app, &name, "pulls", tabs, &query, rows, page, found.total)
}

fn issue_row(issue: Issue) -> ThreadRow {
    ThreadRow {
        number: issue.number,
        title: issue.title,
        author: issue.author,
        labels: issue.labels,
        created_at: issue.created_at,
        note: None,
    }
}

fn change_row(change: Change) -> ThreadRow {
    ThreadRow {
        number: change.number,
        title: change.title,
        author: change.author,
        note: (change.state == ChangeState::Merged && change.merge_commit.is_none())
            .then_some("merged (no merge commit recorded)"),
        labels: change.labels,
        created_at: change.created_at,
    }
}

#[allow(clippy::too_many_arguments)]
fn list_page(
    app: &WebState,
    name: &ResolvedRepo,
    noun: &'static str,
    tabs: Vec<StateTab>,
    query: &ListQuery,
    rows: Vec<ThreadRow>,
    page: Pagination,
    total: usize,
) -> Result<Response, AppError> {
    let state = tabs.iter().find(|t| t.current).map_or("open", |t| t.state);
    render(ThreadsPage {
        repo: name.to_string(),
        rev: tabs_rev(app, name),
        noun,
        heading: if noun == "issues" {
            "Issues"
        } else {
            "Pull requests"
        },
        tabs,
        label: query.label.clone(),
        author: query.author.clone(),
        filters: filters_query(query),
        state,
        rows,
        prev_page: page.prev(),
        next_page: page.next().filter(|&next| next <= page.last(total)),
    })
}

#[derive(Template)]
#[template(path = "new_issue.html")]
struct NewIssuePage {
    repo: String,
    rev: String,
    csrf: String,
    title: String,
    body: String,
    labels: String,
    may_label: bool,
    error: Option<String>,
}

fn new_issue_page(
    app: &WebState,
    name: &ResolvedRepo,
    csrf: String,
    form: Option<NewIssueForm>,
    error: Option<AppError>,
) -> Result<Response, AppError> {
    let form = form.unwrap_or_default();
    let status = error.as_ref().map_or(StatusCode::OK, AppError::status);
    let repo = name.to_string();
    let mut response = render(NewIssuePage {
        may_label: crate::sign_in::viewer().may_label(&repo),
        repo,
        rev: tabs_rev(app, name),
        csrf,
        title: form.title,
        body: form.body,
        labels: form.labels,
        error: error.map(|e| e.message().to_string()),
    })?;
    *response.status_mut() = status;
    Ok(response)
}

/// `GET /{owner}/{repo}/-/issues/new`.
pub async fn new_issue(
    State(app): State<Arc<WebState>>,
    RepoAccess { repo: name, .. }: RepoAccess<WriteMeta>,
) -> Result<Response, AppError> {
    let Some((_, csrf)) = session_user() else {
        return Ok(to_sign_in(&format!("/{name}/-/issues/new")));
    };
    new_issue_page(&app, &name, csrf, None, None)
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct NewIssueForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    body: String,
    /// Labels, separated by commas.
    #[serde(default)]
    labels: String,
}

/// Labels typed into a form, separated by commas.
pub(crate) fn split_labels(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// `POST /{owner}/{repo}/-/issues/new`: files the issue, then to its page.
pub async fn create_issue(
    State(app): State<Arc<WebState>>,
    RepoAccess {
        repo: name,
        principal,
        ..
    }: RepoAccess<WriteMeta>,
    request: Request,
) -> Result<Response, AppError> {
    let Some((_, csrf, form)) = checked_form::<NewIssueForm>(&app, request, |f| &f.csrf).await?
    else {
        return Ok(to_sign_in(&format!("/{name}/-/issues/new")));
    };
    let new = NewIssue {
        title: form.title.trim().to_string(),
        body: form.body.clone(),
        labels: split_labels(&form.labels),
    };
    match vole_api::threads::create_thread::<Issue>(&app.api, &principal, name.clone(), new).await {
        Ok(issue) => Ok(see_other(
            &format!("/{name}/-/issues/{}", issue.number),
            &[],
        )),
        Err(refused) if refused.status().is_client_error() => {
            new_issue_page(&app, &name, csrf, Some(form), Some(refused))
        }
        Err(refused) => Err(refused),
    }
}

/// A thread's kind as the pages name it in URLs.
pub(crate) fn noun_of(kind: ThreadKind) -> &'static str {
    match kind {
        ThreadKind::Issue => "issues",
        ThreadKind::Change => "pulls",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_marked_merged_without_its_commit_says_so_in_the_list() {
        // A document from before merges recorded their commit.
        let legacy: Change = serde_json::from_value(serde_json::json!({
            "v": 1, "id": "c1", "number": 3, "title": "t", "body": "", "author": "bob",
            "state": "merged", "source_branch": "a", "target_branch": "main",
            "version": 2, "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
        assert_eq!(
            change_row(legacy.clone()).note,
            Some("merged (no merge commit recorded)")
        );
        let merged = Change {
            merge_commit: Some("a".repeat(40)),
            ..legacy
        };
        assert_eq!(change_row(merged).note, None, "a real merge has no note");
    }
}
