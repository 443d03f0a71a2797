//! The pack cache (`vole-pack-cache`) with real git clients: a hit
//! serves exactly the bytes the miss made; identical requests at once run
//! pack-objects once; a kill -9 mid-write leaves nothing a later request
//! is served; the byte bound holds; shallow (and deepened), partial and
//! incremental fetches through it are correct; the first client going
//! away does not fail a follower; an entry cut short, a directory that
//! cannot be written or a write failing mid-pack never fails a clone.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

/// The shared fixture on `alice/repo` (and `alice/other`, `alice/third`),
/// with a server admin's token.
struct Fixture {
    forge: Forge,
    admin: String,
}

impl std::ops::Deref for Fixture {
    type Target = Forge;
    fn deref(&self) -> &Forge {
        &self.forge
    }
}

/// Every server here takes anonymous pushes, and `flags`.
fn with_anonymous_push<'a>(flags: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--anonymous-push"];
    all.extend_from_slice(flags);
    all
}

impl Fixture {
    /// A server on the three repos with `flags`.
    fn start(flags: &[&str]) -> Fixture {
        let mut forge = Forge::new(&["alice/repo", "alice/other", "alice/third"]);
        let admin = user_token(&forge.data, "root", true, "admin", &[]);
        forge.serve(&with_anonymous_push(flags));
        Fixture { forge, admin }
    }

    /// The server started again, with `flags`.
    fn restart(mut self, flags: &[&str]) -> Fixture {
        self.forge.restart_with(&with_anonymous_push(flags));
        self
    }

    fn url(&self, repo: &str) -> String {
        self.forge.url(&format!("/{repo}.git"))
    }

    fn stats(&self) -> Value {
        let r = http(
            self.server().addr,
            &format!(
                "GET /api/v1/stats HTTP/1.1\r\nAuthorization: Bearer {}",
                self.admin
            ),
            b"",
        );
        assert_eq!(r.status, 200, "{}", r.text());
        serde_json::from_slice::<Value>(&r.body).unwrap()["pack_cache"].clone()
    }

    fn counter(&self, name: &str) -> u64 {
        self.stats()[name].as_u64().unwrap()
    }

    /// Pushes `files` (name, bytes) to `repo`'s main as one commit on top
    /// of what `work` holds.
    fn publish(&self, work: &Path, repo: &str, files: &[(String, Vec<u8>)]) {
        for (name, bytes) in files {
            std::fs::write(work.join(name), bytes).unwrap();
        }
        git_ok(work, &["add", "-A"]);
        git_ok(work, &["commit", "-q", "-m", "files"]);
        git_ok(work, &["push", "-q", &self.url(repo), "HEAD:main"]);
    }

    fn clone(&self, repo: &str, target: &str, extra: &[&str]) -> PathBuf {
        let path = self.dir.as_path().join(target);
        let mut args = vec!["clone", "-q"];
        args.extend_from_slice(extra);
        let url = self.url(repo);
        args.push(&url);
        args.push(path.to_str().unwrap());
        let out = git(self.dir.as_path(), &args);
        assert!(
            out.status.success(),
            "clone {target}: {}",
            text(&out.stderr)
        );
        path
    }
}

/// `count` files of `size` random bytes each.
fn random_files(count: usize, size: usize, seed: u64) -> Vec<(String, Vec<u8>)> {
    (0..count)
        .map(|i| (format!("f{i}.bin"), random_bytes(size, seed + i as u64)))
        .collect()
}

fn fsck(repo: &Path) {
    let out = git(repo, &["fsck", "--strict"]);
    assert!(out.status.success(), "fsck: {}", text(&out.stderr));
}

/// The one pack file of a fresh bare clone.
fn pack_of(clone: &Path) -> Vec<u8> {
    let packs: Vec<PathBuf> = files_in(&clone.join("objects/pack"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .collect();
    assert_eq!(packs.len(), 1, "{packs:?}");
    std::fs::read(&packs[0]).unwrap()
}

#[test]
fn a_hit_serves_exactly_the_bytes_the_miss_made() {
    let forge = Fixture::start(&[]);
    let work = worktree(forge.dir.as_path(), "work");
    forge.publish(&work, "alice/repo", &random_files(20, 20_000, 1));
    let first = forge.clone("alice/repo", "first", &["--bare"]);
    // git honoured the hook from vole's GIT_CONFIG_COUNT settings: the
    // clone went through the cache.
    assert_eq!(
        forge.counter("misses"),
        1,
        "the clone did not go through vole's pack-objects hook"
    );
    let second = forge.clone("alice/repo", "second", &["--bare"]);
    assert_eq!(
        forge.counter("hits"),
        1,
        "the second identical clone was not served from the cache: {}",
        forge.stats()
    );
    assert_eq!(forge.counter("misses"), 1, "pack-objects ran again");
    assert!(
        pack_of(&first) == pack_of(&second),
        "the hit's pack is not the miss's"
    );
    assert!(forge.counter("bytes_served") > 100_000);
    fsck(&second);
    // A push moves the ref state: the next clone is a miss again.
    forge.publish(&work, "alice/repo", &random_files(1, 1000, 99));
    let third = forge.clone("alice/repo", "third", &["--bare"]);
    fsck(&third);
    assert_eq!(
        forge.counter("misses"),
        2,
        "a pack from before the push was served"
    );

    // `--include-tag`: a fetch of main alone brings the annotated tags
    // that point into it, through the cache too (that the ref state is
    // keyed, so a tag pushed later changes the key of the same wants, is
    // the key's unit test: git would fetch a missing tag in a second
    // request anyway).
    let fetch_main = |name: &str| {
        let repo = forge.dir.as_path().join(name);
        git_ok(
            forge.dir.as_path(),
            &["init", "-q", "--bare", repo.to_str().unwrap()],
        );
        git_ok(
            &repo,
            &["remote", "add", "origin", &forge.url("alice/repo")],
        );
        git_ok(&repo, &["fetch", "-q", "origin", "main:refs/heads/main"]);
        repo
    };
    let before = fetch_main("before-tag");
    assert_eq!(git_ok(&before, &["tag", "-l"]).trim(), "");
    git_ok(&work, &["tag", "-a", "v1", "-m", "v1"]);
    git_ok(&work, &["push", "-q", &forge.url("alice/repo"), "v1"]);
    let after = fetch_main("after-tag");
    assert_eq!(git_ok(&after, &["tag", "-l"]).trim(), "v1");
    fsck(&after);

    // Off: no hook, nothing cached.
    let forge = forge.restart(&["--pack-cache-size", "0"]);
    let off = forge.clone("alice/repo", "off", &["--bare"]);
    fsck(&off);
    let stats = forge.stats();
    assert_eq!(stats["enabled"], false);
    // Not even asked: git was not given the hook.
    assert_eq!(
        (stats["misses"].as_u64(), stats["bypasses"].as_u64()),
        (Some(0), Some(0)),
        "{stats}"
    );
}

#[test]
fn identical_requests_at_once_run_pack_objects_once() {
    let forge = Fixture::start(&[]);
    let work = worktree(forge.dir.as_path(), "work");
    // Big enough that the pack takes a while to make.
    forge.publish(&work, "alice/repo", &random_files(24, 1 << 20, 7));
    let clones: Vec<_> = (0..4)
        .map(|i| {
            let target = forge.dir.as_path().join(format!("c{i}"));
            let url = forge.url("alice/repo");
            let dir = forge.dir.as_path().to_path_buf();
            std::thread::spawn(move || {
                let out = git(
                    &dir,
                    &["clone", "-q", "--bare", &url, target.to_str().unwrap()],
                );
                assert!(out.status.success(), "{}", text(&out.stderr));
                target
            })
        })
        .collect();
    let targets: Vec<PathBuf> = clones.into_iter().map(|c| c.join().unwrap()).collect();
    let stats = forge.stats();
    assert_eq!(
        stats["misses"], 1,
        "pack-objects ran more than once: {stats}"
    );
    assert_eq!(
        stats["hits"].as_u64().unwrap() + stats["followers"].as_u64().unwrap(),
        3,
        "{stats}"
    );
    let first = pack_of(&targets[0]);
    for target in &targets[1..] {
        assert!(pack_of(target) == first, "two clones got different packs");
    }
    fsck(&targets[3]);
}

#[test]
fn a_kill_9_mid_write_leaves_nothing_a_later_request_is_served() {
    let forge = Fixture::start(&[]);
    let work = worktree(forge.dir.as_path(), "work");
    forge.publish(&work, "alice/repo", &random_files(48, 1 << 20, 11));
    let cache = forge.server().data.join("cache/packs");
    let url = forge.url("alice/repo");
    let target = forge.dir.as_path().join("cut");
    let mut clone = git_command(forge.dir.as_path())
        .args(["clone", "-q", "--bare", &url, target.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Caught while being written.
    let caught = eventually(Duration::from_secs(30), || {
        files_in(&cache)
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "tmp"))
    });
    assert!(caught, "the pack was never seen being written");
    signal(forge.server().vole_pid(), 9);
    let _ = clone.wait();
    let forge = forge.restart(&[]);
    assert!(
        files_in(&cache).is_empty(),
        "a partly written entry survived the restart: {:?}",
        files_in(&cache)
    );
    let whole = forge.clone("alice/repo", "whole", &["--bare"]);
    fsck(&whole);
    let stats = forge.stats();
    assert_eq!(
        (stats["misses"].as_u64(), stats["hits"].as_u64()),
        (Some(1), Some(0)),
        "{stats}"
    );
}

#[test]
fn eviction_holds_the_byte_bound() {
    let forge = Fixture::start(&["--pack-cache-size", "700KiB"]);
    for (i, repo) in ["alice/repo", "alice/other", "alice/third"]
        .iter()
        .enumerate()
    {
        let work = worktree(forge.dir.as_path(), &format!("w{i}"));
        forge.publish(&work, repo, &random_files(6, 100_000, 100 + i as u64 * 10));
        forge.clone(repo, &format!("c{i}"), &["--bare"]);
    }
    let stats = forge.stats();
    let bytes = stats["bytes"].as_u64().unwrap();
    assert!(bytes <= 700 * 1024, "{stats}");
    assert!(stats["evictions"].as_u64().unwrap() >= 1, "{stats}");
    let on_disk: u64 = files_in(&forge.server().data.join("cache/packs"))
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    assert!(on_disk <= 700 * 1024, "{on_disk} bytes on disk");
    assert!(on_disk > 0, "nothing was cached at all");
}

#[test]
fn shallow_partial_and_incremental_fetches_through_the_cache_are_correct() {
    let forge = Fixture::start(&[]);
    let work = worktree(forge.dir.as_path(), "work");
    for round in 0..3 {
        forge.publish(
            &work,
            "alice/repo",
            &random_files(4, 10_000, 1000 + round * 10),
        );
    }
    // Shallow, twice: the second from the cache.
    let shallow = forge.clone("alice/repo", "shallow", &["--depth", "1", "--no-local"]);
    let again = forge.clone("alice/repo", "shallow2", &["--depth", "1"]);
    for clone in [&shallow, &again] {
        fsck(clone);
        assert_eq!(git_ok(clone, &["rev-list", "--count", "HEAD"]).trim(), "1");
    }
    assert!(forge.counter("hits") >= 1, "{}", forge.stats());
    // Deepened, twice: the request carries the client's shallow lines
    // (upload-pack's --shallow-file), keyed by content.
    for clone in [&shallow, &again] {
        git_ok(clone, &["fetch", "-q", "--deepen", "1", "origin"]);
        fsck(clone);
        assert_eq!(git_ok(clone, &["rev-list", "--count", "HEAD"]).trim(), "2");
    }
    // Partial: no blobs, then a lazy fetch of them at checkout.
    let partial = forge.clone(
        "alice/repo",
        "partial",
        &["--filter=blob:none", "--no-checkout"],
    );
    git_ok(&partial, &["checkout", "-q", "main"]);
    fsck(&partial);
    assert_eq!(
        std::fs::read(partial.join("f0.bin")).unwrap(),
        std::fs::read(work.join("f0.bin")).unwrap()
    );
    // Incremental: a fetch after a push brings only what is new.
    let full = forge.clone("alice/repo", "full", &[]);
    forge.publish(&work, "alice/repo", &random_files(2, 5_000, 5000));
    git_ok(&full, &["fetch", "-q", "origin"]);
    fsck(&full);
    assert_eq!(
        git_ok(&full, &["rev-parse", "origin/main"]).trim(),
        git_ok(&work, &["rev-parse", "HEAD"]).trim()
    );
    let stats = forge.stats();
    assert_eq!(stats["failures"], 0, "{stats}");
}

#[test]
fn the_first_client_going_away_does_not_fail_a_follower() {
    // The counters are polled every 20 ms while the follower joins, past
    // the default API rate of the admin's token on a busy machine.
    let forge = Fixture::start(&["--api-rate", "100000"]);
    let work = worktree(forge.dir.as_path(), "work");
    forge.publish(&work, "alice/repo", &random_files(64, 1 << 20, 21));
    let cache = forge.server().data.join("cache/packs");
    let url = forge.url("alice/repo");
    let clone_of = |name: &str| {
        git_command(forge.dir.as_path())
            .args(["clone", "-q", "--bare", &url])
            .arg(forge.dir.as_path().join(name))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let being_written = || {
        files_in(&cache)
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "tmp"))
    };
    // The pack must still be being made when the first client goes away;
    // a fast machine may finish it first, so up to five tries, each with a
    // fresh key (a new tag moves the ref state every key holds).
    for attempt in 0..5 {
        if attempt > 0 {
            git_ok(&work, &["tag", &format!("try-{attempt}")]);
            git_ok(&work, &["push", "-q", &url, &format!("try-{attempt}")]);
        }
        let before = forge.stats();
        let count = |stats: &Value, name: &str| stats[name].as_u64().unwrap();
        let mut first = clone_of(&format!("first{attempt}"));
        assert!(
            eventually(Duration::from_secs(30), being_written),
            "the pack was never seen being written"
        );
        let follower = clone_of(&format!("follower{attempt}"));
        // It follows, or (the pack done before it asked) it is a hit: then
        // try again with a fresh key.
        let joined = |stats: &Value| {
            (
                count(stats, "followers") - count(&before, "followers"),
                count(stats, "hits") - count(&before, "hits"),
            )
        };
        assert!(
            eventually(Duration::from_secs(30), || joined(&forge.stats()) != (0, 0)),
            "the second clone never followed the first: {}",
            forge.stats()
        );
        if joined(&forge.stats()) == (0, 1) {
            let _ = first.wait();
            let _ = follower.wait_with_output();
            continue;
        }
        assert_eq!(
            joined(&forge.stats()).0,
            1,
            "the second clone never followed the first: {}",
            forge.stats()
        );
        first.kill().unwrap();
        let _ = first.wait();
        // Anti-vacuity: the first reader left while the pack was still
        // being made, so the producer had to go on for the follower alone.
        let still_made = being_written();
        let out = follower.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "the follower failed when the first client went away: {}",
            text(&out.stderr)
        );
        fsck(&forge.dir.as_path().join(format!("follower{attempt}")));
        if !still_made {
            continue;
        }
        let stats = forge.stats();
        assert_eq!(
            (
                count(&stats, "misses") - count(&before, "misses"),
                count(&stats, "failures")
            ),
            (1, 0),
            "{stats}"
        );
        // What the follower was sent counts as served from the cache.
        let served = count(&stats, "bytes_served") - count(&before, "bytes_served");
        let made = count(&stats, "bytes") - count(&before, "bytes");
        assert_eq!(served, made, "{stats}");
        assert!(made > 1 << 20, "{stats}");
        return;
    }
    panic!("in five tries the pack was always complete before the first client went away");
}

/// The age bound holds on a server that nothing asks: the maintenance
/// drops an expired entry (and its file) by itself.
#[test]
fn an_expired_pack_is_dropped_from_an_idle_server() {
    let forge = Fixture::start(&["--pack-cache-max-age", "1s"]);
    let work = worktree(forge.dir.as_path(), "work");
    forge.publish(&work, "alice/repo", &random_files(2, 50_000, 61));
    forge.clone("alice/repo", "clone", &["--bare"]);
    let cache = forge.server().data.join("cache/packs");
    assert_eq!(files_in(&cache).len(), 1, "the pack was not cached");
    assert!(
        eventually(Duration::from_secs(20), || files_in(&cache).is_empty()
            && forge.counter("entries") == 0),
        "an expired pack stayed on an idle server: {}",
        forge.stats()
    );
    assert_eq!(forge.counter("bytes"), 0, "{}", forge.stats());
}

#[test]
fn a_cache_that_cannot_be_used_never_fails_a_clone() {
    let forge = Fixture::start(&[]);
    let work = worktree(forge.dir.as_path(), "work");
    forge.publish(&work, "alice/repo", &random_files(4, 50_000, 31));
    let cache = forge.server().data.join("cache/packs");
    // An entry cut short on disk (a failing disk, a hand in the
    // directory): not served, made again.
    forge.clone("alice/repo", "first", &["--bare"]);
    let entries = files_in(&cache);
    assert_eq!(entries.len(), 1, "{entries:?}");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&entries[0])
        .unwrap();
    file.set_len(1000).unwrap();
    let second = forge.clone("alice/repo", "second", &["--bare"]);
    fsck(&second);
    assert_eq!(
        (forge.counter("hits"), forge.counter("misses")),
        (0, 2),
        "a cut entry was served: {}",
        forge.stats()
    );
    // A cache directory that cannot be written: pack-objects runs as
    // without the cache.
    std::fs::remove_dir_all(&cache).unwrap();
    std::fs::write(&cache, b"not a directory").unwrap();
    forge.publish(&work, "alice/repo", &random_files(1, 10_000, 41));
    let third = forge.clone("alice/repo", "third", &["--bare"]);
    fsck(&third);
    assert_eq!(
        git_ok(&third, &["rev-parse", "main"]).trim(),
        git_ok(&work, &["rev-parse", "HEAD"]).trim()
    );
    assert!(forge.counter("bypasses") >= 1, "{}", forge.stats());
    assert_eq!(forge.counter("misses"), 2, "{}", forge.stats());
}

/// A cache entry whose write fails part way (here a file-size limit, which
/// fails a write as a full disk does) fails no clone: a reader that has
/// already sent part of the pack runs pack-objects itself, checks that its
/// output starts with what went out, and sends the rest.
#[test]
fn a_cache_write_failing_mid_pack_fails_no_clone() {
    let mut forge = Fixture::start(&[]);
    let work = worktree(forge.dir.as_path(), "work");
    forge.publish(&work, "alice/repo", &random_files(8, 1 << 20, 51));
    // Room for 2 MiB of the 8 MiB pack in the cache file; the repo's files
    // are only read, and the logs stay small.
    forge
        .forge
        .restart_built(|builder| builder.file_size_limit(2 << 20));
    let clone = forge.dir.as_path().join("clone");
    let out = git(
        forge.dir.as_path(),
        &[
            "clone",
            "--bare",
            &forge.url("alice/repo"),
            clone.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "the clone failed: {}",
        text(&out.stderr)
    );
    fsck(&clone);
    assert_eq!(
        git_ok(&clone, &["rev-parse", "main"]).trim(),
        git_ok(&work, &["rev-parse", "HEAD"]).trim()
    );
    let stats = forge.stats();
    assert_eq!(
        (stats["misses"].as_u64(), stats["failures"].as_u64()),
        (Some(1), Some(1)),
        "the cache write did not fail part way: {stats}"
    );
    // Anti-vacuity: the clone had part of the pack from the cache already
    // (the hook says so on git's progress channel).
    assert!(
        text(&out.stderr).contains("pack cache could not keep this pack after"),
        "the reader did not go on from part way: {}",
        text(&out.stderr)
    );
}
