//! The index's unit tests.
use super::facets::Numbers;
use super::*;
use crate::bodies::{BodyCache, DocReader};

/// A reader of bodies over an empty repo: these tests' documents are
/// held whole, so nothing is read from it.
fn no_docs() -> (tempfile::TempDir, DocReader) {
    let dir = tempfile::tempdir().unwrap();
    gix::init_bare(dir.path()).unwrap();
    let docs = DocReader::new("r", dir.path(), BodyCache::new(1 << 20));
    (dir, docs)
}

/// A page of threads as the store lists them: picked, the text decided,
/// made whole.
fn listed(
    index: &Index,
    query: &ThreadQuery,
    page: Pagination,
    docs: &DocReader,
) -> Page<AnyThread> {
    let stored = match index.pick_threads(query, page) {
        ThreadPick::Page(page) => page,
        ThreadPick::Text { text, candidates } => {
            let kept = ThreadPick::decide(&text, candidates, docs).unwrap();
            Page {
                items: index.stored_threads(page.slice(&kept).copied()),
                total: kept.len(),
            }
        }
    };
    let mut git = None;
    Page {
        items: stored
            .items
            .into_iter()
            .map(|t| t.whole(docs, &mut git).unwrap())
            .collect(),
        total: stored.total,
    }
}

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
        state_changed_at: None,
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
    assert_eq!(
        open.items
            .iter()
            .map(|i| i.fields().number)
            .collect::<Vec<_>>(),
        [2]
    );
    let ui = index.issues(
        &Filter {
            label: Some("ui".into()),
            ..Filter::default()
        },
        Pagination::new(1, 10).unwrap(),
    );
    assert_eq!(
        ui.items
            .iter()
            .map(|i| i.fields().number)
            .collect::<Vec<_>>(),
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

fn change_at(number: u64, version: u64, state: ChangeState) -> Entity {
    let Entity::Change(mut change) = change(number, state) else {
        unreachable!()
    };
    change.version = version;
    Entity::Change(change)
}

fn change(number: u64, state: ChangeState) -> Entity {
    Entity::Change(Change {
        v: 1,
        serial: number,
        id: format!("cr{number}"),
        number,
        title: "t".into(),
        body: String::new(),
        source_branch: format!("b{number}"),
        target_branch: "main".into(),
        state,
        labels: Vec::new(),
        author: "ann".into(),
        created_at: String::new(),
        updated_at: String::new(),
        version: 1,
        replaces: None,
        state_changed_at: None,
        merge_commit: None,
        merged_by: None,
        merged_at: None,
        merge_method: None,
        merged_onto: None,
        merged_head: None,
    })
}

/// Pages of every kind and state through the sets by state and through
/// the scan, compared; how many threads were compared.
fn fast_matches_scan(index: &Index, pages: &[(u64, u64)]) -> usize {
    let (_dir, docs) = no_docs();
    let mut compared = 0;
    for kinds in [ThreadKinds::Both, ThreadKinds::Issues, ThreadKinds::Changes] {
        for state in [ThreadState::Open, ThreadState::Closed, ThreadState::All] {
            for &(page, per_page) in pages {
                let page = Pagination::new(page, per_page).unwrap();
                let fast = ThreadQuery {
                    kinds,
                    state,
                    ..ThreadQuery::default()
                };
                // An empty text matches every thread but takes the scan.
                let scan = ThreadQuery {
                    text: Some(String::new()),
                    ..fast.clone()
                };
                assert!(fast.by_state_only() && !scan.by_state_only());
                let (a, b) = (
                    listed(index, &fast, page, &docs),
                    listed(index, &scan, page, &docs),
                );
                let numbers =
                    |p: &Page<AnyThread>| p.items.iter().map(AnyThread::number).collect::<Vec<_>>();
                assert_eq!(numbers(&a), numbers(&b), "{kinds:?} {state:?} {page:?}");
                assert_eq!(a.total, b.total, "{kinds:?} {state:?}");
                compared += a.items.len();
            }
        }
    }
    compared
}

#[test]
fn a_list_by_state_alone_pages_as_the_full_scan_does() {
    let mut index = Index::default();
    for n in 1..=60u64 {
        let entity = match n % 5 {
            0 => change(n, ChangeState::Open),
            1 => change(n, ChangeState::Merged),
            2 => change(n, ChangeState::Closed),
            3 => issue(n, 1, IssueState::Closed, &[]),
            _ => issue(n, 1, IssueState::Open, &[]),
        };
        index.apply(entity);
    }
    let compared = fast_matches_scan(&index, &[(1, 7), (2, 7), (3, 10), (9, 7)]);
    assert!(compared > 100, "anti-vacuity: {compared} threads compared");
}

fn comment(serial: u64, id: &str, version: u64, deleted: bool) -> Entity {
    Entity::Comment(Comment {
        v: 1,
        serial,
        id: id.into(),
        thread: "id1".into(),
        thread_kind: ThreadKind::Issue,
        body: String::new(),
        author: "ann".into(),
        created_at: String::new(),
        updated_at: String::new(),
        version,
        replaces: None,
        deleted,
        event: None,
    })
}

#[test]
fn the_repos_comments_walk_by_serial_and_count_only_the_live_ones() {
    let mut index = Index::default();
    index.apply(issue(1, 1, IssueState::Open, &[]));
    // Ids out of serial order: the walk follows serials (Gitea's ids).
    for (serial, id) in [(3, "a"), (1, "c"), (2, "b"), (4, "d")] {
        assert!(index.apply(comment(serial, id, 1, false)));
    }
    let walked = |index: &Index| {
        let (walk, live) = index.comments_by_serial();
        (walk.map(|c| c.fields().serial).collect::<Vec<_>>(), live)
    };
    assert_eq!(walked(&index), (vec![1, 2, 3, 4], 4));
    // A deletion leaves the walk and the count; an older version of it
    // folded later brings neither back; an edit counts once.
    assert!(index.apply(comment(2, "b", 2, true)));
    assert!(!index.apply(comment(2, "b", 1, false)));
    assert!(index.apply(comment(4, "d", 2, false)));
    assert_eq!(walked(&index), (vec![1, 3, 4], 3));
    // An event (a push to a pull request) is no comment a person wrote.
    let Entity::Comment(mut pushed) = comment(5, "e", 1, false) else {
        unreachable!()
    };
    pushed.event = Some(crate::entity::ThreadEvent::Pushed {
        before: None,
        after: "0".repeat(40),
        commits: 1,
    });
    assert!(index.apply(Entity::Comment(pushed)));
    assert_eq!(walked(&index), (vec![1, 3, 4], 3));
    assert_eq!(index.comment_count("id1"), 3);
}
#[test]
fn deep_pages_by_state_match_the_scan_through_state_changes() {
    let mut index = Index::default();
    let mut x = 11u64;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    for n in 1..=4000u64 {
        let entity = if next().is_multiple_of(3) {
            change(n, ChangeState::Open)
        } else {
            issue(n, 1, IssueState::Open, &[])
        };
        index.apply(entity);
    }
    // Close, merge and reopen some, more than once.
    for version in 2..=4u64 {
        for _ in 0..1500 {
            let n = next() % 4000 + 1;
            let entity = if index.changes.contains_key(&n) {
                let states = [ChangeState::Open, ChangeState::Closed, ChangeState::Merged];
                change_at(n, version, states[(next() % 3) as usize])
            } else {
                let states = [IssueState::Open, IssueState::Closed];
                issue(n, version, states[(next() % 2) as usize], &[])
            };
            index.apply(entity);
        }
    }
    let compared = fast_matches_scan(
        &index,
        &[(1, 50), (7, 50), (33, 30), (40, 50), (79, 50), (200, 50)],
    );
    assert!(compared > 1000, "anti-vacuity: {compared} threads compared");
}

/// What the index takes of `indexset` (ranks, positions, lengths, order)
/// agrees with the standard set through inserts and removals. (Its range
/// iterators did not, at an end below the first number: they are not
/// used.)
#[test]
fn the_ranked_sets_agree_with_a_plain_set_on_what_the_index_uses() {
    let mut checked = 0;
    for size in [3u64, 10, 50, 100, 500, 3000] {
        let mut ranked = Numbers::new();
        let mut plain = std::collections::BTreeSet::new();
        let mut x = 7u64;
        for _ in 0..size * 2 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let n = (x >> 33) % (size * 3);
            if (x >> 20).is_multiple_of(3) {
                assert_eq!(ranked.remove(&n), plain.remove(&n));
            } else {
                assert_eq!(ranked.insert(n), plain.insert(n));
            }
        }
        assert_eq!(ranked.len(), plain.len(), "len at {size}");
        assert!(ranked.iter().copied().eq(plain.iter().copied()));
        assert!(ranked.iter().rev().copied().eq(plain.iter().rev().copied()));
        for n in 0..size * 3 + 2 {
            assert_eq!(ranked.contains(&n), plain.contains(&n), "contains {n}");
        }
        for (i, n) in plain.iter().enumerate() {
            assert_eq!(ranked.get_index(i), Some(n), "position {i} at {size}");
        }
        for n in 0..size * 3 + 2 {
            assert_eq!(ranked.rank(&n), plain.range(..n).count(), "rank of {n}");
            checked += 1;
        }
    }
    assert!(checked > 10_000, "anti-vacuity: {checked}");
}

#[test]
fn text_and_labels_filters_match_ascii_case_aside() {
    let mut index = Index::default();
    let titled = |number: u64, title: &str, labels: &[&str]| {
        let Entity::Issue(mut issue) = issue(number, 1, IssueState::Open, labels) else {
            unreachable!()
        };
        issue.title = title.into();
        Entity::Issue(issue)
    };
    index.apply(titled(1, "Hello World", &["Bug"]));
    index.apply(titled(2, "aaaab crash", &["ui"]));
    index.apply(titled(3, "nothing here", &[]));
    let (_dir, docs) = no_docs();
    let found = |query: ThreadQuery| {
        listed(&index, &query, Pagination::new(1, 10).unwrap(), &docs)
            .items
            .iter()
            .map(AnyThread::number)
            .collect::<Vec<_>>()
    };
    let text = |q: &str| ThreadQuery {
        text: Some(q.into()),
        ..ThreadQuery::default()
    };
    assert_eq!(found(text("WORLD")), [1]);
    // A match that starts inside a partial one.
    assert_eq!(found(text("aaab")), [2]);
    assert_eq!(found(text("zzz")), Vec::<u64>::new());
    let labels = |names: &[&str]| ThreadQuery {
        labels: names.iter().map(|n| n.to_string()).collect(),
        ..ThreadQuery::default()
    };
    assert_eq!(found(labels(&["bug"])), [1]);
    assert_eq!(found(labels(&["UI", "bug"])), [2, 1]);
    assert_eq!(found(labels(&["none"])), Vec::<u64>::new());
}

/// An issue of `body`, as an entity and as the bytes a fold writes.
fn issue_with_body(number: u64, version: u64, body: &str) -> (Entity, Vec<u8>) {
    let Entity::Issue(mut doc) = issue(number, version, IssueState::Open, &[]) else {
        unreachable!()
    };
    doc.body = body.to_string();
    let entity = Entity::Issue(doc);
    let bytes = serde_json::to_vec(&entity).unwrap();
    (entity, bytes)
}

fn blob_of(bytes: &[u8]) -> ObjectId {
    gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, bytes).unwrap()
}

/// The fold of `bytes` at `path` told to the index.
fn folded(index: &mut Index, path: &str, bytes: &[u8]) {
    let doc = stored::FoldedDoc::read(path, bytes, gix::hash::Kind::Sha1).unwrap();
    index.body_folded(&doc);
}

#[test]
fn a_body_is_left_in_git_only_past_the_bound_and_only_for_the_version_held() {
    let mut index = Index::default();
    // At the bound a body stays; one byte past it (in characters of two
    // bytes too) it is left in its blob.
    let at = "a".repeat(stored::INLINE_BODY_BYTES);
    let past = "é".repeat(stored::INLINE_BODY_BYTES / 2 + 1);
    for (number, body, left) in [(1, at.as_str(), false), (2, past.as_str(), true)] {
        let (entity, bytes) = issue_with_body(number, 1, body);
        index.apply(entity);
        folded(
            &mut index,
            &format!("issues/x/id{number}/issue.json"),
            &bytes,
        );
        let stored = index.issue(number).unwrap();
        assert_eq!(
            stored.body_blob().is_some(),
            left,
            "#{number}: {} bytes",
            body.len()
        );
        assert_eq!(stored.held_body().is_none(), left);
        assert_eq!(stored.body_len(), body.len() as u64);
    }
    // Version 2 written while version 1's fold was under way: the fold of
    // version 1 leaves version 2 whole; its own fold leaves it in git.
    let long = "the long body of an issue, ".repeat(4);
    let (v1, v1_bytes) = issue_with_body(3, 1, &long);
    let (v2, v2_bytes) = issue_with_body(3, 2, &format!("edited: {long}"));
    index.apply(v1);
    index.apply(v2);
    let path = "issues/x/id3/issue.json";
    folded(&mut index, path, &v1_bytes);
    assert!(
        index.issue(3).unwrap().held_body().is_some(),
        "the fold of version 1 left version 2's body to version 1's blob"
    );
    folded(&mut index, path, &v2_bytes);
    assert_eq!(
        index.issue(3).unwrap().body_blob(),
        Some(blob_of(&v2_bytes))
    );
    // The author's bytes count the body left in git.
    let bytes: usize = [at.len(), past.len(), long.len() + "edited: ".len()]
        .iter()
        .map(|b| b + 1)
        .sum();
    assert_eq!(index.authored_bytes("ann"), bytes as u64);
}

#[test]
fn a_text_filter_reads_bodies_left_in_git_newest_first_and_no_more_than_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let repo = gix::init_bare(dir.path()).unwrap();
    let docs = DocReader::new("r", dir.path(), BodyCache::new(1 << 20));
    let long = "a long body that says nothing in particular, ".repeat(3);
    let mut index = Index::default();
    // Issues 1-6 and change requests 7-8, each body long; the text is in
    // the bodies of 2, 5 and 7 and in the title of 1; every document
    // folded, its body left in its blob.
    for n in 1..=8u64 {
        let mut entity = if n <= 6 {
            issue(n, 1, IssueState::Open, &[])
        } else {
            change(n, ChangeState::Open)
        };
        let body = if [2, 5, 7].contains(&n) {
            format!("{long} the NEEDLE")
        } else {
            long.clone()
        };
        match &mut entity {
            Entity::Issue(i) => {
                i.body = body;
                i.title = if n == 1 { "needle".into() } else { "t".into() };
            }
            Entity::Change(c) => c.body = body,
            _ => unreachable!(),
        }
        let bytes = serde_json::to_vec(&entity).unwrap();
        let blob = repo.write_blob(&bytes).unwrap().detach();
        assert!(index.apply_folded(entity, blob));
    }
    let query = ThreadQuery {
        state: ThreadState::All,
        text: Some("needle".into()),
        ..ThreadQuery::default()
    };
    let ThreadPick::Text { text, candidates } =
        index.pick_threads(&query, Pagination::new(1, 10).unwrap())
    else {
        panic!("a text filter was answered without its bodies");
    };
    // Newest first across both kinds; the title's match needs no read.
    assert_eq!(
        candidates.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        [8, 7, 6, 5, 4, 3, 2, 1]
    );
    assert!(candidates[7].1.is_none() && candidates.iter().take(7).all(|(_, b)| b.is_some()));
    let decide_within = |reads, bytes| {
        ThreadPick::decide_reading(&text, candidates.clone(), &docs, reads, bytes).unwrap()
    };
    let decide = |reads| decide_within(reads, u64::MAX);
    assert_eq!(decide(100), [7, 5, 2, 1], "every body read");
    // Four reads: 8, 7, 6 and 5; past them, by title alone.
    assert_eq!(decide(4), [7, 5, 1], "past the bound, bodies were read");
    // The same bound in bytes: the bodies of 8, 7, 6 and 5 (and one
    // byte short of 4's), then by title alone.
    let lens: Vec<u64> = candidates
        .iter()
        .filter_map(|(_, b)| b.map(|b| b.1))
        .collect();
    assert_eq!(
        lens[0],
        long.len() as u64,
        "a candidate's length is not its body's"
    );
    let four: u64 = lens.iter().take(4).sum();
    assert_eq!(
        decide_within(100, four + lens[4] - 1),
        [7, 5, 1],
        "past the bound in bytes, bodies were read"
    );
    assert_eq!(decide_within(100, four + lens[4]), [7, 5, 1]);
    assert_eq!(decide_within(100, lens.iter().sum()), [7, 5, 2, 1]);
}

/// Facets built at the end of a background read (some documents applied
/// before it, as the open does, the rest in another order, some in two
/// or three versions, with repeated labels and authors of one version)
/// are the sets kept document by document: the same
/// parts, and the same deep pages by state, label and author, in sets of
/// several ranked nodes each.
#[test]
fn facets_built_at_the_end_of_a_read_are_the_ones_kept_document_by_document() {
    let mut x = 5u64;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    let labels = ["bug", "ui", "docs"];
    let authors = ["ann", "bob", "cy"];
    let mut docs = Vec::new();
    for n in 1..=6000u64 {
        let versions = 1 + next() % 3;
        for version in 1..=versions {
            let mut entity = if n % 4 == 0 {
                let states = [ChangeState::Open, ChangeState::Closed, ChangeState::Merged];
                change_at(n, version, states[(next() % 3) as usize])
            } else {
                let states = [IssueState::Open, IssueState::Closed];
                // One to three labels, a label sometimes twice.
                let on: Vec<&str> = (0..1 + next() % 3)
                    .map(|_| labels[(next() % 3) as usize])
                    .collect();
                issue(n, version, states[(next() % 2) as usize], &on)
            };
            // Now and then an author of one version only: their set is
            // left empty when a later version is someone else's.
            let author = match next() % 5 {
                0 => format!("once-{n}-{version}"),
                pick => authors[(pick % 3) as usize].to_string(),
            };
            match &mut entity {
                Entity::Issue(i) => i.author = author,
                Entity::Change(c) => c.author = author,
                _ => unreachable!(),
            }
            docs.push(entity);
        }
    }
    let mut kept = Index::default();
    for doc in &docs {
        kept.apply(doc.clone());
    }
    // Another order: a start reads the shards in theirs.
    let mut shuffled = docs.clone();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    let mut built = Index::default();
    let (at_open, in_background) = shuffled.split_at(700);
    for doc in at_open {
        built.apply(doc.clone());
    }
    built.defer_facets();
    for doc in in_background {
        built.apply(doc.clone());
    }
    assert_ne!(
        parts::parts(&built),
        parts::parts(&kept),
        "anti-vacuity: the facets were left out while deferred"
    );
    built.build_deferred_facets();
    let (built_parts, kept_parts) = (parts::parts(&built), parts::parts(&kept));
    assert_eq!(built_parts.len(), kept_parts.len());
    for (i, (b, k)) in built_parts.iter().zip(&kept_parts).enumerate() {
        assert!(
            b == k,
            "part {i} of the index differs once the deferred facets are built \
             (built {} bytes, kept {} bytes)",
            b.len(),
            k.len()
        );
    }
    // Edits after the build (the read's log records, and writes once it
    // is served) take the sets one document at a time again: a label
    // dropped, an author changed, a state flipped, on both indexes.
    for n in (1..=6000u64).filter(|n| n % 4 != 0 && n % 7 == 0) {
        let held = kept.issues.get(&n).unwrap().fields().clone();
        let mut edited = held.clone();
        edited.version += 1;
        edited.labels.clear();
        edited.author = format!("{}-again", held.author);
        edited.state = match held.state {
            IssueState::Open => IssueState::Closed,
            IssueState::Closed => IssueState::Open,
        };
        assert!(kept.apply(Entity::Issue(edited.clone())));
        assert!(built.apply(Entity::Issue(edited)));
    }
    assert!(
        parts::parts(&built) == parts::parts(&kept),
        "the built sets follow edits as the kept ones do"
    );
    let largest = built.issue_facets.in_state(IssueState::Open);
    assert!(largest > 2000, "anti-vacuity: {largest} in a set");
    let compared = fast_matches_scan(&built, &[(1, 50), (19, 50), (40, 50), (61, 30)]);
    assert!(compared > 1000, "anti-vacuity: {compared} threads compared");
    let numbers = |page: Page<Stored<Issue>>| {
        let items: Vec<u64> = page.items.iter().map(|i| i.fields().number).collect();
        (items, page.total)
    };
    for label in labels {
        for author in authors {
            let filter = Filter {
                state: Some(IssueState::Open),
                label: Some(label.to_string()),
                author: Some(author.to_string()),
            };
            for page in [1, 3, 6] {
                let page = Pagination::new(page, 40).unwrap();
                let (a, b) = (
                    numbers(built.issues(&filter, page)),
                    numbers(kept.issues(&filter, page)),
                );
                assert_eq!(a, b, "{label} by {author}, {page:?}");
            }
        }
    }
}
