//! Pull requests in the browser, over real HTTP and real `git`: opened
//! from a pushed branch with the form, its commits and its diff against
//! the merge base shown, merged with the merge box (a merge commit with
//! both parents), the merge button absent for a reader and their forged
//! merge refused, a merge whose target moved after the page was shown
//! refused, and a conflicting pull request listing its paths.

use std::path::Path;

use crate::support::*;
use crate::web_issues::{forge, page, send, signed_in};

/// A form's hidden `name` value after `after` in `html`.
fn hidden_after(html: &str, after: &str, name: &str) -> String {
    let at = html
        .find(after)
        .unwrap_or_else(|| panic!("no {after:?} in:\n{html}"));
    hidden_field(&html[at..], name)
}

#[test]
fn a_pull_request_is_opened_reviewed_and_merged_in_the_browser() {
    let forge = forge();
    let token = user_token(&forge.data, "alice", false, "write", &[]);
    let url = format!(
        "http://alice:{token}@{}/alice/repo.git",
        forge.server().addr
    );
    let work = worktree(&forge.dir, "work");
    git_ok(&work, &["push", "-q", &url, "main"]);
    let base = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    git_ok(&work, &["checkout", "-q", "-b", "feature"]);
    commit_file(&work, "src/lib.rs", b"pub fn added() -> u32 {\n    42\n}\n");
    commit_file(&work, "notes.txt", b"a note\n");
    git_ok(&work, &["push", "-q", &url, "feature"]);
    git_ok(&work, &["checkout", "-q", "main"]);

    let mut alice = signed_in(&forge, "alice", 1);
    let mut bob = signed_in(&forge, "bob", 2);
    let form = page(&mut bob, "/alice/repo/-/pulls/new");
    assert!(
        form.contains("<option value=\"feature\" selected>"),
        "{form}"
    );
    assert!(
        form.contains("<option value=\"main\" selected>"),
        "the default branch is the target:\n{form}"
    );
    let opened = send(
        &mut bob,
        "/alice/repo/-/pulls/new",
        "/alice/repo/-/pulls/new",
        &[
            ("source", "feature"),
            ("target", "main"),
            ("title", "Add <b>added</b>"),
            ("body", "Closes nothing"),
        ],
    );
    assert_eq!(opened.status, 303, "{}", opened.text());
    let path = opened.header("location").unwrap().to_string();
    let shown = page(&mut bob, &path);
    assert!(
        shown.contains("change src/lib.rs") && shown.contains("change notes.txt"),
        "its commits:\n{shown}"
    );
    assert!(shown.contains("This pull request can be merged"), "{shown}");
    assert!(
        !shown.contains("Merge pull request</button>"),
        "a reader has the merge button:\n{shown}"
    );
    assert!(
        shown.contains("&#60;b&#62;added&#60;/b&#62;") && !shown.contains("<b>added"),
        "{shown}"
    );
    assert!(
        page(&mut bob, "/alice/repo/-/pulls")
            .contains("Pull requests <span class=\"count\">1</span>")
    );

    let files = page(&mut bob, &format!("{path}/files"));
    assert!(
        files.contains("src/lib.rs") && files.contains("42"),
        "{files}"
    );
    assert!(
        files.contains(&base[..12]),
        "the merge base is named:\n{files}"
    );
    let raw = bob.get(&format!("{path}/files.diff"));
    assert_eq!(raw.status, 200);
    assert!(raw.text().contains("+pub fn added()"), "{}", raw.text());
    let mails = bob.get(&format!("{path}/files.patch"));
    assert_eq!(mails.status, 200);
    let mails = mails.text();
    assert!(
        mails.starts_with("From ")
            && mails.contains("Subject: [PATCH")
            && mails.contains("+pub fn added()"),
        "the patch is the range's commits as mails:\n{mails}"
    );

    // A push to the source branch is in the timeline, by the pusher.
    git_ok(&work, &["checkout", "-q", "feature"]);
    let head = commit_file(&work, "later.txt", b"later\n");
    git_ok(&work, &["push", "-q", &url, "feature"]);
    git_ok(&work, &["checkout", "-q", "main"]);
    let pushed = (0..100).find_map(|_| {
        let shown = page(&mut bob, &path);
        if shown.contains("pushed 1 commit") {
            return Some(shown);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        None
    });
    let shown = pushed.expect("no \"pushed 1 commit\" entry in the timeline");
    assert!(
        shown.contains("<strong>alice</strong> pushed 1 commit"),
        "{shown}"
    );
    assert!(
        shown.contains("change later.txt"),
        "the page shows the current head's commits:\n{shown}"
    );

    // bob's forged merge: refused, nothing moved.
    let shown = page(&mut alice, &path);
    let (shown_head, shown_target) = (
        hidden_after(&shown, "/merge\"", "head"),
        hidden_after(&shown, "/merge\"", "target"),
    );
    assert_eq!(
        (shown_head.as_str(), shown_target.as_str()),
        (head.as_str(), base.as_str())
    );
    let fields = [
        ("method", "merge"),
        ("head", shown_head.as_str()),
        ("target", shown_target.as_str()),
    ];
    let forged = send(&mut bob, &path, &format!("{path}/merge"), &fields);
    assert_eq!(forged.status, 403, "{}", forged.text());
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main").unwrap(),
        base
    );

    // The target moves after alice's page was shown: her merge is refused.
    commit_file(&work, "other.txt", b"elsewhere\n");
    git_ok(&work, &["push", "-q", &url, "main"]);
    let moved = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let stale = send(&mut alice, &path, &format!("{path}/merge"), &fields);
    assert_eq!(stale.status, 409, "{}", stale.text());
    assert!(
        stale.text().contains("moved since the page was shown"),
        "{}",
        stale.text()
    );
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main").unwrap(),
        moved
    );

    // Its author retargets it after alice's page was shown (to a branch
    // at the same commit): her merge is refused, and it is pointed back.
    git_ok(&work, &["push", "-q", &url, "main:release"]);
    let shown = page(&mut alice, &path);
    let target = hidden_after(&shown, "/merge\"", "target");
    let bob_token = user_token(&forge.data, "bob", false, "write", &[]);
    let number = path.rsplit('/').next().unwrap().to_string();
    let retarget = |branch: &str| {
        let current = http(
            forge.server().addr,
            &format!("GET /api/v1/repos/alice/repo/pulls/{number} HTTP/1.1"),
            b"",
        );
        let version =
            serde_json::from_slice::<serde_json::Value>(&current.body).unwrap()["version"].clone();
        let body = serde_json::json!({"version": version, "base": branch}).to_string();
        let head = format!(
            "PATCH /api/v1/repos/alice/repo/pulls/{number} HTTP/1.1\r\n{}\r\nContent-Type: application/json\r\nContent-Length: {}",
            basic("bob", &bob_token),
            body.len()
        );
        let answer = http(forge.server().addr, &head, body.as_bytes());
        assert_eq!(answer.status, 201, "{}", answer.text());
    };
    retarget("release");
    let retargeted = send(
        &mut alice,
        &path,
        &format!("{path}/merge"),
        &[
            ("method", "merge"),
            ("head", &head),
            ("target", &target),
            ("target_branch", "main"),
        ],
    );
    assert_eq!(retargeted.status, 409, "{}", retargeted.text());
    assert!(
        retargeted.text().contains("it is release"),
        "{}",
        retargeted.text()
    );
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/release").unwrap(),
        moved
    );
    retarget("main");

    // Shown again, merged: a merge commit with both parents.
    let shown = page(&mut alice, &path);
    let target = hidden_after(&shown, "/merge\"", "target");
    assert_eq!(target, moved);
    let merged = send(
        &mut alice,
        &path,
        &format!("{path}/merge"),
        &[("method", "merge"), ("head", &head), ("target", &target)],
    );
    assert_eq!(merged.status, 303, "{}", merged.text());
    let tip = ref_value(&forge.bare("alice/repo"), "refs/heads/main").unwrap();
    git_ok(
        &work,
        &["fetch", "-q", &url, "main:refs/remotes/origin/main"],
    );
    let parents = git_ok(&work, &["rev-list", "--parents", "-n1", "origin/main"]);
    assert_eq!(
        parents.split_whitespace().collect::<Vec<_>>(),
        vec![tip.as_str(), moved.as_str(), head.as_str()]
    );
    let shown = page(&mut bob, &path);
    assert!(
        shown.contains("class=\"state merged\">Merged<") && shown.contains(&tip[..12]),
        "{shown}"
    );
    // Merged, it still shows its commits and what it brought to main,
    // though its branch is now on main (its merge base its own head).
    assert!(
        shown.contains("change later.txt") && shown.contains("change src/lib.rs"),
        "a merged pull request lost its commits:\n{shown}"
    );
    let files = page(&mut bob, &format!("{path}/files"));
    assert!(
        files.contains("src/lib.rs") && files.contains("later.txt") && !files.contains("other.txt"),
        "a merged pull request's diff is not what it brought:\n{files}"
    );

    // A conflicting one lists its paths and offers no merge.
    git_ok(&work, &["checkout", "-q", "-b", "clash", &base]);
    commit_file(&work, "other.txt", b"the branch's\n");
    git_ok(&work, &["push", "-q", &url, "clash"]);
    let opened = send(
        &mut alice,
        "/alice/repo/-/pulls/new",
        "/alice/repo/-/pulls/new",
        &[("source", "clash"), ("target", "main"), ("title", "Clash")],
    );
    let clash = opened.header("location").unwrap().to_string();
    let shown = page(&mut alice, &clash);
    assert!(
        shown.contains("has conflicts") && shown.contains("<code>other.txt</code>"),
        "{shown}"
    );
    assert!(!shown.contains("Merge pull request</button>"), "{shown}");
}

/// Pushes branch `name` of `work`, from `from`, with one commit per file.
fn push_branch(work: &Path, url: &str, name: &str, from: &str, files: &[(&str, &str)]) -> String {
    git_ok(work, &["checkout", "-q", "-B", name, from]);
    let mut head = String::new();
    for (file, text) in files {
        head = commit_file(work, file, text.as_bytes());
    }
    git_ok(work, &["push", "-q", url, name]);
    head
}

#[test]
fn a_team_files_an_issue_and_merges_pull_requests_each_way_in_chromium() {
    let forge = forge();
    let token = user_token(&forge.data, "alice", false, "write", &[]);
    let url = format!(
        "http://alice:{token}@{}/alice/repo.git",
        forge.server().addr
    );
    let work = worktree(&forge.dir, "work");
    git_ok(&work, &["push", "-q", &url, "main"]);
    let base = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let branch = |name: &str, files: &[(&str, &str)]| push_branch(&work, &url, name, &base, files);
    let feature = branch(
        "feature",
        &[
            ("greeting.txt", "hello from the branch\n"),
            ("more.txt", "more\n"),
        ],
    );
    let quick = branch("quick", &[("quick.txt", "quick\n")]);
    let late = branch("late", &[("late.txt", "late\n")]);
    let clash = branch("clash", &[("quick.txt", "clash\n")]);
    branch("squashme", &[("one.txt", "1\n"), ("two.txt", "2\n")]);
    let shots = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/browser-screenshots/threads");
    let printed = browser_journey(
        "threads.mjs",
        forge.url("/").trim_end_matches('/'),
        &shots,
        &["alice/repo", "correct horse battery", &clash],
    );
    assert!(printed.contains("ok"), "{printed}");
    // `git fetch` shows, first-parent from main: the squash, then the merge
    // commit of feature onto quick (fast-forwarded), then base.
    git_ok(
        &work,
        &["fetch", "-q", &url, "main:refs/remotes/origin/main"],
    );
    let history = git_ok(
        &work,
        &["rev-list", "--first-parent", "--parents", "origin/main"],
    );
    let commits: Vec<Vec<&str>> = history
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        commits.len(),
        4,
        "main is not squash, merge, quick, base: {history}"
    );
    let (squash, merge_commit) = (&commits[0], &commits[1]);
    assert_eq!(
        merge_commit[1..],
        [quick.as_str(), feature.as_str()],
        "the merge commit's parents are not quick (fast-forwarded) and feature"
    );
    assert_eq!(
        squash[1..],
        [merge_commit[0]],
        "the squash has one parent, the merge"
    );
    assert_eq!(commits[2][1..], [base.as_str()]);
    let tree = |rev: &str| git_ok(&work, &["ls-tree", "-r", "--name-only", rev]);
    let squash_tree = tree(squash[0]);
    assert!(
        squash_tree.contains("one.txt") && squash_tree.contains("two.txt"),
        "the squash lacks the branch's files: {squash_tree}"
    );
    assert!(
        !squash_tree.contains("late.txt"),
        "late was merged after its refusals"
    );
    let said = git_ok(&work, &["log", "-1", "--format=%an%n%B", squash[0]]);
    assert!(
        said.starts_with("alice\n")
            && said.contains("Squash me (#")
            && said.contains("change two.txt"),
        "the squash's author or message: {said}"
    );
    for unmerged in [&late, &clash] {
        let merged = std::process::Command::new("git")
            .current_dir(&work)
            .args(["merge-base", "--is-ancestor", unmerged, "origin/main"])
            .status()
            .unwrap();
        assert!(
            !merged.success(),
            "{unmerged} is on main after its merge was refused"
        );
    }
    for name in [
        "issue",
        "issue-list",
        "pull-files",
        "pull-merge-box",
        "pull-merged",
        "pull-ff-refused",
        "pull-conflict",
        "pull-squashed",
        "pull-moved-refused",
    ] {
        assert!(
            shots.join(format!("{name}.png")).exists(),
            "no {name} screenshot"
        );
    }
}
