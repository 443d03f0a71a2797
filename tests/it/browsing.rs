//! Browsing a repo as on the forges people know (#20): each tree entry's
//! last commit and size, checked against `git log -1` for every entry of
//! a history with a merge, a rename and a deleted-then-restored file.

use std::path::Path;

use crate::support::*;

/// Commits what is staged in `work`, at `seconds` past 2026-01-01 (author
/// and committer), so history has an order by time as real history does.
pub(crate) fn commit_at(work: &Path, seconds: u64, message: &str) {
    let date = format!("{} +0000", 1_767_225_600 + seconds);
    let out = git_env(
        work,
        &["commit", "-q", "-m", message],
        &[("GIT_COMMITTER_DATE", &date), ("GIT_AUTHOR_DATE", &date)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

pub(crate) fn write(work: &Path, file: &str, content: &str) {
    let path = work.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
    git_ok(work, &["add", "-A"]);
}

/// A history with a side branch merged (`--no-ff`, `-X ours`): the merge
/// keeps the side's side.txt, and main's both.txt though the side changed
/// it later; a rename, a file deleted and restored, a change of mode only,
/// a nested directory.
fn shaped_history(work: &Path) {
    git_ok(work, &["init", "-q", "-b", "main"]);
    write(work, "a.txt", "a1\n");
    write(work, "kept.txt", "never changed\n");
    write(work, "side.txt", "s1\n");
    write(work, "dir/deep/x.rs", "fn x() {}\n");
    write(work, "old-name.txt", "renamed later\n");
    write(work, "gone.txt", "g1\n");
    write(work, "both.txt", "b1\n");
    commit_at(work, 10, "first");
    git_ok(work, &["branch", "side"]);
    write(work, "both.txt", "b2 from main\n");
    commit_at(work, 15, "main: change both.txt");
    git_ok(work, &["checkout", "-q", "side"]);
    write(work, "side.txt", "s2 from the side branch\n");
    write(work, "both.txt", "b3 from the side branch\n");
    commit_at(work, 20, "side: change side.txt and both.txt");
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
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(work.join("kept.txt"), mode).unwrap();
    }
    git_ok(work, &["add", "-A"]);
    commit_at(work, 75, "kept.txt: only its mode");
    let date = format!("{} +0000", 1_767_225_600 + 80);
    let out = git_env(
        work,
        &[
            "merge",
            "-q",
            "--no-ff",
            "-X",
            "ours",
            "-m",
            "merge side",
            "side",
        ],
        &[("GIT_COMMITTER_DATE", &date), ("GIT_AUTHOR_DATE", &date)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// (entry name, commit id linked, size shown) of each listing row.
pub(crate) fn listing_rows(html: &str) -> Vec<(String, Option<String>, String)> {
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

/// A server (anonymous pushes on) with an empty `alice/shaped`, and a
/// work tree beside it holding [`shaped_history`], not pushed yet.
pub(crate) fn shaped_work(dir: &Path) -> (TestServer, std::path::PathBuf) {
    let data = dir.join("data");
    assert!(
        run_vole(&data, &["repo", "create", "alice/shaped"])
            .status
            .success()
    );
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    shaped_history(&work);
    (server, work)
}

#[test]
fn each_entry_shows_the_commit_git_log_names_and_files_their_size() {
    let dir = tempfile::tempdir().unwrap();
    let (server, work) = shaped_work(dir.path());
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
    assert_eq!(side.trim(), "side: change side.txt and both.txt");
    let both = git_ok(&work, &["log", "-1", "--format=%s", "--", "both.txt"]);
    assert_eq!(both.trim(), "main: change both.txt");
    // The page says when, relative, with the absolute time on hover.
    let home = http(server.addr, "GET /alice/shaped HTTP/1.1", b"").text();
    assert!(
        home.contains("<time datetime=\"2026-01-01T00:01:"),
        "{home}"
    );
}

/// A server with the empty repo `alice/r`, and a work tree beside it.
fn forge_with_work() -> (TestServer, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert!(
        run_vole(&data, &["repo", "create", "alice/r"])
            .status
            .success()
    );
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git_ok(&work, &["init", "-q", "-b", "main"]);
    (server, dir, work)
}

/// The part of a commit page about one file.
/// A page with diffs, asked until `done` holds of it (at most 200 times,
/// 25 ms apart: the highlighting may wait for a job slot on a busy
/// machine): a page waits only briefly for its diffs' highlighting,
/// draws plain what is not done, and highlights it on for the next view.
pub(crate) fn highlighted_page(
    addr: std::net::SocketAddr,
    path: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let mut page = String::new();
    for _ in 0..200 {
        let got = http(addr, &format!("GET {path} HTTP/1.1"), b"");
        assert_eq!(got.status, 200, "{path}: {}", got.text());
        page = got.text();
        if done(&page) {
            return page;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let at = page.find("class=\"file-diff\"").unwrap_or(0);
    let shown = page.get(at..(at + 3000).min(page.len())).unwrap_or(&page);
    panic!("{path} was never highlighted: {shown}")
}

fn section<'a>(page: &'a str, path: &str) -> &'a str {
    page.split(&format!("aria-label=\"{path}\">"))
        .nth(1)
        .unwrap_or_else(|| panic!("no section for {path}: {page}"))
        .split("</section>")
        .next()
        .unwrap()
}

#[test]
fn a_commit_shows_each_file_with_its_header_highlighted_and_large_ones_collapsed() {
    let (server, _dir, work) = forge_with_work();
    write(&work, "a.rs", "fn main() {\n    let x = 1;\n}\n");
    write(&work, "run.sh", "echo hi\n");
    write(&work, "old.txt", "one\ntwo\nthree\nfour\n");
    write(&work, "link", "a file, then a link\n");
    write(&work, "zz \"quoted\" é.txt", "zz1\n");
    commit_at(&work, 10, "first");
    // A change of type (git writes it as two parts of the patch) before
    // a file with a name git quotes.
    std::fs::remove_file(work.join("link")).unwrap();
    std::os::unix::fs::symlink("a.rs", work.join("link")).unwrap();
    write(&work, "zz \"quoted\" é.txt", "zz2\n");
    write(
        &work,
        "a.rs",
        "fn main() {\n    let x = 2;\n    println!(\"{x}\");\n}\n",
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(work.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    std::fs::write(work.join("bin.dat"), b"\0\x01binary\0").unwrap();
    git_ok(&work, &["mv", "old.txt", "new.txt"]);
    write(&work, "new.txt", "one\ntwo\nthree\nfour\nfive\n");
    let long: String = (0..500).map(|i| format!("line {i}\n")).collect();
    write(&work, "long.txt", &long);
    let huge: String = (0..4000).map(|i| format!("{i:064}\n")).collect();
    write(&work, "huge.txt", &huge);
    commit_at(&work, 20, "many files");
    git_ok(&work, &["push", "-q", &server.url("/alice/r.git"), "main"]);
    let id = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let page = highlighted_page(server.addr, &format!("/alice/r/-/commit/{id}"), |page| {
        section(page, "a.rs").contains("class=\"hl-")
    });
    let rust = section(&page, "a.rs");
    assert!(
        rust.contains("class=\"hl-"),
        "a.rs is not highlighted: {rust}"
    );
    assert!(rust.contains("<tr class=\"add\">") && rust.contains("<tr class=\"del\">"));
    assert!(
        rust.contains("+2</span> <span class=\"removed\">−1"),
        "{rust}"
    );
    // Line numbers: the removed line was old line 2, the added ones new 2, 3.
    assert!(
        rust.contains("<tr class=\"del\"><td class=\"ln\">2</td><td class=\"ln\"></td>"),
        "{rust}"
    );
    assert!(
        rust.contains("<tr class=\"add\"><td class=\"ln\"></td><td class=\"ln\">3</td>"),
        "{rust}"
    );
    assert!(section(&page, "run.sh").contains("mode 100644 → 100755"));
    assert!(section(&page, "bin.dat").contains("Binary file, not shown"));
    assert!(section(&page, "new.txt").contains("old.txt → new.txt"));
    let long = section(&page, "long.txt");
    assert!(
        long.contains("<details>") && long.contains("collapsed"),
        "{long}"
    );
    assert!(
        long.contains("line 499"),
        "a collapsed file's lines are on the page"
    );
    let huge = section(&page, "huge.txt");
    assert!(
        huge.contains("A large diff") && huge.contains(&format!("/-/commit/{id}.patch")),
        "{huge}"
    );
    assert!(!huge.contains("0000000000000000000000000000000000000000000000000000000000003999"));
    assert!(section(&page, "a.rs").contains("<details open>"));
    let link = section(&page, "link");
    assert!(
        link.contains("deleted, mode 100644; new file, mode 120000"),
        "{link}"
    );
    let quoted = section(&page, "zz &#34;quoted&#34; é.txt");
    assert!(
        quoted.contains("zz2") && quoted.contains("zz1"),
        "another file's diff: {quoted}"
    );
    // The raw patch has everything, as text.
    let raw = http(
        server.addr,
        &format!("GET /alice/r/-/commit/{id}.patch HTTP/1.1"),
        b"",
    );
    assert_eq!(raw.status, 200);
    assert!(
        raw.header("content-type")
            .unwrap()
            .starts_with("text/plain")
    );
    let patch = raw.text();
    assert!(
        patch.starts_with(&format!("From {id}")),
        "{}",
        &patch[..200.min(patch.len())]
    );
    assert!(patch.contains("+0000000000000000000000000000000000000000000000000000000000003999"));
    let bad = http(
        server.addr,
        "GET /alice/r/-/commit/nope.patch HTTP/1.1",
        b"",
    );
    assert_eq!(bad.status, 404);
    // A branch named like a patch is still a commit page.
    git_ok(
        &work,
        &["push", "-q", &server.url("/alice/r.git"), "main:fix.patch"],
    );
    let branch = http(server.addr, "GET /alice/r/-/commit/fix.patch HTTP/1.1", b"");
    assert_eq!(branch.status, 200);
    assert!(
        branch.text().contains("<h2>many files</h2>"),
        "{}",
        branch.text()
    );
}

#[test]
fn a_merge_shows_its_first_parent_diff() {
    let (server, _dir, work) = forge_with_work();
    write(&work, "main.txt", "m1\n");
    write(&work, "side.txt", "s1\n");
    commit_at(&work, 10, "first");
    git_ok(&work, &["checkout", "-q", "-b", "side"]);
    write(&work, "side.txt", "s2\n");
    commit_at(&work, 20, "side");
    git_ok(&work, &["checkout", "-q", "main"]);
    write(&work, "main.txt", "m2\n");
    commit_at(&work, 30, "main");
    let date = format!("{} +0000", 1_767_225_600 + 40);
    let out = git_env(
        &work,
        &["merge", "-q", "--no-ff", "-m", "merge side", "side"],
        &[("GIT_COMMITTER_DATE", &date), ("GIT_AUTHOR_DATE", &date)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    git_ok(&work, &["push", "-q", &server.url("/alice/r.git"), "main"]);
    let id = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let page = http(
        server.addr,
        &format!("GET /alice/r/-/commit/{id} HTTP/1.1"),
        b"",
    )
    .text();
    assert!(
        page.contains("A merge: the changes against its first parent."),
        "{page}"
    );
    assert!(section(&page, "side.txt").contains("s2"));
    assert!(
        !page.contains("aria-label=\"main.txt\""),
        "main.txt did not change against the first parent"
    );
}

#[test]
fn blame_groups_lines_by_the_commit_git_blame_names() {
    let (server, _dir, work) = forge_with_work();
    write(&work, "f.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");
    commit_at(&work, 10, "three functions");
    write(&work, "f.rs", "fn a() {}\nfn b() { 2 }\nfn c() {}\n");
    commit_at(&work, 20, "change b");
    write(
        &work,
        "f.rs",
        "fn a() {}\nfn b() { 2 }\nfn c() {}\nfn d() {}\nfn e() {}\n",
    );
    commit_at(&work, 30, "add d and e");
    std::fs::write(work.join("x.bin"), b"\0\0\0").unwrap();
    git_ok(&work, &["add", "x.bin"]);
    commit_at(&work, 40, "a binary");
    git_ok(&work, &["push", "-q", &server.url("/alice/r.git"), "main"]);
    let got = http(server.addr, "GET /alice/r/-/blame/main/f.rs HTTP/1.1", b"");
    assert_eq!(got.status, 200, "{}", got.text());
    let page = got.text();
    // Each line's commit, as the page groups them: a group's first row
    // names the commit and spans its lines.
    let mut shown: Vec<String> = Vec::new();
    for row in page.split("<tr id=\"L").skip(1) {
        if let Some(rest) = row.split("rowspan=\"").nth(1) {
            let span: usize = rest.split('"').next().unwrap().parse().unwrap();
            let commit = rest.split("/-/commit/").nth(1).unwrap()[..40].to_string();
            shown.extend(std::iter::repeat_n(commit, span));
        }
    }
    let expected: Vec<String> = git_ok(&work, &["blame", "--root", "-l", "-s", "f.rs"])
        .lines()
        .map(|l| l.trim_start_matches('^')[..40].to_string())
        .collect();
    assert_eq!(expected.len(), 5);
    assert_eq!(
        shown, expected,
        "the page's groups are not git blame's lines"
    );
    assert_eq!(
        page.matches("rowspan=").count(),
        4,
        "lines 4 and 5 are one group"
    );
    assert!(
        page.contains("class=\"hl-"),
        "the lines are not highlighted: {page}"
    );
    let binary = http(server.addr, "GET /alice/r/-/blame/main/x.bin HTTP/1.1", b"");
    assert_eq!(binary.status, 200);
    assert!(binary.text().contains("no lines to blame"));
    let missing = http(
        server.addr,
        "GET /alice/r/-/blame/main/nope.rs HTTP/1.1",
        b"",
    );
    assert_eq!(missing.status, 404);
    // The blob page links to its blame.
    let blob = http(server.addr, "GET /alice/r/-/blob/main/f.rs HTTP/1.1", b"").text();
    assert!(
        blob.contains("href=\"/alice/r/-/blame/main/f.rs\""),
        "{blob}"
    );
}

#[test]
fn each_side_of_a_diff_is_highlighted_as_its_own_file() {
    let (server, _dir, work) = forge_with_work();
    // The comment's opening line is replaced by code and its closing line
    // kept: in one text, the added line would be inside the comment.
    write(
        &work,
        "c.rs",
        "pub fn first() -> u32 { 1 }\n/* a comment opened here\n   and closed here */\npub fn last() -> u32 { 9 }\n",
    );
    commit_at(&work, 10, "a comment");
    write(
        &work,
        "c.rs",
        "pub fn first() -> u32 { 1 }\npub fn added() -> u32 { 2 }\n   and closed here */\npub fn last() -> u32 { 9 }\n",
    );
    commit_at(&work, 20, "code instead");
    git_ok(&work, &["push", "-q", &server.url("/alice/r.git"), "main"]);
    let id = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    // Both sides highlighted (each is its own job, done when it is done).
    let page = highlighted_page(server.addr, &format!("/alice/r/-/commit/{id}"), |page| {
        let rows = section(page, "c.rs");
        rows.contains("hl-storage") && rows.contains("hl-comment")
    });
    let rows: Vec<&str> = section(&page, "c.rs")
        .split("<tr class=\"")
        .skip(1)
        .collect();
    let added = rows
        .iter()
        .find(|r| r.starts_with("add") && r.contains("added"))
        .unwrap_or_else(|| panic!("no added row: {page}"));
    assert!(
        added.contains("hl-storage"),
        "the added line is not code: {added}"
    );
    assert!(
        !added.contains("hl-comment"),
        "the added line is coloured as a comment: {added}"
    );
    let removed = rows
        .iter()
        .find(|r| r.starts_with("del") && r.contains("opened here"))
        .unwrap();
    assert!(
        removed.contains("hl-comment"),
        "the removed comment is not one: {removed}"
    );
}

#[test]
fn a_first_view_does_not_wait_for_a_long_diffs_highlighting_and_a_later_one_has_it() {
    let (server, _dir, work) = forge_with_work();
    // 300 lines of Rust, within the bounds of a drawn diff (and sparse
    // enough to stay under the highlighter's output bound): more than a
    // page's short wait highlights.
    let code: String = (0..300)
        .map(|i| format!("// step {i} of the long computation that follows\nlet value_{i} = 1;\n"))
        .collect();
    write(&work, "big.rs", &code);
    commit_at(&work, 10, "much code");
    git_ok(&work, &["push", "-q", &server.url("/alice/r.git"), "main"]);
    let id = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let path = format!("/alice/r/-/commit/{id}");
    let started = std::time::Instant::now();
    let first = http(server.addr, &format!("GET {path} HTTP/1.1"), b"");
    let took = started.elapsed();
    assert_eq!(first.status, 200, "{}", first.text());
    let first = first.text();
    let drawn = section(&first, "big.rs");
    assert!(
        drawn.contains("value_299"),
        "the first view does not draw the diff: {drawn}"
    );
    assert!(
        !drawn.contains("class=\"hl-"),
        "the first view waited for all 300 lines' highlighting ({took:?})"
    );
    let later = highlighted_page(server.addr, &path, |page| {
        section(page, "big.rs").contains("class=\"hl-")
    });
    assert!(section(&later, "big.rs").contains("value_299"));
}
