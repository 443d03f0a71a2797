//! A repo's incarnation: the id minted when the repo is created, kept in
//! the repo (`vole-incarnation`) and carried by everything that belongs to
//! it (log records, cache keys, gix handles, repo-restricted tokens). A
//! name can be reused: a repo deleted and created again is another
//! incarnation, so nothing of the first reaches the second. A repo moved
//! back from the trash keeps its file, so it is the same repo again.

use std::fmt;
use std::path::Path;

use crate::durable;

/// The file in a repo that holds its incarnation: the id on the first
/// line, and `adopts-legacy` on the second in a repo that was there when
/// its data dir was upgraded to incarnations (see [`Incarnation::owns`]).
pub const INCARNATION_FILE: &str = "vole-incarnation";

const ADOPTS_LEGACY: &str = "adopts-legacy";

/// One life of a repo name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Incarnation {
    id: String,
    adopts_legacy: bool,
}

/// Why a repo's incarnation cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum IncarnationError {
    #[error("cannot read {file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file} holds no incarnation id (a ULID on its first line)")]
    Malformed { file: String },
}

impl Incarnation {
    /// A new incarnation: a ULID, unique across names and time.
    pub fn mint() -> Incarnation {
        Incarnation {
            id: ulid::Ulid::new().to_string(),
            adopts_legacy: false,
        }
    }

    /// The incarnation of a repo that was there before incarnations
    /// existed: the records written before then carry no incarnation, and
    /// they are this one's.
    pub fn mint_adopting_legacy() -> Incarnation {
        Incarnation {
            adopts_legacy: true,
            ..Incarnation::mint()
        }
    }

    /// The id, as log records and cache keys carry it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether a record that names this repo and carries `recorded` (its
    /// incarnation id; empty or `None` for a record written before
    /// incarnations existed) belongs to this incarnation. Records from
    /// before belong to the repo of that name present at the upgrade.
    pub fn owns(&self, recorded: Option<&str>) -> bool {
        match recorded {
            None | Some("") => self.adopts_legacy,
            Some(id) => id == self.id,
        }
    }

    /// Reads the incarnation of the repo at `repo_dir`; `None` when it has
    /// none yet (a repo from before incarnations).
    pub fn read(repo_dir: &Path) -> Result<Option<Incarnation>, IncarnationError> {
        let path = repo_dir.join(INCARNATION_FILE);
        let file = || path.display().to_string();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(IncarnationError::Io {
                    file: file(),
                    source,
                });
            }
        };
        let mut lines = text.lines();
        let id = lines.next().unwrap_or_default().trim();
        if ulid::Ulid::from_string(id).is_err() {
            return Err(IncarnationError::Malformed { file: file() });
        }
        Ok(Some(Incarnation {
            id: id.to_string(),
            adopts_legacy: lines.any(|line| line.trim() == ADOPTS_LEGACY),
        }))
    }

    /// Writes it into a repo being made (`repo_dir` is scratch until it is
    /// renamed into place): the file created there and synced, then the
    /// directory.
    pub fn write_new(&self, repo_dir: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(repo_dir.join(INCARNATION_FILE))?;
        file.write_all(self.file_text().as_bytes())?;
        file.sync_all()?;
        durable::sync_dir(repo_dir)
    }

    /// Writes it into the repo at `repo_dir`, synced (a temporary file
    /// renamed into place, and the directory synced).
    pub fn write(&self, repo_dir: &Path) -> std::io::Result<()> {
        durable::write_synced(
            &repo_dir.join(INCARNATION_FILE),
            self.file_text().as_bytes(),
        )
    }

    fn file_text(&self) -> String {
        if self.adopts_legacy {
            format!("{}\n{ADOPTS_LEGACY}\n", self.id)
        } else {
            format!("{}\n", self.id)
        }
    }
}

impl fmt::Display for Incarnation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_incarnation_owns_its_records_and_legacy_ones_only_if_it_adopted_them() {
        let new = Incarnation::mint();
        let upgraded = Incarnation::mint_adopting_legacy();
        assert_ne!(new.id(), upgraded.id());
        assert!(new.owns(Some(new.id())));
        assert!(!new.owns(Some(upgraded.id())));
        assert!(!new.owns(None), "a new repo took records from before it");
        assert!(!new.owns(Some("")));
        assert!(upgraded.owns(None));
        assert!(upgraded.owns(Some("")));
        assert!(upgraded.owns(Some(upgraded.id())));
        assert!(!upgraded.owns(Some(new.id())));
    }

    #[test]
    fn it_is_read_back_as_written_and_a_damaged_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Incarnation::read(dir.path()).unwrap().is_none());
        for incarnation in [Incarnation::mint(), Incarnation::mint_adopting_legacy()] {
            incarnation.write(dir.path()).unwrap();
            assert_eq!(
                Incarnation::read(dir.path()).unwrap(),
                Some(incarnation.clone())
            );
        }
        std::fs::write(dir.path().join(INCARNATION_FILE), "not an id\n").unwrap();
        assert!(matches!(
            Incarnation::read(dir.path()),
            Err(IncarnationError::Malformed { .. })
        ));
    }
}
