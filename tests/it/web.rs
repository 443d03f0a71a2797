//! The web UI's pages against a real server and a real pushed repo,
//! asserted on their HTML: navigation, line anchors, raw downloads, and
//! hostile names and READMEs rendered inert; and a person's journey
//! through the pages in headless Chromium (`tests/clients/browse.mjs`).

use std::path::PathBuf;

use crate::support::*;

fn forge() -> (Forge, PathBuf) {
    let mut forge = Forge::new(&[]);
    for (name, description) in [("alice/demo", "a <b>demo</b>"), ("bob/empty", "")] {
        forge.create_repo(&[name, "--description", description]);
    }
    forge.serve(&["--anonymous-push"]);
    let work = forge.dir.join("work");
    std::fs::create_dir_all(work.join("docs")).unwrap();
    std::fs::create_dir_all(work.join("img")).unwrap();
    std::fs::create_dir_all(work.join("<script>alert(1)<")).unwrap();
    let files: &[(&str, &[u8])] = &[
        (
            "README.md",
            b"# Demo\n\nSee [the guide](docs/guide.md) and ![logo](img/logo.png).\n\n\
              <script>alert('readme')</script>\n\n[bad](javascript:alert(1))\n\n\
              <img src=\"x\" onerror=\"alert(1)\">\n\n<a href=\"#top\" onclick=\"alert(1)\">top</a>\n",
        ),
        ("docs/guide.md", b"line one\nline <two>\nline three\n"),
        ("img/logo.png", b"\x89PNG\r\n\x1a\n\0\0not really"),
        ("page.html", b"<script>alert('raw')</script>\n"),
        ("data.bin", b"\0\x01\x02binary"),
        ("<script>alert(1)</script>.md", b"hostile name\n"),
    ];
    for (name, content) in files {
        std::fs::write(work.join(name), content).unwrap();
    }
    git_ok(&work, &["init", "-q", "-b", "main"]);
    git_ok(&work, &["add", "-A"]);
    git_ok(&work, &["commit", "-q", "-m", "first <commit>"]);
    git_ok(
        &work,
        &["push", "-q", &forge.url("/alice/demo.git"), "main"],
    );
    (forge, work)
}

/// A second commit on main (a rename and an edit), a tag `v1.0`, and a
/// branch `topic` one commit ahead; returns main's commit id.
fn add_history(forge: &Forge, work: &std::path::Path) -> String {
    git_ok(work, &["mv", "docs/guide.md", "docs/manual.md"]);
    std::fs::write(work.join("page.html"), b"<p>changed</p>\n").unwrap();
    git_ok(work, &["commit", "-qam", "rename the guide"]);
    git_ok(work, &["tag", "v1.0"]);
    git_ok(work, &["checkout", "-q", "-b", "topic"]);
    git_ok(work, &["commit", "-q", "--allow-empty", "-m", "on topic"]);
    let url = forge.server().url("/alice/demo.git");
    git_ok(work, &["push", "-q", &url, "main", "topic", "v1.0"]);
    git_ok(work, &["rev-parse", "main"]).trim().to_string()
}

fn page(forge: &Forge, path: &str) -> (u16, String) {
    let response = http_get(forge.server().addr, path);
    (response.status, response.text())
}

#[test]
fn browsing_a_repo_from_the_home_page_to_a_line_anchor() {
    let (forge, _work) = forge();
    let (status, home) = page(&forge, "/");
    assert_eq!(status, 200);
    assert!(
        home.contains(r#"<a href="/alice/demo">alice/demo</a>"#),
        "{home}"
    );
    assert!(
        home.contains("a &#60;b&#62;demo&#60;/b&#62;"),
        "description not escaped: {home}"
    );
    let (_, filtered) = page(&forge, "/?q=emp");
    assert!(
        filtered.contains("bob/empty") && !filtered.contains("alice/demo"),
        "{filtered}"
    );

    let (status, repo) = page(&forge, "/alice/demo");
    assert_eq!(status, 200);
    assert_eq!(repo.matches("<h1").count(), 1, "one h1 per page: {repo}");
    assert!(repo.contains("/alice/demo.git"), "no clone URL: {repo}");
    assert!(
        repo.contains("first &#60;commit&#62;"),
        "commit summary not escaped"
    );
    // Its date says how long ago, the absolute time on hover.
    let date = repo
        .split("<time datetime=\"")
        .nth(1)
        .and_then(|rest| rest.split("</time>").next())
        .unwrap_or_else(|| panic!("the latest commit has no <time>: {repo}"));
    assert!(
        date.contains(" UTC\">") && (date.ends_with(" ago") || date.ends_with("just now")),
        "the latest commit's date: {date}"
    );
    // The latest commit links to the commit, not to the tree at it.
    let latest = repo
        .split(r#"<p class="commit">Latest commit <a href=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no latest-commit link: {repo}"));
    assert!(
        latest.starts_with("/alice/demo/-/commit/"),
        "the latest commit links to {latest}"
    );
    let (status, commit) = page(&forge, latest);
    assert_eq!(status, 200, "{commit}");
    assert!(commit.contains("first &#60;commit&#62;"), "{commit}");
    assert!(
        repo.contains(r#"href="/alice/demo/-/tree/main/docs""#),
        "{repo}"
    );
    // The README, rendered, with its links resolved inside the repo.
    assert!(repo.contains("<h2>Demo</h2>"), "{repo}");
    assert!(
        repo.contains(r#"href="/alice/demo/-/blob/main/docs/guide.md""#),
        "relative link not resolved: {repo}"
    );
    assert!(
        repo.contains(r#"src="/alice/demo/-/raw/main/img/logo.png""#),
        "relative image not resolved: {repo}"
    );

    let (status, tree) = page(&forge, "/alice/demo/-/tree/main/docs");
    assert_eq!(status, 200);
    assert!(
        tree.contains(r#"href="/alice/demo/-/blob/main/docs/guide.md""#),
        "{tree}"
    );
    assert!(
        tree.contains(r#"<a href="/alice/demo/-/tree/main">demo</a>"#),
        "no breadcrumb: {tree}"
    );

    let (status, blob) = page(&forge, "/alice/demo/-/blob/main/docs/guide.md");
    assert_eq!(status, 200);
    assert!(
        blob.contains(r##"<tr id="L2"><td class="ln"><a href="#L2">2</a>"##),
        "{blob}"
    );
    assert!(!blob.contains("<two>"), "source not escaped: {blob}");
    assert!(blob.contains("&lt;</span>"), "source not escaped: {blob}");
    assert!(
        blob.contains("hl-markdown"),
        "markdown not highlighted: {blob}"
    );
    assert!(blob.contains(r#"href="/alice/demo/-/raw/main/docs/guide.md""#));

    let (_, image) = page(&forge, "/alice/demo/-/blob/main/img/logo.png");
    assert!(
        image.contains(
            r#"<img class="preview" src="/alice/demo/-/raw/main/img/logo.png" alt="logo.png">"#
        ),
        "{image}"
    );
    let (_, binary) = page(&forge, "/alice/demo/-/blob/main/data.bin");
    assert!(binary.contains("Binary file, not shown"), "{binary}");

    let (status, empty) = page(&forge, "/bob/empty");
    assert_eq!(status, 200);
    assert!(empty.contains("git push -u origin main"), "{empty}");
}

#[test]
fn hostile_names_readmes_and_raw_files_stay_inert() {
    let (forge, _work) = forge();
    let (_, repo) = page(&forge, "/alice/demo");
    let readme = repo
        .split(r#"<section class="readme""#)
        .nth(1)
        .and_then(|rest| rest.split("</section>").next())
        .expect("a README section");
    for bad in ["<script", "javascript:", "onerror", "onclick"] {
        assert!(!readme.contains(bad), "README kept {bad:?}: {readme}");
    }
    // A directory named `<script>alert(1)<` holding `script>.md`: the path
    // `<script>alert(1)</script>.md`, escaped wherever it is shown.
    assert!(!repo.contains("<script>alert(1)"), "{repo}");
    assert!(repo.contains("&#60;script&#62;alert(1)&#60;"), "{repo}");
    let (status, nested) = page(&forge, "/alice/demo/-/tree/main/%3Cscript%3Ealert(1)%3C");
    assert_eq!(status, 200, "{nested}");
    assert!(!nested.contains("<script>alert"), "{nested}");

    let (_, shown) = page(&forge, "/alice/demo/-/blob/main/page.html");
    assert!(
        shown.contains("hl-html"),
        "HTML source not highlighted: {shown}"
    );
    assert!(
        !shown.contains("<script>alert('raw')"),
        "highlighted source ran as markup: {shown}"
    );

    let raw = http_get(forge.server().addr, "/alice/demo/-/raw/main/page.html");
    assert_eq!(raw.status, 200);
    assert_eq!(
        raw.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(raw.header("x-content-type-options"), Some("nosniff"));
    assert!(
        raw.header("content-security-policy")
            .is_some_and(|c| c.starts_with("sandbox")),
        "raw files must be sandboxed"
    );
    assert_eq!(raw.text(), "<script>alert('raw')</script>\n");
}

#[test]
fn missing_things_get_a_friendly_page_without_internals() {
    let (forge, _work) = forge();
    for path in [
        "/nobody/nothing",
        "/alice/demo/-/tree/no-such-branch",
        "/alice/demo/-/blob/main/no/such/file",
        "/alice/demo/-/tree/main/..%2F..%2Fetc",
        "/static/nope.css",
    ] {
        let (status, body) = page(&forge, path);
        assert_eq!(status, 404, "{path}: {body}");
        assert!(body.contains("<h1>Not found</h1>"), "{path}: {body}");
        assert!(body.contains(r#"href="/""#), "{path}: no way back: {body}");
        for internal in ["/tmp", "data/repos", "panicked", "Error {"] {
            assert!(
                !body.contains(internal),
                "{path} leaked {internal:?}: {body}"
            );
        }
    }
}

#[test]
fn log_commit_diff_refs_activity_and_archives() {
    let (forge, work) = forge();
    let head = add_history(&forge, &work);

    let (status, log) = page(&forge, "/alice/demo/-/commits/main");
    assert_eq!(status, 200, "{log}");
    let rename_at = log.find("rename the guide").expect("newest commit listed");
    let first_at = log
        .find("first &#60;commit&#62;")
        .expect("first commit listed");
    assert!(rename_at < first_at, "newest first: {log}");
    let (_, path_log) = page(&forge, "/alice/demo/-/commits/main/img");
    assert!(
        path_log.contains("first &#60;commit&#62;") && !path_log.contains("rename the guide"),
        "a path's log lists only commits touching it: {path_log}"
    );

    let (status, commit) = page(&forge, &format!("/alice/demo/-/commit/{head}"));
    assert_eq!(status, 200, "{commit}");
    assert!(commit.contains("<h2>rename the guide</h2>"), "{commit}");
    assert!(
        commit.contains("docs/guide.md → docs/manual.md"),
        "rename not shown: {commit}"
    );
    assert!(
        commit.contains("<td class=\"added\">+1</td><td class=\"removed\">−1</td>"),
        "{commit}"
    );
    // page.html's diff: its own section, a removed and an added line,
    // the file's text inert (highlighted as HTML, or escaped).
    let section = commit
        .split(r#"aria-label="page.html""#)
        .nth(1)
        .unwrap_or_else(|| panic!("no section for page.html: {commit}"));
    assert!(
        section.contains(r#"<tr class="add">"#) && section.contains(r#"<tr class="del">"#),
        "{section}"
    );
    assert!(
        !commit.contains("<script>alert") && !commit.contains("<p>changed"),
        "diff not escaped: {commit}"
    );

    let (_, branches) = page(&forge, "/alice/demo/-/branches");
    assert!(
        branches.contains(r#"href="/alice/demo/-/tree/topic">topic</a>"#),
        "{branches}"
    );
    assert!(branches.contains("on topic"), "{branches}");
    let (_, tags) = page(&forge, "/alice/demo/-/tags");
    assert!(
        tags.contains(r#"href="/alice/demo/-/tree/v1.0">v1.0</a>"#),
        "{tags}"
    );
    let (_, switched) = page(&forge, "/alice/demo/-/tree/topic");
    assert!(switched.contains("Branch: topic"), "{switched}");

    // A branch whose name has a slash: tree, blob, log and archive.
    git_ok(&work, &["branch", "feature/x", "main"]);
    git_ok(
        &work,
        &[
            "push",
            "-q",
            &forge.server().url("/alice/demo.git"),
            "feature/x",
        ],
    );
    let (status, slashed) = page(&forge, "/alice/demo/-/tree/feature/x/docs");
    assert_eq!(status, 200, "{slashed}");
    assert!(slashed.contains("Branch: feature/x"), "{slashed}");
    assert!(
        slashed.contains(r#"href="/alice/demo/-/blob/feature/x/docs/manual.md""#),
        "{slashed}"
    );
    let (status, _) = page(&forge, "/alice/demo/-/blob/feature/x/docs/manual.md");
    assert_eq!(status, 200);
    let (status, slashed_log) = page(&forge, "/alice/demo/-/commits/feature/x");
    assert_eq!(status, 200);
    assert!(slashed_log.contains("rename the guide"), "{slashed_log}");
    let (_, branches) = page(&forge, "/alice/demo/-/branches");
    assert!(
        branches.contains(r#"href="/alice/demo/-/archive/feature%2Fx.tar.gz""#),
        "{branches}"
    );
    let slashed_archive = http_get(
        forge.server().addr,
        "/alice/demo/-/archive/feature%2Fx.tar.gz",
    );
    assert_eq!(slashed_archive.status, 200);
    let (_, repo_page) = page(&forge, "/alice/demo");
    assert!(repo_page.contains(">3 branches</a>"), "{repo_page}");
    assert!(repo_page.contains(">1 tag</a>"), "{repo_page}");

    let (_, activity) = page(&forge, "/alice/demo/-/activity");
    assert!(
        activity.contains("<code>refs/heads/topic</code>"),
        "{activity}"
    );
    assert!(activity.contains("created"), "{activity}");

    let archives = forge.server().data.parent().unwrap().join("archives");
    std::fs::create_dir_all(&archives).unwrap();
    let tgz = http_get(forge.server().addr, "/alice/demo/-/archive/v1.0.tar.gz");
    assert_eq!(tgz.status, 200);
    assert_eq!(tgz.header("content-type"), Some("application/gzip"));
    std::fs::write(archives.join("a.tar.gz"), &tgz.body).unwrap();
    let listing = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(archives.join("a.tar.gz"))
        .output()
        .unwrap();
    let listing = text(&listing.stdout);
    assert!(listing.contains("demo-v1.0/docs/manual.md"), "{listing}");
    let zip = http_get(forge.server().addr, "/alice/demo/-/archive/main.zip");
    assert_eq!(zip.status, 200);
    std::fs::write(archives.join("a.zip"), &zip.body).unwrap();
    let names = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))",
        ])
        .arg(archives.join("a.zip"))
        .output()
        .unwrap();
    assert!(
        text(&names.stdout).contains("demo-main/README.md"),
        "{}",
        text(&names.stderr)
    );
    let (status, _) = page(&forge, "/alice/demo/-/archive/main.rar");
    assert_eq!(status, 404);
}

#[test]
fn a_person_browses_the_repo_in_chromium() {
    let (forge, work) = forge();
    add_history(&forge, &work);
    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/browser-screenshots");
    browser_journey("browse.mjs", &forge.server().url(""), &shots, &[]);
    for name in [
        "home",
        "repo",
        "tree",
        "blob",
        "blame",
        "line-anchor",
        "log",
        "commit",
        "branch",
        "branches",
        "repo-360",
    ] {
        let shot = shots.join(format!("{name}.png"));
        assert!(
            std::fs::metadata(&shot).is_ok_and(|m| m.len() > 1000),
            "no screenshot {}",
            shot.display()
        );
    }
}
