//! The notifications of the sessions the server drives, from the protocol client:
//!
//! - `session.event`: each committed record of the session's raw log ([`Client::log`]), its
//!   exact line; for a sub-agent, of the child's log from its first record.
//! - `session.status`: the session's live `state` events (`working` and
//!   `waiting-for-approval` are `running`, `idle` is `idle`), each written only once the log
//!   records before it are, so a `turn/end` precedes the `idle` that follows it.
//! - `subagent.started` / `subagent.finished`: the protocol's `subagentStarted` /
//!   `subagentFinished`; the child's log is followed from `started` on, and `finished` waits
//!   for the child's `turn/end` so its last assistant message is known and its events come
//!   first.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_protocol::{Client, EventMsg, RunStatus, SessionState, SubagentMode};
use futures::StreamExt;
use parking_lot::Mutex;
use serde::Deserialize;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::output::Out;
use crate::protocol::{SubagentFinishedParams, SubagentStartedParams, SubagentStatus, WireStatus};

/// What a followed log has shown so far.
#[derive(Clone, Debug, Default)]
struct Seen {
    /// The last record's seq.
    seq: Option<u64>,
    /// `turn/end` records seen.
    turn_ends: u64,
    /// The text of the last `assistant/message`.
    last_text: Option<String>,
}

/// The head of a log line: its type, and for an assistant message its text blocks.
#[derive(Deserialize)]
struct Row {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Option<RowData>,
}

#[derive(Deserialize)]
struct RowData {
    #[serde(default)]
    message: Option<RowMessage>,
}

#[derive(Deserialize)]
struct RowMessage {
    #[serde(default)]
    content: Vec<RowBlock>,
}

#[derive(Deserialize)]
struct RowBlock {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

/// Every session the server streams.
#[derive(Clone)]
pub(crate) struct Streams {
    client: Arc<dyn Client>,
    tx: mpsc::UnboundedSender<Out>,
    logs: Arc<Mutex<HashMap<String, watch::Receiver<Seen>>>>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Streams {
    pub(crate) fn new(client: Arc<dyn Client>, tx: mpsc::UnboundedSender<Out>) -> Self {
        Streams {
            client,
            tx,
            logs: Arc::default(),
            tasks: Arc::default(),
        }
    }

    /// Follows a session the server drives: its log after `after` (from the start with
    /// `None`), its state and its sub-agents from `state_after` on. Returns the log task (it
    /// ends once the session is closed and its last record written).
    pub(crate) async fn drive(
        &self,
        id: &str,
        after: Option<u64>,
        state_after: Option<u64>,
    ) -> Result<JoinHandle<()>, dsh_protocol::ProtocolError> {
        let log = self.follow_log(id, after, false).await?;
        let events = self.client.subscribe(id, state_after).await?;
        let me = self.clone();
        let id = id.to_owned();
        let control = tokio::spawn(async move { me.control(id, events).await });
        self.tasks.lock().push(control);
        Ok(log)
    }

    /// Forwards `id`'s log records after `after` as `session.event` (reading each record's
    /// type and assistant text with `rows`: a sub-agent's).
    async fn follow_log(
        &self,
        id: &str,
        after: Option<u64>,
        rows: bool,
    ) -> Result<JoinHandle<()>, dsh_protocol::ProtocolError> {
        let seen = Seen {
            seq: after,
            ..Seen::default()
        };
        self.follow_log_from(id, seen, rows).await
    }

    /// Forwards `id`'s log records after `seen.seq`, counting on from `seen`.
    async fn follow_log_from(
        &self,
        id: &str,
        seen: Seen,
        rows: bool,
    ) -> Result<JoinHandle<()>, dsh_protocol::ProtocolError> {
        let mut stream = self.client.log(id, seen.seq).await?;
        let (seen_tx, seen_rx) = watch::channel(seen);
        self.logs.lock().insert(id.to_owned(), seen_rx);
        let tx = self.tx.clone();
        let sid: Arc<str> = Arc::from(id);
        Ok(tokio::spawn(async move {
            while let Some(record) = stream.next().await {
                match record {
                    Ok(r) => {
                        let row = if rows {
                            serde_json::from_str::<Row>(&r.line).ok()
                        } else {
                            None
                        };
                        let _ = tx.send(Out::Event(sid.clone(), r.line));
                        seen_tx.send_modify(|s| {
                            s.seq = Some(r.seq);
                            if let Some(row) = row {
                                note(s, row);
                            }
                        });
                    }
                    Err(error) => {
                        tracing::warn!(session = %sid, %error, "the session's log stream failed");
                        break;
                    }
                }
            }
        }))
    }

    /// Resolves once `id`'s followed log has passed `until` (or ended).
    async fn reached(&self, id: &str, until: impl Fn(&Seen) -> bool) {
        let rx = self.logs.lock().get(id).cloned();
        if let Some(mut rx) = rx {
            let _ = rx.wait_for(until).await;
        }
    }

    fn notify<T: serde::Serialize>(&self, method: &str, params: &T) {
        crate::server::notification(&self.tx, method, params);
    }

    /// A driven session's states and sub-agents.
    async fn control(self, id: String, mut events: dsh_protocol::EventStream) {
        let sid: Arc<str> = Arc::from(id.as_str());
        let mut last: Option<WireStatus> = None;
        let mut modes: HashMap<String, &'static str> = HashMap::new();
        while let Some(ev) = events.next().await {
            match ev.msg {
                EventMsg::State { state } => {
                    let wire = match state {
                        SessionState::Idle => WireStatus::Idle,
                        SessionState::Working | SessionState::WaitingForApproval => {
                            WireStatus::Running
                        }
                        SessionState::Ended => continue,
                    };
                    if last == Some(wire) {
                        continue;
                    }
                    last = Some(wire);
                    let seq = ev.seq;
                    self.reached(&id, |s| s.seq.is_some_and(|s| s >= seq)).await;
                    let _ = self.tx.send(Out::Status(sid.clone(), wire));
                }
                EventMsg::SubagentStarted {
                    session_id: child,
                    label,
                    mode,
                    ..
                } => {
                    let provider = match mode {
                        Some(SubagentMode::Fork) => "fork",
                        Some(SubagentMode::Spawn) | None => "spawn",
                    };
                    modes.insert(child.clone(), provider);
                    self.notify(
                        "subagent.started",
                        &SubagentStartedParams {
                            parent_session_id: id.clone(),
                            child_session_id: child.clone(),
                            label,
                            mode: "one-shot",
                            provider,
                        },
                    );
                    match self.follow_log(&child, None, true).await {
                        Ok(task) => self.tasks.lock().push(task),
                        // Retried when it finishes.
                        Err(error) => {
                            tracing::debug!(%child, %error, "cannot follow a sub-agent's log yet");
                        }
                    }
                }
                EventMsg::SubagentFinished {
                    session_id: child,
                    status,
                    ..
                } => {
                    // The child's run ended with its turn: its events and last message first.
                    // Should its log not have been followable at the start (or have ended
                    // early), follow it now from where that stopped.
                    let tap = self.logs.lock().get(&child).cloned();
                    let stale = match &tap {
                        None => Some(Seen::default()),
                        Some(rx) if rx.has_changed().is_err() && rx.borrow().turn_ends == 0 => {
                            Some(rx.borrow().clone())
                        }
                        Some(_) => None,
                    };
                    if let Some(seen) = stale {
                        match self.follow_log_from(&child, seen, true).await {
                            Ok(task) => self.tasks.lock().push(task),
                            Err(error) => {
                                tracing::warn!(%child, %error, "cannot follow a sub-agent's log");
                            }
                        }
                    }
                    self.reached(&child, |s| s.turn_ends > 0).await;
                    let last_text = self
                        .logs
                        .lock()
                        .get(&child)
                        .and_then(|rx| rx.borrow().last_text.clone());
                    let (wire, stop_reason) = match status {
                        RunStatus::Completed => (SubagentStatus::Ok, "completed"),
                        RunStatus::Cancelled => (SubagentStatus::Error, "aborted"),
                        RunStatus::Failed => (SubagentStatus::Error, "error"),
                    };
                    self.notify(
                        "subagent.finished",
                        &SubagentFinishedParams {
                            provider: modes.get(&child).copied().unwrap_or("spawn"),
                            agent_id: child.clone(),
                            parent_session_id: id.clone(),
                            child_session_id: child,
                            status: wire,
                            stop_reason,
                            last_assistant_message: last_text.filter(|t| !t.is_empty()),
                        },
                    );
                }
                EventMsg::Error(e) => {
                    tracing::warn!(session = %id, error = %e.message, "the session's event stream failed");
                    break;
                }
                _ => {}
            }
        }
    }

    /// Stops whatever still follows a session (after the driven ones were closed and their
    /// logs written).
    pub(crate) fn abort_rest(&self) {
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
    }
}

fn note(s: &mut Seen, row: Row) {
    match row.kind.as_str() {
        "turn/end" => s.turn_ends += 1,
        "assistant/message" => {
            let text: String = row
                .data
                .and_then(|d| d.message)
                .map(|m| {
                    m.content
                        .into_iter()
                        .filter(|b| b.kind == "text")
                        .filter_map(|b| b.text)
                        .collect()
                })
                .unwrap_or_default();
            s.last_text = Some(text);
        }
        _ => {}
    }
}
