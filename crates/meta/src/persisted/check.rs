//! `vole check`'s part of the persisted index: every shard tip whose
//! tree the file holds, and the tree it holds of each shard that moved
//! since (a start takes thread directories from it), is read from git
//! and must give the file's rows.

use super::{PersistError, Persisted, Row, read_shard, shard_trees};

/// What `vole check` found of the persisted index.
#[derive(Debug, Default)]
pub struct CheckedIndex {
    /// Rows checked (of the current shard trees, and of the trees the
    /// file holds of shards that moved since), and shard trees in the
    /// file (0 and 0: there is none).
    pub rows: usize,
    pub shard_trees: usize,
    /// Shard tips whose tree the file holds (a start reads them from it),
    /// and those it does not (read from git).
    pub current: usize,
    pub stale: usize,
    /// Each a line a person can act on.
    pub problems: Vec<String>,
    /// A file of another version (the next start writes it again).
    pub note: Option<String>,
}

/// Checks the persisted index at `path` against the repos `repos` (name,
/// git dir): every shard tip's tree it holds is read from git and must
/// give the same rows, or a start would read documents the tree does not
/// hold.
pub fn check(path: &std::path::Path, repos: &[(String, std::path::PathBuf)]) -> CheckedIndex {
    let mut checked = CheckedIndex::default();
    let persisted = match Persisted::read(path) {
        Ok(Some(persisted)) => persisted,
        Ok(None) => return checked,
        Err(e @ PersistError::Format { .. }) => {
            checked.note = Some(format!(
                "{e}; the next start reads the shard trees from git and writes it again"
            ));
            return checked;
        }
        Err(e) => {
            checked.problems.push(format!(
                "{e}; remove it (the next start reads the shard trees from git and writes it again)"
            ));
            return checked;
        }
    };
    checked.shard_trees = persisted.shards.len();
    let mut checked_trees = std::collections::HashSet::new();
    for (name, git_dir) in repos {
        let trees = match shard_trees(git_dir, crate::shard::SHARDS) {
            Ok(trees) => trees,
            Err(e) => {
                checked
                    .problems
                    .push(format!("{name}: cannot read its shard tips: {e}"));
                continue;
            }
        };
        let Ok(repo) = crate::fold::open_repo(git_dir) else {
            continue;
        };
        for (shard, tree) in &trees {
            if !persisted.has_shard(tree) {
                checked.stale += 1;
                continue;
            }
            checked.current += 1;
            checked_trees.insert(*tree);
            compare(&persisted, &repo, (name, *shard), *tree, path, &mut checked);
        }
        // The tree the file holds of a shard that moved since: a start
        // takes the thread directories it still shares from it.
        for (shard, tip) in trees {
            let Some(old) = persisted.tree_at(name, shard).filter(|t| *t != tip) else {
                continue;
            };
            if checked_trees.insert(old) && repo.find_tree(old).is_ok() {
                compare(&persisted, &repo, (name, shard), old, path, &mut checked);
            }
        }
    }
    checked
}

/// Compares the file's rows of shard tree `tree` with the tree read from
/// git; a difference is a problem.
fn compare(
    persisted: &Persisted,
    repo: &gix::Repository,
    (name, shard): (&str, u8),
    tree: gix::ObjectId,
    path: &std::path::Path,
    checked: &mut CheckedIndex,
) {
    let remove = format!(
        "remove {} (the next start reads the shard trees from git and writes it again)",
        path.display()
    );
    let Some(rows) = persisted.shard_rows(&tree) else {
        checked.problems.push(format!(
            "{name}: the persisted index's rows of shard tree {tree} cannot be read; {remove}"
        ));
        return;
    };
    checked.rows += rows.len();
    let mut from_git = Vec::new();
    if let Err(e) = read_shard(
        repo,
        (name, shard),
        tree,
        None,
        Some(&mut from_git),
        &mut Vec::new(),
    ) {
        checked
            .problems
            .push(format!("{name}: shard tree {tree} cannot be read: {e}"));
        return;
    }
    let mut from_file: Vec<Row> = (0..rows.len()).map(|i| rows.row(i)).collect();
    from_git.sort();
    from_file.sort();
    if from_git != from_file {
        checked.problems.push(format!(
            "{name}: the persisted index's {} documents of shard tree {tree} are not the {} the tree holds; {remove}",
            from_file.len(),
            from_git.len(),
        ));
    }
}
