//! Reads of issues and change requests: picked under the repo's lock,
//! made whole after it (a long body is read back from git, `bodies.rs`).

use super::*;

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
}
