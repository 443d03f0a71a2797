//! What one user may make through the API: repos under their name
//! (`--max-repos-per-user`, 403) and metadata writes a minute
//! (`--meta-write-rate`, 429 with `Retry-After`; governor's keyed GCRA
//! limiter, by user). Each refusal names its setting. The third quota,
//! the bytes of metadata one user authored in one repo, is decided by the
//! metadata store under the repo's lock (`meta::MetaError::OverQuota`).
//! The CLI, the operator's, is held to none of them.

use axum::http::StatusCode;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use parking_lot::{Mutex, MutexGuard};

use vole_access::Principal;
use vole_config::QuotaSettings;
use vole_git::repos::{RepoName, Repos};
use vole_http::AppError;

/// Users a write limiter keeps before it forgets the idle ones.
const MAX_KEYS: usize = 100_000;

/// The API's per-user quotas.
pub struct Quotas {
    max_repos: Option<u64>,
    writes: Option<DefaultKeyedRateLimiter<String>>,
    /// Held from counting a user's repos to creating one, so two creations
    /// at once cannot both pass the count.
    creating: Mutex<()>,
}

impl std::fmt::Debug for Quotas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quotas")
            .field("max_repos", &self.max_repos)
            .field("writes", &self.writes.is_some())
            .finish_non_exhaustive()
    }
}

impl Quotas {
    pub fn new(settings: &QuotaSettings) -> Quotas {
        Quotas {
            max_repos: settings.max_repos_per_user,
            writes: settings
                .meta_write_rate
                .map(|rate| RateLimiter::keyed(Quota::per_minute(rate))),
            creating: Mutex::new(()),
        }
    }

    /// A metadata write of `principal`'s: within `--meta-write-rate`?
    /// Counted per user (every token of theirs together); the anonymous
    /// (`--anonymous-push`) count as one.
    pub fn meta_write(&self, principal: &Principal) -> Result<(), AppError> {
        self.meta_write_by(principal.name())
    }

    /// [`Quotas::meta_write`] by user name: what the web's account forms
    /// count (a profile saved, a password changed, a token made or
    /// revoked each write the system store).
    pub fn meta_write_by(&self, name: &str) -> Result<(), AppError> {
        let Some(writes) = &self.writes else {
            return Ok(());
        };
        if writes.len() > MAX_KEYS {
            writes.retain_recent();
        }
        let user = name.to_ascii_lowercase();
        writes.check_key(&user).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            AppError::too_many(
                format!(
                    "{name} has made the metadata writes one user may make in a minute \
                     (meta-write-rate); try again in a moment"
                ),
                wait.as_secs_f64().ceil() as u64,
            )
        })
    }

    /// Before `name` is created through the API: 403 when its owner's
    /// name already holds `--max-repos-per-user` repos. The guard is held
    /// until the repo is created. Blocking (lists the repos).
    pub fn repo_create(
        &self,
        repos: &Repos,
        name: &RepoName,
    ) -> Result<MutexGuard<'_, ()>, AppError> {
        let creating = self.creating.lock();
        let Some(max) = self.max_repos else {
            return Ok(creating);
        };
        let owner = name.owner();
        let live = repos
            .list()
            .iter()
            .filter(|info| info.name.owner().eq_ignore_ascii_case(owner))
            .count() as u64;
        // Deleted ones count until the trash is emptied: a delete moves a
        // repo (and what was pushed to it) to the trash, so creating and
        // deleting in a loop would fill the disk otherwise.
        let trashed = repos.trashed(owner) as u64;
        let held = live + trashed;
        if held >= max {
            return Err(AppError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "{owner} has {live} repositories and {trashed} deleted ones in the trash, \
                     as many as one user may create (max-repos-per-user is {max}; an operator \
                     empties the data dir's trash/)"
                ),
            ));
        }
        Ok(creating)
    }
}
