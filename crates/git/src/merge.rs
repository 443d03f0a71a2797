//! Merges computed in the bare repo, never in a work tree: a test merge
//! of two commits (`git merge-tree --write-tree`: the merged tree, or the
//! conflicting paths), ancestry (`git merge-base --is-ancestor`), a new
//! commit from a tree (`git commit-tree`, with the author and committer
//! given), and a ref moved from an expected value only
//! (`git update-ref <ref> <new> <old>`). Every child is bounded
//! ([`Git::run_bounded_env`]) and writes with [`crate::DURABLE_WRITES`].
//!
//! Objects `merge-tree` and `commit-tree` write stay unreachable until a
//! ref names them; `vole repo gc` prunes what a refused merge left.

use std::path::Path;

use gix::ObjectId;

use crate::{BoundedError, Bounds, Git};

/// What merging `source` into `target` gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestMerge {
    /// The merged tree.
    Clean(ObjectId),
    /// The paths with conflicts (at most [`MAX_CONFLICTS_LISTED`]).
    Conflicts(Vec<String>),
    /// The two have no commit in common.
    Unrelated,
}

/// Conflicting paths a test merge lists at most.
pub const MAX_CONFLICTS_LISTED: usize = 200;

/// Bytes of `merge-tree` output read at most (a tree id and conflicting
/// paths).
const MAX_MERGE_TREE_OUTPUT: usize = 1 << 20;

/// A person as a commit names them.
#[derive(Debug, Clone)]
pub struct Signature {
    pub name: String,
    pub email: String,
}

impl Signature {
    /// `name` and `email` made safe for a commit header: no `<`, `>` or
    /// line breaks (which git would refuse or which would forge fields),
    /// and never empty.
    pub fn new(name: &str, email: &str) -> Signature {
        let clean = |text: &str, fallback: &str| {
            let kept: String = text
                .chars()
                .filter(|c| !matches!(c, '<' | '>') && !c.is_control())
                .collect();
            let kept = kept.trim().to_string();
            if kept.is_empty() {
                fallback.to_string()
            } else {
                kept
            }
        };
        Signature {
            name: clean(name, "unknown"),
            email: clean(email, "unknown@invalid"),
        }
    }
}

/// Why a merge step failed.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(transparent)]
    Git(#[from] BoundedError),
    #[error("`git {command}` gave no object id: {output:?}")]
    NoId {
        command: &'static str,
        output: String,
    },
    /// The ref was not at the value expected (it moved since).
    #[error("{ref_name} moved: {stderr}")]
    Moved { ref_name: String, stderr: String },
    #[error("`git {command}` failed ({status}): {stderr}")]
    Failed {
        command: &'static str,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("cannot write the commit's message for git: {source}")]
    Message { source: std::io::Error },
}

fn bounds(deadline: std::time::Duration) -> Bounds {
    Bounds {
        max_output: MAX_MERGE_TREE_OUTPUT,
        deadline,
    }
}

fn object_id(command: &'static str, text: &str) -> Result<ObjectId, MergeError> {
    ObjectId::from_hex(text.trim().as_bytes()).map_err(|_| MergeError::NoId {
        command,
        output: text.chars().take(200).collect(),
    })
}

impl Git {
    /// Merges `source` into `target` in `repo` (writing the merged trees
    /// as objects), without a work tree or an index.
    pub fn test_merge(
        &self,
        repo: &Path,
        (target, source): (ObjectId, ObjectId),
        deadline: std::time::Duration,
        scratch: Option<&Path>,
    ) -> Result<TestMerge, MergeError> {
        let (target, source) = (target.to_string(), source.to_string());
        // With `scratch`, the merged trees go there and the repo's objects
        // are read as its alternates: a look that writes nothing to the
        // repo.
        let (objects, alternates) = match scratch {
            Some(dir) => (
                dir.to_string_lossy().into_owned(),
                repo.join("objects").to_string_lossy().into_owned(),
            ),
            None => Default::default(),
        };
        let env: &[(&str, &str)] = match scratch {
            Some(_) => &[
                ("GIT_OBJECT_DIRECTORY", &objects),
                ("GIT_ALTERNATE_OBJECT_DIRECTORIES", &alternates),
            ],
            None => &[],
        };
        let (out, status, stderr) = self.run_bounded_env(
            repo,
            &[
                "merge-tree",
                "--write-tree",
                "--name-only",
                "--no-messages",
                "-z",
                &target,
                &source,
            ],
            env,
            bounds(deadline),
        )?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut fields = text.split('\0');
        // A clean merge prints its tree id alone: output past the bound is
        // a list of conflicting paths (cut, and git stopped there).
        let code = if out.truncated {
            Some(1)
        } else {
            status.code()
        };
        match code {
            Some(0) => Ok(TestMerge::Clean(object_id(
                "merge-tree",
                fields.next().unwrap_or_default(),
            )?)),
            Some(1) => {
                fields.next();
                let mut paths: Vec<String> = fields
                    .filter(|f| !f.is_empty())
                    .take(MAX_CONFLICTS_LISTED + 1)
                    .map(str::to_string)
                    .collect();
                paths.dedup();
                paths.truncate(MAX_CONFLICTS_LISTED);
                Ok(TestMerge::Conflicts(paths))
            }
            _ if stderr.contains("unrelated histories") => Ok(TestMerge::Unrelated),
            _ => Err(MergeError::Failed {
                command: "merge-tree",
                status,
                stderr,
            }),
        }
    }

    /// The best common ancestor of `a` and `b`, if they have one.
    pub fn merge_base(
        &self,
        repo: &Path,
        (a, b): (ObjectId, ObjectId),
        deadline: std::time::Duration,
    ) -> Result<Option<ObjectId>, MergeError> {
        let (a, b) = (a.to_string(), b.to_string());
        let (out, status, stderr) =
            self.run_bounded_env(repo, &["merge-base", &a, &b], &[], bounds(deadline))?;
        match status.code() {
            Some(0) => Ok(Some(object_id(
                "merge-base",
                &String::from_utf8_lossy(&out.stdout),
            )?)),
            Some(1) => Ok(None),
            _ => Err(MergeError::Failed {
                command: "merge-base",
                status,
                stderr,
            }),
        }
    }

    /// Whether `ancestor` is `descendant` or one of its ancestors.
    pub fn is_ancestor(
        &self,
        repo: &Path,
        ancestor: ObjectId,
        descendant: ObjectId,
        deadline: std::time::Duration,
    ) -> Result<bool, MergeError> {
        let (a, d) = (ancestor.to_string(), descendant.to_string());
        let (_, status, stderr) = self.run_bounded_env(
            repo,
            &["merge-base", "--is-ancestor", &a, &d],
            &[],
            bounds(deadline),
        )?;
        match status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(MergeError::Failed {
                command: "merge-base",
                status,
                stderr,
            }),
        }
    }

    /// A new commit of `tree` with `parents`, `message`, `author` and
    /// `committer` (dated now); its id.
    pub fn commit_tree(
        &self,
        repo: &Path,
        tree: ObjectId,
        parents: &[ObjectId],
        message: &str,
        (author, committer): (&Signature, &Signature),
        deadline: std::time::Duration,
    ) -> Result<ObjectId, MergeError> {
        let tree = tree.to_string();
        let parents: Vec<String> = parents.iter().map(ObjectId::to_string).collect();
        let mut args = vec!["commit-tree", tree.as_str()];
        for parent in &parents {
            args.push("-p");
            args.push(parent);
        }
        // The message from a file: as an argument, one past the kernel's
        // bound on an argument (128 KiB) could not be passed at all.
        let file =
            tempfile::NamedTempFile::new().map_err(|source| MergeError::Message { source })?;
        std::fs::write(file.path(), message).map_err(|source| MergeError::Message { source })?;
        let file_name = file.path().to_string_lossy().into_owned();
        args.push("-F");
        args.push(&file_name);
        let env = [
            ("GIT_AUTHOR_NAME", author.name.as_str()),
            ("GIT_AUTHOR_EMAIL", author.email.as_str()),
            ("GIT_COMMITTER_NAME", committer.name.as_str()),
            ("GIT_COMMITTER_EMAIL", committer.email.as_str()),
        ];
        let (out, status, stderr) = self.run_bounded_env(repo, &args, &env, bounds(deadline))?;
        if !status.success() {
            return Err(MergeError::Failed {
                command: "commit-tree",
                status,
                stderr,
            });
        }
        object_id("commit-tree", &String::from_utf8_lossy(&out.stdout))
    }

    /// Moves `ref_name` from `old` to `new`, only if it is at `old` (the
    /// ref lock compares), without running any hook: the caller records
    /// the move in the ref log itself.
    pub fn move_ref(
        &self,
        repo: &Path,
        ref_name: &str,
        new: ObjectId,
        old: ObjectId,
        deadline: std::time::Duration,
    ) -> Result<(), MergeError> {
        let (new, old) = (new.to_string(), old.to_string());
        let (_, status, stderr) = self.run_bounded_env(
            repo,
            &[
                "-c",
                "core.hooksPath=/dev/null",
                "update-ref",
                "--no-deref",
                ref_name,
                &new,
                &old,
            ],
            &[],
            bounds(deadline),
        )?;
        if status.success() {
            Ok(())
        } else if stderr.contains("but expected") || stderr.contains("cannot lock ref") {
            Err(MergeError::Moved {
                ref_name: ref_name.to_string(),
                stderr,
            })
        } else {
            Err(MergeError::Failed {
                command: "update-ref",
                status,
                stderr,
            })
        }
    }
}
