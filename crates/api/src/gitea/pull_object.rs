//! Gitea's `PullRequest` and `PRBranchInfo`, built from a change request
//! and where its branches are.

use serde::Serialize;
use serde_json::Value;

use super::objects::{
    GiteaLabel, GiteaRepo, GiteaUser, ThreadContext, change_state, closed_at, time, time_or_null,
};
use vole_meta::entity::{Change, ChangeState};

/// Gitea's `PRBranchInfo`: one side of a pull request.
#[derive(Debug, Clone, Serialize)]
pub struct BranchInfo {
    pub label: String,
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// The branch's commit now (empty: the branch is gone).
    pub sha: String,
    pub repo_id: u64,
    pub repo: GiteaRepo,
}

/// Gitea's `PullRequest`.
#[derive(Debug, Clone, Serialize)]
pub struct GiteaPull {
    pub id: u64,
    pub url: String,
    pub number: u64,
    pub user: super::objects::UserJson,
    pub title: String,
    pub body: String,
    pub labels: Vec<GiteaLabel>,
    pub milestone: Option<Value>,
    pub assignee: Option<GiteaUser>,
    pub assignees: Vec<GiteaUser>,
    pub requested_reviewers: Vec<GiteaUser>,
    pub state: &'static str,
    pub draft: bool,
    pub is_locked: bool,
    pub comments: u64,
    pub review_comments: u64,
    /// Lines added and removed, files changed: computed for one pull
    /// request's answer; `null` in lists.
    pub additions: Option<u64>,
    pub deletions: Option<u64>,
    pub changed_files: Option<u64>,
    pub html_url: String,
    pub diff_url: String,
    pub patch_url: String,
    pub mergeable: bool,
    pub merged: bool,
    pub merged_at: Value,
    pub merge_commit_sha: Option<String>,
    pub merged_by: Option<GiteaUser>,
    pub allow_maintainer_edit: bool,
    pub base: BranchInfo,
    pub head: BranchInfo,
    pub merge_base: String,
    pub due_date: Value,
    pub created_at: String,
    pub updated_at: String,
    pub closed_at: Value,
    pub pin_order: u64,
    /// vole's: the document's version (see `GiteaIssue::version`).
    pub version: u64,
}

/// What a pull request's object needs besides its document.
pub struct PullContext<'a> {
    pub thread: ThreadContext<'a>,
    pub repo: GiteaRepo,
    /// Where the branches are now (`None`: a branch is gone).
    pub base_sha: Option<String>,
    pub head_sha: Option<String>,
    pub merge_base: Option<String>,
    pub mergeable: bool,
    pub merged_by: Option<GiteaUser>,
    /// Added, removed, files (when computed).
    pub stat: Option<(u64, u64, u64)>,
}

impl GiteaPull {
    pub fn of(cx: PullContext<'_>, change: &Change) -> GiteaPull {
        let full = &cx.thread.repo.full_name;
        let base = cx.thread.base;
        let html_url = base.html(&format!("{full}/-/pulls/{}", change.number));
        let merged = change.state == ChangeState::Merged;
        let side = |branch: &str, sha: Option<String>| BranchInfo {
            label: branch.to_string(),
            ref_name: branch.to_string(),
            sha: sha.unwrap_or_default(),
            repo_id: cx.repo.id,
            repo: cx.repo.clone(),
        };
        // A merged one: the sides as they were merged (where a merge
        // from before these were recorded left none, as they are now).
        let (base_sha, head_sha) = if merged {
            (
                change.merged_onto.clone().or(cx.base_sha.clone()),
                change.merged_head.clone().or(cx.head_sha.clone()),
            )
        } else {
            (cx.base_sha.clone(), cx.head_sha.clone())
        };
        GiteaPull {
            id: change.serial,
            url: base.api(&format!("repos/{full}/pulls/{}", change.number)),
            number: change.number,
            user: cx.thread.user,
            title: change.title.clone(),
            body: change.body.clone(),
            labels: cx.thread.labels,
            milestone: None,
            assignee: None,
            assignees: Vec::new(),
            requested_reviewers: Vec::new(),
            state: change_state(change),
            draft: false,
            is_locked: false,
            comments: cx.thread.comments,
            review_comments: 0,
            additions: cx.stat.map(|s| s.0),
            deletions: cx.stat.map(|s| s.1),
            changed_files: cx.stat.map(|s| s.2),
            html_url: html_url.clone(),
            diff_url: format!("{html_url}.diff"),
            patch_url: format!("{html_url}.patch"),
            mergeable: cx.mergeable,
            merged,
            merged_at: time_or_null(change.merged_at.as_deref()),
            merge_commit_sha: change.merge_commit.clone(),
            merged_by: cx.merged_by,
            allow_maintainer_edit: false,
            base: side(&change.target_branch, base_sha),
            head: side(&change.source_branch, head_sha),
            merge_base: cx.merge_base.unwrap_or_default(),
            due_date: Value::Null,
            created_at: time(&change.created_at),
            updated_at: time(&change.updated_at),
            closed_at: closed_at(change),
            pin_order: 0,
            version: change.version,
        }
    }
}
