//! A session's events as Server-Sent Events, with resumable ids.
//!
//! One committed log event may project into several protocol events (an assistant message
//! and its usage), all with the log event's seq. The SSE `id:` of the first is the seq (`42`);
//! the next ones of the same seq are `42.1`, `42.2`, ... A reconnect with `Last-Event-ID: 42.1`
//! resumes inside the group: nothing lost when a connection drops between two events of one
//! seq, nothing repeated. Live events (deltas, state, the snapshot) repeat the id of the last
//! committed event of the connection (none before the first one): they are not replayed, the
//! snapshot a reconnect starts with carries the live state again.

use std::sync::Arc;

use dsh_protocol::{Client, ErrorCode, Event, EventMsg, EventStream, ProtocolError};
use futures::StreamExt;
use futures::stream::BoxStream;

/// A position in a session's committed events: every event of the seqs before `seq`, and the
/// first `count` events of `seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// The seq of the last committed event delivered.
    pub seq: u64,
    /// How many events of that seq were delivered (at least 1).
    pub count: u32,
}

impl Cursor {
    /// The SSE id: `seq` for the first event of a seq, `seq.k` for the k-th next one.
    pub fn id(self) -> String {
        if self.count <= 1 {
            self.seq.to_string()
        } else {
            format!("{}.{}", self.seq, self.count - 1)
        }
    }

    /// Reads an SSE id (`Last-Event-ID`).
    pub fn parse(id: &str) -> Option<Cursor> {
        let id = id.trim();
        let (seq, k) = match id.split_once('.') {
            Some((s, k)) => (s, k.parse::<u32>().ok()?),
            None => (id, 0),
        };
        Some(Cursor {
            seq: seq.parse().ok()?,
            count: k.checked_add(1)?,
        })
    }

    /// The position after one more committed event at `seq`.
    fn advance(cur: Option<Cursor>, seq: u64) -> Cursor {
        match cur {
            Some(c) if c.seq == seq => Cursor {
                seq,
                count: c.count.saturating_add(1),
            },
            _ => Cursor { seq, count: 1 },
        }
    }
}

/// Where a subscription starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Every committed event after this seq (`?after=`), or all of them.
    After(Option<u64>),
    /// Right after this position (`Last-Event-ID`).
    At(Cursor),
}

impl Start {
    /// The `after` to ask the client for, and how many events of which seq to skip.
    fn plan(self) -> (Option<u64>, Option<Cursor>) {
        match self {
            Start::After(a) => (a, None),
            Start::At(c) => (c.seq.checked_sub(1), Some(c)),
        }
    }
}

/// One event with its SSE id.
#[derive(Clone, Debug)]
pub struct Positioned {
    /// The id (`None`: no committed event delivered yet on this stream).
    pub id: Option<String>,
    /// The event.
    pub event: Event,
}

struct State {
    client: Arc<dyn Client>,
    session: String,
    inner: EventStream,
    /// The last position delivered.
    cursor: Option<Cursor>,
    /// Events of this seq still to skip (a resume inside a group).
    skip: Option<Cursor>,
}

/// The session's events from `start`, positioned. A subscriber the host cuts off for lagging
/// resubscribes from its cursor here, so an SSE client never sees the lag.
pub async fn positioned(
    client: Arc<dyn Client>,
    session: &str,
    start: Start,
) -> Result<BoxStream<'static, Positioned>, ProtocolError> {
    let (after, skip) = start.plan();
    let inner = client.subscribe(session, after).await?;
    let state = State {
        client,
        session: session.to_owned(),
        inner,
        cursor: match start {
            Start::At(c) => Some(c),
            Start::After(_) => None,
        },
        skip,
    };
    Ok(futures::stream::unfold(state, step).boxed())
}

/// How much of the committed history a subscription replays (`?tailTurns=`, `?before=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tail {
    /// Only the last this many turns (from the `turnStarted` of the first of them); all when
    /// `None`.
    pub turns: Option<u32>,
    /// Only events with a smaller seq, and the stream ends after them (no snapshot, no live
    /// events): a page of earlier turns.
    pub before: Option<u64>,
}

/// The session's last `tail.turns` turns of committed events (positioned as in a full replay,
/// so a reconnect with `Last-Event-ID` continues with no gap and no repeat), then the snapshot
/// and live events; or, with `tail.before`, a finite page of the turns before that seq.
///
/// The host replays the whole session to project it; the cut is made here, once the replay
/// reached the snapshot, so only the tail is serialised and sent.
pub async fn tail(
    client: Arc<dyn Client>,
    session: &str,
    tail: Tail,
) -> Result<BoxStream<'static, Positioned>, ProtocolError> {
    let mut inner = client.subscribe(session, None).await?;
    let mut replay = Vec::new();
    let mut snapshot = None;
    while let Some(event) = inner.next().await {
        if matches!(event.msg, EventMsg::Snapshot(_)) {
            snapshot = Some(event);
            break;
        }
        replay.push(event);
    }
    // Positions as a full replay gives them; live events carry the last committed one.
    let mut cursor = None;
    let mut positioned_replay = Vec::with_capacity(replay.len());
    for event in replay {
        if tail.before.is_some_and(|b| event.seq >= b) {
            break;
        }
        let id = if event.is_live() {
            cursor.map(Cursor::id)
        } else {
            let c = Cursor::advance(cursor, event.seq);
            cursor = Some(c);
            Some(c.id())
        };
        positioned_replay.push(Positioned { id, event });
    }
    let cut = match tail.turns {
        None => 0,
        Some(n) => {
            let starts: Vec<usize> = positioned_replay
                .iter()
                .enumerate()
                .filter(|(_, p)| matches!(p.event.msg, EventMsg::TurnStarted { .. }))
                .map(|(i, _)| i)
                .collect();
            let n = n as usize;
            if starts.len() > n {
                starts[starts.len() - n]
            } else {
                0
            }
        }
    };
    let kept = positioned_replay.split_off(cut);
    let head = futures::stream::iter(kept);
    if tail.before.is_some() {
        return Ok(head.boxed());
    }
    let Some(snapshot) = snapshot else {
        return Ok(head.boxed());
    };
    let snapshot = Positioned {
        id: cursor.map(Cursor::id),
        event: snapshot,
    };
    let state = State {
        client,
        session: session.to_owned(),
        inner,
        cursor,
        skip: None,
    };
    Ok(head
        .chain(futures::stream::once(async move { snapshot }))
        .chain(futures::stream::unfold(state, step))
        .boxed())
}

async fn step(mut st: State) -> Option<(Positioned, State)> {
    loop {
        let event = st.inner.next().await?;
        if let EventMsg::Error(e) = &event.msg
            && e.code == ErrorCode::SubscriberLagged
        {
            // Continue from the log after what was delivered.
            let (after, skip) = match st.cursor {
                Some(c) => Start::At(c).plan(),
                None => (None, None),
            };
            tracing::debug!(session = %st.session, "subscriber lagged; resubscribing");
            match st.client.subscribe(&st.session, after).await {
                Ok(s) => {
                    st.inner = s;
                    st.skip = skip;
                    continue;
                }
                Err(_) => return Some((Positioned { id: None, event }, st)),
            }
        }
        if event.is_live() {
            let id = st.cursor.map(Cursor::id);
            return Some((Positioned { id, event }, st));
        }
        if let Some(skip) = &mut st.skip {
            if event.seq == skip.seq && skip.count > 0 {
                skip.count -= 1;
                continue;
            }
            st.skip = None;
        }
        let cursor = Cursor::advance(st.cursor, event.seq);
        st.cursor = Some(cursor);
        return Some((
            Positioned {
                id: Some(cursor.id()),
                event,
            },
            st,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::Cursor;

    #[test]
    fn ids_round_trip() {
        let c = Cursor { seq: 42, count: 1 };
        assert_eq!(c.id(), "42");
        assert_eq!(Cursor::parse("42"), Some(c));
        let c = Cursor { seq: 42, count: 3 };
        assert_eq!(c.id(), "42.2");
        assert_eq!(Cursor::parse("42.2"), Some(c));
        assert_eq!(Cursor::parse("x"), None);
        assert_eq!(Cursor::parse("1.x"), None);
        assert_eq!(Cursor::parse(""), None);
    }
}
