//! The git platform vole stands on, knowing nothing of HTTP: the git
//! binary (this file), bounded read-side children (`bounded`), fsync
//! outside the log (`durable`), a repo's identity across the reuse of its
//! name (`incarnation`), merges in a bare repo (`merge`), the data dir's layout and lock (`datadir`), bare
//! repos on disk and their names (`repos`) and the one rule for a path
//! inside a tree (`tree_path`).
//!
//! The git binary vole runs: where it is, which version (at least
//! [`MIN_VERSION`]), and how a child is started with a cleared environment
//! so nothing leaks in from the server user's own git configuration, and
//! with [`DURABLE_WRITES`] so what it writes survives a power cut.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use gix::ObjectId;

mod bounded;
pub mod datadir;
pub mod durable;
pub mod incarnation;
pub mod merge;
pub mod repos;
pub mod revision;
pub mod tree_path;
pub use bounded::{Bounded, BoundedError, Bounds, Cancel, CancelOnDrop};

/// The oldest git vole runs. `core.fsync` (and its `reference` component)
/// came in 2.36; until 2.39.3 (and 2.40.0) git's `packed-refs` writer
/// called fsync on a buffer it had not flushed yet, so a packed ref could
/// still be lost ("refs: fix corruption by not correctly syncing
/// packed-refs to disk").
pub const MIN_VERSION: (u32, u32, u32) = (2, 39, 3);

/// The settings every git child gets so that git syncs what it writes
/// before it renames it into place: objects (loose objects and packs),
/// derived metadata (pack indexes, reverse indexes, commit-graphs, bitmaps)
/// and references (loose ref lock files and `packed-refs`), each with a
/// real `fsync` (the default on Linux, stated so no config can weaken it).
/// git's own default (`FSYNC_COMPONENTS_DEFAULT`) leaves references out.
/// git never syncs the directories it renames files into: vole does that
/// itself where it matters (see `crate::durable`).
pub const DURABLE_WRITES: [(&str, &str); 2] = [
    ("core.fsync", "objects,derived-metadata,reference"),
    ("core.fsyncMethod", "fsync"),
];

/// What every git child is told so that an object id means the same
/// history in every repo and to every check (see SECURITY.md, "What the
/// server trusts in a repo"):
/// - `refs/replace/*` is ignored: a replacement object would make the
///   fast-forward check, the blob scan and every page see another commit
///   (or tree, or blob) than the id names. Pushes there are refused too
///   (`access::check_ref_updates`), but a replace ref on disk (an old
///   version, an operator, a crash) must change nothing either.
/// - `info/grafts` is not read (`GIT_GRAFT_FILE` names a file that can
///   never exist, below `/dev/null`: git reads no grafts and, unlike for
///   an empty file, prints no deprecation hint to the client): a graft
///   rewrites a commit's parents just as a replacement does.
///
/// git passes both down to the processes it runs (the hooks, pack-objects
/// under upload-pack), and vole's hooks set them again for their own git
/// calls. gix handles get `core.useReplaceRefs=false` ([`open_gix`]).
pub const UNTRUSTED_HISTORY_OFF: [(&str, &str); 2] = [
    ("GIT_NO_REPLACE_OBJECTS", "1"),
    ("GIT_GRAFT_FILE", "/dev/null/no-grafts"),
];

/// fsck message ids neither a push (`transport`) nor `vole check` fails
/// for: malformed author, tagger or date lines, zero-padded modes and the
/// like, which histories written by old or odd tools carry (git.git's and
/// the kernel's among them) and which harm no reader. The checks that protect a reader (paths in trees,
/// `.gitmodules`, object links, date overflow) stay errors.
pub const FSCK_IGNORED: &[&str] = &[
    "badDate",
    "badEmail",
    "badFilemode",
    "badTagName",
    "badTimezone",
    "missingEmail",
    "missingNameBeforeEmail",
    "missingSpaceBeforeDate",
    "missingSpaceBeforeEmail",
    "missingTaggerEntry",
    "nulInCommit",
    "zeroPaddedDate",
    "zeroPaddedFilemode",
];

/// Why the configured git cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git binary not found: {0} (set --git or VOLE_GIT to a git executable)")]
    NotFound(String),
    #[error(
        "{path} is {version}, but vole needs git {}.{}.{} or later (older versions cannot sync every reference they write); install a newer git or point --git / VOLE_GIT at one",
        MIN_VERSION.0, MIN_VERSION.1, MIN_VERSION.2
    )]
    TooOld { path: String, version: String },
    #[error("git binary {path} could not be run: {source}")]
    NotRunnable {
        path: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
}

/// A located, runnable git binary.
#[derive(Debug, Clone)]
pub struct Git {
    path: PathBuf,
    version: String,
    /// `PATH` handed to children, so git finds its own helpers.
    search_path: OsString,
    /// `git-http-backend` in git's exec path, run without the `git`
    /// wrapper in front (one exec fewer per request); `None` when it is not
    /// there, and `git http-backend` runs instead.
    http_backend: Option<PathBuf>,
}

/// The environment variable a server's mark on its children is kept in
/// (what `vole sentinel` looks for).
pub const CHILD_MARK_VAR: &str = "VOLE_SERVER";

/// This process's mark on its git children, once set (see the sentinel,
/// `transport::sentinel`).
static CHILD_MARK: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Marks every git child started from now on with `mark`, so the sentinel
/// finds them should this process die. Set once, by the server.
pub fn mark_children(mark: String) {
    let _ = CHILD_MARK.set(mark);
}

impl Git {
    /// Finds git: `explicit` when given (a path, or a bare name looked up on
    /// `PATH`), else the first `git` on `PATH`. Runs `git --version` once.
    pub fn locate(explicit: Option<&Path>) -> Result<Git, GitError> {
        let search_path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        let wanted = explicit.unwrap_or(Path::new("git"));
        let path = if wanted.components().count() > 1 || wanted.is_absolute() {
            wanted.to_path_buf()
        } else {
            std::env::split_paths(&search_path)
                .map(|dir| dir.join(wanted))
                .find(|candidate| is_executable(candidate))
                .ok_or_else(|| GitError::NotFound(wanted.display().to_string()))?
        };
        if !is_executable(&path) {
            return Err(GitError::NotFound(path.display().to_string()));
        }
        let output = Command::new(&path)
            .arg("--version")
            .env_clear()
            .env("PATH", &search_path)
            .output()
            .map_err(|source| GitError::NotRunnable {
                path: path.display().to_string(),
                source,
            })?;
        let version = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if !output.status.success() || !version.starts_with("git version") {
            return Err(GitError::NotRunnable {
                path: path.display().to_string(),
                source: std::io::Error::other(format!("`--version` printed {version:?}")),
            });
        }
        match parse_version(&version) {
            Some(v) if v >= MIN_VERSION => {}
            Some(_) => {
                return Err(GitError::TooOld {
                    path: path.display().to_string(),
                    version,
                });
            }
            None => {
                return Err(GitError::NotRunnable {
                    path: path.display().to_string(),
                    source: std::io::Error::other(format!(
                        "cannot tell its version from {version:?}"
                    )),
                });
            }
        }
        let http_backend = Command::new(&path)
            .arg("--exec-path")
            .env_clear()
            .env("PATH", &search_path)
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| {
                PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
                    .join("git-http-backend")
            })
            .filter(|backend| is_executable(backend));
        Ok(Git {
            path,
            version,
            search_path,
            http_backend,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What `git --version` printed, e.g. `git version 2.47.3`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The command that runs `git http-backend`: its program and its
    /// arguments.
    pub fn http_backend(&self) -> (&Path, &'static [&'static str]) {
        match &self.http_backend {
            Some(backend) => (backend, &[]),
            None => (&self.path, &["http-backend"]),
        }
    }

    /// `PATH` as children should see it.
    pub fn search_path(&self) -> &OsString {
        &self.search_path
    }

    /// A git command with the environment cleared and only the allowlist set
    /// (`PATH`, and the switches that stop git reading system or global
    /// config), and [`DURABLE_WRITES`] given as `-c` options.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.path);
        command.env_clear();
        for (key, value) in self.child_env() {
            command.env(key, value);
        }
        for (key, value) in DURABLE_WRITES {
            command.arg("-c").arg(format!("{key}={value}"));
        }
        command
    }

    /// The allowlisted environment of every git child, for callers that build
    /// their own process (tokio's `Command`). In a server it carries the
    /// server's mark ([`mark_children`]).
    pub fn child_env(&self) -> Vec<(&'static str, OsString)> {
        let mut env = vec![
            ("PATH", self.search_path.clone()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
            ("GIT_CONFIG_GLOBAL", "/dev/null".into()),
            ("LC_ALL", "C".into()),
            // vole's own short-lived helpers run below git (the hooks, the
            // pack cache's reader): without transparent huge pages their
            // allocator does not have the kernel zero a 2 MiB page at the
            // first allocation of every run.
            ("MIMALLOC_ALLOW_THP", "0".into()),
        ];
        env.extend(
            UNTRUSTED_HISTORY_OFF
                .iter()
                .map(|(key, value)| (*key, OsString::from(value))),
        );
        if let Some(mark) = CHILD_MARK.get() {
            env.push((CHILD_MARK_VAR, mark.into()));
        }
        env
    }

    /// `git --git-dir <git_dir> args..` with stdout piped for reading as it
    /// comes (stdin and stderr closed); the child is killed when its
    /// output is dropped, so a client that goes away stops it.
    pub fn spawn_reader(&self, git_dir: &Path, args: &[&str]) -> std::io::Result<ChildOutput> {
        let mut child = tokio::process::Command::from(self.command())
            .args(READ_SIDE)
            .arg("--git-dir")
            .arg(git_dir)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().expect("stdout is piped");
        Ok(ChildOutput {
            stdout,
            _child: child,
        })
    }

    /// Runs `git -C repo args..` to completion and returns its stdout.
    pub fn run_in(&self, repo: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let mut all: Vec<&std::ffi::OsStr> = vec!["-C".as_ref(), repo.as_os_str()];
        all.extend(args.iter().map(|a| std::ffi::OsStr::new(*a)));
        self.run(&all)
    }

    /// Runs `git args..` to completion and returns its stdout.
    pub fn run(&self, args: &[&std::ffi::OsStr]) -> Result<Vec<u8>, GitError> {
        let output =
            self.command()
                .args(args)
                .output()
                .map_err(|source| GitError::NotRunnable {
                    path: self.path.display().to_string(),
                    source,
                })?;
        if !output.status.success() {
            return Err(GitError::Failed {
                command: format!(
                    "git {}",
                    args.iter()
                        .map(|a| a.to_string_lossy())
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                status: output.status,
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            });
        }
        Ok(output.stdout)
    }
}

/// A git command run from inside git (vole's hooks): it keeps the
/// environment git gave the hook (the push's quarantine is in it), with
/// [`UNTRUSTED_HISTORY_OFF`] set again, so a hook's checks see the
/// history the object ids name whatever started git.
pub fn hook_command(git: &str) -> Command {
    let mut command = Command::new(git);
    command.envs(UNTRUSTED_HISTORY_OFF);
    command
}

/// `program` in a process group of its own, which the caller kills as a
/// group when its request ends early (the transport's `ChildGroup`, the
/// pack cache's producer). Should the server die, the sentinel kills what
/// is left (`vole sentinel`: the caller gives the child
/// [`Git::child_env`], which carries the server's mark). No `pre_exec`, so
/// the child starts by `posix_spawn` without copying the server's page
/// tables.
pub fn grouped(program: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    command.process_group(0);
    command
}

/// `text` is an object id as git writes it: 40 (SHA-1) or 64 (SHA-256)
/// hex digits.
pub fn is_hex_oid(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `(major, minor, patch)` from `git version 2.47.3` (also from vendor
/// suffixes such as `2.39.5.windows.1` or `2.43.0 (Apple Git-115)`).
fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let number = text
        .strip_prefix("git version ")?
        .split_whitespace()
        .next()?;
    let mut parts = number.split('.').map(|part| {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Opens a repo with gix the way every long-lived vole handle needs it: no
/// user or system git config is read, replacement objects are not
/// followed (see [`UNTRUSTED_HISTORY_OFF`]), and the object store has room for
/// many more pack indexes than the repo holds at open (gix fixes the slot
/// count when a handle opens; pushes and metadata folds each add a pack,
/// and a handle out of slots fails every lookup until reopened).
pub fn open_gix(path: &Path) -> gix::Result<gix::Repository> {
    // `core.useReplaceRefs=false` as a command-line override: above the
    // repo's own config, and `isolated()` reads no environment, so
    // `GIT_NO_REPLACE_OBJECTS` would not reach gix. gix reads no
    // `info/grafts` at all.
    let options = gix::open::Options::isolated()
        .cli_overrides(["core.useReplaceRefs=false"])
        .object_store_slots(gix::odb::store::init::Slots::AsNeededByDiskState {
            multiplier: 2.0,
            minimum: 512,
        });
    gix::open_opts(path, options)
}

/// The gix handles of the repos being read (site requests, web pages),
/// one per (repo path, incarnation), owned by the server's assembly and
/// shared by the services that read: opening reads the repo's config and
/// lists its packs, so each repo is opened once and each call gets a
/// thread-local copy. Bounded by count: each handle
/// holds the repo's pack files open, so the bound is one on descriptors
/// and mappings too; the least used goes first. A handle is opened only
/// after the repo at the path is seen to be that incarnation, and
/// [`GixHandles::forget`] drops a path's handles when its repo is deleted
/// (or its objects pruned), so a repo deleted and created again under the
/// name is never read for a request about the first. Refs are read from
/// disk on every lookup and a missing object makes gix look for new packs,
/// so a push is seen at once.
pub struct GixHandles {
    handles: moka::sync::Cache<(PathBuf, String), gix::ThreadSafeRepository>,
}

impl std::fmt::Debug for GixHandles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GixHandles")
            .field("open", &self.handles.entry_count())
            .finish()
    }
}

impl GixHandles {
    /// At most `max` repos open at once.
    pub fn new(max: u64) -> GixHandles {
        GixHandles {
            handles: moka::sync::Cache::builder()
                .max_capacity(max)
                .support_invalidation_closures()
                .build(),
        }
    }

    /// A handle on the repo at `path`, of incarnation `incarnation` (the
    /// id the access decision was about; empty for a repo without one).
    ///
    /// `Ok(None)`: the repo at `path` is not that incarnation (deleted, or
    /// created again under its name since the decision), which a caller
    /// answers as a missing repo.
    pub fn open(&self, path: &Path, incarnation: &str) -> gix::Result<Option<gix::Repository>> {
        let key = (path.to_path_buf(), incarnation.to_string());
        if let Some(shared) = self.handles.get(&key) {
            return Ok(Some(shared.to_thread_local()));
        }
        let repo = open_gix(path)?;
        // Read after the open: a repo replaced in between is refused here.
        let on_disk = crate::incarnation::Incarnation::read(path).ok().flatten();
        if on_disk.as_ref().map_or("", |i| i.id()) != incarnation {
            return Ok(None);
        }
        self.handles.insert(key, repo.clone().into_sync());
        Ok(Some(repo))
    }

    /// [`GixHandles::open`] for the incarnation the repo at `path` is now,
    /// for a reader whose every answer is derived from object ids alone
    /// (the sites' store: its caches are keyed by ids, and a root's
    /// resolution by the repo and its incarnation).
    pub fn open_current(&self, path: &Path) -> gix::Result<Option<gix::Repository>> {
        let on_disk = crate::incarnation::Incarnation::read(path).ok().flatten();
        self.open(path, on_disk.as_ref().map_or("", |i| i.id()))
    }

    /// Drops the handles on the repo at `path`, of every incarnation: it
    /// was deleted, or its objects were pruned behind them.
    pub fn forget(&self, path: &Path) {
        let path = path.to_path_buf();
        // Built to take closures: this cannot fail.
        let _ = self
            .handles
            .invalidate_entries_if(move |(at, _), _| *at == path);
        self.handles.run_pending_tasks();
    }

    /// Repos open now (as of the cache's last maintenance).
    pub fn open_count(&self) -> u64 {
        self.handles.entry_count()
    }
}

/// A branch name as git takes it: `refs/heads/<name>` passes git's ref
/// name rules (checked by gix: no `..`, `@{`, control characters, space,
/// `~^:?*[\\`, no component starting with `.` or ending with `.lock`, no
/// `//`), and, as `git check-ref-format --branch` adds, it does not start
/// with `-` and is not `@`; at most 255 bytes (a file name). The one rule
/// for every branch vole is told of (settings, change requests, config).
pub fn is_branch_name(name: &str) -> bool {
    use gix::bstr::ByteSlice;
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('-')
        && name != "@"
        && gix::validate::reference::name(format!("refs/heads/{name}").as_bytes().as_bstr()).is_ok()
}

/// Options of every read-side child (`spawn_reader`, `run_bounded`): a
/// blob over 1 MiB that is stored whole (loose, or undeltified in a pack)
/// is streamed by `cat-file` instead of inflated into memory first (git's
/// default threshold is 512 MiB). A deltified blob is still rebuilt in
/// memory by git; pushes are bounded by `--max-blob-size`. No mailmap is
/// read (a bare repo reads `HEAD:.mailmap` by default): what a read shows
/// of a commit (blame's author names) is the commit's own, a function of
/// its id, whatever a later push puts on HEAD. No signature is ever
/// checked (`gpg.*program=false`): a pushed file with `$Format:%G?$` under
/// `export-subst` would otherwise have an archive run gpg on the pusher's
/// bytes once per file.
pub const READ_SIDE: [&str; 10] = [
    "-c",
    "core.bigFileThreshold=1m",
    "-c",
    "mailmap.blob=",
    "-c",
    "gpg.program=false",
    "-c",
    "gpg.ssh.program=false",
    "-c",
    "gpg.x509.program=false",
];

/// A git child's stdout that owns the child: dropped (read to the end, or
/// its reader went away) it takes the child with it, and `kill_on_drop`
/// ends the child if it still runs.
pub struct ChildOutput {
    stdout: tokio::process::ChildStdout,
    _child: tokio::process::Child,
}

impl tokio::io::AsyncRead for ChildOutput {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stdout).poll_read(cx, buf)
    }
}

/// Where a path leads inside a tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    File {
        id: ObjectId,
        size: u64,
    },
    Dir(ObjectId),
    /// Absent, or refused: symlinks (never followed) and submodules.
    Missing,
}

/// Follows `segments` from `tree`, entry by entry, so a path cannot leave
/// the tree it starts in.
pub fn lookup(
    repo: &gix::Repository,
    tree: ObjectId,
    segments: &[String],
) -> Result<Lookup, gix::Error> {
    let mut current = Lookup::Dir(tree);
    for segment in segments {
        let Lookup::Dir(tree_id) = current else {
            return Ok(Lookup::Missing);
        };
        let tree = repo.find_tree(tree_id)?;
        let decoded = tree.decode()?;
        let Some(entry) = decoded
            .entries
            .iter()
            .find(|e| e.filename == segment.as_bytes())
        else {
            return Ok(Lookup::Missing);
        };
        let id = entry.oid.to_owned();
        current = if entry.mode.is_tree() {
            Lookup::Dir(id)
        } else if entry.mode.is_blob() {
            Lookup::File {
                id,
                size: repo.find_header(id)?.size(),
            }
        } else {
            Lookup::Missing
        };
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bare_repo(parent: &Path, name: &str) -> (PathBuf, crate::incarnation::Incarnation) {
        let dir = parent.join(name);
        let init = Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(init.success());
        let incarnation = crate::incarnation::Incarnation::mint();
        incarnation.write(&dir).unwrap();
        (dir, incarnation)
    }

    #[test]
    fn handles_are_of_one_incarnation_bounded_in_count_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let handles = GixHandles::new(2);
        let (repo, incarnation) = bare_repo(dir.path(), "a.git");
        assert!(handles.open(&repo, incarnation.id()).unwrap().is_some());
        assert!(
            handles.open(&repo, "another").unwrap().is_none(),
            "a handle was given for an incarnation the repo is not"
        );
        handles.handles.run_pending_tasks();
        assert_eq!(handles.open_count(), 1, "anti-vacuity: the handle is kept");
        handles.forget(&repo);
        assert_eq!(
            handles.open_count(),
            0,
            "a forgotten repo's handle stayed open"
        );
        for i in 0..6 {
            let (repo, incarnation) = bare_repo(dir.path(), &format!("r{i}.git"));
            assert!(handles.open(&repo, incarnation.id()).unwrap().is_some());
        }
        handles.handles.run_pending_tasks();
        assert!(
            handles.open_count() <= 2,
            "{} handles open past the bound of 2",
            handles.open_count()
        );
    }

    #[test]
    fn branch_names_follow_gits_rules() {
        for good in [
            "main",
            "feature/x",
            "v1.2",
            "odd#name",
            "a-b_c",
            "dependabot/npm/x-1.0",
        ] {
            assert!(is_branch_name(good), "{good}");
        }
        let long = "a".repeat(256);
        for bad in [
            "",
            "-x",
            "@",
            "a..b",
            "a b",
            "a~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[",
            "a\\b",
            "a//b",
            "/a",
            "a/",
            ".a",
            "a/.b",
            "a.lock",
            "a.",
            "a@{1}",
            "a\u{1}",
            long.as_str(),
        ] {
            assert!(!is_branch_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn versions_parse_and_compare_with_the_minimum() {
        let cases = [
            ("git version 2.47.3", Some((2, 47, 3))),
            ("git version 2.39.5.windows.1", Some((2, 39, 5))),
            ("git version 2.43.0 (Apple Git-115)", Some((2, 43, 0))),
            ("git version 2.40.0.rc1", Some((2, 40, 0))),
            ("git version 3.0", Some((3, 0, 0))),
            ("git version x.y", None),
            ("hub version 2.14.2", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_version(text), want, "{text}");
        }
        assert!(parse_version("git version 2.39.2").unwrap() < MIN_VERSION);
        assert!(parse_version("git version 2.36.0").unwrap() < MIN_VERSION);
        assert!(parse_version("git version 2.39.3").unwrap() >= MIN_VERSION);
        assert!(parse_version("git version 2.40.0").unwrap() >= MIN_VERSION);
    }
}
