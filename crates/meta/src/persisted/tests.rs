//! The persisted index against the trees it stands for: a file that
//! cannot be read is read around, `check` finds rows that are not their
//! tree's, a stop past its bound leaves the old file. (That a start's
//! index from it is the one read from git, entity by entity, after
//! writes, a crash, a compaction and a repo made again is in
//! `crate::tests`.)

use super::*;
use crate::StoreOptions;
use crate::tests::{Fixture, REPO, create_issues, index_parts, only_on_flush, quick};

/// Every row of the file, by shard tree.
fn rows_of(persisted: &Persisted) -> Vec<(ObjectId, Vec<Row>)> {
    let mut trees: Vec<ObjectId> = persisted.shards.keys().copied().collect();
    trees.sort();
    trees
        .into_iter()
        .map(|tree| {
            let rows = persisted.shard_rows(&tree).expect("its rows read back");
            (tree, (0..rows.len()).map(|i| rows.row(i)).collect())
        })
        .collect()
}

fn row_count(persisted: &Persisted) -> usize {
    rows_of(persisted).iter().map(|(_, rows)| rows.len()).sum()
}

/// A store with `n` folded issues (some with long bodies) stopped, so the
/// persisted index holds its shard tips; the index as read from git.
fn stopped_with_issues(fx: &Fixture, n: usize) -> Vec<String> {
    let (_log, store) = fx.open(quick());
    create_issues(&store, "persisted ", n);
    for number in [1, 2] {
        let patch = crate::IssuePatch {
            version: None,
            title: None,
            body: Some("a body longer than the index keeps ".repeat(4)),
            state: None,
            labels: None,
        };
        store
            .edit_issue(&crate::tests::repo(), number, patch)
            .unwrap();
    }
    store.close(Duration::from_secs(10));
    let (_log, store) = fx.open(StoreOptions {
        persist_index: false,
        ..only_on_flush()
    });
    index_parts(&store, REPO)
}

/// Issue `number` of the test repo given `title`.
fn retitle(store: &crate::MetaStore, number: u64, title: &str) {
    let patch = crate::IssuePatch {
        version: None,
        title: Some(title.into()),
        body: None,
        state: None,
        labels: None,
    };
    store
        .edit_issue(&crate::tests::repo(), number, patch)
        .unwrap();
}

#[test]
fn a_persisted_index_that_cannot_be_read_is_read_around_and_written_again() {
    let fx = Fixture::new();
    let from_git = stopped_with_issues(&fx, 40);
    let path = fx.log_dir.join(FILE_NAME);
    for damage in [&b"not an arrow file"[..], &b""[..]] {
        std::fs::write(&path, damage).unwrap();
        let (_log, store) = fx.open(only_on_flush());
        let stats = store.stats();
        assert_eq!(stats.docs_from_file, 0);
        assert!(stats.docs_from_git >= 40, "{stats:?}");
        assert_eq!(
            index_parts(&store, REPO),
            from_git,
            "read from git around a damaged file"
        );
        // Written again as the open read the trees.
        let again = Persisted::read(&path)
            .unwrap()
            .expect("the file was written again");
        assert!(row_count(&again) >= 40);
    }
    // The next start reads every document from it.
    let (_log, store) = fx.open(only_on_flush());
    assert_eq!(store.stats().docs_from_git, 0);
    assert_eq!(index_parts(&store, REPO), from_git);
}

#[test]
fn check_finds_rows_that_are_not_their_trees_and_a_start_reads_them_from_git() {
    let fx = Fixture::new();
    let from_git = stopped_with_issues(&fx, 30);
    let path = fx.log_dir.join(FILE_NAME);
    let repos = vec![(REPO.to_string(), fx.git_dir.clone())];
    let clean = check(&path, &repos);
    assert!(clean.problems.is_empty(), "{:?}", clean.problems);
    assert!(clean.current > 0 && clean.rows >= 30, "{clean:?}");
    assert_eq!(clean.stale, 0, "{clean:?}");
    // The same file with one document's title changed: a start would
    // read a document its tree does not hold.
    let persisted = Persisted::read(&path).unwrap().unwrap();
    let mut writing = Writing::begin(&path).unwrap();
    let mut changed = 0;
    for (tree, mut rows) in rows_of(&persisted) {
        for row in &mut rows {
            let text = String::from_utf8(row.doc.clone()).unwrap();
            if changed == 0 && row.body_left == 0 && text.contains("\"persisted ") {
                row.doc = text.replacen("\"persisted ", "\"forged ", 1).into_bytes();
                changed += 1;
            }
        }
        writing.shard(REPO, 0, tree, &rows).unwrap();
    }
    drop(persisted);
    writing.finish().unwrap();
    assert_eq!(changed, 1);
    let forged = check(&path, &repos);
    assert_eq!(forged.problems.len(), 1, "{:?}", forged.problems);
    assert!(
        forged.problems[0].contains("are not the") && forged.problems[0].contains("remove"),
        "{}",
        forged.problems[0]
    );
    // A start does not take the forged row: its document is not its blob.
    let (_log, store) = fx.open(only_on_flush());
    assert!(
        store.stats().docs_from_git > 0,
        "the forged tree was not read from git"
    );
    let read = index_parts(&store, REPO);
    assert!(
        !read.iter().any(|p| p.contains("forged ")),
        "a start served the forged row"
    );
    assert_eq!(read, from_git);
}

#[test]
fn a_stop_past_its_bound_leaves_the_old_file() {
    let fx = Fixture::new();
    stopped_with_issues(&fx, 10);
    let path = fx.log_dir.join(FILE_NAME);
    let before = std::fs::read(&path).unwrap();
    let (_log, store) = fx.open(quick());
    create_issues(&store, "after ", 10);
    assert!(store.flush(Duration::from_secs(10)));
    assert!(!store.persist_index(Duration::ZERO).unwrap());
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a stop past its bound replaced the file"
    );
    // Within its bound it is written, and holds the new tips.
    assert!(store.persist_index(Duration::from_secs(10)).unwrap());
    assert!(
        !store.persist_index(Duration::from_secs(10)).unwrap(),
        "written twice for the same tips"
    );
    let persisted = Persisted::read(&path).unwrap().unwrap();
    assert!(row_count(&persisted) >= 20, "{persisted:?}");
}

#[test]
fn a_document_parsed_by_its_kind_is_the_one_the_tagged_enum_parses() {
    let fx = Fixture::new();
    stopped_with_issues(&fx, 20);
    let (_log, store) = fx.open(quick());
    let repo = crate::tests::repo();
    let comment = crate::NewComment {
        body: "a comment".into(),
    };
    store
        .comment(&repo, crate::entity::ThreadKind::Issue, 3, comment, "bob")
        .unwrap();
    store.close(Duration::from_secs(10));
    let persisted = Persisted::read(&fx.log_dir.join(FILE_NAME))
        .unwrap()
        .unwrap();
    let mut by_kind = 0;
    for row in rows_of(&persisted).into_iter().flat_map(|(_, rows)| rows) {
        let doc = &row.doc[..];
        let tagged: crate::entity::Entity = serde_json::from_slice(doc).unwrap();
        assert_eq!(
            parse(doc).unwrap(),
            tagged,
            "{}",
            String::from_utf8_lossy(doc)
        );
        by_kind += usize::from(
            doc.starts_with(br#"{"kind":"issue","#) || doc.starts_with(br#"{"kind":"comment","#),
        );
    }
    assert!(by_kind >= 21, "only {by_kind} documents took the quick way");
}

#[test]
fn check_finds_a_forged_row_in_the_tree_of_a_shard_that_moved_since() {
    let fx = Fixture::new();
    stopped_with_issues(&fx, 30);
    let path = fx.log_dir.join(FILE_NAME);
    let persisted = Persisted::read(&path).unwrap().unwrap();
    let mut writing = Writing::begin(&path).unwrap();
    let mut forged: Option<u64> = None;
    for (tree, mut rows) in rows_of(&persisted) {
        for row in &mut rows {
            let text = String::from_utf8(row.doc.clone()).unwrap();
            if forged.is_none() && row.body_left == 0 && text.contains("\"persisted ") {
                let issue: crate::entity::Issue = serde_json::from_str(&text).unwrap();
                forged = Some(issue.number);
                row.doc = text.replacen("\"persisted ", "\"forged ", 1).into_bytes();
            }
        }
        let (repo, shard) = persisted.place_of(&tree).unwrap();
        writing.shard(&repo, shard, tree, &rows).unwrap();
    }
    drop(persisted);
    writing.finish().unwrap();
    let number = forged.expect("a row was forged");
    // The forged issue's shard moves on (read and written without the
    // file, which keeps the forged tree as that shard's old tree).
    {
        let (_log, store) = fx.open(StoreOptions {
            persist_index: false,
            ..only_on_flush()
        });
        retitle(&store, number, "moved on");
        assert!(store.flush(Duration::from_secs(10)));
    }
    let repos = vec![(REPO.to_string(), fx.git_dir.clone())];
    let checked = check(&path, &repos);
    assert_eq!(
        checked.problems.len(),
        1,
        "check did not compare the tree the file holds of a shard that moved: {checked:?}"
    );
    assert!(checked.stale >= 1, "{checked:?}");
}

/// The file at `path` written again with the same batches (after an
/// empty one, if `empty_first`) and `places` as its footer's place lines
/// (none: no such key).
fn rewrite_footer(path: &std::path::Path, places: Option<String>, empty_first: bool) {
    let bytes = std::fs::read(path).unwrap();
    let reader = arrow_ipc::reader::FileReader::try_new(std::io::Cursor::new(bytes), None).unwrap();
    let schema = reader.schema();
    let batches: Vec<arrow_array::RecordBatch> = reader.map(|b| b.unwrap()).collect();
    let mut out = Vec::new();
    let mut writer = arrow_ipc::writer::FileWriter::try_new(&mut out, &schema).unwrap();
    if empty_first {
        writer
            .write(&arrow_array::RecordBatch::new_empty(schema.clone()))
            .unwrap();
    }
    for batch in &batches {
        writer.write(batch).unwrap();
    }
    if let Some(places) = places {
        writer.write_metadata(file::PLACES_KEY, places);
    }
    writer.finish().unwrap();
    drop(writer);
    std::fs::write(path, out).unwrap();
}

#[test]
fn a_footer_that_does_not_place_the_batches_right_is_read_around() {
    let fx = Fixture::new();
    let from_git = stopped_with_issues(&fx, 40);
    let path = fx.log_dir.join(FILE_NAME);
    let good = std::fs::read(&path).unwrap();
    let lines: Vec<String> = {
        let reader =
            arrow_ipc::reader::FileReader::try_new(std::io::Cursor::new(good.clone()), None)
                .unwrap();
        let places = reader.custom_metadata().get(file::PLACES_KEY).cloned();
        places
            .expect("the file's footer places its batches")
            .lines()
            .map(str::to_string)
            .collect()
    };
    assert!(lines.len() >= 4, "{} batches: too few to swap", lines.len());
    let joined = |lines: &[String]| lines.iter().map(|l| format!("{l}\n")).collect::<String>();
    let mut swapped = lines.clone();
    swapped.swap(0, 1);
    let mut not_a_tree = lines.clone();
    not_a_tree[2] = not_a_tree[2].replacen(|c: char| c.is_ascii_hexdigit(), "z", 1);
    // `<tree> <shard> <rows> <repo>`: the first tree said to have a row
    // more than its batches hold.
    let mut miscounted = lines.clone();
    let parts: Vec<&str> = lines[0].splitn(4, ' ').collect();
    let rows: usize = parts[2].parse().unwrap();
    miscounted[0] = format!("{} {} {} {}", parts[0], parts[1], rows + 1, parts[3]);
    // An empty batch first, placed as the first tree's.
    let mut with_empty = vec![lines[0].clone()];
    with_empty.extend(lines.iter().cloned());
    let cases = [
        ("no place lines", None, false, true),
        // The last batch unplaced, every other where it is.
        (
            "a line short",
            Some(joined(&lines[..lines.len() - 1])),
            false,
            true,
        ),
        (
            "a tree id that is not one",
            Some(joined(&not_a_tree)),
            false,
            true,
        ),
        // Each batch is checked against the tree it is read for, and each
        // tree's batches against its count of rows.
        (
            "two batches' places swapped",
            Some(joined(&swapped)),
            false,
            false,
        ),
        (
            "a tree's rows miscounted",
            Some(joined(&miscounted)),
            false,
            false,
        ),
        ("an empty batch", Some(joined(&with_empty)), true, false),
    ];
    for (case, places, empty_first, unread) in cases {
        std::fs::write(&path, &good).unwrap();
        rewrite_footer(&path, places, empty_first);
        let (_log, store) = fx.open(only_on_flush());
        let stats = store.stats();
        assert!(stats.docs_from_git > 0, "{case}: nothing read from git");
        if unread {
            assert_eq!(stats.docs_from_file, 0, "{case}: the file was read");
        }
        assert_eq!(
            index_parts(&store, REPO),
            from_git,
            "{case}: the index is not the trees'"
        );
    }
    // The file as written reads whole.
    std::fs::write(&path, &good).unwrap();
    let (_log, store) = fx.open(only_on_flush());
    assert_eq!(store.stats().docs_from_git, 0);
    assert_eq!(index_parts(&store, REPO), from_git);
}

#[test]
fn a_shard_tree_that_moved_takes_its_unchanged_thread_directories_from_the_file() {
    // Two shards: each tree holds many thread directories, and an edit
    // moves one tree while leaving most of its directories as they were.
    let two = |options: StoreOptions| StoreOptions {
        shards: 2,
        ..options
    };
    let fx = Fixture::new();
    let (_log, store) = fx.open(two(quick()));
    create_issues(&store, "unit ", 30);
    store.close(Duration::from_secs(10));
    // An edit the file does not see (this start neither reads nor writes
    // it): the edited issue's shard tree moves.
    let (_log, store) = fx.open(two(StoreOptions {
        persist_index: false,
        ..quick()
    }));
    retitle(&store, 1, "unit 0, edited");
    store.close(Duration::from_secs(10));
    let (_log, store) = fx.open(two(StoreOptions {
        persist_index: false,
        ..only_on_flush()
    }));
    let from_git = index_parts(&store, REPO);
    drop(store);
    let (_log, store) = fx.open(two(only_on_flush()));
    let stats = store.stats();
    assert!(
        stats.docs_from_git >= 1 && stats.docs_from_git <= 2,
        "the edited issue's directory alone is read from git (and the repo's own \
         documents' if they share the tree), not the whole tree it moved: {stats:?}"
    );
    assert!(
        stats.docs_from_file >= 28,
        "the moved tree's unchanged thread directories come from the file: {stats:?}"
    );
    assert_eq!(index_parts(&store, REPO), from_git);
}
