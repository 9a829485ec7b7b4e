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
