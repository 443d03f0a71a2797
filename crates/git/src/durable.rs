//! fsync for what lives outside the logs: a directory after a file was
//! created, renamed or removed in it; a whole tree written before it is
//! renamed into place (a new repo); and the directories a git push changed.
//!
//! git syncs the files it writes when `core.fsync` names them
//! ([`crate::DURABLE_WRITES`]): a ref's lock file before the rename, a
//! pack and its index before they are moved out of the push's quarantine.
//! It never syncs a directory after a rename (seen with strace on git
//! 2.47: `fsync(refs/heads/main.lock)`, `rename(main.lock, main)`, no
//! fsync of `refs/heads`; the quarantine's files are `link`ed into
//! `objects/` with no fsync of the directory either). On ext4 and most
//! file systems a rename is durable only once its directory is synced, so
//! the functions here sync those directories. The log's own syncs are in
//! `log/storage.rs`; the metadata fold's in `meta/pack.rs` and
//! `meta/fold.rs` (ARCHITECTURE.md lists every one).

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// fsyncs a directory, making a create, rename or removal inside it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes `bytes` to `path` durably: a temporary file beside it, synced,
/// renamed into place, then the directory synced.
pub fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("a file to write has a directory"))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// fsyncs every regular file and directory under `root` (and `root`),
/// files before the directory that holds them. Symlinks are not followed.
pub fn sync_tree(root: &Path) -> io::Result<()> {
    let mut dirs = vec![root.to_path_buf()];
    let mut index = 0;
    while let Some(dir) = dirs.get(index).cloned() {
        index += 1;
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                dirs.push(entry.path());
            } else if kind.is_file() {
                File::open(entry.path())?.sync_all()?;
            }
        }
    }
    // Deepest first: a directory's entries are durable before its own
    // entry in its parent is.
    for dir in dirs.iter().rev() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Where a push put new objects: `objects/pack` (receive-pack links the
/// quarantine's pack, index and reverse index in there) and `objects`
/// itself. vole sets `receive.unpackLimit=1`, so a push writes no loose
/// objects (a push without objects writes nothing).
pub fn sync_object_dirs(git_dir: &Path) -> io::Result<()> {
    let objects = git_dir.join("objects");
    sync_dir(&objects.join("pack"))?;
    sync_dir(&objects)
}

/// The directories whose entries a ref transaction on `ref_names` may
/// have changed: each ref's directory and every one above it up to the
/// repo (git creates missing ones, and prunes empty ones after a
/// deletion), and the repo itself (`packed-refs` is rewritten in place by
/// a rename when a packed ref is deleted). A directory that no longer
/// exists is skipped: its removal is recorded in the one above. Returns
/// the directories synced.
pub fn sync_ref_dirs<'a>(
    git_dir: &Path,
    ref_names: impl IntoIterator<Item = &'a str>,
) -> io::Result<Vec<PathBuf>> {
    let mut dirs = BTreeSet::new();
    for name in ref_names {
        // Only names git itself would write under refs/; nothing that
        // climbs out of the repo.
        if !name.starts_with("refs/")
            || name
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
        {
            continue;
        }
        let mut dir = Path::new(name).parent();
        while let Some(relative) = dir.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(git_dir.join(relative));
            dir = relative.parent();
        }
    }
    // Deepest first, the repo itself last.
    let mut ordered: Vec<PathBuf> = dirs.into_iter().collect();
    ordered.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    ordered.push(git_dir.to_path_buf());
    let mut synced = Vec::with_capacity(ordered.len());
    for dir in ordered {
        match sync_dir(&dir) {
            Ok(()) => synced.push(dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("syncing {}: {e}", dir.display()),
                ));
            }
        }
    }
    Ok(synced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_dirs_are_every_directory_up_to_the_repo_deepest_first() {
        let repo = tempfile::tempdir().unwrap();
        let git_dir = repo.path();
        std::fs::create_dir_all(git_dir.join("refs/heads/feature")).unwrap();
        std::fs::create_dir_all(git_dir.join("refs/tags")).unwrap();
        let synced = sync_ref_dirs(
            git_dir,
            [
                "refs/heads/main",
                "refs/heads/feature/x",
                "refs/tags/v1",
                // Deleted with its directory: skipped, its parent is synced.
                "refs/heads/gone/y",
                // Never anything outside refs/.
                "HEAD",
                "refs/../../etc/x",
            ],
        )
        .unwrap();
        let relative: Vec<String> = synced
            .iter()
            .map(|d| {
                d.strip_prefix(git_dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(
            relative,
            ["refs/heads/feature", "refs/heads", "refs/tags", "refs", ""]
        );
    }

    #[test]
    fn a_tree_that_is_not_there_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f"), b"x").unwrap();
        std::fs::write(dir.path().join("g"), b"y").unwrap();
        // That every file and directory is synced is seen with strace
        // (tests/it/durability.rs); here, only that it walks and errs.
        sync_tree(dir.path()).unwrap();
        assert!(sync_tree(&dir.path().join("missing")).is_err());
    }
}
