//! The events and the raw log of a session another host owns, read from the store as they
//! commit.
//!
//! A session this host serves, or one nobody serves, is the local client's stream as it is.
//! For one another live owner holds, the local client's stored stream (the committed events
//! after a seq, then a snapshot, then the end) is read in rounds: when a round ends, the tail
//! waits for a hint (the commit's `NOTIFY dsh_commits`) or the poll interval, and reads the
//! next round from the last seq it delivered, so every committed event is delivered once, in
//! seq order, with the seq of the log. It ends when no live owner holds the session and every
//! stored event was delivered (the session was closed, or its owner died and its lease
//! expired); when this host takes the session over, the next round is its live stream.
//!
//! The first round's snapshot says what the store knows (`working` while the last turn is
//! open, `waitingForApproval` while a logged approval request is unanswered, else `idle`);
//! later rounds' snapshots become a `state` event when the state changed. Live events of the
//! owner (text deltas, steers, questions to the user) do not cross hosts.

use std::sync::Arc;

use dsh_protocol::{
    ApprovalRequest, ErrorCode, Event, EventMsg, EventStream, LogRecord, LogStream, ProtocolError,
    SessionState,
};
use futures::StreamExt;
use tokio::sync::watch;

use super::Shared;
use super::signals::{self, Key};

fn storage(e: crate::PgStoreError) -> ProtocolError {
    ProtocolError::new(ErrorCode::StorageFailed, e.to_string())
}

/// What the committed events say the session is doing.
#[derive(Debug, Default)]
struct Derived {
    open_turn: bool,
    approvals: Vec<ApprovalRequest>,
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
        if !self.approvals.is_empty() {
            SessionState::WaitingForApproval
        } else if self.open_turn {
            SessionState::Working
        } else {
            SessionState::Idle
        }
    }
}

/// Where the tail stands between rounds.
enum Next {
    /// Read the next round (`mine`: this host serves the session now, the round is its live
    /// stream).
    Round { mine: bool },
    /// The session is done: end the stream.
    End,
}

/// Waits until there is something after `cursor` to read, or this host serves the session, or
/// nobody does and everything was read. `patience`: wait for one hint or poll first (the last
/// round brought nothing).
async fn next(
    shared: &Shared,
    id: &str,
    cursor: Option<u64>,
    rx: &mut watch::Receiver<u64>,
    mut patience: bool,
) -> Result<Next, ProtocolError> {
    loop {
        if patience {
            signals::wait(rx, shared.options.poll).await;
        }
        patience = true;
        rx.borrow_and_update();
        let Some(lease) = shared.lease(id).await.map_err(storage)? else {
            return Ok(Next::End);
        };
        let stored = u64::try_from(lease.next_seq).unwrap_or(0);
        let more = stored > 0 && cursor.is_none_or(|c| stored - 1 > c);
        let mine = lease.live && lease.owner.is_some() && lease.owner == shared.me();
        if more || mine {
            return Ok(Next::Round { mine });
        }
        if !lease.live {
            return Ok(Next::End);
        }
    }
}

struct Events {
    shared: Arc<Shared>,
    id: String,
    rx: watch::Receiver<u64>,
    inner: Option<EventStream>,
    /// The last committed seq delivered.
    cursor: Option<u64>,
    /// The current round brought a committed event.
    fresh: bool,
    snapshot_sent: bool,
    shown: Option<SessionState>,
    derived: Derived,
    /// A live stream of this host was followed: its end is the session's.
    live: bool,
    done: bool,
}

/// The session's events (see the module).
pub(crate) async fn events(
    shared: Arc<Shared>,
    id: String,
    after: Option<u64>,
) -> Result<EventStream, ProtocolError> {
    let rx = shared.signals.watch(Key::Session(id.clone()));
    let lease = shared.lease(&id).await.map_err(storage)?;
    let inner = shared.local.subscribe(&id, after).await?;
    if !lease.is_some_and(|l| shared.elsewhere(&l)) {
        return Ok(inner);
    }
    let st = Events {
        shared,
        id,
        rx,
        inner: Some(inner),
        cursor: after,
        fresh: true,
        snapshot_sent: false,
        shown: None,
        derived: Derived::default(),
        live: false,
        done: false,
    };
    Ok(futures::stream::unfold(st, step).boxed())
}

async fn step(mut st: Events) -> Option<(Event, Events)> {
    loop {
        if let Some(inner) = st.inner.as_mut() {
            match inner.next().await {
                Some(ev) => {
                    if let Some(out) = st.deliver(ev) {
                        return Some((out, st));
                    }
                    continue;
                }
                None => st.inner = None,
            }
        }
        if st.done || st.live {
            return None;
        }
        let patience = !st.fresh;
        match next(&st.shared, &st.id, st.cursor, &mut st.rx, patience).await {
            Ok(Next::End) => return None,
            Ok(Next::Round { .. }) => {}
            Err(e) => {
                st.done = true;
                return Some((Event::new(st.cursor.unwrap_or(0), EventMsg::Error(e)), st));
            }
        }
        st.fresh = false;
        match st.shared.local.subscribe(&st.id, st.cursor).await {
            Ok(s) => st.inner = Some(s),
            Err(e) => {
                st.done = true;
                return Some((Event::new(st.cursor.unwrap_or(0), EventMsg::Error(e)), st));
            }
        }
    }
}

impl Events {
    /// What to pass on of `ev` (`None`: nothing).
    fn deliver(&mut self, mut ev: Event) -> Option<Event> {
        match &mut ev.msg {
            EventMsg::Error(e) if e.code == ErrorCode::SubscriberLagged => {
                // The server resubscribes from its own position.
                self.done = true;
                self.inner = None;
                Some(ev)
            }
            EventMsg::Snapshot(snap) if snap.session.state != SessionState::Ended => {
                // This host serves the session now: its live stream from here on.
                self.live = true;
                self.snapshot_sent = true;
                Some(ev)
            }
            EventMsg::Snapshot(snap) => {
                self.derived.open_turn =
                    snap.session.turns > 0 && snap.session.last_turn_end.is_none();
                let state = self.derived.state();
                if !self.snapshot_sent {
                    self.snapshot_sent = true;
                    self.shown = Some(state);
                    snap.session.state = state;
                    snap.pending_approvals = self.derived.approvals.clone();
                    return Some(ev);
                }
                if self.shown == Some(state) {
                    return None;
                }
                self.shown = Some(state);
                Some(Event::new(ev.seq, EventMsg::State { state }))
            }
            _ => {
                if !ev.is_live() {
                    self.cursor = Some(ev.seq);
                    self.fresh = true;
                    self.derived.update(&ev.msg);
                }
                Some(ev)
            }
        }
    }
}

struct Records {
    shared: Arc<Shared>,
    id: String,
    rx: watch::Receiver<u64>,
    inner: Option<LogStream>,
    cursor: Option<u64>,
    fresh: bool,
    /// The current round is this host's live stream: its end is the session's.
    live: bool,
    done: bool,
}

/// The session's raw log records (see the module).
pub(crate) async fn records(
    shared: Arc<Shared>,
    id: String,
    after: Option<u64>,
) -> Result<LogStream, ProtocolError> {
    let rx = shared.signals.watch(Key::Session(id.clone()));
    let lease = shared.lease(&id).await.map_err(storage)?;
    let inner = shared.local.log(&id, after).await?;
    if !lease.is_some_and(|l| shared.elsewhere(&l)) {
        return Ok(inner);
    }
    let st = Records {
        shared,
        id,
        rx,
        inner: Some(inner),
        cursor: after,
        fresh: true,
        live: false,
        done: false,
    };
    Ok(futures::stream::unfold(st, step_records).boxed())
}

async fn step_records(mut st: Records) -> Option<(Result<LogRecord, ProtocolError>, Records)> {
    loop {
        if let Some(inner) = st.inner.as_mut() {
            match inner.next().await {
                Some(Ok(r)) => {
                    st.cursor = Some(r.seq);
                    st.fresh = true;
                    return Some((Ok(r), st));
                }
                Some(Err(e)) => {
                    st.done = true;
                    st.inner = None;
                    return Some((Err(e), st));
                }
                None => st.inner = None,
            }
        }
        if st.done || st.live {
            return None;
        }
        let patience = !st.fresh;
        match next(&st.shared, &st.id, st.cursor, &mut st.rx, patience).await {
            Ok(Next::End) => return None,
            Ok(Next::Round { mine }) => st.live = mine,
            Err(e) => {
                st.done = true;
                return Some((Err(e), st));
            }
        }
        st.fresh = false;
        match st.shared.local.log(&st.id, st.cursor).await {
            Ok(s) => st.inner = Some(s),
            Err(e) => {
                st.done = true;
                return Some((Err(e), st));
            }
        }
    }
}
