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
