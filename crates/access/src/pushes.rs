//! The pushes under way, each registered by the server when it starts:
//! the push id the hooks report with is an unguessable random number
//! handed out here, and who pushed, from where, is what was registered
//! under it, never what the hook's environment says. A report naming an
//! id that is not registered (a forged or stale one) is refused.
//!
//! A repo's pushes can be held ([`Pushes::hold`], `vole repo gc`): a push
//! counts as running from when its git child may start
//! ([`PushTicket::start`]) until its ticket drops, a hold waits for the
//! running ones to end, and none starts while it lives. (From the moment
//! git moves a push's objects out of its quarantine until its refs move,
//! they are unreachable: a prune then would delete them.)

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::Principal;
use vole_git::repos::RepoName;

/// What the server knows of a push under way.
#[derive(Debug, Clone)]
pub struct RegisteredPush {
    pub repo: RepoName,
    pub principal: Principal,
    /// The client's address.
    pub client: String,
    /// The push's HTTP request span: the hooks' reports are handled in it,
    /// so their log lines carry that request's id.
    pub span: tracing::Span,
    /// The branches its committed transactions created so far (git may
    /// commit a push one ref at a time), and whether it pointed HEAD.
    pub created: Arc<Mutex<CreatedBranches>>,
}

/// See [`RegisteredPush::created`].
#[derive(Debug, Default)]
pub struct CreatedBranches {
    pub names: Vec<String>,
    pub head_set: bool,
}

impl RegisteredPush {
    /// The actor recorded in the log: the user's name, or `anonymous`.
    pub fn actor(&self) -> String {
        self.principal.name().to_string()
    }
}

/// Every push under way, by id; and per repo, the pushes running and
/// whether they are held.
#[derive(Debug, Default)]
pub struct Pushes {
    live: Mutex<HashMap<u64, RegisteredPush>>,
    gates: Mutex<HashMap<RepoName, Gate>>,
    /// Wakes a hold waiting for running pushes to end.
    ended: Condvar,
    /// Wakes pushes waiting for a hold to end.
    released: tokio::sync::Notify,
}

/// One repo's pushes: how many run, whether a hold lives.
#[derive(Debug, Default)]
struct Gate {
    running: usize,
    held: bool,
}

/// A registration; the push is forgotten when this is dropped (its git
/// child has exited).
#[derive(Debug)]
pub struct PushTicket {
    id: u64,
    pushes: Arc<Pushes>,
    /// The repo it runs in, once [`PushTicket::start`] let it.
    running: Option<RepoName>,
}

/// Why a push may not start, or a hold cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum HeldError {
    #[error("{0}'s pushes are held (a gc is under way)")]
    Held(RepoName),
    #[error("{repo} still has {running} pushes running after {waited:?}")]
    Busy {
        repo: RepoName,
        running: usize,
        waited: Duration,
    },
}

impl PushTicket {
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Counts the push as running in `repo` until the ticket drops, once no
    /// hold of that repo's pushes lives; waits at most `wait` for one to
    /// end. Called before the push's git child starts.
    pub async fn start(&mut self, repo: &RepoName, wait: Duration) -> Result<(), HeldError> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before the gate is looked at: a release between
            // the two still wakes it.
            let released = self.pushes.released.notified();
            let mut released = std::pin::pin!(released);
            released.as_mut().enable();
            {
                let mut gates = self.pushes.gates.lock();
                let gate = gates.entry(repo.clone()).or_default();
                if !gate.held {
                    gate.running += 1;
                    self.running = Some(repo.clone());
                    return Ok(());
                }
            }
            if tokio::time::timeout_at(deadline, released).await.is_err() {
                return Err(HeldError::Held(repo.clone()));
            }
        }
    }
}

impl Drop for PushTicket {
    fn drop(&mut self) {
        self.pushes.live.lock().remove(&self.id);
        if let Some(repo) = self.running.take() {
            let mut gates = self.pushes.gates.lock();
            if let Some(gate) = gates.get_mut(&repo) {
                gate.running = gate.running.saturating_sub(1);
                if gate.running == 0 && !gate.held {
                    gates.remove(&repo);
                }
            }
            self.pushes.ended.notify_all();
        }
    }
}

/// A hold of one repo's pushes ([`Pushes::hold`]); released when dropped.
#[derive(Debug)]
pub struct PushHold {
    repo: RepoName,
    pushes: Arc<Pushes>,
}

impl Drop for PushHold {
    fn drop(&mut self) {
        self.pushes.release(&self.repo);
    }
}

impl Pushes {
    /// Registers a push and returns its ticket: a random 63-bit id (from
    /// rand's CSPRNG), never 0 (the log's id of restored moves).
    pub fn register(self: &Arc<Self>, push: RegisteredPush) -> PushTicket {
        let mut live = self.live.lock();
        let id = loop {
            let id = rand::random::<u64>() >> 1;
            if id != 0 && !live.contains_key(&id) {
                break id;
            }
        };
        live.insert(id, push);
        PushTicket {
            id,
            pushes: self.clone(),
            running: None,
        }
    }

    /// Holds `repo`'s pushes: none starts while the hold lives (they wait
    /// for it, [`PushTicket::start`]). Blocking: waits at most `wait` for
    /// the pushes running to end; past it nothing is held and the error
    /// says how many still run. One hold of a repo at a time.
    pub fn hold(self: &Arc<Self>, repo: &RepoName, wait: Duration) -> Result<PushHold, HeldError> {
        let deadline = Instant::now() + wait;
        let mut gates = self.gates.lock();
        let gate = gates.entry(repo.clone()).or_default();
        if gate.held {
            return Err(HeldError::Held(repo.clone()));
        }
        gate.held = true;
        loop {
            let running = gates.get(repo).map_or(0, |gate| gate.running);
            if running == 0 {
                return Ok(PushHold {
                    repo: repo.clone(),
                    pushes: self.clone(),
                });
            }
            if self.ended.wait_until(&mut gates, deadline).timed_out() {
                drop(gates);
                self.release(repo);
                return Err(HeldError::Busy {
                    repo: repo.clone(),
                    running,
                    waited: wait,
                });
            }
        }
    }

    fn release(&self, repo: &RepoName) {
        let mut gates = self.gates.lock();
        if let Some(gate) = gates.get_mut(repo) {
            gate.held = false;
            if gate.running == 0 {
                gates.remove(repo);
            }
        }
        drop(gates);
        self.released.notify_waiters();
    }

    /// The push registered under `id` for `repo`, if one is under way.
    pub fn get(&self, id: u64, repo: &str) -> Option<RegisteredPush> {
        self.live
            .lock()
            .get(&id)
            .filter(|push| push.repo.to_string() == repo)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_is_known_while_its_ticket_lives_and_for_its_repo_only() {
        let pushes = Arc::new(Pushes::default());
        let repo = RepoName::parse("ann/site").unwrap();
        let ticket = pushes.register(RegisteredPush {
            repo: repo.clone(),
            principal: Principal::Anonymous,
            client: "127.0.0.1".into(),
            span: tracing::Span::none(),
            created: Default::default(),
        });
        let id = ticket.id();
        assert!(pushes.get(id, "ann/site").is_some());
        assert!(pushes.get(id, "ann/other").is_none(), "another repo's id");
        assert!(pushes.get(id ^ 1, "ann/site").is_none(), "a guessed id");
        drop(ticket);
        assert!(pushes.get(id, "ann/site").is_none(), "forgotten once done");
    }

    fn ticket(pushes: &Arc<Pushes>, repo: &RepoName) -> PushTicket {
        pushes.register(RegisteredPush {
            repo: repo.clone(),
            principal: Principal::Anonymous,
            client: "127.0.0.1".into(),
            span: tracing::Span::none(),
            created: Default::default(),
        })
    }

    #[tokio::test]
    async fn a_hold_waits_for_running_pushes_and_new_ones_wait_for_it() {
        let pushes = Arc::new(Pushes::default());
        let repo = RepoName::parse("ann/site").unwrap();
        let other = RepoName::parse("ann/other").unwrap();
        let short = Duration::from_millis(50);

        let mut running = ticket(&pushes, &repo);
        running.start(&repo, short).await.unwrap();
        // A push running: no hold within the bound, and nothing held after.
        let refused = pushes.hold(&repo, short).unwrap_err();
        assert!(
            matches!(refused, HeldError::Busy { running: 1, .. }),
            "{refused}"
        );
        let mut next = ticket(&pushes, &repo);
        next.start(&repo, short).await.unwrap();
        drop(next);

        // Once it ends, the hold is had (the waiting hold is woken).
        let holder = {
            let pushes = pushes.clone();
            let repo = repo.clone();
            std::thread::spawn(move || pushes.hold(&repo, Duration::from_secs(10)))
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(running);
        let hold = holder.join().unwrap().unwrap();
        assert!(matches!(pushes.hold(&repo, short), Err(HeldError::Held(_))));

        // Held: a push there waits (and gives up at its bound); another
        // repo's does not.
        let mut waiting = ticket(&pushes, &repo);
        let refused = waiting.start(&repo, short).await.unwrap_err();
        assert!(matches!(refused, HeldError::Held(_)), "{refused}");
        let mut elsewhere = ticket(&pushes, &other);
        elsewhere.start(&other, short).await.unwrap();

        // Released while a push waits: it starts at once.
        let mut waiting = ticket(&pushes, &repo);
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(hold);
        });
        waiting.start(&repo, Duration::from_secs(10)).await.unwrap();
        release.await.unwrap();
        assert_eq!(pushes.gates.lock()[&repo].running, 1);
        drop(waiting);
        drop(elsewhere);
        assert!(pushes.gates.lock().is_empty(), "{:?}", pushes.gates.lock());
    }
}
