//! The API as Gitea's clients see it: gitea-js, a client generated from
//! Gitea's OpenAPI document (npm, pinned in tests/clients), drives vole
//! through a repo's life (`tests/clients/gitea_client.mjs`); and each
//! Gitea object vole answers holds every property the document lists for
//! it, with the document's type. The property lists are read from the
//! type definitions of the installed gitea-js (`dist/index.d.ts`, made
//! from the document), not written here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

fn clients() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// Runs `node tests/clients/SCRIPT ARGS`; its stdout, once it passed.
fn node(script: &str, args: &[&str]) -> String {
    let child = Command::new("node")
        .arg(clients().join(script))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    let out = wait_output(child, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{script} failed:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn gitea_js_files_comments_labels_pages_and_closes_issues_and_merges_a_pull_request() {
    let forge = Forge::start(&[], &[]);
    let token = user_token(&forge.data, "alice", false, "write", &[]);
    let base = forge.url("/");
    let base = base.trim_end_matches('/');
    let made = node("gitea_client.mjs", &[base, &token, "alice", "create"]);
    assert!(made.trim_end().ends_with("ok"), "{made}");
    let clone_url = made.lines().next().unwrap().to_string();
    assert_eq!(clone_url, format!("{base}/alice/tools.git"));
    // Two branches, pushed with git.
    let work = worktree(&forge.dir, "work");
    let url = format!(
        "http://alice:{token}@{}/alice/tools.git",
        forge.server().addr
    );
    git_ok(&work, &["push", "-q", &url, "main"]);
    git_ok(&work, &["checkout", "-q", "-b", "feature"]);
    commit_file(&work, "fast.txt", b"faster\n");
    git_ok(&work, &["push", "-q", &url, "feature"]);
    let printed = node("gitea_client.mjs", &[base, &token, "alice", "work"]);
    assert!(printed.trim_end().ends_with("ok"), "{printed}");
    // The merge is on main, as git sees it.
    git_ok(
        &work,
        &["fetch", "-q", &url, "main:refs/remotes/origin/main"],
    );
    let parents = git_ok(&work, &["rev-list", "--parents", "-n1", "origin/main"]);
    assert_eq!(
        parents.split_whitespace().count(),
        3,
        "main is not a merge commit of two parents: {parents}"
    );
    // The merged pull request keeps the head it merged when its branch
    // moves on; the repo's `updated_at` is its last push.
    let (number, merged_head) = printed
        .lines()
        .find_map(|l| {
            let mut words = l.strip_prefix("pull ")?.split(' ');
            Some((words.next()?.to_string(), words.next()?.to_string()))
        })
        .expect("the client prints the merged pull request");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    git_ok(&work, &["checkout", "-q", "feature"]);
    let later = commit_file(&work, "later.txt", b"later\n");
    git_ok(&work, &["push", "-q", &url, "feature"]);
    let auth = format!("token {token}");
    let get = |path: &str| -> Value {
        let (status, body) = http_request(
            forge.server().addr,
            "GET",
            &format!("/api/v1{path}"),
            &[("Authorization", auth.as_str())],
            None,
        );
        assert_eq!(status, 200, "{path}: {}", text(&body));
        serde_json::from_slice(&body).unwrap()
    };
    let pull = get(&format!("/repos/alice/tools/pulls/{number}"));
    assert_eq!(
        pull["head"]["sha"],
        merged_head.as_str(),
        "a merged pull request's head.sha moved on with its branch"
    );
    assert!(
        pull["merge_base"].as_str().is_some_and(|b| b.len() == 40),
        "a merged pull request names no merge base: {}",
        pull["merge_base"]
    );
    assert_ne!(merged_head, later, "anti-vacuity: the branch moved");
    let repo = get("/repos/alice/tools");
    let (created, updated) = (
        repo["created_at"].as_str().unwrap(),
        repo["updated_at"].as_str().unwrap(),
    );
    assert!(
        updated > created,
        "updated_at {updated} is not the last push, after created_at {created}"
    );
}

/// One property of a gitea-js interface: its TypeScript type, and whether
/// the document gives it as a date-time (which Gitea answers as null
/// when there is none).
#[derive(Debug)]
struct Property {
    ty: String,
    date_time: bool,
}

/// The interfaces of gitea-js's type definitions, by name.
fn interfaces() -> BTreeMap<String, BTreeMap<String, Property>> {
    let path = clients().join("node_modules/gitea-js/dist/index.d.ts");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `npm ci --prefix tests/clients` (scripts/test does)",
            path.display()
        )
    });
    let mut all = BTreeMap::new();
    let mut current: Option<(String, BTreeMap<String, Property>)> = None;
    let mut date_time = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("interface ") {
            if let Some(name) = rest.strip_suffix(" {") {
                current = Some((name.to_string(), BTreeMap::new()));
            }
            continue;
        }
        let Some((name, props)) = current.as_mut() else {
            continue;
        };
        if line == "}" {
            all.insert(name.clone(), std::mem::take(props));
            current = None;
            continue;
        }
        if line.contains("@format date-time") {
            date_time = true;
        }
        if let Some((prop, ty)) = line.split_once("?: ").or_else(|| line.split_once(": "))
            && let Some(ty) = ty.strip_suffix(';')
            && !prop.contains(' ')
        {
            props.insert(
                prop.to_string(),
                Property {
                    ty: ty.to_string(),
                    date_time,
                },
            );
            date_time = false;
        }
    }
    all
}

/// Strings Gitea answers as null when there is none (pointers in its Go
/// structs): a pull request's merge commit, and a content's target,
/// encoding, content, download and submodule URLs.
const NULL_WHEN_NONE: &[&str] = &[
    "merge_commit_sha",
    "submodule_git_url",
    "target",
    "encoding",
    "content",
    "download_url",
];

/// Every property `kind` lists is in `object`, with its type (or null
/// where that is how Gitea answers none: an object, a time); returns how
/// many were checked.
fn check_shape(
    kind: &str,
    object: &Value,
    all: &BTreeMap<String, BTreeMap<String, Property>>,
) -> usize {
    let props = all
        .get(kind)
        .unwrap_or_else(|| panic!("gitea-js has no interface {kind}"));
    assert!(
        !props.is_empty(),
        "gitea-js lists no property of {kind}: the type definitions were not read"
    );
    for (name, prop) in props {
        let value = object
            .get(name)
            .unwrap_or_else(|| panic!("{kind}.{name} ({}) is missing from {object:#}", prop.ty));
        let ty = prop.ty.as_str();
        let object_type = ty.starts_with(|c: char| c.is_ascii_uppercase())
            && !ty.ends_with("[]")
            && ty != "StateType"
            && !ty.starts_with("Record<");
        let ok = match value {
            // Gitea answers null there too (a pointer in its Go struct).
            Value::Null => object_type || prop.date_time || NULL_WHEN_NONE.contains(&name.as_str()),
            Value::String(_) => ty == "string" || ty == "StateType" || ty.starts_with('\''),
            Value::Number(_) => ty == "number",
            Value::Bool(_) => ty == "boolean",
            Value::Array(_) => ty.ends_with("[]"),
            Value::Object(_) => object_type || ty.starts_with("Record<"),
        };
        assert!(ok, "{kind}.{name} is {value} where the document has {ty}");
    }
    props.len()
}

#[test]
fn each_gitea_object_holds_every_property_the_document_lists_with_its_type() {
    let forge = Forge::start(&[], &[]);
    let token = user_token(&forge.data, "alice", false, "write", &[]);
    let auth = format!("token {token}");
    let call = |method: &str, path: &str, body: Option<&str>| -> Value {
        let (status, body) = http_request(
            forge.server().addr,
            method,
            &format!("/api/v1{path}"),
            &[
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
            ],
            body.map(str::as_bytes),
        );
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {}",
            text(&body)
        );
        serde_json::from_slice(&body).unwrap()
    };
    call("POST", "/user/repos", Some(r#"{"name":"shapes"}"#));
    let work = worktree(&forge.dir, "work");
    let url = format!(
        "http://alice:{token}@{}/alice/shapes.git",
        forge.server().addr
    );
    git_ok(&work, &["push", "-q", &url, "main"]);
    git_ok(&work, &["checkout", "-q", "-b", "topic"]);
    commit_file(&work, "topic.txt", b"topic\n");
    git_ok(&work, &["push", "-q", &url, "topic"]);
    let all = interfaces();
    let mut checked = 0;
    checked += check_shape("User", &call("GET", "/user", None), &all);
    checked += check_shape(
        "Repository",
        &call("GET", "/repos/alice/shapes", None),
        &all,
    );
    // What vole cannot do is refused, not dropped; what it does not know
    // is ignored (a repo's settings are an admin token's).
    let admin = format!(
        "token {}",
        user_token(&forge.data, "alice", false, "admin", &[])
    );
    for refused in [
        r#"{"archived":true}"#,
        r#"{"has_issues":false}"#,
        r#"{"has_pull_requests":false,"description":"kept?"}"#,
    ] {
        let (status, body) = http_request(
            forge.server().addr,
            "PATCH",
            "/api/v1/repos/alice/shapes",
            &[
                ("Authorization", admin.as_str()),
                ("Content-Type", "application/json"),
            ],
            Some(refused.as_bytes()),
        );
        assert_eq!(status, 422, "{refused}: {}", text(&body));
    }
    let (status, edited) = http_request(
        forge.server().addr,
        "PATCH",
        "/api/v1/repos/alice/shapes",
        &[
            ("Authorization", admin.as_str()),
            ("Content-Type", "application/json"),
        ],
        Some(br#"{"description":"shapes","has_wiki":false,"website":"x","archived":false}"#),
    );
    let edited: Value = serde_json::from_slice(&edited).unwrap();
    assert_eq!(
        (status, &edited["description"]),
        (200, &Value::from("shapes")),
        "{edited}"
    );
    let label = call(
        "POST",
        "/repos/alice/shapes/labels",
        Some(r##"{"name":"bug","color":"#ff0000"}"##),
    );
    checked += check_shape("Label", &label, &all);
    let pull = call(
        "POST",
        "/repos/alice/shapes/pulls",
        Some(r#"{"head":"topic","base":"main","title":"Topic"}"#),
    );
    // A list's (or a creation's) pull request leaves the diff's counts
    // null (docs/api.md); one pull request's answer has them all.
    checked += check_shape("PRBranchInfo", &pull["head"], &all);
    checked += check_shape("Repository", &pull["base"]["repo"], &all);
    // A push to its branch is an event in its timeline, not a comment a
    // person wrote: Gitea's lists and counts leave it out.
    commit_file(&work, "more.txt", b"more\n");
    git_ok(&work, &["push", "-q", &url, "topic"]);
    let timeline = (0..100).find_map(|_| {
        let (_, page) = http_request(
            forge.server().addr,
            "GET",
            "/alice/shapes/-/pulls/1",
            &[],
            None,
        );
        let page = text(&page);
        if page.contains("pushed 1 commit") {
            return Some(page);
        }
        std::thread::sleep(Duration::from_millis(50));
        None
    });
    assert!(timeline.is_some(), "anti-vacuity: no push event was made");
    assert_eq!(
        call("GET", "/repos/alice/shapes/issues/1/comments", None),
        serde_json::json!([]),
        "a push event is listed as a comment"
    );
    assert_eq!(
        call("GET", "/repos/alice/shapes/issues/comments", None),
        serde_json::json!([])
    );
    let shown = call("GET", "/repos/alice/shapes/pulls/1", None);
    assert_eq!(shown["comments"], 0, "a push event is counted as a comment");
    checked += check_shape("PullRequest", &shown, &all);
    let branch = call("GET", "/repos/alice/shapes/branches/topic", None);
    checked += check_shape("Branch", &branch, &all);
    checked += check_shape("PayloadCommit", &branch["commit"], &all);
    let issue = call(
        "POST",
        "/repos/alice/shapes/issues",
        Some(&format!(
            r#"{{"title":"Shapes","labels":[{}]}}"#,
            label["id"]
        )),
    );
    checked += check_shape("Issue", &issue, &all);
    checked += check_shape("RepositoryMeta", &issue["repository"], &all);
    let comment = call(
        "POST",
        "/repos/alice/shapes/issues/2/comments",
        Some(r#"{"body":"a comment"}"#),
    );
    checked += check_shape("Comment", &comment, &all);
    let as_issue = call("GET", "/repos/alice/shapes/issues/1", None);
    checked += check_shape("Issue", &as_issue, &all);
    checked += check_shape("PullRequestMeta", &as_issue["pull_request"], &all);
    let search = call("GET", "/repos/search?q=shap", None);
    assert_eq!(search["ok"], true);
    checked += check_shape("Repository", &search["data"][0], &all);
    // Anti-vacuity: the lists were read and each kind checked.
    assert!(checked > 200, "only {checked} properties were checked");
}

#[test]
fn ids_are_numbers_below_2_to_the_53_never_reused_across_a_restart() {
    let mut forge = Forge::start(&[], &[]);
    let token = user_token(&forge.data, "alice", false, "admin", &[]);
    let auth = format!("token {token}");
    let post = |forge: &Forge, path: &str, body: &str| -> Value {
        let (status, answer) = http_request(
            forge.server().addr,
            "POST",
            &format!("/api/v1{path}"),
            &[
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
            ],
            Some(body.as_bytes()),
        );
        assert_eq!(status, 201, "{path}: {}", text(&answer));
        serde_json::from_slice(&answer).unwrap()
    };
    let first = post(&forge, "/user/repos", r#"{"name":"one"}"#)["id"]
        .as_u64()
        .unwrap();
    let label = post(
        &forge,
        "/repos/alice/one/labels",
        r##"{"name":"a","color":"#000000"}"##,
    )["id"]
        .as_u64()
        .unwrap();
    forge.restart();
    // A repo deleted and made again under its name is another repo.
    let (status, _) = http_request(
        forge.server().addr,
        "DELETE",
        "/api/v1/repos/alice/one",
        &[("Authorization", auth.as_str())],
        None,
    );
    assert_eq!(status, 204);
    let again = post(&forge, "/user/repos", r#"{"name":"one"}"#)["id"]
        .as_u64()
        .unwrap();
    let label_again = post(
        &forge,
        "/repos/alice/one/labels",
        r##"{"name":"a","color":"#000000"}"##,
    )["id"]
        .as_u64()
        .unwrap();
    assert!(first >= 1 && again > first, "repo ids {first} then {again}");
    assert!(label_again > label, "label ids {label} then {label_again}");
    assert!(again < (1 << 53) && label_again < (1 << 53));
}

/// `GET path` with `auth`: the status and the body.
fn call_status(addr: std::net::SocketAddr, auth: &str, path: &str) -> (u16, Vec<u8>) {
    // No credentials: no header.
    let headers: &[(&str, &str)] = if auth.is_empty() {
        &[]
    } else {
        &[("Authorization", auth)]
    };
    http_request(addr, "GET", path, headers, None)
}

/// `METHOD path` with `headers` and `body`: the status and the body.
fn http_request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> (u16, Vec<u8>) {
    let body = body.unwrap_or_default();
    let mut head = format!("{method} {path} HTTP/1.1\r\nContent-Length: {}", body.len());
    for (name, value) in headers {
        head.push_str(&format!("\r\n{name}: {value}"));
    }
    let answer = http(addr, &head, body);
    (answer.status, answer.body)
}

#[test]
fn tokens_are_made_with_the_password_whatever_password_auth_says_and_never_with_a_token() {
    // --password-auth is off by default: only the token endpoints take it.
    let forge = Forge::start(&["alice/repo"], &["--auth-failures", "3"]);
    let token = user_token(&forge.data, "alice", false, "write", &[]);
    set_password(&forge.data, "alice", "correct horse battery");
    let addr = forge.server().addr;
    let basic_auth = |secret: &str| {
        basic("alice", secret)
            .trim_start_matches("Authorization: ")
            .to_string()
    };
    let password = basic_auth("correct horse battery");
    let call = |method: &str, path: &str, auth: &str, body: Option<&str>| {
        let (status, answer) = http_request(
            addr,
            method,
            &format!("/api/v1{path}"),
            &[
                ("Authorization", auth),
                ("Content-Type", "application/json"),
            ],
            body.map(str::as_bytes),
        );
        (
            status,
            serde_json::from_slice::<Value>(&answer).unwrap_or(Value::Null),
        )
    };
    // The password is no credential elsewhere.
    assert_eq!(call("GET", "/user", &password, None).0, 401);
    let (status, made) = call(
        "POST",
        "/users/alice/tokens",
        &password,
        Some(r#"{"name":"ci","scopes":["write:repository","read:user"]}"#),
    );
    assert_eq!(status, 201, "{made}");
    let text = made["sha1"].as_str().unwrap().to_string();
    assert!(made["id"].as_u64().is_some() && made["token_last_eight"] == text[text.len() - 8..]);
    // The new token works, as write.
    let bearer = format!("token {text}");
    let (status, me) = call("GET", "/user", &bearer, None);
    assert_eq!((status, me["login"].as_str()), (200, Some("alice")));
    let (status, _) = call(
        "POST",
        "/repos/alice/repo/issues",
        &bearer,
        Some(r#"{"title":"t"}"#),
    );
    assert_eq!(status, 201);
    // Listed without its text; a token may not list, make or revoke.
    let (status, listed) = call("GET", "/users/alice/tokens", &password, None);
    assert_eq!(status, 200);
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"ci"), "{listed}");
    assert!(listed.as_array().unwrap().iter().all(|t| t["sha1"] == ""));
    let with_token = format!("token {token}");
    assert_eq!(call("GET", "/users/alice/tokens", &with_token, None).0, 403);
    assert_eq!(
        call(
            "POST",
            "/users/alice/tokens",
            &with_token,
            Some(r#"{"name":"x"}"#)
        )
        .0,
        403
    );
    // Another user's tokens are not alice's to see.
    user_token(&forge.data, "bob", false, "read", &[]);
    assert_eq!(call("GET", "/users/bob/tokens", &password, None).0, 403);
    // Revoked by its id: refused from then on.
    let id = made["id"].as_u64().unwrap();
    assert_eq!(
        call(
            "DELETE",
            &format!("/users/alice/tokens/{id}"),
            &password,
            None
        )
        .0,
        204
    );
    assert_eq!(call("GET", "/user", &bearer, None).0, 401);
    // Wrong passwords are throttled as sign-ins are (the password sent
    // to /user above counted as one failure).
    let statuses: Vec<u16> = (0..6)
        .map(|i| {
            call(
                "GET",
                "/users/alice/tokens",
                &basic_auth(&format!("wrong {i}")),
                None,
            )
            .0
        })
        .collect();
    assert_eq!(statuses[0], 401, "{statuses:?}");
    assert!(
        statuses[3..].iter().all(|s| *s == 429),
        "not throttled: {statuses:?}"
    );
}

#[test]
fn files_and_history_are_answered_as_gitea_answers_them_and_bounded() {
    use base64::Engine;
    let forge = Forge::start(&["alice/repo", "alice/empty"], &[]);
    let token = user_token(&forge.data, "alice", false, "write", &[]);
    let addr = forge.server().addr;
    let auth = format!("token {token}");
    let get = |path: &str| {
        let answer = http(
            addr,
            &format!("GET /api/v1/repos/alice/repo{path} HTTP/1.1\r\nAuthorization: {auth}"),
            b"",
        );
        let json = serde_json::from_slice::<Value>(&answer.body).unwrap_or(Value::Null);
        (answer, json)
    };
    let work = worktree(&forge.dir, "work");
    let url = format!("http://alice:{token}@{addr}/alice/repo.git");
    commit_file(&work, "docs/guide.md", b"# Guide\n");
    commit_file(&work, "src/main.rs", b"fn main() {}\n");
    let big: Vec<u8> = (0..(1024 * 1024 + 10)).map(|i| (i % 251) as u8).collect();
    commit_file(&work, "big.bin", &big);
    std::fs::remove_file(work.join("docs/guide.md")).unwrap();
    git_ok(&work, &["commit", "-qam", "drop the guide"]);
    git_ok(&work, &["push", "-q", &url, "main"]);
    let all = interfaces();
    // An empty repo's history is a 409, a user that is not one a 404.
    let (status, _) = call_status(addr, &auth, "/api/v1/repos/alice/empty/commits");
    assert_eq!(status, 409);
    let (status, _) = call_status(addr, &auth, "/api/v1/users/nobody/repos");
    assert_eq!(status, 404);
    // A branch name longer than a file name may be, or one git could not
    // have made, names no branch: a 404, not a failed read.
    for name in [
        "a".repeat(300),
        format!("x/{}", "b".repeat(256)),
        "a..b".into(),
    ] {
        let (answer, _) = get(&format!("/branches/{name}"));
        assert_eq!(answer.status, 404, "{name}: {}", answer.text());
        let (answer, _) = get(&format!("/contents/README.md?ref={name}"));
        assert_eq!(answer.status, 404, "ref {name}: {}", answer.text());
    }
    let (answer, _) = get("/branches/main");
    assert_eq!(answer.status, 200, "anti-vacuity: {}", answer.text());
    // An abbreviated commit id names its commit, as git takes one.
    let main = git_ok(&work, &["rev-parse", "main"]);
    let (answer, file) = get(&format!("/contents/src/main.rs?ref={}", &main.trim()[..7]));
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(file["path"], "src/main.rs");
    let (answer, _) = get(&format!("/contents/src/main.rs?ref={}", &main.trim()[..3]));
    assert_eq!(answer.status, 404, "three digits name nothing");
    // A file: its bytes in base64.
    let (answer, file) = get("/contents/src/main.rs?ref=main");
    assert_eq!(answer.status, 200, "{}", answer.text());
    check_shape("ContentsResponse", &file, &all);
    check_shape("FileLinksResponse", &file["_links"], &all);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(file["content"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        (file["type"].as_str(), bytes.as_slice()),
        (Some("file"), &b"fn main() {}\n"[..])
    );
    // The git object links a content and a commit carry are answered.
    let git_url = file["git_url"].as_str().unwrap();
    let (blob_answer, blob) = get(&git_url[git_url.find("/git/blobs/").unwrap()..]);
    assert_eq!(blob_answer.status, 200, "{}", blob_answer.text());
    check_shape("GitBlobResponse", &blob, &all);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(blob["content"].as_str().unwrap())
        .unwrap();
    assert_eq!(decoded, b"fn main() {}\n");
    let main_sha = git_ok(&work, &["rev-parse", "main"]);
    let (tree_answer, flat) = get(&format!("/git/trees/{}", main_sha.trim()));
    assert_eq!(tree_answer.status, 200, "{}", tree_answer.text());
    check_shape("GitTreeResponse", &flat, &all);
    check_shape("GitEntry", &flat["tree"][0], &all);
    let paths = |tree: &Value| -> Vec<String> {
        tree["tree"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(!paths(&flat).contains(&"src/main.rs".to_string()), "{flat}");
    let (_, deep) = get(&format!("/git/trees/{}?recursive=true", main_sha.trim()));
    assert!(paths(&deep).contains(&"src/main.rs".to_string()), "{deep}");
    let (_, second) = get("/git/trees/main?recursive=true&per_page=1&page=2");
    assert_eq!(
        (paths(&second).len(), &second["total_count"]),
        (1, &deep["total_count"]),
        "{second}"
    );
    let tree_sha = flat["sha"].as_str().unwrap();
    let (not_blob, _) = get(&format!("/git/blobs/{tree_sha}"));
    assert_eq!(not_blob.status, 404, "a tree is no blob");
    // The root, without a ref: the default branch's.
    let (_, root) = get("/contents");
    let names: Vec<&str> = root
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["README.md", "big.bin", "src"], "{root}");
    // A file past the inline bound: no content, and raw redirects to the
    // web's raw view.
    let (_, large) = get("/contents/big.bin");
    assert_eq!(
        (large["content"].clone(), large["size"].as_u64()),
        (Value::Null, Some(big.len() as u64))
    );
    let (redirect, _) = get("/raw/big.bin");
    assert_eq!(redirect.status, 307);
    assert!(
        redirect
            .header("location")
            .unwrap()
            .ends_with("/alice/repo/-/raw/main/big.bin"),
        "{:?}",
        redirect.header("location")
    );
    let (raw, _) = get("/raw/src/main.rs?ref=main");
    assert_eq!(
        (raw.status, raw.body.as_slice()),
        (200, &b"fn main() {}\n"[..])
    );
    assert_eq!(raw.header("content-type"), Some("application/octet-stream"));
    // Paths that name nothing, or try to leave the tree.
    assert_eq!(get("/contents/src/nope.rs").0.status, 404);
    assert_eq!(get("/contents/src/../big.bin").0.status, 422);
    assert_eq!(
        get("/contents/src/main.rs?ref=no-such-branch").0.status,
        404
    );
    // The history, newest first, paged, with files and counts.
    let (answer, commits) = get("/commits?limit=2");
    assert_eq!(answer.status, 200, "{}", answer.text());
    let total: usize = answer.header("x-total-count").unwrap().parse().unwrap();
    assert!(total >= 4, "{total}");
    let newest = &commits[0];
    check_shape("Commit", newest, &all);
    // The links an object carries are answered: a commit's own, and the
    // repo's languages (none kept).
    let own = newest["url"].as_str().unwrap();
    let own = &own[own.find("/git/commits/").unwrap()..];
    let (single, one) = get(own);
    assert_eq!(single.status, 200, "{own}: {}", single.text());
    check_shape("Commit", &one, &all);
    assert_eq!(one["sha"], newest["sha"]);
    assert_eq!(one["stats"], newest["stats"], "{one}");
    let (single, languages) = get("/languages");
    assert_eq!((single.status, languages), (200, serde_json::json!({})));
    let (single, _) = get("/git/commits/0123456789abcdef0123456789abcdef01234567");
    assert_eq!(single.status, 404);
    check_shape("RepoCommit", &newest["commit"], &all);
    check_shape("CommitUser", &newest["commit"]["author"], &all);
    check_shape("CommitMeta", &newest["parents"][0], &all);
    check_shape("CommitStats", &newest["stats"], &all);
    check_shape("CommitAffectedFiles", &newest["files"][0], &all);
    assert_eq!(
        newest["commit"]["message"].as_str().unwrap().trim(),
        "drop the guide"
    );
    assert_eq!(newest["files"][0]["status"], "removed", "{newest}");
    assert_eq!(newest["stats"]["deletions"], 1, "{newest}");
    assert!(answer.header("link").unwrap().contains("limit=2"));
    // Only the commits that touch a path.
    let (answer, touching) = get("/commits?path=docs/guide.md&stat=false&files=false");
    assert_eq!(answer.header("x-total-count"), Some("2"), "{touching}");
    assert!(touching[0]["stats"].is_null() && touching[0]["files"].is_null());
    // A path is a path: no NUL or `..`, and no pathspec magic.
    for bad in ["%00", "a/../b", "x%00y"] {
        let (answer, _) = get(&format!("/commits?path={bad}"));
        assert_eq!(answer.status, 422, "path={bad}: {}", answer.text());
    }
    let (answer, magic) = get("/commits?path=:(glob)**");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.header("x-total-count"),
        Some("0"),
        "a pathspec's magic was read: {magic}"
    );
}

#[test]
fn an_old_data_dir_gets_numeric_ids_and_label_entities_once_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/old-datadir.tar.gz");
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(&fixture)
        .arg("-C")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(untar.status.success(), "{}", text(&untar.stderr));
    let data = dir.path().join("data");
    let token = std::fs::read_to_string(dir.path().join("token.txt")).unwrap();
    let auth = format!("token {}", token.trim());
    let ids = |server: &TestServer| {
        let get = |path: &str| -> Value {
            let answer = http(
                server.addr,
                &format!("GET /api/v1{path} HTTP/1.1\r\nAuthorization: {auth}"),
                b"",
            );
            assert_eq!(answer.status, 200, "{path}: {}", answer.text());
            serde_json::from_slice(&answer.body).unwrap()
        };
        let threads = get("/repos/alice/old/issues?state=all");
        let labels = get("/repos/alice/old/labels");
        let comments = get("/repos/alice/old/issues/comments");
        let mut all = vec![
            ("user alice".to_string(), get("/user")["id"].clone()),
            ("user bob".to_string(), get("/users/bob")["id"].clone()),
            ("repo".to_string(), get("/repos/alice/old")["id"].clone()),
        ];
        for t in threads.as_array().unwrap() {
            all.push((format!("thread #{}", t["number"]), t["id"].clone()));
        }
        for l in labels.as_array().unwrap() {
            all.push((format!("label {}", l["name"]), l["id"].clone()));
        }
        for c in comments.as_array().unwrap() {
            all.push((format!("comment {}", c["body"]), c["id"].clone()));
        }
        let second = &threads
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["number"] == 2)
            .unwrap()["labels"];
        let names: Vec<&str> = second
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ui", "bug"], "issue #2's labels, as entities");
        all
    };
    let server = TestServer::builder().data(&data).start();
    assert!(
        server
            .log
            .wait_for(&["got numeric ids"], Duration::from_secs(5))
            .is_some(),
        "the upgrade was not logged: {}",
        server.log.all()
    );
    let before = ids(&server);
    // Two users, the repo, two issues and a pull request, two labels, a comment.
    assert_eq!(before.len(), 9, "{before:?}");
    for (what, id) in &before {
        let id = id.as_u64().unwrap_or(0);
        assert!((1..(1 << 53)).contains(&id), "{what} has id {id}");
    }
    server.stop();
    // A second start numbers nothing again, and the ids stay.
    let server = TestServer::builder().data(&data).start();
    assert_eq!(ids(&server), before, "the ids changed at a restart");
    assert!(
        !server.log.all().contains("got numeric ids"),
        "a second start upgraded again: {}",
        server.log.all()
    );
}

#[test]
fn labels_are_kept_by_id_through_renames_and_deletions_and_every_api_refusal_is_json() {
    let forge = Forge::start(&["alice/repo"], &[]);
    let token = user_token(&forge.data, "alice", false, "write", &[]);
    let addr = forge.server().addr;
    let auth = format!("token {token}");
    let call = |method: &str, path: &str, body: Option<&str>| {
        let (status, answer) = http_request(
            addr,
            method,
            &format!("/api/v1/repos/alice/repo{path}"),
            &[
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
            ],
            body.map(str::as_bytes),
        );
        (
            status,
            serde_json::from_slice::<Value>(&answer).unwrap_or(Value::Null),
        )
    };
    let names = |labels: &Value| -> Vec<String> {
        labels
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_string())
            .collect()
    };
    // A label whose name is digits is still a name.
    let (_, year) = call(
        "POST",
        "/labels",
        Some(r##"{"name":"2024","color":"#00ff00"}"##),
    );
    let (_, bug) = call(
        "POST",
        "/labels",
        Some(r##"{"name":"bug","color":"#ff0000"}"##),
    );
    let (status, issue) = call(
        "POST",
        "/issues",
        Some(&format!(r#"{{"title":"t","labels":[{}]}}"#, year["id"])),
    );
    assert_eq!(status, 201, "{issue}");
    let (status, labels) = call("POST", "/issues/1/labels", Some(r#"{"labels":["bug"]}"#));
    assert_eq!(
        (status, names(&labels)),
        (200, vec!["2024".to_string(), "bug".to_string()])
    );
    // The list shows a label, a comment count and an author as they are
    // now, however often it was asked before.
    let listed = |field: &str| call("GET", "/issues?type=issues", None).1[0][field].clone();
    assert_eq!(listed("labels")[1]["color"], "ff0000");
    assert_eq!(listed("comments"), 0);
    call(
        "PATCH",
        &format!("/labels/{}", bug["id"]),
        Some(r##"{"color":"#0000ff"}"##),
    );
    assert_eq!(
        listed("labels")[1]["color"],
        "0000ff",
        "a stale label in the list"
    );
    call("POST", "/issues/1/comments", Some(r#"{"body":"c"}"#));
    assert_eq!(listed("comments"), 1, "a stale comment count in the list");
    let edited = run_vole(
        &forge.data,
        &["user", "edit", "alice", "--full-name", "Alice A."],
    );
    assert!(edited.status.success(), "{}", text(&edited.stderr));
    assert_eq!(
        listed("user")["full_name"],
        "Alice A.",
        "a stale author in the list"
    );
    // Filters by name match ASCII case aside, as Gitea's.
    let (_, by_author) = call(
        "GET",
        "/issues?type=issues&created_by=ALICE&labels=BUG",
        None,
    );
    assert_eq!(by_author.as_array().map(Vec::len), Some(1), "{by_author}");
    // A rename reaches the issue; a deletion leaves it and stays deleted.
    let (status, _) = call(
        "PATCH",
        &format!("/labels/{}", bug["id"]),
        Some(r#"{"name":"defect"}"#),
    );
    assert_eq!(status, 200);
    assert_eq!(
        call("DELETE", &format!("/labels/{}", year["id"]), None).0,
        204
    );
    let (_, labels) = call("GET", "/issues/1/labels", None);
    assert_eq!(names(&labels), ["defect"]);
    let (status, labels) = call(
        "POST",
        "/issues/1/labels",
        Some(&format!(r#"{{"labels":[{}]}}"#, bug["id"])),
    );
    assert_eq!((status, names(&labels)), (200, vec!["defect".to_string()]));
    let (_, all) = call("GET", "/labels", None);
    assert_eq!(names(&all), ["defect"], "a deleted label came back");
    assert_eq!(
        call("DELETE", &format!("/issues/1/labels/{}", bug["id"]), None).0,
        204
    );
    assert_eq!(
        names(&call("GET", "/issues/1/labels", None).1),
        Vec::<String>::new()
    );
    // Clients adding a label each at once all land: an add is read,
    // edited and written against the version read.
    let added: Vec<String> = (0..6).map(|n| format!("race-{n}")).collect();
    std::thread::scope(|scope| {
        for name in &added {
            let call = &call;
            scope.spawn(move || {
                let (status, answer) = call(
                    "POST",
                    "/issues/1/labels",
                    Some(&format!(r#"{{"labels":["{name}"]}}"#)),
                );
                assert_eq!(status, 200, "adding {name}: {answer}");
            });
        }
    });
    let mut landed = names(&call("GET", "/issues/1/labels", None).1);
    landed.sort();
    assert_eq!(landed, added, "an add raced by another was lost");
    // Edits of one comment without a version, at once: each applies to
    // the version current when it is written, none is a 409.
    let (status, comment) = call("POST", "/issues/1/comments", Some(r#"{"body":"first"}"#));
    assert_eq!(status, 201, "{comment}");
    let path = format!("/issues/comments/{}", comment["id"]);
    std::thread::scope(|scope| {
        for n in 0..6 {
            let (call, path) = (&call, &path);
            scope.spawn(move || {
                let (status, answer) =
                    call("PATCH", path, Some(&format!(r#"{{"body":"edit {n}"}}"#)));
                assert_eq!(status, 200, "edit {n} without a version: {answer}");
            });
        }
    });
    // Every refusal under /api/ is Gitea's JSON, from wherever it comes.
    for (method, path, headers, status) in [
        ("GET", "/api/v1/no/such/path", vec![], 404),
        ("PUT", "/api/v1/version", vec![], 405),
        ("PUT", "/api/v1/repos/alice/repo/issues", vec![], 405),
        ("POST", "/api/v1/repos/alice/nope/commits", vec![], 405),
        (
            "GET",
            "/api/v1/user",
            vec![("Authorization", "token vole_0000000000000000_nope")],
            401,
        ),
        (
            "GET",
            "/api/v1/user",
            vec![("Authorization", "Digest x")],
            400,
        ),
    ] {
        let answer = http(
            addr,
            &format!(
                "{method} {path} HTTP/1.1{}",
                headers
                    .iter()
                    .map(|(k, v)| format!("\r\n{k}: {v}"))
                    .collect::<String>()
            ),
            b"",
        );
        assert_eq!(answer.status, status, "{method} {path}: {}", answer.text());
        let body: Value = serde_json::from_slice(&answer.body)
            .unwrap_or_else(|_| panic!("{method} {path}: not JSON: {}", answer.text()));
        assert!(
            body["message"].as_str().is_some_and(|m| !m.is_empty()) && body["url"] == "",
            "{method} {path}: {body}"
        );
    }
}

#[test]
fn what_a_namespace_holds_and_whether_an_account_is_disabled_are_told_to_whom_may_know() {
    let mut forge = Forge::new(&[]);
    forge.create_repo(&["secretorg/plans", "--private"]);
    let bob = user_token(&forge.data, "bob", false, "read", &[]);
    user_token(&forge.data, "dave", false, "read", &[]);
    let disabled = run_vole(&forge.data, &["user", "disable", "dave"]);
    assert!(disabled.status.success(), "{}", text(&disabled.stderr));
    forge.serve(&[]);
    let addr = forge.server().addr;
    let bob = format!("token {bob}");
    // A namespace of private repos only is as missing as one that is not.
    for auth in ["", bob.as_str()] {
        let (held, said) = call_status(addr, auth, "/api/v1/users/secretorg/repos");
        let (none, _) = call_status(addr, auth, "/api/v1/users/nosuchorg/repos");
        assert_eq!((held, none), (404, 404), "{auth:?}: {}", text(&said));
    }
    // Whether dave is disabled is not told to the anonymous or to bob.
    for auth in ["", bob.as_str()] {
        let (status, body) = call_status(addr, auth, "/api/v1/users/dave");
        assert_eq!(status, 200, "{}", text(&body));
        let user: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (&user["active"], &user["prohibit_login"]),
            (&Value::Bool(true), &Value::Bool(false)),
            "{auth:?} sees dave disabled: {user}"
        );
    }
}
