//! The file-backend seam of dsh: where the file tools (`read`, `write`, `edit`, and the
//! read-before-write guard) get and put file text for one session.
//!
//! By default every session uses the local file system. A front end whose client owns the files
//! (an editor speaking ACP, whose unsaved buffers are the truth) sets a [`FileBackend`] for its
//! session in the [`FileBackends`] service (kernel name `fs-backends`, provided by the file
//! tools' plugin in `dsh-tool-fs`); the tools then read and write whole texts of the paths
//! inside the session's working directory through it.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Weak};

use dsh_kernel::Service;
use futures::future::BoxFuture;
use parking_lot::Mutex;

/// Why a backend could not read or write a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The file does not exist (a write creates it).
    #[error("not found")]
    NotFound,
    /// The backend refused access.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// Any other failure, in the backend's words.
    #[error("{0}")]
    Failed(String),
}

/// Reads and writes whole UTF-8 texts of absolute paths for one session.
pub trait FileBackend: Send + Sync {
    /// Who serves the files, for error messages (`cannot read "<p>": <name>: <message>`).
    fn name(&self) -> &str;

    /// The whole text of `path` as the backend sees it (an editor: its buffer).
    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<String, BackendError>>;

    /// Replace the whole text of `path` (creating it when missing).
    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>>;
}

type Map = Mutex<HashMap<String, Arc<dyn FileBackend>>>;

/// The backend of each session that does not use the local file system (service
/// `fs-backends`, provided by `dsh-tool-fs`'s `FsToolsPlugin`).
#[derive(Default)]
pub struct FileBackends {
    by_session: Arc<Map>,
}

impl fmt::Debug for FileBackends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sessions: Vec<String> = self.by_session.lock().keys().cloned().collect();
        f.debug_struct("FileBackends")
            .field("sessions", &sessions)
            .finish()
    }
}

impl Service for FileBackends {
    const NAME: &'static str = "fs-backends";
}

impl FileBackends {
    /// Route `session`'s file tools through `backend` until the returned registration drops.
    /// A second call for the same session replaces the first.
    pub fn set(&self, session: &str, backend: Arc<dyn FileBackend>) -> BackendRegistration {
        self.by_session.lock().insert(session.to_owned(), backend);
        BackendRegistration {
            map: Arc::downgrade(&self.by_session),
            session: session.to_owned(),
        }
    }

    /// The backend of `session`; `None`: the local file system.
    pub fn get(&self, session: &str) -> Option<Arc<dyn FileBackend>> {
        self.by_session.lock().get(session).cloned()
    }

    /// The backend serving `path` for `session`: its backend for a path inside the session's
    /// working directory `cwd` (the workspace whose files the client holds), `None` (the local
    /// file system) for any other path.
    pub fn for_path(&self, session: &str, cwd: &Path, path: &Path) -> Option<Arc<dyn FileBackend>> {
        if !path.starts_with(cwd) {
            return None;
        }
        self.get(session)
    }
}

/// Keeps a session's backend set; dropping it returns the session to the local file system.
#[must_use = "dropping the registration unsets the backend"]
pub struct BackendRegistration {
    map: Weak<Map>,
    session: String,
}

impl fmt::Debug for BackendRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendRegistration")
            .field("session", &self.session)
            .finish()
    }
}

impl Drop for BackendRegistration {
    fn drop(&mut self) {
        if let Some(map) = self.map.upgrade() {
            map.lock().remove(&self.session);
        }
    }
}

/// The version of a text served by a backend: its length and FNV-1a 64 hash (stable across
/// processes, so logged observations replay on resume). Never equal to a local `stat` version.
pub fn text_version(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("text:{}:{h:016x}", text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nothing;

    impl FileBackend for Nothing {
        fn name(&self) -> &str {
            "nothing"
        }
        fn read_text<'a>(&'a self, _: &'a Path) -> BoxFuture<'a, Result<String, BackendError>> {
            Box::pin(async { Err(BackendError::NotFound) })
        }
        fn write_text<'a>(
            &'a self,
            _: &'a Path,
            _: &'a str,
        ) -> BoxFuture<'a, Result<(), BackendError>> {
            Box::pin(async { Ok(()) })
        }
    }

    #[test]
    fn registration_scopes_the_backend() {
        let backends = FileBackends::default();
        assert!(backends.get("s").is_none());
        let reg = backends.set("s", Arc::new(Nothing));
        assert_eq!(
            backends.get("s").map(|b| b.name().to_owned()),
            Some("nothing".into())
        );
        assert!(backends.get("other").is_none());
        drop(reg);
        assert!(backends.get("s").is_none());
    }

    #[test]
    fn text_versions_are_stable_and_differ() {
        assert_eq!(text_version(""), "text:0:cbf29ce484222325");
        assert_eq!(text_version("a"), "text:1:af63dc4c8601ec8c");
        assert_ne!(text_version("ab"), text_version("ba"));
    }
}
