//! The persistence seam: what a storage backend offers the `Sessions` service.
//!
//! A backend stores whole logs. Writes are buffered per session ([`SessionPersistence::append`],
//! fed from `session/event`) and made durable at [`SessionPersistence::flush`] (the
//! `session/flush` barrier). Only one writer may hold a session open for write, across processes.

use std::path::PathBuf;
use std::sync::Arc;

use crate::codec::DecodedLog;
use crate::error::SessionError;
use crate::event::Event;
use crate::header::SessionHeader;

/// One stored session, as listed (header facts only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// Session id.
    pub id: String,
    /// Creation time, epoch ms.
    pub created_at: i64,
    /// Working directory of the header.
    pub cwd: Option<String>,
    /// Parent session, for children.
    pub parent_session: Option<String>,
    /// Stored generation (3 or 4).
    pub version: u64,
    /// The selected log file.
    pub path: PathBuf,
    /// The latest `session/title` near the start of the log, if any.
    pub title: Option<String>,
}

/// A storage backend for session logs.
pub trait SessionPersistence: Send + Sync + 'static {
    /// Registers a new session for exclusive write. Writes nothing: the header and the first
    /// batch appear at the first flush. Fails with `Exists` if the id is taken.
    fn create(&self, header: &SessionHeader) -> Result<(), SessionError>;
    /// Opens a stored session for write: takes the exclusive lock (`Locked` if held, by this
    /// process or another), drops a torn tail, publishes a v4 successor of a v3 log, and returns
    /// the decoded (not yet admitted) log.
    fn open_write(&self, id: &str) -> Result<DecodedLog, SessionError>;
    /// Reads a stored session; takes no lock and writes nothing.
    fn open_read(&self, id: &str) -> Result<DecodedLog, SessionError>;
    /// Whether a session with this id is stored (or registered for write).
    fn exists(&self, id: &str) -> bool;
    /// Every stored session, oldest first.
    fn list(&self) -> Result<Vec<SessionSummary>, SessionError>;
    /// The selected log as plain JSONL: the stored bytes verbatim for a plain log, the
    /// decompressed lines of a compressed one.
    fn export_raw(&self, id: &str) -> Result<Vec<u8>, SessionError>;
    /// Buffers committed events of a session open for write (no I/O required).
    fn append(&self, id: &str, events: &[Arc<Event>]) -> Result<(), SessionError>;
    /// Makes every buffered event of the session durable (write + fsync).
    fn flush(&self, id: &str) -> Result<(), SessionError>;
    /// Hands the buffered appends to the operating system without waiting for the disk: they
    /// survive a crash of this process, not of the machine. Used before a tool's side effect.
    /// Default: a full [`flush`](Self::flush).
    fn write_through(&self, id: &str) -> Result<(), SessionError> {
        self.flush(id)
    }
    /// Flushes and releases the write lock.
    fn close(&self, id: &str) -> Result<(), SessionError>;
    /// The session's own directory for artefacts such as spill files of tool output (created on
    /// demand, removed with the session), for a session open for write or stored. `Ok(None)`
    /// (the default): this backend keeps no artefacts; callers use their own scratch space.
    fn artifact_dir(&self, id: &str) -> Result<Option<PathBuf>, SessionError> {
        let _ = id;
        Ok(None)
    }
    /// The cap on the total size of one session's artefacts, in bytes (`None`, the default: no
    /// cap, or no artefacts kept).
    fn artifact_cap(&self) -> Option<u64> {
        None
    }
    /// Bytes currently used by the session's artefacts (default 0).
    fn artifact_usage(&self, id: &str) -> Result<u64, SessionError> {
        let _ = id;
        Ok(0)
    }
}
