//! A hook as its deliveries need it ([`HookTarget`]): where to, signed
//! with what, which events it takes (its repo or every repo, its events,
//! its branch glob), and each delivery's id.

use sha2::{Digest, Sha256};

use crate::queue::Event;

/// A hook as deliveries need it.
#[derive(Debug, Clone)]
pub struct HookTarget {
    pub id: u64,
    /// The repo's incarnation; empty: the server's hook (every repo).
    pub incarnation: String,
    pub url: String,
    /// `application/x-www-form-urlencoded` (`payload=<json>`), not JSON.
    pub form: bool,
    pub secret: String,
    pub events: Vec<String>,
    /// The branches a push, create or delete is sent for (a glob, as
    /// Gitea's); none: every one.
    pub branch_filter: Option<globset::GlobMatcher>,
    pub active: bool,
    /// When the hook was made (with its id, a delivery id's seed).
    pub created_at: String,
    /// Its document's version: a change restarts a failing hook.
    pub version: u64,
}

impl HookTarget {
    /// A branch filter as Gitea reads one (`*` crosses `/`, `{a,b}`
    /// alternatives); empty or `*` is none.
    pub fn branch_glob(filter: &str) -> Result<Option<globset::GlobMatcher>, String> {
        let filter = filter.trim();
        if filter.is_empty() || filter == "*" {
            return Ok(None);
        }
        globset::GlobBuilder::new(filter)
            .literal_separator(false)
            .build()
            .map(|glob| Some(glob.compile_matcher()))
            .map_err(|e| format!("the branch filter is not a glob: {e}"))
    }

    /// Whether `event` is for this hook.
    pub fn wants(&self, event: &Event) -> bool {
        if !self.incarnation.is_empty() && self.incarnation != event.incarnation {
            return false;
        }
        if !self.events.contains(&event.event) {
            return false;
        }
        match (
            &self.branch_filter,
            event.ref_name.strip_prefix("refs/heads/"),
        ) {
            (Some(glob), Some(branch)) => glob.is_match(branch),
            _ => true,
        }
    }

    /// The id of this hook's delivery of event `event`: the same on every
    /// attempt and after a restart, another for another hook.
    pub fn delivery_id(&self, event: u64) -> String {
        let digest = Sha256::new()
            .chain_update(self.id.to_le_bytes())
            .chain_update(self.created_at.as_bytes())
            .chain_update(event.to_le_bytes())
            .finalize();
        let h = hex::encode(&digest[..16]);
        format!(
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}
