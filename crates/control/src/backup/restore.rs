//! `vole restore`: a backup copied into an empty data dir, every file
//! checked against its manifest, renamed into place once all are.

use std::fs::File;
use std::path::Path;

use vole_git::datadir::DataDir;

use super::{
    BackupError, MANIFEST, Manifest, copy_hashed, create_private_dir, io, refuse_unless_empty,
};

/// Restores the backup at `src` into the empty data dir `data`, checking
/// every file against the manifest. Returns the manifest.
pub fn restore(
    src: &Path,
    data: &DataDir,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Manifest, BackupError> {
    let manifest_path = src.join(MANIFEST);
    let text = std::fs::read(&manifest_path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            BackupError::Refused(format!(
                "{} has no {MANIFEST}: not a vole backup, or one that did not finish",
                src.display()
            ))
        } else {
            io("cannot read", &manifest_path)(e)
        }
    })?;
    let manifest: Manifest = serde_json::from_slice(&text).map_err(|e| {
        BackupError::Refused(format!("{} does not parse: {e}", manifest_path.display()))
    })?;
    refuse_unless_empty(data.root(), "data dir")?;
    // Into a sibling first, renamed into place once every file checked
    // out: a damaged backup leaves the data dir as it was.
    let root = data.root();
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "data".into());
    let staging = root.with_file_name(format!(".{name}.restoring"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io("cannot remove", &staging))?;
    }
    create_private_dir(&staging)?;
    match restore_into(&manifest, src, &staging, progress) {
        Ok(()) => {
            if root.exists() {
                // Empty (checked above): replaced by the rename.
                std::fs::remove_dir(root).map_err(io("cannot replace", root))?;
            }
            std::fs::rename(&staging, root).map_err(io("cannot move into place", root))?;
            if let Some(parent) = root.parent() {
                vole_git::durable::sync_dir(parent).map_err(io("cannot sync", parent))?;
            }
            Ok(manifest)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e)
        }
    }
}

fn restore_into(
    manifest: &Manifest,
    src: &Path,
    staging: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(), BackupError> {
    let total = manifest.files.iter().map(|f| f.bytes).sum();
    let mut done = 0;
    progress(done, total);
    for entry in &manifest.files {
        if entry
            .path
            .split('/')
            .any(|part| part == ".." || part.is_empty())
        {
            return Err(BackupError::Damaged {
                path: entry.path.clone(),
                why: "a path outside the data dir".into(),
            });
        }
        let from_path = src.join(&entry.path);
        let mut from = File::open(&from_path).map_err(|e| BackupError::Damaged {
            path: entry.path.clone(),
            why: e.to_string(),
        })?;
        let copied = copy_hashed(
            &mut from,
            &staging.join(&entry.path),
            &entry.path,
            Some(entry.bytes),
        )
        .map_err(|e| BackupError::Damaged {
            path: entry.path.clone(),
            why: e.to_string(),
        })?;
        if copied.sha256 != entry.sha256 {
            return Err(BackupError::Damaged {
                path: entry.path.clone(),
                why: "its SHA-256 differs".into(),
            });
        }
        done += entry.bytes;
        progress(done, total);
    }
    for repo in &manifest.repos {
        for dir in ["refs/heads", "refs/tags", "objects/info"] {
            create_private_dir(&staging.join(&repo.dir).join(dir))?;
        }
    }
    Ok(())
}
