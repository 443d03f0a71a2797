//! Builds Gitea's objects ([`super::objects`]) for one request: who is
//! asking (what they may see and do), where the server is, and one
//! look-up per user and per repo however many objects name them.
//! Blocking (reads the store and the repo's refs).

use std::cell::RefCell;
use std::collections::HashMap;

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;

use super::objects::UserJson;
use super::objects::{
    Base, GiteaComment, GiteaIssue, GiteaLabel, GiteaRepo, GiteaUser, InternalTracker, Permission,
    RepoMeta, TIME_ZERO, ThreadContext, time,
};
use super::pull_object::{GiteaPull, PullContext};
use crate::ApiState;
use vole_access::Principal;
use vole_git::repos::RepoName;
use vole_http::AppError;
use vole_meta::entity::{
    Change, ChangeState, Comment, Issue, Label, MergeMethod, Role, ThreadKind, User, Visibility,
};
use vole_meta::index::AnyThread;

impl<S: Send + Sync> FromRequestParts<S> for Base
where
    std::sync::Arc<ApiState>: axum::extract::FromRef<S>,
{
    type Rejection = AppError;

    /// The configured public URL, or the request's `Host` over http.
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Base, AppError> {
        let app: std::sync::Arc<ApiState> = axum::extract::FromRef::from_ref(state);
        if let Some(public) = &app.public_url {
            return Ok(Base(public.clone()));
        }
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .filter(|h| {
                !h.is_empty()
                    && h.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
            })
            .unwrap_or("localhost");
        Ok(Base(format!("http://{host}")))
    }
}

/// One request's object builder.
pub struct Shaper<'a> {
    pub app: &'a ApiState,
    pub base: Base,
    pub viewer: &'a Principal,
    users: RefCell<HashMap<String, GiteaUser>>,
    user_jsons: RefCell<HashMap<String, UserJson>>,
    user_versions: RefCell<HashMap<String, u64>>,
    labels_fingerprint: RefCell<Option<u64>>,
    repos: RefCell<HashMap<String, GiteaRepo>>,
    labels: RefCell<HashMap<String, Vec<Label>>>,
}

impl<'a> Shaper<'a> {
    pub fn new(app: &'a ApiState, base: Base, viewer: &'a Principal) -> Shaper<'a> {
        Shaper {
            app,
            base,
            viewer,
            users: RefCell::default(),
            user_jsons: RefCell::default(),
            user_versions: RefCell::default(),
            labels_fingerprint: RefCell::default(),
            repos: RefCell::default(),
            labels: RefCell::default(),
        }
    }

    /// Whether the viewer sees `user`'s email: their own, or a server
    /// admin's view.
    pub(crate) fn sees_email(&self, user: &str) -> bool {
        self.viewer.identity().is_some_and(|id| {
            id.user.eq_ignore_ascii_case(user) || (id.admin && self.viewer.is_server_admin())
        })
    }

    pub fn user_of(&self, user: &User) -> GiteaUser {
        GiteaUser::of(&self.base, user, self.sees_email(&user.name))
    }

    /// The user named `name`, or the ghost shape with the name.
    pub fn user(&self, name: &str) -> GiteaUser {
        let key = name.to_ascii_lowercase();
        if let Some(user) = self.users.borrow().get(&key) {
            return user.clone();
        }
        let user = match self.app.meta.user(name) {
            Ok(Some(user)) => self.user_of(&user),
            _ => GiteaUser::unknown(&self.base, name),
        };
        self.users.borrow_mut().insert(key, user.clone());
        user
    }

    /// The user named `name` as written JSON (cached for the request).
    pub fn user_json(&self, name: &str) -> UserJson {
        let key = name.to_ascii_lowercase();
        if let Some(json) = self.user_jsons.borrow().get(&key) {
            return json.clone();
        }
        let json = serde_json::value::to_raw_value(&self.user(name))
            .unwrap_or_else(|_| serde_json::value::to_raw_value(&()).unwrap_or_default());
        self.user_jsons.borrow_mut().insert(key, json.clone());
        json
    }

    /// The repo's labels (cached for the request).
    fn repo_labels(&self, repo: &RepoName) -> Vec<Label> {
        let key = repo.to_string();
        if let Some(labels) = self.labels.borrow().get(&key) {
            return labels.clone();
        }
        let labels = self.app.meta.labels(repo).unwrap_or_default();
        self.labels.borrow_mut().insert(key, labels.clone());
        labels
    }

    /// The labels of the repo that `names` name, in the names' order.
    pub fn labels(&self, repo: &RepoName, names: &[String]) -> Vec<GiteaLabel> {
        let all = self.repo_labels(repo);
        names
            .iter()
            .filter_map(|name| all.iter().find(|l| l.name.eq_ignore_ascii_case(name)))
            .map(|l| GiteaLabel::of(&self.base, &repo.to_string(), l))
            .collect()
    }

    pub fn label(&self, repo: &RepoName, label: &Label) -> GiteaLabel {
        GiteaLabel::of(&self.base, &repo.to_string(), label)
    }

    /// What the viewer may do in `repo`.
    pub fn permission(&self, repo: &RepoName) -> Permission {
        let role = self.app.access.role(self.viewer, repo);
        Permission {
            admin: role >= Some(Role::Admin),
            push: role >= Some(Role::Write),
            pull: true,
        }
    }

    pub fn repo_meta(&self, repo: &RepoName) -> RepoMeta {
        RepoMeta {
            id: self.app.meta.repo_serial(repo).ok().flatten().unwrap_or(0),
            name: repo.name().to_string(),
            owner: repo.owner().to_string(),
            full_name: repo.to_string(),
        }
    }

    /// The time of the newest ref move the server recorded in `repo` (a
    /// push or a merge), forgotten with a deleted repo.
    fn last_push(&self, repo: &str) -> Option<String> {
        let (newest, _) = self
            .app
            .recorder
            .activity(repo, vole_stdx::page::Pagination::first(1));
        let entry = newest.first()?;
        Some(time(&vole_stdx::time::nanos_to_seconds(
            entry.ref_move.time_ns,
        )))
    }

    /// Gitea's `Repository` for `repo` (which the viewer may read).
    pub fn repo(&self, repo: &RepoName) -> Result<GiteaRepo, AppError> {
        let key = repo.to_string();
        if let Some(shaped) = self.repos.borrow().get(&key) {
            return Ok(shaped.clone());
        }
        let app = self.app;
        let id = app.meta.repo_id(repo)?;
        let settings = app.meta.settings(repo)?;
        let acl = app.meta.acl(repo)?;
        let private = app.access.visibility_of(repo, &acl) == Visibility::Private;
        // Counted once the repo's issues are read after a start; until
        // then none (a client's first call is for the repo itself, which
        // must not fail while they are read).
        let counts = app.meta.open_counts_now(repo).unwrap_or_default();
        let path = app.repos.path(repo);
        let head = vole_git::repos::head_branch(&path);
        let empty = !has_branches(&path);
        let created = id
            .as_ref()
            .map(|r| time(&r.created_at))
            .unwrap_or_else(|| TIME_ZERO.to_string());
        let updated = self.last_push(&key).filter(|pushed| *pushed > created);
        let methods = &settings.merge.methods;
        let html_url = self.base.html(&key);
        let shaped = GiteaRepo {
            id: id.as_ref().map_or(0, |r| r.serial),
            owner: self.user(repo.owner()),
            name: repo.name().to_string(),
            full_name: key.clone(),
            // The description a repo was made with is git's file until the
            // settings first store one.
            description: if settings.version == 0 {
                app.repos.description(repo)
            } else {
                settings.description.clone()
            },
            empty,
            private,
            fork: false,
            template: false,
            parent: None,
            mirror: false,
            size: 0,
            language: String::new(),
            languages_url: self.base.api(&format!("repos/{key}/languages")),
            html_url: html_url.clone(),
            url: self.base.api(&format!("repos/{key}")),
            link: String::new(),
            ssh_url: String::new(),
            clone_url: format!("{html_url}.git"),
            original_url: String::new(),
            website: String::new(),
            stars_count: 0,
            forks_count: 0,
            watchers_count: 0,
            open_issues_count: counts.issues as u64,
            open_pr_counter: counts.changes as u64,
            release_counter: 0,
            default_branch: head.unwrap_or(settings.default_branch.clone()),
            archived: false,
            updated_at: updated.unwrap_or_else(|| created.clone()),
            created_at: created,
            archived_at: "1970-01-01T00:00:00+00:00".into(),
            permissions: self.permission(repo),
            has_issues: true,
            internal_tracker: InternalTracker {
                enable_time_tracker: false,
                allow_only_contributors_to_track_time: false,
                enable_issue_dependencies: false,
            },
            external_tracker: None,
            has_wiki: false,
            external_wiki: None,
            has_pull_requests: true,
            has_projects: false,
            projects_mode: "all".into(),
            has_releases: false,
            has_packages: false,
            has_actions: false,
            ignore_whitespace_conflicts: false,
            allow_merge_commits: methods.contains(&MergeMethod::Merge),
            allow_rebase: false,
            allow_rebase_explicit: false,
            allow_squash_merge: methods.contains(&MergeMethod::Squash),
            allow_fast_forward_only_merge: methods.contains(&MergeMethod::FastForwardOnly),
            allow_rebase_update: false,
            default_delete_branch_after_merge: false,
            default_merge_style: gitea_merge_style(settings.merge.default).into(),
            default_allow_maintainer_edit: false,
            avatar_url: String::new(),
            internal: false,
            mirror_interval: String::new(),
            object_format_name: "sha1".into(),
            mirror_updated: TIME_ZERO.into(),
            repo_transfer: None,
        };
        self.repos.borrow_mut().insert(key, shaped.clone());
        Ok(shaped)
    }

    pub fn issue(&self, repo: &RepoName, repo_meta: &RepoMeta, issue: &Issue) -> GiteaIssue {
        let cx = ThreadContext {
            base: &self.base,
            repo: repo_meta,
            user: self.user_json(&issue.author),
            labels: self.labels(repo, &issue.labels),
            comments: self.app.meta.comment_count(repo, &issue.id).unwrap_or(0) as u64,
        };
        GiteaIssue::of_issue(cx, issue)
    }

    /// A pull request as an issue (Gitea's issue endpoints show both).
    pub fn change_issue(
        &self,
        repo: &RepoName,
        repo_meta: &RepoMeta,
        change: &Change,
    ) -> GiteaIssue {
        let cx = ThreadContext {
            base: &self.base,
            repo: repo_meta,
            user: self.user_json(&change.author),
            labels: self.labels(repo, &change.labels),
            comments: self.app.meta.comment_count(repo, &change.id).unwrap_or(0) as u64,
        };
        GiteaIssue::of_change(cx, change)
    }

    /// [`Shaper::any_issue`] as written JSON, from the cache of written
    /// issues when it holds this one as it is now: the key holds all the
    /// object depends on (where the server is, the repo's incarnation, the
    /// document's version, its comment count, the repo's labels, its
    /// author's account and whether the viewer sees its private fields).
    pub fn listed_issue(
        &self,
        repo: &vole_access::ResolvedRepo,
        repo_meta: &RepoMeta,
        thread: &AnyThread,
    ) -> crate::SharedJson {
        let (number, version, author, id) = match thread {
            AnyThread::Issue(i) => (i.number, i.version, &i.author, &i.id),
            AnyThread::Change(c) => (c.number, c.version, &c.author, &c.id),
        };
        let comments = self.app.meta.comment_count(repo, id).unwrap_or(0) as u64;
        let key = crate::IssueKey {
            base: self.base.0.clone(),
            incarnation: repo.incarnation_id().to_string(),
            repo_id: repo_meta.id,
            number,
            version,
            comments,
            labels: self.labels_fingerprint(repo),
            author: self.user_version(author),
            private: self.sees_email(author),
        };
        if let Some(json) = self.app.issue_json.get(&key) {
            return json;
        }
        let shaped = self.any_issue(repo, repo_meta, thread);
        let json = crate::SharedJson(
            serde_json::value::to_raw_value(&shaped)
                .or_else(|_| serde_json::value::to_raw_value(&()))
                .unwrap_or_default()
                .into(),
        );
        self.app.issue_json.insert(key, json.clone());
        json
    }

    /// The repo's labels as they are now, in one number (each label's id
    /// and version).
    fn labels_fingerprint(&self, repo: &RepoName) -> u64 {
        use std::hash::{Hash, Hasher};
        if let Some(fingerprint) = *self.labels_fingerprint.borrow() {
            return fingerprint;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for label in self.repo_labels(repo) {
            (label.serial, label.version).hash(&mut hasher);
        }
        let fingerprint = hasher.finish();
        *self.labels_fingerprint.borrow_mut() = Some(fingerprint);
        fingerprint
    }

    /// The version of `name`'s account (0: no such user).
    fn user_version(&self, name: &str) -> u64 {
        let key = name.to_ascii_lowercase();
        if let Some(version) = self.user_versions.borrow().get(&key) {
            return *version;
        }
        let version = self
            .app
            .meta
            .user(name)
            .ok()
            .flatten()
            .map_or(0, |u| u.version);
        self.user_versions.borrow_mut().insert(key, version);
        version
    }

    pub fn any_issue(
        &self,
        repo: &RepoName,
        repo_meta: &RepoMeta,
        thread: &AnyThread,
    ) -> GiteaIssue {
        match thread {
            AnyThread::Issue(issue) => self.issue(repo, repo_meta, issue),
            AnyThread::Change(change) => self.change_issue(repo, repo_meta, change),
        }
    }

    /// Gitea's `PullRequest`; `detailed` (one pull request's answer)
    /// also runs the test merge and counts the diff, within the read
    /// deadline.
    pub fn pull(
        &self,
        repo: &vole_access::ResolvedRepo,
        repo_meta: &RepoMeta,
        change: &Change,
        detailed: bool,
    ) -> Result<GiteaPull, AppError> {
        let shaped_repo = self.repo(repo)?;
        let tips = self.app.control.tips(repo, change).ok();
        let open = change.state == ChangeState::Open;
        let (mergeable, merge_base, stat) = match (&tips, detailed && open) {
            (Some(tips), true) => match self.pull_detail(repo, change, tips) {
                Some(d) => (d.mergeable, d.merge_base, Some(d.stat)),
                None => (false, None, None),
            },
            // A merged one's answer: the base of the sides it merged.
            _ if detailed && change.state == ChangeState::Merged => {
                (false, self.merged_base(repo, change), None)
            }
            // In a list (or once closed): open with both branches there;
            // whether it merges cleanly is one pull request's answer.
            (Some(_), false) => (open, None, None),
            (None, _) => (false, None, None),
        };
        let cx = PullContext {
            thread: ThreadContext {
                base: &self.base,
                repo: repo_meta,
                user: self.user_json(&change.author),
                labels: self.labels(repo, &change.labels),
                comments: self.app.meta.comment_count(repo, &change.id).unwrap_or(0) as u64,
            },
            repo: shaped_repo,
            base_sha: tips.as_ref().map(|t| t.target.to_string()),
            head_sha: tips.as_ref().map(|t| t.source.to_string()),
            merge_base,
            mergeable,
            merged_by: change.merged_by.as_deref().map(|n| self.user(n)),
            stat,
        };
        Ok(GiteaPull::of(cx, change))
    }

    /// One open pull request's test merge, merge base and diff counts,
    /// cached by the repo's incarnation and both tips: what they decide
    /// cannot change while they stay. `None`: git did not answer within
    /// the read deadline (nothing cached).
    fn pull_detail(
        &self,
        repo: &vole_access::ResolvedRepo,
        change: &Change,
        tips: &crate::pulls::Tips,
    ) -> Option<crate::PullDetail> {
        let key = (
            repo.incarnation_id().to_string(),
            tips.target.to_string(),
            tips.source.to_string(),
        );
        if let Some(detail) = self.app.pull_details.get(&key) {
            return Some(detail);
        }
        let preview = crate::pulls::preview(self.app, repo, change, DETAIL_DEADLINE).ok()?;
        let mergeable = matches!(preview.merge, vole_git::merge::TestMerge::Clean(_))
            && !preview.merged_already;
        let merge_base = self
            .app
            .control
            .git
            .merge_base(
                &self.app.repos.path(repo),
                (preview.tips.target, preview.tips.source),
                DETAIL_DEADLINE,
            )
            .ok()?
            .map(|id| id.to_string());
        let stat = self.diff_stat(repo, &preview.tips)?;
        let detail = crate::PullDetail {
            mergeable,
            merge_base,
            stat,
        };
        self.app.pull_details.insert(key, detail.clone());
        Some(detail)
    }

    /// The merge base of the sides a merge took (`None`: a merge from
    /// before both were recorded, or git did not answer in time).
    fn merged_base(&self, repo: &RepoName, change: &Change) -> Option<String> {
        let id = |hex: &Option<String>| gix::ObjectId::from_hex(hex.as_deref()?.as_bytes()).ok();
        let sides = (id(&change.merged_onto)?, id(&change.merged_head)?);
        self.app
            .control
            .git
            .merge_base(&self.app.repos.path(repo), sides, DETAIL_DEADLINE)
            .ok()?
            .map(|base| base.to_string())
    }

    /// Lines added and removed and files changed from the merge base of
    /// `tips` to the source's head (`git diff --shortstat A...B`).
    fn diff_stat(&self, repo: &RepoName, tips: &crate::pulls::Tips) -> Option<(u64, u64, u64)> {
        let range = format!("{}...{}", tips.target, tips.source);
        let out = self
            .app
            .control
            .git
            .run_bounded(
                &self.app.repos.path(repo),
                &["diff", "--shortstat", &range],
                vole_git::Bounds {
                    max_output: 4096,
                    deadline: DETAIL_DEADLINE,
                },
            )
            .ok()?
            .stdout;
        Some(shortstat(&String::from_utf8_lossy(&out)))
    }

    pub fn comment(
        &self,
        repo: &RepoName,
        (kind, number): (ThreadKind, u64),
        comment: &Comment,
    ) -> GiteaComment {
        GiteaComment::of(
            &self.base,
            &repo.to_string(),
            (number, kind == ThreadKind::Change),
            self.user(&comment.author),
            comment,
        )
    }
}

/// How long one pull request's answer may spend on its test merge.
const DETAIL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// Gitea's name of a merge method.
pub fn gitea_merge_style(method: MergeMethod) -> &'static str {
    match method {
        MergeMethod::Merge => "merge",
        MergeMethod::FastForwardOnly => "fast-forward-only",
        MergeMethod::Squash => "squash",
    }
}

/// Whether the repo at `path` has a branch: a loose one, or one in its
/// packed refs.
fn has_branches(path: &std::path::Path) -> bool {
    let loose = std::fs::read_dir(path.join("refs/heads"))
        .map(|mut dir| dir.next().is_some())
        .unwrap_or(false);
    loose || {
        use std::io::BufRead;
        std::fs::File::open(path.join("packed-refs")).is_ok_and(|f| {
            std::io::BufReader::new(f)
                .lines()
                .map_while(Result::ok)
                .any(|l| l.contains(" refs/heads/"))
        })
    }
}

/// `git diff --shortstat`'s line (` 2 files changed, 3 insertions(+),
/// 1 deletion(-)`) as (added, removed, files); an empty diff is zeros.
fn shortstat(line: &str) -> (u64, u64, u64) {
    let (mut added, mut removed, mut files) = (0, 0, 0);
    for part in line.split(',') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let n = n.parse().unwrap_or(0);
        if what.starts_with("file") {
            files = n;
        } else if what.starts_with("insertion") {
            added = n;
        } else if what.starts_with("deletion") {
            removed = n;
        }
    }
    (added, removed, files)
}

#[cfg(test)]
mod tests {
    #[test]
    fn shortstat_lines_are_read() {
        assert_eq!(
            super::shortstat(" 2 files changed, 3 insertions(+), 1 deletion(-)\n"),
            (3, 1, 2)
        );
        assert_eq!(
            super::shortstat(" 1 file changed, 1 deletion(-)"),
            (0, 1, 1)
        );
        assert_eq!(super::shortstat(""), (0, 0, 0));
    }
}
