//! The webhooks log as the deliveries see it: events numbered in the
//! order recorded, a hook's cursor durable across a reopen, a new hook
//! starting after what was recorded before it, a hook's queue bounded
//! (its oldest dropped and counted), and a compaction that keeps what a
//! hook has not taken and the feed's place.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed run

use std::sync::Arc;
use vole_webhooks::history::Attempt;

use vole_webhooks::queue::{Bounds, NewEvent, Queue, Wants};

fn event(n: u64) -> NewEvent {
    NewEvent {
        incarnation: "inc".into(),
        repo: "ann/app".into(),
        event: "push".into(),
        ref_name: "refs/heads/main".into(),
        payload: format!("{{\"n\":{n}}}"),
    }
}

/// A hook that wants every event.
fn all() -> Wants {
    Arc::new(|_| true)
}

/// A hook that wants the events of another repo only.
fn other_repo() -> Wants {
    Arc::new(|e| e.repo == "bob/other")
}

fn attempt(event: u64) -> Attempt {
    Attempt {
        event,
        delivery: format!("d{event}"),
        attempt: 1,
        redelivery: false,
        time_ns: event as i64,
        event_name: "push".into(),
        url: "http://ci.example.org/".into(),
        request_headers: Vec::new(),
        request_body: String::new(),
        request_cut: false,
        status: Some(200),
        response_headers: Vec::new(),
        response_body: String::new(),
        error: None,
        duration_ms: 1,
    }
}

#[test]
fn a_cursor_and_the_feeds_place_survive_a_reopen_and_a_new_hook_starts_after_what_came_before() {
    let dir = tempfile::tempdir().unwrap();
    {
        let queue = Queue::open(dir.path(), Bounds::default()).unwrap();
        assert_eq!(queue.fed(), None, "a new log says the feed never ran");
        queue.set_live(vec![(1, all())]).unwrap();
        queue
            .record(vec![event(1), event(2), event(3)], (10, 20))
            .unwrap();
        assert_eq!(queue.head(), 3);
        let next = queue.next_after(0, |_| true).unwrap();
        assert_eq!(next.id, 1);
        queue.delivered(1, 2, attempt(2)).unwrap();
    }
    let queue = Queue::open(dir.path(), Bounds::default()).unwrap();
    assert_eq!(queue.fed(), Some((10, 20)));
    assert_eq!(
        queue.cursor(1),
        Some(2),
        "a delivered cursor was lost on reopen"
    );
    assert_eq!(queue.history(1).len(), 1);
    queue.set_live(vec![(1, all()), (2, all())]).unwrap();
    assert_eq!(
        queue.cursor(2),
        Some(3),
        "a new hook starts after the events before it"
    );
    assert_eq!(
        queue.next_after(2, |_| true).map(|e| e.id),
        Some(3),
        "the event hook 1 has not taken is kept"
    );
    drop(queue);
    let queue = Queue::open(dir.path(), Bounds::default()).unwrap();
    queue.set_live(vec![(1, all()), (2, all())]).unwrap();
    assert_eq!(
        queue.cursor(2),
        Some(3),
        "a new hook's start was not durable"
    );
}

#[test]
fn a_hooks_queue_past_its_bound_loses_its_oldest_counted() {
    let dir = tempfile::tempdir().unwrap();
    let bounds = Bounds {
        per_hook: 5,
        ..Bounds::default()
    };
    let queue = Queue::open(dir.path(), bounds).unwrap();
    queue.set_live(vec![(7, all()), (8, other_repo())]).unwrap();
    for n in 0..12 {
        queue.record(vec![event(n)], (n, 0)).unwrap();
    }
    assert_eq!(
        queue.dropped(7),
        (7, 7),
        "events past the bound were not counted"
    );
    assert_eq!(queue.cursor(7), Some(7));
    assert_eq!(queue.next_after(7, |_| true).map(|e| e.id), Some(8));
    assert_eq!(queue.waiting(7), 5);
    // A hook of another repo, behind all of them, wants none of them: its
    // queue is empty and nothing of it was dropped.
    assert_eq!(
        (queue.waiting(8), queue.dropped(8).0),
        (0, 0),
        "another repo's events counted against a hook's queue"
    );
}

#[test]
fn a_compaction_keeps_what_a_hook_has_not_taken_and_the_feeds_place() {
    let dir = tempfile::tempdir().unwrap();
    {
        let queue = Queue::open(dir.path(), Bounds::default()).unwrap();
        queue.set_live(vec![(1, all())]).unwrap();
        for n in 0..2000u64 {
            queue.record(vec![event(n)], (n + 1, 0)).unwrap();
        }
        queue.delivered(1, 1500, attempt(1500)).unwrap();
        let before = std::fs::metadata(dir.path().join("webhooks.arrow"))
            .unwrap()
            .len();
        queue.compact().unwrap();
        let after = std::fs::metadata(dir.path().join("webhooks.arrow"))
            .unwrap()
            .len();
        assert!(
            after < before,
            "the compaction dropped nothing ({before} -> {after})"
        );
    }
    let queue = Queue::open(dir.path(), Bounds::default()).unwrap();
    queue.set_live(vec![(1, all())]).unwrap();
    assert_eq!(queue.fed(), Some((2000, 0)));
    assert_eq!(queue.cursor(1), Some(1500));
    assert_eq!(
        queue.head(),
        2000,
        "the numbering restarted after a compaction"
    );
    let kept: Vec<u64> = std::iter::successors(queue.next_after(1500, |_| true), |e| {
        queue.next_after(e.id, |_| true)
    })
    .map(|e| e.id)
    .collect();
    assert_eq!(
        kept,
        (1501..=2000).collect::<Vec<_>>(),
        "an event not taken was dropped"
    );
    assert_eq!(queue.history(1).len(), 1, "the history was not kept");
}
