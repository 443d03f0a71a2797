//! Every route that names a repo answers through `RepoAccess`, the one
//! extractor that resolves the repo and asks `access`: the router's
//! `require_repo_access` layer replaces the answer of a handler that
//! looked its repo up some other way with a 500 naming the route. This
//! test reads the route tables and asks every
//! route with `{repo}`, by each of its methods, about a private repo (as
//! the anonymous and as a signed-in stranger: refused as a missing repo,
//! never a 500) and about a public one (answered by the handler, never the
//! layer's 500). A handler that forgets the extractor fails here, naming
//! its route. The route tables are each service's `routes.rs` and the
//! router's own routes.

use std::path::Path;

use crate::support::*;

/// Each `.route("template", get(..).post(..))` of the route table: the
/// template and its methods.
fn routes(source: &str) -> Vec<(String, Vec<&'static str>)> {
    let mut found = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find(".route(") {
        rest = &rest[at + ".route(".len()..];
        let Some(open) = rest.find('"') else { break };
        let Some(close) = rest[open + 1..].find('"') else {
            break;
        };
        let template = rest[open + 1..open + 1 + close].to_string();
        // The route's arguments: up to the `)` closing `.route(`.
        let mut depth = 1;
        let mut end = 0;
        for (i, c) in rest.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let args = &rest[..end];
        let methods: Vec<&'static str> = ["get", "post", "put", "patch", "delete"]
            .into_iter()
            .filter(|m| {
                args.contains(&format!("({m}("))
                    || args.contains(&format!(".{m}("))
                    || args.contains(&format!(" {m}("))
            })
            .collect();
        found.push((template, methods));
    }
    found
}

/// `template` with its segments filled in for `repo` (`owner/name`).
fn path_of(template: &str, repo: &str) -> String {
    let (owner, name) = repo.split_once('/').unwrap();
    let path = template
        .replace("{owner}", owner)
        .replace("{repo}", name)
        .replace("{number}", "1")
        .replace("{rev}", "main")
        .replace("{*path}", "README.md")
        .replace("{id}", &"0".repeat(40))
        .replace("{file}", &format!("{name}-main.tar.gz"));
    if path.ends_with("/info/refs") {
        format!("{path}?service=git-upload-pack")
    } else {
        path
    }
}

fn ask(server: &TestServer, method: &str, path: &str, auth: Option<&str>) -> HttpResponse {
    let auth = auth.map(|a| format!("\r\n{a}")).unwrap_or_default();
    let body = if method == "get" { "" } else { "{}" };
    http(
        server.addr,
        &format!(
            "{} {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}{auth}",
            method.to_uppercase(),
            body.len()
        ),
        body.as_bytes(),
    )
}

#[test]
fn every_repo_route_answers_through_repo_access() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let alice = user_token(&data, "alice", false, "write", &[]);
    let stranger = user_token(&data, "bob", false, "write", &[]);
    for (repo, private) in [("alice/secret", true), ("alice/open", false)] {
        let mut args = vec!["repo", "create", repo];
        if private {
            args.push("--private");
        }
        let made = run_vole(&data, &args);
        assert!(made.status.success(), "{}", text(&made.stderr));
    }
    let server = TestServer::builder().data(&data).start();
    let work = worktree(dir.path(), "work");
    commit_file(&work, "README.md", b"# open\n");
    let url = format!("http://alice:{alice}@{}/alice/open.git", server.addr);
    git_ok(&work, &["push", &url, "HEAD:refs/heads/main"]);

    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let table: String = [
        "src/server/router.rs",
        "crates/api/src/routes.rs",
        "crates/web/src/routes.rs",
        "crates/sites/src/routes.rs",
        "crates/transport/src/routes.rs",
    ]
    .iter()
    .map(|file| std::fs::read_to_string(root.join(file)).unwrap())
    .collect();
    let repo_routes: Vec<(String, Vec<&str>)> = routes(&table)
        .into_iter()
        .filter(|(template, _)| template.contains("{repo}"))
        .collect();
    // Anti-vacuity: the table read is the router's (git, web, API, sites).
    let asked: usize = repo_routes.iter().map(|(_, m)| m.len()).sum();
    assert!(
        asked >= 35
            && repo_routes
                .iter()
                .any(|(t, _)| t == "/{owner}/{repo}/git-receive-pack")
            && repo_routes
                .iter()
                .any(|(t, _)| t == "/api/v1/repos/{owner}/{repo}/acl"),
        "read {asked} repo routes from the router: {repo_routes:?}"
    );
    let stranger_auth = basic("bob", &stranger);
    let mut problems = Vec::new();
    for (template, methods) in &repo_routes {
        for method in methods {
            for (who, auth) in [("anonymous", None), ("bob", Some(stranger_auth.as_str()))] {
                let answer = ask(&server, method, &path_of(template, "alice/secret"), auth);
                if ![401, 404].contains(&answer.status) {
                    problems.push(format!(
                        "{method} {template} on a private repo as {who}: {} {}",
                        answer.status,
                        answer.text().trim()
                    ));
                }
            }
            let answer = ask(&server, method, &path_of(template, "alice/open"), None);
            if answer.status == 500 {
                problems.push(format!(
                    "{method} {template} on a public repo: 500 {}",
                    answer.text().trim()
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "repo routes that did not answer through RepoAccess:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_route_table_reader_sees_every_method_of_a_route() {
    let table = r#"
        .route(
            "/api/v1/repos/{owner}/{repo}/issues",
            get(meta::list_issues).post(meta::create_issue),
        )
        .route("/{owner}/{repo}", get(vole_web::repo_home))
        .route("/healthz", get(healthz))
    "#;
    assert_eq!(
        routes(table),
        [
            (
                "/api/v1/repos/{owner}/{repo}/issues".to_string(),
                vec!["get", "post"]
            ),
            ("/{owner}/{repo}".to_string(), vec!["get"]),
            ("/healthz".to_string(), vec!["get"]),
        ]
    );
}
