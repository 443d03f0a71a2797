//! Keeping a repo's packs few: a geometric `git repack` once a repo holds
//! more than `max_packs` packs, on its own thread, after a metadata fold
//! or a push (vole turns git's own `gc --auto` after a push off: it would
//! run detached, after the pusher heard "ok", rewriting packs and refs no
//! one syncs). When a repack is done, the pack directory is synced, so
//! its new pack and the old packs it deleted are on disk together.

use super::*;

/// Keeps the number of packs bounded: each fold cycle writes one, so once
/// a repo holds more than `max_packs`, a geometric repack
/// (`git repack --geometric=2 -d`) merges the small ones, leaving a number
/// of packs logarithmic in the object count. It runs on its own thread
/// (git's repack is safe beside readers and writers).
pub(super) fn maybe_repack(inner: &Inner, meta: &RepoMeta) {
    let Some(git) = inner.git.clone() else {
        return;
    };
    let pack_dir = meta.git_dir.join("objects").join("pack");
    let max_packs = inner.options.max_packs;
    // A backup is copying the packs: not now.
    if inner.maintenance_holds.load(Ordering::SeqCst) > 0 {
        return;
    }
    let packs = count_packs(&pack_dir);
    if packs <= max_packs || meta.repacking.swap(true, Ordering::SeqCst) {
        return;
    }
    let repacking = meta.repacking.clone();
    let git_dir = meta.git_dir.clone();
    let name = meta.name.clone();
    inner.counters.repacks.fetch_add(1, Ordering::Relaxed);
    let _ = std::thread::Builder::new()
        .name("vole-repack".into())
        .spawn(move || {
            // Folds that ran during a repack found it running and left
            // their packs to it: look again once it is done (bounded), or
            // the count could stay above the bound until the next fold.
            let mut packs_before = packs;
            for _round in 0..4 {
                let output = git
                    .command()
                    .arg("--git-dir")
                    .arg(&git_dir)
                    .args(["repack", "-d", "-q", "--geometric=2"])
                    .output();
                match output {
                    Ok(out) if out.status.success() => {
                        if let Err(e) = vole_git::durable::sync_object_dirs(&git_dir) {
                            tracing::warn!(repo = name, error = %e, "cannot sync the pack directory after a repack");
                        }
                        tracing::info!(repo = name, packs_before, "packs repacked")
                    }
                    Ok(out) => {
                        tracing::warn!(
                            repo = name,
                            stderr = %String::from_utf8_lossy(&out.stderr).trim(),
                            "git repack failed"
                        );
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(repo = name, error = %e, "cannot run git repack");
                        break;
                    }
                }
                packs_before = count_packs(&pack_dir);
                if packs_before <= max_packs {
                    break;
                }
            }
            repacking.store(false, Ordering::SeqCst);
        });
}

pub(super) fn count_packs(pack_dir: &Path) -> usize {
    std::fs::read_dir(pack_dir)
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .count()
        })
        .unwrap_or(0)
}
