//! Reads of issues and change requests: picked under the repo's lock,
//! made whole after it (a long body is read back from git, `bodies.rs`);
//! the rows of a list that shows no body read none.

use super::*;
use crate::index::stored::{HasBody, Stored};

impl MetaStore {
    pub fn issue(&self, repo: &RepoName, number: u64) -> Result<Issue, MetaError> {
        self.read_bodies(
            repo,
            |state| state.stored_issue(number).cloned(),
            |docs, issue| docs.whole(&issue),
        )
    }

    pub fn list_issues(
        &self,
        repo: &RepoName,
        filter: &Filter<IssueState>,
        page: Pagination,
    ) -> Result<Page<Issue>, MetaError> {
        self.read_bodies(
            repo,
            |state| Ok(state.index.issues(filter, page)),
            |docs, page| docs.whole_page(page),
        )
    }

    /// [`MetaStore::list_issues`] without the bodies (each empty), for a
    /// list that shows none: no blob is read.
    pub fn list_issue_rows(
        &self,
        repo: &RepoName,
        filter: &Filter<IssueState>,
        page: Pagination,
    ) -> Result<Page<Issue>, MetaError> {
        self.rows(repo, |state| state.index.issues(filter, page))
    }

    pub fn change(&self, repo: &RepoName, number: u64) -> Result<Change, MetaError> {
        self.read_bodies(
            repo,
            |state| state.stored_change(number).cloned(),
            |docs, change| docs.whole(&change),
        )
    }

    pub fn list_changes(
        &self,
        repo: &RepoName,
        filter: &Filter<ChangeState>,
        page: Pagination,
    ) -> Result<Page<Change>, MetaError> {
        self.read_bodies(
            repo,
            |state| Ok(state.index.changes(filter, page)),
            |docs, page| docs.whole_page(page),
        )
    }

    /// [`MetaStore::list_changes`] without the bodies (each empty), for a
    /// list that shows none: no blob is read.
    pub fn list_change_rows(
        &self,
        repo: &RepoName,
        filter: &Filter<ChangeState>,
        page: Pagination,
    ) -> Result<Page<Change>, MetaError> {
        self.rows(repo, |state| state.index.changes(filter, page))
    }
}

impl MetaStore {
    /// The page `pick` takes under the repo's lock, its documents' bodies
    /// emptied, held or left in git.
    fn rows<T: HasBody>(
        &self,
        repo: &RepoName,
        pick: impl FnOnce(&RepoState) -> Page<Stored<T>>,
    ) -> Result<Page<T>, MetaError> {
        self.read_bodies(
            repo,
            |state| Ok(pick(state)),
            |_, page| Ok(without_bodies(page)),
        )
    }
}

fn without_bodies<T: HasBody>(page: Page<Stored<T>>) -> Page<T> {
    Page {
        items: page
            .items
            .into_iter()
            .map(|stored| {
                let (mut doc, _) = stored.into_parts();
                doc.body_mut().clear();
                doc
            })
            .collect(),
        total: page.total,
    }
}
