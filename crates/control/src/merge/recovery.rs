//! At start, before the server takes requests: the merges a crash cut
//! short, settled from their intents in the ref log (the last steps of
//! [`super`]'s story).

use gix::ObjectId;
use vole_git::repos::RepoName;
use vole_hooks::Phase;
use vole_meta::entity::{ChangeState, MergeMethod};

use super::MERGE_DEADLINE;
use crate::ControlState;

fn intent_method(phase: Phase) -> MergeMethod {
    match phase {
        Phase::FastForwardIntent => MergeMethod::FastForwardOnly,
        Phase::SquashIntent => MergeMethod::Squash,
        _ => MergeMethod::Merge,
    }
}

impl ControlState {
    /// Settles the merge intents the ref log holds unsettled (at start,
    /// before the server takes requests): an intent whose new commit is
    /// on its target marks its pull request merged, one whose target
    /// never took it is dropped. Returns a line per intent settled.
    pub fn recover_merges(&self) -> Vec<String> {
        let mut report = Vec::new();
        for intent in self.recorder.merge_intents() {
            let line = self.recover_merge(&intent);
            self.settle(&intent.repo, intent.push_id);
            report.push(line);
        }
        report
    }

    fn recover_merge(&self, intent: &vole_hooks::RefMove) -> String {
        let number = intent.push_id;
        let what = format!("{} pull request {number}", intent.repo);
        let Ok(repo) = RepoName::parse(&intent.repo) else {
            return format!("{what}: no such repository; dropped");
        };
        match self.meta.change(&repo, number) {
            Ok(change) if change.state == ChangeState::Merged => {
                return format!("{what}: merged already");
            }
            Ok(_) => {}
            Err(e) => return format!("{what}: {e}; dropped"),
        }
        let new = intent
            .new
            .as_deref()
            .and_then(|n| ObjectId::from_hex(n.as_bytes()).ok());
        let branch = intent.ref_name.trim_start_matches("refs/heads/");
        let landed = match (new, self.branch_tip(&repo, branch)) {
            (Some(new), Ok(tip)) => {
                tip == new
                    || self
                        .git
                        .is_ancestor(&self.repos.path(&repo), new, tip, MERGE_DEADLINE)
                        .unwrap_or(false)
            }
            _ => false,
        };
        if !landed {
            return format!("{what}: its target never moved; the merge is dropped");
        }
        let method = intent_method(intent.phase);
        match self.meta.mark_merged(
            &repo,
            number,
            (
                intent.new.as_deref().unwrap_or_default(),
                method,
                intent.old.as_deref().unwrap_or_default(),
            ),
            &intent.actor,
        ) {
            Ok(_) => format!("{what}: its target had moved; marked merged"),
            Err(e) => format!("{what}: cannot mark it merged: {e}"),
        }
    }
}
