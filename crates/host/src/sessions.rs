//! Stored sessions: listing, summaries, replay of a log no process serves here, and fork
//! boundaries.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_catalog_api::{Catalog, Filter, SearchQuery};

use dsh_kernel::Ctx;
use dsh_protocol::{
    ErrorCode, Event, EventMsg, EventStream, ProtocolError, SearchMatch, SessionQuery,
    SessionState, SessionSummary, Snapshot,
};
use dsh_session::{CoreEvent, SessionHeader, Sessions};
use futures::StreamExt;

use crate::project::Projector;
use crate::{Inner, session_error};

fn sessions_service(root: &Ctx) -> Result<Arc<dyn Sessions>, ProtocolError> {
    root.get::<dyn Sessions>().ok_or_else(|| {
        ProtocolError::new(
            ErrorCode::Internal,
            "the composition mounts no sessions service",
        )
    })
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ProtocolError> + Send + 'static,
) -> Result<T, ProtocolError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        ProtocolError::new(ErrorCode::Internal, format!("a storage task failed: {e}"))
    })?
}

/// The seq of the `turn/end` closing turn `n - 1` (a fork before turn `n`).
pub(crate) fn turn_boundary(root: &Ctx, id: &str, n: u64) -> Result<u64, ProtocolError> {
    if n < 2 {
        return Err(ProtocolError::new(
            ErrorCode::InvalidRequest,
            "a fork keeps at least one turn: before_turn must be 2 or more (create a new \
             session instead)",
        ));
    }
    let sessions = sessions_service(root)?;
    let log = match sessions.get(id) {
        Some(s) => s.events(),
        None => sessions
            .read(id)
            .map_err(|e| session_error(&e))?
            .events()
            .to_vec(),
    };
    log.iter()
        .find_map(|e| match e.core() {
            Some(CoreEvent::TurnEnd(t)) if t.turn == n - 1 => Some(e.seq()),
            _ => None,
        })
        .ok_or_else(|| {
            ProtocolError::new(
                ErrorCode::InvalidRequest,
                format!("session `{id}` has no completed turn {}", n - 1),
            )
        })
}

fn stored(s: &dsh_session::persist::SessionSummary) -> SessionSummary {
    let updated_ms = std::fs::metadata(&s.path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(s.created_at, |d| {
            i64::try_from(d.as_millis()).unwrap_or(s.created_at)
        });
    SessionSummary {
        id: s.id.clone(),
        parent_id: s.parent_session.clone(),
        title: s.title.clone(),
        cwd: s.cwd.clone().unwrap_or_default(),
        created_ms: s.created_at,
        updated_ms,
        state: SessionState::Ended,
        ..Default::default()
    }
}

/// A catalogued session (its row is counted from the whole log).
fn catalogued(r: dsh_catalog_api::SessionRow) -> SessionSummary {
    SessionSummary {
        id: r.id,
        parent_id: r.parent,
        title: r.title,
        cwd: r.cwd,
        created_ms: r.created_ms,
        updated_ms: r.updated_ms,
        state: SessionState::Ended,
        turns: r.turns,
        last_seq: r.last_seq,
        first_prompt: (!r.first_prompt.is_empty()).then_some(r.first_prompt),
        last_turn_end: catalogued_end(&r.status),
        ..Default::default()
    }
}

/// The last turn's end of a catalogued status (`None`: no turn ended, or one is open).
fn catalogued_end(status: &str) -> Option<dsh_protocol::TurnEndReason> {
    use dsh_protocol::TurnEndReason as R;
    Some(match status {
        "open" | "-" | "unreadable" | "" => return None,
        "completed" => R::Completed,
        "aborted" => R::Aborted,
        "max-tokens" => R::MaxTokens,
        "blocked" => R::Blocked,
        "interrupted" => R::Interrupted,
        "forked" => R::Forked,
        "error" => R::Error {
            error: ProtocolError::new(ErrorCode::Internal, "the turn failed (see its log)"),
        },
        other => R::Other {
            kind: other.to_owned(),
        },
    })
}

/// The ids of the sessions whose text matches `q` in the catalog (`None`: no catalog, or it
/// failed).
fn catalog_matches(catalog: &dyn Catalog, q: &str) -> Option<HashMap<String, SearchMatch>> {
    let query = SearchQuery {
        text: q.to_owned(),
        filter: Filter {
            limit: Some(1_000),
            ..Default::default()
        },
    };
    match catalog.search(&query) {
        Ok(hits) => {
            // Best first: each session keeps its first hit.
            let mut best = HashMap::new();
            for h in hits {
                best.entry(h.session_id).or_insert_with(|| SearchMatch {
                    snippet: h.snippet,
                    highlights: h
                        .highlights
                        .into_iter()
                        .map(|(a, b)| (a as u64, b as u64))
                        .collect(),
                    turn: h.turn,
                    seq: h.seq,
                });
            }
            Some(best)
        }
        Err(e) => {
            tracing::warn!("the catalog search failed, matching titles only: {e}");
            None
        }
    }
}

/// Stored and open sessions, newest first. With a catalog mounted, stored sessions come from
/// it (no log is read) and `q` also matches their full text; without one, or when it fails,
/// from the logs' headers and `q` matches titles and ids.
pub(crate) async fn list(
    inner: &Inner,
    query: SessionQuery,
) -> Result<Vec<SessionSummary>, ProtocolError> {
    let sessions = sessions_service(&inner.root)?;
    let catalog = inner.root.get::<dyn Catalog>();
    let q = query.q.clone();
    let (mut all, matches): (Vec<SessionSummary>, Option<HashMap<String, SearchMatch>>) =
        blocking(move || {
            let Some(catalog) = catalog else {
                let list = sessions.list().map_err(|e| session_error(&e))?;
                return Ok((list.iter().map(stored).collect(), None));
            };
            let matches = q
                .as_deref()
                .and_then(|q| catalog_matches(catalog.as_ref(), q));
            match catalog.list(&Filter::default()) {
                Ok(rows) => Ok((rows.into_iter().map(catalogued).collect(), matches)),
                Err(e) => {
                    tracing::warn!("the catalog failed, listing the logs: {e}");
                    let list = sessions.list().map_err(|e| session_error(&e))?;
                    Ok((list.iter().map(stored).collect(), matches))
                }
            }
        })
        .await?;
    let open: Vec<SessionSummary> = inner
        .hubs
        .lock()
        .values()
        .map(|h| {
            let st = h.state.lock();
            h.summary(&st)
        })
        .collect();
    for s in open {
        match all.iter_mut().find(|a| a.id == s.id) {
            Some(a) => *a = s,
            None => all.push(s),
        }
    }
    if let Some(cwd) = &query.cwd {
        all.retain(|s| &s.cwd == cwd);
    }
    if let Some(q) = &query.q {
        let q = q.to_lowercase();
        all.retain(|s| {
            s.title
                .as_deref()
                .is_some_and(|t| t.to_lowercase().contains(&q))
                || s.id.contains(&q)
                || matches.as_ref().is_some_and(|m| m.contains_key(&s.id))
        });
        if let Some(m) = &matches {
            for s in &mut all {
                s.matched = m.get(&s.id).cloned();
            }
        }
    }
    all.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then(b.id.cmp(&a.id)));
    if let Some(limit) = query.limit {
        all.truncate(limit as usize);
    }
    Ok(all)
}

/// A stored session's summary, counted from its log.
pub(crate) async fn stored_summary(
    inner: &Inner,
    id: &str,
) -> Result<SessionSummary, ProtocolError> {
    let (summary, _) = read_stored(inner, id, None).await?;
    Ok(summary)
}

/// A stored session followed from outside its writer (another host writes it): the host's
/// projector kept between batches, so each batch of newly committed events is projected on its
/// own, never the log again from the start.
pub struct StoredView {
    projector: Projector,
    id: String,
    parent_id: Option<String>,
    header_cwd: Option<String>,
    created_ms: i64,
    /// The time of the latest event projected (the creation time before any).
    updated_ms: i64,
    last_seq: Option<u64>,
}

impl std::fmt::Debug for StoredView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredView")
            .field("id", &self.id)
            .field("last_seq", &self.last_seq)
            .finish_non_exhaustive()
    }
}

impl StoredView {
    pub(crate) fn new(projector: Projector, header: &SessionHeader) -> Self {
        StoredView {
            projector,
            id: header.id.clone(),
            parent_id: header.parent_session.clone(),
            header_cwd: header.cwd.clone(),
            created_ms: header.created_at,
            updated_ms: header.created_at,
            last_seq: None,
        }
    }

    /// The protocol events of the next committed event (in seq order).
    pub fn project(&mut self, ev: &dsh_session::Event) -> Vec<EventMsg> {
        self.last_seq = Some(ev.seq());
        self.updated_ms = self.updated_ms.max(ev.time());
        self.projector.project(ev)
    }

    /// The seq of the last event projected.
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// The session as the events projected so far show it (`state: ended`: no process serves
    /// it here; updated: the time of its latest event).
    pub fn summary(&self) -> SessionSummary {
        let p = &self.projector;
        SessionSummary {
            id: self.id.clone(),
            parent_id: self.parent_id.clone(),
            title: p.title.clone(),
            cwd: p
                .cwd
                .clone()
                .or_else(|| self.header_cwd.clone())
                .unwrap_or_default(),
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
            state: SessionState::Ended,
            turns: p.turns,
            last_seq: self.last_seq,
            settings: p.settings.clone(),
            usage: Some(p.total),
            subagent_usage: Some(p.subagents),
            first_prompt: p.first_prompt.clone(),
            last_turn_end: p.last_turn_end.clone(),
            matched: None,
        }
    }

    /// The snapshot of a stored stream (the summary, the usage so far).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            session: self.summary(),
            usage: self.projector.total,
            ..Default::default()
        }
    }
}

/// A [`StoredView`] of the session `header` describes, with no event projected yet.
pub(crate) fn view(inner: &Inner, header: &SessionHeader) -> StoredView {
    let fresh = inner.projector_factory(&header.id, String::new(), None);
    StoredView::new(fresh(), header)
}

async fn read_stored(
    inner: &Inner,
    id: &str,
    after: Option<u64>,
) -> Result<(SessionSummary, Vec<Event>), ProtocolError> {
    let sessions = sessions_service(&inner.root)?;
    let fresh = inner.projector_factory(id, String::new(), None);
    let id = id.to_owned();
    blocking(move || {
        let list = sessions.list().map_err(|e| session_error(&e))?;
        let log = sessions.read(&id).map_err(|e| session_error(&e))?;
        let mut view = StoredView::new(fresh(), log.header());
        let mut events = Vec::new();
        for e in log.events() {
            let msgs = view.project(e);
            if after.is_none_or(|a| e.seq() > a) {
                events.extend(msgs.into_iter().map(|m| Event::new(e.seq(), m)));
            }
        }
        let created = log.header().created_at;
        let base = list.iter().find(|s| s.id == id).map(stored);
        let mut summary = view.summary();
        summary.updated_ms = base.map_or(created, |b| b.updated_ms);
        Ok((summary, events))
    })
    .await
}

/// The events of a session no process serves here: its log, then a snapshot, then the end.
pub(crate) async fn stored_stream(
    inner: &Inner,
    id: &str,
    after: Option<u64>,
) -> Result<EventStream, ProtocolError> {
    let (summary, events) = read_stored(inner, id, after).await?;
    let seq = summary.last_seq.unwrap_or(0);
    let usage = summary.usage.unwrap_or_default();
    let tail = Event::new(
        seq,
        EventMsg::Snapshot(Box::new(Snapshot {
            session: summary,
            usage,
            ..Default::default()
        })),
    );
    Ok(futures::stream::iter(events)
        .chain(futures::stream::once(async move { tail }))
        .boxed())
}
