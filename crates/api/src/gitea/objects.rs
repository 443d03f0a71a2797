//! Gitea's API objects (its OpenAPI document's `User`, `Repository`,
//! `Issue`, `Comment`, `PullRequest`, `Label`, `Branch`), built from
//! vole's documents: every property the document lists is present, with
//! its type, or `null` where Gitea answers null (an absent milestone, an
//! open issue's `closed_at`). What vole has no notion of (stars, forks,
//! milestones, assignees, avatars) is there empty, as in a Gitea that
//! never used it.

use serde::Serialize;
use serde_json::Value;

use vole_meta::entity::{Change, ChangeState, Comment, Issue, IssueState, Label, User};

/// Where the server is as its clients reach it (`scheme://host[:port]`,
/// no trailing slash): links in objects are absolute, as Gitea's are.
#[derive(Debug, Clone)]
pub struct Base(pub String);

impl Base {
    pub fn api(&self, path: &str) -> String {
        format!("{}/api/v1/{path}", self.0)
    }
    pub fn html(&self, path: &str) -> String {
        format!("{}/{path}", self.0)
    }
}

/// A stored time (RFC 3339, UTC, to the millisecond) as Gitea writes one:
/// whole seconds with an offset. Empty stays empty.
pub fn time(stored: &str) -> String {
    if stored.len() < 19 {
        return stored.to_string();
    }
    format!("{}+00:00", &stored[..19])
}

/// The same, `null` when there is none.
pub fn time_or_null(stored: Option<&str>) -> Value {
    match stored {
        Some(t) if !t.is_empty() => Value::String(time(t)),
        _ => Value::Null,
    }
}

/// Gitea's time zero, which it writes where a time was never set.
pub const TIME_ZERO: &str = "0001-01-01T00:00:00+00:00";

/// Gitea's `User`.
#[derive(Debug, Clone, Serialize)]
pub struct GiteaUser {
    pub id: i64,
    pub login: String,
    pub login_name: String,
    pub source_id: i64,
    pub full_name: String,
    /// Shown to the user themself and server admins; empty to others.
    pub email: String,
    pub avatar_url: String,
    pub html_url: String,
    pub language: String,
    pub is_admin: bool,
    pub last_login: String,
    pub created: String,
    pub restricted: bool,
    pub active: bool,
    pub prohibit_login: bool,
    pub location: String,
    pub website: String,
    pub description: String,
    pub visibility: String,
    pub followers_count: u64,
    pub following_count: u64,
    pub starred_repos_count: u64,
    /// The login again, as Gitea still answers it.
    pub username: String,
}

/// A [`GiteaUser`] written once: a page of issues by one author carries
/// the same object on each, copied, not written again.
pub type UserJson = Box<serde_json::value::RawValue>;

/// The id Gitea gives a user it no longer knows (its "Ghost").
pub const GHOST_ID: i64 = -1;

impl GiteaUser {
    /// `user` as a viewer sees it: the email, whether they are an admin
    /// and whether they may sign in only when `private` (the user
    /// themself, a server admin), as Gitea shows them.
    pub fn of(base: &Base, user: &User, private: bool) -> GiteaUser {
        let sees_email = private;
        GiteaUser {
            id: user.serial as i64,
            login: user.name.clone(),
            login_name: String::new(),
            source_id: 0,
            full_name: user.full_name.clone(),
            email: if sees_email {
                user.email.clone()
            } else {
                String::new()
            },
            avatar_url: String::new(),
            html_url: base.html(&user.name),
            language: String::new(),
            is_admin: private && user.admin,
            last_login: TIME_ZERO.into(),
            created: time(&user.created_at),
            restricted: false,
            // Whether an account is disabled is the user's and the
            // admins' to see, as Gitea shows it.
            active: !(private && user.disabled),
            prohibit_login: private && user.disabled,
            location: String::new(),
            website: String::new(),
            description: String::new(),
            visibility: "public".into(),
            followers_count: 0,
            following_count: 0,
            starred_repos_count: 0,
            username: user.name.clone(),
        }
    }

    /// A name no user holds (an owner namespace that is no user, or a
    /// user since removed): Gitea's ghost shape, with the name.
    pub fn unknown(base: &Base, name: &str) -> GiteaUser {
        GiteaUser {
            id: GHOST_ID,
            login: name.to_string(),
            login_name: String::new(),
            source_id: 0,
            full_name: String::new(),
            email: String::new(),
            avatar_url: String::new(),
            html_url: base.html(name),
            language: String::new(),
            is_admin: false,
            last_login: TIME_ZERO.into(),
            created: TIME_ZERO.into(),
            restricted: false,
            active: false,
            prohibit_login: false,
            location: String::new(),
            website: String::new(),
            description: String::new(),
            visibility: "public".into(),
            followers_count: 0,
            following_count: 0,
            starred_repos_count: 0,
            username: name.to_string(),
        }
    }
}

/// Gitea's `Permission`: what the caller may do in a repo.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Permission {
    pub admin: bool,
    pub push: bool,
    pub pull: bool,
}

/// Gitea's `InternalTracker` (vole's issue tracker is always on).
#[derive(Debug, Clone, Serialize)]
pub struct InternalTracker {
    pub enable_time_tracker: bool,
    pub allow_only_contributors_to_track_time: bool,
    pub enable_issue_dependencies: bool,
}

/// Gitea's `Repository`.
#[derive(Debug, Clone, Serialize)]
pub struct GiteaRepo {
    pub id: u64,
    pub owner: GiteaUser,
    pub name: String,
    pub full_name: String,
    pub description: String,
    pub empty: bool,
    pub private: bool,
    pub fork: bool,
    pub template: bool,
    pub parent: Option<Box<GiteaRepo>>,
    pub mirror: bool,
    pub size: u64,
    pub language: String,
    pub languages_url: String,
    pub html_url: String,
    pub url: String,
    pub link: String,
    pub ssh_url: String,
    pub clone_url: String,
    pub original_url: String,
    pub website: String,
    pub stars_count: u64,
    pub forks_count: u64,
    pub watchers_count: u64,
    pub open_issues_count: u64,
    pub open_pr_counter: u64,
    pub release_counter: u64,
    pub default_branch: String,
    pub archived: bool,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: String,
    pub permissions: Permission,
    pub has_issues: bool,
    pub internal_tracker: InternalTracker,
    pub external_tracker: Option<Value>,
    pub has_wiki: bool,
    pub external_wiki: Option<Value>,
    pub has_pull_requests: bool,
    pub has_projects: bool,
    pub projects_mode: String,
    pub has_releases: bool,
    pub has_packages: bool,
    pub has_actions: bool,
    pub ignore_whitespace_conflicts: bool,
    pub allow_merge_commits: bool,
    pub allow_rebase: bool,
    pub allow_rebase_explicit: bool,
    pub allow_squash_merge: bool,
    pub allow_fast_forward_only_merge: bool,
    pub allow_rebase_update: bool,
    pub default_delete_branch_after_merge: bool,
    pub default_merge_style: String,
    pub default_allow_maintainer_edit: bool,
    pub avatar_url: String,
    pub internal: bool,
    pub mirror_interval: String,
    pub object_format_name: String,
    pub mirror_updated: String,
    pub repo_transfer: Option<Value>,
}

/// Gitea's `RepositoryMeta`, which an issue carries.
#[derive(Debug, Clone, Serialize)]
pub struct RepoMeta {
    pub id: u64,
    pub name: String,
    pub owner: String,
    pub full_name: String,
}

/// Gitea's `Label`.
#[derive(Debug, Clone, Serialize)]
pub struct GiteaLabel {
    pub id: u64,
    pub name: String,
    pub exclusive: bool,
    pub is_archived: bool,
    /// Six hex digits, without `#`, as Gitea answers.
    pub color: String,
    pub description: String,
    pub url: String,
}

impl GiteaLabel {
    pub fn of(base: &Base, repo: &str, label: &Label) -> GiteaLabel {
        GiteaLabel {
            id: label.serial,
            name: label.name.clone(),
            // Gitea's scoped labels (`scope/name`, one of a scope): vole's
            // labels are never exclusive.
            exclusive: false,
            is_archived: false,
            color: label.color.clone(),
            description: label.description.clone(),
            url: base.api(&format!("repos/{repo}/labels/{}", label.serial)),
        }
    }
}

/// Gitea's `PullRequestMeta`, which a pull request's issue carries.
#[derive(Debug, Clone, Serialize)]
pub struct PullRequestMeta {
    pub merged: bool,
    pub merged_at: Value,
    pub draft: bool,
    pub html_url: String,
}

/// Gitea's `Issue`.
#[derive(Debug, Clone, Serialize)]
pub struct GiteaIssue {
    pub id: u64,
    pub url: String,
    pub html_url: String,
    pub number: u64,
    pub user: UserJson,
    pub original_author: String,
    pub original_author_id: u64,
    pub title: String,
    pub body: String,
    #[serde(rename = "ref")]
    pub ref_name: String,
    pub assets: Vec<Value>,
    pub labels: Vec<GiteaLabel>,
    pub milestone: Option<Value>,
    pub assignee: Option<GiteaUser>,
    pub assignees: Vec<GiteaUser>,
    /// `open` or `closed`.
    pub state: &'static str,
    pub is_locked: bool,
    /// How many comments it has.
    pub comments: u64,
    pub created_at: String,
    pub updated_at: String,
    pub closed_at: Value,
    pub due_date: Value,
    pub pull_request: Option<PullRequestMeta>,
    pub repository: RepoMeta,
    pub pin_order: u64,
    /// vole's: the document's version, which an edit may name to be
    /// refused (409) if another edit came first.
    pub version: u64,
}

/// What a thread's object needs besides its document.
pub struct ThreadContext<'a> {
    pub base: &'a Base,
    pub repo: &'a RepoMeta,
    pub user: UserJson,
    pub labels: Vec<GiteaLabel>,
    pub comments: u64,
}

impl GiteaIssue {
    pub fn of_issue(cx: ThreadContext<'_>, issue: &Issue) -> GiteaIssue {
        let closed = issue.state == IssueState::Closed;
        GiteaIssue {
            id: issue.serial,
            url: cx.base.api(&format!(
                "repos/{}/issues/{}",
                cx.repo.full_name, issue.number
            )),
            html_url: cx
                .base
                .html(&format!("{}/-/issues/{}", cx.repo.full_name, issue.number)),
            number: issue.number,
            user: cx.user,
            original_author: String::new(),
            original_author_id: 0,
            title: issue.title.clone(),
            body: issue.body.clone(),
            ref_name: String::new(),
            assets: Vec::new(),
            labels: cx.labels,
            milestone: None,
            assignee: None,
            assignees: Vec::new(),
            state: if closed { "closed" } else { "open" },
            is_locked: false,
            comments: cx.comments,
            created_at: time(&issue.created_at),
            updated_at: time(&issue.updated_at),
            // vole keeps no close time: the last edit of a closed one.
            closed_at: if closed {
                Value::String(time(&issue.updated_at))
            } else {
                Value::Null
            },
            due_date: Value::Null,
            pull_request: None,
            repository: cx.repo.clone(),
            pin_order: 0,
            version: issue.version,
        }
    }

    /// A pull request as Gitea's issue list shows it.
    pub fn of_change(cx: ThreadContext<'_>, change: &Change) -> GiteaIssue {
        let state = change_state(change);
        let html_url = cx
            .base
            .html(&format!("{}/-/pulls/{}", cx.repo.full_name, change.number));
        GiteaIssue {
            id: change.serial,
            url: cx.base.api(&format!(
                "repos/{}/issues/{}",
                cx.repo.full_name, change.number
            )),
            html_url: html_url.clone(),
            number: change.number,
            user: cx.user,
            original_author: String::new(),
            original_author_id: 0,
            title: change.title.clone(),
            body: change.body.clone(),
            ref_name: String::new(),
            assets: Vec::new(),
            labels: cx.labels,
            milestone: None,
            assignee: None,
            assignees: Vec::new(),
            state,
            is_locked: false,
            comments: cx.comments,
            created_at: time(&change.created_at),
            updated_at: time(&change.updated_at),
            closed_at: closed_at(change),
            due_date: Value::Null,
            pull_request: Some(PullRequestMeta {
                merged: change.state == ChangeState::Merged,
                merged_at: time_or_null(change.merged_at.as_deref()),
                draft: false,
                html_url,
            }),
            repository: cx.repo.clone(),
            pin_order: 0,
            version: change.version,
        }
    }
}

/// A change request's state as Gitea says it: merged is closed.
pub fn change_state(change: &Change) -> &'static str {
    match change.state {
        ChangeState::Open => "open",
        ChangeState::Merged | ChangeState::Closed => "closed",
    }
}

pub(crate) fn closed_at(change: &Change) -> Value {
    match change.state {
        ChangeState::Open => Value::Null,
        ChangeState::Merged => time_or_null(
            change
                .merged_at
                .as_deref()
                .or(Some(change.updated_at.as_str())),
        ),
        ChangeState::Closed => Value::String(time(&change.updated_at)),
    }
}

/// Gitea's `Comment`.
#[derive(Debug, Clone, Serialize)]
pub struct GiteaComment {
    pub id: u64,
    pub html_url: String,
    pub pull_request_url: String,
    pub issue_url: String,
    pub user: GiteaUser,
    pub original_author: String,
    pub original_author_id: u64,
    pub body: String,
    pub assets: Vec<Value>,
    pub created_at: String,
    pub updated_at: String,
    /// vole's: the comment's version (see [`GiteaIssue::version`]).
    pub version: u64,
}

impl GiteaComment {
    /// `comment` on thread `number` of `repo` (`pull`: a pull request's).
    pub fn of(
        base: &Base,
        repo: &str,
        (number, pull): (u64, bool),
        user: GiteaUser,
        comment: &Comment,
    ) -> GiteaComment {
        let thread = if pull { "pulls" } else { "issues" };
        let thread_html = base.html(&format!("{repo}/-/{thread}/{number}"));
        GiteaComment {
            id: comment.serial,
            html_url: format!("{thread_html}#comment-{}", comment.id),
            pull_request_url: if pull {
                thread_html.clone()
            } else {
                String::new()
            },
            issue_url: if pull { String::new() } else { thread_html },
            user,
            original_author: String::new(),
            original_author_id: 0,
            body: comment.body.clone(),
            assets: Vec::new(),
            created_at: time(&comment.created_at),
            updated_at: time(&comment.updated_at),
            version: comment.version,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_whole_seconds_with_an_offset() {
        assert_eq!(
            time("2026-12-04T16:37:45.123Z"),
            "2026-12-04T16:37:45+00:00"
        );
        assert_eq!(time(""), "");
        assert_eq!(time_or_null(None), Value::Null);
    }
}
