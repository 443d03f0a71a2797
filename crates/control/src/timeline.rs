//! A pull request's timeline follows its source branch: each push to it
//! (a committed move on the ref-move feed) is recorded in the timeline of
//! every open pull request from that branch, with who pushed and how many
//! commits it gained ("pushed N commits"), as metadata: the ref log is
//! shared by all repos and compacted, so it is not the timeline's store.

use std::time::Duration;

use vole_git::repos::RepoName;
use vole_meta::entity::ChangeState;

use crate::ControlState;

/// What counting a push's new commits may take.
const COUNT_DEADLINE: Duration = Duration::from_secs(10);

impl ControlState {
    /// Records, in the timeline of each open pull request whose source
    /// branch `event` moved, that it was pushed to (by the pusher, with
    /// how many commits it gained). Blocking; a failure is logged.
    pub fn record_pushes(&self, event: &vole_hooks::recorder::RefMoveEvent) {
        let Ok(repo) = RepoName::parse(&event.repo) else {
            return;
        };
        for moved in &event.moves {
            let (Some(branch), Some(after)) =
                (moved.ref_name.strip_prefix("refs/heads/"), &moved.new)
            else {
                continue;
            };
            if moved.phase != vole_hooks::Phase::Committed {
                continue;
            }
            let open = vole_meta::Filter {
                state: Some(ChangeState::Open),
                label: None,
                author: None,
            };
            // After a start, once every repo's documents are read: the
            // repo's pull requests, and every comment's id (the event
            // takes the next one).
            if !self.meta.wait_until_read() {
                return;
            }
            let found =
                self.meta
                    .list_changes(&repo, &open, vole_stdx::page::Pagination::first(100));
            let found = match found {
                Ok(found) => found,
                Err(e) => {
                    tracing::warn!(repo = %repo, error = %e, "a push is not in its pull requests' timelines");
                    continue;
                }
            };
            for change in found.items.iter().filter(|c| c.source_branch == branch) {
                let range = match &moved.old {
                    Some(before) => format!("{before}..{after}"),
                    None => format!("refs/heads/{}..{after}", change.target_branch),
                };
                let commits = self
                    .git
                    .run_bounded(
                        &self.repos.path(&repo),
                        &["rev-list", "--count", &range],
                        vole_git::Bounds {
                            max_output: 64,
                            deadline: COUNT_DEADLINE,
                        },
                    )
                    .ok()
                    .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
                    .unwrap_or(0);
                let pushed = vole_meta::entity::ThreadEvent::Pushed {
                    before: moved.old.clone(),
                    after: after.clone(),
                    commits,
                };
                if let Err(e) = self
                    .meta
                    .record_event(&repo, change.number, pushed, &moved.actor)
                {
                    tracing::warn!(repo = %repo, number = change.number, error = %e, "cannot record a push in a pull request's timeline");
                }
            }
        }
    }
}
