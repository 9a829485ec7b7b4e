//! [`Session`]: a shared, thread-safe handle on one open session log, and the [`SessionSink`]
//! that receives committed events (the `session/event` notification) and flush requests (the
//! `session/flush` barrier).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_llm::Message;
use futures::future::BoxFuture;
use parking_lot::Mutex;

use crate::data::{CoreEvent, PluginEvent};
use crate::error::SessionError;
use crate::event::{Event, NewEvent};
use crate::header::SessionHeader;
use crate::log::SessionLog;
use crate::persist::SessionPersistence;

/// Receives every committed event in seq order, and makes a session durable on flush.
pub trait SessionSink: Send + Sync + 'static {
    /// Called once per committed event, in commit order, outside the log's lock.
    fn event(&self, session_id: &Arc<str>, event: &Arc<Event>);
    /// The durability barrier: resolves when every event notified so far is durable.
    fn flush(&self, session_id: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>>;
    /// Like [`flush`](Self::flush), but only as far as the operating system (process-crash safe,
    /// no disk sync). Default: a full flush.
    fn write_through(&self, session_id: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>> {
        self.flush(session_id)
    }
}

/// A sink that drops everything (in-memory sessions).
#[derive(Debug, Default)]
pub struct NullSink;

impl SessionSink for NullSink {
    fn event(&self, _: &Arc<str>, _: &Arc<Event>) {}
    fn flush(&self, _: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>> {
        Box::pin(async { Ok(()) })
    }
}

/// A sink that writes straight to a persistence backend (no kernel): events are buffered by the
/// backend, flush makes them durable. A buffering failure is reported by the next flush.
pub struct DirectSink {
    persistence: Arc<dyn SessionPersistence>,
    failed: Mutex<Option<SessionError>>,
}

impl std::fmt::Debug for DirectSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectSink").finish_non_exhaustive()
    }
}

impl DirectSink {
    /// A sink over `persistence`.
    pub fn new(persistence: Arc<dyn SessionPersistence>) -> Self {
        DirectSink {
            persistence,
            failed: Mutex::new(None),
        }
    }
}

impl SessionSink for DirectSink {
    fn event(&self, session_id: &Arc<str>, event: &Arc<Event>) {
        if let Err(e) = self
            .persistence
            .append(session_id, std::slice::from_ref(event))
        {
            tracing::error!(session = %session_id, seq = event.seq(), "persisting event failed: {e}");
            self.failed.lock().get_or_insert(e);
        }
    }
    fn flush(&self, session_id: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>> {
        let failed = self.failed.lock().take();
        let result = match failed {
            Some(e) => Err(SessionError::Unpersisted(Box::new(e))),
            None => self.persistence.flush(session_id),
        };
        Box::pin(async move { result })
    }
    fn write_through(&self, session_id: &Arc<str>) -> BoxFuture<'static, Result<(), SessionError>> {
        let failed = self.failed.lock().take();
        let result = match failed {
            Some(e) => Err(SessionError::Unpersisted(Box::new(e))),
            None => self.persistence.write_through(session_id),
        };
        Box::pin(async move { result })
    }
}

/// One open session: the log behind a lock, plus ordered delivery of committed events to the
/// sink. Cheap to share (`Arc<Session>`); events are shared, never copied.
pub struct Session {
    id: Arc<str>,
    log: Mutex<SessionLog>,
    queue: Mutex<VecDeque<Arc<Event>>>,
    draining: Mutex<()>,
    sink: Arc<dyn SessionSink>,
    closed: AtomicBool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Wraps a log; committed events go to `sink`.
    pub fn new(log: SessionLog, sink: Arc<dyn SessionSink>) -> Self {
        Session {
            id: Arc::from(log.header().id.as_str()),
            log: Mutex::new(log),
            queue: Mutex::new(VecDeque::new()),
            draining: Mutex::new(()),
            sink,
            closed: AtomicBool::new(false),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The header.
    pub fn header(&self) -> SessionHeader {
        self.log.lock().header().clone()
    }

    /// Validates and commits one event, then notifies the sink (`session/event`).
    pub fn append(&self, event: NewEvent) -> Result<Arc<Event>, SessionError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(SessionError::Closed(self.id.to_string()));
        }
        let ev = {
            let mut log = self.log.lock();
            let ev = log.append(event)?;
            self.queue.lock().push_back(Arc::clone(&ev));
            ev
        };
        self.drain();
        Ok(ev)
    }

    /// Commits a typed core event with the default metadata (surface types append): the typed
    /// append path for core events. For provenance or replacements, build
    /// [`NewEvent::core`] and use [`Session::append`].
    pub fn append_core(&self, event: impl Into<CoreEvent>) -> Result<Arc<Event>, SessionError> {
        self.append(NewEvent::core(event))
    }

    /// Commits a plugin's typed event (see [`PluginEvent`]).
    pub fn append_plugin<T: PluginEvent>(&self, event: &T) -> Result<Arc<Event>, SessionError> {
        let ev = NewEvent::plugin(event).map_err(|e| crate::AppendError {
            seq: self.len(),
            kind: T::TYPE.to_string(),
            reason: crate::Rejection::Serialize(Arc::new(e)),
        })?;
        self.append(ev)
    }

    /// Commits a typed core event from a reference (clones it). Prefer [`Session::append_core`].
    pub fn append_data<T: crate::data::EventData>(
        &self,
        data: &T,
    ) -> Result<Arc<Event>, SessionError> {
        self.append_core(data.clone())
    }

    /// The pending inbox lists (format §11), rebuilt from the log.
    pub fn inbox(&self) -> crate::log::Inbox {
        self.log.lock().inbox().clone()
    }

    /// Commits several events in order; stops at the first rejection (earlier ones stay).
    pub fn append_all(&self, events: Vec<NewEvent>) -> Result<Vec<Arc<Event>>, SessionError> {
        events.into_iter().map(|e| self.append(e)).collect()
    }

    /// Delivers queued events in commit order. A listener that appends re-enters: its event is
    /// queued and delivered by the outer drain, after the current one.
    fn drain(&self) {
        loop {
            let Some(_guard) = self.draining.try_lock() else {
                return;
            };
            loop {
                // Pop in its own statement: the queue lock must not be held while the sink runs
                // (a listener may append to this session).
                let next = self.queue.lock().pop_front();
                let Some(ev) = next else { break };
                self.sink.event(&self.id, &ev);
            }
            drop(_guard);
            if self.queue.lock().is_empty() {
                return;
            }
        }
    }

    /// The durability barrier (`session/flush`): resolves when every committed event is durable.
    pub async fn flush(&self) -> Result<(), SessionError> {
        self.drain();
        self.sink.flush(&self.id).await
    }

    /// A process-crash barrier: every committed event reaches the operating system (not
    /// necessarily the disk). The loop uses it before a tool's side effect; turn ends use
    /// [`flush`](Self::flush).
    pub async fn write_through(&self) -> Result<(), SessionError> {
        self.drain();
        self.sink.write_through(&self.id).await
    }

    /// Runs `f` with read access to the log (no copy). `f` runs under the session's lock: it must
    /// not call back into this session (append, flush, events…), which would deadlock.
    pub fn with_log<R>(&self, f: impl FnOnce(&SessionLog) -> R) -> R {
        f(&self.log.lock())
    }

    /// A snapshot of all events (a new vector of shared `Arc`s: O(log length)). Per-step code
    /// should borrow instead: [`Session::with_log`], [`Session::with_events_since`],
    /// [`Session::events_since`].
    pub fn events(&self) -> Vec<Arc<Event>> {
        self.log.lock().events().to_vec()
    }

    /// Events with `seq >= from` (a vector of the new events only: O(new events)).
    pub fn events_since(&self, from: u64) -> Vec<Arc<Event>> {
        self.log.lock().events_since(from).to_vec()
    }

    /// Runs `f` on the events with `seq >= from`, borrowed (no copy). Same locking rule as
    /// [`Session::with_log`].
    pub fn with_events_since<R>(&self, from: u64, f: impl FnOnce(&[Arc<Event>]) -> R) -> R {
        f(self.log.lock().events_since(from))
    }

    /// The last committed event.
    pub fn last_event(&self) -> Option<Arc<Event>> {
        self.log.lock().last().cloned()
    }

    /// Number of committed events (= next seq).
    pub fn len(&self) -> u64 {
        self.log.lock().len()
    }

    /// Whether no event is committed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The model history (format §8.3).
    pub fn derive_messages(&self) -> Vec<Arc<Message>> {
        self.log.lock().derive_messages()
    }

    /// The surface's content generation (moves when model-visible history changed).
    pub fn content_generation(&self) -> u64 {
        self.log.lock().surface().content_generation()
    }

    pub(crate) fn mark_closed(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether the session was closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}
