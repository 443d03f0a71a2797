//! Signing in in the browser, over real HTTP: a session opens the pages of
//! a private repo and nothing else (not git, not the API); sign-out, a
//! password change, a disabled user and the idle limit each end it; a
//! restart keeps it; forms without this server's CSRF token or from
//! another origin change nothing; `next=` returns only to this server;
//! failed web sign-ins are throttled as Basic's are.

use std::time::Duration;

use crate::support::*;

/// A server with `alice/private` (private, one commit), the user alice
/// with a password, and `flags`.
fn forge(flags: &[&str]) -> Forge {
    let mut forge = Forge::new(&[]);
    forge.create_repo(&["alice/private", "--private"]);
    user_token(&forge.data, "alice", false, "write", &[]);
    user_token(&forge.data, "bob", false, "read", &[]);
    set_password(&forge.data, "alice", PASSWORD);
    forge.serve(flags);
    forge
}

const PASSWORD: &str = "correct horse battery";

#[test]
fn a_session_opens_the_pages_of_a_private_repo_until_sign_out() {
    let forge = forge(&[]);
    let mut browser = Browser::new(&forge);
    assert_eq!(
        browser.get("/alice/private").status,
        404,
        "anonymous sees it"
    );
    let signed = browser.sign_in("alice", PASSWORD, "/alice/private");
    assert_eq!(signed.status, 303, "{}", signed.text());
    assert_eq!(signed.header("location"), Some("/alice/private"));
    let set = signed
        .headers
        .iter()
        .find(|(k, v)| k.eq_ignore_ascii_case("set-cookie") && v.starts_with("vole_session="))
        .map(|(_, v)| v.clone())
        .expect("no session cookie set");
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(set.contains(attribute), "{set} lacks {attribute}");
    }
    assert!(
        !set.contains("Secure"),
        "Secure on a plain-http server: {set}"
    );
    let session = browser.cookie("vole_session").unwrap().to_string();
    assert_eq!(session.len(), 43, "a session secret of 256 bits");

    let page = browser.get("/alice/private");
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("Signed in as <strong>alice</strong>"));
    assert!(
        page.header("cache-control")
            .is_some_and(|c| c.contains("private"))
    );
    let home = browser.get("/");
    assert!(
        home.text().contains("alice/private"),
        "the home page lists it"
    );

    // Only the hash is stored.
    let stored = std::fs::read_to_string(forge.data.join("sessions.jsonl")).unwrap();
    assert!(stored.contains("\"user\":\"alice\""), "{stored}");
    assert!(!stored.contains(&session), "the session secret is on disk");

    let csrf = browser.sign_out_token();
    let out = browser.post("/-/logout", &[("csrf", &csrf)], "");
    assert_eq!(out.status, 303, "{}", out.text());
    assert!(
        browser.cookie("vole_session").is_none(),
        "cookie not removed"
    );
    assert_eq!(browser.get("/alice/private").status, 404);
    // The old cookie, replayed, is no one.
    browser.cookies.push(("vole_session".into(), session));
    let replayed = browser.get("/alice/private");
    assert_eq!(replayed.status, 404, "a signed-out session still works");
    assert!(browser.get("/").text().contains("Sign in"));

    // Signing in again with a form kept from before (another tab's) ends
    // the session the browser had: no cookie holds it any more.
    assert_eq!(browser.sign_in("alice", PASSWORD, "/").status, 303);
    let first = browser.cookie("vole_session").unwrap().to_string();
    let mut other_tab = Browser::new(&forge);
    let csrf = other_tab.sign_in_form();
    let pre = other_tab.cookie("vole_pre").unwrap().to_string();
    browser.cookies.push(("vole_pre".into(), pre));
    let again = browser.post(
        "/-/login",
        &[
            ("user", "alice"),
            ("password", &PASSWORD.replace(' ', "+")),
            ("csrf", &csrf),
            ("next", "/"),
        ],
        "",
    );
    assert_eq!(again.status, 303, "{}", again.text());
    assert_ne!(browser.cookie("vole_session"), Some(first.as_str()));
    assert_eq!(browser.get("/alice/private").status, 200, "anti-vacuity");
    let mut replay = Browser::new(&forge);
    replay.cookies.push(("vole_session".into(), first));
    assert_eq!(
        replay.get("/alice/private").status,
        404,
        "the session a sign-in replaced is still live"
    );
}

#[test]
fn a_session_cookie_is_not_a_credential_for_git_or_the_api() {
    let forge = forge(&[]);
    let mut browser = Browser::new(&forge);
    assert_eq!(browser.sign_in("alice", PASSWORD, "/").status, 303);
    assert_eq!(browser.get("/alice/private").status, 200, "anti-vacuity");
    let api = browser.get("/api/v1/repos/alice/private/issues");
    let anonymous = http_get(forge.server().addr, "/api/v1/repos/alice/private/issues");
    assert_ne!(api.status, 200, "the API took the cookie: {}", api.text());
    assert_eq!(
        api.status, anonymous.status,
        "the API told the cookie apart"
    );
    let git = browser.get("/alice/private.git/info/refs?service=git-upload-pack");
    assert_eq!(git.status, 401, "git took the cookie");
}

#[test]
fn a_password_change_a_disabled_user_and_the_idle_limit_end_sessions() {
    let forge = forge(&["--session-idle", "3s"]);
    let mut first = Browser::new(&forge);
    assert_eq!(first.sign_in("alice", PASSWORD, "/").status, 303);
    assert_eq!(first.get("/alice/private").status, 200);
    set_password(&forge.data, "alice", "another long password");
    assert_eq!(
        first.get("/alice/private").status,
        404,
        "session outlived a password change"
    );

    // The idle limit: used every second, a session lives on; left alone
    // for longer than the limit, it ends.
    let mut idle = Browser::at(&forge, 2);
    let signed = idle.sign_in("alice", "another+long+password", "/");
    assert_eq!(signed.status, 303, "{}", signed.text());
    for _ in 0..5 {
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(idle.get("/alice/private").status, 200, "ended while in use");
    }
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        idle.get("/alice/private").status,
        404,
        "idle session still works"
    );

    let mut disabled = Browser::at(&forge, 3);
    assert_eq!(
        disabled
            .sign_in("alice", "another+long+password", "/")
            .status,
        303
    );
    assert_eq!(disabled.get("/alice/private").status, 200);
    let off = run_vole(&forge.data, &["user", "disable", "alice"]);
    assert!(off.status.success(), "{}", text(&off.stderr));
    assert_eq!(
        disabled.get("/alice/private").status,
        404,
        "a disabled user's session works"
    );
}

#[test]
fn a_session_in_constant_use_ends_at_the_absolute_limit() {
    let forge = forge(&["--session-absolute", "4s"]);
    let mut browser = Browser::new(&forge);
    assert_eq!(browser.sign_in("alice", PASSWORD, "/").status, 303);
    let began = std::time::Instant::now();
    // Used every half second: the idle limit (14 days) never bites.
    let mut last_ok = None;
    while began.elapsed() < Duration::from_secs(8) {
        if browser.get("/alice/private").status == 200 {
            last_ok = Some(began.elapsed());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let last_ok = last_ok.expect("anti-vacuity: the session never worked");
    assert!(
        last_ok >= Duration::from_secs(2),
        "the session ended early, at {last_ok:?}"
    );
    assert!(
        last_ok < Duration::from_secs(6),
        "a session in use outlived the absolute limit: still signed in at {last_ok:?}"
    );
    assert_eq!(browser.get("/alice/private").status, 404);
}

#[test]
fn behind_an_https_public_url_cookies_are_host_prefixed_and_secure_and_forms_take_its_origin() {
    let forge = forge(&["--public-url", "https://Git.Example.org:443/"]);
    let mut browser = Browser::new(&forge);
    let set_cookies = |response: &HttpResponse| -> Vec<String> {
        response
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
            .map(|(_, v)| v.clone())
            .collect()
    };
    let form = browser.get("/-/login");
    assert_eq!(form.status, 200, "{}", form.text());
    let pre = set_cookies(&form);
    assert!(
        pre.iter()
            .any(|c| c.starts_with("__Host-vole_pre=") && c.contains("; Secure")),
        "{pre:?}"
    );
    let csrf = hidden_field(&form.text(), "csrf");
    let password = PASSWORD.replace(' ', "+");
    let fields = [
        ("user", "alice"),
        ("password", password.as_str()),
        ("csrf", csrf.as_str()),
        ("next", "/alice/private"),
    ];
    for foreign in ["http://git.example.org", "https://git.example.org:8443"] {
        let refused = browser.post("/-/login", &fields, &format!("Origin: {foreign}"));
        assert_eq!(
            refused.status, 403,
            "{foreign} was taken for the public URL"
        );
    }
    // The origin a browser sends for the public URL: no default port.
    let signed = browser.post("/-/login", &fields, "Origin: https://git.example.org");
    assert_eq!(signed.status, 303, "{}", signed.text());
    let session = set_cookies(&signed);
    assert!(
        session.iter().any(|c| c.starts_with("__Host-vole_session=")
            && c.contains("; Secure")
            && c.contains("Path=/")
            && !c.contains("Domain")),
        "{session:?}"
    );
    assert_eq!(browser.get("/alice/private").status, 200);
    assert!(
        browser.cookie("vole_session").is_none(),
        "an unprefixed session cookie was set"
    );
}

#[test]
fn a_restart_keeps_sessions() {
    let mut forge = forge(&[]);
    let mut browser = Browser::new(&forge);
    assert_eq!(browser.sign_in("alice", PASSWORD, "/").status, 303);
    forge.restart();
    browser.addr = forge.server().addr;
    assert_eq!(
        browser.get("/alice/private").status,
        200,
        "signed out by a restart"
    );

    // A password changed, or a user disabled, while the server is stopped
    // ends their sessions as well: the next start does not bring them back.
    set_password(&forge.data, "bob", PASSWORD);
    let mut bob = Browser::at(&forge, 2);
    assert_eq!(bob.sign_in("bob", PASSWORD, "/").status, 303);
    assert_eq!(bob.get("/").status, 200);
    assert!(bob.get("/").text().contains("Signed in as"), "anti-vacuity");
    forge.take_server().expect("the server runs").stop();
    set_password(&forge.data, "alice", "another long password");
    let disabled = run_vole(&forge.data, &["user", "disable", "bob"]);
    assert!(disabled.status.success(), "{}", text(&disabled.stderr));
    forge.restart();
    browser.addr = forge.server().addr;
    bob.addr = forge.server().addr;
    assert_eq!(
        browser.get("/alice/private").status,
        404,
        "a session outlived a password changed while the server was stopped"
    );
    assert!(
        !bob.get("/").text().contains("Signed in as"),
        "a session outlived its user's disabling while the server was stopped"
    );
}

#[test]
fn forms_without_this_servers_token_or_from_another_origin_change_nothing() {
    let forge = forge(&[]);
    let mut browser = Browser::new(&forge);
    let csrf = browser.sign_in_form();
    let password = PASSWORD.replace(' ', "+");
    let mut other = Browser::at(&forge, 2);
    let others_token = other.sign_in_form();
    let attempts: [(&str, String, &str); 4] = [
        ("no token", String::new(), ""),
        ("another pre-session's token", others_token, ""),
        (
            "a foreign Origin",
            csrf.clone(),
            "Origin: https://evil.example",
        ),
        ("Origin: null", csrf.clone(), "Origin: null"),
    ];
    for (what, token, extra) in &attempts {
        let tried = browser.post(
            "/-/login",
            &[("user", "alice"), ("password", &password), ("csrf", token)],
            extra,
        );
        assert_eq!(tried.status, 403, "sign-in with {what}: {}", tried.text());
        assert!(
            browser.cookie("vole_session").is_none(),
            "signed in with {what}"
        );
    }
    let cross = browser.post(
        "/-/login",
        &[("user", "alice"), ("password", &password), ("csrf", &csrf)],
        "Sec-Fetch-Site: cross-site",
    );
    assert_eq!(cross.status, 403);
    // Anti-vacuity: the same form with its own token signs in.
    let own = browser.post(
        "/-/login",
        &[("user", "alice"), ("password", &password), ("csrf", &csrf)],
        &format!("Origin: http://{}", forge.server().addr),
    );
    assert_eq!(own.status, 303, "{}", own.text());
    let session = browser.cookie("vole_session").unwrap().to_string();

    // Sign-out needs the session's own token.
    let mut second = Browser::at(&forge, 3);
    assert_eq!(second.sign_in("alice", PASSWORD, "/").status, 303);
    let seconds_token = second.sign_out_token();
    let wrong = browser.post("/-/logout", &[("csrf", &seconds_token)], "");
    assert_eq!(wrong.status, 403, "signed out with another session's token");
    let own_token = browser.sign_out_token();
    let foreign = browser.post("/-/logout", &[("csrf", &own_token)], "Origin: null");
    assert_eq!(foreign.status, 403);
    assert_eq!(browser.cookie("vole_session"), Some(session.as_str()));
    assert_eq!(
        browser.get("/alice/private").status,
        200,
        "a refused sign-out ended it"
    );
}

#[test]
fn next_returns_only_to_a_path_of_this_server() {
    let forge = forge(&[]);
    for (i, next) in [
        "//evil",
        "/%5Cevil",
        "https:evil",
        "%252F%252Fevil",
        "/%2F%2Fevil",
    ]
    .iter()
    .enumerate()
    {
        let mut browser = Browser::at(&forge, 10 + i as u8);
        let signed = browser.sign_in("alice", PASSWORD, next);
        assert_eq!(signed.status, 303, "{next}: {}", signed.text());
        assert_eq!(signed.header("location"), Some("/"), "next={next}");
    }
    // Through the form's own field, as `?next=` fills it.
    for next in ["%2F%2Fevil", "/%5Cevil", "https:evil", "//evil"] {
        let mut browser = Browser::at(&forge, 20);
        let page = browser.get(&format!("/-/login?next={next}"));
        assert_eq!(hidden_field(&page.text(), "next"), "/", "?next={next}");
    }
    let mut browser = Browser::at(&forge, 21);
    let page = browser.get("/-/login?next=/alice/private");
    assert_eq!(
        hidden_field(&page.text(), "next"),
        "/alice/private",
        "anti-vacuity"
    );
    let signed = browser.sign_in("alice", PASSWORD, "/alice/private");
    assert_eq!(
        signed.header("location"),
        Some("/alice/private"),
        "anti-vacuity"
    );
}

#[test]
fn wrong_web_passwords_are_throttled_per_address_as_basic_ones_are() {
    let forge = forge(&["--auth-failures", "4", "--auth-failure-window", "10m"]);
    let mut attacker = Browser::at(&forge, 30);
    let mut statuses = Vec::new();
    for i in 0..8 {
        let tried = attacker.sign_in("alice", &format!("wrong {i}"), "/");
        if tried.status == 200 {
            assert!(tried.text().contains("Wrong user name or password."));
        }
        statuses.push(tried.status);
    }
    assert_eq!(&statuses[..4], &[200; 4], "{statuses:?}");
    assert!(
        statuses[4..].iter().all(|s| *s == 429),
        "not throttled: {statuses:?}"
    );
    assert_eq!(attacker.sign_in("alice", PASSWORD, "/").status, 429);
    let mut elsewhere = Browser::at(&forge, 31);
    assert_eq!(elsewhere.sign_in("alice", PASSWORD, "/").status, 303);
    // The failures are audited as Basic's are.
    let dump = text(&run_vole(&forge.data, &["log", "dump"]).stdout);
    let failed = dump
        .lines()
        .filter(|l| l.contains("auth_failed") && l.contains("target=alice"))
        .count();
    assert_eq!(failed, 5, "one audit record per checked failure:\n{dump}");
}

#[test]
fn web_and_basic_password_failures_share_one_count() {
    let forge = forge(&[
        "--password-auth",
        "--auth-failures",
        "4",
        "--auth-failure-window",
        "10m",
    ]);
    let api = |browser: &mut Browser, password: &str| {
        let head = format!(
            "GET /api/v1/repos/alice/private/issues HTTP/1.1\r\n{}",
            basic("alice", password)
        );
        browser.request(&head, "").status
    };
    let mut attacker = Browser::at(&forge, 40);
    assert_eq!(
        api(&mut attacker, PASSWORD),
        200,
        "anti-vacuity: Basic works"
    );
    // Two wrong Basic passwords, two wrong web ones: the limit of 4.
    assert_eq!(api(&mut attacker, "wrong 1"), 401);
    assert_eq!(api(&mut attacker, "wrong 2"), 401);
    assert_eq!(attacker.sign_in("alice", "wrong 3", "/").status, 200);
    assert_eq!(attacker.sign_in("alice", "wrong 4", "/").status, 200);
    assert_eq!(
        attacker.sign_in("alice", "wrong 5", "/").status,
        429,
        "the web form did not count the Basic failures"
    );
    assert_eq!(
        api(&mut attacker, PASSWORD),
        429,
        "Basic did not count the web form's failures"
    );
}

#[test]
fn a_person_signs_in_and_out_in_chromium() {
    let forge = forge(&[]);
    let shots = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/browser-screenshots/sign-in");
    let base = forge.server().url("");
    // One commit in the private repo, for the page's token to clone.
    let pusher = user_token(&forge.data, "alice", false, "write", &[]);
    let work = worktree(&forge.dir, "work");
    let push_url = format!(
        "http://alice:{pusher}@{}/alice/private.git",
        forge.server().addr
    );
    git_ok(&work, &["push", "-q", &push_url, "main"]);
    let args = ["alice", PASSWORD, "alice/private"];
    let printed = browser_journey("sign_in.mjs", base.trim_end_matches('/'), &shots, &args);
    // The token the page showed clones the private repo, after sign-out too
    // (a token is not a session).
    let token = printed
        .lines()
        .find_map(|l| l.strip_prefix("token "))
        .unwrap_or_else(|| panic!("the journey printed no token:\n{printed}"));
    let addr = forge.server().addr;
    let anonymous = git(
        &forge.dir,
        &["clone", &format!("http://{addr}/alice/private.git"), "anon"],
    );
    assert!(
        !anonymous.status.success(),
        "anti-vacuity: the repo is private"
    );
    let url = format!("http://alice:{token}@{addr}/alice/private.git");
    let cloned = git(&forge.dir, &["clone", &url, "cloned"]);
    assert!(
        cloned.status.success(),
        "the page's token does not clone: {}",
        text(&cloned.stderr)
    );
    let pushed = git_ok(&work, &["rev-parse", "HEAD"]);
    let head = git_ok(&forge.dir.join("cloned"), &["rev-parse", "HEAD"]);
    assert_eq!(head, pushed, "the clone has not the pushed commit");
    for name in [
        "sign-in",
        "sign-in-wrong",
        "signed-in",
        "tokens",
        "signed-out",
    ] {
        let shot = shots.join(format!("{name}.png"));
        assert!(
            std::fs::metadata(&shot).is_ok_and(|m| m.len() > 1000),
            "no screenshot {}",
            shot.display()
        );
    }
}

/// The "Last used" cell of the token `name`'s row on the tokens page.
fn last_used(html: &str, name: &str) -> String {
    let row = html
        .split("<tr>")
        .find(|row| row.contains(&format!("<td>{name}</td>")))
        .unwrap_or_else(|| panic!("no row for {name}:\n{html}"));
    row.split("<td>").nth(5).unwrap_or_default().to_string()
}

/// The new token's text on the tokens page's answer.
fn shown_token(html: &str) -> Option<String> {
    let marker = "class=\"token-text\" readonly value=\"";
    let start = html.find(marker)? + marker.len();
    Some(html[start..].split('"').next()?.to_string())
}

#[test]
fn a_token_made_in_the_tokens_page_is_shown_once_and_works_for_git_until_revoked() {
    let forge = forge(&[]);
    let addr = forge.server().addr;
    let mut anonymous = Browser::at(&forge, 40);
    let away = anonymous.get("/-/user/tokens");
    assert_eq!(away.status, 303, "{}", away.text());
    let location = away.header("location").unwrap_or_default().to_string();
    assert!(location.starts_with("/-/login?next="), "{location}");
    let login = anonymous.get(&location);
    assert_eq!(hidden_field(&login.text(), "next"), "/-/user/tokens");

    let mut browser = Browser::new(&forge);
    assert_eq!(browser.sign_in("alice", PASSWORD, "/").status, 303);
    let page = browser.get("/-/user/tokens");
    assert_eq!(page.status, 200, "{}", page.text());
    let csrf = hidden_field(&page.text(), "csrf");
    let fields = |csrf: &str| {
        vec![
            ("csrf", csrf.to_string()),
            ("name", "laptop".to_string()),
            ("scope", "read".to_string()),
            ("repos", String::new()),
        ]
    };
    let post = |browser: &mut Browser, fields: Vec<(&str, String)>, extra: &str| {
        let borrowed: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        browser.post("/-/user/tokens", &borrowed, extra)
    };
    // Forged: no token, or another origin. Nothing is made.
    assert_eq!(post(&mut browser, fields(""), "").status, 403);
    let foreign = post(&mut browser, fields(&csrf), "Origin: https://evil.example");
    assert_eq!(foreign.status, 403);
    let listed = browser.get("/-/user/tokens").text();
    assert!(
        !listed.contains("<td>laptop</td>"),
        "a forged form made a token:\n{listed}"
    );

    let made = post(&mut browser, fields(&csrf), "");
    assert_eq!(made.status, 200, "{}", made.text());
    let token = shown_token(&made.text()).expect("the new token is not shown");
    assert!(token.starts_with("vole_"), "{token}");
    assert!(
        made.header("cache-control")
            .is_some_and(|c| c.contains("no-store"))
    );
    assert!(
        last_used(&made.text(), "laptop").contains("never"),
        "a token not yet used is not shown as never used:\n{}",
        made.text()
    );
    let url = format!("http://alice:{token}@{addr}/alice/private.git");
    let listed = git(&forge.dir, &["ls-remote", &url]);
    assert!(
        listed.status.success(),
        "the token does not work: {}",
        text(&listed.stderr)
    );
    let anonymous_git = git(
        &forge.dir,
        &["ls-remote", &format!("http://{addr}/alice/private.git")],
    );
    assert!(
        !anonymous_git.status.success(),
        "anti-vacuity: the repo is private"
    );

    let again = browser.get("/-/user/tokens");
    assert!(
        again.text().contains("<td>laptop</td>"),
        "the token is not listed"
    );
    assert!(
        !again.text().contains(&token),
        "the token's text is shown again"
    );
    assert!(shown_token(&again.text()).is_none());
    let used = last_used(&again.text(), "laptop");
    assert!(
        used.contains("<time") && used.contains("just now"),
        "the token's use by git is not shown as its last use: {used}"
    );

    // Only one's own tokens can be revoked.
    let csrf = hidden_field(&again.text(), "csrf");
    let bobs = text(&run_vole(&forge.data, &["token", "list"]).stdout);
    let bob_token = bobs
        .lines()
        .find(|l| l.contains("bob-read"))
        .and_then(|l| l.split_whitespace().find(|w| w.starts_with("bob-read")))
        .expect("bob's token in the list")
        .to_string();
    let not_mine = browser.post(
        "/-/user/tokens/revoke",
        &[("csrf", &csrf), ("name", &bob_token)],
        "",
    );
    assert_eq!(not_mine.status, 404, "{}", not_mine.text());
    let revoked = browser.post(
        "/-/user/tokens/revoke",
        &[("csrf", &csrf), ("name", "laptop")],
        "",
    );
    assert_eq!(revoked.status, 303, "{}", revoked.text());
    let refused = git(&forge.dir, &["ls-remote", &url]);
    assert!(!refused.status.success(), "a revoked token still works");
}

#[test]
fn a_user_holds_at_most_the_documented_number_of_live_tokens() {
    let forge = forge(&[]);
    let mut browser = Browser::new(&forge);
    assert_eq!(browser.sign_in("alice", PASSWORD, "/").status, 303);
    let csrf = hidden_field(&browser.get("/-/user/tokens").text(), "csrf");
    let make = |browser: &mut Browser, name: &str| {
        browser.post(
            "/-/user/tokens",
            &[
                ("csrf", &csrf),
                ("name", name),
                ("scope", "read"),
                ("repos", ""),
            ],
            "",
        )
    };
    // alice holds one already (the fixture's).
    let most = vole_accounts::MAX_LIVE_TOKENS_PER_USER;
    for i in 1..most {
        let made = make(&mut browser, &format!("t{i}"));
        assert_eq!(made.status, 200, "token {i}: {}", made.text());
    }
    let refused = make(&mut browser, "one-too-many");
    assert_eq!(
        refused.status,
        422,
        "the live-token cap let token {} through",
        most + 1
    );
    assert!(
        refused.text().contains("revoke one first"),
        "{}",
        refused.text()
    );
    let revoked = browser.post(
        "/-/user/tokens/revoke",
        &[("csrf", &csrf), ("name", "t1")],
        "",
    );
    assert_eq!(revoked.status, 303);
    assert_eq!(make(&mut browser, "after-a-revoke").status, 200);
    // The page lists every live token and only the latest revoked ones.
    let shown = vole_web::tokens::REVOKED_SHOWN;
    for i in 2..shown + 8 {
        let revoked = browser.post(
            "/-/user/tokens/revoke",
            &[("csrf", &csrf), ("name", &format!("t{i}"))],
            "",
        );
        assert_eq!(revoked.status, 303, "t{i}: {}", revoked.text());
    }
    let page = browser.get("/-/user/tokens").text();
    let rows = |needle: &str| page.matches(needle).count();
    assert_eq!(rows("<td>revoked</td>"), shown, "{page}");
    assert!(
        page.contains(&format!("And {} older revoked tokens", 7)),
        "the revoked tokens not listed are not counted: {page}"
    );
    assert!(
        page.contains("<td>after-a-revoke</td>"),
        "a live token is missing"
    );
    assert!(
        page.contains(&format!("<td>t{}</td>", shown + 7)),
        "the latest revoked token is not listed"
    );
}
