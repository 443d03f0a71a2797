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
        // One merge of a pull request at a time: a second one would
        // replace the first's intent, which a crash then settles wrongly.
        // The intent is taken (checked and put in the state) at once; the
        // log's row then makes it durable.
        let key = (push.repo.clone(), number);
        {
            let mut state = self.state();
            if state.merge_intents.contains_key(&key) {
                return Err(RecorderError::Busy(format!(
                    "another merge of pull request {number} is under way; try again shortly"
                )));
            }
            state.merge_intents.insert(key.clone(), rows[0].clone());
        }
        let committed = {
            let _cut = self.cut.read();
            self.log().commit(&rows)
        };
        match committed {
            Ok(seq) => {
                self.state().apply_txn(seq, &rows);
                Ok(seq)
            }
            Err(e) => {
                self.state().merge_intents.remove(&key);
                Err(e.into())
            }
        }
    }

    /// The merge intents not settled yet (at start: those a crash may
    /// have cut short).
    pub fn merge_intents(&self) -> Vec<RefMove> {
        self.state().merge_intents.values().cloned().collect()
    }

    /// Settles the intent of `repo`'s pull request `number`, durably (a
    /// [`Phase::MergeSettled`] row): its merge is recorded, or dropped.
    /// Blocking. On an error the intent stays, and the next start looks
    /// at it again (marking a merged pull request merged changes nothing).
    pub fn settle_merge(&self, repo: &str, number: u64) -> Result<(), RecorderError> {
        let Some(intent) = self
            .state()
            .merge_intents
            .get(&(repo.to_string(), number))
            .cloned()
        else {
            return Ok(());
        };
        let rows = vec![RefMove {
            time_ns: now_ns(),
            old: None,
            new: None,
            phase: Phase::MergeSettled,
            ..intent
        }];
        let _cut = self.cut.read();
        let seq = self.log().commit(&rows)?;
        self.state().apply_txn(seq, &rows);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use vole_log::Log;

    use super::*;
    use crate::recorder::RefState;

    fn open(dir: &std::path::Path) -> RefRecorder {
        let mut state = RefState::default();
        let (log, _) = Log::<RefMove>::open(dir, |entry| state.apply(entry)).unwrap();
        let repos = vole_git::repos::Repos::new(vole_git::datadir::DataDir::new(dir));
        RefRecorder::new(Arc::new(log), state, repos)
    }

    #[test]
    fn an_intent_is_one_at_a_time_kept_through_a_compaction_and_settled_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let push = PushContext {
            repo: "a/r".into(),
            push_id: 1,
            actor: "alice".into(),
            client: "127.0.0.1".into(),
        };
        let update = RefUpdate {
            ref_name: "refs/heads/main".into(),
            old: format!("{:040x}", 1),
            new: format!("{:040x}", 2),
            fast_forward: Some(true),
        };
        let recorder = open(dir.path());
        recorder
            .record_merge_intent(&push, 7, &update, Phase::SquashIntent)
            .unwrap();
        let again = recorder.record_merge_intent(&push, 7, &update, Phase::MergeIntent);
        assert!(
            matches!(again, Err(RecorderError::Busy(_))),
            "a second merge of one pull request took its intent: {again:?}"
        );
        recorder.compact(0).unwrap();
        drop(recorder);
        let recorder = open(dir.path());
        let kept = recorder.merge_intents();
        assert_eq!(
            kept.iter()
                .map(|i| (i.push_id, i.phase))
                .collect::<Vec<_>>(),
            [(7, Phase::SquashIntent)],
            "the compaction lost the unsettled intent"
        );
        assert!(
            recorder
                .state()
                .known
                .get("a/r")
                .is_none_or(|refs| refs.is_empty()),
            "the kept intent was taken for a ref's value"
        );
        recorder.settle_merge("a/r", 7).unwrap();
        drop(recorder);
        let recorder = open(dir.path());
        assert!(
            recorder.merge_intents().is_empty(),
            "a settled intent came back at the next start"
        );
        recorder
            .record_merge_intent(&push, 7, &update, Phase::MergeIntent)
            .unwrap();
    }
}
