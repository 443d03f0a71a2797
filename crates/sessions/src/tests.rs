//! The session store against its file: what survives a reopen, what ends
//! a session, what a torn or corrupt file does.

use std::fs::OpenOptions;
use std::io::Write;

use super::*;

const DAY: Duration = Duration::from_secs(86_400);

fn expiry() -> Expiry {
    Expiry {
        idle: 14 * DAY,
        absolute: 90 * DAY,
    }
}

fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn store(dir: &tempfile::TempDir) -> SessionStore {
    SessionStore::open(&dir.path().join("sessions"), expiry(), t0()).unwrap()
}

#[test]
fn a_session_resolves_to_its_user_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let secret = store(&dir).begin("alice", 0, t0()).unwrap();
    assert_eq!(secret.expose().len(), SECRET_CHARS);
    assert!(secret.expose().bytes().all(|b| b.is_ascii_alphanumeric()));
    let reopened = store(&dir);
    let session = reopened
        .resolve(secret.expose(), t0())
        .expect("live after reopen");
    assert_eq!(session.user, "alice");
    assert_eq!(session.began, t0());
    // Only the hash is kept.
    let text = std::fs::read_to_string(dir.path().join("sessions")).unwrap();
    assert!(!text.contains(secret.expose()), "the secret is in the file");
    assert!(text.contains(&hex::encode(hash(secret.expose()))));
    assert!(!format!("{secret:?}").contains(secret.expose()));
}

#[test]
fn unknown_and_malformed_secrets_resolve_to_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = store(&dir);
    let secret = sessions.begin("alice", 0, t0()).unwrap();
    let other = sessions.begin("alice", 0, t0()).unwrap();
    assert_ne!(secret, other, "two sign-ins got one secret");
    let mut wrong = secret.expose().to_string();
    wrong.replace_range(0..1, if wrong.starts_with('a') { "b" } else { "a" });
    for bad in [
        wrong.as_str(),
        "",
        &secret.expose()[1..],
        &format!("{}x", secret.expose()),
        &format!("{}!", &secret.expose()[1..]),
    ] {
        assert_eq!(sessions.resolve(bad, t0()), None, "{bad:?} resolved");
    }
    assert!(sessions.resolve(secret.expose(), t0()).is_some());
}

#[test]
fn sign_out_ends_one_session_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = store(&dir);
    let gone = sessions.begin("alice", 0, t0()).unwrap();
    let kept = sessions.begin("alice", 0, t0()).unwrap();
    assert!(sessions.end(gone.expose()).unwrap());
    assert!(!sessions.end(gone.expose()).unwrap(), "ended twice");
    assert_eq!(sessions.resolve(gone.expose(), t0()), None);
    drop(sessions);
    let reopened = store(&dir);
    assert_eq!(
        reopened.resolve(gone.expose(), t0()),
        None,
        "back after reopen"
    );
    assert!(reopened.resolve(kept.expose(), t0()).is_some());
}

#[test]
fn ending_a_user_ends_each_of_their_sessions_and_no_one_elses() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = store(&dir);
    let a1 = sessions.begin("alice", 0, t0()).unwrap();
    let a2 = sessions.begin("alice", 0, t0()).unwrap();
    let b = sessions.begin("bob", 0, t0()).unwrap();
    assert_eq!(sessions.end_user("alice").unwrap(), 2);
    drop(sessions);
    let reopened = store(&dir);
    for secret in [&a1, &a2] {
        assert_eq!(reopened.resolve(secret.expose(), t0()), None);
    }
    assert_eq!(reopened.resolve(b.expose(), t0()).unwrap().user, "bob");
    // A session begun after the end is live.
    let a3 = reopened.begin("alice", 0, t0()).unwrap();
    drop(reopened);
    assert!(store(&dir).resolve(a3.expose(), t0()).is_some());
}

#[test]
fn an_idle_session_expires_and_a_used_one_expires_at_its_absolute_limit() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = store(&dir);
    let idle = sessions.begin("alice", 0, t0()).unwrap();
    let used = sessions.begin("alice", 0, t0()).unwrap();
    let mut now = t0();
    // Seen every 10 days: never idle for 14, but 90 days old in the end.
    while now < t0() + 89 * DAY {
        now += 10 * DAY;
        let seen = sessions.resolve(used.expose(), now.min(t0() + 89 * DAY));
        assert!(seen.is_some(), "used session ended at {now:?}");
    }
    assert_eq!(sessions.resolve(idle.expose(), t0() + 14 * DAY), None);
    assert_eq!(sessions.resolve(used.expose(), t0() + 90 * DAY), None);
    // Reopened late, both are gone, with no line written for it.
    let late = SessionStore::open(&dir.path().join("sessions"), expiry(), t0() + 90 * DAY);
    assert!(late.unwrap().is_empty());
}

#[test]
fn last_seen_is_written_at_most_once_per_granularity() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = store(&dir);
    let secret = sessions.begin("alice", 0, t0()).unwrap();
    let after_begin = sessions.file_bytes();
    for s in 0..SEEN_GRANULARITY.as_secs() {
        sessions.resolve(secret.expose(), t0() + Duration::from_secs(s));
    }
    assert_eq!(sessions.file_bytes(), after_begin, "a request wrote a line");
    let later = t0() + SEEN_GRANULARITY;
    assert_eq!(
        sessions.resolve(secret.expose(), later).unwrap().seen,
        later
    );
    assert!(sessions.file_bytes() > after_begin, "seen never written");
    drop(sessions);
    // The mark survives: idle counts from it.
    let reopened = store(&dir);
    let still = reopened.resolve(secret.expose(), later + 14 * DAY - Duration::from_secs(1));
    assert!(still.is_some(), "the seen mark was lost");
}

#[test]
fn a_user_holds_at_most_max_sessions_and_the_oldest_go_first() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = store(&dir);
    let secrets: Vec<SessionSecret> = (0..MAX_PER_USER as u64 + 2)
        .map(|i| {
            let at = t0() + Duration::from_secs(i);
            sessions.begin("alice", 0, at).unwrap()
        })
        .collect();
    let bob = sessions.begin("bob", 0, t0()).unwrap();
    assert_eq!(sessions.len(), MAX_PER_USER + 1);
    let now = t0() + DAY;
    for (i, secret) in secrets.iter().enumerate() {
        assert_eq!(
            sessions.resolve(secret.expose(), now).is_some(),
            i >= 2,
            "session {i}"
        );
    }
    assert!(sessions.resolve(bob.expose(), now).is_some());
    drop(sessions);
    assert_eq!(store(&dir).len(), MAX_PER_USER + 1);
}

#[test]
fn a_torn_last_line_is_cut_off_and_what_came_before_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions");
    let kept = store(&dir).begin("alice", 0, t0()).unwrap();
    let whole = std::fs::metadata(&path).unwrap().len();
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(br#"{"op":"begin","id":"ab"#).unwrap();
    drop(file);
    let reopened = store(&dir);
    assert!(reopened.resolve(kept.expose(), t0()).is_some());
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        whole,
        "torn tail kept"
    );
    // Appending goes on after the cut, not after the torn bytes.
    let next = reopened.begin("bob", 0, t0()).unwrap();
    drop(reopened);
    assert!(store(&dir).resolve(next.expose(), t0()).is_some());
}

#[test]
fn a_corrupt_line_before_the_last_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions");
    let sessions = store(&dir);
    sessions.begin("alice", 0, t0()).unwrap();
    drop(sessions);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"{\"op\":\"end\"}\n{\"op\":\"end_user\",\"user\":\"a\"}\n")
        .unwrap();
    drop(file);
    let err = SessionStore::open(&path, expiry(), t0()).unwrap_err();
    assert!(
        matches!(err, SessionError::Corrupt { line: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[test]
fn compaction_keeps_the_live_sessions_and_drops_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = store(&dir);
    let live: Vec<SessionSecret> = (0..10)
        .map(|i| sessions.begin(&format!("u{i}"), 0, t0()).unwrap())
        .collect();
    // Churn: each sign-in past the cap ends the user's oldest session.
    for _ in 0..2000 {
        sessions.begin("churn", 0, t0()).unwrap();
    }
    sessions.end_user("churn").unwrap();
    let expiring = sessions.begin("late", 0, t0() - 13 * DAY).unwrap();
    let before = sessions.file_bytes();
    assert!(
        !sessions.compact(t0(), false).unwrap(),
        "compacted under the floor"
    );
    assert!(sessions.compact(t0() + DAY, true).unwrap());
    assert!(
        sessions.file_bytes() < before / 50,
        "{before} -> {}",
        sessions.file_bytes()
    );
    assert_eq!(sessions.len(), 10, "the expired session was kept");
    assert_eq!(sessions.resolve(expiring.expose(), t0() + DAY), None);
    // Appends after the rewrite land in the new file.
    let after = sessions.begin("new", 0, t0() + DAY).unwrap();
    drop(sessions);
    let reopened = store(&dir);
    for secret in live.iter().chain([&after]) {
        assert!(reopened.resolve(secret.expose(), t0() + DAY).is_some());
    }
    assert_eq!(reopened.len(), 11);
}

#[test]
fn compaction_waits_until_the_file_has_grown() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = store(&dir);
    while sessions.file_bytes() < COMPACT_FLOOR_BYTES {
        sessions.begin("churn", 0, t0()).unwrap();
    }
    assert!(
        sessions.compact(t0(), false).unwrap(),
        "grown file not compacted"
    );
    assert_eq!(sessions.len(), MAX_PER_USER);
    assert!(sessions.file_bytes() < COMPACT_FLOOR_BYTES / 20);
}

#[test]
fn a_sign_in_that_overlaps_the_end_of_its_users_sessions_does_not_begin() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = store(&dir);
    // Read before the password check; the sessions end while it runs.
    let before = sessions.generation("Alice");
    assert_eq!(sessions.end_user("alice").unwrap(), 0);
    let late = sessions.begin("alice", before, t0());
    assert!(matches!(late, Err(SessionError::Ended)), "{late:?}");
    assert!(sessions.is_empty());
    // A sign-in that read the generation after the end begins.
    let now = sessions.generation("alice");
    assert_ne!(now, before);
    assert!(sessions.begin("alice", now, t0()).is_ok());
    // Another user's generation did not move.
    assert!(sessions.begin("bob", 0, t0()).is_ok());
}

#[test]
fn a_tokens_last_use_is_kept_coarse_survives_compaction_and_goes_when_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = store(&dir);
    assert_eq!(sessions.token_last_used("00aa"), None);
    sessions.mark_token_used("00aa", t0());
    let after_first = sessions.file_bytes();
    assert!(after_first > 0, "the first use was not written");
    for s in 1..SEEN_GRANULARITY.as_secs() {
        sessions.mark_token_used("00aa", t0() + Duration::from_secs(s));
    }
    assert_eq!(sessions.file_bytes(), after_first, "a request wrote a line");
    assert_eq!(sessions.token_last_used("00aa"), Some(t0()));
    let later = t0() + SEEN_GRANULARITY;
    sessions.mark_token_used("00aa", later);
    sessions.mark_token_used("00bb", later);
    assert_eq!(sessions.token_last_used("00aa"), Some(later));
    assert!(sessions.compact(later, true).unwrap());
    drop(sessions);
    let reopened = store(&dir);
    assert_eq!(reopened.token_last_used("00aa"), Some(later));
    assert_eq!(reopened.token_last_used("00bb"), Some(later));
    reopened.forget_token("00aa");
    drop(reopened);
    let reopened = store(&dir);
    assert_eq!(
        reopened.token_last_used("00aa"),
        None,
        "a revoked token kept its mark"
    );
    assert_eq!(reopened.token_last_used("00bb"), Some(later));
}
