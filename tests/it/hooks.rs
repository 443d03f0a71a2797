//! Every ref move recorded: real pushes through the hooks into the log,
//! the pre-receive rules, an unreachable server, reconciliation at start,
//! recovery of a prepared transaction, kill -9, compaction, and the
//! activity API.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use vole_hooks::{Phase, RefMove};
use vole_log::Log;

use crate::support::*;

/// (seq, ref, old, new) of the ref log's committed rows.
fn committed(forge: &Forge) -> Vec<(u64, String, Option<String>, Option<String>)> {
    forge
        .ref_log_rows()
        .into_iter()
        .filter(|r| r["phase"] == "committed")
        .map(|r| {
            (
                r["seq"].as_u64().unwrap(),
                r["ref"].as_str().unwrap().to_string(),
                r["old"].as_str().map(str::to_string),
                r["new"].as_str().map(str::to_string),
            )
        })
        .collect()
}

fn head(dir: &Path, rev: &str) -> String {
    git_ok(dir, &["rev-parse", rev]).trim().to_string()
}

#[test]
fn the_log_holds_exactly_the_pushed_moves() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    let url = forge.url("/alice/repo.git");
    let c1 = head(&work, "HEAD");
    git_ok(&work, &["push", &url, "HEAD:main"]); // create
    let c2 = commit_file(&work, "a.txt", b"a");
    git_ok(&work, &["push", &url, "HEAD:main"]); // fast-forward
    git_ok(&work, &["push", &url, "HEAD:refs/heads/topic"]); // create topic
    git_ok(
        &work,
        &["push", "--force", &url, &format!("{c1}:refs/heads/topic")],
    ); // force
    git_ok(&work, &["push", &url, ":refs/heads/topic"]); // delete
    git_ok(&work, &["tag", "v1", &c1]);
    git_ok(&work, &["push", &url, "v1"]); // tag
    let c3 = commit_file(&work, "b.txt", b"b");
    git_ok(
        &work,
        &[
            "push",
            "--atomic",
            &url,
            "HEAD:main",
            "HEAD:refs/heads/x",
            "HEAD:refs/heads/y",
        ],
    );

    let rows = committed(&forge);
    let moves: Vec<(String, Option<String>, Option<String>)> = rows
        .iter()
        .map(|(_, r, o, n)| (r.clone(), o.clone(), n.clone()))
        .collect();
    let s = |x: &str| Some(x.to_string());
    assert_eq!(
        moves,
        vec![
            ("refs/heads/main".into(), None, s(&c1)),
            ("refs/heads/main".into(), s(&c1), s(&c2)),
            ("refs/heads/topic".into(), None, s(&c2)),
            ("refs/heads/topic".into(), s(&c2), s(&c1)),
            ("refs/heads/topic".into(), s(&c1), None),
            ("refs/tags/v1".into(), None, s(&c1)),
            ("refs/heads/main".into(), s(&c2), s(&c3)),
            ("refs/heads/x".into(), None, s(&c3)),
            ("refs/heads/y".into(), None, s(&c3)),
        ]
    );
    // The atomic push is one transaction: one sequence for its three moves.
    let atomic: Vec<u64> = rows[6..].iter().map(|(seq, ..)| *seq).collect();
    assert!(
        atomic.iter().all(|s| *s == atomic[0]),
        "atomic push split over {atomic:?}"
    );
    // Every committed move was prepared (durably) first, in the same push.
    let all = forge.ref_log_rows();
    for row in all.iter().filter(|r| r["phase"] == "committed") {
        let prepared = all.iter().find(|p| {
            p["phase"] == "prepared" && p["push_id"] == row["push_id"] && p["ref"] == row["ref"]
        });
        let prepared = prepared.unwrap_or_else(|| panic!("no prepared record for {row}"));
        assert!(prepared["seq"].as_u64() < row["seq"].as_u64());
        assert_eq!(row["actor"], "anonymous");
        assert_eq!(row["client"], "127.0.0.1");
    }
}

#[test]
fn pushes_to_refs_meta_and_non_fast_forwards_to_protected_branches_are_refused() {
    let forge = Forge::start(
        &["alice/repo"],
        &["--anonymous-push", "--protected-branch", "main"],
    );
    let work = worktree(&forge.dir, "work");
    let url = forge.url("/alice/repo.git");
    git_ok(&work, &["push", &url, "HEAD:main"]);
    let before = forge.ref_log_rows().len();

    let meta = git(&work, &["push", &url, "HEAD:refs/meta/shards/00"]);
    assert!(!meta.status.success());
    assert!(
        text(&meta.stderr).contains("remote: vole: refs/meta/shards/00: refs/meta/* holds the forge's metadata and is written only by the server"),
        "{}",
        text(&meta.stderr)
    );
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/meta/shards/00"),
        None
    );

    let main = head(&work, "HEAD");
    git_ok(&work, &["commit", "-q", "--amend", "-m", "rewritten"]);
    let forced = git(&work, &["push", "--force", &url, "HEAD:main"]);
    assert!(!forced.status.success());
    assert!(
        text(&forced.stderr)
            .contains("branch main is protected: only fast-forward pushes are allowed"),
        "{}",
        text(&forced.stderr)
    );
    let deleted = git(&work, &["push", &url, ":main"]);
    assert!(!deleted.status.success());
    assert!(
        text(&deleted.stderr).contains("branch main is protected: it cannot be deleted"),
        "{}",
        text(&deleted.stderr)
    );
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main"),
        Some(main.clone())
    );
    assert_eq!(
        forge.ref_log_rows().len(),
        before,
        "a refused push reached the log"
    );

    // Fast-forwards and other branches are fine.
    git_ok(&work, &["reset", "-q", "--hard", &main]);
    commit_file(&work, "ff.txt", b"ff");
    git_ok(&work, &["push", &url, "HEAD:main"]);
    git_ok(
        &work,
        &[
            "push",
            "--force",
            &url,
            &format!("{main}:refs/heads/scratch"),
        ],
    );
}

#[test]
fn when_the_hook_cannot_reach_the_server_the_push_fails_and_nothing_moves() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    // The repo's own pre-receive hook runs after vole's checks passed; this
    // one takes the control socket away, so the reference-transaction hook
    // that follows cannot reach the server.
    let hook = forge.bare("alice/repo").join("hooks/pre-receive");
    write_script(
        &hook,
        &format!(
            "#!/bin/sh\nrm -f {}\nexit 0\n",
            forge.data.join("run/vole.sock").display()
        ),
    );
    let work = worktree(&forge.dir, "work");
    let pushed = git(&work, &["push", &forge.url("/alice/repo.git"), "HEAD:main"]);
    assert!(
        !pushed.status.success(),
        "the push succeeded without being recorded"
    );
    assert!(
        text(&pushed.stderr).contains("remote: git could not process this request: vole: the ref update could not be recorded, so nothing was changed"),
        "{}",
        text(&pushed.stderr)
    );
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main"),
        None,
        "a ref moved without a durable record"
    );
}

#[test]
fn refs_moved_outside_vole_are_reconciled_at_start_and_only_once() {
    let mut forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    git_ok(&work, &["push", &forge.url("/alice/repo.git"), "HEAD:main"]);
    git_ok(
        &work,
        &[
            "push",
            &forge.url("/alice/repo.git"),
            "HEAD:refs/heads/side",
        ],
    );
    let c1 = head(&work, "HEAD");
    let c2 = commit_file(&work, "x.txt", b"x");
    git_ok(
        &work,
        &[
            "push",
            &forge.url("/alice/repo.git"),
            "HEAD:refs/heads/side",
        ],
    );
    forge.take_server().unwrap().stop();

    // Behind vole's back: move main, delete side, add a tag; and touch
    // refs/meta, which is the server's own and never reconciled. None of
    // them leaves a ref as a lost write would (empty, or back at the last
    // committed move's old value: side's was c1), so none is restored.
    git_ok(
        &forge.bare("alice/repo"),
        &["update-ref", "refs/heads/main", &c2],
    );
    git_ok(
        &forge.bare("alice/repo"),
        &["update-ref", "-d", "refs/heads/side"],
    );
    git_ok(
        &forge.bare("alice/repo"),
        &["update-ref", "refs/tags/manual", &c1],
    );
    git_ok(
        &forge.bare("alice/repo"),
        &["update-ref", "refs/meta/shards/00", &c1],
    );
    forge.restart();
    let log = forge.server().log.clone();
    assert!(
        log.wait_for(&["reconciled=3"], Duration::from_secs(5))
            .is_some(),
        "{}",
        log.all()
    );
    assert!(
        log.wait_for(
            &["ref moved outside vole", "refs/heads/main"],
            Duration::from_secs(1)
        )
        .is_some()
    );
    let reconciled: Vec<(String, Option<String>, Option<String>)> = forge
        .ref_log_rows()
        .into_iter()
        .filter(|r| r["phase"] == "reconciled")
        .map(|r| {
            (
                r["ref"].as_str().unwrap().into(),
                r["old"].as_str().map(Into::into),
                r["new"].as_str().map(Into::into),
            )
        })
        .collect();
    assert_eq!(
        reconciled,
        vec![
            ("refs/heads/main".into(), Some(c1.clone()), Some(c2.clone())),
            ("refs/heads/side".into(), Some(c2.clone()), None),
            ("refs/tags/manual".into(), None, Some(c1.clone())),
        ]
    );
    // A restart without such a move reconciles nothing.
    forge.restart();
    assert!(
        forge
            .server()
            .log
            .wait_for(&["reconciled=0"], Duration::from_secs(5))
            .is_some(),
        "{}",
        forge.server().log.all()
    );

    // Still true after the log is compacted down to a checkpoint.
    let compacted = run_vole(&forge.data, &["log", "compact", "--keep", "0"]);
    assert!(compacted.status.success(), "{}", text(&compacted.stderr));
    forge.restart();
    assert!(
        forge
            .server()
            .log
            .wait_for(&["reconciled=0"], Duration::from_secs(5))
            .is_some(),
        "after compaction the checkpoint must stand in for the history: {}",
        forge.server().log.all()
    );
}

#[test]
fn committed_ref_writes_the_disk_lost_are_restored_at_start_and_other_moves_reconciled() {
    let mut forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    let c1 = head(&work, "HEAD");
    for branch in ["main", "side", "third"] {
        git_ok(
            &work,
            &[
                "push",
                &forge.url("/alice/repo.git"),
                &format!("HEAD:{branch}"),
            ],
        );
    }
    let c2 = commit_file(&work, "two.txt", b"2");
    for branch in ["main", "side", "third"] {
        git_ok(
            &work,
            &[
                "push",
                &forge.url("/alice/repo.git"),
                &format!("HEAD:{branch}"),
            ],
        );
    }
    // A creation in a new directory, and a commit that only `other` holds.
    git_ok(
        &work,
        &[
            "push",
            &forge.url("/alice/repo.git"),
            "HEAD:refs/heads/fresh/one",
        ],
    );
    let c3 = commit_file(&work, "three.txt", b"3");
    git_ok(
        &work,
        &[
            "push",
            &forge.url("/alice/repo.git"),
            "HEAD:refs/heads/other",
        ],
    );
    forge.take_server().unwrap().stop();

    // What a power cut leaves of writes that were never synced, behind
    // vole's back: main's file empty, side back at its old value, fresh/one
    // gone with its directory (a lost creation); and third moved to a third
    // value, which no lost write explains.
    let bare = forge.bare("alice/repo");
    std::fs::write(bare.join("refs/heads/main"), b"").unwrap();
    std::fs::write(bare.join("refs/heads/side"), format!("{c1}\n")).unwrap();
    std::fs::remove_dir_all(bare.join("refs/heads/fresh")).unwrap();
    std::fs::write(bare.join("refs/heads/third"), format!("{c3}\n")).unwrap();
    forge.restart();
    let log = forge.server().log.clone();
    assert!(
        log.wait_for(&["restored=3", "reconciled=1"], Duration::from_secs(5))
            .is_some(),
        "{}",
        log.all()
    );
    for (ref_name, disk) in [
        ("refs/heads/main", "unreadable"),
        ("refs/heads/side", c1.as_str()),
        (
            "refs/heads/fresh/one",
            "0000000000000000000000000000000000000000",
        ),
    ] {
        assert!(
            log.wait_for(
                &["committed ref write was lost", ref_name, disk],
                Duration::from_secs(1)
            )
            .is_some(),
            "no warning for {ref_name}: {}",
            log.all()
        );
    }
    assert_eq!(ref_value(&bare, "refs/heads/main"), Some(c2.clone()));
    assert_eq!(ref_value(&bare, "refs/heads/side"), Some(c2.clone()));
    assert_eq!(ref_value(&bare, "refs/heads/fresh/one"), Some(c2.clone()));
    assert_eq!(ref_value(&bare, "refs/heads/third"), Some(c3.clone()));
    let fsck = git(&bare, &["fsck", "--no-dangling"]);
    assert!(fsck.status.success(), "{}", text(&fsck.stderr));

    let rows = forge.ref_log_rows();
    let phase_rows = |phase: &str| -> Vec<(String, Option<String>, Option<String>)> {
        let mut found: Vec<_> = rows
            .iter()
            .filter(|r| r["phase"] == phase)
            .map(|r| {
                (
                    r["ref"].as_str().unwrap().to_string(),
                    r["old"].as_str().map(Into::into),
                    r["new"].as_str().map(Into::into),
                )
            })
            .collect();
        found.sort();
        found
    };
    assert_eq!(
        phase_rows("restored"),
        vec![
            ("refs/heads/fresh/one".into(), None, Some(c2.clone())),
            ("refs/heads/main".into(), None, Some(c2.clone())),
            ("refs/heads/side".into(), Some(c1.clone()), Some(c2.clone())),
        ]
    );
    assert_eq!(
        phase_rows("reconciled"),
        vec![(
            "refs/heads/third".into(),
            Some(c2.clone()),
            Some(c3.clone())
        )]
    );

    // Restored for good: the next start finds nothing to do, and a push
    // on top of a restored ref works.
    forge.restart();
    assert!(
        forge
            .server()
            .log
            .wait_for(&["restored=0", "reconciled=0"], Duration::from_secs(5))
            .is_some(),
        "{}",
        forge.server().log.all()
    );
    let c4 = commit_file(&work, "four.txt", b"4");
    git_ok(&work, &["push", &forge.url("/alice/repo.git"), "HEAD:main"]);
    assert_eq!(ref_value(&bare, "refs/heads/main"), Some(c4));
}

#[test]
fn an_unreadable_ref_is_restored_from_the_log_even_after_a_compaction() {
    let mut forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    git_ok(&work, &["push", &forge.url("/alice/repo.git"), "HEAD:main"]);
    let c1 = head(&work, "HEAD");
    // A compaction keeps values, not moves: the last committed move of
    // main is gone from the log, its value is in the checkpoint.
    let compacted = run_vole(&forge.data, &["log", "compact", "--keep", "0"]);
    assert!(compacted.status.success(), "{}", text(&compacted.stderr));
    forge.take_server().unwrap().stop();
    std::fs::write(forge.bare("alice/repo").join("refs/heads/main"), b"").unwrap();
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main"),
        None,
        "anti-vacuity"
    );
    forge.restart();
    assert!(
        forge
            .server()
            .log
            .wait_for(&["restored=1", "reconciled=0"], Duration::from_secs(5))
            .is_some(),
        "{}",
        forge.server().log.all()
    );
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main"),
        Some(c1)
    );
}

#[test]
fn pushes_keep_the_pack_count_bounded_without_gits_auto_gc() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    // Each push through vole writes one pack; past 32 vole repacks.
    for i in 0..40 {
        commit_file(&work, "n.txt", format!("{i}").as_bytes());
        git_ok(
            &work,
            &["push", "-q", &forge.url("/alice/repo.git"), "HEAD:main"],
        );
    }
    let packs = || {
        files_in(&forge.bare("alice/repo").join("objects/pack"))
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == "pack"))
            .count()
    };
    assert!(
        eventually(Duration::from_secs(20), || packs() <= 32),
        "{} packs after 40 pushes: {}",
        packs(),
        forge.server().log.all()
    );
    // git's own gc never ran (it would leave gc.pid or gc.log).
    assert!(
        !forge.bare("alice/repo").join("gc.pid").exists()
            && !forge.bare("alice/repo").join("gc.log").exists()
    );
    let fsck = git(&forge.bare("alice/repo"), &["fsck", "--no-dangling"]);
    assert!(fsck.status.success(), "{}", text(&fsck.stderr));
    assert_eq!(
        ref_value(&forge.bare("alice/repo"), "refs/heads/main"),
        Some(head(&work, "HEAD"))
    );
}

#[test]
fn a_lost_ref_write_whose_objects_are_gone_is_reconciled_not_restored() {
    let mut forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    git_ok(&work, &["push", &forge.url("/alice/repo.git"), "HEAD:main"]);
    let c1 = head(&work, "HEAD");
    let packs_before: Vec<PathBuf> = files_in(&forge.bare("alice/repo").join("objects/pack"));
    let c2 = commit_file(&work, "two.txt", b"2");
    git_ok(&work, &["push", &forge.url("/alice/repo.git"), "HEAD:main"]);
    forge.take_server().unwrap().stop();
    // The ref back at its old value, as a lost write leaves it, but the
    // pack that brought c2 gone too: restoring would point main at
    // nothing.
    let bare = forge.bare("alice/repo");
    std::fs::write(bare.join("refs/heads/main"), format!("{c1}\n")).unwrap();
    let new_packs: Vec<PathBuf> = files_in(&bare.join("objects/pack"))
        .into_iter()
        .filter(|p| !packs_before.contains(p))
        .collect();
    assert!(
        !new_packs.is_empty(),
        "anti-vacuity: the second push wrote a pack"
    );
    for pack in new_packs {
        std::fs::remove_file(pack).unwrap();
    }
    assert!(
        !git(&bare, &["cat-file", "-e", &c2]).status.success(),
        "anti-vacuity: c2 must be gone"
    );
    forge.restart();
    let log = forge.server().log.clone();
    assert!(
        log.wait_for(&["restored=0", "reconciled=1"], Duration::from_secs(5))
            .is_some(),
        "{}",
        log.all()
    );
    assert_eq!(ref_value(&bare, "refs/heads/main"), Some(c1));
}

#[test]
fn a_prepared_transaction_left_by_a_crash_is_resolved_from_the_disk() {
    let mut forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    git_ok(&work, &["push", &forge.url("/alice/repo.git"), "HEAD:main"]);
    let c1 = head(&work, "HEAD");
    let c2 = commit_file(&work, "y.txt", b"y");
    forge.take_server().unwrap().stop();
    // A crash between prepared and committed: the prepared record is in the
    // log, git moved main, no outcome was written. And one that git never
    // carried out.
    git_ok(
        &forge.bare("alice/repo"),
        &[
            "fetch",
            "-q",
            work.to_str().unwrap(),
            "HEAD:refs/heads/main",
        ],
    );
    {
        let (log, _) = Log::<RefMove>::open(&forge.data.join("log"), |_| {}).unwrap();
        let prepared = |r: &str, new: &str, push_id: u64| RefMove {
            time_ns: vole_log::now_ns(),
            repo: "alice/repo".into(),
            ref_name: r.into(),
            old: Some(c1.clone()),
            new: Some(new.into()),
            actor: "anonymous".into(),
            client: "127.0.0.1".into(),
            push_id,
            phase: Phase::Prepared,
        };
        log.commit(&[prepared("refs/heads/main", &c2, 77)]).unwrap();
        log.commit(&[prepared("refs/heads/never", &c2, 78)])
            .unwrap();
    }
    forge.restart();
    let server_log = forge.server().log.clone();
    assert!(
        server_log
            .wait_for(&["resolved=2"], Duration::from_secs(5))
            .is_some(),
        "{}",
        server_log.all()
    );
    assert!(
        server_log
            .wait_for(
                &["resolved a prepared ref transaction", "committed"],
                Duration::from_secs(1)
            )
            .is_some()
    );
    let rows = forge.ref_log_rows();
    let outcome = |push_id: u64| {
        rows.iter()
            .find(|r| r["push_id"] == push_id && r["phase"] != "prepared")
            .map(|r| r["phase"].as_str().unwrap().to_string())
    };
    assert_eq!(outcome(77).as_deref(), Some("committed"));
    // `never` does not exist on disk, and its prepared old value was c1:
    // neither matches, so it is recorded as reconciled to "absent".
    assert_eq!(outcome(78).as_deref(), Some("reconciled"));
    assert!(
        server_log
            .wait_for(&["reconciled=0"], Duration::from_secs(1))
            .is_some(),
        "{}",
        server_log.all()
    );
}

#[test]
fn a_kill_9_right_after_an_acknowledged_push_loses_no_logged_move() {
    let mut forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    let mut expected = Vec::new();
    for i in 0..5 {
        let c = commit_file(&work, &format!("k{i}.txt"), b"k");
        git_ok(&work, &["push", &forge.url("/alice/repo.git"), "HEAD:main"]);
        expected.push(c);
    }
    let server = forge.take_server().unwrap();
    signal(server.pid(), 9);
    drop(server);
    forge.restart();
    let committed: Vec<String> = committed(&forge)
        .into_iter()
        .filter_map(|(_, _, _, new)| new)
        .collect();
    assert_eq!(
        committed, expected,
        "an acknowledged push is missing from the log after kill -9"
    );
    assert!(
        forge
            .server()
            .log
            .wait_for(&["reconciled=0"], Duration::from_secs(5))
            .is_some()
    );
}

#[test]
fn the_activity_api_lists_recent_moves_newest_first_with_pagination() {
    let forge = Forge::start(&["alice/repo"], &["--anonymous-push"]);
    let work = worktree(&forge.dir, "work");
    let mut pushed = Vec::new();
    for i in 0..5 {
        pushed.push(commit_file(&work, &format!("p{i}.txt"), b"p"));
        git_ok(&work, &["push", &forge.url("/alice/repo.git"), "HEAD:main"]);
    }
    // The first request after the pusher heard "ok" already sees the move.
    let addr = forge.server().addr;
    let page1 = http_get(addr, "/api/v1/repos/alice/repo/activity?per_page=2");
    assert_eq!(page1.status, 200);
    let rows: Vec<Value> = serde_json::from_slice(&page1.body).unwrap();
    let news: Vec<&str> = rows.iter().map(|r| r["new"].as_str().unwrap()).collect();
    assert_eq!(news, vec![pushed[4].as_str(), pushed[3].as_str()]);
    // Who pushed what and when; never the pusher's address or the
    // server's internal ids (the ref log keeps them).
    let row = rows[0].as_object().unwrap();
    let mut fields: Vec<&str> = row.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        ["action", "actor", "new", "old", "ref", "time"],
        "{row:?}"
    );
    assert_eq!(row["action"], "updated");
    assert!(!page1.text().contains("127.0.0.1"), "{}", page1.text());
    let link = page1.header("link").unwrap().to_string();
    assert!(link.contains("page=2&per_page=2>; rel=\"next\""), "{link}");
    assert!(link.contains("page=3&per_page=2>; rel=\"last\""), "{link}");
    let page3 = http_get(addr, "/api/v1/repos/alice/repo/activity?per_page=2&page=3");
    let rows: Vec<Value> = serde_json::from_slice(&page3.body).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["new"], pushed[0].as_str());
    assert!(page3.header("link").unwrap().contains("rel=\"prev\""));
    // A missing repo: a 404, to the anonymous too (as Gitea's API).
    assert_eq!(
        http_get(addr, "/api/v1/repos/alice/nope/activity").status,
        404
    );
    assert_eq!(
        http_get(addr, "/api/v1/repos/alice/repo/activity?page=10001").status,
        400
    );
}
