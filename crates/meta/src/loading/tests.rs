//! The wait for a repo's background read.

use super::*;

#[test]
fn a_call_waits_a_bounded_time_for_a_repo_being_read_and_is_told_to_retry() {
    let loading = Loading::default();
    let started = Instant::now();
    let waited = loading.wait("ann/demo", Some(Duration::from_millis(50)));
    let Err(MetaError::Loading(message)) = waited else {
        panic!("a repo still being read answered {waited:?}, not a retry");
    };
    assert!(
        message.contains("ann/demo") && message.contains("retry"),
        "{message}"
    );
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the wait was not bounded"
    );
    // Once read, no wait; a repo deleted meanwhile is no repo.
    loading.finish(Ok(()));
    assert!(loading.wait("ann/demo", Some(Duration::ZERO)).is_ok());
    let gone = Loading::default();
    gone.finish(Err(Unavailable::Forgotten("ann/demo".into())));
    assert!(matches!(
        gone.wait("ann/demo", None),
        Err(MetaError::NoRepo(name)) if name == "ann/demo"
    ));
}

#[test]
fn the_repo_level_documents_are_on_the_shards_read_at_open() {
    for shards in [1, 16, shard::SHARDS] {
        let acl = Entity::Removed(entity::Removed {
            path: entity::REPO_ACL_PATH.into(),
        });
        let shard = shard::shard_of(acl.root_id(), shards);
        assert!(eager_shard(shard, shards), "the ACL's shard is read later");
        let label_shard = shard::shard_of(numbered::LABELS_ROOT, shards);
        assert!(eager_shard(label_shard, shards));
        let others = (0..shards)
            .filter(|s| eager_shard(*s as u8, shards))
            .count();
        assert!(others <= 2, "{others} shards read at open of {shards}");
    }
}

#[test]
fn a_start_waits_for_the_background_read_until_its_budget_and_no_longer() {
    use crate::tests::{Fixture, REPO, create_issues, only_on_flush};
    let fx = Fixture::new();
    {
        let (_log, store) = fx.open(only_on_flush());
        create_issues(&store, "issue ", 60);
        assert!(
            store.flush(Duration::from_secs(10)),
            "the fold did not settle"
        );
    }
    let whole = |store: &MetaStore| {
        let meta = store.inner.repos.read().get(REPO).cloned().unwrap();
        (meta.loading.is_whole(), meta.state.lock().index.len())
    };
    // Within the budget: the open read the repo-level shards only, and
    // waited for the loader to read the rest.
    {
        let file = fx.log_dir.join(crate::persisted::FILE_NAME);
        let _ = std::fs::remove_file(&file);
        let (_log, store) = fx.open(StoreOptions {
            read_at_open: Some(Duration::from_secs(60)),
            ..only_on_flush()
        });
        let (is_whole, held) = whole(&store);
        assert!(
            is_whole,
            "a small store was not whole when the open returned"
        );
        assert!(held >= 60, "anti-vacuity: {held} documents held");
        // What the read writes is written too (a command run once drops
        // the data dir's lock right after).
        assert!(
            store.inner.persisting.lock().is_none() && file.exists(),
            "the persisted index the read writes was not in place when the open returned"
        );
    }
    // A loader held at its first step: the open returns once the budget
    // is spent, the repo still to read.
    let gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let hook: LoadHook = {
        let gate = gate.clone();
        Arc::new(move || {
            let (open, opened) = &*gate;
            let mut open = open.lock().unwrap();
            while !*open {
                open = opened.wait(open).unwrap();
            }
        })
    };
    let budget = Duration::from_millis(150);
    let started = Instant::now();
    let (_log, store) = fx.open(StoreOptions {
        read_at_open: Some(budget),
        load_hook: Some(hook),
        ..only_on_flush()
    });
    let took = started.elapsed();
    assert!(
        took >= budget && took < Duration::from_secs(20),
        "the open took {took:?} with a budget of {budget:?} and a loader that cannot go on"
    );
    assert!(!whole(&store).0, "the repo was whole with its loader held");
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    assert!(store.wait_until_read());
    assert!(whole(&store).0);
}
