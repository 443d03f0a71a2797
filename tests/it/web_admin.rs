//! A person's own account and a repo's administration in the browser,
//! over real HTTP: the profile (a display name, an email no one else
//! has, which then signs in), the password change (the current one
//! needed, other sessions ended, this one kept), registration (closed by
//! default, rate limited per address when open), the New repository form
//! and a repo's settings page (general settings moving HEAD, members,
//! deletion with the name typed), each form refused without the session's
//! token, with another session's, with `Origin: null` and cross-site, and
//! an admin's page sending an anonymous visitor to sign in.

use crate::support::*;

const PASSWORD: &str = "correct horse battery";

/// A server with the users alice (a password) and bob (a password, read
/// token), and `flags`.
fn forge(flags: &[&str]) -> Forge {
    let mut forge = Forge::new(&[]);
    user_token(&forge.data, "alice", false, "write", &[]);
    user_token(&forge.data, "bob", false, "read", &[]);
    set_password(&forge.data, "alice", PASSWORD);
    set_password(&forge.data, "bob", PASSWORD);
    forge.serve(flags);
    forge
}

/// The message a page's alert carries.
fn alert(html: &str) -> String {
    let marker = "role=\"alert\">";
    let start = html.find(marker).map_or(0, |at| at + marker.len());
    html[start..]
        .split('<')
        .next()
        .unwrap_or_default()
        .to_string()
}

fn signed_in(forge: &Forge, user: &str, last: u8) -> Browser {
    let mut browser = Browser::at(forge, last);
    let signed = browser.sign_in(user, PASSWORD, "/");
    assert_eq!(signed.status, 303, "{}", signed.text());
    browser
}

/// The CSRF token of the first form on `path`.
fn csrf_on(browser: &mut Browser, path: &str) -> String {
    let page = browser.get(path);
    assert_eq!(page.status, 200, "{path}: {}", page.text());
    hidden_field(&page.text(), "csrf")
}

#[test]
fn the_profile_sets_a_display_name_and_an_email_no_one_else_has_which_signs_in() {
    let forge = forge(&[]);
    let mut alice = signed_in(&forge, "alice", 1);
    let csrf = csrf_on(&mut alice, "/-/user/settings");
    let saved = alice.post(
        "/-/user/settings",
        &[
            ("csrf", &csrf),
            ("full_name", "Alice+Liddell"),
            ("email", "alice%40wonder.example"),
        ],
        "",
    );
    assert_eq!(saved.status, 303, "{}", saved.text());
    let page = alice.get("/-/user/settings").text();
    assert!(page.contains("value=\"Alice Liddell\""), "{page}");
    assert!(
        page.contains("Signed in as <strong>Alice Liddell</strong> (alice)"),
        "the header does not show the display name:\n{page}"
    );
    let listed = text(&run_vole(&forge.data, &["user", "list", "--json"]).stdout);
    assert!(
        listed.contains("\"full_name\": \"Alice Liddell\""),
        "{listed}"
    );

    // bob may not take alice's email; nothing of his changes.
    let mut bob = signed_in(&forge, "bob", 2);
    let csrf = csrf_on(&mut bob, "/-/user/settings");
    let taken = bob.post(
        "/-/user/settings",
        &[
            ("csrf", &csrf),
            ("full_name", "Bob"),
            ("email", "ALICE%40wonder.example"),
        ],
        "",
    );
    assert_eq!(taken.status, 409, "{}", taken.text());
    assert!(
        alert(&taken.text()).contains("in use by another account"),
        "{}",
        taken.text()
    );
    assert!(
        !alert(&taken.text()).contains("alice"),
        "the refusal names whose email it is: {}",
        alert(&taken.text())
    );
    assert!(
        !bob.get("/-/user/settings")
            .text()
            .contains("wonder.example")
    );
    // Without the session's token: refused, nothing written.
    let forged = bob.post(
        "/-/user/settings",
        &[
            ("csrf", "x"),
            ("full_name", "Mallory"),
            ("email", "m%40x.example"),
        ],
        "",
    );
    assert_eq!(forged.status, 403);
    assert!(!bob.get("/-/user/settings").text().contains("Mallory"));

    // The email signs alice in, as her user name does.
    let mut by_email = Browser::at(&forge, 3);
    let signed = by_email.sign_in("alice@wonder.example", PASSWORD, "/");
    assert_eq!(signed.status, 303, "{}", signed.text());
    assert!(
        by_email
            .get("/")
            .text()
            .contains("Signed in as <strong>Alice Liddell</strong> (alice)")
    );
    let mut unknown = Browser::at(&forge, 4);
    let refused = unknown.sign_in("nobody@wonder.example", PASSWORD, "/");
    assert_eq!(
        refused.status, 200,
        "anti-vacuity: an unknown email signs no one in"
    );
    // alice's old email is no one's now: it signs no one in, and bob may
    // take it (the email index let it go).
    let mut old = Browser::at(&forge, 5);
    let refused = old.sign_in("alice@example.org", PASSWORD, "/");
    assert_eq!(refused.status, 200, "a left email still signs alice in");
    let csrf = csrf_on(&mut bob, "/-/user/settings");
    let taken_over = bob.post(
        "/-/user/settings",
        &[
            ("csrf", &csrf),
            ("full_name", "Bob"),
            ("email", "Alice%40example.org"),
        ],
        "",
    );
    assert_eq!(taken_over.status, 303, "{}", taken_over.text());
    let mut as_bob = Browser::at(&forge, 6);
    assert_eq!(
        as_bob.sign_in("alice@example.org", PASSWORD, "/").status,
        303
    );
    assert!(
        as_bob.get("/").text().contains("(bob)"),
        "the email is bob's now"
    );

    // A save that changes nothing writes nothing.
    let profile_sets = || {
        text(&run_vole(&forge.data, &["log", "dump"]).stdout)
            .matches("profile set")
            .count()
    };
    let before = profile_sets();
    assert!(before >= 2, "anti-vacuity: no profile save was audited");
    let again = bob.post(
        "/-/user/settings",
        &[
            ("csrf", &csrf),
            ("full_name", "Bob"),
            ("email", "Alice%40example.org"),
        ],
        "",
    );
    assert_eq!(again.status, 303, "{}", again.text());
    assert_eq!(profile_sets(), before, "an unchanged profile was written");
    // New emails are tried a few times an hour per user: each refusal
    // tells that some account has the email.
    let tries = vole_web::account::EMAIL_CHANGES_PER_HOUR;
    let mut statuses = Vec::new();
    for i in 1..=tries {
        let email = format!("bob{i}%40example.org");
        let answer = bob.post(
            "/-/user/settings",
            &[("csrf", &csrf), ("full_name", "Bob"), ("email", &email)],
            "",
        );
        statuses.push(answer.status);
    }
    // Two were tried above (alice's, refused, and Alice@example.org).
    let allowed = tries as usize - 2;
    assert_eq!(statuses[..allowed], vec![303; allowed], "{statuses:?}");
    assert_eq!(
        statuses[allowed], 429,
        "new emails are not limited per user: {statuses:?}"
    );
    let renamed = bob.post(
        "/-/user/settings",
        &[
            ("csrf", &csrf),
            ("full_name", "Robert"),
            ("email", &format!("bob{allowed}%40example.org")),
        ],
        "",
    );
    assert_eq!(renamed.status, 303, "a display name alone is not limited");
}

#[test]
fn a_password_change_needs_the_current_one_and_ends_the_other_sessions() {
    let forge = forge(&[]);
    let mut here = signed_in(&forge, "alice", 1);
    let mut elsewhere = signed_in(&forge, "alice", 2);
    assert!(
        elsewhere.get("/").text().contains("Signed in as"),
        "anti-vacuity"
    );
    let csrf = csrf_on(&mut here, "/-/user/settings");
    let wrong = here.post(
        "/-/user/password",
        &[
            ("csrf", &csrf),
            ("current", "not+it"),
            ("new", "a+new+long+password"),
            ("confirm", "a+new+long+password"),
        ],
        "",
    );
    assert_eq!(wrong.status, 403, "{}", wrong.text());
    assert!(
        elsewhere.get("/").text().contains("Signed in as"),
        "a refused change ended a session"
    );

    let changed = here.post(
        "/-/user/password",
        &[
            ("csrf", &csrf),
            ("current", &PASSWORD.replace(' ', "+")),
            ("new", "a+new+long+password"),
            ("confirm", "a+new+long+password"),
        ],
        "",
    );
    assert_eq!(changed.status, 303, "{}", changed.text());
    assert!(
        here.get("/").text().contains("Signed in as"),
        "the changing browser was signed out"
    );
    assert!(
        !elsewhere.get("/").text().contains("Signed in as"),
        "another session outlived the change"
    );
    let mut again = Browser::at(&forge, 3);
    assert_eq!(
        again.sign_in("alice", PASSWORD, "/").status,
        200,
        "the old password still works"
    );
    assert_eq!(
        again.sign_in("alice", "a new long password", "/").status,
        303
    );
}

#[test]
fn registration_is_closed_by_default_and_rate_limited_per_address_when_open() {
    let closed = forge(&[]);
    assert_eq!(Browser::at(&closed, 1).get("/-/register").status, 404);
    drop(closed);

    let forge = forge(&["--registration", "open"]);
    let register = |browser: &mut Browser, user: &str| {
        let csrf = csrf_on(browser, "/-/register");
        browser.post(
            "/-/register",
            &[
                ("csrf", &csrf),
                ("user", user),
                ("email", &format!("{user}%40example.org")),
                ("password", "a+long+enough+password"),
                ("confirm", "a+long+enough+password"),
            ],
            "",
        )
    };
    // A name that owns repos but is no user's is not for the taking.
    forge.create_repo(&["acme/secret", "--private"]);
    let mut squatter = Browser::at(&forge, 14);
    let squatted = register(&mut squatter, "ACME");
    assert_eq!(squatted.status, 409, "{}", squatted.text());
    assert!(
        !text(&run_vole(&forge.data, &["user", "list"]).stdout)
            .to_lowercase()
            .contains("acme")
    );
    let mut first = Browser::at(&forge, 10);
    let made = register(&mut first, "carol");
    assert_eq!(made.status, 303, "{}", made.text());
    assert!(
        first
            .get("/")
            .text()
            .contains("Signed in as <strong>carol</strong>")
    );
    // A name or an email taken is said, and makes no one.
    let mut other = Browser::at(&forge, 11);
    assert_eq!(register(&mut other, "Carol").status, 409);
    let mut statuses = Vec::new();
    for i in 0..(vole_web::register::PER_ADDRESS_PER_HOUR + 1) {
        let answer = register(&mut Browser::at(&forge, 12), &format!("user{i}"));
        if answer.status != 303 && answer.status != 429 {
            panic!("{}: {}", answer.status, answer.text());
        }
        statuses.push(answer.status);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 303).count() as u32,
        vole_web::register::PER_ADDRESS_PER_HOUR,
        "{statuses:?}"
    );
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    let mut elsewhere = Browser::at(&forge, 13);
    assert_eq!(
        register(&mut elsewhere, "dave").status,
        303,
        "another address is not limited"
    );
    let users = text(&run_vole(&forge.data, &["user", "list"]).stdout);
    assert!(
        !users.contains(&format!("user{}", vole_web::register::PER_ADDRESS_PER_HOUR)),
        "{users}"
    );
}

#[test]
fn registrations_are_counted_per_ipv6_64_and_probing_taken_names_counts_too() {
    let forge = forge(&["--registration", "open", "--trusted-proxy", "127.0.0.1"]);
    // Through the proxy at 127.0.0.1, for the client `from`.
    let register = |from: &str, user: &str, email: &str| {
        let mut browser = Browser::at(&forge, 1);
        let csrf = csrf_on(&mut browser, "/-/register");
        browser.post(
            "/-/register",
            &[
                ("csrf", &csrf),
                ("user", user),
                ("email", email),
                ("password", "a+long+enough+password"),
                ("confirm", "a+long+enough+password"),
            ],
            &format!("X-Forwarded-For: {from}"),
        )
    };
    // Every address of one /64 is one client.
    let mut statuses = Vec::new();
    for i in 1..=vole_web::register::PER_ADDRESS_PER_HOUR + 1 {
        let answer = register(
            &format!("2001:db8:0:1::{i:x}"),
            &format!("v6user{i}"),
            &format!("v6user{i}%40example.org"),
        );
        statuses.push(answer.status);
    }
    let limit = vole_web::register::PER_ADDRESS_PER_HOUR as usize;
    assert_eq!(statuses[..limit], vec![303; limit], "{statuses:?}");
    assert_eq!(
        statuses[limit], 429,
        "a new address in the same /64 escaped the limit: {statuses:?}"
    );
    let other_net = register("2001:db8:0:2::1", "v6other", "v6other%40example.org");
    assert_eq!(other_net.status, 303, "another /64 is another client");
    // Asking whether names or emails are taken counts as a try: an
    // address cannot probe faster than it could register.
    let mut probes = Vec::new();
    for i in 0..vole_web::register::PER_ADDRESS_PER_HOUR {
        let taken = register("203.0.113.9", "alice", &format!("probe{i}%40example.org"));
        assert!(
            !taken.text().contains("alice@"),
            "a refusal told an email: {}",
            taken.text()
        );
        probes.push(taken.status);
    }
    assert_eq!(probes, vec![409; limit], "{probes:?}");
    let probe = register("203.0.113.9", "newname", "alice%40example.org");
    assert_eq!(
        probe.status,
        429,
        "email probing is not limited: {}",
        probe.text()
    );
}

#[test]
fn the_new_repository_form_creates_through_the_apis_rules() {
    let forge = forge(&[]);
    let mut anonymous = Browser::at(&forge, 9);
    let away = anonymous.get("/-/new");
    assert_eq!(away.status, 303);
    let mut alice = signed_in(&forge, "alice", 1);
    let csrf = csrf_on(&mut alice, "/-/new");
    // Only a server admin is offered another owner.
    let form = alice.get("/-/new").text();
    assert!(
        !form.contains("name=\"owner\""),
        "an owner field alice may not use: {form}"
    );
    assert!(form.contains("Owner: <strong>alice</strong>"), "{form}");
    user_token(&forge.data, "root", true, "admin", &[]);
    set_password(&forge.data, "root", PASSWORD);
    let admin_form = signed_in(&forge, "root", 7).get("/-/new").text();
    assert!(admin_form.contains("name=\"owner\""), "{admin_form}");
    let forged = alice.post(
        "/-/new",
        &[("csrf", ""), ("owner", "alice"), ("name", "forged")],
        "",
    );
    assert_eq!(forged.status, 403);
    assert_eq!(
        alice.get("/alice/forged").status,
        404,
        "a forged form made a repo"
    );
    // Under another user's name: refused as the API refuses it.
    let theirs = alice.post(
        "/-/new",
        &[("csrf", &csrf), ("owner", "bob"), ("name", "x")],
        "",
    );
    assert!(
        theirs.status == 404 || theirs.status == 403,
        "{}",
        theirs.status
    );
    assert_eq!(alice.get("/bob/x").status, 404);
    let made = alice.post(
        "/-/new",
        &[
            ("csrf", &csrf),
            ("owner", "alice"),
            ("name", "demo"),
            ("description", "A+demo"),
            ("private", "on"),
        ],
        "",
    );
    assert_eq!(made.status, 303, "{}", made.text());
    assert_eq!(made.header("location"), Some("/alice/demo"));
    assert!(alice.get("/alice/demo").text().contains("A demo"));
    assert_eq!(
        Browser::at(&forge, 8).get("/alice/demo").status,
        404,
        "the repo is private"
    );
    let twice = alice.post(
        "/-/new",
        &[("csrf", &csrf), ("owner", "alice"), ("name", "DEMO")],
        "",
    );
    assert_eq!(twice.status, 409, "{}", twice.text());
}

#[test]
fn every_form_refuses_another_sessions_token_a_null_origin_and_a_cross_site_post() {
    let forge = forge(&[]);
    forge.create_repo(&["alice/demo"]);
    let mut alice = signed_in(&forge, "alice", 1);
    let mut bob = signed_in(&forge, "bob", 2);
    let own = csrf_on(&mut alice, "/-/user/settings");
    let bobs = csrf_on(&mut bob, "/-/user/settings");
    assert_ne!(own, bobs, "anti-vacuity: two sessions, two tokens");
    let tokens_page = alice.get("/-/user/tokens").text();
    let held = hidden_field(&tokens_page, "name");
    let version = hidden_field(&alice.get("/alice/demo/-/settings").text(), "version");
    let forms: Vec<(&str, Vec<(&str, &str)>)> = vec![
        (
            "/-/user/settings",
            vec![("full_name", "Mallory"), ("email", "alice%40example.org")],
        ),
        (
            "/-/user/password",
            vec![
                ("current", "correct+horse+battery"),
                ("new", "mallory+was+here+1"),
                ("confirm", "mallory+was+here+1"),
            ],
        ),
        (
            "/-/user/tokens",
            vec![("name", "forged"), ("scope", "admin"), ("repos", "")],
        ),
        ("/-/user/tokens/revoke", vec![("name", &held)]),
        ("/-/new", vec![("name", "forged"), ("description", "")]),
        (
            "/alice/demo/-/settings",
            vec![
                ("version", &version),
                ("description", "Mallory"),
                ("default_branch", "main"),
            ],
        ),
        (
            "/alice/demo/-/settings/access",
            vec![
                ("acl_version", "0"),
                ("action", "add"),
                ("member", "bob"),
                ("role", "admin"),
            ],
        ),
        (
            "/alice/demo/-/settings/delete",
            vec![("confirm", "alice%2Fdemo")],
        ),
    ];
    let variants = [
        ("another session's token", bobs.as_str(), ""),
        ("Origin: null", own.as_str(), "Origin: null"),
        (
            "Sec-Fetch-Site: cross-site",
            own.as_str(),
            "Sec-Fetch-Site: cross-site",
        ),
    ];
    for (path, fields) in &forms {
        for (variant, csrf, header) in variants {
            let mut sent = vec![("csrf", csrf)];
            sent.extend(fields.iter().copied());
            let answer = alice.post(path, &sent, header);
            assert_eq!(
                answer.status,
                403,
                "{path} with {variant} was not refused: {}",
                answer.text()
            );
        }
    }
    // Nothing any of them asked was done.
    let users = text(&run_vole(&forge.data, &["user", "list", "--json"]).stdout);
    assert!(!users.contains("Mallory"), "{users}");
    assert_eq!(
        Browser::at(&forge, 3)
            .sign_in("alice", PASSWORD, "/")
            .status,
        303,
        "the password was changed"
    );
    let tokens = alice.get("/-/user/tokens").text();
    assert!(!tokens.contains("forged"), "a token was made");
    assert!(!tokens.contains("<td>revoked</td>"), "a token was revoked");
    assert_eq!(alice.get("/alice/forged").status, 404, "a repo was made");
    let settings = alice.get("/alice/demo/-/settings");
    assert_eq!(settings.status, 200, "the repo was deleted");
    assert!(
        !settings.text().contains("Mallory"),
        "the description changed"
    );
    assert!(!settings.text().contains("<td>bob</td>"), "bob was added");
    // With this session's token and no foreign header, the same form works.
    let mut sent = vec![("csrf", own.as_str())];
    sent.extend(forms[0].1.iter().copied());
    assert_eq!(
        alice.post(forms[0].0, &sent, "").status,
        303,
        "anti-vacuity"
    );
}

#[test]
fn an_unborn_default_branch_is_kept_when_other_settings_are_saved() {
    let forge = forge(&["--anonymous-push"]);
    let mut alice = signed_in(&forge, "alice", 1);
    // Made from the form, with a description past the limit first.
    let csrf = csrf_on(&mut alice, "/-/new");
    let long = "d".repeat(vole_meta::entity::MAX_DESCRIPTION_BYTES + 1);
    let new = |description: &str| {
        vec![
            ("csrf", csrf.clone()),
            ("owner", "alice".to_string()),
            ("name", "unborn".to_string()),
            ("description", description.to_string()),
        ]
    };
    let post = |browser: &mut Browser, fields: Vec<(&str, String)>| {
        let borrowed: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        browser.post("/-/new", &borrowed, "")
    };
    let refused = post(&mut alice, new(&long));
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert!(
        alert(&refused.text()).contains("description"),
        "{}",
        refused.text()
    );
    assert_eq!(post(&mut alice, new("short")).status, 303);
    // A branch other than HEAD's, and HEAD on a branch with no commit (a
    // first push takes HEAD along, so HEAD is set by hand, as a deleted
    // default branch leaves it).
    let work = worktree(&forge.dir, "work");
    let url = format!("http://{}/alice/unborn.git", forge.server().addr);
    git_ok(&work, &["push", "-q", &url, "main:feature"]);
    std::fs::write(
        forge.bare("alice/unborn").join("HEAD"),
        "ref: refs/heads/main\n",
    )
    .unwrap();
    let settings = alice.get("/alice/unborn/-/settings").text();
    assert!(
        settings.contains("<option value=\"main\" selected>main</option>"),
        "the unborn default branch is not the one chosen:\n{settings}"
    );
    let saved = alice.post(
        "/alice/unborn/-/settings",
        &[
            ("csrf", &hidden_field(&settings, "csrf")),
            ("version", &hidden_field(&settings, "version")),
            ("description", "still+unborn"),
            ("default_branch", "main"),
            ("site_ref", &hidden_field(&settings, "site_ref")),
            ("site_dir", &hidden_field(&settings, "site_dir")),
        ],
        "",
    );
    assert_eq!(saved.status, 303, "{}", alert(&saved.text()));
    let head = git_ok(&work, &["ls-remote", "--symref", &url, "HEAD"]);
    assert!(
        !head.contains("refs/heads/feature"),
        "saving the settings moved HEAD: {head}"
    );
    let on_disk = std::fs::read_to_string(forge.bare("alice/unborn").join("HEAD")).unwrap();
    assert_eq!(on_disk.trim(), "ref: refs/heads/main");
}

#[test]
fn the_settings_page_is_an_admins_and_writes_what_the_api_writes() {
    let mut forge = Forge::new(&[]);
    forge.create_repo(&["alice/site"]);
    user_token(&forge.data, "alice", false, "write", &[]);
    user_token(&forge.data, "bob", false, "read", &[]);
    set_password(&forge.data, "alice", PASSWORD);
    set_password(&forge.data, "bob", PASSWORD);
    forge.serve(&["--anonymous-push"]);
    let addr = forge.server().addr;
    let work = forge.dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let url = format!("http://{addr}/alice/site.git");
    for args in [
        vec!["init", "-q", "-b", "main", "."],
        vec!["commit", "-q", "--allow-empty", "-m", "one"],
        vec!["branch", "next"],
        vec!["push", "-q", &url, "main", "next"],
    ] {
        let out = git(&work, &args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }

    // Anonymous: to sign in, and back.
    let mut anonymous = Browser::at(&forge, 9);
    let away = anonymous.get("/alice/site/-/settings");
    assert_eq!(away.status, 303, "{}", away.text());
    assert_eq!(
        away.header("location"),
        Some("/-/login?next=%2Falice%2Fsite%2F%2D%2Fsettings")
    );
    // A form sent by a visitor whose session is gone: back to the page it
    // was sent from, when that page is this server's.
    let mut posted = |referer: &str| {
        let answer = anonymous.post(
            "/alice/site/-/settings",
            &[("csrf", "x"), ("description", "y")],
            &format!("Referer: {referer}"),
        );
        assert_eq!(answer.status, 303, "{}", answer.text());
        answer.header("location").unwrap_or_default().to_string()
    };
    assert_eq!(
        posted(&format!("http://{addr}/alice/site/-/settings")),
        "/-/login?next=%2Falice%2Fsite%2F%2D%2Fsettings"
    );
    assert_eq!(
        posted("http://evil.example/alice/site/-/settings"),
        "/-/login?next=%2F",
        "a foreign page is no place to come back to"
    );
    assert_eq!(
        posted(&format!("http://{addr}//evil.example/")),
        "/-/login?next=%2F"
    );

    let mut alice = signed_in(&forge, "alice", 1);
    let page = alice.get("/alice/site");
    assert!(
        page.text().contains("/alice/site/-/settings"),
        "no settings tab for the owner"
    );
    let settings = alice.get("/alice/site/-/settings");
    assert_eq!(settings.status, 200, "{}", settings.text());
    let csrf = hidden_field(&settings.text(), "csrf");
    let version = hidden_field(&settings.text(), "version");
    let fields = [
        ("csrf", csrf.as_str()),
        ("version", version.as_str()),
        ("description", "Our+site"),
        ("default_branch", "next"),
        ("protected", "main+release"),
        ("site_ref", "refs%2Fheads%2Fmain"),
        ("site_dir", "docs"),
    ];
    let general = alice.post("/alice/site/-/settings", &fields, "");
    assert_eq!(general.status, 303, "{}", alert(&general.text()));
    let head = git(&work, &["ls-remote", "--symref", &url, "HEAD"]);
    assert!(
        text(&head.stdout).contains("ref: refs/heads/next"),
        "HEAD did not move: {}",
        text(&head.stdout)
    );
    let api = http_get(addr, "/api/v1/repos/alice/site/settings").text();
    assert!(
        api.contains("\"protected_branches\":[\"main\",\"release\"]"),
        "{api}"
    );
    assert!(api.contains("\"dir\":\"docs\""), "{api}");
    // The same version again: the settings moved since, refused.
    assert!(
        alice.get("/alice/site").text().contains("Our site"),
        "the description is not shown"
    );
    let stale = alice.post("/alice/site/-/settings", &fields, "");
    assert_eq!(stale.status, 409, "{}", stale.text());

    // A member with read access: sees the repo, not the settings.
    let page = alice.get("/alice/site/-/settings");
    let acl_version = hidden_field(&page.text(), "acl_version");
    let added = alice.post(
        "/alice/site/-/settings/access",
        &[
            ("csrf", &csrf),
            ("acl_version", &acl_version),
            ("action", "add"),
            ("member", "bob"),
            ("role", "read"),
        ],
        "",
    );
    assert_eq!(added.status, 303, "{}", added.text());
    let mut bob = signed_in(&forge, "bob", 2);
    assert!(
        !bob.get("/alice/site").text().contains("/-/settings"),
        "a reader sees the settings tab"
    );
    assert_eq!(bob.get("/alice/site/-/settings").status, 403);
    let bob_csrf = bob.sign_out_token();
    let forged = bob.post(
        "/alice/site/-/settings/delete",
        &[("csrf", &bob_csrf), ("confirm", "alice%2Fsite")],
        "",
    );
    assert_eq!(forged.status, 403, "{}", forged.text());
    assert_eq!(
        bob.get("/alice/site").status,
        200,
        "a reader's forged POST deleted the repo"
    );

    // Deletion: the name typed, or nothing.
    let mistyped = alice.post(
        "/alice/site/-/settings/delete",
        &[("csrf", &csrf), ("confirm", "alice%2Fsit")],
        "",
    );
    assert_eq!(mistyped.status, 422);
    assert_eq!(alice.get("/alice/site").status, 200);
    let deleted = alice.post(
        "/alice/site/-/settings/delete",
        &[("csrf", &csrf), ("confirm", "alice%2Fsite")],
        "",
    );
    assert_eq!(deleted.status, 303, "{}", deleted.text());
    assert_eq!(alice.get("/alice/site").status, 404);
}

#[test]
fn a_repo_is_made_and_shared_in_chromium() {
    let forge = forge(&[]);
    let shots = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/browser-screenshots/repo-admin");
    let base = forge.server().url("");
    let args = ["alice", PASSWORD, "bob", PASSWORD];
    browser_journey("repo_admin.mjs", base.trim_end_matches('/'), &shots, &args);
    for name in ["new-repo", "settings", "member-view", "signed-out"] {
        let shot = shots.join(format!("{name}.png"));
        assert!(
            std::fs::metadata(&shot).is_ok_and(|m| m.len() > 1000),
            "no screenshot {}",
            shot.display()
        );
    }
}
