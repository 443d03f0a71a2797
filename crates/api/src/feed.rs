//! The webhooks' feed: reads the ref log and the meta log from outside
//! their writers ([`vole_log::Tail`]), from where it last recorded, and
//! records each acknowledged ref move and thread write as an event, with
//! its Gitea payload, in the webhooks log ([`vole_webhooks::queue`]): its
//! order is the one order deliveries follow. Only what is durable in its
//! log is fed (a power cut cannot take back what a hook was sent), and
//! every event is recorded with how far each log was read, so a restart
//! goes on where the last run stopped, feeding nothing twice; the two
//! logs keep what the feed has not read through their compactions
//! ([`vole_log::Log::hold_for_reader`]).
//!
//! What becomes an event: a ref move of `refs/heads/*` or `refs/tags/*`
//! committed by a push or a merge (or found moved at start): `push`, and
//! `create` or `delete`, at most [`MAX_REF_EVENTS`] refs a push, then,
//! once the push is quiet for a second, one that says how many it left
//! out; an issue or pull request written
//! (`opened`, `edited`, `closed`, `reopened`; a merge is `closed` with
//! `merged: true`, as Gitea sends it), a comment written (`created`,
//! `edited`, `deleted`; a pull request's branch moving is
//! `pull_request` `synchronized`).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vole_access::{Principal, ResolvedRepo};
use vole_git::repos::{Incarnation, RepoName};
use vole_hooks::{Phase, RefMove};
use vole_log::{Entry, Tail};
use vole_meta::MetaWrite;
use vole_meta::entity::{Change, ChangeState, Comment, Entity, Issue, IssueState, ThreadKind};
use vole_webhooks::queue::{NewEvent, Queue};

use crate::ApiState;
use crate::gitea::objects::Base;
use crate::gitea::payloads::{self, RefChange};
use crate::gitea::shape::Shaper;

/// Refs of one push given events; past it, one event says how many more.
pub const MAX_REF_EVENTS: usize = 100;

/// The feed thread's nice value: below requests and pushes.
const FEED_NICE: i32 = 10;

/// How often the logs are read for new entries.
const POLL: Duration = Duration::from_millis(20);
/// How often what the feed recorded is made durable (one sync for all
/// records since; the ref and meta logs keep what it covers till then).
const SYNC_EVERY: Duration = Duration::from_millis(500);

/// A read that found no event still records how far it read, at most
/// this often (so the logs' compactions may drop what it passed).
const FED_EVERY: Duration = Duration::from_secs(10);

/// The feed's state between reads.
pub struct Feed {
    api: Arc<ApiState>,
    queue: Arc<Queue>,
    refs: Tail<RefMove>,
    metas: Tail<MetaWrite>,
    /// Read but not yet durable in their logs.
    waiting_refs: VecDeque<(u64, Vec<RefMove>)>,
    waiting_metas: VecDeque<(u64, Vec<MetaWrite>)>,
    fed: (u64, u64),
    recorded_fed: (u64, u64),
    recorded_at: Instant,
    synced_at: Instant,
    pushes: PushCounts,
    /// Each repo name's incarnation as the ref log says, as far as read
    /// (`born` rows): a move belongs to the repo its name was then.
    born: HashMap<String, String>,
    /// Links in payloads start with it (`--public-url`, or the address
    /// the server listens on).
    base: String,
}

impl Feed {
    /// Where the last run stopped, or, the first time, the logs' ends (no
    /// events for what happened before webhooks). Blocking.
    pub fn start(
        api: Arc<ApiState>,
        queue: Arc<Queue>,
        base: String,
    ) -> Result<Feed, vole_log::LogError> {
        let ref_log = api.recorder.log();
        let meta_log = api.meta.log();
        let fed = match queue.fed() {
            Some(fed) => fed,
            None => {
                let fed = (ref_log.watermarks().1, meta_log.watermarks().1);
                queue.record(Vec::new(), fed)?;
                queue.sync()?;
                fed
            }
        };
        ref_log.hold_for_reader(queue.ref_hold.clone());
        meta_log.hold_for_reader(queue.meta_hold.clone());
        Ok(Feed {
            refs: Tail::new(ref_log.path()),
            metas: Tail::new(meta_log.path()),
            api,
            queue,
            waiting_refs: VecDeque::new(),
            waiting_metas: VecDeque::new(),
            fed,
            recorded_fed: fed,
            recorded_at: Instant::now(),
            synced_at: Instant::now(),
            pushes: PushCounts::default(),
            born: HashMap::new(),
            base,
        })
    }

    /// Back to what the webhooks log holds: the logs read again from the
    /// positions last recorded (after a failed record, or a panic).
    fn rewind(&mut self) {
        self.fed = self.recorded_fed;
        self.refs = Tail::new(self.api.recorder.log().path());
        self.metas = Tail::new(self.api.meta.log().path());
        self.waiting_refs.clear();
        self.waiting_metas.clear();
        self.pushes = PushCounts::default();
        self.born.clear();
    }

    /// Runs the feed on its own thread until the process ends.
    pub fn spawn(mut self) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("vole-webhooks-feed".into())
            .spawn(move || {
                // Below the pushes: the feed's work (and the git children it
                // starts, which inherit it) takes the cores they leave. On
                // Linux a nice value is the thread's, not the process's.
                if let Err(e) = rustix::process::setpriority_process(None, FEED_NICE) {
                    tracing::debug!(error = %e, "webhooks: the feed keeps its priority");
                }
                // The payloads read the repos' issues and pull requests:
                // fed once the start's background read has them all, not
                // dropped while it is under way.
                if !self.api.meta.wait_until_read() {
                    return;
                }
                loop {
                    let polled =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.poll()));
                    let failed = match polled {
                        Ok(Ok(_)) => false,
                        Ok(Err(e)) => {
                            tracing::error!(error = %vole_stdx::error_chain::Chain(&e), "webhooks: the feed could not read or record; reading again from where it last recorded");
                            true
                        }
                        Err(_) => {
                            tracing::error!("webhooks: the feed panicked; reading again from where it last recorded");
                            true
                        }
                    };
                    if failed {
                        self.rewind();
                        std::thread::sleep(Duration::from_secs(1));
                    }
                    std::thread::sleep(POLL);
                }
            })
            .map(drop)
    }

    /// One read of both logs: what is new and durable becomes events,
    /// recorded in one transaction. Blocking.
    pub fn poll(&mut self) -> Result<usize, vole_log::LogError> {
        let (fed_ref, fed_meta) = self.fed;
        let (waiting_refs, born) = (&mut self.waiting_refs, &mut self.born);
        self.refs.poll(|entry| match entry {
            Entry::Txn { seq, rows } if seq > fed_ref => waiting_refs.push_back((seq, rows)),
            // What was fed before: only which repo each name was.
            Entry::Txn { rows, .. } | Entry::Checkpoint(rows) => note_births(born, &rows),
        })?;
        let waiting_metas = &mut self.waiting_metas;
        self.metas.poll(|entry| {
            if let Entry::Txn { seq, rows } = entry
                && seq > fed_meta
            {
                waiting_metas.push_back((seq, rows));
            }
        })?;
        let durable_refs = self.api.recorder.log().watermarks().1;
        let durable_metas = self.api.meta.log().watermarks().1;
        let mut refs = VecDeque::new();
        while let Some((seq, _)) = self.waiting_refs.front()
            && *seq <= durable_refs
        {
            let (seq, rows) = self.waiting_refs.pop_front().expect("a front");
            self.fed.0 = seq;
            refs.push_back(rows);
        }
        let mut metas = VecDeque::new();
        while let Some((seq, _)) = self.waiting_metas.front()
            && *seq <= durable_metas
        {
            let (seq, rows) = self.waiting_metas.pop_front().expect("a front");
            self.fed.1 = seq;
            metas.push_back(rows);
        }
        let taken = merged(refs, metas);
        let events = self.events(taken);
        let count = events.len();
        let moved = self.fed != self.recorded_fed;
        if count > 0 || (moved && self.recorded_at.elapsed() >= FED_EVERY) {
            self.queue.record(events, self.fed)?;
            self.recorded_fed = self.fed;
            self.recorded_at = Instant::now();
        }
        if self.synced_at.elapsed() >= SYNC_EVERY {
            self.queue.sync()?;
            self.synced_at = Instant::now();
        }
        if count == 0 && moved {
            // Read through `fed` with no event left unrecorded: the logs
            // may drop it. (A restart from the position recorded last
            // reads what is left, finds none of it either.)
            self.queue.passed(self.fed);
        }
        Ok(count)
    }

    fn events(&mut self, taken: Vec<Source>) -> Vec<NewEvent> {
        if taken.is_empty() && !self.pushes.owed() {
            return Vec::new();
        }
        let base = Base(self.base.clone());
        let viewer = Principal::Anonymous;
        let shaper = Shaper::new(&self.api, base, &viewer);
        let mut events = Vec::new();
        for source in taken {
            match source {
                Source::Refs(rows) => {
                    note_births(&mut self.born, &rows);
                    let context = (&mut self.pushes, &self.born);
                    push_events(&shaper, &rows, context, &mut events);
                }
                Source::Metas(rows) => {
                    for row in &rows {
                        meta_event(&shaper, row, &mut events);
                    }
                }
            }
        }
        left_out_events(&shaper, &mut self.pushes, &mut events);
        events
    }
}

enum Source {
    Refs(Vec<RefMove>),
    Metas(Vec<MetaWrite>),
}

/// One order across both logs: each log's transactions in their own
/// order, the two runs merged by when each transaction was written.
fn merged(mut refs: VecDeque<Vec<RefMove>>, mut metas: VecDeque<Vec<MetaWrite>>) -> Vec<Source> {
    let time = |rows: Option<&Vec<RefMove>>| rows.and_then(|r| r.first()).map(|r| r.time_ns);
    let meta_time = |rows: Option<&Vec<MetaWrite>>| rows.and_then(|r| r.first()).map(|r| r.time_ns);
    let mut out = Vec::with_capacity(refs.len() + metas.len());
    loop {
        let take_ref = match (time(refs.front()), meta_time(metas.front())) {
            (None, None) => {
                // Empty transactions (none are written) would stop here.
                out.extend(refs.into_iter().map(Source::Refs));
                out.extend(metas.into_iter().map(Source::Metas));
                return out;
            }
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(r), Some(m)) => r <= m,
        };
        if take_ref {
            out.extend(refs.pop_front().map(Source::Refs));
        } else {
            out.extend(metas.pop_front().map(Source::Metas));
        }
    }
}

/// The repo of `name` if it is still `incarnation` on disk.
fn live_repo(api: &ApiState, name: &str, incarnation: &str) -> Option<ResolvedRepo> {
    let name = RepoName::parse(name).ok()?;
    let on_disk = Incarnation::read(&api.repos.path(&name)).ok()??;
    if !incarnation.is_empty() && on_disk.id() != incarnation {
        return None;
    }
    Some(ResolvedRepo {
        name,
        incarnation: Some(on_disk),
    })
}

/// How many refs each recent push has given events for: git moves the
/// refs of a push that is not atomic one transaction each, so the bound
/// is kept per push, across transactions and reads.
#[derive(Default)]
pub struct PushCounts {
    pushes: HashMap<(String, u64), PushCount>,
}

struct PushCount {
    refs: usize,
    left_out: usize,
    actor: String,
    last: Instant,
}

/// A push quiet this long is over: its count of refs left out is sent.
const PUSH_OVER: Duration = Duration::from_secs(1);
/// Pushes remembered at most.
const PUSHES_KEPT: usize = 4096;

impl PushCounts {
    /// Whether the push's next ref gets events (counted either way).
    fn take(&mut self, repo: &str, push: u64, actor: &str) -> bool {
        if self.pushes.len() >= PUSHES_KEPT {
            // The oldest quiet ones first; a summary still owed is sent
            // by `over` before it could be dropped here in practice.
            self.pushes
                .retain(|_, c| c.left_out > 0 || c.last.elapsed() < PUSH_OVER);
        }
        let count = self
            .pushes
            .entry((repo.to_string(), push))
            .or_insert_with(|| PushCount {
                refs: 0,
                left_out: 0,
                actor: actor.to_string(),
                last: Instant::now(),
            });
        count.last = Instant::now();
        count.refs += 1;
        if count.refs > MAX_REF_EVENTS {
            count.left_out += 1;
            return false;
        }
        true
    }

    /// The pushes that are over and left refs out: (repo, pusher, how
    /// many); quiet pushes are forgotten.
    fn over(&mut self) -> Vec<(String, String, usize)> {
        let mut over = Vec::new();
        self.pushes.retain(|(repo, _), c| {
            if c.last.elapsed() < PUSH_OVER {
                return true;
            }
            if c.left_out > 0 {
                over.push((repo.clone(), c.actor.clone(), c.left_out));
            }
            false
        });
        over
    }

    fn owed(&self) -> bool {
        self.pushes.values().any(|c| c.left_out > 0)
    }
}

/// One transaction of the ref log: a push's (or a merge's) moves.
fn push_events(
    s: &Shaper<'_>,
    rows: &[RefMove],
    (counts, born): (&mut PushCounts, &HashMap<String, String>),
    events: &mut Vec<NewEvent>,
) {
    let moves: Vec<&RefMove> = rows
        .iter()
        .filter(|r| matches!(r.phase, Phase::Committed | Phase::Reconciled))
        .filter(|r| r.old != r.new)
        .filter(|r| r.ref_name.starts_with("refs/heads/") || r.ref_name.starts_with("refs/tags/"))
        .collect();
    let Some(first) = moves.first() else {
        return;
    };
    // The repo the name was when these moved; gone since (deleted, or
    // another repo of the name now): no events.
    let incarnation = born.get(&first.repo).map_or("", String::as_str);
    let Some(repo) = live_repo(s.app, &first.repo, incarnation) else {
        return;
    };
    if !s.app.webhooks.wanted_by_any(repo.incarnation_id()) {
        return;
    }
    for row in moves {
        if !counts.take(&row.repo, row.push_id, &row.actor) {
            continue;
        }
        let change = RefChange {
            ref_name: &row.ref_name,
            old: row.old.as_deref(),
            new: row.new.as_deref(),
            pusher: &row.actor,
        };
        if row.old.is_none() || row.new.is_none() {
            let name = if row.new.is_some() {
                "create"
            } else {
                "delete"
            };
            let payload = payloads::create_or_delete(s, &repo, &change);
            events.push(ref_event(&repo, name, &row.ref_name, payload));
        }
        if row.new.is_some() {
            let payload = payloads::push(s, &repo, &change);
            events.push(ref_event(&repo, "push", &row.ref_name, payload));
        }
    }
}

/// Each repo name's incarnation, from the `born` and `adopted` rows.
fn note_births(born: &mut HashMap<String, String>, rows: &[RefMove]) {
    for row in rows {
        if matches!(row.phase, Phase::Born | Phase::Adopted) {
            born.insert(row.repo.clone(), row.ref_name.clone());
        }
    }
}

/// The events that say how many refs each push that is over left out.
fn left_out_events(s: &Shaper<'_>, counts: &mut PushCounts, events: &mut Vec<NewEvent>) {
    for (repo, actor, left_out) in counts.over() {
        let Some(repo) = live_repo(s.app, &repo, "") else {
            continue;
        };
        let payload = payloads::refs_left_out(s, &repo, &actor, left_out);
        events.push(ref_event(&repo, "push", "", payload));
    }
}

fn ref_event(
    repo: &ResolvedRepo,
    name: &str,
    ref_name: &str,
    payload: serde_json::Value,
) -> NewEvent {
    NewEvent {
        incarnation: repo.incarnation_id().to_string(),
        repo: repo.to_string(),
        event: name.to_string(),
        ref_name: ref_name.to_string(),
        payload: payload.to_string(),
    }
}

/// A thread's or a comment's write as its event, if it is one.
fn meta_event(s: &Shaper<'_>, row: &MetaWrite, events: &mut Vec<NewEvent>) {
    if row.incarnation.is_empty() || !matches!(row.kind.as_str(), "issue" | "change" | "comment") {
        return;
    }
    let Ok(entity) = serde_json::from_str::<Entity>(&row.body) else {
        return;
    };
    if !s.app.webhooks.wanted_by_any(&row.incarnation) {
        return;
    }
    let Some(repo) = live_repo(s.app, &row.repo, &row.incarnation) else {
        return;
    };
    let (name, payload) = match &entity {
        Entity::Issue(issue) => (
            "issues",
            payloads::issue(s, &repo, issue_action(issue), issue),
        ),
        Entity::Change(change) => {
            let action = change_action(change);
            ("pull_request", payloads::pull(s, &repo, action, change))
        }
        Entity::Comment(comment) => match comment_event(s, &repo, comment) {
            Some(named) => named,
            None => return,
        },
        _ => return,
    };
    events.push(NewEvent {
        incarnation: row.incarnation.clone(),
        repo: repo.to_string(),
        event: name.to_string(),
        ref_name: String::new(),
        payload: payload.to_string(),
    });
}

/// What the write of this version of a thread did, from the document
/// alone: its first version opened it; one whose `updated_at` is its
/// `state_changed_at` changed its state; any other edited it.
fn thread_action(replaces: Option<u64>, state_changed: bool, open: bool) -> &'static str {
    match (replaces, state_changed, open) {
        (None, _, _) => "opened",
        (Some(_), true, true) => "reopened",
        (Some(_), true, false) => "closed",
        (Some(_), false, _) => "edited",
    }
}

fn issue_action(issue: &Issue) -> &'static str {
    let changed = issue.state_changed_at.as_deref() == Some(issue.updated_at.as_str());
    thread_action(issue.replaces, changed, issue.state == IssueState::Open)
}

fn change_action(change: &Change) -> &'static str {
    let changed = change.state_changed_at.as_deref() == Some(change.updated_at.as_str());
    thread_action(change.replaces, changed, change.state == ChangeState::Open)
}

/// A comment's event: `issue_comment`, or for a pull request's branch
/// moving (a timeline event, not a person's words) `pull_request`
/// `synchronized`.
fn comment_event(
    s: &Shaper<'_>,
    repo: &ResolvedRepo,
    comment: &Comment,
) -> Option<(&'static str, serde_json::Value)> {
    if comment.event.is_some() {
        if comment.thread_kind != ThreadKind::Change || comment.replaces.is_some() {
            return None;
        }
        let (_, number) = s.app.meta.thread_number(repo, &comment.thread).ok()??;
        let change =
            payloads::read_for_event(repo, "a pull request", s.app.meta.change(repo, number))?;
        return Some((
            "pull_request",
            payloads::pull(s, repo, "synchronized", &change),
        ));
    }
    let action = if comment.replaces.is_none() {
        "created"
    } else if comment.deleted {
        "deleted"
    } else {
        "edited"
    };
    Some((
        "issue_comment",
        payloads::comment(s, repo, action, comment)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::thread_action;

    #[test]
    fn a_threads_action_is_told_by_its_document_alone() {
        assert_eq!(thread_action(None, false, true), "opened");
        assert_eq!(thread_action(Some(1), true, false), "closed");
        assert_eq!(thread_action(Some(2), true, true), "reopened");
        assert_eq!(thread_action(Some(3), false, false), "edited");
        assert_eq!(thread_action(Some(3), false, true), "edited");
    }
}
