//! Browsing a repo as on the forges people know (#20): each tree entry's
//! last commit and size, checked against `git log -1` for every entry of
//! a history with a merge, a rename and a deleted-then-restored file.

use std::path::Path;

use crate::support::*;

/// Commits what is staged in `work`, at `seconds` past 2026-01-01 (author
/// and committer), so history has an order by time as real history does.
fn commit_at(work: &Path, seconds: u64, message: &str) {
    let date = format!("{} +0000", 1_767_225_600 + seconds);
    let out = git_env(
        work,
        &["commit", "-q", "-m", message],
        &[("GIT_COMMITTER_DATE", &date), ("GIT_AUTHOR_DATE", &date)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn write(work: &Path, file: &str, content: &str) {
    let path = work.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
    git_ok(work, &["add", "-A"]);
}

/// A history with a side branch merged (`--no-ff`) whose change the merge
/// keeps, a rename, a file deleted and restored, and a nested directory.
fn shaped_history(work: &Path) {
    git_ok(work, &["init", "-q", "-b", "main"]);
    write(work, "a.txt", "a1\n");
    write(work, "kept.txt", "never changed\n");
    write(work, "side.txt", "s1\n");
    write(work, "dir/deep/x.rs", "fn x() {}\n");
    write(work, "old-name.txt", "renamed later\n");
    write(work, "gone.txt", "g1\n");
    commit_at(work, 10, "first");
    git_ok(work, &["checkout", "-q", "-b", "side"]);
    write(work, "side.txt", "s2 from the side branch\n");
    commit_at(work, 20, "side: change side.txt");
    git_ok(work, &["checkout", "-q", "main"]);
    write(work, "a.txt", "a2\n");
    commit_at(work, 30, "main: change a.txt");
    write(work, "dir/deep/x.rs", "fn x() { 1 }\n");
    commit_at(work, 40, "main: change dir/deep/x.rs");
    git_ok(work, &["mv", "old-name.txt", "new-name.txt"]);
    commit_at(work, 50, "rename old-name.txt");
    git_ok(work, &["rm", "-q", "gone.txt"]);
    commit_at(work, 60, "delete gone.txt");
    write(work, "gone.txt", "g1\n");
    commit_at(work, 70, "restore gone.txt");
    let date = format!("{} +0000", 1_767_225_600 + 80);
    let out = git_env(
        work,
        &["merge", "-q", "--no-ff", "-m", "merge side", "side"],
        &[("GIT_COMMITTER_DATE", &date), ("GIT_AUTHOR_DATE", &date)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// (entry name, commit id linked, size shown) of each listing row.
fn listing_rows(html: &str) -> Vec<(String, Option<String>, String)> {
    let table = html
        .split("<table class=\"listing\">")
        .nth(1)
        .expect("the page has a listing")
        .split("</table>")
        .next()
        .unwrap();
    table
        .split("<tr>")
        .skip(1)
        .map(|row| {
            let name = row
                .split("\">")
                .nth(2)
                .and_then(|rest| rest.split("</a>").next())
                .unwrap()
                .trim_end_matches('/')
                .to_string();
            let commit = row
                .split("/-/commit/")
                .nth(1)
                .map(|rest| rest[..40].to_string());
            let size = row
                .split("<td class=\"size\">")
                .nth(1)
                .and_then(|rest| rest.split("</td>").next())
                .unwrap_or_default()
                .to_string();
            (name, commit, size)
        })
        .collect()
}

#[test]
fn each_entry_shows_the_commit_git_log_names_and_files_their_size() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert!(
        run_vole(&data, &["repo", "create", "alice/shaped"])
            .status
            .success()
    );
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    shaped_history(&work);
    git_ok(
        &work,
        &["push", "-q", &server.url("/alice/shaped.git"), "main"],
    );
    for (page, prefix) in [
        ("/alice/shaped", ""),
        ("/alice/shaped/-/tree/main", ""),
        ("/alice/shaped/-/tree/main/dir", "dir/"),
        ("/alice/shaped/-/tree/main/dir/deep", "dir/deep/"),
    ] {
        let got = http(server.addr, &format!("GET {page} HTTP/1.1"), b"");
        assert_eq!(got.status, 200, "{page}: {}", got.text());
        let rows = listing_rows(&got.text());
        assert!(!rows.is_empty(), "{page}: no rows in {}", got.text());
        for (name, commit, size) in rows {
            let path = format!("{prefix}{name}");
            let expected = git_ok(&work, &["log", "-1", "--format=%H", "--", &path]);
            assert_eq!(
                commit.as_deref(),
                Some(expected.trim()),
                "{page}: {path}'s last commit is not the one git log names"
            );
            if std::fs::metadata(work.join(&path)).unwrap().is_file() {
                let bytes = std::fs::metadata(work.join(&path)).unwrap().len();
                assert_eq!(size, format!("{bytes} B"), "{page}: {path}'s size");
            } else {
                assert!(size.is_empty(), "{page}: directory {path} has a size");
            }
        }
    }
    // The merge kept the side branch's side.txt: git names the side's
    // commit, not the merge (the test's point is that vole agrees).
    let side = git_ok(&work, &["log", "-1", "--format=%s", "--", "side.txt"]);
    assert_eq!(side.trim(), "side: change side.txt");
    // The page says when, relative, with the absolute time on hover.
    let home = http(server.addr, "GET /alice/shaped HTTP/1.1", b"").text();
    assert!(
        home.contains("<time datetime=\"2026-01-01T00:01:"),
        "{home}"
    );
}
