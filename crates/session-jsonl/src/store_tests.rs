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
    let open = store.open.lock();
    let w = open.get(id).expect("the session is open");
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
fn a_write_through_in_place_runs_when_the_store_is_free_and_defers_when_it_is_not() {
    let (_tmp, store) = new_session(Compression::Zstd);
    {
        let _held = store.open.lock();
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
