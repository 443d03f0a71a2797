//! The store's operations on each kind of document: create, edit, read
//! and list issues and change requests, read and put the
//! ACL and the settings (and the site settings derived from them). Each
//! write is decided under the repo's lock and goes through the ordered
//! appender (`append.rs`).

use super::*;

impl MetaStore {
    // ---- issues ----

    pub fn create_issue(
        &self,
        repo: &RepoName,
        new: NewIssue,
        author: &str,
    ) -> Result<Issue, MetaError> {
        entity::check_title(&new.title)?;
        entity::check_body(&new.body)?;
        entity::check_labels(&new.labels)?;
        let mut new = new;
        new.labels = self.ensure_labels(repo, &new.labels)?;
        let id = self.new_id();
        let serial = self.next_serial(entity::SerialKind::Issue)?;
        self.write(repo, |state| {
            let now = now_text();
            let number = state.take_number();
            Ok(Issue {
                v: SCHEMA_V,
                serial,
                id,
                number,
                title: new.title,
                body: new.body,
                state: IssueState::Open,
                labels: dedup(new.labels),
                author: author.to_string(),
                created_at: now.clone(),
                updated_at: now,
                version: 1,
                replaces: None,
                state_changed_at: None,
            })
        })
    }

    pub fn edit_issue(
        &self,
        repo: &RepoName,
        number: u64,
        patch: IssuePatch,
    ) -> Result<Issue, MetaError> {
        if let Some(title) = &patch.title {
            entity::check_title(title)?;
        }
        if let Some(body) = &patch.body {
            entity::check_body(body)?;
        }
        let mut patch = patch;
        if let Some(labels) = patch.labels.take() {
            entity::check_labels(&labels)?;
            let current = self.issue(repo, number)?.labels;
            patch.labels = Some(self.settle_labels(repo, &current, labels)?);
        }
        self.write(repo, |state| {
            let current = state.issue(number)?;
            check_version("issue", number, current.version, patch.version)?;
            let mut next = current.clone();
            next.title = patch.title.unwrap_or(next.title);
            next.body = patch.body.unwrap_or(next.body);
            next.state = patch.state.unwrap_or(next.state);
            next.labels = patch.labels.map(dedup).unwrap_or(next.labels);
            next.replaces = Some(current.version);
            next.version = current.version + 1;
            next.updated_at = now_text();
            if next.state != current.state {
                next.state_changed_at = Some(next.updated_at.clone());
            }
            Ok(next)
        })
    }

    /// How many issues with `filter`'s label and author are in each state.
    pub fn issue_counts(
        &self,
        repo: &RepoName,
        filter: &Filter<IssueState>,
    ) -> Result<StateCounts<IssueState>, MetaError> {
        self.read(repo, |state| Ok(state.index.issue_counts(filter)))
    }

    // ---- change requests ----

    pub fn create_change(
        &self,
        repo: &RepoName,
        new: NewChange,
        author: &str,
    ) -> Result<Change, MetaError> {
        entity::check_title(&new.title)?;
        entity::check_body(&new.body)?;
        entity::check_branch("source branch", &new.source_branch)?;
        entity::check_branch("target branch", &new.target_branch)?;
        entity::check_labels(&new.labels)?;
        if new.source_branch == new.target_branch {
            return Err(MetaError::Invalid(
                "source and target branch are the same branch".into(),
            ));
        }
        let mut new = new;
        new.labels = self.ensure_labels(repo, &new.labels)?;
        let id = self.new_id();
        let serial = self.next_serial(entity::SerialKind::Issue)?;
        self.write(repo, |state| {
            // Decided under the repo's lock: two at once cannot both open.
            if let Some(open) = state
                .index
                .open_change_between(&new.source_branch, &new.target_branch)
            {
                return Err(MetaError::Taken(format!(
                    "pull request #{open} from {} into {} is open already",
                    new.source_branch, new.target_branch
                )));
            }
            let now = now_text();
            let number = state.take_number();
            Ok(Change {
                v: SCHEMA_V,
                serial,
                id,
                number,
                title: new.title,
                body: new.body,
                source_branch: new.source_branch,
                target_branch: new.target_branch,
                state: ChangeState::Open,
                labels: dedup(new.labels),
                author: author.to_string(),
                created_at: now.clone(),
                updated_at: now,
                version: 1,
                replaces: None,
                state_changed_at: None,
                merge_commit: None,
                merged_by: None,
                merged_at: None,
                merge_method: None,
                merged_onto: None,
                merged_head: None,
            })
        })
    }

    pub fn edit_change(
        &self,
        repo: &RepoName,
        number: u64,
        patch: ChangePatch,
    ) -> Result<Change, MetaError> {
        if let Some(title) = &patch.title {
            entity::check_title(title)?;
        }
        if let Some(body) = &patch.body {
            entity::check_body(body)?;
        }
        if let Some(target) = &patch.target_branch {
            entity::check_branch("target branch", target)?;
        }
        let mut patch = patch;
        if let Some(labels) = patch.labels.take() {
            entity::check_labels(&labels)?;
            let current = self.change(repo, number)?.labels;
            patch.labels = Some(self.settle_labels(repo, &current, labels)?);
        }
        if patch.state == Some(ChangeState::Merged) {
            return Err(MetaError::Invalid(
                "a pull request is merged by POST .../pulls/{n}/merge, which moves its target branch; an edit cannot mark it merged".into(),
            ));
        }
        self.write(repo, |state| {
            let current = state.change(number)?;
            check_version("change request", number, current.version, patch.version)?;
            if current.state == ChangeState::Merged
                && (patch.state.is_some() || patch.target_branch.is_some())
            {
                return Err(MetaError::Invalid(format!(
                    "change request {number} is merged: its state and target branch stay as they are"
                )));
            }
            let mut next = current.clone();
            next.labels = patch.labels.map(dedup).unwrap_or(next.labels);
            next.title = patch.title.unwrap_or(next.title);
            next.body = patch.body.unwrap_or(next.body);
            next.state = patch.state.unwrap_or(next.state);
            next.target_branch = patch.target_branch.unwrap_or(next.target_branch);
            if next.target_branch == next.source_branch {
                return Err(MetaError::Invalid(
                    "source and target branch are the same branch".into(),
                ));
            }
            next.replaces = Some(current.version);
            next.version = current.version + 1;
            next.updated_at = now_text();
            if next.state != current.state {
                next.state_changed_at = Some(next.updated_at.clone());
            }
            Ok(next)
        })
    }

    /// Marks change request `number` merged by `by` as `mark` says: the
    /// last step of a merge, after the target
    /// moved (and at start, for a merge whose last step a crash cut). A
    /// change request merged already is left as it is.
    pub fn mark_merged(
        &self,
        repo: &RepoName,
        number: u64,
        mark: crate::entity::MergeMark<'_>,
        by: &str,
    ) -> Result<Change, MetaError> {
        let current = self.change(repo, number)?;
        if current.state == ChangeState::Merged {
            return Ok(current);
        }
        self.write(repo, |state| {
            let current = state.change(number)?;
            let mut next = current.clone();
            next.state = ChangeState::Merged;
            next.merge_commit = Some(mark.commit.to_string());
            next.merge_method = Some(mark.method);
            next.merged_onto = Some(mark.onto.to_string());
            next.merged_head = mark.head.map(str::to_string);
            next.merged_by = Some(by.to_string());
            let now = now_text();
            next.merged_at = Some(now.clone());
            next.state_changed_at = Some(now.clone());
            next.replaces = Some(current.version);
            next.version = current.version + 1;
            next.updated_at = now;
            Ok(next)
        })
    }

    /// How many change requests by `filter`'s author are in each state.
    pub fn change_counts(
        &self,
        repo: &RepoName,
        filter: &Filter<ChangeState>,
    ) -> Result<StateCounts<ChangeState>, MetaError> {
        self.read(repo, |state| Ok(state.index.change_counts(filter)))
    }

    // ---- ACL and settings ----

    /// The repo's ACL (the default, public with no members, at version 0
    /// when none is stored).
    pub fn acl(&self, repo: &RepoName) -> Result<Acl, MetaError> {
        Ok(self.acl_of(repo)?.0)
    }

    /// The incarnation of `repo` whose metadata the store holds (`None`:
    /// a repo from before incarnations); [`MetaError::NoRepo`] when there
    /// is no such repo.
    pub fn incarnation(
        &self,
        repo: &RepoName,
    ) -> Result<Option<vole_git::repos::Incarnation>, MetaError> {
        self.check_failed()?;
        Ok(self.repo(repo)?.incarnation.clone())
    }

    /// The repo's ACL and the incarnation it belongs to, read together:
    /// an access decision made on this ACL is about that incarnation, and
    /// whatever the caller goes on to open must be the same one.
    ///
    /// The ACL lives in the system repo under the repo's incarnation (see
    /// [`Entity::RepoAcl`]); a repo from before that keeps it in its own
    /// shards until [`MetaStore::move_acls_to_system`] moves it.
    pub fn acl_of(
        &self,
        repo: &RepoName,
    ) -> Result<(Acl, Option<vole_git::repos::Incarnation>), MetaError> {
        self.check_failed()?;
        let meta = self.repo(repo)?;
        let stored = self
            .system_acl(&meta)
            .or_else(|| meta.state.lock().index.acl().cloned());
        Ok((
            stored.unwrap_or_else(Acl::default_for_repo),
            meta.incarnation.clone(),
        ))
    }

    /// The ACL the system repo holds for `meta`'s incarnation.
    fn system_acl(&self, meta: &RepoMeta) -> Option<Acl> {
        let incarnation = meta.incarnation.as_ref()?;
        let system = self.system().ok()?;
        let state = system.state.lock();
        state
            .index
            .repo_acl(incarnation.id())
            .map(|stored| stored.acl.clone())
    }

    pub fn put_acl(&self, repo: &RepoName, put: AclPut) -> Result<Acl, MetaError> {
        entity::check_members(&put.members)?;
        if let Some(owner) = &put.owner {
            entity::check_user_name(owner)?;
        }
        let meta = self.repo(repo)?;
        let build = |stored: Option<&Acl>| -> Result<Acl, MetaError> {
            let current = stored.map_or(0, |a| a.version);
            check_version("ACL", 0, current, Some(put.version))?;
            let owner = put
                .owner
                .clone()
                .or_else(|| stored.and_then(|a| a.owner.clone()));
            Ok(Acl {
                v: SCHEMA_V,
                visibility: put.visibility,
                owner,
                members: put.members.clone(),
                updated_at: now_text(),
                version: current + 1,
                replaces: (current > 0).then_some(current),
            })
        };
        let written = match (self.system(), meta.incarnation.clone()) {
            // In the system repo, under the repo's incarnation.
            (Ok(system), Some(incarnation)) => {
                let legacy = meta.state.lock().index.acl().cloned();
                let written = self
                    .write_in(&system, |state| {
                        let stored = state
                            .index
                            .repo_acl(incarnation.id())
                            .map(|r| &r.acl)
                            .or(legacy.as_ref());
                        Ok(entity::RepoAcl {
                            repo: repo.to_string(),
                            incarnation: incarnation.id().to_string(),
                            acl: build(stored)?,
                        })
                    })
                    .map(|stored| stored.acl);
                if written.is_ok() && legacy.is_some() {
                    self.inner
                        .settings_generation
                        .fetch_add(1, Ordering::AcqRel);
                    self.remove_repo_acl(&meta)?;
                }
                written
            }
            // A store without accounts (tools, tests): in the repo.
            _ => self.write_in(&meta, |state| build(state.index.acl())),
        };
        // Even a failed write may have reached the index.
        self.inner
            .settings_generation
            .fetch_add(1, Ordering::AcqRel);
        written
    }

    /// Takes the ACL a repo from before kept in its own shards out of
    /// them (the system repo holds it now): readers who fetch the shard
    /// refs no longer find it at the tips.
    fn remove_repo_acl(&self, meta: &Arc<RepoMeta>) -> Result<(), MetaError> {
        self.write_in(meta, |_| {
            Ok(entity::Removed {
                path: entity::REPO_ACL_PATH.to_string(),
            })
        })
        .map(drop)
    }

    /// Gives `repo`, now of incarnation `new`, the ACL the system repo holds
    /// for `had` (a repo that shared its incarnation with a copy): each
    /// keeps the ACL it had, and they no longer share it.
    pub fn copy_repo_acl(
        &self,
        repo: &RepoName,
        had: &vole_git::repos::Incarnation,
        new: &vole_git::repos::Incarnation,
    ) -> Result<(), MetaError> {
        let Ok(system) = self.system() else {
            return Ok(());
        };
        let acl = system
            .state
            .lock()
            .index
            .repo_acl(had.id())
            .map(|stored| stored.acl.clone());
        if let Some(acl) = acl {
            self.store_repo_acl(&system, &repo.to_string(), new, acl)?;
            self.inner
                .settings_generation
                .fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Stores `acl` as it is (its version kept) for `repo` of
    /// `incarnation` in the system repo.
    fn store_repo_acl(
        &self,
        system: &Arc<RepoMeta>,
        repo: &str,
        incarnation: &vole_git::repos::Incarnation,
        acl: Acl,
    ) -> Result<(), MetaError> {
        self.write_in(system, |_| {
            Ok(entity::RepoAcl {
                repo: repo.to_string(),
                incarnation: incarnation.id().to_string(),
                acl,
            })
        })
        .map(drop)
    }

    /// The upgrade, at start: every repo that keeps its ACL in its own
    /// shards gets it in the system repo, under its incarnation (unless the
    /// system repo has one for it already), and the shards' copy is
    /// removed from their tips. Returns the repos moved. Its history stays
    /// in the shards (see SECURITY.md).
    pub fn move_acls_to_system(&self) -> Result<Vec<String>, MetaError> {
        let Ok(system) = self.system() else {
            return Ok(Vec::new());
        };
        let repos: Vec<Arc<RepoMeta>> = self.inner.repos.read().values().cloned().collect();
        let mut moved = Vec::new();
        for meta in repos {
            let Some(incarnation) = meta.incarnation.clone() else {
                continue;
            };
            let Some(legacy) = meta.state.lock().index.acl().cloned() else {
                continue;
            };
            if self.system_acl(&meta).is_none() {
                self.store_repo_acl(&system, &meta.name, &incarnation, legacy)?;
            }
            self.remove_repo_acl(&meta)?;
            tracing::warn!(
                repo = meta.name,
                "upgrade: the repository's ACL moved from its shard refs to the system repo; its history stays in the shards"
            );
            moved.push(meta.name.clone());
        }
        if !moved.is_empty() {
            self.inner
                .settings_generation
                .fetch_add(1, Ordering::AcqRel);
        }
        Ok(moved)
    }

    /// The repo's settings (defaults from the server's config, at version
    /// 0, when none are stored).
    pub fn settings(&self, repo: &RepoName) -> Result<Settings, MetaError> {
        self.read_repo_level(repo, |state| {
            Ok(state
                .index
                .settings()
                .cloned()
                .unwrap_or_else(|| self.default_settings()))
        })
    }

    pub fn put_settings(&self, repo: &RepoName, put: SettingsPut) -> Result<Settings, MetaError> {
        entity::check_branch("default branch", &put.default_branch)?;
        for branch in &put.protected_branches {
            entity::check_branch("protected branch", branch)?;
        }
        entity::check_site(&put.site, &put.site_domains)?;
        entity::check_description(&put.description)?;
        entity::check_merge_settings(&put.merge)?;
        let written = self.write_repo_level(repo, |state| {
            let current = state.index.settings().map_or(0, |s| s.version);
            check_version("settings", 0, current, Some(put.version))?;
            Ok(Settings {
                v: SCHEMA_V,
                description: put.description,
                default_branch: put.default_branch,
                protected_branches: put.protected_branches,
                protected_admins_only: put.protected_admins_only,
                site: put.site,
                site_domains: put.site_domains,
                merge: put.merge,
                updated_at: now_text(),
                version: current + 1,
                replaces: (current > 0).then_some(current),
            })
        });
        // Even a failed write may have reached the index.
        self.inner
            .settings_generation
            .fetch_add(1, Ordering::AcqRel);
        written
    }

    /// Changes whenever any repo's settings or ACL change.
    pub fn settings_generation(&self) -> u64 {
        self.inner.settings_generation.load(Ordering::Acquire)
    }

    /// Where the repo's site is served from (the default, `refs/heads/pages`
    /// at its root, for a repo without settings or without a store entry).
    pub fn site(&self, repo: &RepoName) -> SiteSettings {
        self.read_repo_level(repo, |state| {
            Ok(state
                .index
                .settings()
                .map(|s| s.site.clone())
                .unwrap_or_default())
        })
        .unwrap_or_default()
    }

    pub(super) fn default_settings(&self) -> Settings {
        let options = &self.inner.options;
        Settings {
            v: SCHEMA_V,
            description: String::new(),
            default_branch: options.default_branch.clone(),
            protected_branches: options.protected_branches.clone(),
            protected_admins_only: false,
            site: SiteSettings::default(),
            site_domains: Vec::new(),
            merge: Default::default(),
            updated_at: String::new(),
            version: 0,
            replaces: None,
        }
    }
}

/// Whether an edit replacing version `replaces` (none: whatever is
/// current) may apply to what is at `current`.
pub(super) fn check_version(
    what: &str,
    number: u64,
    current: u64,
    replaces: Option<u64>,
) -> Result<(), MetaError> {
    let Some(replaces) = replaces.filter(|&r| r != current) else {
        return Ok(());
    };
    let name = if number > 0 {
        format!("{what} #{number}")
    } else {
        what.to_string()
    };
    Err(MetaError::Stale(format!(
        "{name} is at version {current} but this edit replaces version {replaces}; \
         read it again and reapply the change"
    )))
}

pub(crate) fn dedup(labels: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    labels
        .into_iter()
        .map(|l| l.trim().to_string())
        .filter(|l| seen.insert(l.clone()))
        .collect()
}
