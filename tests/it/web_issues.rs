//! Issues in the browser, over real HTTP: filing one (labels from a writer
//! only), comments in order with `#N` linked and markup made inert, edit
//! and delete of a comment by its author or a repo admin, close and
//! reopen by the author or a writer, the list's state tabs, counts and
//! filters, the repo tabs' open count; each button absent for whom its
//! rule refuses, and that button's forged POST a 403 with nothing written.

use serde_json::json;

use crate::support::*;

const PASSWORD: &str = "correct horse battery";

/// A form value, percent-encoded.
pub(crate) fn enc(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// alice owns alice/repo (an admin of it), carol may write to it, bob
/// only reads it (it is public).
pub(crate) fn forge() -> Forge {
    let mut forge = Forge::new(&["alice/repo"]);
    let token = user_token(&forge.data, "alice", false, "admin", &[]);
    for user in ["alice", "bob", "carol"] {
        user_token(&forge.data, user, false, "write", &[]);
        set_password(&forge.data, user, PASSWORD);
    }
    forge.serve(&[]);
    let acl = r#"{"visibility":"public","members":[{"name":"carol","role":"write"}]}"#;
    let put = http(
        forge.server().addr,
        &format!(
            "PUT /api/v1/repos/alice/repo/acl HTTP/1.1\r\n{}\r\nContent-Type: application/json\r\nContent-Length: {}",
            basic("alice", &token),
            acl.len()
        ),
        acl.as_bytes(),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    forge
}

pub(crate) fn signed_in(forge: &Forge, user: &str, last: u8) -> Browser {
    let mut browser = Browser::at(forge, last);
    let signed = browser.sign_in(user, PASSWORD, "/");
    assert_eq!(signed.status, 303, "{}", signed.text());
    browser
}

pub(crate) fn page(browser: &mut Browser, path: &str) -> String {
    let page = browser.get(path);
    assert_eq!(page.status, 200, "{path}: {}", page.text());
    page.text()
}

/// POSTs a form of `path`'s page (its CSRF token taken from the page).
pub(crate) fn send(
    browser: &mut Browser,
    path: &str,
    to: &str,
    fields: &[(&str, &str)],
) -> HttpResponse {
    let csrf = hidden_field(&page(browser, path), "csrf");
    let encoded: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| (k.to_string(), enc(v)))
        .collect();
    let mut all: Vec<(&str, &str)> = vec![("csrf", &csrf)];
    all.extend(encoded.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    browser.post(to, &all, "")
}

/// The ids of the comments on an issue page, in order.
fn comment_ids(html: &str) -> Vec<String> {
    html.split("id=\"comment-")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_string())
        .collect()
}

#[test]
fn an_issue_is_filed_discussed_labelled_and_closed_with_each_rule_kept() {
    let forge = forge();
    let mut alice = signed_in(&forge, "alice", 1);
    let mut bob = signed_in(&forge, "bob", 2);
    let mut carol = signed_in(&forge, "carol", 3);

    // bob (a reader) files one; labels are for writers.
    let labelled = send(
        &mut bob,
        "/alice/repo/-/issues/new",
        "/alice/repo/-/issues/new",
        &[("title", "Mine"), ("body", "x"), ("labels", "bug")],
    );
    assert_eq!(labelled.status, 403, "{}", labelled.text());
    assert!(
        labelled.text().contains("may set labels"),
        "{}",
        labelled.text()
    );
    let filed = send(
        &mut bob,
        "/alice/repo/-/issues/new",
        "/alice/repo/-/issues/new",
        &[
            ("title", "<script>alert(1)</script> crashes"),
            (
                "body",
                "It fails. <img src=x onerror=alert(2)> [x](javascript:alert(3)) <b onclick=\"a()\">b</b>",
            ),
        ],
    );
    assert_eq!(filed.status, 303, "{}", filed.text());
    assert_eq!(filed.header("location"), Some("/alice/repo/-/issues/1"));
    let shown = page(&mut bob, "/alice/repo/-/issues/1");
    assert!(
        shown.contains("&#60;script&#62;alert(1)&#60;/script&#62; crashes"),
        "{shown}"
    );
    for inert in ["<script>alert", "onerror", "javascript:", "onclick"] {
        assert!(
            !shown.contains(inert),
            "{inert} is live on the page:\n{shown}"
        );
    }
    assert!(
        shown.contains("value=\"close\""),
        "the author may close his own:\n{shown}"
    );

    // alice files a second, labelled; it names the first.
    let second = send(
        &mut alice,
        "/alice/repo/-/issues/new",
        "/alice/repo/-/issues/new",
        &[
            ("title", "Follow-up"),
            ("body", "see #1 and #9"),
            ("labels", "bug, ui"),
        ],
    );
    assert_eq!(second.status, 303, "{}", second.text());
    let two = page(&mut bob, "/alice/repo/-/issues/2");
    assert!(
        two.contains(r#"href="/alice/repo/-/issues/1""#),
        "#1 is not linked:\n{two}"
    );
    assert!(!two.contains("/-/issues/9"), "#9 names nothing:\n{two}");

    // bob may comment on it, but not close, edit or label alice's issue:
    // no buttons, and the forged forms are refused with nothing written.
    assert!(two.contains("value=\"comment\""), "{two}");
    for absent in ["value=\"close\"", "value=\"labels\"", "?edit=issue"] {
        assert!(!two.contains(absent), "bob sees {absent}:\n{two}");
    }
    let commented = send(
        &mut bob,
        "/alice/repo/-/issues/2",
        "/alice/repo/-/issues/2",
        &[("action", "comment"), ("body", "Me too, see #2")],
    );
    assert_eq!(commented.status, 303, "{}", commented.text());
    for (action, extra) in [
        ("close", ("body", "")),
        // A comment sent with a refused close is not written either.
        ("close", ("body", "Closing it myself")),
        ("labels", ("labels", "wontfix")),
        ("edit", ("title", "Hijacked")),
    ] {
        let forged = send(
            &mut bob,
            "/alice/repo/-/issues/2",
            "/alice/repo/-/issues/2",
            &[("action", action), extra, ("version", "1")],
        );
        assert_eq!(
            forged.status,
            403,
            "bob's forged {action}: {}",
            forged.text()
        );
    }
    let two = page(&mut alice, "/alice/repo/-/issues/2");
    assert!(
        two.contains("Follow-up")
            && !two.contains("Hijacked")
            && !two.contains("wontfix")
            && !two.contains("Closing it myself"),
        "{two}"
    );
    assert!(two.contains("class=\"state open\""), "{two}");

    // Comments in order; bob's comment is his to edit, and alice's (an
    // admin's) to delete; carol (a writer) may do neither.
    let first = send(
        &mut carol,
        "/alice/repo/-/issues/2",
        "/alice/repo/-/issues/2",
        &[("action", "comment"), ("body", "Second comment")],
    );
    assert_eq!(first.status, 303);
    let two = page(&mut carol, "/alice/repo/-/issues/2");
    let ids = comment_ids(&two);
    assert_eq!(ids.len(), 2, "{two}");
    assert!(two.find("Me too").unwrap() < two.find("Second comment").unwrap());
    let bobs = format!("/alice/repo/-/issues/2/comments/{}", ids[0]);
    let forged = send(
        &mut carol,
        "/alice/repo/-/issues/2",
        &bobs,
        &[
            ("action", "edit"),
            ("body", "carol was here"),
            ("version", "1"),
        ],
    );
    assert_eq!(forged.status, 403, "{}", forged.text());
    let edited = send(
        &mut bob,
        "/alice/repo/-/issues/2",
        &bobs,
        &[
            ("action", "edit"),
            ("body", "Me too (edited)"),
            ("version", "1"),
        ],
    );
    assert_eq!(edited.status, 303, "{}", edited.text());
    let stale = send(
        &mut bob,
        "/alice/repo/-/issues/2",
        &bobs,
        &[("action", "edit"), ("body", "stale"), ("version", "1")],
    );
    assert_eq!(
        stale.status,
        409,
        "an edit of an older version: {}",
        stale.text()
    );
    let deleted = send(
        &mut alice,
        "/alice/repo/-/issues/2",
        &bobs,
        &[("action", "delete"), ("version", "2")],
    );
    assert_eq!(deleted.status, 303, "{}", deleted.text());
    let two = page(&mut alice, "/alice/repo/-/issues/2");
    assert_eq!(comment_ids(&two), vec![ids[1].clone()], "{two}");
    assert!(
        !two.contains("Me too") && !two.contains("carol was here"),
        "{two}"
    );

    // carol labels and closes; the list's tabs, counts and filters follow.
    let labels = send(
        &mut carol,
        "/alice/repo/-/issues/2",
        "/alice/repo/-/issues/2",
        &[("action", "labels"), ("labels", "bug, triaged")],
    );
    assert_eq!(labels.status, 303, "{}", labels.text());
    let closed = send(
        &mut carol,
        "/alice/repo/-/issues/2",
        "/alice/repo/-/issues/2",
        &[("action", "close"), ("body", "Fixed in main")],
    );
    assert_eq!(closed.status, 303, "{}", closed.text());
    let two = page(&mut bob, "/alice/repo/-/issues/2");
    assert!(
        two.contains("class=\"state closed\"")
            && two.contains("Fixed in main")
            && two.contains(">triaged<"),
        "{two}"
    );
    let open = page(&mut bob, "/alice/repo/-/issues");
    assert!(
        open.contains("Open <span class=\"count\">1</span>")
            && open.contains("Closed <span class=\"count\">1</span>"),
        "{open}"
    );
    assert!(
        open.contains("/alice/repo/-/issues/1\"") && !open.contains("/alice/repo/-/issues/2\""),
        "{open}"
    );
    assert!(
        open.contains("Issues <span class=\"count\">1</span>"),
        "the repo tab's open count:\n{open}"
    );
    let closed_tab = page(&mut bob, "/alice/repo/-/issues?state=closed&label=triaged");
    assert!(
        closed_tab.contains("/alice/repo/-/issues/2\""),
        "{closed_tab}"
    );
    let by_alice = page(&mut bob, "/alice/repo/-/issues?state=open&author=alice");
    assert!(by_alice.contains("None here."), "{by_alice}");
    let home = page(&mut bob, "/alice/repo");
    assert!(
        home.contains("Issues <span class=\"count\">1</span>"),
        "{home}"
    );

    // The author reopens his own; an anonymous visitor has no forms and
    // is sent to sign in by the new-issue page.
    let reopened = send(
        &mut bob,
        "/alice/repo/-/issues/1",
        "/alice/repo/-/issues/1",
        &[("action", "reopen")],
    );
    assert_eq!(reopened.status, 303, "{}", reopened.text());
    let mut anonymous = Browser::at(&forge, 4);
    let seen = page(&mut anonymous, "/alice/repo/-/issues/2");
    assert!(!seen.contains("<form class=\"stacked-form\""), "{seen}");
    let new = anonymous.get("/alice/repo/-/issues/new");
    assert_eq!(new.status, 303);
    assert!(
        new.header("location")
            .unwrap()
            .starts_with("/-/login?next=")
    );
    let missing = anonymous.get("/alice/repo/-/issues/99");
    assert_eq!(missing.status, 404);
}

#[test]
fn a_page_of_long_comments_is_cut_by_its_bytes_and_the_rest_follows_on_the_next() {
    let forge = forge();
    let alice = crate::threads_api::Caller {
        addr: forge.server().addr,
        auth: basic(
            "alice",
            &user_token(&forge.data, "alice", false, "write", &[]),
        ),
    };
    let (status, issue) = alice.call("POST", "/issues", Some(json!({"title": "long"})));
    assert_eq!(status, 201, "{issue}");
    // Three comments of 250,000 bytes and a short one: 200 fit a page by
    // count, but a page renders at most 512 KiB of comment text.
    for n in 0..4 {
        let body = if n < 3 {
            format!("long{n} {}", "x".repeat(250_000))
        } else {
            "short3".to_string()
        };
        let (status, made) = alice.call("POST", "/issues/1/comments", Some(json!({"body": body})));
        assert_eq!(status, 201, "{made}");
    }
    let mut bob = signed_in(&forge, "bob", 41);
    let first = page(&mut bob, "/alice/repo/-/issues/1");
    let second = page(&mut bob, "/alice/repo/-/issues/1?page=2");
    let shown = |html: &str| {
        ["long0", "long1", "long2", "short3"]
            .into_iter()
            .filter(|c| html.contains(&format!("<p>{c} ")) || html.contains(&format!("<p>{c}</p>")))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (shown(&first), shown(&second)),
        (vec!["long0", "long1"], vec!["long2", "short3"]),
        "the comment page was not cut by its bytes"
    );
    assert!(
        first.contains("page=2"),
        "the first page has no link to the second"
    );
    assert!(
        !second.contains("page=3"),
        "the last page links to a page past it"
    );
    // The author's edit link of a comment on page 2 opens it there.
    let mut alice_web = signed_in(&forge, "alice", 42);
    let second = page(&mut alice_web, "/alice/repo/-/issues/1?page=2");
    let link = second
        .split("href=\"?page=2&amp;edit=")
        .nth(1)
        .map(|rest| rest.split('#').next().unwrap().to_string())
        .unwrap_or_else(|| panic!("no edit link keeps page 2:\n{second}"));
    let editing = page(
        &mut alice_web,
        &format!("/alice/repo/-/issues/1?page=2&edit={link}"),
    );
    assert!(
        editing.contains("aria-label=\"Comment\">long2 "),
        "the edit form of a comment on page 2 did not open"
    );
}
