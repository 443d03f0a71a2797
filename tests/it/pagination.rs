//! Hostile page numbers on every list: the API answers a 400 that says
//! what is allowed, the web UI shows page 1; nothing overflows or asks git
//! for an unbounded skip.

use crate::support::*;

#[test]
fn hostile_page_numbers_are_a_400_in_the_api_and_page_one_in_the_web_ui() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    let work = worktree(dir.path(), "work");
    git_ok(
        &work,
        &["push", "-q", &server.url("/alice/repo.git"), "HEAD:main"],
    );

    let api_lists = [
        "/api/v1/repos/alice/repo/issues",
        "/api/v1/repos/alice/repo/pulls",
        "/api/v1/repos/alice/repo/activity",
        "/api/v1/repos/alice/repo/issues/1/comments",
    ];
    for list in api_lists {
        for (query, says) in [
            (
                "page=18446744073709551615",
                "page must be a whole number from 1 to 10000",
            ),
            ("page=10001", "page must be a whole number from 1 to 10000"),
            (
                "per_page=101",
                "per_page must be a whole number from 1 to 100",
            ),
            (
                "per_page=0",
                "per_page must be a whole number from 1 to 100",
            ),
            (
                "per_page=abc",
                "per_page must be a whole number from 1 to 100",
            ),
        ] {
            let response = http_get(server.addr, &format!("{list}?{query}"));
            assert_eq!(response.status, 400, "{list}?{query}: {}", response.text());
            assert!(
                response.text().contains(says),
                "{list}?{query}: {}",
                response.text()
            );
        }
    }
    // The edges of the range are served.
    let last = http_get(
        server.addr,
        "/api/v1/repos/alice/repo/activity?page=10000&per_page=100",
    );
    assert_eq!(last.status, 200, "{}", last.text());
    assert_eq!(last.text().trim(), "[]");
    let first = http_get(server.addr, "/api/v1/repos/alice/repo/activity?per_page=1");
    assert_eq!(first.status, 200);
    assert!(
        first.text().contains("refs/heads/main"),
        "anti-vacuity: {}",
        first.text()
    );

    for page in ["/", "/alice/repo/-/commits/main"] {
        let reference = http_get(server.addr, page);
        assert_eq!(reference.status, 200);
        for query in [
            "page=18446744073709551615",
            "page=0",
            "page=x",
            "page=10001",
        ] {
            let response = http_get(server.addr, &format!("{page}?{query}"));
            assert_eq!(response.status, 200, "{page}?{query}: {}", response.text());
            assert_eq!(
                response.text(),
                reference.text(),
                "{page}?{query} must show page 1"
            );
        }
    }
}

#[test]
fn gitea_clients_page_with_limit_read_the_version_and_may_read_the_paging_headers() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_repo(dir.path());
    let server = TestServer::builder()
        .data(&data)
        .arg("--anonymous-push")
        .start();
    let work = worktree(dir.path(), "work");
    for n in 0..3 {
        commit_file(&work, &format!("f{n}.txt"), b"x\n");
        git_ok(
            &work,
            &["push", "-q", &server.url("/alice/repo.git"), "HEAD:main"],
        );
    }
    let version = http_get(server.addr, "/api/v1/version");
    assert_eq!(version.status, 200, "{}", version.text());
    let said: serde_json::Value = serde_json::from_slice(&version.body).unwrap();
    let text = said["version"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("1.22.0+vole-"),
        "not a Gitea version a client can compare: {said}"
    );
    // `limit` is Gitea's page size; past Gitea's 50 it is 50, not a 400.
    let paged = http_get(server.addr, "/api/v1/repos/alice/repo/activity?limit=2");
    assert_eq!(paged.status, 200, "{}", paged.text());
    let items: serde_json::Value = serde_json::from_slice(&paged.body).unwrap();
    assert_eq!(items.as_array().map(Vec::len), Some(2), "{items}");
    assert_eq!(paged.header("x-total-count"), Some("3"));
    let exposed = paged
        .header("access-control-expose-headers")
        .unwrap_or_default()
        .to_ascii_lowercase();
    assert!(
        exposed.contains("link") && exposed.contains("x-total-count"),
        "a browser's script cannot read the paging headers: {exposed:?}"
    );
    let big = http_get(server.addr, "/api/v1/repos/alice/repo/activity?limit=1000");
    assert_eq!(big.status, 200, "{}", big.text());
    // As Gitea reads them: a `limit` that is not a number above 0 is the
    // default (30), such a `page` the first.
    let all = http_get(server.addr, "/api/v1/repos/alice/repo/activity");
    assert_eq!(all.status, 200, "{}", all.text());
    for query in [
        "limit=0",
        "limit=-5",
        "limit=x",
        "limit=",
        "page=0",
        "page=-1",
        "page=x",
        "page=",
        "page=0&limit=0",
    ] {
        let zero = http_get(
            server.addr,
            &format!("/api/v1/repos/alice/repo/activity?{query}"),
        );
        assert_eq!(zero.status, 200, "{query}: {}", zero.text());
        assert_eq!(
            zero.text(),
            all.text(),
            "{query} is not the first page of 30"
        );
    }
    let second = http_get(
        server.addr,
        "/api/v1/repos/alice/repo/activity?page=2&limit=0",
    );
    assert_eq!(second.text().trim(), "[]", "3 items fit the default page");
}
