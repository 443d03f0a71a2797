//! Access on every surface, as a table: each surface that names a repo,
//! for a public and a private repo, for the anonymous principal (the only
//! one until accounts exist), with the push switch off and on, gives the
//! expected answer; and a repo the principal may not see is answered
//! exactly as a missing one, asked twice (a site's second answer comes from its
//! warm layer), and so is a repo dir that is a symlink leading out of the
//! repos dir.
//!
//! Today's rules (`src/access/`): the ACL's visibility is applied to sites
//! only, so a private repo reads like a public one everywhere else; pushes
//! and API writes need `--anonymous-push`. The server's counters (`/api/v1/stats`)
//! are checked too, and open to anyone. A 401 (`Unauthenticated`) is in the
//! table's vocabulary; no surface gives one until accounts exist.

use std::net::SocketAddr;
use std::path::Path;

use crate::support::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Allowed,
    NotFound,
    Unauthenticated,
    Forbidden,
}

/// A surface: how to ask it about `repo`, and what it answers.
struct Surface {
    name: &'static str,
    ask: fn(&Ctx, &str) -> Answer,
}

struct Ctx {
    addr: SocketAddr,
    /// Where clones go.
    dir: std::path::PathBuf,
    /// A work tree holding `commit`, to push from.
    work: std::path::PathBuf,
    commit: String,
}

/// What a surface said: allowed or not, and the status and body it
/// answered with (for the missing-repo comparison).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn expect(&self) -> Expect {
        match self.status {
            200..=399 => Expect::Allowed,
            404 => Expect::NotFound,
            401 => Expect::Unauthenticated,
            403 => Expect::Forbidden,
            other => panic!("unexpected status {other}: {}", self.body),
        }
    }
}

fn get(ctx: &Ctx, path: &str) -> Answer {
    let response = http_get(ctx.addr, path);
    Answer {
        status: response.status,
        body: response.text(),
    }
}

fn get_host(ctx: &Ctx, host: &str, path: &str) -> Answer {
    let response = http_raw(
        ctx.addr,
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    Answer {
        status: response.status,
        body: response.text(),
    }
}

fn post_json(ctx: &Ctx, path: &str, body: &str) -> Answer {
    send_json(ctx, "POST", path, body)
}

fn send_json(ctx: &Ctx, method: &str, path: &str, body: &str) -> Answer {
    let response = http(
        ctx.addr,
        &format!(
            "{method} {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}",
            body.len()
        ),
        body.as_bytes(),
    );
    Answer {
        status: response.status,
        body: response.text(),
    }
}

/// A real git client: success is "allowed"; a refusal carries the status
/// git was answered with in its message.
fn git_answer(cwd: &Path, args: &[&str]) -> Answer {
    let out = git(cwd, args);
    let stderr = text(&out.stderr);
    // Matched on git's words, not bare numbers: the URL's port can hold
    // "403" or "404".
    let status = if out.status.success() {
        200
    } else if stderr.contains("returned error: 403") || stderr.contains("push is disabled") {
        403
    } else if stderr.contains("not found") || stderr.contains("returned error: 404") {
        404
    } else {
        panic!("git {args:?} failed in an unexpected way: {stderr}")
    };
    Answer {
        status,
        body: String::new(),
    }
}

fn surfaces() -> Vec<Surface> {
    vec![
        Surface {
            name: "info/refs (upload-pack)",
            ask: |c, r| get(c, &format!("/{r}.git/info/refs?service=git-upload-pack")),
        },
        Surface {
            name: "info/refs (receive-pack)",
            ask: |c, r| get(c, &format!("/{r}.git/info/refs?service=git-receive-pack")),
        },
        Surface {
            name: "upload-pack (clone)",
            ask: |c, r| {
                let target = c.dir.join(format!("clone-{}", r.replace('/', "-")));
                let _ = std::fs::remove_dir_all(&target);
                let url = format!("http://{}/{r}.git", c.addr);
                git_answer(
                    &c.dir,
                    &["clone", "-q", "--bare", &url, target.to_str().unwrap()],
                )
            },
        },
        Surface {
            name: "receive-pack (push) and pre-receive",
            ask: |c, r| {
                let url = format!("http://{}/{r}.git", c.addr);
                let branch = format!("{}:refs/heads/table-{}", c.commit, r.replace('/', "-"));
                git_answer(&c.work, &["push", "-q", &url, &branch])
            },
        },
        Surface {
            name: "web: repo home",
            ask: |c, r| get(c, &format!("/{r}")),
        },
        Surface {
            name: "web: tree",
            ask: |c, r| get(c, &format!("/{r}/-/tree/main")),
        },
        Surface {
            name: "web: blob",
            ask: |c, r| get(c, &format!("/{r}/-/blob/main/README.md")),
        },
        Surface {
            name: "web: raw",
            ask: |c, r| get(c, &format!("/{r}/-/raw/main/README.md")),
        },
        Surface {
            name: "web: commits",
            ask: |c, r| get(c, &format!("/{r}/-/commits/main")),
        },
        Surface {
            name: "web: commit",
            ask: |c, r| get(c, &format!("/{r}/-/commit/{}", c.commit)),
        },
        Surface {
            name: "web: branches",
            ask: |c, r| get(c, &format!("/{r}/-/branches")),
        },
        Surface {
            name: "web: tags",
            ask: |c, r| get(c, &format!("/{r}/-/tags")),
        },
        Surface {
            name: "web: activity",
            ask: |c, r| get(c, &format!("/{r}/-/activity")),
        },
        Surface {
            name: "web: archive",
            ask: |c, r| get(c, &format!("/{r}/-/archive/main.tar.gz")),
        },
        Surface {
            name: "api: activity",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/activity")),
        },
        Surface {
            name: "api: issues (read)",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/issues")),
        },
        Surface {
            name: "api: acl (read)",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/acl")),
        },
        Surface {
            name: "api: settings (read)",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/settings")),
        },
        Surface {
            name: "api: issue (write)",
            ask: |c, r| post_json(c, &format!("/api/v1/repos/{r}/issues"), r#"{"title":"t"}"#),
        },
        Surface {
            name: "api: issue edit (write)",
            ask: |c, r| {
                send_json(
                    c,
                    "PATCH",
                    &format!("/api/v1/repos/{r}/issues/1"),
                    r#"{"version":1,"title":"t2"}"#,
                )
            },
        },
        Surface {
            name: "api: comment (write)",
            ask: |c, r| {
                post_json(
                    c,
                    &format!("/api/v1/repos/{r}/issues/1/comments"),
                    r#"{"body":"c"}"#,
                )
            },
        },
        Surface {
            name: "api: acl (write)",
            ask: |c, r| {
                // Each repo's ACL as it stands, put again.
                let body = if r == "alice/private" {
                    r#"{"version":1,"visibility":"private"}"#
                } else {
                    r#"{"visibility":"public"}"#
                };
                send_json(c, "PUT", &format!("/api/v1/repos/{r}/acl"), body)
            },
        },
        Surface {
            name: "api: settings (write)",
            ask: |c, r| {
                send_json(
                    c,
                    "PUT",
                    &format!("/api/v1/repos/{r}/settings"),
                    r#"{"default_branch":"main"}"#,
                )
            },
        },
        // Reads of what the writes above made (issue #1, change #2).
        Surface {
            name: "api: issue (read)",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/issues/1")),
        },
        Surface {
            name: "api: issue comments (read)",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/issues/1/comments")),
        },
        Surface {
            name: "api: change (write)",
            ask: |c, r| {
                post_json(
                    c,
                    &format!("/api/v1/repos/{r}/changes"),
                    r#"{"title":"c","source_branch":"pages","target_branch":"main"}"#,
                )
            },
        },
        Surface {
            name: "api: change edit (write)",
            ask: |c, r| {
                send_json(
                    c,
                    "PATCH",
                    &format!("/api/v1/repos/{r}/changes/2"),
                    r#"{"version":1,"title":"c2"}"#,
                )
            },
        },
        Surface {
            name: "api: change comment (write)",
            ask: |c, r| {
                post_json(
                    c,
                    &format!("/api/v1/repos/{r}/changes/2/comments"),
                    r#"{"body":"c"}"#,
                )
            },
        },
        Surface {
            name: "api: changes (read)",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/changes")),
        },
        Surface {
            name: "api: change (read)",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/changes/2")),
        },
        Surface {
            name: "api: change comments (read)",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/changes/2/comments")),
        },
        Surface {
            name: "web: tree of a directory",
            ask: |c, r| get(c, &format!("/{r}/-/tree/main/docs")),
        },
        Surface {
            name: "web: commits of a path",
            ask: |c, r| get(c, &format!("/{r}/-/commits/main/docs")),
        },
        Surface {
            name: "web: home page listing",
            ask: |c, r| {
                // Listed is allowed; a repo the list leaves out reads as
                // missing (the home page is the one list of repos).
                let page = get(c, &format!("/?q={}", r.replace('/', "%2F")));
                let listed = page.status == 200 && page.body.contains(&format!("href=\"/{r}\""));
                Answer {
                    status: if listed { 200 } else { 404 },
                    body: String::new(),
                }
            },
        },
        Surface {
            name: "site root redirect",
            ask: |c, r| get(c, &format!("/{r}/-/site")),
        },
        Surface {
            name: "site by path",
            ask: |c, r| get(c, &format!("/{r}/-/site/")),
        },
        Surface {
            name: "site by domain",
            ask: |c, r| {
                let host = match r {
                    "alice/public" => "public.example.org",
                    "alice/private" => "private.example.org",
                    _ => "missing.example.org",
                };
                get_host(c, host, "/")
            },
        },
    ]
}

/// The expected answer of each surface: (public, private), with the push
/// switch off and on.
fn expected(surface: &str, anonymous_push: bool) -> (Expect, Expect) {
    use Expect::*;
    let switch = if anonymous_push { Allowed } else { Forbidden };
    match surface {
        "info/refs (receive-pack)"
        | "receive-pack (push) and pre-receive"
        | "api: issue (write)"
        | "api: issue edit (write)"
        | "api: comment (write)"
        | "api: acl (write)"
        | "api: settings (write)"
        | "api: change (write)"
        | "api: change edit (write)"
        | "api: change comment (write)" => (switch, switch),
        // The ACL applies to sites only, until accounts exist.
        "site by path" | "site by domain" | "site root redirect" => (Allowed, NotFound),
        _ => (Allowed, Allowed),
    }
}

fn publish(dir: &Path, server: &TestServer, repo: &str) {
    let work = dir.join(format!("work-{}", repo.replace('/', "-")));
    git_ok(dir, &["init", "-q", "-b", "main", work.to_str().unwrap()]);
    commit_file(&work, "README.md", b"# hello\n");
    commit_file(&work, "docs/guide.md", b"guide\n");
    let url = server.url(&format!("/{repo}.git"));
    git_ok(&work, &["push", "-q", &url, "main"]);
    git_ok(&work, &["checkout", "-q", "-b", "pages"]);
    commit_file(&work, "index.html", b"<p>site</p>\n");
    git_ok(&work, &["push", "-q", &url, "pages"]);
}

fn run_table(ctx: &Ctx, anonymous_push: bool) -> Vec<String> {
    let mut wrong = Vec::new();
    for surface in surfaces() {
        let (want_public, want_private) = expected(surface.name, anonymous_push);
        let public = (surface.ask)(ctx, "alice/public");
        let private = (surface.ask)(ctx, "alice/private");
        let missing = (surface.ask)(ctx, "alice/missing");
        // A repo dir that is a symlink to a repo outside the data dir is
        // no repo, on every surface.
        let escape = (surface.ask)(ctx, "alice/escape");
        if (
            escape.status,
            escape.body.replace("alice/escape", "alice/missing"),
        ) != (missing.status, missing.body.clone())
        {
            wrong.push(format!(
                "{}: a symlink leading out of the repos dir must read as a missing repo, got {} {}",
                surface.name,
                escape.status,
                escape.body.trim()
            ));
        }
        for (which, answer, want) in [
            ("public", &public, want_public),
            ("private", &private, want_private),
        ] {
            if answer.expect() != want {
                wrong.push(format!(
                    "{} / {which} / anonymous / push switch {}: expected {want:?}, got {} {}",
                    surface.name,
                    if anonymous_push { "on" } else { "off" },
                    answer.status,
                    answer.body.trim()
                ));
            }
        }
        // Whatever a surface answers a missing repo, it answers a hidden
        // one the same way, word for word but the name.
        assert_eq!(
            missing.expect(),
            Expect::NotFound,
            "{}: a missing repo must be a 404: {missing:?}",
            surface.name
        );
        if want_private == Expect::NotFound {
            // Asked again: the second answer may come from the site's warm
            // layer, and must still read as a missing repo.
            let again = (surface.ask)(ctx, "alice/private");
            assert_eq!(
                (
                    again.status,
                    again.body.replace("alice/private", "alice/missing")
                ),
                (missing.status, missing.body.clone()),
                "{}: a hidden repo asked again must read as a missing one",
                surface.name
            );
            assert_eq!(
                private.body.replace("alice/private", "alice/missing"),
                missing.body,
                "{}: a hidden repo must read exactly as a missing one",
                surface.name
            );
            assert_eq!(private.status, missing.status, "{}", surface.name);
        }
    }
    // The server's own surface: its counters name no repo and are open to
    // the anonymous principal (accounts will keep them for admins).
    let stats = get(ctx, "/api/v1/stats");
    if stats.expect() != Expect::Allowed || !stats.body.contains("\"site_cache\"") {
        wrong.push(format!(
            "stats / server / anonymous: expected Allowed, got {} {}",
            stats.status,
            stats.body.trim()
        ));
    }
    wrong
}

#[test]
fn every_surface_decides_access_the_same_way_and_hides_what_it_may_not_show() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for repo in ["alice/public", "alice/private"] {
        assert!(run_vole(&data, &["repo", "create", repo]).status.success());
    }
    let domains = [
        "--site-domain",
        "public.example.org=alice/public",
        "--site-domain",
        "private.example.org=alice/private",
        "--site-domain",
        "missing.example.org=alice/missing",
    ];
    let mut builder = TestServer::builder().data(&data).arg("--anonymous-push");
    for flag in domains {
        builder = builder.arg(flag);
    }
    let server = builder.start();
    for repo in ["alice/public", "alice/private"] {
        publish(dir.path(), &server, repo);
    }
    // alice/escape: a symlink to a copy of the public repo outside the
    // data dir (so every surface would find content through it).
    let outside = dir.path().join("outside.git");
    git_ok(
        dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            data.join("repos/alice/public.git").to_str().unwrap(),
            outside.to_str().unwrap(),
        ],
    );
    std::os::unix::fs::symlink(&outside, data.join("repos/alice/escape.git")).unwrap();
    let acl = r#"{"visibility":"private"}"#;
    let put = http(
        server.addr,
        &format!(
            "PUT /api/v1/repos/alice/private/acl HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}",
            acl.len()
        ),
        acl.as_bytes(),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    let commit = git_ok(
        &dir.path().join("work-alice-public"),
        &["rev-parse", "main"],
    )
    .trim()
    .to_string();

    let work = dir.path().join("work-alice-public");
    let ctx = Ctx {
        addr: server.addr,
        dir: dir.path().to_path_buf(),
        work: work.clone(),
        commit: commit.clone(),
    };
    // Anti-vacuity: the site really is there for the public repo, and the
    // table covers every surface.
    assert!(get(&ctx, "/alice/public/-/site/").body.contains("site"));
    assert_eq!(surfaces().len(), 37);
    let mut wrong = run_table(&ctx, true);
    server.stop();

    let mut builder = TestServer::builder().data(&data);
    for flag in domains {
        builder = builder.arg(flag);
    }
    let server = builder.start();
    let ctx = Ctx {
        addr: server.addr,
        dir: dir.path().to_path_buf(),
        work,
        commit,
    };
    wrong.extend(run_table(&ctx, false));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // One error type, two renderings: a page for the web UI, plain text
    // for git and the API, with the same status and message.
    let page = http_get(server.addr, "/alice/missing/-/tree/main");
    assert_eq!(page.status, 404);
    assert!(
        page.header("content-type")
            .is_some_and(|t| t.starts_with("text/html")),
        "{:?}",
        page.headers
    );
    assert!(
        page.text()
            .contains("There is no repository alice/missing."),
        "{}",
        page.text()
    );
    assert!(page.text().contains("<html"), "{}", page.text());
    let api = http_get(server.addr, "/api/v1/repos/alice/missing/issues");
    assert_eq!(api.status, 404);
    assert_eq!(
        api.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(api.text(), "repository alice/missing not found\n");
}
