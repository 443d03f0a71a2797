//! The last-commit index a push's first views stop at: each listing's
//! facts, walked again at a branch's new tip only as far as the old tip's
//! (and warmed there after the push). After pushes with a merge whose
//! first parent is the side branch, a rename, a force push and a deleted
//! branch, every entry of every directory, viewed right after the push is
//! acknowledged, names the commit `git log -1 -- path` names.

use std::path::Path;

use crate::browsing::{commit_at, listing_rows, shaped_work, write};
use crate::support::*;

const PAGES: [(&str, &str); 3] = [
    ("/alice/shaped/-/tree/{rev}", ""),
    ("/alice/shaped/-/tree/{rev}/dir", "dir/"),
    ("/alice/shaped/-/tree/{rev}/dir/deep", "dir/deep/"),
];

/// Views every page at `rev` and checks each entry against git's answer
/// at `rev`; the number of entries checked.
fn check_every_entry(server: &TestServer, work: &Path, rev: &str, when: &str) -> usize {
    let mut checked = 0;
    for (page, prefix) in PAGES {
        let page = page.replace("{rev}", rev);
        let got = http(server.addr, &format!("GET {page} HTTP/1.1"), b"");
        assert_eq!(got.status, 200, "{when}: {page}: {}", got.text());
        let rows = listing_rows(&got.text());
        assert!(!rows.is_empty(), "{when}: {page} lists nothing");
        for (name, commit, _) in rows {
            let path = format!("{prefix}{name}");
            let expected = git_ok(work, &["log", "-1", "--format=%H", rev, "--", &path]);
            assert_eq!(
                commit.as_deref(),
                Some(expected.trim()),
                "{when}: {page}: {path}'s last commit is not the one git log names \
                 (the index answered for a commit the entry's history does not go through?)"
            );
            checked += 1;
        }
    }
    checked
}

#[test]
fn first_views_after_pushes_name_what_git_log_names() {
    let dir = tempfile::tempdir().unwrap();
    let (server, work) = shaped_work(dir.path());
    let url = server.url("/alice/shaped.git");
    git_ok(&work, &["push", "-q", &url, "main"]);
    let mut checked = check_every_entry(&server, &work, "main", "the first push");

    // A merge whose first parent is the side (main merged into a topic
    // branch, pushed as main), with a rename and a change in `dir/`.
    git_ok(&work, &["checkout", "-q", "-b", "topic", "main~3"]);
    write(&work, "dir/deep/y.rs", "fn y() {}\n");
    commit_at(&work, 100, "topic: add y.rs");
    git_ok(&work, &["mv", "dir/deep/x.rs", "dir/deep/z.rs"]);
    commit_at(&work, 110, "topic: rename x.rs");
    let date = format!("{} +0000", 1_767_225_600 + 120);
    let merged = git_env(
        &work,
        &[
            "merge",
            "-q",
            "--no-ff",
            "-m",
            "merge main into topic",
            "main",
        ],
        &[("GIT_COMMITTER_DATE", &date), ("GIT_AUTHOR_DATE", &date)],
    );
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    git_ok(&work, &["push", "-q", &url, "topic:main"]);
    git_ok(&work, &["checkout", "-q", "-B", "main", "topic"]);
    checked += check_every_entry(&server, &work, "main", "a merge pushed as main");

    // A branch viewed, then deleted; main goes on.
    git_ok(&work, &["checkout", "-q", "-b", "doomed"]);
    write(&work, "a.txt", "a3 on a doomed branch\n");
    commit_at(&work, 130, "doomed: change a.txt");
    git_ok(&work, &["push", "-q", &url, "doomed"]);
    checked += check_every_entry(&server, &work, "doomed", "a branch before its deletion");
    git_ok(&work, &["push", "-q", &url, ":doomed"]);
    git_ok(&work, &["checkout", "-q", "main"]);
    write(&work, "dir/new.txt", "new\n");
    commit_at(&work, 140, "main: add dir/new.txt");
    git_ok(&work, &["push", "-q", &url, "main"]);
    checked += check_every_entry(&server, &work, "main", "a push after a deleted branch");

    // A force push: main rewritten from an older commit.
    git_ok(&work, &["reset", "-q", "--hard", "main~2"]);
    write(&work, "kept.txt", "rewritten\n");
    commit_at(&work, 150, "rewrite: change kept.txt");
    write(&work, "dir/deep/w.rs", "fn w() {}\n");
    commit_at(&work, 160, "rewrite: add w.rs");
    git_ok(&work, &["push", "-q", "-f", &url, "main"]);
    checked += check_every_entry(&server, &work, "main", "a force push");
    assert!(checked > 30, "only {checked} entries were checked");
    server.stop();
}
