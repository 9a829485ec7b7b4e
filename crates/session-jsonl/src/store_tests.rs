//! The writer's durability state across write-through, flush and close (what a test outside
//! the crate cannot see: whether a sync is still owed).

use std::sync::Arc;

use dsh_session::{Event, SessionHeader, SessionPersistence};
use serde_json::json;

use super::{Compression, JsonlStore};

fn event(seq: u64) -> Arc<Event> {
    Arc::new(
        Event::from_line(
            &json!({"type": "turn/start", "data": {"turn": 1}, "seq": seq, "time": 1}).to_string(),
            seq,
        )
        .expect("a valid event line"),
    )
}

/// (bytes owed an fsync, name owed a directory fsync) of the open writer of `id`.
fn owed(store: &JsonlStore, id: &str) -> (bool, bool) {
    let writer = store.open.get(id).expect("the session is open");
    let w = writer.lock();
    (w.unsynced, w.name_unsynced)
}

fn new_session(compression: Compression) -> (tempfile::TempDir, JsonlStore) {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let store = JsonlStore::new(tmp.path()).with_compression(compression);
    store
        .create(&SessionHeader::new("s-owed", 1, Some("/w".into())))
        .expect("created");
    store.append("s-owed", &[event(0)]).expect("appended");
    (tmp, store)
}

#[test]
fn a_write_through_publishes_without_syncing_and_the_next_flush_syncs_file_and_name() {
    for compression in [Compression::None, Compression::Zstd] {
        let (_tmp, store) = new_session(compression);
        store.write_through("s-owed").expect("written through");
        assert_eq!(owed(&store, "s-owed"), (true, true), "{compression:?}");
        // The file is there for readers (process-crash safe).
        assert_eq!(store.load("s-owed").expect("readable").events.len(), 1);
        store.flush("s-owed").expect("flushed");
        assert_eq!(owed(&store, "s-owed"), (false, false), "{compression:?}");
    }
}

#[test]
fn a_first_flush_publishes_durably() {
    let (_tmp, store) = new_session(Compression::Zstd);
    store.flush("s-owed").expect("flushed");
    assert_eq!(owed(&store, "s-owed"), (false, false));
}

#[test]
fn a_write_through_in_place_runs_when_the_writer_is_free_and_defers_when_it_is_not() {
    let (_tmp, store) = new_session(Compression::Zstd);
    {
        let writer = store.open.get("s-owed").expect("open");
        let _held = writer.lock();
        assert!(
            store.try_write_through("s-owed").is_none(),
            "the lock is held"
        );
    }
    assert!(matches!(store.try_write_through("s-owed"), Some(Ok(()))));
    assert_eq!(owed(&store, "s-owed"), (true, true));
    assert_eq!(store.load("s-owed").expect("readable").events.len(), 1);
    assert!(matches!(
        store.try_write_through("s-unknown"),
        Some(Err(dsh_session::SessionError::Closed(_)))
    ));
}

/// Runs `f` on another thread; fails (instead of hanging) when it does not end within a
/// generous bound: what it waits on is held by this test until it ends.
fn within_bound(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .expect("blocked by another session's writer");
}

#[test]
fn one_sessions_writer_held_does_not_hold_up_another_session() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let store = Arc::new(JsonlStore::new(tmp.path()));
    for id in ["s-busy", "s-free"] {
        store
            .create(&SessionHeader::new(id, 1, Some("/w".into())))
            .expect("created");
        store.append(id, &[event(0)]).expect("appended");
        store.flush(id).expect("flushed");
    }
    // As during a durable flush (an fsync) of the first session.
    let busy = store.open.get("s-busy").expect("open");
    let _held = busy.lock();
    let other = store.clone();
    within_bound(move || {
        other.append("s-free", &[event(1)]).expect("appended");
        other.flush("s-free").expect("flushed");
        assert!(matches!(other.try_write_through("s-free"), Some(Ok(()))));
        assert!(other.exists("s-free") && other.exists("s-busy"));
        other.close("s-free").expect("closed");
        other.open_write("s-free").expect("opened again");
        assert!(other.session_dir_of("s-free").is_ok());
    });
    assert_eq!(store.load("s-free").expect("readable").events.len(), 2);
}

#[test]
fn a_writer_looked_up_before_its_close_refuses_appends_after_it() {
    let (_tmp, store) = new_session(Compression::None);
    let writer = store.open.get("s-owed").expect("open");
    store.close("s-owed").expect("closed");
    assert!(writer.lock().closed, "marked closed");
    assert!(matches!(
        store.append("s-owed", &[event(1)]),
        Err(dsh_session::SessionError::Closed(_))
    ));
    assert!(matches!(
        store.try_write_through("s-owed"),
        Some(Err(dsh_session::SessionError::Closed(_)))
    ));
    // The lock was released with the close: the session opens again at once.
    store.open_write("s-owed").expect("opened again");
}

#[test]
fn an_open_waits_for_the_close_of_the_same_session() {
    let (_tmp, store) = new_session(Compression::None);
    let store = Arc::new(store);
    // The close holds the entry busy through its flush; an open meanwhile waits, then
    // succeeds (it neither finds the lock taken nor reads a half-written log).
    let writer = store.open.get("s-owed").expect("open");
    let held = writer.lock();
    let closer = {
        let store = store.clone();
        std::thread::spawn(move || store.close("s-owed"))
    };
    // The close has made the entry busy once `get` no longer finds the writer.
    while store.open.get("s-owed").is_some() {
        std::thread::yield_now();
    }
    let opener = {
        let store = store.clone();
        std::thread::spawn(move || store.open_write("s-owed").map(|d| d.events.len()))
    };
    while store.open.waiting.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    drop(held);
    closer.join().expect("no panic").expect("closed");
    assert_eq!(opener.join().expect("no panic").expect("opened"), 1);
}
