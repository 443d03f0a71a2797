//! Accounts, tokens and the rules they meet, with real git and real HTTP:
//! who may clone and push what, with which credential; what a refused or
//! revoked credential gets; protected branches; brute force throttled per
//! address (from real loopback addresses, and behind a trusted proxy,
//! also one reaching an IPv6 wildcard listener);
//! the system repo out of every route's reach; the audit records; repos
//! created and deleted through the API; and hidden and missing repos
//! answered alike, in time too.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

/// A server with `alice/public` and `alice/private` (both holding one
/// commit on main, `alice/private` private), the users `alice` (owner),
/// `bob` (no role) and `root` (server admin), and `extra` flags.
/// The shared fixture on `alice/public` and `alice/private`, both pushed
/// to, with alice's tokens by scope, bob's and a server admin's.
struct Fixture {
    forge: Forge,
    /// alice's tokens by scope.
    read: String,
    write: String,
    admin: String,
    bob: String,
    root: String,
    work: std::path::PathBuf,
}

impl std::ops::Deref for Fixture {
    type Target = Forge;
    fn deref(&self) -> &Forge {
        &self.forge
    }
}

impl Fixture {
    fn start(extra: &[&str]) -> Fixture {
        Fixture::start_on("127.0.0.1:0", extra)
    }

    /// As [`Fixture::start`], listening on `listen` (reached at 127.0.0.1
    /// when it is a wildcard address).
    fn start_on(listen: &str, extra: &[&str]) -> Fixture {
        let mut forge = Forge::new(&["alice/public"]);
        forge.create_repo(&["alice/private", "--private"]);
        let data = forge.data.clone();
        let read = user_token(&data, "alice", false, "read", &[]);
        let write = user_token(&data, "alice", false, "write", &[]);
        let admin = user_token(&data, "alice", false, "admin", &[]);
        let bob = user_token(&data, "bob", false, "write", &[]);
        let root = user_token(&data, "root", true, "admin", &[]);
        forge.serve_on(listen, extra);
        let work = worktree(&forge.dir, "work");
        let fixture = Fixture {
            forge,
            read,
            write,
            admin,
            bob,
            root,
            work,
        };
        for repo in ["alice/public", "alice/private"] {
            let url = fixture.url_as("alice", &fixture.write, repo);
            git_ok(&fixture.work, &["push", "-q", &url, "HEAD:main"]);
        }
        fixture
    }

    fn url(&self, repo: &str) -> String {
        self.forge.url(&format!("/{repo}.git"))
    }

    fn url_as(&self, user: &str, token: &str, repo: &str) -> String {
        format!("http://{user}:{token}@{}/{repo}.git", self.server().addr)
    }

    fn get_as(&self, path: &str, auth: Option<&str>) -> HttpResponse {
        let head = match auth {
            Some(auth) => format!("GET {path} HTTP/1.1\r\n{auth}"),
            None => format!("GET {path} HTTP/1.1"),
        };
        http(self.server().addr, &head, b"")
    }

    fn api(&self, method: &str, path: &str, token: &str, body: Option<&Value>) -> (u16, Value) {
        let payload = body.map(|b| b.to_string()).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}",
            payload.len()
        );
        let response = http(self.server().addr, &head, payload.as_bytes());
        let value = serde_json::from_slice(&response.body)
            .unwrap_or_else(|_| Value::String(response.text()));
        (response.status, value)
    }

    fn log_dump(&self) -> String {
        text(&run_vole(&self.server().data, &["log", "dump"]).stdout)
    }
}

/// One request from the loopback address `source` (the whole of
/// 127.0.0.0/8 is this machine's), so a test can be several clients.
fn http_from(source: IpAddr, addr: SocketAddr, head: &str) -> HttpResponse {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&SocketAddr::new(source, 0).into())
        .expect("bind a loopback source address");
    socket.connect(&addr.into()).expect("connect");
    let mut stream: std::net::TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request = format!("{head}\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    HttpResponse {
        status,
        headers: head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect(),
        body: body.as_bytes().to_vec(),
    }
}

fn loopback(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

#[test]
fn who_may_clone_and_push_what_with_which_credential() {
    let forge = Fixture::start(&[]);
    let dir = forge.dir.as_path();

    // Anonymous clone of a public repo needs nothing.
    let clone = git(
        dir,
        &["clone", "-q", &forge.url("alice/public"), "anon-public"],
    );
    assert!(clone.status.success(), "{}", text(&clone.stderr));

    // A private repo and a missing one: the same 401, header for header
    // and byte for byte, and git asks for credentials for both.
    let ask = |repo: &str| {
        forge.get_as(
            &format!("/{repo}.git/info/refs?service=git-upload-pack"),
            None,
        )
    };
    let (private, missing) = (ask("alice/private"), ask("alice/missing"));
    assert_eq!(private.status, 401, "{}", private.text());
    assert_eq!(
        private.header("www-authenticate"),
        Some("Basic realm=\"vole\"")
    );
    let comparable = |r: &HttpResponse| {
        let mut headers: Vec<(String, String)> = r
            .headers
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("date"))
            .cloned()
            .collect();
        headers.sort();
        (r.status, headers, r.body.clone())
    };
    assert_eq!(
        comparable(&private),
        comparable(&missing),
        "a private repo can be told from a missing one"
    );
    for repo in ["alice/private", "alice/missing"] {
        let cloned = git(dir, &["clone", "-q", &forge.url(repo), "anon"]);
        assert!(!cloned.status.success());
        assert!(
            text(&cloned.stderr).contains("could not read Username"),
            "{repo}: git was not asked for credentials: {}",
            text(&cloned.stderr)
        );
    }

    // git with a credential helper answers the 401 and clones it.
    let store = dir.join("credentials");
    std::fs::write(
        &store,
        format!("http://alice:{}@{}\n", forge.read, forge.server().addr),
    )
    .unwrap();
    let helper = format!("credential.helper=store --file={}", store.display());
    let cloned = git(
        dir,
        &[
            "-c",
            &helper,
            "clone",
            "-q",
            &forge.url("alice/private"),
            "helped",
        ],
    );
    assert!(cloned.status.success(), "{}", text(&cloned.stderr));
    assert!(dir.join("helped/README.md").exists() || dir.join("helped/.git").exists());

    // Signed in but no role: the private repo is not found (404), like a
    // missing one.
    for repo in ["alice/private", "alice/missing"] {
        let cloned = git(
            dir,
            &["clone", "-q", &forge.url_as("bob", &forge.bob, repo), "bob"],
        );
        assert!(!cloned.status.success());
        let err = text(&cloned.stderr);
        assert!(err.contains("not found"), "{repo}: {err}");
    }

    // Anonymous push: 401 (git asks for credentials), nothing moved.
    let before = ref_value(&forge.bare("alice/public"), "refs/heads/main");
    commit_file(&forge.work, "second.txt", b"second\n");
    let pushed = git(
        &forge.work,
        &["push", &forge.url("alice/public"), "HEAD:main"],
    );
    assert!(!pushed.status.success());
    assert!(text(&pushed.stderr).contains("could not read Username"));

    // A read token: 403, with a message git shows its user.
    let pushed = git(
        &forge.work,
        &[
            "push",
            &forge.url_as("alice", &forge.read, "alice/public"),
            "HEAD:main",
        ],
    );
    assert!(!pushed.status.success());
    let err = text(&pushed.stderr);
    assert!(
        err.contains("remote: this token may only read"),
        "git's user is not told why: {err}"
    );
    // Signed in, no role in a public repo: may read, may not push.
    let pushed = git(
        &forge.work,
        &[
            "push",
            &forge.url_as("bob", &forge.bob, "alice/public"),
            "HEAD:main",
        ],
    );
    assert!(!pushed.status.success());
    assert!(
        text(&pushed.stderr).contains("remote: bob may read alice/public but not push"),
        "{}",
        text(&pushed.stderr)
    );
    assert_eq!(
        ref_value(&forge.bare("alice/public"), "refs/heads/main"),
        before,
        "a refused push moved main"
    );

    // A write token pushes; the log records who.
    let pushed = git(
        &forge.work,
        &[
            "push",
            "-q",
            &forge.url_as("alice", &forge.write, "alice/public"),
            "HEAD:main",
        ],
    );
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let head = git_ok(&forge.work, &["rev-parse", "HEAD"])
        .trim()
        .to_string();
    assert_eq!(
        ref_value(&forge.bare("alice/public"), "refs/heads/main").as_deref(),
        Some(head.as_str())
    );
    let dump = forge.log_dump();
    let line = dump
        .lines()
        .find(|l| l.contains("alice/public refs/heads/main") && l.contains(&head[..12]))
        .unwrap_or_else(|| panic!("the push is not in the log: {dump}"));
    assert!(line.contains("actor=alice@127.0.0.1"), "{line}");

    // A token limited to another repo: refused here, works there.
    let limited = user_token(
        &forge.server().data,
        "alice",
        false,
        "write",
        &["--repo", "alice/private"],
    );
    commit_file(&forge.work, "third.txt", b"third\n");
    let pushed = git(
        &forge.work,
        &[
            "push",
            &forge.url_as("alice", &limited, "alice/public"),
            "HEAD:main",
        ],
    );
    assert!(!pushed.status.success());
    assert!(
        text(&pushed.stderr).contains("limited to other repositories"),
        "{}",
        text(&pushed.stderr)
    );
    let pushed = git(
        &forge.work,
        &[
            "push",
            "-q",
            &forge.url_as("alice", &limited, "alice/private"),
            "HEAD:main",
        ],
    );
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
}

#[test]
fn a_revoked_token_and_a_disabled_user_are_refused_on_the_next_request() {
    let forge = Fixture::start(&[]);
    let data = &forge.server().data;
    let bearer = |token: &str| format!("Authorization: Bearer {token}");
    let private = "/api/v1/repos/alice/private/issues";
    // Anti-vacuity: the token works first.
    assert_eq!(
        forge.get_as(private, Some(&bearer(&forge.read))).status,
        200
    );
    let listed = text(&run_vole(data, &["token", "list", "--user", "alice"]).stdout);
    let name = listed
        .lines()
        .find(|l| l.contains("\tread\t"))
        .and_then(|l| l.split('\t').next())
        .unwrap()
        .to_string();
    assert!(!listed.contains(&forge.read), "a listing shows a secret");
    let revoked = run_vole(data, &["token", "revoke", &name]);
    assert!(revoked.status.success(), "{}", text(&revoked.stderr));
    let refused = forge.get_as(private, Some(&bearer(&forge.read)));
    assert_eq!(
        refused.status,
        401,
        "a revoked token was accepted on the next request: {}",
        refused.text()
    );
    assert_eq!(
        refused.header("www-authenticate"),
        Some("Basic realm=\"vole\"")
    );
    // alice's other tokens still work; disabling her ends them all.
    assert_eq!(
        forge.get_as(private, Some(&bearer(&forge.write))).status,
        200
    );
    let disabled = run_vole(data, &["user", "disable", "alice"]);
    assert!(disabled.status.success(), "{}", text(&disabled.stderr));
    for token in [&forge.write, &forge.admin] {
        assert_eq!(forge.get_as(private, Some(&bearer(token))).status, 401);
    }
    let cloned = git(
        forge.dir.as_path(),
        &[
            "clone",
            "-q",
            &forge.url_as("alice", &forge.write, "alice/private"),
            "x",
        ],
    );
    assert!(!cloned.status.success());
    let dump = forge.log_dump();
    assert!(
        dump.lines().any(|l| l.starts_with("audit ")
            && l.contains("user_changed")
            && l.contains("target=alice")
            && l.contains("disabled")),
        "the user change is not audited:\n{dump}"
    );
    // An expired token: refused.
    // Long enough to be used once even on a loaded machine (making the
    // token runs a CLI process), short enough to wait out.
    let short = user_token(data, "bob", false, "read", &["--expires", "4s"]);
    assert_eq!(
        forge
            .get_as("/api/v1/repos/alice/public/issues", Some(&bearer(&short)))
            .status,
        200
    );
    std::thread::sleep(Duration::from_millis(4500));
    assert_eq!(
        forge
            .get_as("/api/v1/repos/alice/public/issues", Some(&bearer(&short)))
            .status,
        401
    );
}

#[test]
fn protected_branches_refuse_force_push_and_delete_with_a_reason_and_move_nothing() {
    let forge = Fixture::start(&[]);
    let data = &forge.server().data;
    // will may write; the repo's admin protects main.
    let will = user_token(data, "will", false, "write", &[]);
    let (status, acl) = forge.api(
        "PUT",
        "/api/v1/repos/alice/public/acl",
        &forge.admin,
        Some(&json!({"visibility": "public", "members": [{"name": "will", "role": "write"}]})),
    );
    assert_eq!(status, 200, "{acl}");
    // A write token may not change the settings: admin only.
    let settings = json!({"default_branch": "main", "protected_branches": ["main"]});
    let (status, _) = forge.api(
        "PUT",
        "/api/v1/repos/alice/public/settings",
        &will,
        Some(&settings),
    );
    assert_eq!(status, 403);
    let (status, body) = forge.api(
        "PUT",
        "/api/v1/repos/alice/public/settings",
        &forge.admin,
        Some(&settings),
    );
    assert_eq!(status, 200, "{body}");
    let main = ref_value(&forge.bare("alice/public"), "refs/heads/main");
    let url = forge.url_as("will", &will, "alice/public");
    // A force-push: an unrelated history.
    let other = worktree(forge.dir.as_path(), "other");
    git_ok(&other, &["checkout", "-q", "--orphan", "unrelated"]);
    commit_file(&other, "other.txt", b"unrelated\n");
    let forced = git(&other, &["push", "--force", &url, "HEAD:main"]);
    assert!(!forced.status.success());
    let err = text(&forced.stderr);
    assert!(
        err.contains("remote:") && err.contains("branch main is protected: only fast-forward"),
        "{err}"
    );
    let deleted = git(&forge.work, &["push", &url, ":main"]);
    assert!(!deleted.status.success());
    let err = text(&deleted.stderr);
    assert!(
        err.contains("remote:") && err.contains("cannot be deleted"),
        "{err}"
    );
    assert_eq!(
        ref_value(&forge.bare("alice/public"), "refs/heads/main"),
        main,
        "main moved"
    );
    // A fast-forward by a writer goes in; with admins-only protection it
    // does not, and the admin's does.
    commit_file(&forge.work, "ff.txt", b"ff\n");
    assert!(
        git(&forge.work, &["push", "-q", &url, "HEAD:main"])
            .status
            .success()
    );
    let (status, _) = forge.api(
        "PUT",
        "/api/v1/repos/alice/public/settings",
        &forge.admin,
        Some(&json!({"version": 1, "default_branch": "main", "protected_branches": ["main"], "protected_admins_only": true})),
    );
    assert_eq!(status, 200);
    commit_file(&forge.work, "ff2.txt", b"ff2\n");
    let pushed = git(&forge.work, &["push", &url, "HEAD:main"]);
    assert!(!pushed.status.success());
    assert!(
        text(&pushed.stderr).contains("only admins of alice/public may push to it"),
        "{}",
        text(&pushed.stderr)
    );
    let admin_url = forge.url_as("alice", &forge.admin, "alice/public");
    let pushed = git(&forge.work, &["push", "-q", &admin_url, "HEAD:main"]);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
}

#[test]
fn failed_sign_ins_are_throttled_per_address_and_the_right_password_elsewhere_works() {
    let forge = Fixture::start(&[
        "--password-auth",
        "--auth-failures",
        "5",
        "--auth-failure-window",
        "10m",
    ]);
    let mut set = vole(&forge.server().data)
        .args(["user", "passwd", "alice", "--password-stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    set.stdin
        .take()
        .unwrap()
        .write_all(b"correct horse battery\n")
        .unwrap();
    let set = wait_output(set, Duration::from_secs(30));
    assert!(set.status.success(), "{}", text(&set.stderr));
    let addr = forge.server().addr;
    let path = "/api/v1/repos/alice/private/issues";
    let attempt = |from: u8, password: &str| {
        http_from(
            loopback(from),
            addr,
            &format!("GET {path} HTTP/1.1\r\n{}", basic("alice", password)),
        )
    };
    // Anti-vacuity: the password works.
    assert_eq!(attempt(1, "correct horse battery").status, 200);
    let mut statuses = Vec::new();
    for i in 0..50 {
        statuses.push(attempt(1, &format!("wrong {i}")).status);
    }
    assert_eq!(
        &statuses[..5],
        &[401; 5],
        "the first --auth-failures failures must be plain 401s: {statuses:?}"
    );
    assert!(
        statuses[5..].iter().all(|s| *s == 429),
        "failed sign-ins past --auth-failures were not throttled (429): {statuses:?}"
    );
    let throttled = attempt(1, "wrong again");
    assert!(
        throttled
            .header("retry-after")
            .is_some_and(|s| s.parse::<u64>().unwrap() >= 1)
    );
    // From the throttled address even the right password waits; from
    // another it works at once.
    assert_eq!(attempt(1, "correct horse battery").status, 429);
    assert_eq!(attempt(2, "correct horse battery").status, 200);
    // The failures are in the audit log (not the 45 turned away before
    // they were checked).
    let failures = forge
        .log_dump()
        .lines()
        .filter(|l| l.contains("auth_failed") && l.contains("target=alice"))
        .count();
    assert_eq!(failures, 5 + 1, "one per failure counted");
}

#[test]
fn forwarded_for_counts_only_from_a_trusted_proxy() {
    let forge = Fixture::start(&[
        "--password-auth",
        "--auth-failures",
        "3",
        "--trusted-proxy",
        "127.0.0.1",
    ]);
    let addr = forge.server().addr;
    let attempt = |from: u8, forwarded: &str, secret: &str| {
        http_from(
            loopback(from),
            addr,
            &format!(
                "GET /api/v1/repos/alice/private HTTP/1.1\r\nX-Forwarded-For: {forwarded}\r\n{}",
                basic("alice", secret)
            ),
        )
        .status
    };
    // Through the trusted proxy (127.0.0.1): each forwarded client is its
    // own address.
    let from_a: Vec<u16> = (0..4).map(|_| attempt(1, "203.0.113.5", "nope")).collect();
    assert_eq!(
        from_a,
        [401, 401, 401, 429],
        "a forwarded client past --auth-failures must be throttled"
    );
    assert_eq!(
        attempt(1, "203.0.113.6", &forge.read),
        200,
        "another client is throttled too"
    );
    assert_eq!(
        attempt(1, "203.0.113.5", "nope again"),
        429,
        "the throttled client is throttled still"
    );
    assert_eq!(
        attempt(1, "203.0.113.5", &forge.read),
        200,
        "a valid token is accepted from a throttled client"
    );
    // From an untrusted peer (127.0.0.2) the header is the client's own
    // claim: ignored, so changing it escapes nothing.
    let from_b: Vec<u16> = (0..4)
        .map(|i| attempt(2, &format!("198.51.100.{i}"), "nope"))
        .collect();
    assert_eq!(
        from_b,
        [401, 401, 401, 429],
        "X-Forwarded-For from an untrusted peer must not make each attempt a new client"
    );
    assert_eq!(
        attempt(2, "198.51.100.200", "nope"),
        429,
        "X-Forwarded-For from an untrusted peer escaped the throttle"
    );
}

/// `token` with another secret: well-formed, refused.
fn wrong_secret(token: &str) -> String {
    let (head, last) = token.split_at(token.len() - 1);
    format!("{head}{}", if last == "x" { "y" } else { "x" })
}

/// A Bearer request for alice's private repo from the proxy at
/// 127.0.0.1, forwarded for `client`.
fn proxied(forge: &Forge, client: &str, token: &str) -> HttpResponse {
    http_from(
        loopback(1),
        forge.server().addr,
        &format!(
            "GET /api/v1/repos/alice/private HTTP/1.1\r\nX-Forwarded-For: {client}\r\nAuthorization: Bearer {token}"
        ),
    )
}

/// A server on the IPv6 wildcard behind an IPv4 proxy: the proxy's
/// connections arrive as ::ffff:127.0.0.1.
fn dual_stack_behind_a_proxy(extra: &[&str]) -> Fixture {
    let mut flags = vec!["--trusted-proxy", "127.0.0.0/8"];
    flags.extend_from_slice(extra);
    Fixture::start_on("[::]:0", &flags)
}

#[test]
fn behind_a_proxy_on_a_dual_stack_listener_each_forwarded_client_is_counted_alone() {
    let forge = dual_stack_behind_a_proxy(&["--auth-failures", "10"]);
    let bad = wrong_secret(&forge.read);
    let from_a: Vec<u16> = (0..11)
        .map(|_| proxied(&forge, "203.0.113.5", &bad).status)
        .collect();
    assert_eq!(
        from_a,
        [[401; 10].as_slice(), &[429]].concat(),
        "client A past --auth-failures must be throttled"
    );
    assert_eq!(
        proxied(&forge, "203.0.113.6", &bad).status,
        401,
        "client B was throttled by client A's failures: the proxy's peer \
         (::ffff:127.0.0.1) did not match --trusted-proxy 127.0.0.0/8, so \
         every client counted as the proxy"
    );
    assert_eq!(proxied(&forge, "203.0.113.6", &forge.read).status, 200);
    // The audit log names the forwarded client, as IPv4.
    let dump = forge.log_dump();
    let from_a = dump
        .lines()
        .filter(|l| l.contains(" auth_failed actor=anonymous@203.0.113.5 "))
        .count();
    assert_eq!(from_a, 11, "{dump}");
    assert!(!dump.contains("::ffff:"), "{dump}");
}

#[test]
fn a_valid_token_from_a_throttled_address_is_accepted_and_a_refused_one_still_waits() {
    let forge = dual_stack_behind_a_proxy(&["--password-auth", "--auth-failures", "3"]);
    let bad = wrong_secret(&forge.read);
    let client = "203.0.113.5";
    let statuses: Vec<u16> = (0..4)
        .map(|_| proxied(&forge, client, &bad).status)
        .collect();
    assert_eq!(statuses, [401, 401, 401, 429]);
    assert_eq!(
        proxied(&forge, client, &forge.read).status,
        200,
        "a valid token from a throttled address was refused: the failure \
         throttle ran before the token was checked"
    );
    let as_basic = http_from(
        loopback(1),
        forge.server().addr,
        &format!(
            "GET /api/v1/repos/alice/private HTTP/1.1\r\nX-Forwarded-For: {client}\r\n{}",
            basic("alice", &forge.read)
        ),
    );
    assert_eq!(as_basic.status, 200, "a token as a Basic password");
    let refused = proxied(&forge, client, &bad);
    assert_eq!(refused.status, 429, "a refused token still waits");
    assert!(
        refused
            .header("retry-after")
            .is_some_and(|s| s.parse::<u64>().unwrap() >= 1),
        "{:?}",
        refused.headers
    );
    // A password is what can be guessed: from a throttled address it is
    // not checked at all.
    let password = http_from(
        loopback(1),
        forge.server().addr,
        &format!(
            "GET /api/v1/repos/alice/private HTTP/1.1\r\nX-Forwarded-For: {client}\r\n{}",
            basic("alice", "a guessed password")
        ),
    );
    assert_eq!(password.status, 429);
}

#[test]
fn a_flood_of_throttled_failures_appends_one_throttle_record_and_is_counted() {
    let forge = dual_stack_behind_a_proxy(&["--auth-failures", "3"]);
    let bad = wrong_secret(&forge.read);
    let client = "203.0.113.5";
    let metric = |name: &str| -> f64 {
        let auth = format!("Authorization: Bearer {}", forge.root);
        let scrape = forge.get_as("/metrics", Some(&auth));
        assert_eq!(scrape.status, 200, "{}", scrape.text());
        scrape
            .text()
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    };
    let throttled_before = metric("vole_sign_ins_throttled_total");
    let failed_before = metric("vole_sign_in_failures_total");
    for _ in 0..3 {
        assert_eq!(proxied(&forge, client, &bad).status, 401);
    }
    // A burst at once, then more one by one: all past the allowance.
    let burst: Vec<u16> = std::thread::scope(|scope| {
        let sent: Vec<_> = (0..40)
            .map(|_| scope.spawn(|| proxied(&forge, client, &bad).status))
            .collect();
        sent.into_iter().map(|s| s.join().unwrap()).collect()
    });
    assert!(burst.iter().all(|s| *s == 429), "{burst:?}");
    for _ in 0..20 {
        assert_eq!(proxied(&forge, client, &bad).status, 429);
    }
    let dump = forge.log_dump();
    // Every failure in this test is client A's.
    let records = |kind: &str| {
        dump.lines()
            .filter(|l| l.contains(&format!(" {kind} actor=anonymous@")))
            .count()
    };
    assert_eq!(
        records("auth_failed"),
        3 + 1,
        "failures that arrived while their address was throttled were \
         audited one by one:\n{dump}"
    );
    assert_eq!(
        records("sign_in_throttled"),
        1,
        "the throttle is audited once as it starts:\n{dump}"
    );
    assert_eq!(metric("vole_sign_in_failures_total") - failed_before, 4.0);
    assert_eq!(
        metric("vole_sign_ins_throttled_total") - throttled_before,
        59.0,
        "every throttled refusal is counted"
    );
}

#[test]
fn the_system_repo_is_out_of_every_routes_reach() {
    let forge = Fixture::start(&["--anonymous-push"]);
    let system = forge.server().data.join("system.git");
    // Anti-vacuity: it exists and holds the users.
    assert!(system.join("HEAD").is_file());
    let shards = git_ok(
        &system,
        &["for-each-ref", "--format=%(refname)", "refs/meta/"],
    );
    assert!(!shards.trim().is_empty(), "no documents in the system repo");
    let paths = [
        "/system.git/info/refs?service=git-upload-pack",
        "/system/info/refs?service=git-upload-pack",
        "/@system/info/refs?service=git-upload-pack",
        "/%40system/info/refs?service=git-upload-pack",
        "/..%2fsystem.git/info/refs?service=git-upload-pack",
        "/repos/..%2f..%2fsystem.git/info/refs?service=git-upload-pack",
        "/alice/..%2f..%2fsystem/info/refs?service=git-upload-pack",
        "/alice/%2e%2e%2f%2e%2e%2fsystem/info/refs?service=git-upload-pack",
        "/%2e%2e/system/info/refs?service=git-upload-pack",
        "/system.git/HEAD",
        "/data/system.git/config",
        "/@system",
        "/@system/-/tree/main",
        "/%40system/x/-/tree/main",
        "/api/v1/repos/@system/x/issues",
        "/api/v1/repos/%40system/x/acl",
        "/api/v1/repos/..%2f..%2fsystem/x/issues",
        "/alice/..%2f..%2fsystem/-/site/",
        "/alice/..%2f..%2fsystem/-/raw/main/users",
    ];
    for path in paths {
        for auth in [None, Some(basic("root", &forge.root))] {
            let answer = forge.get_as(path, auth.as_deref());
            assert!(
                [400, 401, 404].contains(&answer.status),
                "{path}: {} {}",
                answer.status,
                answer.text()
            );
            let body = answer.text();
            assert!(
                !body.contains("argon2")
                    && !body.contains("secret_sha256")
                    && !body.contains("refs/meta"),
                "{path} leaked: {body}"
            );
        }
    }
    // Not listed, not cloneable by git even by a server admin.
    let (status, repos) = forge.api("GET", "/api/v1/repos/search", &forge.root, None);
    assert_eq!(status, 200);
    let names: Vec<&str> = repos["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["full_name"].as_str())
        .collect();
    assert_eq!(names, ["alice/private", "alice/public"]);
    let cloned = git(
        forge.dir.as_path(),
        &[
            "clone",
            "-q",
            &format!(
                "http://root:{}@{}/system.git",
                forge.root,
                forge.server().addr
            ),
            "s",
        ],
    );
    assert!(!cloned.status.success());
}

#[test]
fn repos_are_created_and_deleted_through_the_api_and_every_change_is_audited() {
    let forge = Fixture::start(&[]);
    // Created under the caller's name; listed for them, hidden from others.
    let (status, made) = forge.api(
        "POST",
        "/api/v1/user/repos",
        &forge.bob,
        Some(&json!({"name": "notes", "private": true, "description": "bob's notes"})),
    );
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["full_name"], "bob/notes");
    assert_eq!(made["private"], true);
    let (status, _) = forge.api("GET", "/api/v1/repos/bob/notes", &forge.bob, None);
    assert_eq!(status, 200);
    let (status, _) = forge.api("GET", "/api/v1/repos/bob/notes", &forge.write, None);
    assert_eq!(status, 404, "alice sees bob's private repo");
    // Taken, case-insensitively; reserved; another's name; bad names.
    for (body, want) in [
        (json!({"name": "notes"}), 409),
        (json!({"name": "NOTES"}), 409),
        (json!({"name": "api"}), 422),
        (json!({"name": "a b"}), 422),
        (json!({"name": "x.git"}), 422),
        (json!({"name": ""}), 422),
        (json!({"nom": "x"}), 422),
    ] {
        let (status, answer) = forge.api("POST", "/api/v1/user/repos", &forge.bob, Some(&body));
        assert_eq!(status, want, "{body}: {answer}");
    }
    // Under another user's name, or a reserved one: not bob's to make.
    let x = json!({"name": "x"});
    let (status, answer) = forge.api(
        "POST",
        "/api/v1/admin/users/alice/repos",
        &forge.bob,
        Some(&x),
    );
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = forge.api("POST", "/api/v1/orgs/admin/repos", &forge.bob, Some(&x));
    assert_eq!(status, 422, "{answer}");
    let (status, _) = forge.api(
        "POST",
        "/api/v1/user/repos",
        &forge.read,
        Some(&json!({"name": "y"})),
    );
    assert_eq!(status, 403, "a read token created a repo");
    // A server admin may create under any name.
    let (status, made) = forge.api(
        "POST",
        "/api/v1/admin/users/alice/repos",
        &forge.root,
        Some(&json!({"name": "tools"})),
    );
    assert_eq!(status, 201, "{made}");
    // Deleting needs the repo's admin; the repo goes to the trash.
    let (status, _) = forge.api("DELETE", "/api/v1/repos/bob/notes", &forge.write, None);
    assert_eq!(status, 404);
    let (status, _) = forge.api("DELETE", "/api/v1/repos/alice/public", &forge.write, None);
    assert_eq!(status, 403, "a write token deleted a repo");
    let (status, _) = forge.api("DELETE", "/api/v1/repos/bob/notes", &forge.bob, None);
    assert_eq!(status, 403, "bob's token is write-scoped");
    let bob_admin = user_token(&forge.server().data, "bob", false, "admin", &[]);
    let (status, _) = forge.api("DELETE", "/api/v1/repos/bob/notes", &bob_admin, None);
    assert_eq!(status, 204);
    assert!(!forge.bare("bob/notes").exists());
    let trashed = files_in(&forge.server().data.join("trash/bob"));
    assert_eq!(trashed.len(), 1, "{trashed:?}");
    assert!(
        trashed[0].join("HEAD").is_file(),
        "the trash holds the repo whole"
    );
    // The name is free again.
    let (status, _) = forge.api(
        "POST",
        "/api/v1/user/repos",
        &bob_admin,
        Some(&json!({"name": "notes"})),
    );
    assert_eq!(status, 201);
    // The CLI deletes too.
    let deleted = run_vole(&forge.server().data, &["repo", "delete", "alice/tools"]);
    assert!(deleted.status.success(), "{}", text(&deleted.stderr));
    assert!(!forge.bare("alice/tools").exists());
    // An ACL change, and one failed sign-in.
    let (status, _) = forge.api(
        "PUT",
        "/api/v1/repos/alice/public/acl",
        &forge.admin,
        Some(&json!({"visibility": "public", "members": [{"name": "bob", "role": "read"}]})),
    );
    assert_eq!(status, 200);
    assert_eq!(
        forge
            .get_as(
                "/api/v1/repos/alice/public",
                Some(&basic(
                    "alice",
                    "vole_0000000000000000_0000000000000000000000000000000000000000000"
                ))
            )
            .status,
        401
    );
    let revoked = run_vole(&forge.server().data, &["token", "list"]);
    let name = text(&revoked.stdout)
        .lines()
        .next()
        .unwrap()
        .split('\t')
        .next()
        .unwrap()
        .to_string();
    assert!(
        run_vole(&forge.server().data, &["token", "revoke", &name])
            .status
            .success()
    );
    let dump = forge.log_dump();
    for (event, target) in [
        ("user_added", "target=alice"),
        ("user_added", "target=root"),
        ("token_created", "target=alice-read"),
        ("token_revoked", &format!("target={name}")),
        ("repo_created", "target=alice/private"),
        ("repo_created", "target=bob/notes"),
        ("repo_deleted", "target=bob/notes"),
        ("repo_deleted", "target=alice/tools"),
        ("acl_changed", "target=alice/public"),
        ("auth_failed", "target=alice"),
    ] {
        assert!(
            dump.lines()
                .any(|l| l.starts_with("audit ") && l.contains(event) && l.contains(target)),
            "no {event} {target} in the audit log:\n{dump}"
        );
    }
    let failed = dump.lines().find(|l| l.contains("auth_failed")).unwrap();
    assert!(
        !failed.contains("vole_0000"),
        "a presented secret was logged: {failed}"
    );
    assert!(failed.contains("actor=anonymous@127.0.0.1"), "{failed}");
    let acl = dump.lines().find(|l| l.contains("acl_changed")).unwrap();
    assert!(acl.contains("actor=alice@"), "{acl}");
    assert!(
        !dump.contains(&forge.read) && !dump.contains(&forge.root),
        "a token's text is in the log"
    );
}

#[test]
fn a_hidden_repo_and_a_missing_one_take_the_same_time() {
    let forge = Fixture::start(&[]);
    let addr = forge.server().addr;
    let bob = basic("bob", &forge.bob);
    for (what, auth, path) in [
        (
            "anonymous git",
            None,
            "/alice/{}.git/info/refs?service=git-upload-pack",
        ),
        (
            "signed-in API",
            Some(bob.as_str()),
            "/api/v1/repos/alice/{}/issues",
        ),
    ] {
        let mut hidden = Vec::new();
        let mut missing = Vec::new();
        let started = Instant::now();
        for round in 0..200 {
            // Interleaved, the order swapped every round.
            let order = if round % 2 == 0 {
                ["private", "nothere"]
            } else {
                ["nothere", "private"]
            };
            for repo in order {
                let head = match auth {
                    Some(a) => format!("GET {} HTTP/1.1\r\n{a}", path.replace("{}", repo)),
                    None => format!("GET {} HTTP/1.1", path.replace("{}", repo)),
                };
                let t = Instant::now();
                let answer = http(addr, &head, b"");
                let took = t.elapsed();
                assert!(answer.status == 401 || answer.status == 404);
                if repo == "private" {
                    hidden.push(took);
                } else {
                    missing.push(took);
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the loop is bounded in time"
            );
        }
        hidden.sort();
        missing.sort();
        let (h, m) = (hidden[100], missing[100]);
        let ratio = h.as_secs_f64() / m.as_secs_f64();
        assert!(
            (0.5..=2.0).contains(&ratio),
            "{what}: median hidden {h:?} vs missing {m:?} (ratio {ratio:.2}): the time tells them apart"
        );
    }
}

#[test]
fn a_hook_report_with_a_push_id_the_server_did_not_hand_out_is_refused() {
    let forge = Fixture::start(&[]);
    let data = &forge.server().data;
    let head = ref_value(&forge.bare("alice/public"), "refs/heads/main").unwrap();
    let forged = |args: &[&str]| {
        let mut hook = vole(data)
            .args(args)
            .env("VOLE_SOCKET", data.join("run/vole.sock"))
            .env("VOLE_REPO", "alice/public")
            .env("VOLE_PUSH_ID", "4242424242")
            .env("VOLE_ACTOR", "alice")
            .env("VOLE_CLIENT", "127.0.0.1")
            .current_dir(forge.bare("alice/public"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Creating refs/heads/forged at main's commit.
        let line = format!("{} {head} refs/heads/forged\n", "0".repeat(40));
        hook.stdin
            .take()
            .unwrap()
            .write_all(line.as_bytes())
            .unwrap();
        wait_output(hook, Duration::from_secs(30))
    };
    let pre = forged(&["hook", "pre-receive"]);
    assert!(
        !pre.status.success(),
        "a forged pre-receive report was let through"
    );
    assert!(
        text(&pre.stderr).contains("not started by this server"),
        "{}",
        text(&pre.stderr)
    );
    let prepared = forged(&["hook", "reference-transaction", "prepared"]);
    assert!(
        !prepared.status.success(),
        "a forged ref move was recorded: {}",
        text(&prepared.stderr)
    );
    assert!(
        !forge.log_dump().contains("refs/heads/forged"),
        "the forged move is in the log"
    );
}

#[test]
fn api_calls_are_limited_per_token_and_names_follow_the_owner_rules() {
    let forge = Fixture::start(&["--api-rate", "5"]);
    let data = &forge.server().data;
    let path = "/api/v1/repos/alice/public/issues";
    let call = |token: Option<&str>| {
        let auth = token.map(|t| format!("Authorization: Bearer {t}"));
        forge.get_as(path, auth.as_deref())
    };
    let statuses: Vec<u16> = (0..6).map(|_| call(Some(&forge.read)).status).collect();
    assert_eq!(
        statuses,
        [200, 200, 200, 200, 200, 429],
        "past --api-rate a token must be slowed down"
    );
    let limited = call(Some(&forge.read));
    assert!(
        limited.header("retry-after").is_some(),
        "{:?}",
        limited.headers
    );
    // Per token: another token and the anonymous go on.
    assert_eq!(call(Some(&forge.write)).status, 200);
    assert_eq!(call(None).status, 200);

    // User names: unique regardless of case, none an owner may not take.
    let twin = run_vole(data, &["user", "add", "ALICE", "--email", "a@example.org"]);
    assert!(!twin.status.success());
    assert!(
        text(&twin.stderr).contains("is taken"),
        "{}",
        text(&twin.stderr)
    );
    for reserved in ["admin", "api", "Settings"] {
        let added = run_vole(data, &["user", "add", reserved, "--email", "r@example.org"]);
        assert!(!added.status.success(), "{reserved} was added");
        assert!(
            text(&added.stderr).contains("reserved"),
            "{}",
            text(&added.stderr)
        );
    }
    // Owner and repo names too, from the CLI.
    let twin = run_vole(data, &["repo", "create", "Alice/Other"]);
    assert!(!twin.status.success());
    assert!(
        text(&twin.stderr).contains("unique regardless of case"),
        "{}",
        text(&twin.stderr)
    );
    let twin = run_vole(data, &["repo", "create", "alice/PUBLIC"]);
    assert!(!twin.status.success());

    // Visibility, changed later: hidden at once, and back.
    let ask = || {
        forge
            .get_as("/alice/public.git/info/refs?service=git-upload-pack", None)
            .status
    };
    assert_eq!(ask(), 200);
    let made = run_vole(data, &["repo", "visibility", "alice/public", "private"]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    assert_eq!(ask(), 401);
    let made = run_vole(data, &["repo", "visibility", "alice/public", "public"]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    assert_eq!(ask(), 200);
}

#[test]
fn limited_tokens_member_admins_and_hostile_credentials_stay_in_their_lane() {
    let forge = Fixture::start(&[]);
    let data = &forge.server().data;
    // A token limited to one repo creates none, and a server admin's
    // limited token is no server admin.
    let limited = user_token(data, "alice", false, "write", &["--repo", "alice/public"]);
    let (status, body) = forge.api(
        "POST",
        "/api/v1/user/repos",
        &limited,
        Some(&json!({"name": "z"})),
    );
    assert_eq!(status, 403, "a repo-limited token created a repo: {body}");
    let root_limited = user_token(data, "root", true, "admin", &["--repo", "alice/public"]);
    let (status, _) = forge.api("GET", "/api/v1/stats", &root_limited, None);
    assert_eq!(
        status, 404,
        "a repo-limited token read the server's counters"
    );
    let (status, _) = forge.api("GET", "/api/v1/stats", &forge.root, None);
    assert_eq!(status, 200);

    // A member admin may not take the repo over, nor give it to no one.
    let ada = user_token(data, "ada", false, "admin", &[]);
    let members = json!([{"name": "ada", "role": "admin"}]);
    let (status, body) = forge.api(
        "PUT",
        "/api/v1/repos/alice/public/acl",
        &forge.admin,
        Some(&json!({"visibility": "public", "members": members})),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = forge.api(
        "PUT",
        "/api/v1/repos/alice/public/acl",
        &ada,
        Some(&json!({"version": 1, "visibility": "public", "owner": "ada", "members": members})),
    );
    assert_eq!(status, 403, "a member admin took the repo over: {body}");
    let (status, body) = forge.api(
        "PUT",
        "/api/v1/repos/alice/public/acl",
        &forge.admin,
        Some(&json!({"version": 1, "visibility": "public", "owner": "nobody", "members": members})),
    );
    assert_eq!(
        status, 422,
        "the repo was given to a user who does not exist: {body}"
    );
    // A member is a user: a role granted to a name no one has yet would
    // go to whoever registers it. One who is listed already may stay.
    let ghost = json!([{"name": "ada", "role": "admin"}, {"name": "Ghost", "role": "admin"}]);
    let (status, body) = forge.api(
        "PUT",
        "/api/v1/repos/alice/public/acl",
        &forge.admin,
        Some(&json!({"version": 1, "visibility": "public", "members": ghost})),
    );
    assert_eq!(status, 422, "a name no user has became a member: {body}");
    assert!(
        body.to_string().contains("Ghost") && body.to_string().contains("account first"),
        "the refusal does not say which member is no user: {body}"
    );
    let (_, acl) = forge.api("GET", "/api/v1/repos/alice/public/acl", &forge.admin, None);
    assert_eq!(acl["version"], 1, "a refused ACL was stored: {acl}");
    // The owner gives it away; from then on the new owner is its admin.
    let (status, body) = forge.api(
        "PUT",
        "/api/v1/repos/alice/public/acl",
        &forge.admin,
        Some(&json!({"version": 1, "visibility": "public", "owner": "bob", "members": []})),
    );
    assert_eq!(status, 200, "{body}");
    let bob_admin = user_token(data, "bob", false, "admin", &[]);
    let (status, _) = forge.api("GET", "/api/v1/repos/alice/public/acl", &bob_admin, None);
    assert_eq!(status, 200, "the new owner is not the repo's admin");
    let (status, _) = forge.api("GET", "/api/v1/repos/alice/public/acl", &forge.admin, None);
    assert_eq!(status, 403, "the old owner is still its admin");

    // A member reading a private site: no shared cache may keep it.
    let site = worktree(forge.dir.as_path(), "site");
    git_ok(&site, &["checkout", "-q", "-b", "pages"]);
    commit_file(&site, "index.html", b"<p>members only</p>\n");
    git_ok(
        &site,
        &[
            "push",
            "-q",
            &forge.url_as("alice", &forge.write, "alice/private"),
            "pages",
        ],
    );
    let page = forge.get_as(
        "/alice/private/-/site/",
        Some(&format!("Authorization: Bearer {}", forge.read)),
    );
    assert_eq!(page.status, 200, "{}", page.text());
    assert_eq!(page.header("cache-control"), Some("private, no-cache"));
    assert!(
        page.header("vary")
            .is_some_and(|v| v.contains("Authorization")),
        "{:?}",
        page.headers
    );
    assert!(page.text().contains("members only"));
    assert_eq!(forge.get_as("/alice/private/-/site/", None).status, 404);

    // Hostile Authorization headers: a 4xx that says what is wrong.
    for header in [
        "Authorization: Digest username=\"x\"",
        "Authorization: Basic !!!not-base64!!!",
        "Authorization: Basic bm9jb2xvbg==",
        "Authorization: Basic //79/g==",
        "Authorization: Bearer",
        "Authorization:",
    ] {
        let answer = forge.get_as("/api/v1/repos/alice/public/issues", Some(header));
        assert!(
            [400, 401].contains(&answer.status),
            "{header}: {} {}",
            answer.status,
            answer.text()
        );
    }
    // A user name with a line end cannot forge lines of the log dump.
    let forged = basic(
        "x\naudit seq=1 user_added actor=cli@local target=mallory",
        "nope",
    );
    assert_eq!(
        forge
            .get_as("/api/v1/repos/alice/public", Some(&forged))
            .status,
        401
    );
    assert!(
        !forge
            .log_dump()
            .lines()
            .any(|l| l.contains("target=mallory") && !l.contains("auth_failed")),
        "a user name forged a log line"
    );
    // An expiry no date can write is refused, not a crash.
    let far = run_vole(
        data,
        &[
            "token",
            "create",
            "far",
            "--user",
            "alice",
            "--expires",
            "20000years",
        ],
    );
    assert!(!far.status.success());
    assert!(
        text(&far.stderr).contains("too far"),
        "{}",
        text(&far.stderr)
    );
}

#[test]
fn a_repo_created_private_is_private_before_its_acl_is_stored_and_a_deleted_one_is_forgotten() {
    let forge = Fixture::start(&[]);
    let data = &forge.server().data;
    // The marker alone (as a crash between the rename and the ACL write
    // leaves it) keeps a repo private.
    let made = run_vole(data, &["repo", "create", "alice/fresh"]);
    assert!(made.status.success());
    let ask = |repo: &str| {
        forge
            .get_as(
                &format!("/{repo}.git/info/refs?service=git-upload-pack"),
                None,
            )
            .status
    };
    assert_eq!(ask("alice/fresh"), 200);
    std::fs::write(forge.bare("alice/fresh").join("vole-private"), b"").unwrap();
    assert_eq!(
        ask("alice/fresh"),
        401,
        "the private marker was not honoured"
    );
    // Deleted and created again: a new, public repo, without the old one's
    // ACL or site.
    let site = worktree(forge.dir.as_path(), "site");
    git_ok(&site, &["checkout", "-q", "-b", "pages"]);
    commit_file(&site, "index.html", b"<p>old</p>\n");
    git_ok(
        &site,
        &[
            "push",
            "-q",
            &forge.url_as("alice", &forge.write, "alice/public"),
            "pages",
        ],
    );
    for _ in 0..2 {
        assert_eq!(forge.get_as("/alice/public/-/site/", None).status, 200);
    }
    let (status, _) = forge.api(
        "PUT",
        "/api/v1/repos/alice/public/acl",
        &forge.admin,
        Some(&json!({"visibility": "public", "members": [{"name": "bob", "role": "write"}]})),
    );
    assert_eq!(status, 200);
    let (status, _) = forge.api("DELETE", "/api/v1/repos/alice/public", &forge.admin, None);
    assert_eq!(status, 204);
    let gone = forge.get_as("/alice/public/-/site/", None);
    assert_eq!(
        gone.status,
        404,
        "the warm site outlived its repo: {}",
        gone.text()
    );
    let (status, _) = forge.api(
        "POST",
        "/api/v1/user/repos",
        &forge.admin,
        Some(&json!({"name": "public"})),
    );
    assert_eq!(status, 201);
    let (status, acl) = forge.api("GET", "/api/v1/repos/alice/public/acl", &forge.admin, None);
    assert_eq!(status, 200);
    assert_eq!(
        acl["members"],
        json!([]),
        "the new repo has the old one's members: {acl}"
    );
    // bob could push to the old repo (a member); not to the new one.
    let pushed = git(
        &forge.work,
        &[
            "push",
            &forge.url_as("bob", &forge.bob, "alice/public"),
            "HEAD:main",
        ],
    );
    assert!(
        !pushed.status.success(),
        "the old repo's member pushed to the new one"
    );
    assert!(
        text(&pushed.stderr).contains("may read alice/public but not push"),
        "{}",
        text(&pushed.stderr)
    );
}

#[test]
fn a_token_is_taken_in_each_form_gitea_clients_send_it() {
    let forge = Fixture::start(&[]);
    let private = "/api/v1/repos/alice/private/issues";
    let token = forge.read.clone();
    use base64::Engine;
    let b64 = |text: String| base64::engine::general_purpose::STANDARD.encode(text);
    for header in [
        format!("Authorization: Bearer {token}"),
        format!("Authorization: bearer {token}"),
        format!("Authorization: token {token}"),
        format!("Authorization: TOKEN {token}"),
        format!("Authorization: Basic {}", b64(format!("alice:{token}"))),
        format!("Authorization: basic {}", b64(format!("alice:{token}"))),
        // The token as the user name, no password.
        format!("Authorization: Basic {}", b64(format!("{token}:"))),
    ] {
        let got = forge.get_as(private, Some(&header));
        assert_eq!(got.status, 200, "{header}: {}", got.text());
    }
    for (header, status) in [
        ("Authorization: token".to_string(), 400),
        ("Authorization: Digest abc".to_string(), 400),
        (format!("Authorization: token {token}x"), 401),
        (
            format!("Authorization: Basic {}", b64(format!("{token}x:"))),
            401,
        ),
    ] {
        let got = forge.get_as(private, Some(&header));
        assert_eq!(got.status, status, "{header}: {}", got.text());
    }
}

#[test]
fn a_token_in_the_query_string_is_taken_only_when_the_server_says_so() {
    let private = "/api/v1/repos/alice/private/issues";
    let off = Fixture::start(&[]);
    for key in ["token", "access_token"] {
        let got = off.get_as(&format!("{private}?{key}={}", off.read), None);
        assert_eq!(got.status, 400, "{key}: {}", got.text());
        assert!(got.text().contains("--api-query-tokens"), "{}", got.text());
    }
    drop(off);
    let on = Fixture::start(&["--api-query-tokens"]);
    for key in ["token", "access_token"] {
        let got = on.get_as(&format!("{private}?{key}={}", on.read), None);
        assert_eq!(got.status, 200, "{key}: {}", got.text());
    }
    let wrong = on.get_as(&format!("{private}?token={}x", on.read), None);
    assert_eq!(wrong.status, 401, "{}", wrong.text());
    // Not both at once.
    let both = on.get_as(
        &format!("{private}?token={}", on.read),
        Some(&format!("Authorization: token {}", on.read)),
    );
    assert_eq!(both.status, 400, "{}", both.text());
    // git takes none from the query string.
    let git = on.get_as(
        &format!(
            "/alice/private.git/info/refs?service=git-upload-pack&token={}",
            on.read
        ),
        None,
    );
    assert_eq!(git.status, 401, "{}", git.text());
}
