//! The unit tests' git: commands run in a work tree with a fixed identity
//! and commit date, their failures shown. Test code only.

use std::path::Path;
use std::process::Command;

/// Runs `git args` in `dir`, committing as of `seconds` after 2026-01-01;
/// its standard output.
pub(crate) fn git(dir: &Path, args: &[&str], seconds: u64) -> String {
    let date = format!("{} +0000", 1_767_225_600 + seconds);
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_COMMITTER_DATE", &date)
        .env("GIT_AUTHOR_DATE", &date)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
