//! Shared set-up of the integration tests.

use std::path::Path;
use std::sync::Arc;

use dsh_session::{DirectSink, SessionPersistence, SessionStore};
use dsh_session_jsonl::{Compression, JsonlStore};

/// A store at `root` writing new sessions with `compression`, and the sessions service over it
/// (events persisted as they are appended).
pub fn store_with(root: &Path, compression: Compression) -> (Arc<JsonlStore>, SessionStore) {
    let backend = Arc::new(JsonlStore::new(root).with_compression(compression));
    let p: Arc<dyn SessionPersistence> = backend.clone();
    let sessions = SessionStore::new(Some(p.clone()), Arc::new(DirectSink::new(p)));
    (backend, sessions)
}

/// [`store_with`] the default compression (plain JSONL).
pub fn store(root: &Path) -> (Arc<JsonlStore>, SessionStore) {
    store_with(root, Compression::default())
}
