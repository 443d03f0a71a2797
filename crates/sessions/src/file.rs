//! The sessions file: one JSON object a line, appended. A line begins a
//! session (its secret's hash, the user, when it began and was last seen),
//! marks one seen later, or ends one session or every session of a user;
//! other lines mark a token used, or forget a revoked one. Replaying the
//! lines in order gives the live sessions and each token's last use;
//! compaction rewrites the file as one `begin` line per live session and
//! one `token_used` line per token.
//!
//! A power cut can tear the last line (the tail after the last newline is
//! cut off on open) or lose lines not yet synced: `end` lines are synced
//! before the sign-out is answered, so what a lost tail can undo is only a
//! sign-in or a later "seen" (a person signed out, never one signed in).

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::SessionError;

/// One line of the file. Ids are the hex SHA-256 of a session's secret;
/// times are seconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Record {
    Begin {
        id: String,
        user: String,
        began: u64,
        seen: u64,
    },
    Seen {
        id: String,
        at: u64,
    },
    End {
        id: String,
    },
    EndUser {
        user: String,
    },
    /// A token (by its public id) was used at `at`.
    TokenUsed {
        token: String,
        at: u64,
    },
    /// A token was revoked: its mark goes.
    TokenForgotten {
        token: String,
    },
}

/// The file, open for appending, and how many bytes it holds.
pub(crate) struct Appender {
    path: PathBuf,
    file: File,
    pub(crate) bytes: u64,
}

/// Reads every record of `path` (none if it does not exist), cutting a torn
/// last line off the file. A line before the last that does not parse is an
/// error naming it: a lost `end` would bring a session back.
pub(crate) fn replay(path: &Path) -> Result<(Vec<Record>, Appender), SessionError> {
    let io_error = |source| SessionError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(io_error)?;
    let mut records = Vec::new();
    let mut reader = BufReader::new(&mut file);
    let mut line = Vec::new();
    let (mut good, mut number) = (0u64, 0usize);
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io_error)?;
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        number += 1;
        let record = serde_json::from_slice(&line).map_err(|e| SessionError::Corrupt {
            path: path.to_path_buf(),
            line: number,
            reason: e.to_string(),
        })?;
        records.push(record);
        good += n as u64;
    }
    drop(reader);
    let length = file.seek(SeekFrom::End(0)).map_err(io_error)?;
    if length != good {
        tracing::warn!(
            path = %path.display(),
            torn_bytes = length - good,
            "the sessions file ended in a torn line (a write cut short); cut it off"
        );
        file.set_len(good).map_err(io_error)?;
        file.sync_data().map_err(io_error)?;
    }
    let appender = Appender {
        path: path.to_path_buf(),
        file,
        bytes: good,
    };
    Ok((records, appender))
}

impl Appender {
    /// Appends `records` in one write; synced before it returns when `sync`.
    pub(crate) fn append(&mut self, records: &[Record], sync: bool) -> Result<(), SessionError> {
        let mut buf = Vec::new();
        for record in records {
            serde_json::to_writer(&mut buf, record).expect("a record serializes");
            buf.push(b'\n');
        }
        let io_error = |source| SessionError::Io {
            path: self.path.clone(),
            source,
        };
        self.file.write_all(&buf).map_err(io_error)?;
        if sync {
            self.file.sync_data().map_err(io_error)?;
        }
        self.bytes += buf.len() as u64;
        Ok(())
    }

    /// Replaces the file by one holding only `records`, durably (written
    /// beside it, synced, renamed over it, the directory synced), and goes
    /// on appending to the new file.
    pub(crate) fn rewrite(&mut self, records: &[Record]) -> Result<(), SessionError> {
        let io_error = |source| SessionError::Io {
            path: self.path.clone(),
            source,
        };
        let fresh = self.path.with_extension("compacting");
        let created = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&fresh);
        let mut out = io::BufWriter::new(created.map_err(io_error)?);
        let mut bytes = 0u64;
        for record in records {
            let mut line = serde_json::to_vec(record).expect("a record serializes");
            line.push(b'\n');
            out.write_all(&line).map_err(io_error)?;
            bytes += line.len() as u64;
        }
        let file = out.into_inner().map_err(|e| io_error(e.into_error()))?;
        file.sync_all().map_err(io_error)?;
        drop(file);
        std::fs::rename(&fresh, &self.path).map_err(io_error)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io_error)?;
        }
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io_error)?;
        self.bytes = bytes;
        Ok(())
    }
}
