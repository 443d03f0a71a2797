//! A merge's intent in the ref log: recorded before the merge moves its
//! target ([`Phase::MergeIntent`] and its kin), remembered by the ref
//! state until the merge is recorded or dropped, and listed at start so
//! that a merge a crash cut short is settled.

use super::recorder::{RecorderError, RefRecorder};
use super::{Phase, PushContext, RefMove, RefUpdate};
use vole_log::now_ns;

impl RefRecorder {
    /// Records, durably, that a merge of pull request `number` is about to
    /// move `ref_name` from `old` to `new` ([`Phase::MergeIntent`] and its
    /// kin: `phase` says the method). Blocking.
    pub fn record_merge_intent(
        &self,
        push: &PushContext,
        number: u64,
        update: &RefUpdate,
        phase: Phase,
    ) -> Result<u64, RecorderError> {
        debug_assert!(phase.is_merge_intent());
        let rows = vec![RefMove {
            time_ns: now_ns(),
            repo: push.repo.clone(),
            ref_name: update.ref_name.clone(),
            old: Some(update.old.clone()),
            new: Some(update.new.clone()),
            actor: push.actor.clone(),
            client: push.client.clone(),
            push_id: number,
            phase,
        }];
        let _cut = self.cut.read();
        let seq = self.log().commit(&rows)?;
        self.state().apply_txn(seq, &rows);
        Ok(seq)
    }

    /// The merge intents not settled yet (at start: those a crash may
    /// have cut short).
    pub fn merge_intents(&self) -> Vec<RefMove> {
        self.state().merge_intents.values().cloned().collect()
    }

    /// Forgets the intent of `repo`'s pull request `number`: its merge is
    /// recorded (or was dropped).
    pub fn settle_merge(&self, repo: &str, number: u64) {
        self.state()
            .merge_intents
            .remove(&(repo.to_string(), number));
    }
}
