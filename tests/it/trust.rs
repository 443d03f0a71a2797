//! What the server trusts in a repo: replacement objects (`refs/replace/*`)
//! and grafts change what an object id means, so no check and no page
//! follows them, whether a push tried to make one (refused) or one lies on
//! disk (an old version, an operator, a crash); the same history in two
//! repos shows each repo its own pages.

use std::path::{Path, PathBuf};

use crate::support::*;

/// A server on a data dir holding `alice/repo` (and `repos`, more), with
/// `main` protected and a blob limit of 1 MiB.
fn forge(dir: &Path, repos: &[&str]) -> (PathBuf, TestServer) {
    let data = data_with_repo(dir);
    for repo in repos {
        let made = run_vole(&data, &["repo", "create", repo]);
        assert!(made.status.success(), "{}", text(&made.stderr));
    }
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .args(["--protected-branch", "main"])
        .args(["--max-blob-size", "1MiB"])
        .start();
    (data, server)
}

/// Writes `refs/replace/<original>` in the bare repo on disk, behind the
/// server's back, pointing at `replacement` (fetched from `work`).
fn replace_on_disk(bare: &Path, work: &Path, original: &str, replacement: &str) {
    git_ok(work, &["branch", "-f", "replacement", replacement]);
    git_ok(
        bare,
        &[
            "fetch",
            "-q",
            work.to_str().unwrap(),
            &format!("+refs/heads/replacement:refs/replace/{original}"),
        ],
    );
    // Anti-vacuity: git itself follows the replacement here.
    let seen = git_ok(bare, &["rev-parse", &format!("{original}^{{tree}}")]);
    let replaced = git_ok(bare, &["rev-parse", &format!("{replacement}^{{tree}}")]);
    assert_eq!(seen, replaced, "the replace ref is not in effect for git");
}

fn commit_tree(work: &Path, tree: &str, parents: &[&str], message: &str) -> String {
    let mut args = vec!["commit-tree", tree, "-m", message];
    for parent in parents {
        args.extend(["-p", parent]);
    }
    git_ok(work, &args).trim().to_string()
}

#[test]
fn a_push_to_refs_replace_is_refused_with_a_reason_and_moves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (data, server) = forge(dir.path(), &[]);
    let bare = data.join("repos/alice/repo.git");
    let work = worktree(dir.path(), "work");
    let url = server.url("/alice/repo.git");
    git_ok(&work, &["push", "-q", &url, "HEAD:main"]);
    let first = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let forged = commit_file(&work, "forged.txt", b"forged\n");
    let pushed = git(
        &work,
        &["push", &url, &format!("{forged}:refs/replace/{first}")],
    );
    let said = text(&pushed.stderr);
    assert!(!pushed.status.success(), "a replace ref was taken: {said}");
    assert!(
        said.contains("refs/replace/* would make an object id name another object"),
        "the refusal must say why: {said}"
    );
    assert_eq!(ref_value(&bare, &format!("refs/replace/{first}")), None);
}

/// A server, `alice/repo`'s bare repo, a work tree whose one commit is
/// pushed to `main`, and that commit's id and tree.
struct Pushed {
    dir: tempfile::TempDir,
    server: TestServer,
    bare: PathBuf,
    work: PathBuf,
    url: String,
    first: String,
    tree: String,
}

fn pushed() -> Pushed {
    let dir = tempfile::tempdir().unwrap();
    let (data, server) = forge(dir.path(), &[]);
    let work = worktree(dir.path(), "work");
    let url = server.url("/alice/repo.git");
    git_ok(&work, &["push", "-q", &url, "HEAD:main"]);
    let first = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let tree = git_ok(&work, &["rev-parse", "HEAD^{tree}"])
        .trim()
        .to_string();
    Pushed {
        bare: data.join("repos/alice/repo.git"),
        dir,
        server,
        work,
        url,
        first,
        tree,
    }
}

#[test]
fn a_replace_ref_on_disk_does_not_make_a_rewrite_a_fast_forward() {
    let Pushed {
        bare,
        work,
        url,
        first,
        tree,
        dir: _dir,
        server: _server,
    } = pushed();
    // `rewrite` shares nothing with main, but its replacement claims
    // main as its parent.
    let rewrite = commit_tree(&work, &tree, &[], "a rewrite of main");
    let posing = commit_tree(&work, &tree, &[&first], "posing as a descendant");
    replace_on_disk(&bare, &work, &rewrite, &posing);
    let forced = git(
        &work,
        &[
            "push",
            "--force",
            &url,
            &format!("{rewrite}:refs/heads/main"),
        ],
    );
    assert!(
        !forced.status.success(),
        "a rewrite of protected main passed the fast-forward check through a replace ref"
    );
    assert!(
        text(&forced.stderr).contains("only fast-forward pushes are allowed"),
        "{}",
        text(&forced.stderr)
    );
    assert_eq!(ref_value(&bare, "refs/heads/main"), Some(first));
}

#[test]
fn a_replace_ref_on_disk_does_not_hide_a_blob_from_the_size_scan() {
    let Pushed {
        bare,
        work,
        url,
        first,
        tree,
        dir: _dir,
        server: _server,
    } = pushed();
    // `big` carries a 2 MiB file; its replacement none.
    std::fs::write(work.join("big.bin"), random_bytes(2 << 20, 7)).unwrap();
    git_ok(&work, &["add", "big.bin"]);
    git_ok(&work, &["commit", "-q", "-m", "a big file"]);
    let big = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let small = commit_tree(&work, &tree, &[&first], "no big file");
    replace_on_disk(&bare, &work, &big, &small);
    let pushed = git(&work, &["push", &url, &format!("{big}:refs/heads/main")]);
    let said = text(&pushed.stderr);
    assert!(
        !pushed.status.success(),
        "a blob over --max-blob-size went in past the blob scan through a replace ref"
    );
    assert!(
        said.contains("big.bin"),
        "the refusal names the file: {said}"
    );
    assert_eq!(ref_value(&bare, "refs/heads/main"), Some(first));
}

#[test]
fn a_replace_ref_on_disk_changes_no_page_and_no_clone() {
    let Pushed {
        dir,
        server,
        bare,
        work,
        url,
        first,
        tree: _,
    } = pushed();
    // main's commit replaced by one with another message and tree.
    std::fs::write(work.join("README.md"), "# forged readme\n").unwrap();
    git_ok(&work, &["add", "README.md"]);
    let forged_tree = git_ok(&work, &["write-tree"]).trim().to_string();
    let forged = commit_tree(&work, &forged_tree, &[], "forged message");
    replace_on_disk(&bare, &work, &first, &forged);
    for path in [
        format!("/alice/repo/-/commit/{first}"),
        "/alice/repo".to_string(),
        "/alice/repo/-/raw/main/README.md".to_string(),
        "/alice/repo/-/commits/main".to_string(),
        "/alice/repo/-/tree/main".to_string(),
        format!("/alice/repo/-/blame/{first}/README.md"),
    ] {
        let page = http_get(server.addr, &path);
        assert_eq!(page.status, 200, "{path}: {}", page.text());
        let body = page.text();
        assert!(
            !body.contains("forged"),
            "{path} shows the replacement object's content: {body}"
        );
    }
    let raw = http_get(server.addr, "/alice/repo/-/raw/main/README.md");
    assert_eq!(raw.text(), "# hello\n");

    // A clone gets the commit the id names, not its replacement; a
    // mirror gets no replace ref.
    let mirror = dir.path().join("mirror.git");
    git_ok(
        dir.path(),
        &["clone", "-q", "--mirror", &url, mirror.to_str().unwrap()],
    );
    assert_eq!(
        ref_value(&mirror, &format!("refs/replace/{first}")),
        None,
        "the replace ref on disk is advertised to clients"
    );
    let forged_log = git_ok(&mirror, &["log", "-1", "--format=%s", "main"]);
    assert_eq!(
        forged_log.trim(),
        "first",
        "a mirror's history is the replacement's"
    );
    // A pusher may take the replacement away.
    git_ok(
        &work,
        &["push", "-q", &url, &format!(":refs/replace/{first}")],
    );
    assert_eq!(ref_value(&bare, &format!("refs/replace/{first}")), None);
    let clone = dir.path().join("clone");
    git_ok(dir.path(), &["clone", "-q", &url, clone.to_str().unwrap()]);
    let message = git_ok(
        &clone,
        &["--no-replace-objects", "log", "-1", "--format=%s"],
    );
    assert_eq!(message.trim(), "first");
    assert_eq!(
        std::fs::read_to_string(clone.join("README.md")).unwrap(),
        "# hello\n"
    );
}

#[test]
fn the_same_history_in_two_repos_shows_each_its_own_pages() {
    let dir = tempfile::tempdir().unwrap();
    let (data, server) = forge(dir.path(), &["alice/twin"]);
    let work = worktree(dir.path(), "work");
    let first = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    for repo in ["repo", "twin"] {
        let url = server.url(&format!("/alice/{repo}.git"));
        git_ok(&work, &["push", "-q", &url, "HEAD:main"]);
    }
    // One repo's copy of the commit is replaced on disk, and its pages are
    // viewed first, so any cache keyed without the repo would fill from it.
    std::fs::write(work.join("README.md"), "# forged readme\n").unwrap();
    git_ok(&work, &["add", "README.md"]);
    let forged_tree = git_ok(&work, &["write-tree"]).trim().to_string();
    let forged = commit_tree(&work, &forged_tree, &[], "forged message");
    replace_on_disk(&data.join("repos/alice/repo.git"), &work, &first, &forged);
    let pages = |repo: &str| {
        [
            format!("/alice/{repo}/-/commit/{first}"),
            format!("/alice/{repo}/-/tree/{first}"),
            format!("/alice/{repo}/-/blame/{first}/README.md"),
            format!("/alice/{repo}/-/commits/{first}"),
            format!("/alice/{repo}/-/raw/{first}/README.md"),
        ]
    };
    for repo in ["repo", "twin"] {
        for path in pages(repo) {
            let page = http_get(server.addr, &path);
            assert_eq!(page.status, 200, "{path}: {}", page.text());
            assert!(
                !page.text().contains("forged"),
                "{path} shows what was done to alice/repo: {}",
                page.text()
            );
        }
    }
}

#[test]
fn a_repo_whose_attributes_hide_a_diff_does_not_hide_it_in_another_repo_with_the_same_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (data, server) = forge(dir.path(), &["alice/twin"]);
    let work = worktree(dir.path(), "work");
    let commit = commit_file(&work, "notes.txt", b"a line only a text diff shows\n");
    for repo in ["repo", "twin"] {
        let url = server.url(&format!("/alice/{repo}.git"));
        git_ok(&work, &["push", "-q", &url, "HEAD:main"]);
    }
    // The operator's attributes of one repo make git show its files as
    // binary; that repo's commit page is viewed (and cached) first.
    let info = data.join("repos/alice/repo.git/info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(info.join("attributes"), "* -diff\n").unwrap();
    let line = "a line only a text diff shows";
    let page = http_get(server.addr, &format!("/alice/repo/-/commit/{commit}"));
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(
        !page.text().contains(line),
        "the attributes did not make the diff binary: the test shows nothing"
    );
    let twin = http_get(server.addr, &format!("/alice/twin/-/commit/{commit}"));
    assert_eq!(twin.status, 200, "{}", twin.text());
    assert!(
        twin.text().contains(line),
        "alice/twin's commit page shows what alice/repo's attributes made of the same commit: a cache keyed by the commit alone"
    );
}

#[test]
fn a_big_blob_that_no_pushed_ref_reaches_is_refused_too() {
    let Pushed {
        dir,
        server,
        bare,
        work,
        first,
        ..
    } = pushed();
    // A pack of one small commit and, beside it, a 2 MiB blob no tree
    // names: sent as a push by hand, as a hostile client would.
    let big = dir.path().join("big.bin");
    std::fs::write(&big, random_bytes(2 << 20, 11)).unwrap();
    let blob = git_ok(&work, &["hash-object", "-w", big.to_str().unwrap()])
        .trim()
        .to_string();
    let next = commit_file(&work, "small.txt", b"small\n");
    let objects = git_ok(
        &work,
        &["rev-list", "--objects", &format!("{first}..{next}")],
    );
    let mut ids: Vec<String> = objects
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    ids.push(blob.clone());
    let mut pack = git_command(&work);
    pack.args(["pack-objects", "--stdout", "-q"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = pack.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(ids.join("\n").as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    let pack = child.wait_with_output().unwrap().stdout;
    let command = format!("{first} {next} refs/heads/main\0report-status side-band-64k\n");
    let mut body = format!("{:04x}{command}0000", command.len() + 4).into_bytes();
    body.extend_from_slice(&pack);
    let response = http(
        server.addr,
        &format!(
            "POST /alice/repo.git/git-receive-pack HTTP/1.1\r\nContent-Type: application/x-git-receive-pack-request\r\nContent-Length: {}",
            body.len()
        ),
        &body,
    );
    let said = response.text();
    assert!(
        !said.contains("ok refs/heads/main"),
        "a push whose pack carries a blob over --max-blob-size that no ref reaches went through: {said}"
    );
    assert!(
        said.contains("--max-blob-size"),
        "the refusal must say why: {said}"
    );
    assert_eq!(ref_value(&bare, "refs/heads/main"), Some(first));
    assert!(
        !git(&bare, &["cat-file", "-e", &blob]).status.success(),
        "the refused blob is in the repo"
    );
}

#[test]
fn an_archive_of_a_signed_commit_with_export_subst_runs_no_signature_check() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    // A `gpg` first on the server's PATH that says it ran.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let ran = dir.path().join("gpg-ran");
    let gpg = bin.join("gpg");
    write_script(
        &gpg,
        &format!("#!/bin/sh\ntouch {}\nexit 1\n", ran.display()),
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .env("PATH", &path)
        .start();
    let work = worktree(dir.path(), "work");
    std::fs::write(work.join(".gitattributes"), "*.txt export-subst\n").unwrap();
    std::fs::write(work.join("a.txt"), "$Format:%G?$\n").unwrap();
    git_ok(&work, &["add", ".gitattributes", "a.txt"]);
    let tree = git_ok(&work, &["write-tree"]).trim().to_string();
    let parent = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let commit = format!(
        "tree {tree}\nparent {parent}\nauthor A <a@example.org> 1767225600 +0000\ncommitter A <a@example.org> 1767225600 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\nsigned, or so it says\n"
    );
    let message = dir.path().join("commit.txt");
    std::fs::write(&message, commit).unwrap();
    let signed = git_ok(
        &work,
        &[
            "hash-object",
            "-t",
            "commit",
            "-w",
            message.to_str().unwrap(),
        ],
    )
    .trim()
    .to_string();
    git_ok(
        &work,
        &[
            "push",
            "-q",
            &server.url("/alice/repo.git"),
            &format!("{signed}:refs/heads/main"),
        ],
    );
    let archive = http_get(server.addr, "/alice/repo/-/archive/main.tar.gz");
    assert_eq!(archive.status, 200, "{}", archive.text());
    assert!(archive.body.len() > 20, "no archive came back");
    assert!(
        !ran.exists(),
        "an archive of a pushed commit ran gpg on the pusher's signature"
    );
}
