//! Merging pull requests through the API, against a real server and real
//! `git`: a merge commit with both parents (and its refusal for a stale
//! head, a reader, a protected target), fast-forward only (refused once
//! the target moved on), a squash authored by the pull request's author,
//! a conflict listing its paths with nothing moved; and a kill -9 at the
//! failpoint between the target's move and the metadata write, after
//! which the start marks the pull request merged.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;
use crate::threads_api::Caller;

/// alice owns alice/repo, carol may write to it, bob reads it; a work
/// tree with `main` pushed.
struct Fixture {
    forge: Forge,
    work: std::path::PathBuf,
    tokens: Vec<(String, String)>,
}

impl Fixture {
    fn new(env: &[(&str, &str)]) -> Fixture {
        let mut forge = Forge::new(&["alice/repo"]);
        let mut tokens = Vec::new();
        for user in ["alice", "bob", "carol"] {
            tokens.push((
                user.to_string(),
                user_token(&forge.data, user, false, "admin", &[]),
            ));
            set_password(&forge.data, user, PASSWORD);
        }
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        forge.restart_built(|mut b| {
            for (k, v) in &env {
                b = b.env(k, v);
            }
            b
        });
        let fixture = Fixture {
            work: worktree(&forge.dir, "work"),
            forge,
            tokens,
        };
        let acl = json!({"visibility": "public", "members": [{"name": "carol", "role": "write"}]});
        assert_eq!(
            fixture.caller("alice").call("PUT", "/acl", Some(acl)).0,
            200
        );
        fixture.push("main");
        fixture
    }

    fn caller(&self, user: &str) -> Caller {
        let token = &self.tokens.iter().find(|(u, _)| u == user).unwrap().1;
        Caller {
            addr: self.forge.server().addr,
            auth: basic(user, token),
        }
    }

    fn push(&self, branch: &str) {
        let (_, token) = &self.tokens[0];
        let url = format!(
            "http://alice:{token}@{}/alice/repo.git",
            self.forge.server().addr
        );
        git_ok(
            &self.work,
            &["push", "-q", &url, &format!("{branch}:{branch}")],
        );
    }

    /// A branch `name` from `from` with `files` committed, pushed; its head.
    fn branch(&self, name: &str, from: &str, files: &[(&str, &str)]) -> String {
        git_ok(&self.work, &["checkout", "-q", "-b", name, from]);
        let mut head = String::new();
        for (file, content) in files {
            head = commit_file(&self.work, file, content.as_bytes());
        }
        git_ok(&self.work, &["checkout", "-q", "main"]);
        self.push(name);
        head
    }

    /// A pull request from `source` into main, opened by `user`.
    fn open(&self, user: &str, source: &str) -> u64 {
        let new = json!({"title": format!("Land {source}"), "head": source, "base": "main"});
        let (status, change) = self.caller(user).call("POST", "/pulls", Some(new));
        assert_eq!(status, 201, "{change}");
        change["number"].as_u64().unwrap()
    }

    /// The work tree's main brought to the server's.
    fn pull(&self) {
        let url = format!("http://{}/alice/repo.git", self.forge.server().addr);
        git_ok(&self.work, &["pull", "-q", "--ff-only", &url, "main"]);
    }

    fn main(&self) -> String {
        ref_value(&self.forge.bare("alice/repo"), "refs/heads/main").unwrap()
    }
}

const PASSWORD: &str = "correct horse battery";

/// Loose objects in `bare` (`git count-objects`).
fn loose_objects(bare: &Path) -> u64 {
    let counted = git_ok(bare, &["count-objects", "-v"]);
    counted
        .lines()
        .find_map(|l| l.strip_prefix("count: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

fn parents(bare: &Path, commit: &str) -> Vec<String> {
    git_ok(bare, &["rev-list", "--parents", "-n1", commit])
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect()
}

#[test]
fn each_method_merges_on_the_server_and_each_refusal_moves_nothing() {
    let fx = Fixture::new(&[]);
    let bare = fx.forge.bare("alice/repo");
    let (bob, carol) = (fx.caller("bob"), fx.caller("carol"));
    let feature = fx.branch("feature", "main", &[("b.txt", "b\n"), ("c.txt", "c\n")]);
    let number = fx.open("bob", "feature");
    let merge = |caller: &Caller, body: Value| {
        caller.call("POST", &format!("/pulls/{number}/merge"), Some(body))
    };
    let before = fx.main();

    // A reader may not merge; a stale head is refused; neither moves main.
    let (status, body) = merge(&bob, json!({"Do": "merge"}));
    assert_eq!(status, 403, "{body}");
    let (status, body) = merge(&carol, json!({"Do": "merge", "head_commit_id": before}));
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("moved"), "{body}");
    let (status, body) = merge(&carol, json!({"Do": "rebase"}));
    assert_eq!(status, 405, "{body}");
    assert_eq!(fx.main(), before, "a refused merge moved main");
    assert_eq!(
        carol.call("GET", &format!("/pulls/{number}/merge"), None).0,
        404
    );

    let (status, merged) = merge(&carol, json!({"do": "merge", "head_commit_id": feature}));
    assert_eq!(status, 200, "{merged}");
    let tip = fx.main();
    assert_eq!(
        (merged["state"].as_str(), merged["merged"].as_bool()),
        (Some("closed"), Some(true))
    );
    assert_eq!(merged["merge_commit_sha"].as_str(), Some(tip.as_str()));
    assert_eq!(parents(&bare, &tip), vec![before.clone(), feature.clone()]);
    let committer = git_ok(&bare, &["log", "-1", "--format=%cn <%ce>|%s", &tip]);
    assert!(
        committer.starts_with("carol <carol@example.org>|Merge pull request 'Land feature' (#"),
        "{committer}"
    );
    assert_eq!(
        carol.call("GET", &format!("/pulls/{number}/merge"), None).0,
        204
    );
    let (status, body) = merge(&carol, json!({"Do": "merge"}));
    assert_eq!(status, 405, "a second merge: {body}");
    // The move is in the ref log, as a push's, after its intent.
    let rows = fx.forge.ref_log_rows();
    let phases: Vec<&str> = rows
        .iter()
        .filter(|r| r["new"].as_str() == Some(tip.as_str()))
        .map(|r| r["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        ["merge_intent", "prepared", "committed"],
        "{rows:?}"
    );

    // Fast-forward only: refused once main has moved past the branch's
    // base, then taken for a branch from the new main.
    fx.branch("stale", &before, &[("d.txt", "d\n")]);
    let stale_pr = fx.open("carol", "stale");
    let (status, body) = carol.call(
        "POST",
        &format!("/pulls/{stale_pr}/merge"),
        Some(json!({"Do": "fast-forward-only"})),
    );
    assert_eq!(status, 405, "{body}");
    assert!(body.to_string().contains("fast-forward"), "{body}");
    fx.pull();
    let ff = fx.branch("ff", "main", &[("e.txt", "e\n")]);
    let ff_pr = fx.open("carol", "ff");
    let (status, body) = carol.call(
        "POST",
        &format!("/pulls/{ff_pr}/merge"),
        Some(json!({"Do": "fast-forward-only"})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        fx.main(),
        ff,
        "fast-forward did not put main at the source's head"
    );

    // Squash: one commit on main, authored by the pull request's author.
    fx.pull();
    fx.branch("sq", "main", &[("f.txt", "f\n"), ("g.txt", "g\n")]);
    let sq_pr = fx.open("bob", "sq");
    let before_squash = fx.main();
    let (status, body) = carol.call(
        "POST",
        &format!("/pulls/{sq_pr}/merge"),
        Some(json!({"Do": "squash"})),
    );
    assert_eq!(status, 200, "{body}");
    let squashed = fx.main();
    assert_eq!(parents(&bare, &squashed), vec![before_squash]);
    let shown = git_ok(
        &bare,
        &["log", "-1", "--format=%an <%ae>|%cn|%B", &squashed],
    );
    assert!(
        shown.starts_with(&format!("bob <bob@example.org>|carol|Land sq (#{sq_pr})")),
        "{shown}"
    );
    assert!(shown.contains("* change f.txt\n* change g.txt"), "{shown}");
    let files = git_ok(&bare, &["ls-tree", "--name-only", &squashed]);
    assert!(
        files.contains("f.txt") && files.contains("g.txt"),
        "{files}"
    );

    // A conflict lists its paths; nothing moves.
    fx.pull();
    commit_file(&fx.work, "README.md", b"main's line\n");
    fx.push("main");
    fx.branch("clash", "main~1", &[("README.md", "the branch's line\n")]);
    let clash_pr = fx.open("carol", "clash");
    let before_clash = fx.main();
    let (status, body) = carol.call(
        "POST",
        &format!("/pulls/{clash_pr}/merge"),
        Some(json!({"Do": "merge"})),
    );
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string().contains("conflicts in: README.md"),
        "{body}"
    );
    assert_eq!(fx.main(), before_clash);

    // A target protected for admins only is not carol's to merge into.
    let settings = json!({"version": 0, "default_branch": "main", "protected_branches": ["main"], "protected_admins_only": true});
    assert_eq!(
        fx.caller("alice")
            .call("PUT", "/settings", Some(settings))
            .0,
        200
    );
    let (status, body) = carol.call(
        "POST",
        &format!("/pulls/{stale_pr}/merge"),
        Some(json!({"Do": "merge"})),
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.to_string().contains("protected"), "{body}");
    assert_eq!(fx.main(), before_clash);
}

#[test]
fn a_kill_between_the_targets_move_and_the_metadata_write_is_settled_at_start() {
    for method in ["merge", "fast-forward-only"] {
        let mut fx = Fixture::new(&[("VOLE_FAILPOINT", "merge-after-move")]);
        let head = fx.branch("topic", "main", &[("t.txt", "t\n")]);
        let number = fx.open("carol", "topic");
        let carol = fx.caller("carol");
        let asked = std::thread::spawn(move || {
            carol.call(
                "POST",
                &format!("/pulls/{number}/merge"),
                Some(json!({"Do": method})),
            )
        });
        let stopped = fx
            .forge
            .server()
            .log
            .wait_for(&["failpoint merge-after-move"], Duration::from_secs(30));
        assert!(
            stopped.is_some(),
            "{method}: the failpoint was not reached:\n{}",
            fx.forge.server().log.all()
        );
        let server = fx.forge.take_server().unwrap();
        signal(server.vole_pid(), 9);
        let _ = asked.join();
        drop(server);
        let moved = fx.main();
        assert_ne!(
            moved,
            git_ok(&fx.work, &["rev-parse", "main"]).trim(),
            "{method}: anti-vacuity: main moved"
        );
        if method == "fast-forward-only" {
            assert_eq!(moved, head);
        }
        fx.forge.restart_built(|b| b);
        let (status, change) = fx
            .caller("alice")
            .call("GET", &format!("/pulls/{number}"), None);
        assert_eq!(status, 200, "{change}");
        assert_eq!(
            change["merged"], true,
            "{method}: not settled at start: {change}"
        );
        assert_eq!(change["merge_commit_sha"].as_str(), Some(moved.as_str()));
        let committed = fx.forge.ref_log_rows().into_iter().any(|r| {
            r["phase"] == "committed"
                && r["ref"] == "refs/heads/main"
                && r["new"].as_str() == Some(moved.as_str())
        });
        assert!(committed, "{method}: the log does not hold the move");
        let settled = fx
            .forge
            .ref_log_rows()
            .into_iter()
            .any(|r| r["phase"] == "merge_settled" && r["push_id"].as_u64() == Some(number));
        assert!(
            settled,
            "{method}: the intent was not settled in the log (every start would look at it again)"
        );
    }
}

#[test]
fn a_kill_after_the_intent_but_before_the_move_drops_the_merge_at_start() {
    let mut fx = Fixture::new(&[("VOLE_FAILPOINT", "merge-before-move")]);
    fx.branch("topic", "main", &[("t.txt", "t\n")]);
    let number = fx.open("carol", "topic");
    let before = fx.main();
    let carol = fx.caller("carol");
    let asked = std::thread::spawn(move || {
        carol.call(
            "POST",
            &format!("/pulls/{number}/merge"),
            Some(json!({"Do": "merge"})),
        )
    });
    let stopped = fx
        .forge
        .server()
        .log
        .wait_for(&["failpoint merge-before-move"], Duration::from_secs(30));
    assert!(
        stopped.is_some(),
        "the failpoint was not reached:\n{}",
        fx.forge.server().log.all()
    );
    let server = fx.forge.take_server().unwrap();
    signal(server.vole_pid(), 9);
    let _ = asked.join();
    drop(server);
    let intent = fx
        .forge
        .ref_log_rows()
        .into_iter()
        .any(|r| r["phase"] == "merge_intent");
    assert!(intent, "anti-vacuity: the intent is in the log");
    fx.forge.restart_built(|b| b);
    let (_, change) = fx
        .caller("alice")
        .call("GET", &format!("/pulls/{number}"), None);
    assert_eq!(
        (change["state"].as_str(), change["merged"].as_bool()),
        (Some("open"), Some(false)),
        "a merge that never moved its target was recorded: {change}"
    );
    assert_eq!(fx.main(), before);
    let dropped = fx
        .forge
        .server()
        .log
        .wait_for(&["the merge is dropped"], Duration::from_secs(5));
    assert!(dropped.is_some(), "{}", fx.forge.server().log.all());
    // And it merges afterwards, as if nothing had been tried.
    let (status, body) = fx.caller("carol").call(
        "POST",
        &format!("/pulls/{number}/merge"),
        Some(json!({"Do": "merge"})),
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn the_merge_box_writes_nothing_to_the_repo_and_offers_no_button_a_protection_refuses() {
    let fx = Fixture::new(&[]);
    fx.branch("topic", "main", &[("t.txt", "t\n")]);
    // main moves on too, so the test merge makes a tree neither side has.
    commit_file(&fx.work, "m.txt", b"m\n");
    fx.push("main");
    let number = fx.open("bob", "topic");
    let bare = fx.forge.bare("alice/repo");
    let before = loose_objects(&bare);
    let path = format!("/alice/repo/-/pulls/{number}");
    let mut carol = Browser::at(&fx.forge, 7);
    assert_eq!(carol.sign_in("carol", PASSWORD, "/").status, 303);
    let shown = carol.get(&path).text();
    assert!(
        shown.contains("This pull request can be merged")
            && shown.contains("Merge pull request</button>"),
        "anti-vacuity: the test merge ran and carol, a writer, may merge:\n{shown}"
    );
    assert_eq!(
        loose_objects(&bare),
        before,
        "a page view wrote its test merge's objects into the repo"
    );
    // Protected for admins only: carol sees the box, not the button.
    let settings = json!({"version": 0, "default_branch": "main", "protected_branches": ["main"], "protected_admins_only": true});
    assert_eq!(
        fx.caller("alice")
            .call("PUT", "/settings", Some(settings))
            .0,
        200
    );
    let shown = carol.get(&path).text();
    assert!(
        shown.contains("This pull request can be merged")
            && !shown.contains("Merge pull request</button>"),
        "carol has a merge button the protection refuses:\n{shown}"
    );
    let mut alice = Browser::at(&fx.forge, 8);
    assert_eq!(alice.sign_in("alice", PASSWORD, "/").status, 303);
    assert!(
        alice
            .get(&path)
            .text()
            .contains("Merge pull request</button>"),
        "the admin lost the merge button"
    );
}

#[test]
fn a_merge_message_past_the_kernels_argument_bound_is_written_whole() {
    let fx = Fixture::new(&[]);
    fx.branch("topic", "main", &[("t.txt", "t\n")]);
    let number = fx.open("carol", "topic");
    // Over 128 KiB, the most one argument to a program may hold.
    let long = "a long merge message line\n".repeat(6_000);
    let (status, merged) = fx.caller("carol").call(
        "POST",
        &format!("/pulls/{number}/merge"),
        Some(json!({"Do": "merge", "merge_message_field": long})),
    );
    assert_eq!(status, 200, "{merged}");
    let message = git_ok(
        &fx.forge.bare("alice/repo"),
        &["log", "-1", "--format=%B", "main"],
    );
    assert!(
        message.len() > long.len() && message.contains(long.trim()),
        "the merge commit's message lost the long text ({} bytes)",
        message.len()
    );
}
