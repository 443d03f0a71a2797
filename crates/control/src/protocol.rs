//! Wire types of the control socket (see the module doc of [`crate`]
//! for the protocol itself).

use serde::{Deserialize, Serialize};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest request or reply line accepted, in bytes.
pub const MAX_LINE: usize = 1 << 20;

/// One request, tagged by `op`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Ping,
    RepoCreate {
        repo: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Created private (default: public).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        private: bool,
        /// The owning user (default: the user named like the owner).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    RepoList,
    /// Move a repo to the trash.
    RepoDelete {
        repo: String,
    },
    /// Make a repo public or private (its members stay).
    RepoVisibility {
        repo: String,
        private: bool,
    },
    /// Read (no `branch`) or move HEAD, the repo's default branch.
    RepoDefaultBranch {
        repo: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
    },
    /// Prune a repo's unreachable objects now (`git gc --prune=now`).
    RepoGc {
        repo: String,
    },
    UserAdd {
        name: String,
        email: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        full_name: String,
        #[serde(default)]
        admin: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        password: Option<String>,
    },
    UserList,
    /// A user's display name and email; `None` keeps the stored one.
    UserEdit {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        full_name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        email: Option<String>,
    },
    UserPasswd {
        name: String,
        password: String,
    },
    UserDisable {
        name: String,
    },
    TokenCreate {
        name: String,
        user: String,
        scope: vole_meta::entity::Scope,
        #[serde(default)]
        repos: Vec<String>,
        /// Seconds until it expires (default: never).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_in_secs: Option<u64>,
    },
    TokenList {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
    },
    TokenRevoke {
        name: String,
    },
    /// From `vole hook pre-receive`: may these updates happen?
    HookPreReceive {
        push: vole_hooks::PushContext,
        updates: Vec<vole_hooks::RefUpdate>,
    },
    /// From `vole hook reference-transaction prepared`: record, durably.
    HookRefPrepared {
        push: vole_hooks::PushContext,
        moves: Vec<vole_hooks::RefUpdate>,
    },
    /// From `vole hook reference-transaction committed|aborted`.
    HookRefOutcome {
        push: vole_hooks::PushContext,
        moves: Vec<vole_hooks::RefUpdate>,
        outcome: vole_hooks::Outcome,
    },
    /// Compact the ref log, keeping the last `keep` transactions.
    LogCompact {
        keep: u64,
    },
    /// From `vole hook pack-objects`: a pack for this request, from the
    /// pack cache. Answered by the connection itself (not a dispatch
    /// thread): the reply, then one more line when the pack is complete;
    /// the connection is the reader until it closes.
    PackObjects {
        repo: String,
        args: Vec<String>,
        stdin: String,
    },
    /// `vole backup`: a consistent copy of the data dir into `dest` (an
    /// absolute path the server may write). Answered by the connection:
    /// `{"progress":{"done","total"}}` lines, then the manifest's summary.
    Backup {
        dest: String,
    },
}

impl Request {
    /// Its `op`, for the log (without its fields: a push's list of refs
    /// can be long).
    pub fn op(&self) -> &'static str {
        match self {
            Request::Ping => "ping",
            Request::RepoCreate { .. } => "repo_create",
            Request::RepoList => "repo_list",
            Request::RepoDelete { .. } => "repo_delete",
            Request::RepoVisibility { .. } => "repo_visibility",
            Request::RepoDefaultBranch { .. } => "repo_default_branch",
            Request::RepoGc { .. } => "repo_gc",
            Request::UserAdd { .. } => "user_add",
            Request::UserList => "user_list",
            Request::UserEdit { .. } => "user_edit",
            Request::UserPasswd { .. } => "user_passwd",
            Request::UserDisable { .. } => "user_disable",
            Request::TokenCreate { .. } => "token_create",
            Request::TokenList { .. } => "token_list",
            Request::TokenRevoke { .. } => "token_revoke",
            Request::HookPreReceive { .. } => "hook_pre_receive",
            Request::HookRefPrepared { .. } => "hook_ref_prepared",
            Request::HookRefOutcome { .. } => "hook_ref_outcome",
            Request::LogCompact { .. } => "log_compact",
            Request::PackObjects { .. } => "pack_objects",
            Request::Backup { .. } => "backup",
        }
    }
}

/// A request as it travels: the version plus the request's own fields.
#[derive(Debug, Serialize, Deserialize)]
pub struct RequestFrame {
    pub v: u32,
    #[serde(flatten)]
    pub request: Request,
}

/// Only the version, to answer a request from another protocol version with
/// a clear error rather than a parse failure.
#[derive(Debug, Deserialize)]
pub struct VersionProbe {
    pub v: Option<u32>,
}

/// One reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub v: u32,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Reply {
    pub fn ok(data: impl Serialize) -> Reply {
        match serde_json::to_value(data) {
            Ok(data) => Reply {
                v: PROTOCOL_VERSION,
                ok: true,
                data: Some(data),
                error: None,
            },
            Err(e) => Reply::error(format!("reply could not be encoded: {e}")),
        }
    }

    pub fn error(message: impl Into<String>) -> Reply {
        Reply {
            v: PROTOCOL_VERSION,
            ok: false,
            data: None,
            error: Some(message.into()),
        }
    }

    /// Decodes one request line into a request, or the error reply it earns.
    pub fn parse_request(line: &str) -> Result<Request, Reply> {
        match serde_json::from_str::<VersionProbe>(line) {
            Err(e) => return Err(Reply::error(format!("request is not a JSON object: {e}"))),
            Ok(VersionProbe { v: None }) => {
                return Err(Reply::error("request has no protocol version field \"v\""));
            }
            Ok(VersionProbe { v: Some(v) }) if v != PROTOCOL_VERSION => {
                return Err(Reply::error(format!(
                    "protocol version {v} is not supported; this server speaks {PROTOCOL_VERSION}"
                )));
            }
            Ok(_) => {}
        }
        serde_json::from_str::<RequestFrame>(line)
            .map(|frame| frame.request)
            .map_err(|e| Reply::error(format!("request not understood: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_with_its_version() {
        let frame = RequestFrame {
            v: PROTOCOL_VERSION,
            request: Request::RepoCreate {
                repo: "a/b".into(),
                description: None,
                private: false,
                owner: None,
            },
        };
        let line = serde_json::to_string(&frame).unwrap();
        assert_eq!(line, r#"{"v":1,"op":"repo_create","repo":"a/b"}"#);
        assert_eq!(Reply::parse_request(&line).unwrap(), frame.request);
    }

    #[test]
    fn another_version_is_refused_by_name() {
        let reply = Reply::parse_request(r#"{"v":7,"op":"ping"}"#).unwrap_err();
        assert!(reply.error.unwrap().contains("version 7 is not supported"));
    }

    #[test]
    fn op_names_are_the_wire_tags() {
        for request in [
            Request::Ping,
            Request::RepoList,
            Request::RepoCreate {
                repo: "a/b".into(),
                description: None,
                private: true,
                owner: Some("ann".into()),
            },
            Request::LogCompact { keep: 1 },
            Request::UserList,
            Request::TokenList { user: None },
            Request::RepoDelete { repo: "a/b".into() },
            Request::RepoGc { repo: "a/b".into() },
        ] {
            let wire = serde_json::to_value(&request).unwrap();
            assert_eq!(wire["op"], request.op(), "{request:?}");
        }
    }

    #[test]
    fn an_unknown_op_is_an_error_reply() {
        let reply = Reply::parse_request(r#"{"v":1,"op":"format_disk"}"#).unwrap_err();
        assert!(reply.error.unwrap().contains("format_disk"));
    }
}
