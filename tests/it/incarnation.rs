//! A repo deleted and created again under its name is another repo: with
//! the server running throughout, across a restart, and with the server
//! killed -9 right after the delete, nothing of the first (objects, refs,
//! issues, its ACL, its activity, tokens limited to it) reaches the
//! second through any surface.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

/// What the first `alice/tmp` held, to look for on the second.
struct First {
    commit: String,
    /// A token of bob's made with `--repo alice/tmp` (for the first).
    limited: String,
    alice: String,
}

fn call(
    server: &TestServer,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> HttpResponse {
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let mut head = format!("{method} {path} HTTP/1.1");
    if body.is_some() {
        head.push_str(&format!(
            "\r\nContent-Type: application/json\r\nContent-Length: {}",
            payload.len()
        ));
    }
    if let Some(token) = token {
        head.push_str(&format!("\r\nAuthorization: Bearer {token}"));
    }
    http(server.addr, &head, payload.as_bytes())
}

/// A private `alice/tmp` with bob as a write member, a pushed secret, a
/// confidential issue and a comment; then deleted and created again,
/// public, with no members.
fn first_repo(dir: &Path, data: &Path, server: &TestServer) -> First {
    let alice = user_token(data, "alice", false, "admin", &[]);
    let made = run_vole(data, &["repo", "create", "alice/tmp", "--private"]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let _ = user_token(data, "bob", false, "write", &[]);
    let limited = user_token(data, "bob", false, "write", &["--repo", "alice/tmp"]);
    let acl = call(
        server,
        "PUT",
        "/api/v1/repos/alice/tmp/acl",
        Some(&alice),
        Some(
            &json!({"version": 1, "visibility": "private", "members": [{"name": "bob", "role": "write"}]}),
        ),
    );
    assert_eq!(acl.status, 200, "{}", acl.text());
    let work = worktree(dir, "first");
    let commit = commit_file(&work, "secret.txt", b"the first repo's secret\n");
    let url = server
        .url("/alice/tmp.git")
        .replace("http://", &format!("http://bob:{limited}@"));
    git_ok(&work, &["push", "-q", &url, "HEAD:main"]);
    let issue = call(
        server,
        "POST",
        "/api/v1/repos/alice/tmp/issues",
        Some(&alice),
        Some(&json!({"title": "confidential: the first repo's plans"})),
    );
    assert_eq!(issue.status, 201, "{}", issue.text());
    // Anti-vacuity: the first repo shows all of it to its members.
    let page = call(
        server,
        "GET",
        &format!("/alice/tmp/-/raw/{commit}/secret.txt"),
        Some(&alice),
        None,
    );
    assert_eq!(page.status, 200);
    let issues = call(
        server,
        "GET",
        "/api/v1/repos/alice/tmp/issues",
        Some(&alice),
        None,
    );
    assert!(issues.text().contains("confidential"), "{}", issues.text());
    First {
        commit,
        limited,
        alice,
    }
}

fn delete(data: &Path) {
    let deleted = run_vole(data, &["repo", "delete", "alice/tmp"]);
    assert!(deleted.status.success(), "{}", text(&deleted.stderr));
}

fn create_again(data: &Path) {
    let made = run_vole(data, &["repo", "create", "alice/tmp"]);
    assert!(made.status.success(), "{}", text(&made.stderr));
}

/// Nothing of the first `alice/tmp` on the second, to anyone.
fn nothing_of_the_first(server: &TestServer, dir: &Path, first: &First, when: &str) {
    let commit = &first.commit;
    for token in [None, Some(first.alice.as_str())] {
        let who = if token.is_some() {
            "alice"
        } else {
            "anonymous"
        };
        for path in [
            format!("/alice/tmp/-/raw/{commit}/secret.txt"),
            format!("/alice/tmp/-/blob/{commit}/secret.txt"),
            format!("/alice/tmp/-/tree/{commit}"),
            format!("/alice/tmp/-/commit/{commit}"),
            format!("/alice/tmp/-/commits/{commit}"),
            format!("/alice/tmp/-/blame/{commit}/secret.txt"),
            format!("/alice/tmp/-/commit/{commit}.patch"),
            format!("/alice/tmp/-/archive/{commit}.tar.gz"),
            "/alice/tmp/-/raw/main/secret.txt".to_string(),
        ] {
            let page = call(server, "GET", &path, token, None);
            assert_eq!(
                page.status,
                404,
                "{when}: {path} to {who} shows the deleted repo's objects: {}",
                page.text()
            );
        }
        let home = call(server, "GET", "/alice/tmp", token, None);
        assert_eq!(
            home.status, 200,
            "{when}: the new public repo is hidden from {who} (an old ACL?)"
        );
        assert!(
            !home.text().contains("secret.txt"),
            "{when}: the new repo's home lists the old tree"
        );
        for path in [
            "/api/v1/repos/alice/tmp/issues?state=all",
            "/api/v1/repos/alice/tmp/activity",
            "/alice/tmp/-/activity",
            "/alice/tmp/-/branches",
        ] {
            let listed = call(server, "GET", path, token, None);
            assert_eq!(listed.status, 200, "{when}: {path}: {}", listed.text());
            let body = listed.text();
            assert!(
                !body.contains("confidential") && !body.contains(commit.as_str()),
                "{when}: {path} to {who} lists the deleted repo's records: {body}"
            );
        }
    }
    let acl = call(
        server,
        "GET",
        "/api/v1/repos/alice/tmp/acl",
        Some(&first.alice),
        None,
    );
    assert_eq!(acl.status, 200, "{}", acl.text());
    let acl: Value = serde_json::from_slice(&acl.body).unwrap();
    assert_eq!(
        acl["visibility"], "public",
        "{when}: the old ACL came back: {acl}"
    );
    assert_eq!(
        acl["members"],
        json!([]),
        "{when}: the old members came back: {acl}"
    );
    let refs = git(dir, &["ls-remote", &server.url("/alice/tmp.git")]);
    assert!(refs.status.success(), "{}", text(&refs.stderr));
    assert_eq!(
        text(&refs.stdout).trim(),
        "",
        "{when}: the new repo has refs"
    );
    // The token made for the first repo does not reach the second.
    let work = worktree(dir, &format!("second-{}", when.replace(' ', "-")));
    let url = server
        .url("/alice/tmp.git")
        .replace("http://", &format!("http://bob:{}@", first.limited));
    let pushed = git(&work, &["push", &url, "HEAD:main"]);
    assert!(
        !pushed.status.success(),
        "{when}: a token limited to the deleted alice/tmp pushed to the new one"
    );
    assert!(
        text(&pushed.stderr).contains("limited to other repositories"),
        "{when}: {}",
        text(&pushed.stderr)
    );
    let wrote = call(
        server,
        "POST",
        "/api/v1/repos/alice/tmp/issues",
        Some(&first.limited),
        Some(&json!({"title": "through an old token"})),
    );
    assert_eq!(wrote.status, 403, "{when}: {}", wrote.text());
}

fn server(data: &Path) -> TestServer {
    TestServer::builder().data(data).start()
}

fn data_dir(dir: &Path) -> PathBuf {
    dir.join("data")
}

#[test]
fn a_repo_deleted_and_created_again_while_the_server_runs_is_another_repo() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_dir(dir.path());
    let server = server(&data);
    let first = first_repo(dir.path(), &data, &server);
    delete(&data);
    create_again(&data);
    nothing_of_the_first(&server, dir.path(), &first, "while running");
    // And after a restart, which replays every log.
    server.stop();
    let server = self::server(&data);
    nothing_of_the_first(&server, dir.path(), &first, "after a restart");
}

#[test]
fn a_repo_deleted_then_created_again_after_a_restart_is_another_repo() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_dir(dir.path());
    let server = server(&data);
    let first = first_repo(dir.path(), &data, &server);
    // The metadata folded into the first repo's shards before the delete.
    delete(&data);
    server.stop();
    let server = self::server(&data);
    create_again(&data);
    nothing_of_the_first(&server, dir.path(), &first, "created after a restart");
    server.stop();
    let server = self::server(&data);
    nothing_of_the_first(&server, dir.path(), &first, "and restarted again");
}

#[test]
fn a_server_killed_right_after_a_delete_brings_nothing_of_the_repo_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_dir(dir.path());
    let server = server(&data);
    let first = first_repo(dir.path(), &data, &server);
    // A write the fold may not have reached when the server dies.
    let late = call(
        &server,
        "POST",
        "/api/v1/repos/alice/tmp/issues",
        Some(&first.alice),
        Some(&json!({"title": "confidential: written last"})),
    );
    assert_eq!(late.status, 201, "{}", late.text());
    delete(&data);
    signal(server.pid(), 9);
    drop(server);
    let server = self::server(&data);
    create_again(&data);
    nothing_of_the_first(&server, dir.path(), &first, "after kill -9");
    // The log still holds the first repo's records: they are skipped, not
    // lost (the trashed copy has its shards).
    let dump = run_vole(&data, &["log", "dump"]);
    assert!(
        text(&dump.stdout).contains("born"),
        "the ref log does not record the new repo's incarnation"
    );
    server.stop();
    let checked = run_vole(&data, &["check"]);
    assert!(
        checked.status.success(),
        "vole check finds the deleted repo's records wanting in the new one: {}{}",
        text(&checked.stdout),
        text(&checked.stderr)
    );
}

/// Makes `data` what vole wrote before incarnations: no `vole-incarnation`
/// in any repo, the meta log of schema version 1 (no `incarnation`
/// column), no `born` or `adopted` rows in the ref log.
fn as_before_incarnations(data: &Path) {
    use vole_hooks::{Phase, RefMove};
    use vole_log::{Entry, Log, RecordKind, frame::FrameEncoder};
    use vole_meta::MetaWrite;
    let _ = std::fs::remove_file(data.join("vole-incarnations"));
    for owner in files_in(&data.join("repos")) {
        for repo in files_in(&owner) {
            let _ = std::fs::remove_file(repo.join("vole-incarnation"));
        }
    }
    let log_dir = data.join("log");
    let mut meta_txns: Vec<Vec<MetaWrite>> = Vec::new();
    let (meta, _) = Log::<MetaWrite>::open(&log_dir, |entry| {
        if let Entry::Txn { rows, .. } = entry {
            meta_txns.push(rows);
        }
    })
    .unwrap();
    drop(meta);
    let v1 = MetaWrite::previous_fields().unwrap();
    let metadata = std::collections::HashMap::from([
        ("vole.kind".to_string(), "meta_write".to_string()),
        ("vole.schema_version".to_string(), "1".to_string()),
        ("vole.base_seq".to_string(), "1".to_string()),
        ("vole.checkpoint_frames".to_string(), "0".to_string()),
    ]);
    let mut encoder = FrameEncoder::new();
    let mut bytes = encoder.schema(&arrow_schema::Schema::new_with_metadata(
        v1.clone(),
        metadata,
    ));
    for rows in &meta_txns {
        let columns = MetaWrite::columns(rows);
        let batch = arrow_array::RecordBatch::try_new(
            std::sync::Arc::new(arrow_schema::Schema::new(v1.clone())),
            columns[..v1.len()].to_vec(),
        )
        .unwrap();
        bytes.extend(encoder.batch(&batch).unwrap());
    }
    std::fs::write(log_dir.join(MetaWrite::FILE_NAME), bytes).unwrap();

    let mut ref_txns: Vec<Vec<RefMove>> = Vec::new();
    let (refs, _) = Log::<RefMove>::open(&log_dir, |entry| {
        if let Entry::Txn { rows, .. } = entry {
            let rows: Vec<RefMove> = rows
                .into_iter()
                .filter(|r| !matches!(r.phase, Phase::Born | Phase::Adopted))
                .collect();
            if !rows.is_empty() {
                ref_txns.push(rows);
            }
        }
    })
    .unwrap();
    drop(refs);
    let mut encoder = FrameEncoder::new();
    let mut bytes = encoder.schema(&RefMove::schema(1, 0));
    for rows in &ref_txns {
        bytes.extend(encoder.batch(&RefMove::batch(rows).unwrap()).unwrap());
    }
    std::fs::write(log_dir.join(RefMove::FILE_NAME), bytes).unwrap();
}

#[test]
fn a_data_dir_from_before_incarnations_upgrades_and_its_records_stay_their_repos() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_dir(dir.path());
    let server = server(&data);
    let first = first_repo(dir.path(), &data, &server);
    server.stop();
    as_before_incarnations(&data);
    assert!(!data.join("repos/alice/tmp.git/vole-incarnation").exists());

    // The upgrade: the repo present takes the records from before.
    let server = self::server(&data);
    let marker =
        std::fs::read_to_string(data.join("repos/alice/tmp.git/vole-incarnation")).unwrap();
    assert!(marker.contains("adopts-legacy"), "{marker}");
    assert!(
        server
            .log
            .wait_for(&["upgrade:", "alice/tmp"], Duration::from_secs(5))
            .is_some(),
        "the upgrade is not logged"
    );
    let issues = call(
        &server,
        "GET",
        "/api/v1/repos/alice/tmp/issues",
        Some(&first.alice),
        None,
    );
    assert!(
        issues.text().contains("confidential"),
        "the upgraded repo lost its issue: {}",
        issues.text()
    );
    let raw = call(
        &server,
        "GET",
        &format!("/alice/tmp/-/raw/{}/secret.txt", first.commit),
        Some(&first.alice),
        None,
    );
    assert_eq!(raw.status, 200, "{}", raw.text());
    let activity = call(
        &server,
        "GET",
        "/api/v1/repos/alice/tmp/activity",
        Some(&first.alice),
        None,
    );
    assert!(
        activity.text().contains(&first.commit),
        "{}",
        activity.text()
    );
    // (A token made before incarnations names none, and reaches the
    // adopting repo: `accounts` unit test.)
    server.stop();
    let dump = run_vole(&data, &["log", "dump"]);
    assert!(text(&dump.stdout).contains("adopted"), "no adopted row");
    let checked = run_vole(&data, &["check"]);
    assert!(
        checked.status.success(),
        "vole check after the upgrade: {}{}",
        text(&checked.stdout),
        text(&checked.stderr)
    );

    // The records from before belong to that repo only: deleted and
    // created again, the name starts empty.
    let server = self::server(&data);
    delete(&data);
    create_again(&data);
    nothing_of_the_first(&server, dir.path(), &first, "upgraded, then re-created");
    server.stop();
    let server = self::server(&data);
    nothing_of_the_first(
        &server,
        dir.path(),
        &first,
        "upgraded, re-created, restarted",
    );
}

#[test]
fn a_repo_moved_back_from_the_trash_is_the_same_repo_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_dir(dir.path());
    let server = server(&data);
    let first = first_repo(dir.path(), &data, &server);
    delete(&data);
    server.stop();
    let trashed = files_in(&data.join("trash/alice"))
        .into_iter()
        .find(|p| p.join("HEAD").is_file())
        .expect("the repo is in the trash");
    std::fs::rename(&trashed, data.join("repos/alice/tmp.git")).unwrap();
    let server = self::server(&data);
    let issues = call(
        &server,
        "GET",
        "/api/v1/repos/alice/tmp/issues",
        Some(&first.alice),
        None,
    );
    assert!(
        issues.text().contains("confidential"),
        "the repo moved back lost its issues: {}",
        issues.text()
    );
    let raw = call(
        &server,
        "GET",
        "/alice/tmp/-/raw/main/secret.txt",
        Some(&first.alice),
        None,
    );
    assert_eq!(raw.status, 200, "{}", raw.text());
    // Still private, bob still its member, his limited token still its.
    let anonymous = call(&server, "GET", "/alice/tmp", None, None);
    assert_eq!(anonymous.status, 404, "the repo moved back lost its ACL");
    let wrote = call(
        &server,
        "POST",
        "/api/v1/repos/alice/tmp/issues",
        Some(&first.limited),
        Some(&json!({"title": "bob, back again"})),
    );
    assert_eq!(wrote.status, 201, "{}", wrote.text());
}

#[test]
fn a_backup_taken_after_a_name_was_reused_restores_nothing_of_the_first_repo() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_dir(dir.path());
    let server = server(&data);
    let first = first_repo(dir.path(), &data, &server);
    delete(&data);
    create_again(&data);
    // The logs the backup copies hold the first repo's records.
    let backup = dir.path().join("backup");
    let out = run_vole(&data, &["backup", backup.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    server.stop();
    let restored = dir.path().join("restored");
    let out = run_vole(&restored, &["restore", backup.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let server = self::server(&restored);
    nothing_of_the_first(&server, dir.path(), &first, "restored from a backup");
}

#[test]
fn a_compacted_ref_log_keeps_which_repo_each_name_is() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_dir(dir.path());
    let server = server(&data);
    let first = first_repo(dir.path(), &data, &server);
    delete(&data);
    create_again(&data);
    // The second repo's own history, then a compaction that keeps no
    // transaction: only the checkpoint says what the refs are, and whose.
    let work = worktree(dir.path(), "second");
    let url = server
        .url("/alice/tmp.git")
        .replace("http://", &format!("http://alice:{}@", first.alice));
    git_ok(&work, &["push", "-q", &url, "HEAD:main"]);
    let second = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    // Kept after the checkpoint: every transaction but the first repo's
    // `born` row (its other rows, then the second's), or none.
    let txns = ref_log_txns(&data);
    let all_but_the_first = (txns - 1).to_string();
    let mut server = server;
    for keep in [all_but_the_first.as_str(), "0"] {
        let compacted = run_vole(&data, &["log", "compact", "--keep", keep]);
        assert!(compacted.status.success(), "{}", text(&compacted.stderr));
        server.stop();
        server = self::server(&data);
        let branches = call(&server, "GET", "/alice/tmp/-/branches", None, None);
        assert!(branches.text().contains("main"), "{}", branches.text());
        let activity = call(
            &server,
            "GET",
            "/api/v1/repos/alice/tmp/activity",
            None,
            None,
        );
        // (A checkpoint keeps values, not moves: with nothing kept, the
        // activity starts empty.)
        assert!(
            (keep == "0" || activity.text().contains(&second))
                && !activity.text().contains(&first.commit),
            "keep {keep}: the activity after a compaction is not the second repo's: {}",
            activity.text()
        );
        let refs = git(dir.path(), &["ls-remote", &server.url("/alice/tmp.git")]);
        assert!(
            text(&refs.stdout).contains(&second),
            "{}",
            text(&refs.stdout)
        );
        assert!(!text(&refs.stdout).contains(&first.commit));
        // The restart reconciled nothing: the checkpoint (and the rows
        // kept) told the ref state the second repo's refs.
        let reconciled = server.log.wait_for(
            &["recording it as reconciled"],
            std::time::Duration::from_millis(300),
        );
        assert!(
            reconciled.is_none(),
            "keep {keep}: the restart after a compaction reconciled refs: {reconciled:?}"
        );
    }
    server.stop();
    let checked = run_vole(&data, &["check"]);
    assert!(
        checked.status.success(),
        "{}{}",
        text(&checked.stdout),
        text(&checked.stderr)
    );
}

/// Transactions in the ref log now.
fn ref_log_txns(data: &Path) -> u64 {
    use vole_hooks::RefMove;
    use vole_log::RecordKind;
    let path = data.join("log").join(RefMove::FILE_NAME);
    let file = std::fs::File::open(&path).unwrap();
    vole_log::replay::<RefMove, _>(&path, file, |_| {})
        .unwrap()
        .txns
}

#[test]
fn a_repo_copied_by_hand_in_the_data_dir_is_another_repo_with_an_acl_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_dir(dir.path());
    let alice = user_token(&data, "alice", false, "admin", &[]);
    let made = run_vole(&data, &["repo", "create", "alice/secret", "--private"]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let server = server(&data);
    assert_eq!(
        call(&server, "GET", "/alice/secret", None, None).status,
        404
    );
    server.stop();
    // A copy whose name sorts before the original's, and one after.
    for copy in ["a-copy", "z-copy"] {
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(data.join("repos/alice/secret.git"))
            .arg(data.join(format!("repos/alice/{copy}.git")))
            .status()
            .unwrap();
        assert!(copied.success());
    }
    let server = self::server(&data);
    // Each keeps the ACL it had: private, all of them.
    for repo in ["secret", "a-copy", "z-copy"] {
        assert_eq!(
            call(&server, "GET", &format!("/alice/{repo}"), None, None).status,
            404,
            "alice/{repo} is no longer private after the copy"
        );
    }
    // And they no longer share it.
    let public = call(
        &server,
        "PUT",
        "/api/v1/repos/alice/a-copy/acl",
        Some(&alice),
        Some(&json!({"version": 1, "visibility": "public", "members": []})),
    );
    assert_eq!(public.status, 200, "{}", public.text());
    assert_eq!(
        call(&server, "GET", "/alice/a-copy", None, None).status,
        200
    );
    for repo in ["secret", "z-copy"] {
        assert_eq!(
            call(&server, "GET", &format!("/alice/{repo}"), None, None).status,
            404,
            "making a copy public made alice/{repo} public: they share one ACL"
        );
    }
    let id = |repo: &str| {
        std::fs::read_to_string(data.join(format!("repos/alice/{repo}.git/vole-incarnation")))
            .unwrap()
    };
    assert_ne!(id("secret"), id("a-copy"));
    assert_ne!(id("secret"), id("z-copy"));
}

#[test]
fn a_push_decided_for_a_repo_that_is_re_created_while_its_body_arrives_goes_nowhere() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let data = data_dir(dir.path());
    let made = run_vole(&data, &["repo", "create", "alice/tmp"]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    // A push's body, made by hand: main created at a commit of its own.
    let work = worktree(dir.path(), "work");
    let head = git_ok(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let mut pack = git_command(&work);
    pack.args(["pack-objects", "--stdout", "-q", "--revs"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = pack.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{head}\n").as_bytes())
        .unwrap();
    let pack = child.wait_with_output().unwrap().stdout;
    let zero = "0".repeat(40);
    let command = format!("{zero} {head} refs/heads/main\0report-status\n");
    let mut body = format!("{:04x}{command}0000", command.len() + 4).into_bytes();
    body.extend_from_slice(&pack);
    // The request decided (and half its body sent) for the first repo...
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    write!(
        stream,
        "POST /alice/tmp.git/git-receive-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-receive-pack-request\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    let half = body.len() / 2;
    stream.write_all(&body[..half]).unwrap();
    stream.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // ...the repo deleted and created again before the rest arrives.
    delete(&data);
    create_again(&data);
    stream.write_all(&body[half..]).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response);
    assert!(
        response.starts_with("HTTP/1.1 404"),
        "a push decided for the deleted repo ran in the new one: {response}"
    );
    assert_eq!(
        ref_value(&data.join("repos/alice/tmp.git"), "refs/heads/main"),
        None,
        "the new repo got the push meant for the first"
    );
}
