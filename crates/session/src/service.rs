//! The [`Sessions`] service: create, open (resume with crash repair), read, list, export, fork,
//! flush and close sessions. [`SessionStore`] is its implementation over an optional
//! [`SessionPersistence`] backend and a [`SessionSink`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;

use crate::NewEvent;
use crate::data::{CoreEvent, EndSeed};
use crate::error::{ForkError, SessionError};
use crate::header::SessionHeader;
use crate::log::{SessionLog, now_ms};
use crate::persist::{SessionPersistence, SessionSummary};
use crate::session::{Session, SessionSink};
use crate::vocab::EventKind;

/// Options of [`Sessions::create`].
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    /// Exact id (`None`: a fresh `session-<uuid v7>`, which sorts by creation time).
    pub id: Option<String>,
    /// Absolute working directory.
    pub cwd: Option<String>,
    /// Parent session (subagent children).
    pub parent_session: Option<String>,
    /// `Some("subagent")` for subagent children.
    pub origin: Option<String>,
    /// 0 for top level.
    pub delegation_depth: u64,
    /// Composition preset id.
    pub agent_preset: Option<String>,
}

/// Options of [`Sessions::fork`].
#[derive(Debug, Clone, Default)]
pub struct ForkOptions {
    /// Inclusive seq of the last copied event. `None`: the latest completed turn (its
    /// `turn/end`); a boundary inside an open turn is refused.
    pub boundary: Option<u64>,
    /// The child's id (`None`: fresh). An existing id is refused.
    pub child_id: Option<String>,
    /// The child's cwd (`None`: the parent's).
    pub cwd: Option<String>,
    /// A subagent fork child (`origin:"subagent"`, parent depth + 1).
    pub subagent: bool,
}

/// A fresh session id: `session-<uuid v7>` (time-ordered, so ids sort by creation).
pub fn new_session_id() -> String {
    crate::ids::session_id()
}

/// The session service (kernel service `sessions`).
pub trait Sessions: Send + Sync + 'static {
    /// Creates a new session (nothing is stored before the first flush).
    fn create(&self, options: CreateOptions) -> Result<Arc<Session>, SessionError>;
    /// Opens a stored session for write (resume): admits the log, appends the crash-repair
    /// closers of an open last turn (format §15) and the untagged `session/end-seed {}` marker
    /// unless the log already ends in one. Returns the open session if this service has it.
    fn open(&self, id: &str) -> Result<Arc<Session>, SessionError>;
    /// Reads a session without opening it for write (the in-memory log if open here).
    fn read(&self, id: &str) -> Result<SessionLog, SessionError>;
    /// The session if it is open in this service.
    fn get(&self, id: &str) -> Option<Arc<Session>>;
    /// Whether a session with this id is open here or stored.
    fn exists(&self, id: &str) -> bool;
    /// Stored sessions, oldest first.
    fn list(&self) -> Result<Vec<SessionSummary>, SessionError>;
    /// The stored bytes, verbatim.
    fn export(&self, id: &str) -> Result<Vec<u8>, SessionError>;
    /// Forks `id` at a stable boundary into a new child session (format §12).
    fn fork(&self, id: &str, options: ForkOptions) -> Result<Arc<Session>, SessionError>;
    /// Flushes and releases the session (its handle refuses further appends).
    fn close(&self, id: &str) -> BoxFuture<'static, Result<(), SessionError>>;
    /// The session's own directory for artefacts (tool spill files), created on demand and
    /// removed with the session; `None` when the storage keeps none (in-memory sessions).
    fn artifact_dir(&self, id: &str) -> Result<Option<PathBuf>, SessionError> {
        let _ = id;
        Ok(None)
    }
    /// The cap on the total size of one session's artefacts; `None`: no cap.
    fn artifact_cap(&self) -> Option<u64> {
        None
    }
}

type Resolver = Box<dyn Fn() -> Option<Arc<dyn SessionPersistence>> + Send + Sync>;

/// The [`Sessions`] implementation.
pub struct SessionStore {
    persistence: Resolver,
    sink: Arc<dyn SessionSink>,
    open: Mutex<HashMap<String, Arc<Session>>>,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore").finish_non_exhaustive()
    }
}

impl SessionStore {
    /// A store with a fixed backend (or none: in-memory sessions) and a sink.
    pub fn new(
        persistence: Option<Arc<dyn SessionPersistence>>,
        sink: Arc<dyn SessionSink>,
    ) -> Self {
        Self::with_resolver(Box::new(move || persistence.clone()), sink)
    }

    /// A store that looks the backend up at each call (the kernel plugin's soft lookup).
    pub fn with_resolver(
        persistence: impl Fn() -> Option<Arc<dyn SessionPersistence>> + Send + Sync + 'static,
        sink: Arc<dyn SessionSink>,
    ) -> Self {
        SessionStore {
            persistence: Box::new(persistence),
            sink,
            open: Mutex::new(HashMap::new()),
        }
    }

    fn backend(&self) -> Option<Arc<dyn SessionPersistence>> {
        (self.persistence)()
    }

    fn register(&self, log: SessionLog) -> Arc<Session> {
        let session = Arc::new(Session::new(log, Arc::clone(&self.sink)));
        self.open
            .lock()
            .insert(session.id().to_string(), Arc::clone(&session));
        session
    }

    /// Closes every open session (shutdown).
    pub async fn close_all(&self) {
        let ids: Vec<String> = self.open.lock().keys().cloned().collect();
        for id in ids {
            if let Err(e) = self.close(&id).await {
                tracing::error!(session = %id, "closing failed: {e}");
            }
        }
    }
}

/// Whether the prefix `0..=b` ends inside an open turn.
fn inside_open_turn(log: &SessionLog, b: u64) -> bool {
    let mut open = false;
    for e in &log.events()[..=(b as usize)] {
        match e.event_kind() {
            EventKind::TurnStart => open = true,
            EventKind::TurnEnd => open = false,
            _ => {}
        }
    }
    open
}

impl Sessions for SessionStore {
    fn artifact_dir(&self, id: &str) -> Result<Option<PathBuf>, SessionError> {
        match (self.persistence)() {
            Some(p) => p.artifact_dir(id),
            None => Ok(None),
        }
    }

    fn artifact_cap(&self) -> Option<u64> {
        (self.persistence)().and_then(|p| p.artifact_cap())
    }

    fn create(&self, o: CreateOptions) -> Result<Arc<Session>, SessionError> {
        let id = o.id.unwrap_or_else(new_session_id);
        if id.is_empty() {
            return Err(SessionError::InvalidId(id));
        }
        if self.open.lock().contains_key(&id) {
            return Err(SessionError::Exists(id));
        }
        let header = SessionHeader {
            parent_session: o.parent_session,
            origin: o.origin,
            delegation_depth: o.delegation_depth,
            agent_preset: o.agent_preset,
            ..SessionHeader::new(id, now_ms(), o.cwd)
        };
        if let Some(p) = self.backend() {
            p.create(&header)?;
        }
        Ok(self.register(SessionLog::new(header)))
    }

    fn open(&self, id: &str) -> Result<Arc<Session>, SessionError> {
        if let Some(s) = self.open.lock().get(id) {
            return Ok(Arc::clone(s));
        }
        let p = self
            .backend()
            .ok_or_else(|| SessionError::NotFound(id.to_string()))?;
        let decoded = p.open_write(id)?;
        let log = match decoded.replay() {
            Ok(log) => {
                warn_unknown_types(id, &log);
                log
            }
            Err(e) => {
                let _ = p.close(id);
                return Err(e.into());
            }
        };
        let session = self.register(log);
        // Crash repair (§15), then the restored/live boundary (§12), exactly once.
        let closers = session.with_log(|l| l.closers(crate::CloseCause::Interrupted));
        session.append_all(closers)?;
        let ends_in_seed = session.with_log(|l| {
            l.last()
                .is_some_and(|e| matches!(e.core(), Some(CoreEvent::EndSeed(_))))
        });
        if !ends_in_seed {
            let time = session.with_log(|l| l.last().map(|e| e.time()));
            let mut marker = NewEvent::core(EndSeed::default());
            if let Some(t) = time {
                marker = marker.at(t.max(now_ms()));
            }
            session.append(marker)?;
        }
        Ok(session)
    }

    fn read(&self, id: &str) -> Result<SessionLog, SessionError> {
        if let Some(s) = self.open.lock().get(id) {
            return Ok(s.with_log(Clone::clone));
        }
        let p = self
            .backend()
            .ok_or_else(|| SessionError::NotFound(id.to_string()))?;
        let decoded = p.open_read(id)?;
        let log = decoded.replay()?;
        warn_unknown_types(id, &log);
        Ok(log)
    }

    fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.open.lock().get(id).cloned()
    }

    fn exists(&self, id: &str) -> bool {
        self.open.lock().contains_key(id) || self.backend().is_some_and(|p| p.exists(id))
    }

    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        match self.backend() {
            Some(p) => p.list(),
            None => Ok(Vec::new()),
        }
    }

    fn export(&self, id: &str) -> Result<Vec<u8>, SessionError> {
        self.backend()
            .ok_or_else(|| SessionError::NotFound(id.to_string()))?
            .export_raw(id)
    }

    fn fork(&self, id: &str, o: ForkOptions) -> Result<Arc<Session>, SessionError> {
        let source = self.read(id)?;
        let boundary = match o.boundary {
            Some(b) => {
                if b >= source.len() {
                    return Err(ForkError::BeyondLog {
                        boundary: b,
                        len: source.len(),
                    }
                    .into());
                }
                if inside_open_turn(&source, b) {
                    return Err(ForkError::InsideOpenTurn(b).into());
                }
                Some(b)
            }
            None => match source.last_turn_end() {
                Some(b) => Some(b),
                None if source.tracker().open_turn().is_some() || source.is_empty() => None,
                None => Some(source.len() - 1),
            },
        };
        let child_id = o.child_id.unwrap_or_else(new_session_id);
        let backend = self.backend();
        if self.open.lock().contains_key(&child_id)
            || backend.as_ref().is_some_and(|p| p.exists(&child_id))
        {
            return Err(SessionError::Exists(child_id));
        }
        let parent = source.header();
        let header = SessionHeader {
            version: crate::header::WRITE_VERSION,
            id: child_id,
            created_at: now_ms(),
            cwd: o.cwd.or_else(|| parent.cwd.clone()),
            parent_session: Some(parent.id.clone()),
            is_seeded: true,
            origin: o.subagent.then(|| "subagent".to_string()),
            delegation_depth: parent.delegation_depth + u64::from(o.subagent),
            agent_preset: parent.agent_preset.clone(),
        };
        let child = source.fork_seed(boundary, header)?;
        if let Some(p) = &backend {
            p.create(child.header())?;
        }
        let events = child.events().to_vec();
        let session = self.register(child);
        let sid: Arc<str> = Arc::from(session.id());
        for ev in &events {
            self.sink.event(&sid, ev);
        }
        Ok(session)
    }

    fn close(&self, id: &str) -> BoxFuture<'static, Result<(), SessionError>> {
        let session = self.open.lock().remove(id);
        let backend = self.backend();
        let id = id.to_string();
        Box::pin(async move {
            let mut result = Ok(());
            if let Some(s) = session {
                // An untouched new session stays unmaterialized (nothing on disk).
                if !s.is_empty() {
                    result = s.flush().await;
                }
                s.mark_closed();
            }
            if let Some(p) = backend {
                let closed = p.close(&id);
                if result.is_ok() {
                    result = closed;
                }
            }
            result
        })
    }
}

/// One warning naming the event types of a stored log that this reader does not know (a newer
/// writer's log-only types, admitted and kept verbatim; see `UnknownValue::EVENT_TYPE`).
fn warn_unknown_types(id: &str, log: &SessionLog) {
    let types = crate::UnknownValue::event_types(log.unknown_values());
    if !types.is_empty() {
        tracing::warn!(
            session = id,
            "session log has event types this dsh does not know (kept, not shown to the model): {}",
            types.join(", ")
        );
    }
}
