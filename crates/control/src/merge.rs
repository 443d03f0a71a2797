//! Merging a pull request on the server, never in a work tree, as one
//! durable story:
//!
//! 1. the checks: the pull request is open, the method is one the repo
//!    offers, the merging user may push (`access::check_merge`), both
//!    branches are where the form saw them;
//! 2. the new target commit (`vole_git::merge`): a merge commit, the
//!    source's head for fast-forward only, or one squashed commit; a
//!    conflict lists its paths and moves nothing;
//! 3. the target's protection, asked of the ref update as of a push's;
//! 4. the intent (pull request, method, expected target, new commit) in
//!    the ref log, durable;
//! 5. the target's move through the recorder, as a push's (`prepared`,
//!    the ref moved only from the expected value, `committed`: durable,
//!    on the feed);
//! 6. the pull request marked merged with the new commit.
//!
//! At start, [`ControlState::recover_merges`] settles each intent a crash
//! cut short: one whose new commit is on its target marks its pull
//! request merged, one whose target never moved is dropped. The
//! failpoints `merge-after-move` and `merge-before-move` (`VOLE_FAILPOINT`,
//! read only in debug builds: the tests') stop the server between steps 5
//! and 6, and 4 and 5.

use std::sync::Arc;
use std::time::Duration;

use gix::ObjectId;
use vole_access::{Action, Denied, Principal, ResolvedRepo};
use vole_git::merge::{MergeError, Signature, TestMerge};
use vole_git::repos::RepoName;
use vole_hooks::{Outcome, Phase, PushContext, RefUpdate};
use vole_meta::MetaError;
use vole_meta::entity::{Change, ChangeState, MergeMark, MergeMethod};

use crate::ControlState;

mod recovery;

/// What one merge's git children may take, each.
const MERGE_DEADLINE: Duration = Duration::from_secs(60);
/// Characters of a squashed commit's subject its listing keeps.
const MAX_SUBJECT_CHARS: usize = 200;
/// Squashed commits a squash's message lists at most.
const MAX_SQUASH_LISTED: usize = 200;
/// How long a merge waits for a hold of the repo's pushes (a gc) to end.
const HELD_WAIT: Duration = Duration::from_secs(10);

/// What a merge is asked to do.
#[derive(Debug, Clone, Default)]
pub struct MergeAsk {
    pub number: u64,
    /// `None`: the repo's default method.
    pub method: Option<MergeMethod>,
    /// The source's head the asker saw (`None`: not checked).
    pub head: Option<String>,
    /// The target's commit the asker saw (`None`: not checked).
    pub target: Option<String>,
    /// The target branch's name the asker saw (`None`: not checked): its
    /// author may have pointed the pull request at another since.
    pub target_branch: Option<String>,
    /// A merge or squash commit's first line instead of the default.
    pub title: Option<String>,
    /// Text added to the commit's message.
    pub message: Option<String>,
}

/// Why a merge did not happen (nothing moved).
#[derive(Debug, thiserror::Error)]
pub enum MergeRefused {
    #[error("pull request {0} is {1}: only an open one can be merged")]
    NotOpen(u64, &'static str),
    #[error("this repository does not offer {0} as a merge method; its settings choose which")]
    MethodOff(&'static str),
    #[error("there is no branch {0:?}; push it again, or close the pull request")]
    NoBranch(String),
    #[error(
        "the {which} branch moved since the page was shown (it was {shown}, it is {now}); look again and merge then"
    )]
    Moved {
        which: &'static str,
        shown: String,
        now: String,
    },
    #[error("the merge has conflicts in: {}; resolve them on the source branch and push", .0.join(", "))]
    Conflicts(Vec<String>),
    #[error(
        "{target} is not an ancestor of the source's head: a fast-forward is not possible; merge or squash instead, or rebase the source"
    )]
    NotFastForward { target: String },
    #[error("the source and target branches have no commit in common")]
    Unrelated,
    #[error(
        "the target branch already has every commit of the source branch: there is nothing to merge"
    )]
    NothingToMerge,
    #[error("{0}")]
    Protected(String),
    /// `access` refused (the caller answers it as it answers denials).
    #[error("the merge is not allowed")]
    Denied(Denied),
    #[error("{0}; try again shortly")]
    Held(#[from] vole_access::pushes::HeldError),
    /// Another merge of the same pull request is under way.
    #[error("{0}")]
    Busy(String),
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error("the merge failed: {0}")]
    Failed(String),
}

impl From<vole_git::BoundedError> for MergeRefused {
    fn from(e: vole_git::BoundedError) -> Self {
        MergeRefused::Failed(vole_stdx::error_chain::Chain(&e).to_string())
    }
}

impl From<MergeError> for MergeRefused {
    fn from(e: MergeError) -> Self {
        MergeRefused::Failed(vole_stdx::error_chain::Chain(&e).to_string())
    }
}

/// Where a pull request's two branches are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tips {
    pub source: ObjectId,
    pub target: ObjectId,
}

/// What merging a pull request now would give (its page's merge box).
#[derive(Debug, Clone)]
pub struct Preview {
    pub tips: Tips,
    pub merge: TestMerge,
    /// The target is an ancestor of the source's head.
    pub fast_forward: bool,
    /// The source's head is on the target already.
    pub merged_already: bool,
}

/// Stops here when the failpoint `name` is armed (debug builds only): the
/// line on stderr tells a test it may kill the server now.
fn failpoint(name: &str) {
    #[cfg(debug_assertions)]
    if std::env::var("VOLE_FAILPOINT").is_ok_and(|armed| armed == name) {
        eprintln!("failpoint {name}: stopped");
        loop {
            std::thread::park();
        }
    }
    let _ = name;
}

fn intent_phase(method: MergeMethod) -> Phase {
    match method {
        MergeMethod::Merge => Phase::MergeIntent,
        MergeMethod::FastForwardOnly => Phase::FastForwardIntent,
        MergeMethod::Squash => Phase::SquashIntent,
    }
}

fn state_name(state: ChangeState) -> &'static str {
    match state {
        ChangeState::Open => "open",
        ChangeState::Merged => "merged",
        ChangeState::Closed => "closed",
    }
}

impl ControlState {
    /// The commit `branch` of `repo` is at.
    fn branch_tip(&self, repo: &RepoName, branch: &str) -> Result<ObjectId, MergeRefused> {
        let spec = format!("refs/heads/{branch}^{{commit}}");
        let (out, status, _) = self.git.run_bounded_env(
            &self.repos.path(repo),
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &spec,
            ],
            &[],
            vole_git::Bounds {
                max_output: 4096,
                deadline: MERGE_DEADLINE,
            },
        )?;
        let text = String::from_utf8_lossy(&out.stdout);
        match ObjectId::from_hex(text.trim().as_bytes()) {
            Ok(id) if status.success() => Ok(id),
            _ => Err(MergeRefused::NoBranch(branch.to_string())),
        }
    }

    /// Where `change`'s branches are in `repo`.
    pub fn tips(&self, repo: &RepoName, change: &Change) -> Result<Tips, MergeRefused> {
        Ok(Tips {
            source: self.branch_tip(repo, &change.source_branch)?,
            target: self.branch_tip(repo, &change.target_branch)?,
        })
    }

    /// What merging `change` now would give, its git runs within
    /// `deadline` together (a page's read deadline). Blocking; writes
    /// nothing to the repo (the test merge's trees go to a scratch
    /// directory, dropped after).
    pub fn preview(
        &self,
        repo: &RepoName,
        change: &Change,
        deadline: Duration,
    ) -> Result<Preview, MergeRefused> {
        let started = std::time::Instant::now();
        let left = || deadline.saturating_sub(started.elapsed());
        let tips = self.tips(repo, change)?;
        let path = self.repos.path(repo);
        let merged_already = self
            .git
            .is_ancestor(&path, tips.source, tips.target, left())?;
        let fast_forward = self
            .git
            .is_ancestor(&path, tips.target, tips.source, left())?;
        let scratch = self
            .repos
            .scratch("preview-")
            .map_err(|e| MergeRefused::Failed(format!("cannot make a scratch directory: {e}")))?;
        let merge = self.git.test_merge(
            &path,
            (tips.target, tips.source),
            left(),
            Some(scratch.path()),
        )?;
        Ok(Preview {
            tips,
            merge,
            fast_forward,
            merged_already,
        })
    }

    /// A person as the merge's commits name them: their display name (or
    /// login) and email.
    fn signature(&self, user: &str) -> Signature {
        let found = self.accounts.user(user).ok().flatten();
        let name = found
            .as_ref()
            .map(|u| u.full_name.trim().to_string())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| user.to_string());
        let email = found
            .map(|u| u.email)
            .filter(|e| !e.trim().is_empty())
            .unwrap_or_else(|| format!("{user}@noreply.invalid"));
        Signature::new(&name, &email)
    }

    /// The subjects of the commits `source` has that `target` has not,
    /// oldest first, at most [`MAX_SQUASH_LISTED`].
    fn squashed_subjects(&self, repo: &RepoName, tips: Tips) -> Result<Vec<String>, MergeRefused> {
        let range = format!("{}..{}", tips.target, tips.source);
        let out = self.git.run_bounded(
            &self.repos.path(repo),
            &["log", "--reverse", "--format=%s", &range],
            vole_git::Bounds {
                max_output: 1 << 20,
                deadline: MERGE_DEADLINE,
            },
        )?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut subjects: Vec<String> = text.lines().map(str::to_string).collect();
        if subjects.len() > MAX_SQUASH_LISTED {
            let more = subjects.len() - MAX_SQUASH_LISTED;
            subjects.truncate(MAX_SQUASH_LISTED);
            subjects.push(format!("... and {more} more"));
        }
        Ok(subjects)
    }

    /// The commit the target moves to, by `method`. Blocking.
    fn new_target(
        &self,
        repo: &RepoName,
        change: &Change,
        (tips, method): (Tips, MergeMethod),
        ask: &MergeAsk,
        merger: &str,
    ) -> Result<ObjectId, MergeRefused> {
        let path = self.repos.path(repo);
        if self
            .git
            .is_ancestor(&path, tips.source, tips.target, MERGE_DEADLINE)?
        {
            return Err(MergeRefused::NothingToMerge);
        }
        if method == MergeMethod::FastForwardOnly {
            return if self
                .git
                .is_ancestor(&path, tips.target, tips.source, MERGE_DEADLINE)?
            {
                Ok(tips.source)
            } else {
                Err(MergeRefused::NotFastForward {
                    target: change.target_branch.clone(),
                })
            };
        }
        let tree =
            match self
                .git
                .test_merge(&path, (tips.target, tips.source), MERGE_DEADLINE, None)?
            {
                TestMerge::Clean(tree) => tree,
                TestMerge::Conflicts(paths) => return Err(MergeRefused::Conflicts(paths)),
                TestMerge::Unrelated => return Err(MergeRefused::Unrelated),
            };
        let committer = self.signature(merger);
        let extra = ask
            .message
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty());
        let (message, author, parents) = match method {
            MergeMethod::Squash => {
                let title = ask
                    .title
                    .clone()
                    .unwrap_or_else(|| format!("{} (#{})", change.title.trim(), change.number));
                let mut message = format!("{}\n\n", title.trim());
                for subject in self.squashed_subjects(repo, tips)? {
                    // A subject as long as a book is listed by its start.
                    let shown: String = subject.chars().take(MAX_SUBJECT_CHARS).collect();
                    message.push_str(&format!("* {shown}\n"));
                }
                if let Some(extra) = extra {
                    message.push_str(&format!("\n{extra}\n"));
                }
                (message, self.signature(&change.author), vec![tips.target])
            }
            _ => {
                let title = ask.title.clone().unwrap_or_else(|| {
                    format!(
                        "Merge pull request '{}' (#{}) from {} into {}",
                        change.title.trim(),
                        change.number,
                        change.source_branch,
                        change.target_branch
                    )
                });
                let mut message = format!("{}\n", title.trim());
                if let Some(extra) = extra {
                    message.push_str(&format!("\n{extra}\n"));
                }
                (message, committer.clone(), vec![tips.target, tips.source])
            }
        };
        Ok(self.git.commit_tree(
            &path,
            tree,
            &parents,
            &message,
            (&author, &committer),
            MERGE_DEADLINE,
        )?)
    }

    /// Merges pull request `ask.number` of `repo` as `principal` asks (see
    /// the module doc); the pull request as merged.
    pub async fn merge_pull(
        self: &Arc<Self>,
        principal: &Principal,
        repo: &ResolvedRepo,
        ask: MergeAsk,
        client: &str,
    ) -> Result<Change, MergeRefused> {
        self.access
            .check(principal, Action::Push, repo)
            .and_then(|()| self.access.check_merge(principal, repo))
            .map_err(MergeRefused::Denied)?;
        let mut ticket = self
            .access
            .pushes()
            .register(vole_access::pushes::RegisteredPush {
                repo: (**repo).clone(),
                principal: principal.clone(),
                client: client.to_string(),
                span: tracing::Span::current(),
                created: Default::default(),
            });
        ticket.start(repo, HELD_WAIT).await?;
        let push = PushContext {
            repo: repo.to_string(),
            push_id: ticket.id(),
            actor: principal.name().to_string(),
            client: client.to_string(),
        };
        let (state, principal, repo) = (self.clone(), principal.clone(), repo.clone());
        // The ticket goes with the work: a client that hangs up drops this
        // future, not the merge, which keeps the repo's pushes counted
        // (a gc or a deletion waits for it) until it is done.
        tokio::task::spawn_blocking(move || {
            let _ticket = ticket;
            state.merge_blocking(&principal, &repo, &ask, &push)
        })
        .await
        .map_err(|e| MergeRefused::Failed(e.to_string()))?
    }

    fn merge_blocking(
        &self,
        principal: &Principal,
        resolved: &ResolvedRepo,
        ask: &MergeAsk,
        push: &PushContext,
    ) -> Result<Change, MergeRefused> {
        // The repo the decision was about, not one created under its name
        // since (the push ticket now keeps a deletion waiting).
        let now = self.meta.incarnation(resolved)?;
        if now.as_ref().map(|i| i.id()) != resolved.incarnation.as_ref().map(|i| i.id()) {
            return Err(MergeRefused::Meta(MetaError::NoRepo(resolved.to_string())));
        }
        let repo: &RepoName = resolved;
        let change = self.meta.change(repo, ask.number)?;
        if change.state != ChangeState::Open {
            return Err(MergeRefused::NotOpen(ask.number, state_name(change.state)));
        }
        if let Some(shown) = &ask.target_branch
            && *shown != change.target_branch
        {
            return Err(MergeRefused::Moved {
                which: "target",
                shown: shown.clone(),
                now: change.target_branch.clone(),
            });
        }
        let offered = self.meta.settings(repo)?.merge;
        let method = ask.method.unwrap_or(offered.default);
        if !offered.methods.contains(&method) {
            return Err(MergeRefused::MethodOff(method.as_str()));
        }
        let tips = self.tips(repo, &change)?;
        for (which, shown, now) in [
            ("source", &ask.head, tips.source),
            ("target", &ask.target, tips.target),
        ] {
            if let Some(shown) = shown
                && !now.to_string().eq_ignore_ascii_case(shown.trim())
            {
                return Err(MergeRefused::Moved {
                    which,
                    shown: shown.clone(),
                    now: now.to_string(),
                });
            }
        }
        let new = self.new_target(repo, &change, (tips, method), ask, principal.name())?;
        let update = RefUpdate {
            ref_name: format!("refs/heads/{}", change.target_branch),
            old: tips.target.to_string(),
            new: new.to_string(),
            fast_forward: Some(true),
        };
        if let Some(refused) = self
            .access
            .check_ref_updates(principal, repo, std::slice::from_ref(&update))
            .into_iter()
            .next()
        {
            return Err(MergeRefused::Protected(refused.reason));
        }
        let head = tips.source.to_string();
        self.land(repo, &change, (&update, method, &head), push)
    }

    /// Steps 4 to 6 of the module doc.
    fn land(
        &self,
        repo: &RepoName,
        change: &Change,
        (update, method, head): (&RefUpdate, MergeMethod, &str),
        push: &PushContext,
    ) -> Result<Change, MergeRefused> {
        let record = |e: vole_hooks::recorder::RecorderError| MergeRefused::Failed(e.to_string());
        self.recorder
            .record_merge_intent(push, change.number, update, intent_phase(method))
            .map_err(|e| match e {
                vole_hooks::recorder::RecorderError::Busy(why) => MergeRefused::Busy(why),
                e => record(e),
            })?;
        // Open still, now that no other merge of it can start: one that
        // marked it merged since this one read it has settled its intent
        // only after that mark, so it is seen here.
        match self.meta.change(repo, change.number) {
            Ok(now) if now.state == ChangeState::Open => {}
            now => {
                self.settle(&push.repo, change.number);
                return Err(match now {
                    Ok(now) => MergeRefused::NotOpen(change.number, state_name(now.state)),
                    Err(e) => e.into(),
                });
            }
        }
        failpoint("merge-before-move");
        let moves = std::slice::from_ref(update);
        // Before the move, a failure drops the intent: nothing moved.
        let dropped = |refused: MergeRefused| {
            self.settle(&push.repo, change.number);
            refused
        };
        self.recorder
            .prepared(push, moves)
            .map_err(record)
            .map_err(dropped)?;
        let id = |hex: &str| {
            ObjectId::from_hex(hex.as_bytes())
                .map_err(|e| dropped(MergeRefused::Failed(e.to_string())))
        };
        let (new, old) = (id(&update.new)?, id(&update.old)?);
        let moved = self.git.move_ref(
            &self.repos.path(repo),
            &update.ref_name,
            new,
            old,
            MERGE_DEADLINE,
        );
        if let Err(e) = moved {
            let aborted = self.recorder.outcome(push, moves, Outcome::Aborted);
            self.settle(&push.repo, change.number);
            aborted.map_err(record)?;
            return Err(match e {
                MergeError::Moved { .. } => MergeRefused::Moved {
                    which: "target",
                    shown: update.old.clone(),
                    now: "elsewhere".into(),
                },
                e => e.into(),
            });
        }
        self.recorder
            .outcome(push, moves, Outcome::Committed)
            .map_err(record)?;
        failpoint("merge-after-move");
        let merged = self.meta.mark_merged(
            repo,
            change.number,
            MergeMark {
                commit: &update.new,
                method,
                onto: &update.old,
                head: Some(head),
            },
            &push.actor,
        )?;
        self.settle(&push.repo, change.number);
        Ok(merged)
    }

    /// Settles a merge's intent; one that cannot be settled now is looked
    /// at again at the next start.
    fn settle(&self, repo: &str, number: u64) {
        if let Err(e) = self.recorder.settle_merge(repo, number) {
            tracing::warn!(repo, number, error = %e, "a merge's intent stays unsettled until the next start");
        }
    }
}
