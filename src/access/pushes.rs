//! The pushes under way, each registered by the server when it starts:
//! the push id the hooks report with is an unguessable random number
//! handed out here, and who pushed, from where, is what was registered
//! under it, never what the hook's environment says. A report naming an
//! id that is not registered (a forged or stale one) is refused.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::Principal;
use crate::repos::RepoName;

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

/// Every push under way, by id.
#[derive(Debug, Default)]
pub struct Pushes {
    live: Mutex<HashMap<u64, RegisteredPush>>,
}

/// A registration; the push is forgotten when this is dropped (its git
/// child has exited).
#[derive(Debug)]
pub struct PushTicket {
    id: u64,
    pushes: Arc<Pushes>,
}

impl PushTicket {
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for PushTicket {
    fn drop(&mut self) {
        self.pushes.live.lock().remove(&self.id);
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
        }
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
}
