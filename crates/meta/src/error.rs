//! The store's errors: why a call failed ([`MetaError`]), why the store
//! cannot serve ([`Unavailable`]), why a write did not reach the log
//! ([`AppendError`]).

use std::sync::Arc;

use crate::entity::Invalid;
use crate::fold;

/// Why a metadata call failed; each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("repository {0} not found")]
    NoRepo(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    /// The edit replaces a version that is no longer current.
    #[error("{0}")]
    Stale(String),
    /// The name is taken.
    #[error("{0}")]
    Taken(String),
    /// The write would take its author past a quota (which it names).
    #[error("{0}")]
    OverQuota(String),
    /// The repo's documents are still being read after a start (the
    /// store reads them in the background); the message says whose.
    #[error("{0}")]
    Loading(String),
    /// The store cannot serve (its log failed, or a repo's metadata
    /// cannot be read); the detail is for the server's log, not clients.
    #[error("metadata is unavailable")]
    Unavailable(#[source] Unavailable),
}

/// Why the metadata store cannot serve.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unavailable {
    /// A write could not be made durable: the index already shows a
    /// document the log may not hold, so nothing more is served until a
    /// restart rebuilds both from disk.
    #[error("the metadata log failed; restart the server to replay it")]
    LogFailed(#[source] AppendError),
    #[error("cannot read the metadata of {repo}")]
    Unreadable {
        repo: String,
        #[source]
        source: Arc<fold::MetaRepoError>,
    },
    #[error("cannot start the fold thread")]
    Thread(#[source] Arc<std::io::Error>),
    /// The store closed before the repo's documents were read.
    #[error("the metadata store is closing")]
    Stopped,
    /// The repo was deleted while its documents were being read.
    #[error("the repo {0} was deleted")]
    Forgotten(String),
    /// A write was made but the audit log could not record it.
    #[error("the audit log failed")]
    Audit(#[source] Arc<dyn std::error::Error + Send + Sync>),
}

impl Unavailable {
    pub(crate) fn unreadable(repo: &str, source: fold::MetaRepoError) -> MetaError {
        MetaError::Unavailable(Unavailable::unreadable_repo(repo, source))
    }

    pub(crate) fn unreadable_repo(repo: &str, source: fold::MetaRepoError) -> Unavailable {
        Unavailable::Unreadable {
            repo: repo.to_string(),
            source: Arc::new(source),
        }
    }
}

/// Why a write did not reach the log durably; one failed append or sync
/// fails every write of its batch, so each gets a shared copy.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AppendError {
    #[error("cannot encode the document")]
    Json(#[source] Arc<serde_json::Error>),
    #[error("the metadata log failed")]
    Log(#[source] Arc<vole_log::LogError>),
}

impl From<Invalid> for MetaError {
    fn from(e: Invalid) -> Self {
        MetaError::Invalid(e.0)
    }
}
