//! The backup written from its cut: the repos' files and the logs through
//! their cut sequences copied, the cut's refs written, the manifest last.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use vole_accounts::audit::AuditEvent;
use vole_git::datadir::DataDir;
use vole_hooks::RefMove;
use vole_log::RecordKind;
use vole_meta::MetaWrite;

use super::{
    BackupError, Cut, FileEntry, LogCut, MANIFEST, Manifest, RepoCut, copy_hashed,
    create_private_dir, io, refuse_unless_empty,
};

/// Writes the backup of `cut` into `dest` (which must not exist or be
/// empty), calling `progress(done, total)` in bytes. Returns the manifest.
pub fn write(
    data: &DataDir,
    cut: Cut,
    dest: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Manifest, BackupError> {
    refuse_unless_empty(dest, "backup destination")?;
    create_private_dir(dest)?;
    // A backup that fails leaves nothing behind (DEST was empty): it can
    // be run again as it was.
    write_into(data, cut, dest, progress).inspect_err(|_| {
        let _ = empty_dir(dest);
    })
}

/// Removes what is inside `dir`, leaving it.
fn empty_dir(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// A file to copy: from where, to where (relative), how many bytes.
struct Planned {
    from: PathBuf,
    to: String,
    bytes: u64,
}

/// Whether a file in a repo is copied as it is: not the refs (the cut's
/// are written instead), not git's scratch files.
fn copied_as_is(relative_in_repo: &Path) -> bool {
    let text = relative_in_repo.to_string_lossy();
    let name = relative_in_repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    !(text.starts_with("refs/")
        || text == "packed-refs"
        || text == "HEAD"
        || text.starts_with("objects/incoming-")
        || text.starts_with("objects/tmp_objdir")
        || name.starts_with("tmp_")
        || name.starts_with(".tmp-")
        || name.ends_with(".lock")
        // A pack's keep file: receive-pack's lasts only until the push's
        // refs are in (one can vanish between the listing and the copy),
        // and a restored repo needs none (a pack not kept is repacked,
        // not lost).
        || name.ends_with(".keep"))
}

fn walk(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            walk(&path, base, out)?;
        } else if kind.is_file() {
            out.push(path.strip_prefix(base).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(())
}

fn write_into(
    data: &DataDir,
    cut: Cut,
    dest: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Manifest, BackupError> {
    let mut plan = plan_repo_files(data, &cut.repos)?;
    // The persisted metadata index, as it is (it is keyed by tree ids, so
    // any version of it is right for the refs of any cut).
    let index = data.log_dir().join(vole_meta::persisted::FILE_NAME);
    if let Ok(meta) = std::fs::metadata(&index) {
        plan.push(Planned {
            to: format!("log/{}", vole_meta::persisted::FILE_NAME),
            from: index,
            bytes: meta.len(),
        });
    }
    let log_lengths: Vec<u64> = cut
        .logs
        .iter()
        .map(|(log, file, length)| length.map_or_else(|| log_length(data, log, file), Ok))
        .collect::<Result<_, _>>()?;
    let total = plan.iter().map(|p| p.bytes).sum::<u64>() + log_lengths.iter().sum::<u64>();
    let mut done = 0u64;
    let mut files = Vec::new();
    progress(done, total);
    let log_cuts: Vec<LogCut> = cut.logs.iter().map(|(log, _, _)| log.clone()).collect();
    for ((log, mut file, _), length) in cut.logs.into_iter().zip(log_lengths) {
        files.push(copy_log(data, &log, &mut file, length, dest)?);
        done += length;
        progress(done, total);
    }
    let applied_to = format!(
        "log/{}",
        vole_log::applied_path(Path::new(MetaWrite::FILE_NAME)).display()
    );
    files.push(write_file(
        dest,
        &applied_to,
        &format!("{}\n", cut.meta_applied),
    )?);
    for planned in plan {
        files.push(copy_planned(&planned, dest)?);
        done += planned.bytes;
        progress(done.min(total), total);
    }
    for repo in &cut.repos {
        write_refs(dest, repo, &mut files)?;
    }
    let manifest = Manifest {
        vole_version: env!("CARGO_PKG_VERSION").to_string(),
        created: vole_stdx::time::now_millis(),
        logs: log_cuts,
        meta_applied: cut.meta_applied,
        repos: cut.repos,
        files,
    };
    write_manifest(dest, &manifest)?;
    Ok(manifest)
}

/// Every file of the cut's repos copied as it is, with its size now.
fn plan_repo_files(data: &DataDir, repos: &[RepoCut]) -> Result<Vec<Planned>, BackupError> {
    let mut plan = Vec::new();
    for repo in repos {
        let dir = data.root().join(&repo.dir);
        let mut files = Vec::new();
        walk(&dir, &dir, &mut files).map_err(io("cannot list", &dir))?;
        for file in files.into_iter().filter(|f| copied_as_is(f)) {
            let from = dir.join(&file);
            let bytes = std::fs::metadata(&from).map(|m| m.len()).unwrap_or(0);
            plan.push(Planned {
                to: format!("{}/{}", repo.dir, file.to_string_lossy()),
                from,
                bytes,
            });
        }
    }
    Ok(plan)
}

/// A log copied from its start through its cut, `length` bytes.
fn copy_log(
    data: &DataDir,
    log: &LogCut,
    file: &mut File,
    length: u64,
    dest: &Path,
) -> Result<FileEntry, BackupError> {
    use std::io::Seek;
    let path = data.log_dir().join(&log.file);
    file.seek(std::io::SeekFrom::Start(0))
        .map_err(io("cannot read", &path))?;
    let to = format!("log/{}", log.file);
    copy_hashed(&mut file.take(length), &dest.join(&to), &to, Some(length))
}

/// A repo's file copied whole, as it is once opened (objects never change;
/// a file git replaces by a rename meanwhile is read as one version or the
/// other, never cut): the size planned is for the progress only.
fn copy_planned(planned: &Planned, dest: &Path) -> Result<FileEntry, BackupError> {
    let mut from = File::open(&planned.from).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            BackupError::Refused(format!(
                "{} went away during the backup (a repo deleted meanwhile?); run the backup again",
                planned.from.display()
            ))
        } else {
            io("cannot read", &planned.from)(e)
        }
    })?;
    copy_hashed(&mut from, &dest.join(&planned.to), &planned.to, None)
}

/// A repo's `HEAD` and refs as the cut saw them (`packed-refs`), with the
/// empty ref directories git expects.
fn write_refs(dest: &Path, repo: &RepoCut, files: &mut Vec<FileEntry>) -> Result<(), BackupError> {
    files.push(write_file(
        dest,
        &format!("{}/HEAD", repo.dir),
        &format!("{}\n", repo.head),
    )?);
    let mut packed = String::from("# pack-refs with: sorted \n");
    for (name, id) in &repo.refs {
        packed.push_str(&format!("{id} {name}\n"));
    }
    files.push(write_file(
        dest,
        &format!("{}/packed-refs", repo.dir),
        &packed,
    )?);
    for dir in ["refs/heads", "refs/tags"] {
        create_private_dir(&dest.join(&repo.dir).join(dir))?;
    }
    Ok(())
}

/// A file the backup writes itself, not copied.
fn write_file(dest: &Path, name: &str, text: &str) -> Result<FileEntry, BackupError> {
    copy_hashed(&mut text.as_bytes(), &dest.join(name), name, None)
}

fn log_length(data: &DataDir, log: &LogCut, file: &File) -> Result<u64, BackupError> {
    let path = data.log_dir().join(&log.file);
    let reader = std::io::BufReader::new(file.try_clone().map_err(io("cannot read", &path))?);
    let length = match log.file.as_str() {
        f if f == RefMove::FILE_NAME => {
            vole_log::length_through::<RefMove, _>(&path, reader, log.seq)?
        }
        f if f == MetaWrite::FILE_NAME => {
            vole_log::length_through::<MetaWrite, _>(&path, reader, log.seq)?
        }
        _ => vole_log::length_through::<AuditEvent, _>(&path, reader, log.seq)?,
    };
    length.ok_or_else(|| {
        BackupError::Refused(format!(
            "log {} does not hold its cut sequence {}",
            path.display(),
            log.seq
        ))
    })
}

fn write_manifest(dest: &Path, manifest: &Manifest) -> Result<(), BackupError> {
    let path = dest.join(MANIFEST);
    let tmp = dest.join(format!("{MANIFEST}.tmp"));
    let text = serde_json::to_vec_pretty(manifest)
        .map_err(|e| BackupError::Refused(format!("cannot write the manifest: {e}")))?;
    let mut file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io("cannot create", &tmp))?
    };
    file.write_all(&text).map_err(io("cannot write", &tmp))?;
    file.sync_all().map_err(io("cannot sync", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(io("cannot rename", &tmp))?;
    vole_git::durable::sync_dir(dest).map_err(io("cannot sync", dest))
}
