//! Webhooks as documents of the system repo: each of a repo's incarnation
//! (a repo deleted and made again under its name has none of the old
//! one's) or of the server, with its target, its secret (a credential:
//! never in a repo's shards, which readers may fetch), its events and
//! branch filter. What a hook may reach is `vole-webhooks`' to decide;
//! this keeps what was decided.

use serde::{Deserialize, Serialize};

use super::*;
use crate::entity::{SCHEMA_V, SerialKind};

/// The shard root of every hook (one small tree in the system repo).
pub const HOOKS_ROOT: &str = "hooks";

/// The most live hooks one repo (or the server) holds.
pub const MAX_HOOKS: usize = 20;

/// The events a hook may ask for, by Gitea's names.
pub const HOOK_EVENTS: &[&str] = &[
    "push",
    "create",
    "delete",
    "issues",
    "issue_comment",
    "pull_request",
];

/// The longest secret and branch filter taken, in bytes.
pub const MAX_SECRET_BYTES: usize = 256;
pub const MAX_FILTER_BYTES: usize = 1024;

/// How a delivery's body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookContent {
    /// `application/json`.
    Json,
    /// `application/x-www-form-urlencoded`, the JSON in `payload`.
    Form,
}

/// A webhook. Its `Debug` leaves the secret out.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Hook {
    pub v: u32,
    pub serial: u64,
    /// The incarnation of the repo it is of ("": the server's, every
    /// repo's events).
    pub incarnation: String,
    /// The repo's name when the hook was made ("" for the server's).
    pub repo: String,
    pub url: String,
    pub content_type: HookContent,
    /// The key of each delivery's HMAC ("": unsigned).
    #[serde(default)]
    pub secret: String,
    pub events: Vec<String>,
    /// Push events only for branches this glob matches ("" or `*`: all).
    #[serde(default)]
    pub branch_filter: String,
    pub active: bool,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u64>,
    /// Deleted: no longer listed or delivered to (the document stays, so
    /// a later fold cannot bring an older version back).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook")
            .field("serial", &self.serial)
            .field("incarnation", &self.incarnation)
            .field("repo", &self.repo)
            .field("url", &self.url)
            .field("events", &self.events)
            .field("active", &self.active)
            .field("version", &self.version)
            .field("deleted", &self.deleted)
            .finish_non_exhaustive()
    }
}

/// What a hook's write sets (absent: as it is; for a new hook, the
/// default). Its `Debug` leaves the secret out.
#[derive(Clone, Default)]
pub struct HookPut {
    pub url: Option<String>,
    pub content_type: Option<HookContent>,
    pub secret: Option<String>,
    pub events: Option<Vec<String>>,
    pub branch_filter: Option<String>,
    pub active: Option<bool>,
}

impl std::fmt::Debug for HookPut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookPut")
            .field("url", &self.url)
            .field("events", &self.events)
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
}

/// The checks a hook's fields pass (its URL's reach is the caller's);
/// each event once.
fn check_put(put: &mut HookPut) -> Result<(), MetaError> {
    if let Some(events) = &mut put.events {
        let mut seen = std::collections::HashSet::new();
        events.retain(|e| seen.insert(e.clone()));
    }
    if let Some(events) = &put.events
        && let Some(unknown) = events.iter().find(|e| !HOOK_EVENTS.contains(&e.as_str()))
    {
        return Err(MetaError::Invalid(format!(
            "{unknown:?} is no event a hook takes ({})",
            HOOK_EVENTS.join(", ")
        )));
    }
    if put
        .secret
        .as_ref()
        .is_some_and(|s| s.len() > MAX_SECRET_BYTES)
    {
        return Err(MetaError::Invalid(format!(
            "a secret is at most {MAX_SECRET_BYTES} bytes"
        )));
    }
    if put
        .branch_filter
        .as_ref()
        .is_some_and(|f| f.len() > MAX_FILTER_BYTES || f.chars().any(char::is_control))
    {
        return Err(MetaError::Invalid(format!(
            "a branch filter is one line of at most {MAX_FILTER_BYTES} bytes"
        )));
    }
    Ok(())
}

impl MetaStore {
    /// The live hooks of `incarnation` ("": the server's), by id.
    pub fn hooks(&self, incarnation: &str) -> Result<Vec<Hook>, MetaError> {
        self.read_system(|state| Ok(state.index.hooks_of(incarnation).cloned().collect()))
    }

    /// The kind and number of `repo`'s thread of id `thread_id` (what a
    /// comment's webhook event names).
    pub fn thread_number(
        &self,
        repo: &vole_git::repos::RepoName,
        thread_id: &str,
    ) -> Result<Option<(crate::entity::ThreadKind, u64)>, MetaError> {
        self.read(repo, |state| Ok(state.index.thread_of(thread_id)))
    }

    /// Every live hook, of every repo and the server's, by id (the
    /// deliveries' list, read at start and after each change).
    pub fn all_hooks(&self) -> Result<Vec<Hook>, MetaError> {
        self.read_system(|state| {
            Ok(state
                .index
                .hooks
                .values()
                .filter(|h| !h.deleted)
                .cloned()
                .collect())
        })
    }

    /// Hook `serial` of `incarnation`, live.
    pub fn hook(&self, incarnation: &str, serial: u64) -> Result<Hook, MetaError> {
        self.read_system(|state| {
            state
                .index
                .hook(serial)
                .filter(|h| !h.deleted && h.incarnation == incarnation)
                .cloned()
                .ok_or_else(|| MetaError::NotFound(format!("hook {serial} not found")))
        })
    }

    /// A new hook of `incarnation` (of repo `repo`; "" and "" for the
    /// server's), its URL checked by the caller; at most [`MAX_HOOKS`].
    pub fn create_hook(
        &self,
        (incarnation, repo): (&str, &str),
        put: HookPut,
    ) -> Result<Hook, MetaError> {
        let mut put = put;
        check_put(&mut put)?;
        let url = put
            .url
            .clone()
            .ok_or_else(|| MetaError::Invalid("a hook needs a URL".into()))?;
        let serial = self.next_serial(SerialKind::Hook)?;
        if serial == 0 {
            return Err(MetaError::Invalid(
                "this store keeps no hooks (it has no system repo)".into(),
            ));
        }
        self.write_system(|state| {
            if state.index.hooks_of(incarnation).count() >= MAX_HOOKS {
                return Err(MetaError::Invalid(format!(
                    "a repo holds at most {MAX_HOOKS} hooks; delete one first"
                )));
            }
            let now = now_text();
            Ok(Hook {
                v: SCHEMA_V,
                serial,
                incarnation: incarnation.to_string(),
                repo: repo.to_string(),
                url,
                content_type: put.content_type.unwrap_or(HookContent::Json),
                secret: put.secret.unwrap_or_default(),
                events: put.events.unwrap_or_else(|| vec!["push".into()]),
                branch_filter: put.branch_filter.unwrap_or_default(),
                active: put.active.unwrap_or(true),
                created_at: now.clone(),
                updated_at: now,
                version: 1,
                replaces: None,
                deleted: false,
            })
        })
    }

    /// Hook `serial` of `incarnation` with `put`'s fields (its URL, when
    /// given, checked by the caller).
    pub fn edit_hook(
        &self,
        incarnation: &str,
        serial: u64,
        put: HookPut,
    ) -> Result<Hook, MetaError> {
        let mut put = put;
        check_put(&mut put)?;
        self.rewrite_hook(incarnation, serial, |next| {
            next.url = put.url.unwrap_or(std::mem::take(&mut next.url));
            next.content_type = put.content_type.unwrap_or(next.content_type);
            if let Some(secret) = put.secret {
                next.secret = secret;
            }
            if let Some(events) = put.events {
                next.events = events;
            }
            if let Some(filter) = put.branch_filter {
                next.branch_filter = filter;
            }
            next.active = put.active.unwrap_or(next.active);
        })
    }

    /// Deletes hook `serial` of `incarnation`.
    pub fn delete_hook(&self, incarnation: &str, serial: u64) -> Result<(), MetaError> {
        self.rewrite_hook(incarnation, serial, |next| {
            next.deleted = true;
            next.secret.clear();
        })
        .map(drop)
    }

    fn rewrite_hook(
        &self,
        incarnation: &str,
        serial: u64,
        change: impl FnOnce(&mut Hook),
    ) -> Result<Hook, MetaError> {
        self.write_system(|state| {
            let current = state
                .index
                .hook(serial)
                .filter(|h| !h.deleted && h.incarnation == incarnation)
                .ok_or_else(|| MetaError::NotFound(format!("hook {serial} not found")))?;
            let mut next = current.clone();
            change(&mut next);
            next.replaces = Some(current.version);
            next.version = current.version + 1;
            next.updated_at = now_text();
            Ok(next)
        })
    }
}
