//! The walk's bounds and the last-commit index it stops at.

use super::*;

fn git(dir: &std::path::Path, args: &[&str], seconds: u64) {
    crate::test_git::git(dir, args, seconds);
}

#[tokio::test]
async fn a_walk_the_clock_cut_is_kept_for_a_minute_then_walked_again() {
    let facts = |out_of_time, age: u64| Facts {
        names: Vec::new(),
        sizes: Vec::new(),
        last: Vec::new(),
        commits: Vec::new(),
        walked: 1,
        cut: out_of_time,
        out_of_time,
        made: Instant::now()
            .checked_sub(Duration::from_secs(age))
            .unwrap(),
    };
    let commit = ObjectId::from_hex(b"1111111111111111111111111111111111111111").unwrap();
    let caches = crate::caches::WebCaches::new(1 << 20);
    let at = |name: &str| ("i".to_string(), commit, vec![name.to_string()]);
    let listings = &caches.listings;
    listings
        .insert(at("fresh"), std::sync::Arc::new(facts(true, 1)))
        .await;
    listings
        .insert(at("stale"), std::sync::Arc::new(facts(true, 61)))
        .await;
    listings
        .insert(at("whole"), std::sync::Arc::new(facts(false, 3600)))
        .await;
    assert!(listings.get(&at("fresh")).await.is_some());
    assert!(
        listings.get(&at("stale")).await.is_none(),
        "a cut walk a minute old was served"
    );
    assert!(
        listings.get(&at("whole")).await.is_some(),
        "a whole walk expired"
    );
    // A deleted repo's walks go with it.
    caches.forget("i");
    assert!(
        listings.get(&at("whole")).await.is_none(),
        "a forgotten incarnation's walk was served"
    );
}

/// `a.txt` edited by each of 20 commits after the first, `b.txt` only
/// in the first: the repo, its tip and the root's entries.
fn edited_history(work: &std::path::Path) -> (gix::Repository, ObjectId, Vec<TreeEntry>) {
    git(work, &["init", "-q", "-b", "main"], 0);
    std::fs::write(work.join("a.txt"), "0").unwrap();
    std::fs::write(work.join("b.txt"), "never changed").unwrap();
    git(work, &["add", "-A"], 0);
    git(work, &["commit", "-q", "-m", "first"], 1);
    for i in 1..=20u64 {
        std::fs::write(work.join("a.txt"), i.to_string()).unwrap();
        git(work, &["commit", "-q", "-am", &format!("edit {i}")], 1 + i);
    }
    let repo = gix::open(work.join(".git")).unwrap();
    let tip = repo.head_id().unwrap().detach();
    let tree = repo.find_commit(tip).unwrap().tree_id().unwrap().detach();
    let super::super::read::Node::Tree(entries) =
        super::super::read::lookup(&repo, tree, &[]).unwrap()
    else {
        panic!("the root is a tree")
    };
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["a.txt", "b.txt"]);
    (repo, tip, entries)
}

#[test]
fn a_walk_stops_where_an_earlier_walk_of_the_directory_began() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, tip, entries) = edited_history(dir.path());
    let bounds = Bounds {
        commits: MAX_WALKED,
        time: Duration::from_secs(60),
    };
    let whole = walk(&repo, tip, &[], &entries, bounds, &|_| None).unwrap();
    // The facts of the same directory five commits back (b.txt is the
    // same there, so its line of history goes through it).
    let back = (0..5).fold(tip, |at, _| {
        let commit = repo.find_commit(at).unwrap();
        commit.parent_ids().next().unwrap().detach()
    });
    let tree = repo.find_commit(back).unwrap().tree_id().unwrap().detach();
    let super::super::read::Node::Tree(listed_back) =
        super::super::read::lookup(&repo, tree, &[]).unwrap()
    else {
        panic!("the root is a tree")
    };
    let earlier =
        std::sync::Arc::new(walk(&repo, back, &[], &listed_back, bounds, &|_| None).unwrap());
    let known = |at: ObjectId| (at == back).then(|| earlier.clone());
    let indexed = walk(&repo, tip, &[], &entries, bounds, &known).unwrap();
    let summaries = |facts: &Facts| -> Vec<String> {
        facts
            .last
            .iter()
            .map(|at| facts.commits[at.unwrap() as usize].summary.clone())
            .collect()
    };
    assert_eq!(
        summaries(&indexed),
        summaries(&whole),
        "the index changed an answer"
    );
    assert_eq!(summaries(&indexed), ["edit 20", "first"]);
    assert!(
        indexed.walked <= 5 && whole.walked == 21,
        "the walk went on past the commit the index knows ({} commits walked)",
        indexed.walked
    );
}

#[test]
fn entries_past_the_bound_are_older_not_guessed() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, tip, entries) = edited_history(dir.path());
    let walk = |commits| {
        let bounds = Bounds {
            commits,
            time: Duration::from_secs(60),
        };
        walk(&repo, tip, &[], &entries, bounds, &|_| None).unwrap()
    };
    let short = walk(5);
    assert!(short.cut, "a walk of 5 of 21 commits was not cut");
    assert_eq!(short.walked, 5);
    assert_eq!(
        short.commits[short.last[0].unwrap() as usize].summary,
        "edit 20"
    );
    assert_eq!(short.last[1], None, "b.txt was guessed past the bound");
    // The time bound: none at all walks nothing, and says so.
    let none = super::walk(
        &repo,
        tip,
        &[],
        &entries,
        Bounds {
            commits: MAX_WALKED,
            time: Duration::ZERO,
        },
        &|_| None,
    )
    .unwrap();
    assert!(none.cut && none.walked == 0 && none.last == [None, None]);
    assert!(none.out_of_time && !short.out_of_time);
    let whole = walk(MAX_WALKED);
    assert!(!whole.cut);
    assert_eq!(
        whole.walked, 21,
        "the walk did not stop at the first commit"
    );
    assert_eq!(
        whole.commits[whole.last[1].unwrap() as usize].summary,
        "first"
    );
    assert_eq!(whole.sizes, [Some(2), Some(13)]);
}
