//! Access on every surface, as a table: each surface that names a repo
//! (38 of them), for a public and a private repo, for every kind of
//! principal (anonymous; signed in without a role; member with read,
//! write or admin; the owner; a server admin; a read-scope token; a token
//! limited to another repo; the browser sessions of a non-member, a reader
//! and a repo admin, a signed-out one and one past its idle limit), gives
//! the expected answer; with the
//! anonymous-push switch on, the anonymous row again. A repo the principal
//! may not see is answered exactly as a missing one (status and body but
//! the name), asked twice (a site's second answer comes from its warm
//! layer), and so is a repo dir that is a symlink leading out of the
//! repos dir.
//!
//! The rules are `crates/access/src/`'s (its module doc): reading needs the repo
//! public or a role; pushing needs write; issues, change requests and
//! comments need an account that may read; the ACL and the settings need
//! admin; a token's scope caps what it may do and a token limited to
//! other repos is no more than anonymous here. Hidden is 401 to the
//! anonymous on git and the API (so git asks for credentials), 404 on the
//! web and sites and to anyone signed in. The settings page wants a
//! browser session (its forms carry the session's CSRF token): an admin
//! who asks with a credential of their own is sent to sign in.

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
    /// Who asks: `None` is anonymous.
    who: Option<Credential>,
    /// The server's admin, to read what a write surface replaces.
    admin: Credential,
}

/// A user name and a token, or a browser's session cookie.
#[derive(Clone)]
struct Credential {
    user: String,
    token: String,
    /// A session secret: sent as the session cookie (the token unused).
    session: Option<String>,
}

impl Ctx {
    /// The `Authorization` line of the principal, with its line end.
    fn auth(&self) -> String {
        match &self.who {
            None => String::new(),
            Some(Credential {
                session: Some(secret),
                ..
            }) => format!("Cookie: vole_session={secret}\r\n"),
            Some(c) => format!("{}\r\n", basic(&c.user, &c.token)),
        }
    }

    /// The URL of `repo` for git, with the credential in it.
    fn git_url(&self, repo: &str) -> String {
        match &self.who {
            // git has no cookie: a browser's session is no one to it.
            None
            | Some(Credential {
                session: Some(_), ..
            }) => format!("http://{}/{repo}.git", self.addr),
            Some(c) => format!("http://{}:{}@{}/{repo}.git", c.user, c.token, self.addr),
        }
    }
}

/// What a surface said: allowed or not, and the status and body it
/// answered with (for the missing-repo comparison).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    body: String,
    /// The response's headers but `date`, sorted (git answers: none).
    headers: Vec<(String, String)>,
}

/// The headers of `response` that must match between a hidden and a
/// missing repo: all but `date`.
fn comparable_headers(response: &HttpResponse) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = response
        .headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("date"))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    headers.sort();
    headers
}

/// Bases of the pull requests the table opens, one each.
static NEXT_BASE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

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
    let auth = ctx.auth();
    let response = http(
        ctx.addr,
        format!("GET {path} HTTP/1.1\r\n{}", auth.trim_end()).trim_end(),
        b"",
    );
    Answer {
        status: response.status,
        body: response.text(),
        headers: comparable_headers(&response),
    }
}

fn get_host(ctx: &Ctx, host: &str, path: &str) -> Answer {
    let response = http_raw(
        ctx.addr,
        format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\n{}Connection: close\r\n\r\n",
            ctx.auth()
        )
        .as_bytes(),
    );
    Answer {
        status: response.status,
        body: response.text(),
        headers: comparable_headers(&response),
    }
}

fn post_json(ctx: &Ctx, path: &str, body: &str) -> Answer {
    send_json(ctx, "POST", path, body)
}

fn send_json(ctx: &Ctx, method: &str, path: &str, body: &str) -> Answer {
    let response = http(
        ctx.addr,
        &format!(
            "{method} {path} HTTP/1.1\r\n{}Content-Type: application/json\r\nContent-Length: {}",
            ctx.auth(),
            body.len()
        ),
        body.as_bytes(),
    );
    Answer {
        status: response.status,
        body: response.text(),
        headers: comparable_headers(&response),
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
    } else if stderr.contains("returned error: 403") {
        403
    } else if stderr.contains("could not read Username") || stderr.contains("Authentication failed")
    {
        401
    } else if stderr.contains("not found") || stderr.contains("returned error: 404") {
        404
    } else {
        panic!("git {args:?} failed in an unexpected way: {stderr}")
    };
    Answer {
        status,
        body: String::new(),
        headers: Vec::new(),
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
                let url = c.git_url(r);
                git_answer(
                    &c.dir,
                    &["clone", "-q", "--bare", &url, target.to_str().unwrap()],
                )
            },
        },
        Surface {
            name: "receive-pack (push) and pre-receive",
            ask: |c, r| {
                let url = c.git_url(r);
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
                let issue = current(c, &format!("/api/v1/repos/{r}/issues/1"));
                let body = serde_json::json!({"version": issue["version"].as_u64().unwrap_or(1), "title": "t2"});
                send_json(
                    c,
                    "PATCH",
                    &format!("/api/v1/repos/{r}/issues/1"),
                    &body.to_string(),
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
                // The repo's ACL as it stands, put again (at its current
                // version, as read by the server's admin).
                let acl = current(c, &format!("/api/v1/repos/{r}/acl"));
                let body = serde_json::json!({
                    "version": acl["version"].as_u64().unwrap_or(0),
                    "visibility": acl["visibility"].as_str().unwrap_or("public"),
                    "members": acl["members"].as_array().cloned().unwrap_or_default(),
                });
                send_json(
                    c,
                    "PUT",
                    &format!("/api/v1/repos/{r}/acl"),
                    &body.to_string(),
                )
            },
        },
        Surface {
            name: "api: settings (write)",
            ask: |c, r| {
                let settings = current(c, &format!("/api/v1/repos/{r}/settings"));
                let body = serde_json::json!({
                    "version": settings["version"].as_u64().unwrap_or(0),
                    "default_branch": "main",
                });
                send_json(
                    c,
                    "PUT",
                    &format!("/api/v1/repos/{r}/settings"),
                    &body.to_string(),
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
                    &format!("/api/v1/repos/{r}/pulls"),
                    // Another base each time: a second open pull request
                    // of the same branches is a 409.
                    &format!(
                        r#"{{"title":"c","head":"pages","base":"b{}"}}"#,
                        NEXT_BASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    ),
                )
            },
        },
        Surface {
            name: "api: change edit (write)",
            ask: |c, r| {
                let change = current(c, &format!("/api/v1/repos/{r}/pulls/2"));
                let body = serde_json::json!({"version": change["version"].as_u64().unwrap_or(1), "title": "c2"});
                send_json(
                    c,
                    "PATCH",
                    &format!("/api/v1/repos/{r}/pulls/2"),
                    &body.to_string(),
                )
            },
        },
        Surface {
            name: "api: change comment (write)",
            ask: |c, r| {
                post_json(
                    c,
                    &format!("/api/v1/repos/{r}/issues/2/comments"),
                    r#"{"body":"c"}"#,
                )
            },
        },
        Surface {
            name: "api: changes (read)",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/pulls")),
        },
        Surface {
            name: "api: change (read)",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/pulls/2")),
        },
        Surface {
            name: "api: change comments (read)",
            ask: |c, r| get(c, &format!("/api/v1/repos/{r}/issues/2/comments")),
        },
        Surface {
            name: "web: settings",
            ask: |c, r| {
                // A visitor who must sign in first is sent to sign in:
                // the web's 401.
                let mut page = get(c, &format!("/{r}/-/settings"));
                let to_sign_in = page.status == 303
                    && page
                        .headers
                        .iter()
                        .any(|(k, v)| k == "location" && v.starts_with("/-/login?next="));
                if to_sign_in {
                    page.status = 401;
                }
                page
            },
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
                    headers: Vec::new(),
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

/// Who asks, in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Anonymous,
    /// Signed in, no role in the repos.
    Outsider,
    Reader,
    Writer,
    /// A member with the admin role.
    RepoAdmin,
    /// The repos' owner (`alice`).
    Owner,
    ServerAdmin,
    /// The owner's token of scope read.
    ReadToken,
    /// The owner's token of scope write.
    WriteToken,
    /// The owner's admin token limited to another repo.
    OtherRepoToken,
    /// The reader's browser session: the reader on the web pages and the
    /// UI-origin sites, no one anywhere else (git and the API never read
    /// the cookie).
    ReaderSession,
    /// The outsider's browser session.
    OutsiderSession,
    /// The repo admin's browser session (the settings page wants one).
    AdminSession,
    /// The reader's session after its sign-out: no one.
    EndedSession,
    /// A session of the reader's past its idle limit (aged in the
    /// sessions file while the server was down): no one.
    ExpiredSession,
}

impl Who {
    /// Who a principal is on `surface`: a session is its user on the web
    /// pages and the sites of the UI's origin, and anonymous elsewhere (git,
    /// the API, a site's own domain, which a browser never sends the UI's
    /// host-only cookie); the others are themselves.
    fn on(self, surface: &str) -> Who {
        let page = surface.starts_with("web: ")
            || (surface.starts_with("site ") && surface != "site by domain");
        match self {
            Who::ReaderSession if page => Who::Reader,
            Who::OutsiderSession if page => Who::Outsider,
            Who::AdminSession if page => Who::RepoAdmin,
            Who::ReaderSession
            | Who::OutsiderSession
            | Who::AdminSession
            | Who::EndedSession
            | Who::ExpiredSession => Who::Anonymous,
            other => other,
        }
    }
}

const EVERYONE: [Who; 15] = [
    Who::Anonymous,
    Who::Outsider,
    Who::Reader,
    Who::Writer,
    Who::RepoAdmin,
    Who::Owner,
    Who::ServerAdmin,
    Who::ReadToken,
    Who::WriteToken,
    Who::OtherRepoToken,
    Who::ReaderSession,
    Who::OutsiderSession,
    Who::AdminSession,
    Who::EndedSession,
    Who::ExpiredSession,
];

/// What a surface does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Git or the API reading.
    Read,
    /// A web page or a site: a hidden repo is its plain 404.
    Page,
    Push,
    /// Issues, change requests, comments.
    WriteMeta,
    /// Editing an issue or change request: its author or a writer. (In
    /// the table's order, #1 and #2 of the public repo are the anonymous
    /// pusher's, the private repo's are the reader's.)
    Edit,
    /// The ACL and the settings.
    Administer,
    /// The settings page: a page (a hidden repo is its plain 404) that
    /// only the repo's admins open.
    AdminPage,
}

fn kind_of(surface: &str) -> Kind {
    match surface {
        "info/refs (receive-pack)" | "receive-pack (push) and pre-receive" => Kind::Push,
        "api: acl (write)" | "api: settings (write)" | "api: acl (read)" => Kind::Administer,
        "api: issue edit (write)" | "api: change edit (write)" => Kind::Edit,
        "web: settings" => Kind::AdminPage,
        s if s.starts_with("api: ") && s.ends_with("(write)") => Kind::WriteMeta,
        s if s.starts_with("web: ") || s.starts_with("site ") => Kind::Page,
        _ => Kind::Read,
    }
}

/// The expected answer of a surface to `who`: (public, private).
fn expected(surface: &str, who: Who, anonymous_push: bool) -> (Expect, Expect) {
    use Expect::*;
    let kind = kind_of(surface);
    // The settings page's forms need a session's CSRF token: a request
    // with a credential of its own that may administer is sent to sign in.
    let session = matches!(
        who,
        Who::ReaderSession | Who::OutsiderSession | Who::AdminSession
    );
    let who = who.on(surface);
    // 1 read, 2 write, 3 admin.
    let role = match who {
        Who::Anonymous | Who::Outsider | Who::OtherRepoToken => 0,
        Who::Reader => 1,
        Who::Writer => 2,
        Who::RepoAdmin | Who::Owner | Who::ServerAdmin | Who::ReadToken | Who::WriteToken => 3,
        Who::ReaderSession
        | Who::OutsiderSession
        | Who::AdminSession
        | Who::EndedSession
        | Who::ExpiredSession => {
            unreachable!("Who::on gave the principal it is on this surface")
        }
    };
    let scope = match who {
        Who::ReadToken => 1,
        Who::WriteToken => 2,
        _ => 3,
    };
    let limited = who == Who::OtherRepoToken;
    let anonymous = who == Who::Anonymous;
    // git answers the anonymous a hidden repo with 401 (git then asks for
    // credentials); the API and the pages with the missing repo's 404.
    let git_side = !surface.starts_with("api: ");
    let cell = |public: bool| {
        if !public && role == 0 {
            return if anonymous && git_side && kind != Kind::Page && kind != Kind::AdminPage {
                Unauthenticated
            } else {
                NotFound
            };
        }
        let needs = |need_role: u8, need_scope: u8| {
            if anonymous {
                Unauthenticated
            } else if limited || role < need_role || scope < need_scope {
                Forbidden
            } else {
                Allowed
            }
        };
        match kind {
            Kind::Read | Kind::Page => Allowed,
            Kind::Push | Kind::WriteMeta | Kind::Edit if anonymous && anonymous_push => Allowed,
            Kind::Push => needs(2, 2),
            Kind::WriteMeta => needs(0, 2),
            Kind::Edit => match needs(0, 2) {
                Allowed if role >= 2 || (who == Who::Reader && !public) => Allowed,
                Allowed => Forbidden,
                other => other,
            },
            Kind::Administer => needs(3, 3),
            Kind::AdminPage => match needs(3, 3) {
                Allowed if !session => Unauthenticated,
                other => other,
            },
        }
    };
    (cell(true), cell(false))
}

/// How a hidden or missing repo reads to `who` on `surface`.
fn hidden(surface: &str, who: Who) -> Expect {
    if who.on(surface) == Who::Anonymous
        && !surface.starts_with("api: ")
        && !matches!(kind_of(surface), Kind::Page | Kind::AdminPage)
    {
        Expect::Unauthenticated
    } else {
        Expect::NotFound
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

fn run_table(ctx: &Ctx, who: Who, anonymous_push: bool) -> Vec<String> {
    let mut wrong = Vec::new();
    for surface in surfaces() {
        let (want_public, want_private) = expected(surface.name, who, anonymous_push);
        let want_missing = hidden(surface.name, who);
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
                "{} / {who:?}: a symlink leading out of the repos dir must read as a missing repo, got {} {}",
                surface.name,
                escape.status,
                escape.body.trim()
            ));
        }
        for (which, answer, want) in [
            ("public", &public, want_public),
            ("private", &private, want_private),
            ("missing", &missing, want_missing),
        ] {
            if answer.expect() != want {
                wrong.push(format!(
                    "{} / {which} / {who:?} / anonymous push {}: expected {want:?}, got {} {}",
                    surface.name,
                    if anonymous_push { "on" } else { "off" },
                    answer.status,
                    answer.body.trim()
                ));
            }
        }
        // Whatever a surface answers a missing repo, it answers a hidden
        // one the same way, word for word but the name.
        if want_private == want_missing && want_missing != Expect::Allowed {
            // Asked again: the second answer may come from the site's warm
            // layer, and must still read as a missing repo.
            let again = (surface.ask)(ctx, "alice/private");
            for (what, answer) in [("first", &private), ("second", &again)] {
                if (
                    answer.status,
                    answer.body.replace("alice/private", "alice/missing"),
                    &answer.headers,
                ) != (missing.status, missing.body.clone(), &missing.headers)
                {
                    wrong.push(format!(
                        "{} / {who:?}: a hidden repo asked a {what} time must read exactly as a missing one: {} {:?} {:?} vs {} {:?} {:?}",
                        surface.name,
                        answer.status,
                        answer.body,
                        answer.headers,
                        missing.status,
                        missing.body,
                        missing.headers
                    ));
                }
            }
        }
    }
    // The server's own surface: its counters say how many repos there
    // are, private ones too: a server admin's.
    let stats = get(ctx, "/api/v1/stats");
    let want = match who.on("api: stats") {
        Who::ServerAdmin => Expect::Allowed,
        Who::Anonymous => Expect::Unauthenticated,
        _ => Expect::NotFound,
    };
    if stats.expect() != want || (want == Expect::Allowed && !stats.body.contains("\"site_cache\""))
    {
        wrong.push(format!(
            "stats / {who:?}: expected {want:?}, got {} {}",
            stats.status,
            stats.body.trim()
        ));
    }
    wrong
}

/// The document at `path` as the server's admin reads it (`Null` when
/// there is none).
fn current(ctx: &Ctx, path: &str) -> serde_json::Value {
    let admin = Ctx {
        who: Some(ctx.admin.clone()),
        ..ctx.clone_for(None)
    };
    let answer = get(&admin, path);
    serde_json::from_str(&answer.body).unwrap_or(serde_json::Value::Null)
}

/// The password of the users who also sign in from a browser.
const SESSION_PASSWORD: &str = "a browser password";

/// Users and tokens of the table, made before the server starts.
struct People {
    by_who: Vec<(Who, Credential)>,
    admin: Credential,
}

fn people(data: &Path) -> People {
    let token = |user: &str, admin: bool, scope: &str, extra: &[&str]| Credential {
        user: user.to_string(),
        token: user_token(data, user, admin, scope, extra),
        session: None,
    };
    let admin = token("root", true, "admin", &[]);
    let by_who = vec![
        (Who::Outsider, token("oscar", false, "admin", &[])),
        (Who::Reader, token("ann", false, "admin", &[])),
        (Who::Writer, token("will", false, "admin", &[])),
        (Who::RepoAdmin, token("ada", false, "admin", &[])),
        (Who::Owner, token("alice", false, "admin", &[])),
        (Who::ServerAdmin, admin.clone()),
        (Who::ReadToken, token("alice", false, "read", &[])),
        (Who::WriteToken, token("alice", false, "write", &[])),
        (
            Who::OtherRepoToken,
            token("alice", false, "admin", &["--repo", "alice/other"]),
        ),
    ];
    for user in ["ann", "oscar", "ada"] {
        set_password(data, user, SESSION_PASSWORD);
    }
    People { by_who, admin }
}

impl Ctx {
    fn clone_for(&self, who: Option<Credential>) -> Ctx {
        Ctx {
            addr: self.addr,
            dir: self.dir.clone(),
            work: self.work.clone(),
            commit: self.commit.clone(),
            who,
            admin: self.admin.clone(),
        }
    }
}

/// Moves every session of `user` in the sessions file of `data` back by
/// `seconds` (began and last seen), as if it had idled that long; the
/// server must be down.
fn age_sessions(data: &std::path::Path, user: &str, seconds: u64) {
    let path = data.join("sessions.jsonl");
    let lines = std::fs::read_to_string(&path).expect("the sessions file");
    let mut ids = std::collections::HashSet::new();
    let mut aged = String::new();
    for line in lines.lines() {
        let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
        if record["op"] == "begin" && record["user"] == user {
            ids.insert(record["id"].as_str().unwrap().to_string());
        }
        let id = record["id"].as_str().unwrap_or_default().to_string();
        if ids.contains(&id) {
            for field in ["began", "seen", "at"] {
                if let Some(at) = record[field].as_u64() {
                    record[field] = (at - seconds).into();
                }
            }
        }
        aged.push_str(&format!("{record}\n"));
    }
    assert!(!ids.is_empty(), "no session of {user} in:\n{lines}");
    std::fs::write(&path, aged).unwrap();
}

#[test]
fn every_surface_decides_access_the_same_way_and_hides_what_it_may_not_show() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for repo in ["alice/public", "alice/private"] {
        assert!(run_vole(&data, &["repo", "create", repo]).status.success());
    }
    let people = people(&data);
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
        who: Some(people.admin.clone()),
        admin: people.admin.clone(),
    };
    // The members, on both repos; one of them private.
    for (repo, visibility) in [("alice/public", "public"), ("alice/private", "private")] {
        let acl = serde_json::json!({
            "visibility": visibility,
            "members": [
                {"name": "ann", "role": "read"},
                {"name": "will", "role": "write"},
                {"name": "ada", "role": "admin"},
            ],
        });
        let put = send_json(
            &ctx,
            "PUT",
            &format!("/api/v1/repos/{repo}/acl"),
            &acl.to_string(),
        );
        assert_eq!(put.status, 200, "{}", put.body);
    }
    // Anti-vacuity: the site really is there for the public repo, and the
    // table covers every surface and every principal.
    assert!(get(&ctx, "/alice/public/-/site/").body.contains("site"));
    assert_eq!(surfaces().len(), 38);
    assert_eq!(people.by_who.len() + 1 + 5, EVERYONE.len());
    let mut wrong = run_table(&ctx.clone_for(None), Who::Anonymous, true);
    // A session of the reader's that opens the private repo now, and is
    // past its idle limit once the server is back.
    let expiring = web_sign_in(server.addr, "ann", SESSION_PASSWORD);
    let mut expired = people
        .by_who
        .iter()
        .find(|(_, c)| c.user == "ann")
        .map(|(_, c)| c.clone())
        .unwrap();
    expired.session = Some(expiring);
    let live = get(&ctx.clone_for(Some(expired.clone())), "/alice/private");
    assert_eq!(live.status, 200, "anti-vacuity: the session works");
    server.stop();
    age_sessions(&data, "ann", 15 * 86_400);

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
        who: None,
        admin: people.admin.clone(),
    };
    wrong.extend(run_table(&ctx, Who::Anonymous, false));
    // Browser sessions: the reader's and the outsider's, and one of the
    // reader's after its sign-out.
    let session = |user: &str| {
        let mut credential = people
            .by_who
            .iter()
            .find(|(_, c)| c.user == user)
            .map(|(_, c)| c.clone())
            .unwrap();
        credential.session = Some(web_sign_in(server.addr, user, SESSION_PASSWORD));
        credential
    };
    let ended = session("ann");
    web_sign_out(server.addr, ended.session.as_deref().unwrap());
    let sessions = [
        (Who::ReaderSession, session("ann")),
        (Who::OutsiderSession, session("oscar")),
        (Who::AdminSession, session("ada")),
        (Who::EndedSession, ended),
        (Who::ExpiredSession, expired),
    ];
    for (who, credential) in &sessions {
        wrong.extend(run_table(
            &ctx.clone_for(Some(credential.clone())),
            *who,
            false,
        ));
    }
    for (who, credential) in &people.by_who {
        wrong.extend(run_table(
            &ctx.clone_for(Some(credential.clone())),
            *who,
            false,
        ));
    }
    assert!(
        wrong.is_empty(),
        "{} wrong cells:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // One error type, three renderings: a page for the web UI, plain
    // text for git, Gitea's JSON for the API, with the same status and
    // message.
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
    let api = http(
        server.addr,
        &format!(
            "GET /api/v1/repos/alice/missing/issues HTTP/1.1\r\n{}",
            basic(&people.admin.user, &people.admin.token)
        ),
        b"",
    );
    assert_eq!(api.status, 404);
    assert_eq!(api.header("content-type"), Some("application/json"));
    assert_eq!(
        api.text(),
        r#"{"message":"repository alice/missing not found","url":""}"#,
        "not Gitea's error shape"
    );
}
