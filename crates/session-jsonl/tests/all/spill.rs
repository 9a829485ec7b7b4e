//! Issue 12 item 9: spill files live under the session's own directory, are capped per session
//! and are removed with the session. Issue 12 item 5: the write path can be tested before the
//! first model request.

use std::sync::Arc;

use dsh_session::{CreateOptions, SessionPersistence, Sessions};
use dsh_session_jsonl::{DEFAULT_SPILL_CAP_BYTES, JsonlStore, StoreError};
use futures::executor::block_on;

use crate::corrupt::store;

fn opts(id: &str) -> CreateOptions {
    CreateOptions {
        id: Some(id.into()),
        cwd: Some("/home/u/proj".into()),
        ..Default::default()
    }
}

#[test]
fn spill_files_live_in_the_session_directory_and_go_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (backend, sessions) = store(tmp.path());
    // a new session, not yet materialized: its spill directory is already its own
    let s = sessions.create(opts("s-spill")).unwrap();
    let dir = backend.spill_dir("s-spill").unwrap();
    assert_eq!(dir, tmp.path().join("--home-u-proj--/s-spill/spill"));
    assert!(dir.is_dir());
    std::fs::write(dir.join("bash-c1-1.stdout"), vec![b'x'; 1000]).unwrap();
    std::fs::create_dir_all(dir.join("nested")).unwrap();
    std::fs::write(dir.join("nested/f"), vec![b'y'; 24]).unwrap();
    assert_eq!(backend.spill_usage("s-spill").unwrap(), 1024);
    assert_eq!(backend.spill_cap(), DEFAULT_SPILL_CAP_BYTES);
    // the spill directory is not a log generation: the session reads and lists as usual
    s.append(dsh_session::NewEvent::new(
        "turn/start",
        serde_json::json!({"turn": 1}),
    ))
    .unwrap();
    block_on(sessions.close("s-spill")).unwrap();
    assert_eq!(backend.load("s-spill").unwrap().events.len(), 1);
    assert_eq!(SessionPersistence::list(backend.as_ref()).unwrap().len(), 1);
    // through the seam
    let p: Arc<dyn SessionPersistence> = backend.clone();
    assert_eq!(p.artifact_dir("s-spill").unwrap(), Some(dir.clone()));
    assert_eq!(p.artifact_cap(), Some(DEFAULT_SPILL_CAP_BYTES));
    // removal takes the log and the spill files, and refuses while a writer holds it
    let _held = sessions.open("s-spill").unwrap();
    assert!(matches!(
        backend.remove_session("s-spill"),
        Err(StoreError::Locked(_))
    ));
    block_on(sessions.close("s-spill")).unwrap();
    let removed = backend.remove_session("s-spill").unwrap();
    assert!(!removed.exists());
    assert!(!dir.exists());
    assert!(!sessions.exists("s-spill"));
    // two homes never share a spill directory
    let other = tempfile::tempdir().unwrap();
    let (b2, s2) = store(other.path());
    let _x = s2.create(opts("s-spill")).unwrap();
    assert!(b2.spill_dir("s-spill").unwrap().starts_with(other.path()));
    assert!(matches!(
        backend.spill_dir("unknown"),
        Err(StoreError::NotFound(_))
    ));
    let capped = JsonlStore::new(tmp.path()).with_spill_cap(5);
    assert_eq!(capped.spill_cap(), 5);
}

/// Issue 12 item 5: a flush right after `create` materializes the header — taking the lock and
/// writing + syncing the file — so an unwritable home fails before any model request.
#[test]
fn an_unwritable_home_fails_at_the_eager_flush() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    let (backend, sessions) = store(&file.join("sessions"));
    let s = sessions.create(opts("s-ro")).unwrap();
    let err = block_on(s.flush()).unwrap_err();
    assert_eq!(err.code(), "SESSION_IO", "{err}");
    let p: Arc<dyn SessionPersistence> = backend.clone();
    let err = p.flush("s-ro").unwrap_err();
    assert_eq!(err.code(), "SESSION_IO", "{err}");
    assert!(err.to_string().contains("not-a-dir"), "{err}");
}

/// Issue 12 item 5: of two creators of the same id, the second to flush loses with
/// `SESSION_LOCKED` (before any request), and the winner's log is intact.
#[test]
fn the_loser_of_a_create_race_fails_at_the_eager_flush() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, a) = store(tmp.path());
    let (_, b) = store(tmp.path());
    let sa = a.create(opts("race")).unwrap();
    let sb = b.create(opts("race")).unwrap();
    block_on(sa.flush()).unwrap();
    let err = block_on(sb.flush()).unwrap_err();
    assert_eq!(err.code(), "SESSION_LOCKED", "{err}");
    block_on(a.close("race")).unwrap();
    // the winner released its lock; the loser still cannot publish over the existing log
    let err = block_on(sb.flush()).unwrap_err();
    assert_eq!(err.code(), "SESSION_LOCKED", "{err}");
    let (backend, _) = store(tmp.path());
    assert_eq!(backend.load("race").unwrap().events.len(), 0);
}
