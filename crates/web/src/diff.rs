//! A commit's unified diff split per file: each file's header (modes,
//! binary, renames) and its lines with their old and new line numbers, as
//! the commit page shows them. Parsing only; what git is asked for and how
//! much of it is read are `read::commit_detail`'s, how a file is drawn
//! (highlighted, collapsed or not shown) is `commit_files.rs`'s.

use crate::caches::Weigh;

/// What a line of a hunk is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// `@@ -a,b +c,d @@`: where the hunk starts.
    Hunk,
    Context,
    Added,
    Removed,
    /// `\ No newline at end of file`.
    Note,
}

#[derive(Clone, Debug)]
pub struct Line {
    pub kind: Kind,
    /// Line numbers in the old and new file (0 where the line is not in
    /// that side, or for a hunk header).
    pub old: u32,
    pub new: u32,
    /// The line without its `+`, `-` or ` ` (a hunk header whole).
    pub text: String,
}

/// One file's part of the diff.
#[derive(Clone, Debug, Default)]
pub struct FileDiff {
    /// The file's path after the change (its new name for a rename; the
    /// old one for a deletion), unquoted: what `--name-status -z` says.
    pub path: String,
    /// `old mode 100644` / `new mode 100755`, or `new file mode`, `deleted
    /// file mode`: the mode change, in git's words ("mode 100644 → 100755").
    pub mode_change: Option<String>,
    /// git says only "Binary files differ".
    pub binary: bool,
    pub lines: Vec<Line>,
    /// Bytes of text its lines hold.
    pub bytes: usize,
    /// The patch was cut inside this file: its lines end early.
    pub cut: bool,
}

impl Weigh for Line {
    fn weight(&self) -> usize {
        self.text.weight() + std::mem::size_of::<Line>() - std::mem::size_of::<String>()
    }
}

impl Weigh for FileDiff {
    fn weight(&self) -> usize {
        self.lines.weight()
            + self.mode_change.as_ref().map_or(0, Weigh::weight)
            + std::mem::size_of::<FileDiff>()
    }
}

/// Splits `patch` (`git show -p` output, perhaps cut at a byte bound:
/// `cut`) into its files, in the order git wrote them (the order of
/// `--name-status` for the same diff).
pub fn split(patch: &str, cut: bool) -> Vec<FileDiff> {
    let mut files: Vec<FileDiff> = Vec::new();
    // Inside a hunk: the next old and new line numbers.
    let mut at: Option<(u32, u32)> = None;
    let mut old_mode: Option<String> = None;
    for raw in patch.lines() {
        if let Some(names) = raw.strip_prefix("diff --git ") {
            files.push(FileDiff {
                path: header_path(names).unwrap_or_default(),
                ..FileDiff::default()
            });
            at = None;
            old_mode = None;
            continue;
        }
        let Some(file) = files.last_mut() else {
            continue;
        };
        match at {
            None => header_line(file, raw, &mut old_mode, &mut at),
            Some((old, new)) => {
                let (kind, text, next) = if let Some(text) = raw.strip_prefix('+') {
                    (Kind::Added, text, (old, new + 1))
                } else if let Some(text) = raw.strip_prefix('-') {
                    (Kind::Removed, text, (old + 1, new))
                } else if let Some(text) = raw.strip_prefix(' ') {
                    (Kind::Context, text, (old + 1, new + 1))
                } else if raw.starts_with('\\') {
                    (Kind::Note, raw, (old, new))
                } else if raw.starts_with("@@") {
                    at = hunk(file, raw);
                    continue;
                } else if raw.is_empty() {
                    // A context line whose space an editor ate.
                    (Kind::Context, "", (old + 1, new + 1))
                } else {
                    continue;
                };
                let (old_no, new_no) = match kind {
                    Kind::Added => (0, new),
                    Kind::Removed => (old, 0),
                    Kind::Context => (old, new),
                    _ => (0, 0),
                };
                file.bytes += text.len();
                file.lines.push(Line {
                    kind,
                    old: old_no,
                    new: new_no,
                    text: text.to_string(),
                });
                at = Some(next);
            }
        }
    }
    if cut && let Some(last) = files.last_mut() {
        last.cut = true;
    }
    files
}

/// A line between `diff --git` and the first hunk.
fn header_line(
    file: &mut FileDiff,
    raw: &str,
    old_mode: &mut Option<String>,
    at: &mut Option<(u32, u32)>,
) {
    if let Some(mode) = raw.strip_prefix("old mode ") {
        *old_mode = Some(mode.to_string());
    } else if let Some(mode) = raw.strip_prefix("new mode ") {
        file.mode_change = Some(format!(
            "mode {} → {mode}",
            old_mode.as_deref().unwrap_or("?")
        ));
    } else if let Some(mode) = raw.strip_prefix("new file mode ") {
        file.mode_change = Some(format!("new file, mode {mode}"));
    } else if let Some(mode) = raw.strip_prefix("deleted file mode ") {
        file.mode_change = Some(format!("deleted, mode {mode}"));
    } else if let Some(path) = raw
        .strip_prefix("rename to ")
        .or_else(|| raw.strip_prefix("copy to "))
    {
        file.path = unquote(path);
    } else if let Some(path) = raw.strip_prefix("+++ ") {
        // git ends the line with a tab when the name holds a space.
        let path = path.strip_suffix('\t').unwrap_or(path);
        if path != "/dev/null" {
            file.path = unquote(path)
                .strip_prefix("b/")
                .unwrap_or_default()
                .to_string();
        }
    } else if raw.starts_with("Binary files ") || raw == "GIT binary patch" {
        file.binary = true;
    } else if raw.starts_with("@@") {
        *at = hunk(file, raw);
    }
}

/// The path of `diff --git a/P b/P` (a file not renamed: the two halves
/// are the same, so a name holding " b/" splits right too); a rename's
/// names come from its `rename to` line instead.
fn header_path(names: &str) -> Option<String> {
    if names.starts_with('"') {
        // Both quoted: `"a/P" "b/P"`, the same length each.
        let half = names.len().checked_sub(1)? / 2;
        let second = names.get(half + 1..)?;
        return unquote(second).strip_prefix("b/").map(str::to_string);
    }
    let len = names.len().checked_sub(5)?;
    if len % 2 != 0 {
        return None;
    }
    let path = names.get(2..2 + len / 2)?;
    (names.get(2 + len / 2..)? == format!(" b/{path}")).then(|| path.to_string())
}

/// A path as git writes it in a patch: as it is, or in double quotes with
/// C escapes (`\"`, `\\`, `\t`, `\n`, octal bytes) when it holds a
/// quote, a backslash, a control character or (with `core.quotePath`)
/// bytes above 0x7f.
fn unquote(text: &str) -> String {
    let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return text.to_string();
    };
    let mut bytes = Vec::with_capacity(inner.len());
    let mut chars = inner.bytes().peekable();
    while let Some(b) = chars.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        match chars.next() {
            Some(b'n') => bytes.push(b'\n'),
            Some(b't') => bytes.push(b'\t'),
            Some(b'a') => bytes.push(7),
            Some(b'b') => bytes.push(8),
            Some(b'f') => bytes.push(12),
            Some(b'r') => bytes.push(b'\r'),
            Some(b'v') => bytes.push(11),
            Some(d @ b'0'..=b'7') => {
                let mut value = u32::from(d - b'0');
                for _ in 0..2 {
                    match chars.peek() {
                        Some(&o @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(o - b'0');
                            chars.next();
                        }
                        _ => break,
                    }
                }
                bytes.push(value as u8);
            }
            Some(other) => bytes.push(other),
            None => {}
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A hunk header line: kept as a line of `file`, and where the hunk
/// starts.
fn hunk(file: &mut FileDiff, raw: &str) -> Option<(u32, u32)> {
    file.bytes += raw.len();
    file.lines.push(Line {
        kind: Kind::Hunk,
        old: 0,
        new: 0,
        text: raw.to_string(),
    });
    hunk_start(raw)
}

/// `@@ -a[,b] +c[,d] @@...`: the first old and new line numbers.
fn hunk_start(raw: &str) -> Option<(u32, u32)> {
    let mut parts = raw.split(' ');
    parts.next()?;
    let old = parts.next()?.strip_prefix('-')?;
    let new = parts.next()?.strip_prefix('+')?;
    let first = |range: &str| range.split(',').next()?.parse::<u32>().ok();
    Some((first(old)?, first(new)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_splits_per_file_with_line_numbers_modes_and_binaries() {
        let patch = "diff --git a/a.rs b/a.rs\nindex 1..2 100644\n--- a/a.rs\n+++ b/a.rs\n\
            @@ -1,3 +1,3 @@ fn f\n keep\n--- not a header\n+++ not one either\n keep\n\
            diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n\
            diff --git a/x.bin b/x.bin\nnew file mode 100644\nindex 0..3\nBinary files /dev/null and b/x.bin differ\n\
            diff --git a/b.txt b/b.txt\n--- a/b.txt\n+++ b/b.txt\n@@ -10 +10,2 @@\n-old\n+new\n+more\n\\ No newline at end of file\n";
        let files = split(patch, true);
        assert_eq!(files.len(), 4);
        let a = &files[0];
        assert_eq!(
            a.lines.iter().map(|l| l.kind).collect::<Vec<_>>(),
            [
                Kind::Hunk,
                Kind::Context,
                Kind::Removed,
                Kind::Added,
                Kind::Context
            ]
        );
        // A removed line reading "-- not a header" is not a file header.
        assert_eq!(a.lines[2].text, "-- not a header");
        assert_eq!((a.lines[2].old, a.lines[2].new), (2, 0));
        assert_eq!((a.lines[3].old, a.lines[3].new), (0, 2));
        assert_eq!((a.lines[4].old, a.lines[4].new), (3, 3));
        assert_eq!(
            files[1].mode_change.as_deref(),
            Some("mode 100644 → 100755")
        );
        assert!(files[1].lines.is_empty());
        assert!(files[2].binary);
        assert_eq!(
            files[2].mode_change.as_deref(),
            Some("new file, mode 100644")
        );
        let b = &files[3];
        assert_eq!(
            (b.lines[1].old, b.lines[2].new, b.lines[3].new),
            (10, 10, 11)
        );
        assert_eq!(b.lines[4].kind, Kind::Note);
        assert!(b.cut && !a.cut, "only the last file is marked cut");
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["a.rs", "run.sh", "x.bin", "b.txt"]);
    }

    #[test]
    fn paths_come_from_the_headers_quoted_renamed_or_with_spaces() {
        let patch = "diff --git a/x b/y b/x b/y\n\
            diff --git \"a/caf\\303\\251 \\\"q\\\".txt\" \"b/caf\\303\\251 \\\"q\\\".txt\"\n\
            diff --git a/old name b/new name\nsimilarity index 90%\nrename from old name\nrename to new name\n\
            diff --git a/gone b/gone\ndeleted file mode 100644\n--- a/gone\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n\
            diff --git \"a/s p\" \"b/s p\"\n--- \"a/s p\"\t\n+++ \"b/s p\"\t\n@@ -1 +1 @@\n-a\n+b\n";
        let paths: Vec<String> = split(patch, false).into_iter().map(|f| f.path).collect();
        assert_eq!(
            paths,
            ["x b/y", "café \"q\".txt", "new name", "gone", "s p"]
        );
    }
}
