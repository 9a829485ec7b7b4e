//! The client trait every front end drives a host through.
//!
//! The in-process host implements it over the engine; the HTTP client (`dsh serve`'s remote
//! client) implements it over the network. A front end holds an `Arc<dyn Client>` and nothing
//! else of the engine.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;

use crate::command::CommandInfo;
use crate::error::ProtocolError;
use crate::event::Event;
use crate::op::{Op, OpAccepted};
use crate::session::{OpenSession, SessionQuery, SessionSummary};

/// A stream of one session's events. It ends when the session is closed in the host, or with
/// an [`crate::EventMsg::Error`] of code `SUBSCRIBER_LAGGED` when the subscriber fell too far behind the
/// live events to be served (subscribe again from the last seq seen: the log has everything).
pub type EventStream = BoxStream<'static, Event>;

/// One committed record of a session's log: its sequence number and its exact JSON line in the
/// session format (`docs/session-format.md`), without the trailing newline. Consumers that
/// promise the session format (`dsh exec --json`, the SDK server) pass the line on byte for
/// byte; nothing in this crate parses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// The record's `seq` (the same number its line carries).
    pub seq: u64,
    /// The JSON line.
    pub line: Arc<str>,
}

/// A stream of one session's raw log records, in seq order, each once. It ends when the session
/// is closed (after its last record), or after an `Err` (storage or transport failed: open a new
/// stream after the last seq seen).
pub type LogStream = BoxStream<'static, Result<LogRecord, ProtocolError>>;

/// A host of sessions, as a front end sees it.
pub trait Client: Send + Sync + 'static {
    /// Creates, resumes or forks a session and opens it in the host.
    fn open(&self, request: OpenSession) -> BoxFuture<'_, Result<SessionSummary, ProtocolError>>;

    /// Sends one op to an open session (opening a stored one first).
    fn send(&self, session_id: &str, op: Op) -> BoxFuture<'_, Result<OpAccepted, ProtocolError>>;

    /// The session's events after `after` (every committed event from the start when `None`),
    /// then a [`crate::EventMsg::Snapshot`] of the live state, then live events as they
    /// happen. Watching never takes the session's write lock.
    fn subscribe(
        &self,
        session_id: &str,
        after: Option<u64>,
    ) -> BoxFuture<'_, Result<EventStream, ProtocolError>>;

    /// The session's raw log: every committed record after `after` (all of them when `None`),
    /// then each record as it commits, until the session is closed. A record is yielded only
    /// once it is written through to the operating system (a consumer never sees a record a
    /// crash of the host could lose). A session the host does not have open yields its stored
    /// records and ends. Watching never takes the session's write lock.
    fn log(
        &self,
        session_id: &str,
        after: Option<u64>,
    ) -> BoxFuture<'_, Result<LogStream, ProtocolError>>;

    /// Stored and open sessions, newest first.
    fn sessions(
        &self,
        query: SessionQuery,
    ) -> BoxFuture<'_, Result<Vec<SessionSummary>, ProtocolError>>;

    /// One session's summary and state.
    fn session(&self, session_id: &str) -> BoxFuture<'_, Result<SessionSummary, ProtocolError>>;

    /// The slash commands of a session (completion, `/help`).
    fn commands(&self, session_id: &str) -> BoxFuture<'_, Result<Vec<CommandInfo>, ProtocolError>>;

    /// Closes a session in the host: its running turn is interrupted and its log flushed.
    fn close(&self, session_id: &str) -> BoxFuture<'_, Result<(), ProtocolError>>;
}
