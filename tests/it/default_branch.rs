//! The default branch is HEAD: a push that leaves HEAD naming a missing
//! branch points it at `main` if the push created it, else `master`, else
//! the first by name of those it created; a delete of HEAD's branch is
//! refused with a reason the pusher sees; a clone then checks out; the
//! repo settings and `vole repo default-branch` read HEAD and move it, to
//! a branch that exists only; every change of HEAD is a `head` row of the
//! ref log.

use std::path::{Path, PathBuf};

use crate::support::*;

/// The shared fixture on the empty repos `alice/NAME` (HEAD on `main`, as
/// `vole repo create` makes them), with a server admin's token.
struct Fixture {
    forge: Forge,
    /// `Authorization: Bearer ...` of a server admin.
    admin: String,
}

impl std::ops::Deref for Fixture {
    type Target = Forge;
    fn deref(&self) -> &Forge {
        &self.forge
    }
}

impl Fixture {
    fn start(repos: &[&str]) -> Fixture {
        let names: Vec<String> = repos.iter().map(|r| format!("alice/{r}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut forge = Forge::new(&names);
        let admin = format!(
            "Authorization: Bearer {}",
            user_token(&forge.data, "root", true, "admin", &[])
        );
        forge.serve(&["--anonymous-push"]);
        Fixture { forge, admin }
    }

    fn url(&self, repo: &str) -> String {
        self.forge.url(&format!("/alice/{repo}.git"))
    }

    fn head(&self, repo: &str) -> String {
        std::fs::read_to_string(
            self.server()
                .data
                .join(format!("repos/alice/{repo}.git/HEAD")),
        )
        .unwrap()
        .trim()
        .to_string()
    }

    /// The ref log's `head` rows for `alice/REPO`: (branch, actor), in
    /// order, via `vole log dump --json` (the server keeps running).
    fn head_records(&self, repo: &str) -> Vec<(String, String)> {
        let out = run_vole(&self.server().data, &["log", "dump", "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let rows: Vec<serde_json::Value> = text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|row: &serde_json::Value| row["log"] == "refs")
            .collect();
        assert!(!rows.is_empty(), "the dump shows no ref log rows at all");
        rows.iter()
            .filter(|row| row["repo"] == format!("alice/{repo}") && row["phase"] == "head")
            .map(|row| {
                (
                    row["ref"].as_str().unwrap().to_string(),
                    row["actor"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }
}

/// A work tree whose branches are `branches` (each one commit apart), with
/// a tag on each.
fn work_with_branches(parent: &Path, name: &str, branches: &[&str]) -> PathBuf {
    let work = worktree(parent, name);
    for branch in branches {
        git_ok(&work, &["checkout", "-q", "-B", branch, "main"]);
        commit_file(
            &work,
            &format!("{}.txt", branch.replace('/', "-")),
            branch.as_bytes(),
        );
        git_ok(&work, &["tag", &format!("v-{}", branch.replace('/', "-"))]);
    }
    if !branches.contains(&"main") {
        git_ok(&work, &["checkout", "-q", branches[0]]);
        git_ok(&work, &["branch", "-q", "-D", "main"]);
    }
    work
}

/// A history shaped like a big project's: default branch `master`, many
/// branches (some sorting before it), tags; pushed with refspecs, as one
/// moves a repo to a new forge.
#[test]
fn a_pushed_project_with_master_clones_with_a_checkout_of_master() {
    let forge = Fixture::start(&["project"]);
    let branches = [
        "ag/bstr-migration",
        "ag/deps",
        "master",
        "feature/a",
        "zz-last",
    ];
    let work = work_with_branches(&forge.dir, "work", &branches);
    git_ok(
        &work,
        &[
            "push",
            "-q",
            &forge.url("project"),
            "refs/heads/*:refs/heads/*",
            "refs/tags/*:refs/tags/*",
        ],
    );
    assert_eq!(forge.head("project"), "ref: refs/heads/master");
    // git may commit the push one ref at a time, HEAD chosen again after
    // each: every change is a row, the last one master's.
    let records = forge.head_records("project");
    assert_eq!(
        records.last(),
        Some(&("refs/heads/master".to_string(), "anonymous".to_string())),
        "the push's change of HEAD is not in the ref log: {records:?}"
    );
    let clone = forge.dir.join("clone");
    let out = git(
        &forge.dir,
        &["clone", &forge.url("project"), clone.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("nonexistent ref"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        git_ok(&clone, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "master"
    );
    assert!(
        clone.join("master.txt").is_file(),
        "nothing was checked out"
    );
    // The home page shows master, and its log and archive links follow
    // it, as do the other pages' tabs.
    let home = http(forge.server().addr, "GET /alice/project HTTP/1.1", b"");
    assert_eq!(home.status, 200);
    let home = home.text();
    assert!(home.contains("Branch: master"), "{home}");
    assert!(
        home.contains("href=\"/alice/project/-/commits/master\""),
        "{home}"
    );
    assert!(
        home.contains("href=\"/alice/project/-/archive/master.tar.gz\""),
        "{home}"
    );
    assert!(
        home.contains("master.txt"),
        "the listing is not master's: {home}"
    );
    for page in ["activity", "branches", "tags"] {
        let got = http(
            forge.server().addr,
            &format!("GET /alice/project/-/{page} HTTP/1.1"),
            b"",
        );
        assert!(
            got.text()
                .contains("href=\"/alice/project/-/commits/master\""),
            "the {page} page's tabs do not follow HEAD: {}",
            got.text()
        );
    }
    let archive = http(
        forge.server().addr,
        "GET /alice/project/-/archive/master.tar.gz HTTP/1.1",
        b"",
    );
    assert_eq!(archive.status, 200);
}

#[test]
fn main_is_chosen_first_then_master_then_the_first_by_name() {
    let forge = Fixture::start(&["both", "named", "kept"]);
    // main and master together: main.
    let work = work_with_branches(&forge.dir, "w1", &["master", "main"]);
    git_ok(&work, &["push", "-q", &forge.url("both"), "master", "main"]);
    assert_eq!(forge.head("both"), "ref: refs/heads/main");
    // Neither: the first by name of those created, whatever order they
    // were pushed in (git may commit them one at a time).
    let work = work_with_branches(&forge.dir, "w2", &["zeta", "alpha", "mid"]);
    git_ok(
        &work,
        &["push", "-q", &forge.url("named"), "zeta", "mid", "alpha"],
    );
    assert_eq!(forge.head("named"), "ref: refs/heads/alpha");
    // A HEAD that names an existing branch is left alone by later pushes.
    let records = forge.head_records("named");
    assert_eq!(
        records.last().map(|(branch, _)| branch.as_str()),
        Some("refs/heads/alpha")
    );
    git_ok(&work, &["push", "-q", &forge.url("named"), "alpha:master"]);
    assert_eq!(forge.head("named"), "ref: refs/heads/alpha");
    assert_eq!(forge.head_records("named"), records, "HEAD did not move");
    // A HEAD left dangling before (here: by hand) is mended by the next
    // push, though it creates no branch: among the repo's branches.
    let head_file = forge.server().data.join("repos/alice/named.git/HEAD");
    std::fs::write(&head_file, "ref: refs/heads/gone\n").unwrap();
    commit_file(&work, "later.txt", b"later");
    git_ok(&work, &["push", "-q", &forge.url("named"), "HEAD:zeta"]);
    assert_eq!(forge.head("named"), "ref: refs/heads/master");
    // A push of tags only leaves a missing HEAD as it is.
    git_ok(&work, &["push", "-q", &forge.url("kept"), "v-zeta"]);
    assert_eq!(forge.head("kept"), "ref: refs/heads/main");
    assert!(forge.head_records("kept").is_empty());
}

#[test]
fn deleting_the_default_branch_is_refused_with_a_reason() {
    let forge = Fixture::start(&["repo"]);
    let work = work_with_branches(&forge.dir, "work", &["master", "other"]);
    git_ok(
        &work,
        &["push", "-q", &forge.url("repo"), "master", "other"],
    );
    assert_eq!(forge.head("repo"), "ref: refs/heads/master");
    let out = git(&work, &["push", &forge.url("repo"), ":master"]);
    assert!(!out.status.success(), "deleting HEAD's branch was accepted");
    assert!(
        text(&out.stderr).contains("default branch"),
        "no reason given: {}",
        text(&out.stderr)
    );
    let refs = git_ok(
        &work,
        &["ls-remote", &forge.url("repo"), "refs/heads/master"],
    );
    assert!(refs.contains("refs/heads/master"), "master is gone: {refs}");
    // Another branch may go.
    git_ok(&work, &["push", "-q", &forge.url("repo"), ":other"]);
}

#[test]
fn the_settings_read_and_move_head_to_a_branch_that_exists() {
    let forge = Fixture::start(&["repo"]);
    let work = work_with_branches(&forge.dir, "work", &["master", "other"]);
    git_ok(
        &work,
        &["push", "-q", &forge.url("repo"), "master", "other"],
    );
    let settings = |method: &str, body: &str| {
        http(
            forge.server().addr,
            &format!(
                "{method} /api/v1/repos/alice/repo/settings HTTP/1.1\r\n{}\r\nContent-Type: application/json\r\nContent-Length: {}",
                forge.admin,
                body.len()
            ),
            body.as_bytes(),
        )
    };
    // Read from HEAD, though no settings are stored.
    let got = settings("GET", "");
    assert_eq!(got.status, 200, "{}", got.text());
    assert!(
        got.text().contains(r#""default_branch":"master""#),
        "{}",
        got.text()
    );
    // A branch that does not exist: refused, HEAD as it was.
    let refused = settings("PUT", r#"{"version":0,"default_branch":"nope"}"#);
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert!(
        refused.text().contains("no branch \\\"nope\\\""),
        "{}",
        refused.text()
    );
    assert_eq!(forge.head("repo"), "ref: refs/heads/master");
    // One that does: HEAD moves, and the old default may now be deleted.
    let moved = settings("PUT", r#"{"version":0,"default_branch":"other"}"#);
    assert_eq!(moved.status, 200, "{}", moved.text());
    assert_eq!(forge.head("repo"), "ref: refs/heads/other");
    let records = forge.head_records("repo");
    assert_eq!(
        records.last(),
        Some(&("refs/heads/other".to_string(), "root".to_string())),
        "the settings' change of HEAD is not in the ref log"
    );
    // The same branch again: nothing moves, nothing is recorded.
    let again = settings("PUT", r#"{"version":1,"default_branch":"other"}"#);
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(forge.head_records("repo"), records);
    assert!(
        settings("GET", "")
            .text()
            .contains(r#""default_branch":"other""#)
    );
    git_ok(&work, &["push", "-q", &forge.url("repo"), ":master"]);
    let clone = forge.dir.join("clone");
    git_ok(
        &forge.dir,
        &["clone", "-q", &forge.url("repo"), clone.to_str().unwrap()],
    );
    assert_eq!(
        git_ok(&clone, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "other"
    );
}

#[test]
fn the_cli_reads_and_moves_the_default_branch_and_the_log_records_it() {
    let mut forge = Fixture::start(&["repo"]);
    let work = work_with_branches(&forge.dir, "work", &["master", "other"]);
    git_ok(
        &work,
        &["push", "-q", &forge.url("repo"), "master", "other"],
    );
    let data = &forge.server().data.clone();
    let shown = run_vole(data, &["repo", "default-branch", "alice/repo"]);
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    assert_eq!(text(&shown.stdout).trim(), "master");
    // A branch that does not exist: a one-line reason, HEAD as it was.
    let refused = run_vole(data, &["repo", "default-branch", "alice/repo", "nope"]);
    assert!(!refused.status.success(), "a missing branch was accepted");
    assert!(
        text(&refused.stderr).contains("no branch \"nope\""),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(forge.head("repo"), "ref: refs/heads/master");
    let missing = run_vole(data, &["repo", "default-branch", "alice/none", "master"]);
    assert!(!missing.status.success(), "a missing repo was accepted");
    let moved = run_vole(data, &["repo", "default-branch", "alice/repo", "other"]);
    assert!(moved.status.success(), "{}", text(&moved.stderr));
    assert_eq!(forge.head("repo"), "ref: refs/heads/other");
    let records = forge.head_records("repo");
    assert_eq!(
        records.last(),
        Some(&("refs/heads/other".to_string(), "cli".to_string())),
        "the CLI's change of HEAD is not in the ref log"
    );
    // The web home follows HEAD.
    let home = http(forge.server().addr, "GET /alice/repo HTTP/1.1", b"");
    assert!(home.text().contains("other.txt"), "{}", home.text());
    // The record survives a restart (the log replays a `head` row).
    forge.forge.take_server().expect("it runs").stop();
    let dump = run_vole(data, &["log", "dump"]);
    assert!(
        text(&dump.stdout).contains("refs/heads/other") && text(&dump.stdout).contains(" head "),
        "{}",
        text(&dump.stdout)
    );
    let restarted = TestServer::builder().data(data).start();
    let clone = forge.dir.join("clone");
    git_ok(
        &forge.dir,
        &[
            "clone",
            "-q",
            &restarted.url("/alice/repo.git"),
            clone.to_str().unwrap(),
        ],
    );
    assert_eq!(
        git_ok(&clone, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "other"
    );
}
