//! The raw log stream ([`dsh_protocol::Client::log`]): a session's committed records as their
//! exact JSON lines.
//!
//! An open session is read from its in-memory log (no copy of the records is queued, so a slow
//! reader never holds memory or slows the session, and none is ever lost): the stream reads the
//! records after the last one it yielded, writes them through to the operating system, yields
//! them, and waits for the next `session/event` of the session. It ends when the session is
//! closed (its agent's `agent/disposed`), after the records the closing committed. A session
//! open in storage without an agent yet (a sub-agent announced before it is published) is
//! followed the same way. A session not open in this process yields its stored log and ends.

use std::collections::VecDeque;
use std::sync::Arc;

use dsh_agent::events::AgentDisposed;
use dsh_kernel::{Ctx, Registration};
use dsh_protocol::{ErrorCode, LogRecord, LogStream, ProtocolError};
use dsh_session::plugin::SessionEvent;
use dsh_session::{Session, Sessions};
use futures::StreamExt;
use tokio::sync::Notify;

use crate::{Inner, session_error};

fn record(e: &dsh_session::Event) -> LogRecord {
    LogRecord {
        seq: e.seq(),
        line: Arc::from(e.to_json_line()),
    }
}

/// The stream of `id`'s log after `after`.
pub(crate) async fn open(
    inner: &Inner,
    id: &str,
    after: Option<u64>,
) -> Result<LogStream, ProtocolError> {
    // A session open in storage but not (yet) as an agent (a sub-agent is announced before
    // its agent is published) is followed live too.
    let live = match inner.hub(id) {
        Some(h) => Some(h.agent.session()),
        None => match inner.agents()?.get(id) {
            Some(a) => Some(a.session()),
            None => inner
                .root
                .get::<dyn Sessions>()
                .and_then(|sessions| sessions.get(id)),
        },
    };
    match live {
        Some(session) => live_stream(&inner.root, session, after),
        None => stored(inner, id, after).await,
    }
}

async fn stored(inner: &Inner, id: &str, after: Option<u64>) -> Result<LogStream, ProtocolError> {
    let sessions = inner.root.get::<dyn Sessions>().ok_or_else(|| {
        ProtocolError::new(
            ErrorCode::Internal,
            "the composition mounts no sessions service",
        )
    })?;
    let id = id.to_owned();
    let records = tokio::task::spawn_blocking(move || {
        let log = sessions.read(&id).map_err(|e| session_error(&e))?;
        Ok::<_, ProtocolError>(
            log.events()
                .iter()
                .filter(|e| after.is_none_or(|a| e.seq() > a))
                .map(|e| Ok(record(e)))
                .collect::<Vec<_>>(),
        )
    })
    .await
    .map_err(|e| {
        ProtocolError::new(ErrorCode::Internal, format!("a storage task failed: {e}"))
    })??;
    Ok(futures::stream::iter(records).boxed())
}

/// Registrations undone when the stream is dropped.
struct Listening(Vec<Registration>);

impl Drop for Listening {
    fn drop(&mut self) {
        for r in self.0.drain(..) {
            r.dispose();
        }
    }
}

struct Live {
    session: Arc<Session>,
    /// The first seq not yet yielded.
    next: u64,
    wake: Arc<Notify>,
    ready: VecDeque<LogRecord>,
    done: bool,
    _listening: Listening,
}

fn live_stream(
    root: &Ctx,
    session: Arc<Session>,
    after: Option<u64>,
) -> Result<LogStream, ProtocolError> {
    let wake = Arc::new(Notify::new());
    let internal =
        |e: dsh_kernel::KernelError| ProtocolError::new(ErrorCode::Internal, e.to_string());
    let id: Arc<str> = Arc::from(session.id());
    let (w, sid) = (wake.clone(), id.clone());
    // `notify_one` keeps a permit when nobody waits: a commit between a read and the wait is
    // never missed.
    let commits = root
        .on::<SessionEvent>(move |e| {
            if e.session_id == sid {
                w.notify_one();
            }
            Ok(())
        })
        .map_err(internal)?;
    let (w, sid) = (wake.clone(), id);
    let disposed = root
        .on::<AgentDisposed>(move |e| {
            if *e.agent_id == *sid {
                w.notify_one();
            }
            Ok(())
        })
        .map_err(internal)?;
    let live = Live {
        session,
        next: after.map_or(0, |a| a + 1),
        wake,
        ready: VecDeque::new(),
        done: false,
        _listening: Listening(vec![commits, disposed]),
    };
    Ok(futures::stream::unfold(live, Live::next).boxed())
}

impl Live {
    async fn next(mut self) -> Option<(Result<LogRecord, ProtocolError>, Live)> {
        loop {
            if let Some(r) = self.ready.pop_front() {
                return Some((Ok(r), self));
            }
            if self.done {
                return None;
            }
            // Read `closed` first: once it is set, every record is in the log.
            let closed = self.session.is_closed();
            let batch = self.session.events_since(self.next);
            if let Some(last) = batch.last() {
                // A closed session was flushed by its close (and a write-through on it fails).
                if !closed
                    && let Err(e) = self.session.write_through().await
                    && !self.session.is_closed()
                {
                    self.done = true;
                    return Some((
                        Err(ProtocolError::new(
                            ErrorCode::Internal,
                            format!("session storage failed; the log stream stops: {e}"),
                        )),
                        self,
                    ));
                }
                self.next = last.seq() + 1;
                self.ready.extend(batch.iter().map(|e| record(e)));
                continue;
            }
            if closed {
                return None;
            }
            self.wake.notified().await;
        }
    }
}
