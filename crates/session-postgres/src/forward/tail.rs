//! The events and the raw log of a session another host owns, read from the store as they
//! commit.
//!
//! A session this host serves, or one nobody serves, is the local client's stream as it is.
//! For one another live owner holds, the tail reads what it has not read yet, in one statement
//! ([`sql::TAIL`]): the committed events after the last seq it read (`WHERE seq > $2`) and the
//! live events the owner published after the last one it read ([`super::relay`]). When a read
//! brings nothing, it waits for a hint (`NOTIFY dsh_commits`, sent by every commit batch, lease
//! release and published live event) or the poll interval, and looks at the lease only when a
//! read brought nothing. So every committed event is read once and delivered once, in seq
//! order, with the seq of the log; a batch costs one statement. It ends when no live owner
//! holds the session and every stored event was delivered (the session was closed, or its
//! owner died and its lease expired); when this host takes the session over, the rest is its
//! live stream.
//!
//! The event stream projects each committed event once with the host's projector, kept for the
//! whole watch ([`super::StoredProjection`]): the first read covers the log from its start (the
//! projector needs it; only the events after `after` are sent), every later one the new events
//! only. Its snapshot says what the store knows (`working` while the last turn is open,
//! `waitingForApproval` while a logged approval request or a published question is unanswered,
//! else `idle`; the published steers still queued); later changes become `state` events. Text
//! and reasoning deltas do not cross hosts.

use std::collections::VecDeque;
use std::sync::Arc;

use dsh_protocol::{
    ApprovalRequest, ErrorCode, Event, EventMsg, EventStream, LogRecord, LogStream, ProtocolError,
    SessionState,
};
use futures::StreamExt;
use tokio::sync::watch;

use super::relay::Pending;
use super::signals::{self, Key};
use super::{Shared, StoredProjection, col, sql};

/// The most committed events one read brings (a long log is read in pages).
const PAGE: i64 = 1_000;

fn storage(e: crate::PgStoreError) -> ProtocolError {
    ProtocolError::new(ErrorCode::StorageFailed, e.to_string())
}

fn corrupt(id: &str, seq: i64, e: impl std::fmt::Display) -> ProtocolError {
    ProtocolError::new(
        ErrorCode::SessionCorrupt,
        format!("event {seq} of session `{id}` in the store cannot be read: {e}"),
    )
}

/// What one read brought.
#[derive(Debug, Default)]
struct Rows {
    /// Committed events: `(seq, line)`.
    committed: Vec<(i64, String)>,
    /// Live events the owner published: `(the seq they follow, JSON)`.
    live: Vec<(i64, String)>,
}

/// Where a tail stands after a read that brought nothing.
enum Next {
    /// Rows to deliver.
    Rows(Rows),
    /// This host serves the session now: the rest is its live stream.
    Mine,
    /// No live owner and every stored event was read.
    End,
}

/// The reading side shared by the event and the log streams.
struct Tail {
    shared: Arc<Shared>,
    id: String,
    rx: watch::Receiver<u64>,
    /// The last committed seq read (-1: none).
    cursor: i64,
    /// The last live row read (`i64::MAX`: live rows are not wanted).
    live_cursor: i64,
    /// Read again at once (the last read brought a full page, or nothing was read yet).
    fresh: bool,
}

impl Tail {
    fn new(shared: Arc<Shared>, id: String, after: Option<u64>, live: bool) -> Self {
        let rx = shared.signals.watch(Key::Session(id.clone()));
        Tail {
            shared,
            id,
            rx,
            cursor: after.map_or(-1, |a| i64::try_from(a).unwrap_or(i64::MAX)),
            live_cursor: if live { 0 } else { i64::MAX },
            fresh: true,
        }
    }

    /// One read of what came after the cursors (moves them).
    async fn read(&mut self) -> Result<Rows, ProtocolError> {
        self.rx.borrow_and_update();
        let rows = self
            .shared
            .db
            .with("read a session's new events", |c| {
                let (id, after, live) = (self.id.clone(), self.cursor, self.live_cursor);
                async move {
                    c.client
                        .query(sql::TAIL, &[&id, &after, &PAGE, &live])
                        .await
                }
            })
            .await
            .map_err(storage)?;
        let mut out = Rows::default();
        let op = "read a session's new events";
        for r in rows {
            let src: i32 = col(&r, 0, op).map_err(storage)?;
            let n: i64 = col(&r, 1, op).map_err(storage)?;
            let text: String = col(&r, 2, op).map_err(storage)?;
            let at: i64 = col(&r, 3, op).map_err(storage)?;
            if src == 0 {
                self.cursor = n;
                out.committed.push((n, text));
            } else {
                self.live_cursor = n;
                out.live.push((at, text));
            }
        }
        self.fresh = out.committed.len() as i64 >= PAGE;
        Ok(out)
    }

    /// The next rows, waiting for them; or the session's end, or this host took it over.
    async fn next(&mut self) -> Result<Next, ProtocolError> {
        loop {
            if !self.fresh {
                signals::wait(&mut self.rx, self.shared.options.poll).await;
            }
            let rows = self.read().await?;
            if !rows.committed.is_empty() || !rows.live.is_empty() {
                return Ok(Next::Rows(rows));
            }
            let Some(lease) = self.shared.lease(&self.id).await.map_err(storage)? else {
                return Ok(Next::End);
            };
            if lease.next_seq - 1 > self.cursor {
                // Committed meanwhile: read again at once.
                self.fresh = true;
                continue;
            }
            if lease.live && lease.owner.is_some() && lease.owner == self.shared.me() {
                return Ok(Next::Mine);
            }
            if !lease.live {
                return Ok(Next::End);
            }
        }
    }
}

/// What the committed events and the published live events say the session is doing.
#[derive(Debug, Default)]
struct Derived {
    open_turn: bool,
    approvals: Vec<ApprovalRequest>,
    pending: Pending,
}

impl Derived {
    fn update(&mut self, msg: &EventMsg) {
        match msg {
            EventMsg::TurnStarted { .. } => self.open_turn = true,
            EventMsg::TurnEnded { .. } => {
                self.open_turn = false;
                self.approvals.clear();
            }
            EventMsg::ApprovalRequested(r) => self.approvals.push(r.clone()),
            EventMsg::ApprovalResolved { request_id, .. } => {
                self.approvals.retain(|a| &a.request_id != request_id);
            }
            _ => {}
        }
    }

    fn state(&self) -> SessionState {
        if !self.approvals.is_empty() || !self.pending.questions.is_empty() {
            SessionState::WaitingForApproval
        } else if self.open_turn {
            SessionState::Working
        } else {
            SessionState::Idle
        }
    }
}

struct Events {
    tail: Tail,
    /// Only the events after this seq are sent.
    after: Option<u64>,
    view: Box<dyn StoredProjection>,
    derived: Derived,
    /// The state last shown (`None`: the snapshot was not sent yet).
    shown: Option<SessionState>,
    ready: VecDeque<Event>,
    /// This host's live stream, once it serves the session.
    local: Option<EventStream>,
    done: bool,
}

/// The session's events (see the module).
pub(crate) async fn events(
    shared: Arc<Shared>,
    id: String,
    after: Option<u64>,
) -> Result<EventStream, ProtocolError> {
    let lease = shared.lease(&id).await.map_err(storage)?;
    if !lease.is_some_and(|l| shared.elsewhere(&l)) {
        return shared.local.subscribe(&id, after).await;
    }
    let row = shared
        .db
        .with("read a session's header", |c| {
            let id = id.clone();
            async move { c.client.query_opt(sql::HEADER, &[&id]).await }
        })
        .await
        .map_err(storage)?;
    let Some(row) = row else {
        return shared.local.subscribe(&id, after).await;
    };
    let op = "read a session's header";
    let line: String = col(&row, 0, op).map_err(storage)?;
    let header = serde_json::from_str(&line)
        .map_err(|e| corrupt(&id, -1, e))
        .and_then(|v| dsh_session::SessionHeader::from_json(&v).map_err(|e| corrupt(&id, -1, e)))?;
    let view = (shared.projections)(&header);
    let mut st = Events {
        // The projector needs the log from its start.
        tail: Tail::new(shared, id, None, true),
        after,
        view,
        derived: Derived::default(),
        shown: None,
        ready: VecDeque::new(),
        local: None,
        done: false,
    };
    st.start().await?;
    Ok(futures::stream::unfold(st, step).boxed())
}

impl Events {
    /// Reads the log so far (sending what comes after `after`) and the owner's published state,
    /// then the snapshot.
    async fn start(&mut self) -> Result<(), ProtocolError> {
        loop {
            let rows = self.tail.read().await?;
            let more = self.tail.fresh;
            self.take(rows, false)?;
            if !more {
                break;
            }
        }
        let seq = u64::try_from(self.tail.cursor).unwrap_or(0);
        let mut snap = self.view.snapshot();
        let state = self.derived.state();
        snap.session.state = state;
        snap.pending_approvals = self.derived.approvals.clone();
        snap.pending_questions = self.derived.pending.questions.clone();
        snap.queued_steers = self.derived.pending.steers.clone();
        self.shown = Some(state);
        self.ready
            .push_back(Event::new(seq, EventMsg::Snapshot(Box::new(snap))));
        Ok(())
    }

    /// Projects what a read brought, each live event after the committed event it follows;
    /// `send_live`: the live events are sent too (before the snapshot they are its state only).
    fn take(&mut self, rows: Rows, send_live: bool) -> Result<(), ProtocolError> {
        let mut live = rows.live.into_iter().peekable();
        for (seq, line) in rows.committed {
            while let Some((at, text)) = live.next_if(|(at, _)| *at < seq) {
                self.live(at, &text, send_live);
            }
            let useq = u64::try_from(seq).unwrap_or(0);
            let ev = dsh_session::Event::from_line(&line, useq)
                .map_err(|e| corrupt(&self.tail.id, seq, e))?;
            for msg in self.view.project(&ev) {
                self.derived.update(&msg);
                if self.after.is_none_or(|a| useq > a) {
                    self.ready.push_back(Event::new(useq, msg));
                }
            }
        }
        for (at, text) in live {
            self.live(at, &text, send_live);
        }
        if let Some(shown) = self.shown {
            let state = self.derived.state();
            if state != shown {
                self.shown = Some(state);
                let seq = u64::try_from(self.tail.cursor).unwrap_or(0);
                self.ready
                    .push_back(Event::new(seq, EventMsg::State { state }));
            }
        }
        Ok(())
    }

    /// One published live event (after committed event `at`).
    fn live(&mut self, at: i64, text: &str, send: bool) {
        let msg: EventMsg = match serde_json::from_str(text) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(session = %self.tail.id, "a published live event cannot be read: {e}");
                return;
            }
        };
        if self.derived.pending.update(&msg) && send {
            self.ready
                .push_back(Event::new(u64::try_from(at).unwrap_or(0), msg));
        }
    }

    fn fail(&mut self, e: ProtocolError) -> Event {
        self.done = true;
        Event::new(
            u64::try_from(self.tail.cursor).unwrap_or(0),
            EventMsg::Error(e),
        )
    }
}

async fn step(mut st: Events) -> Option<(Event, Events)> {
    loop {
        if let Some(ev) = st.ready.pop_front() {
            return Some((ev, st));
        }
        if let Some(local) = st.local.as_mut() {
            return local.next().await.map(|ev| (ev, st));
        }
        if st.done {
            return None;
        }
        match st.tail.next().await {
            Ok(Next::Rows(rows)) => {
                if let Err(e) = st.take(rows, true) {
                    let ev = st.fail(e);
                    return Some((ev, st));
                }
            }
            Ok(Next::Mine) => {
                let cursor = u64::try_from(st.tail.cursor).ok();
                match st.tail.shared.local.subscribe(&st.tail.id, cursor).await {
                    Ok(s) => st.local = Some(s),
                    Err(e) => {
                        let ev = st.fail(e);
                        return Some((ev, st));
                    }
                }
            }
            Ok(Next::End) => return None,
            Err(e) => {
                let ev = st.fail(e);
                return Some((ev, st));
            }
        }
    }
}

struct Records {
    tail: Tail,
    ready: VecDeque<LogRecord>,
    local: Option<LogStream>,
    done: bool,
}

/// The session's raw log records (see the module).
pub(crate) async fn records(
    shared: Arc<Shared>,
    id: String,
    after: Option<u64>,
) -> Result<LogStream, ProtocolError> {
    let lease = shared.lease(&id).await.map_err(storage)?;
    if !lease.is_some_and(|l| shared.elsewhere(&l)) {
        return shared.local.log(&id, after).await;
    }
    let st = Records {
        tail: Tail::new(shared, id, after, false),
        ready: VecDeque::new(),
        local: None,
        done: false,
    };
    Ok(futures::stream::unfold(st, step_records).boxed())
}

async fn step_records(mut st: Records) -> Option<(Result<LogRecord, ProtocolError>, Records)> {
    loop {
        if let Some(r) = st.ready.pop_front() {
            return Some((Ok(r), st));
        }
        if let Some(local) = st.local.as_mut() {
            return local.next().await.map(|r| (r, st));
        }
        if st.done {
            return None;
        }
        let next = match st.tail.next().await {
            Ok(Next::Rows(rows)) => {
                st.ready
                    .extend(rows.committed.into_iter().map(|(seq, line)| LogRecord {
                        seq: u64::try_from(seq).unwrap_or(0),
                        line: line.into(),
                    }));
                continue;
            }
            Ok(Next::Mine) => {
                let cursor = u64::try_from(st.tail.cursor).ok();
                st.tail.shared.local.log(&st.tail.id, cursor).await
            }
            Ok(Next::End) => return None,
            Err(e) => Err(e),
        };
        match next {
            Ok(s) => st.local = Some(s),
            Err(e) => {
                st.done = true;
                return Some((Err(e), st));
            }
        }
    }
}
