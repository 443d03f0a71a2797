//! At start, before the server takes requests: the merges a crash cut
//! short, settled from their intents in the ref log (the last steps of
//! [`super`]'s story).

use gix::ObjectId;
use vole_git::repos::RepoName;
use vole_hooks::Phase;
use vole_meta::MetaError;
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
    /// never took it is dropped. An intent this start cannot decide (the
    /// store or git failing) stays for the next one. Returns a line per
    /// intent looked at.
    pub fn recover_merges(&self) -> Vec<String> {
        let mut report = Vec::new();
        for intent in self.recorder.merge_intents() {
            let (line, decided) = self.recover_merge(&intent);
            if decided {
                self.settle(&intent.repo, intent.push_id);
            }
            report.push(line);
        }
        report
    }

    /// What became of `intent`'s merge, and whether that is decided.
    fn recover_merge(&self, intent: &vole_hooks::RefMove) -> (String, bool) {
        let number = intent.push_id;
        let what = format!("{} pull request {number}", intent.repo);
        let Ok(repo) = RepoName::parse(&intent.repo) else {
            return (format!("{what}: no such repository; dropped"), true);
        };
        // Decided on the repo's documents as they stand: read them first.
        let change = self
            .meta
            .wait_read(&repo)
            .and_then(|()| self.meta.change(&repo, number));
        match change {
            Ok(change) if change.state == ChangeState::Merged => {
                return (format!("{what}: merged already"), true);
            }
            Ok(_) => {}
            Err(MetaError::NotFound(e)) => return (format!("{what}: {e}; dropped"), true),
            Err(e) => {
                return (
                    format!("{what}: {e}; looked at again at the next start"),
                    false,
                );
            }
        }
        let again = |why: String| {
            (
                format!("{what}: {why}; looked at again at the next start"),
                false,
            )
        };
        let Some(new) = intent
            .new
            .as_deref()
            .and_then(|n| ObjectId::from_hex(n.as_bytes()).ok())
        else {
            return (format!("{what}: its intent names no commit; dropped"), true);
        };
        let branch = intent.ref_name.trim_start_matches("refs/heads/");
        let tip = match self.branch_tip(&repo, branch) {
            Ok(tip) => tip,
            Err(e) => return again(e.to_string()),
        };
        let landed = tip == new
            || match self
                .git
                .is_ancestor(&self.repos.path(&repo), new, tip, MERGE_DEADLINE)
            {
                Ok(landed) => landed,
                Err(e) => return again(e.to_string()),
            };
        if !landed {
            return (
                format!("{what}: its target never moved; the merge is dropped"),
                true,
            );
        }
        let method = intent_method(intent.phase);
        match self.meta.mark_merged(
            &repo,
            number,
            // The intent does not name the source's commit.
            vole_meta::entity::MergeMark {
                commit: intent.new.as_deref().unwrap_or_default(),
                method,
                onto: intent.old.as_deref().unwrap_or_default(),
                head: None,
            },
            &intent.actor,
        ) {
            Ok(_) => (format!("{what}: its target had moved; marked merged"), true),
            Err(e) => again(format!("cannot mark it merged: {e}")),
        }
    }
}
