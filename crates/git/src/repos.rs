//! Bare repositories on disk: creating a repo, and listing them (the
//! `owner/name` rules are in `repos/name.rs`). Reads and writes only `data/repos` (and `data/tmp` while a
//! repo is being created); git objects are never touched here.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::datadir::{DataDir, bare_repo_dirs};
use crate::durable;
use crate::{Git, GitError};

pub use crate::incarnation::{INCARNATION_FILE, Incarnation, IncarnationError};

mod name;
pub use name::{MAX_NAME_LEN, NameError, RESERVED_NAMES, RESERVED_OWNERS, RepoName};

/// A file in a repo created private: it is private from the moment it
/// appears in `data/repos`, before (and whether or not) its ACL is stored;
/// a stored ACL decides from then on.
pub const PRIVATE_MARKER: &str = "vole-private";

/// An incarnation given to a repo at start ([`Repos::give_incarnations`]).
#[derive(Debug, Clone)]
pub struct Given {
    pub name: RepoName,
    pub incarnation: Incarnation,
    /// The one it shared with another repo before, if any.
    pub had: Option<Incarnation>,
}

/// One repository as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoInfo {
    pub name: RepoName,
    pub description: String,
}

/// Why a repository operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("repository {0} already exists")]
    AlreadyExists(RepoName),
    #[error(
        "repository {new} cannot be created: {existing} exists, and owner and repository names are unique regardless of case"
    )]
    CaseTwin { new: RepoName, existing: RepoName },
    #[error("repository {0} does not exist")]
    NotFound(RepoName),
    #[error("creating the repository failed: {0}")]
    Git(#[from] GitError),
    #[error("repository storage failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The bare repositories of one data directory.
#[derive(Debug, Clone)]
pub struct Repos {
    data: DataDir,
}

/// What git puts in a new repo's `description`; shown as no description.
const GIT_PLACEHOLDER_DESCRIPTION: &str =
    "Unnamed repository; edit this file 'description' to name the repository.";

impl Repos {
    pub fn new(data: DataDir) -> Repos {
        Repos { data }
    }

    /// `data/repos`, where every repo lives.
    pub fn root(&self) -> PathBuf {
        self.data.repos_dir()
    }

    /// A directory under the data dir's `tmp/` (emptied at start), gone
    /// when dropped: where a look that must not write to a repo puts
    /// what git writes.
    pub fn scratch(&self, prefix: &str) -> std::io::Result<tempfile::TempDir> {
        std::fs::create_dir_all(self.data.tmp_dir())?;
        tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(self.data.tmp_dir())
    }

    /// Absolute (data-dir relative) path of a repo, whether or not it exists.
    pub fn path(&self, name: &RepoName) -> PathBuf {
        self.data.repos_dir().join(name.relative_path())
    }

    /// Creates a bare repo with HEAD on `default_branch`, durable before it
    /// returns. The repo is built in `data/tmp` (git's templates left out:
    /// an empty `hooks/`, no samples), every file and directory of it is synced, and it
    /// is renamed into place; then the directories above it are synced. So
    /// a crash never leaves half a repo under `repos/`: before the rename
    /// it is scratch (emptied at start), after it, whole. The repo is
    /// `incarnation` from the moment it appears; `before_rename` runs
    /// just before it does (once no other repo holds the name), so what
    /// must know of the new repo first (the ref log's `born` row) does.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        &self,
        git: &Git,
        name: &RepoName,
        description: Option<&str>,
        default_branch: &str,
        private: bool,
        incarnation: &Incarnation,
        before_rename: impl FnOnce() -> std::io::Result<()>,
    ) -> Result<RepoInfo, RepoError> {
        // One creation at a time: the case-twin check and the rename must
        // not interleave with another's.
        static CREATING: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
        let _creating = CREATING.lock();
        let target = self.path(name);
        if target.exists() {
            return Err(RepoError::AlreadyExists(name.clone()));
        }
        if let Some(existing) = self.case_twin(name) {
            return Err(RepoError::CaseTwin {
                new: name.clone(),
                existing,
            });
        }
        let description = description.unwrap_or("").trim().to_string();
        let staging = self.stage_bare(git, default_branch, &description)?;
        let staged = staging.path().join("repo.git");
        if private {
            write_synced(&staged, PRIVATE_MARKER, b"")?;
        }
        // Its identity from the moment it appears: nothing recorded of an
        // earlier repo of this name is this one's.
        incarnation.write_new(&staged)?;
        before_rename()?;
        let owner_dir = target.parent().expect("a repo path has an owner dir");
        // An owner spelled another way is the same owner: the repo goes
        // into the directory that exists.
        std::fs::create_dir_all(owner_dir)?;
        match std::fs::rename(&staged, &target) {
            Ok(()) => {}
            // rename(2) refuses to replace a non-empty directory: someone
            // created it between our check and now.
            Err(e) if target.exists() => {
                tracing::debug!(error = %e, "rename over existing repo refused");
                return Err(RepoError::AlreadyExists(name.clone()));
            }
            Err(e) => return Err(e.into()),
        }
        // The repo's entry in its owner dir, and the owner dir's in
        // `repos/` (it may be new).
        durable::sync_dir(owner_dir)?;
        durable::sync_dir(&self.data.repos_dir())?;
        Ok(RepoInfo {
            name: name.clone(),
            description,
        })
    }

    /// An existing repo `name` would clash with: owner and repo names are
    /// unique case-insensitively, so `Alice/x` clashes with any repo of
    /// `alice`, and `alice/Hello` with `alice/hello`.
    fn case_twin(&self, name: &RepoName) -> Option<RepoName> {
        bare_repo_dirs(&self.data.repos_dir())
            .into_iter()
            .filter_map(|path| {
                let stem = path.file_name()?.to_str()?.strip_suffix(".git")?;
                let owner = path.parent()?.file_name()?.to_str()?;
                Some(RepoName::unchecked(owner, stem))
            })
            .find(|existing| {
                existing.owner().eq_ignore_ascii_case(name.owner())
                    && (existing.owner() != name.owner()
                        || existing.name().eq_ignore_ascii_case(name.name()))
            })
    }

    /// A new, synced bare repo at `<staging>/repo.git` in `data/tmp`;
    /// dropping the returned dir removes whatever was not moved out.
    fn stage_bare(
        &self,
        git: &Git,
        default_branch: &str,
        description: &str,
    ) -> Result<tempfile::TempDir, RepoError> {
        let staging = tempfile::Builder::new()
            .prefix("create-")
            .tempdir_in(self.data.tmp_dir())?;
        let staged = staging.path().join("repo.git");
        git.run(&[
            // Loose refs and packed-refs, whatever a newer git defaults
            // to: the directory syncs and the start-up restore work on
            // them (older gits ignore the unknown setting).
            OsStr::new("-c"),
            OsStr::new("init.defaultRefFormat=files"),
            OsStr::new("init"),
            OsStr::new("--quiet"),
            OsStr::new("--bare"),
            OsStr::new("--template="),
            OsStr::new(&format!("--initial-branch={default_branch}")),
            staged.as_os_str(),
        ])?;
        // Where git (and vole's pre-receive) looks for the repo's own hooks.
        std::fs::create_dir(staged.join("hooks"))?;
        std::fs::write(staged.join("description"), format!("{description}\n"))?;
        durable::sync_tree(&staged)?;
        Ok(staging)
    }

    /// The system repo (`data/system.git`, outside `data/repos`, so no
    /// route, clone URL or listing reaches it), created durably if
    /// missing. Returns its path.
    pub fn ensure_system_repo(&self, git: &Git) -> Result<PathBuf, RepoError> {
        let target = self.data.system_repo();
        if target.join("HEAD").is_file() {
            return Ok(target);
        }
        let staging = self.stage_bare(git, "main", "vole's own documents: users and tokens")?;
        std::fs::rename(staging.path().join("repo.git"), &target)?;
        durable::sync_dir(self.data.root())?;
        Ok(target)
    }

    /// Moves a repo out of `data/repos` into `data/trash/<owner>/<name>.git.<unix-seconds>`
    /// (durably), where an operator can move it back. Returns where it went.
    pub fn move_to_trash(&self, name: &RepoName) -> Result<PathBuf, RepoError> {
        let source = self.path(name);
        if !source.join("HEAD").is_file() {
            return Err(RepoError::NotFound(name.clone()));
        }
        let owner_dir = self.data.trash_dir().join(name.owner());
        std::fs::create_dir_all(&owner_dir)?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut target = owner_dir.join(format!("{}.git.{stamp}", name.name()));
        let mut n = 1;
        while target.exists() {
            target = owner_dir.join(format!("{}.git.{stamp}-{n}", name.name()));
            n += 1;
        }
        std::fs::rename(&source, &target)?;
        durable::sync_dir(&owner_dir)?;
        durable::sync_dir(&self.data.trash_dir())?;
        durable::sync_dir(self.data.root())?;
        if let Some(parent) = source.parent() {
            durable::sync_dir(parent)?;
        }
        Ok(target)
    }

    /// Finishes, at start, repos whose creation a power cut interrupted
    /// before creation was durable (as vole before 0.1 could leave them):
    /// a `HEAD` or `config` that is missing, empty or not git's would make
    /// every git command on the repo fail ("not a git repository"). Each is
    /// rewritten as `git init` writes it (HEAD on the branch the repo has,
    /// else `default_branch`) and synced, with a warning naming the repo; a missing `objects/` or
    /// `refs/` directory is created. Objects and refs are never touched.
    /// Returns the repos finished.
    pub fn finish_interrupted_creations(&self, default_branch: &str) -> Vec<RepoName> {
        let mut finished = Vec::new();
        for info in self.list() {
            let path = self.path(&info.name);
            // Only what git init started: a stray `*.git` directory is not
            // made a repo.
            if !["HEAD", "config", "objects", "refs"]
                .iter()
                .any(|part| path.join(part).exists())
            {
                continue;
            }
            match finish_repo(&path, default_branch) {
                Ok(repaired) if repaired.is_empty() => {}
                Ok(repaired) => {
                    tracing::warn!(
                        repo = %info.name,
                        repaired = repaired.join(","),
                        "repository left half-created by a crash; finished it"
                    );
                    finished.push(info.name);
                }
                Err(e) => tracing::error!(
                    repo = %info.name,
                    error = %e,
                    "repository is half-created and could not be finished"
                ),
            }
        }
        finished
    }

    /// The incarnation of repo `name` (which exists); `None` for a repo
    /// from before incarnations that [`Repos::give_incarnations`] has not seen.
    pub fn incarnation(&self, name: &RepoName) -> Result<Option<Incarnation>, IncarnationError> {
        Incarnation::read(&self.path(name))
    }

    /// At start, each repo without an incarnation gets one, written
    /// synced and logged: during the upgrade to incarnations (`upgrading`)
    /// one that adopts the records written before incarnations existed
    /// (they name the repo of that name present now); after it, a new one
    /// that adopts nothing (a repo copied in by hand is not the repo its
    /// name's records are of). Repos that share an incarnation (one copied
    /// by hand within the data dir: which is the copy cannot be told) each
    /// get a new one. Returns the repos given one, each with the
    /// incarnation it had before when it had one, and every repo's
    /// incarnation now (read once, for what start-up decides with them).
    pub fn give_incarnations(
        &self,
        upgrading: bool,
    ) -> Result<(Vec<Given>, HashMap<String, Incarnation>), IncarnationError> {
        let mut found = Vec::new();
        let mut count: HashMap<String, usize> = HashMap::new();
        for info in self.list() {
            let path = self.path(&info.name);
            if !path.join("HEAD").is_file() {
                continue;
            }
            let had = Incarnation::read(&path)?;
            if let Some(had) = &had {
                *count.entry(had.id().to_string()).or_default() += 1;
            }
            found.push((info.name, path, had));
        }
        let mut given = Vec::new();
        let mut now = HashMap::new();
        for (name, path, had) in found {
            let shared = had.as_ref().is_some_and(|h| count[h.id()] > 1);
            if let Some(had) = had.as_ref().filter(|_| !shared) {
                now.insert(name.to_string(), had.clone());
                continue;
            }
            let incarnation = if upgrading && had.is_none() {
                Incarnation::mint_adopting_legacy()
            } else {
                Incarnation::mint()
            };
            incarnation
                .write(&path)
                .map_err(|source| IncarnationError::Io {
                    file: path.join(INCARNATION_FILE).display().to_string(),
                    source,
                })?;
            let why = match (&had, upgrading) {
                (Some(_), _) => {
                    "the repository shared its incarnation with another (copied by hand?); gave each a new one, which keeps its ACL"
                }
                (None, true) => {
                    "upgrade: the repository has no incarnation yet; gave it one, and the records written before incarnations existed are its"
                }
                (None, false) => {
                    "a repository without an incarnation appeared (copied in by hand?); gave it a new one: nothing recorded of its name before is its"
                }
            };
            tracing::warn!(repo = %name, incarnation = %incarnation, "{why}");
            now.insert(name.to_string(), incarnation.clone());
            given.push(Given {
                name,
                incarnation,
                had,
            });
        }
        Ok((given, now))
    }

    /// How many deleted repos of `owner` (any case) the trash holds: they
    /// take room until an operator removes them.
    pub fn trashed(&self, owner: &str) -> usize {
        let Ok(owners) = std::fs::read_dir(self.data.trash_dir()) else {
            return 0;
        };
        owners
            .flatten()
            .filter(|dir| {
                dir.file_name()
                    .to_string_lossy()
                    .eq_ignore_ascii_case(owner)
            })
            .filter_map(|dir| std::fs::read_dir(dir.path()).ok())
            .map(|repos| repos.flatten().count())
            .sum()
    }

    /// A repository's description (empty when git's placeholder is there).
    pub fn description(&self, name: &RepoName) -> String {
        read_description(&self.path(name))
    }

    /// Sets a repository's description (git's `description` file, which
    /// the pages and listings read), written durably.
    pub fn set_description(&self, name: &RepoName, description: &str) -> std::io::Result<()> {
        let path = self.path(name).join("description");
        crate::durable::write_synced(&path, format!("{}\n", description.trim()).as_bytes())
    }

    /// Every repository, sorted by owner then name.
    pub fn list(&self) -> Vec<RepoInfo> {
        bare_repo_dirs(&self.data.repos_dir())
            .into_iter()
            .filter_map(|path| {
                let stem = path.file_name()?.to_str()?.strip_suffix(".git")?;
                let owner = path.parent()?.file_name()?.to_str()?;
                let name = RepoName::from_parts(owner, stem).ok()?;
                Some(RepoInfo {
                    description: read_description(&path),
                    name,
                })
            })
            .collect()
    }
}

/// What `git init --bare` writes into `config` (git 2.39 and later).
const BARE_CONFIG: &str =
    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n";

/// The branch a repo's HEAD names (`ref: refs/heads/NAME`), if it names
/// one. HEAD is the one record of a repo's default branch.
pub fn head_branch(repo_dir: &Path) -> Option<String> {
    let head = std::fs::read_to_string(repo_dir.join("HEAD")).ok()?;
    head.trim_end()
        .strip_prefix("ref: refs/heads/")
        .filter(|branch| !branch.is_empty())
        .map(str::to_string)
}

/// Points a repo's HEAD at `branch`, durably: `HEAD.lock` written and
/// synced, renamed over HEAD, the repo's directory synced (git's own
/// `symbolic-ref` does the first two, without the syncs).
pub fn set_head_branch(repo_dir: &Path, branch: &str) -> std::io::Result<()> {
    use std::io::Write;
    let lock = repo_dir.join("HEAD.lock");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)?;
    let written = file
        .write_all(format!("ref: refs/heads/{branch}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&lock, repo_dir.join("HEAD")));
    if written.is_err() {
        let _ = std::fs::remove_file(&lock);
    }
    written?;
    crate::durable::sync_dir(repo_dir)
}

/// Where HEAD should point after a push that created `created` (branch
/// names) and left HEAD naming a branch that does not exist: `main` if
/// the push created it, else `master`, else the first by name.
pub fn default_branch_among<'a>(created: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let created: Vec<&str> = created.into_iter().collect();
    ["main", "master"]
        .into_iter()
        .find_map(|wanted| created.iter().copied().find(|b| *b == wanted))
        .or_else(|| created.iter().copied().min())
}

/// Rewrites what of a repo's skeleton is missing or not git's; returns
/// the names of what it rewrote.
fn finish_repo(repo: &Path, default_branch: &str) -> std::io::Result<Vec<&'static str>> {
    let mut repaired = Vec::new();
    let head = std::fs::read(repo.join("HEAD")).unwrap_or_default();
    let head_ok = {
        let text = String::from_utf8_lossy(&head);
        let text = text.trim_end();
        text.strip_prefix("ref: refs/")
            .is_some_and(|r| !r.is_empty())
            || crate::is_hex_oid(text)
    };
    if !head_ok {
        // The default branch if the repo has it, else the first branch it
        // has, else (nothing pushed yet) the default.
        let branch = if repo.join("refs/heads").join(default_branch).is_file() {
            default_branch.to_string()
        } else {
            std::fs::read_dir(repo.join("refs/heads"))
                .ok()
                .and_then(|dir| {
                    let mut names: Vec<String> = dir
                        .flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                        .filter_map(|e| e.file_name().into_string().ok())
                        .filter(|n| !n.ends_with(".lock"))
                        .collect();
                    names.sort();
                    names.into_iter().next()
                })
                .unwrap_or_else(|| default_branch.to_string())
        };
        write_synced(
            repo,
            "HEAD",
            format!("ref: refs/heads/{branch}\n").as_bytes(),
        )?;
        repaired.push("HEAD");
    }
    let config = std::fs::read(repo.join("config")).unwrap_or_default();
    if !String::from_utf8_lossy(&config).contains("[core]") {
        write_synced(repo, "config", BARE_CONFIG.as_bytes())?;
        repaired.push("config");
    }
    for (dir, what) in [
        ("objects/pack", "objects"),
        ("refs/heads", "refs"),
        ("refs/tags", "refs"),
    ] {
        if !repo.join(dir).is_dir() {
            std::fs::create_dir_all(repo.join(dir))?;
            if !repaired.contains(&what) {
                repaired.push(what);
            }
        }
    }
    if !repaired.is_empty() {
        for dir in [
            "objects/pack",
            "objects",
            "refs/heads",
            "refs/tags",
            "refs",
            "",
        ] {
            durable::sync_dir(&repo.join(dir))?;
        }
    }
    Ok(repaired)
}

/// Writes `name` in `dir` through a synced temporary file and a rename
/// (`durable::write_synced`, which syncs `dir` too).
fn write_synced(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    durable::write_synced(&dir.join(name), bytes)
}

fn read_description(repo: &Path) -> String {
    let text = std::fs::read_to_string(repo.join("description")).unwrap_or_default();
    let text = text.trim();
    if text == GIT_PLACEHOLDER_DESCRIPTION {
        String::new()
    } else {
        text.to_string()
    }
}
