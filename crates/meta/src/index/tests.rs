//! The index's unit tests.
use super::*;

fn issue(number: u64, version: u64, state: IssueState, labels: &[&str]) -> Entity {
    Entity::Issue(Issue {
        v: 1,
        serial: number,
        id: format!("id{number}"),
        number,
        title: "t".into(),
        body: String::new(),
        state,
        labels: labels.iter().map(|l| l.to_string()).collect(),
        author: "ann".into(),
        created_at: String::new(),
        updated_at: String::new(),
        version,
        replaces: None,
    })
}

#[test]
fn facets_follow_edits_and_older_versions_are_ignored() {
    let mut index = Index::default();
    assert!(index.apply(issue(1, 1, IssueState::Open, &["bug"])));
    assert!(index.apply(issue(2, 1, IssueState::Open, &["ui"])));
    assert!(index.apply(issue(1, 2, IssueState::Closed, &["ui"])));
    assert!(!index.apply(issue(1, 1, IssueState::Open, &["bug"])));
    let open = index.issues(
        &Filter {
            state: Some(IssueState::Open),
            ..Filter::default()
        },
        Pagination::new(1, 10).unwrap(),
    );
    assert_eq!(open.items.iter().map(|i| i.number).collect::<Vec<_>>(), [2]);
    let ui = index.issues(
        &Filter {
            label: Some("ui".into()),
            ..Filter::default()
        },
        Pagination::new(1, 10).unwrap(),
    );
    assert_eq!(
        ui.items.iter().map(|i| i.number).collect::<Vec<_>>(),
        [2, 1]
    );
    let bug = index.issues(
        &Filter {
            label: Some("bug".into()),
            ..Filter::default()
        },
        Pagination::new(1, 10).unwrap(),
    );
    assert_eq!(bug.total, 0, "a label removed by an edit still matched");
    assert_eq!(index.len(), 2);
    assert_eq!(index.max_number(), 2);
}

#[test]
fn an_authors_bytes_follow_their_documents_as_they_stand() {
    let mut index = Index::default();
    let sized = |number, version, body: &str| {
        let Entity::Issue(mut issue) = issue(number, version, IssueState::Open, &["bug"]) else {
            unreachable!()
        };
        issue.body = body.into();
        Entity::Issue(issue)
    };
    // "t" + body + "bug"
    index.apply(sized(1, 1, "0123456789"));
    index.apply(sized(2, 1, "01234"));
    assert_eq!(index.authored_bytes("ann"), 14 + 9);
    // An edit replaces its document's bytes; an older version changes nothing.
    index.apply(sized(1, 2, "0"));
    index.apply(sized(1, 1, "0123456789"));
    assert_eq!(index.authored_bytes("ann"), 5 + 9);
    assert_eq!(index.authored_bytes("bob"), 0);

    // Past the limit only what adds to them is refused.
    assert_eq!(
        index.over_authored_limit(&sized(3, 1, "0123456789"), 20),
        Some(("ann".to_string(), 28))
    );
    assert_eq!(index.over_authored_limit(&sized(3, 1, ""), 20), None);
    assert_eq!(index.over_authored_limit(&sized(2, 2, "0123"), 10), None);
    assert_eq!(
        index.over_authored_limit(&sized(2, 2, "0123456"), 10),
        Some(("ann".to_string(), 16))
    );
}
