//! The key of a pack request: which of pack-objects' arguments and
//! git's options change the pack (keyed), which only change what it says
//! (dropped), and which make the request bypass the cache.

use sha2::{Digest, Sha256};

use crate::{PackCache, PackRequest};

/// Arguments of `git pack-objects` that are keyed (each changes the
/// pack), besides `--filter=<spec>`. Any argument not here nor in
/// [`UNKEYED`] (`--uri-protocol`, `--all`, ...), and any git option but
/// `--shallow-file`, makes the request bypass the cache.
pub const KEYED: &[&str] = &[
    "--revs",
    "--thin",
    "--stdout",
    "--delta-base-offset",
    "--include-tag",
    // The shallow commits come on stdin (keyed with it).
    "--shallow",
];

/// Arguments that change only what pack-objects says on stderr: not
/// keyed, not passed to the producer.
pub const UNKEYED: &[&str] = &["--progress", "-q"];

/// Largest stdin (wants and haves) a cached request may have; a larger
/// one (an incremental fetch with a very long history of haves) bypasses.
pub const MAX_STDIN: usize = 512 * 1024;

impl PackCache {
    /// The key of a request, or why it bypasses the cache; with the
    /// arguments the producer runs git with (`git ARGS`).
    ///
    /// `request.args` is the command git would have run, after `git`:
    /// git's own options (only `--shallow-file FILE`, the file's content
    /// keyed), then `pack-objects` and its arguments ([`KEYED`] keyed and
    /// passed on, [`UNKEYED`] dropped, anything else a bypass).
    pub fn key(
        request: &PackRequest,
        generation: u64,
    ) -> Result<(String, Vec<String>), &'static str> {
        if request.stdin.len() > MAX_STDIN {
            return Err("the request's wants and haves are too long to key");
        }
        let mut hash = Sha256::new();
        hash.update(request.repo.as_bytes());
        hash.update([0]);
        hash.update(generation.to_le_bytes());
        let mut producer_args = Vec::new();
        let mut args = request.args.iter();
        // git's own options, up to the subcommand.
        loop {
            match args.next().map(String::as_str) {
                Some("pack-objects") => break,
                Some("--shallow-file") => {
                    let Some(path) = args.next() else {
                        return Err("--shallow-file without a value");
                    };
                    hash.update(b"--shallow-file\0");
                    if !path.is_empty() {
                        // The file is the request's (deleted when its
                        // upload-pack ends): its content is keyed, and the
                        // producer gets a copy (see `produce`).
                        let content =
                            std::fs::read(path).map_err(|_| "the --shallow-file cannot be read")?;
                        hash.update(&content);
                    }
                    hash.update([0]);
                    producer_args.push("--shallow-file".to_string());
                    producer_args.push(path.clone());
                }
                Some(_) => return Err("git was given an option the cache does not key"),
                None => return Err("the command is not git pack-objects"),
            }
        }
        producer_args.push("pack-objects".to_string());
        for arg in args {
            if UNKEYED.contains(&arg.as_str()) {
                continue;
            }
            if arg.starts_with("--filter=") || KEYED.contains(&arg.as_str()) {
                hash.update(arg.as_bytes());
                hash.update([0]);
                producer_args.push(arg.clone());
                continue;
            }
            return Err("pack-objects was asked for something the cache does not key");
        }
        hash.update([1]);
        hash.update(&request.stdin);
        Ok((hex::encode(hash.finalize()), producer_args))
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    /// A request as git makes it: `pack-objects ARGS` (after `git`).
    fn request(args: &[&str], stdin: &[u8]) -> PackRequest {
        PackRequest {
            repo_dir: PathBuf::from("/nonexistent"),
            repo: "ann/demo".into(),
            args: std::iter::once("pack-objects")
                .chain(args.iter().copied())
                .map(str::to_string)
                .collect(),
            stdin: stdin.to_vec(),
        }
    }

    #[test]
    fn the_key_follows_what_changes_the_pack_and_nothing_else() {
        let base = [
            "--revs",
            "--thin",
            "--stdout",
            "--delta-base-offset",
            "--include-tag",
        ];
        let key = |args: &[&str], stdin: &[u8], generation| {
            PackCache::key(&request(args, stdin), generation).unwrap().0
        };
        let k = key(&base, b"abc\n--not\n\n", 1);
        let mut with_progress = base.to_vec();
        with_progress.push("--progress");
        assert_eq!(
            k,
            key(&with_progress, b"abc\n--not\n\n", 1),
            "progress is not keyed"
        );
        assert_ne!(k, key(&base, b"abd\n--not\n\n", 1), "wants are keyed");
        assert_ne!(
            k,
            key(&base, b"abc\n--not\n\n", 2),
            "the ref state is keyed"
        );
        assert_ne!(
            k,
            key(&base[..4], b"abc\n--not\n\n", 1),
            "--include-tag is keyed"
        );
        let mut filtered = base.to_vec();
        filtered.push("--filter=blob:none");
        assert_ne!(k, key(&filtered, b"abc\n--not\n\n", 1), "filters are keyed");
        let (_, producer) = PackCache::key(&request(&with_progress, b""), 1).unwrap();
        assert!(
            !producer.contains(&"--progress".to_string()),
            "{producer:?}"
        );
        // Unknown arguments and huge stdin bypass.
        assert!(PackCache::key(&request(&["--all"], b""), 1).is_err());
        assert!(PackCache::key(&request(&["--uri-protocol=https"], b""), 1).is_err());
        assert!(PackCache::key(&request(&base, &vec![b'a'; MAX_STDIN + 1]), 1).is_err());
    }

    #[test]
    fn a_shallow_file_is_keyed_by_content_not_path() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        std::fs::write(&a, b"1111\n").unwrap();
        std::fs::write(&b, b"1111\n").unwrap();
        std::fs::write(&c, b"2222\n").unwrap();
        // As git runs it: `git --shallow-file FILE pack-objects ...`.
        let shallow = |path: &str| {
            let mut request = request(&["--revs", "--stdout"], b"x\n");
            request
                .args
                .splice(0..0, ["--shallow-file".to_string(), path.to_string()]);
            request
        };
        let key = |path: &Path| {
            PackCache::key(&shallow(path.to_str().unwrap()), 1)
                .unwrap()
                .0
        };
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&c));
        let (empty, producer) = PackCache::key(&shallow(""), 1).unwrap();
        assert_ne!(empty, key(&a));
        assert_eq!(&producer[..3], ["--shallow-file", "", "pack-objects"]);
        // Any other git option bypasses.
        let mut other = request(&["--revs"], b"");
        other.args.insert(0, "--git-dir=/elsewhere".into());
        assert!(PackCache::key(&other, 1).is_err());
    }
}
