//! One session's events rendered for the client: its history on `session/load` (what the user
//! typed, committed answers and reasoning, tool cards, the task list), then its live events
//! (deltas, tool cards, plans, title, permission requests) until the session closes. A
//! subscriber that fell behind subscribes again from the last committed event it saw.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, Cost, SessionInfoUpdate, SessionUpdate, UsageUpdate,
};
use dsh_protocol::{
    Client as Host, ErrorCode, Event, EventMsg, EventStream, MessageSource, ProtocolError,
    TurnEndReason,
};
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::notify;
use crate::updates::{self, Cards, Failure, text_chunk};

/// The turn a prompt waits for: the first `turnEnded` committed after `after`, answered once the
/// session is idle again (its log flushed: the turn is stored when the prompt answers).
struct Waiter {
    after: Option<u64>,
    reply: oneshot::Sender<TurnEndReason>,
    ended: Option<TurnEndReason>,
}

/// The prompt waiting for its turn's end, if any.
#[derive(Default)]
pub(crate) struct Turns {
    waiter: Mutex<Option<Waiter>>,
}

impl Turns {
    /// Waits for the first turn to end after log position `after` (`None`: an empty log).
    pub(crate) fn expect(&self, after: Option<u64>) -> oneshot::Receiver<TurnEndReason> {
        let (reply, rx) = oneshot::channel();
        *self.waiter.lock() = Some(Waiter {
            after,
            reply,
            ended: None,
        });
        rx
    }

    /// Stops waiting (the op started no turn).
    pub(crate) fn clear(&self) {
        self.waiter.lock().take();
    }

    fn ended(&self, seq: u64, reason: &TurnEndReason) {
        if let Some(w) = self.waiter.lock().as_mut()
            && w.ended.is_none()
            && w.after.is_none_or(|a| seq > a)
        {
            w.ended = Some(reason.clone());
        }
    }

    /// The session is idle: a turn that ended answers its prompt.
    fn idle(&self) {
        let mut w = self.waiter.lock();
        if w.as_ref().is_some_and(|w| w.ended.is_some())
            && let Some(Waiter {
                reply,
                ended: Some(reason),
                ..
            }) = w.take()
        {
            let _ = reply.send(reason);
        }
    }

    /// The session closed: a turn that ended answers, any other wait ends without a reason.
    fn closed(&self) {
        self.idle();
        self.clear();
    }
}

/// Renders one session's events on the connection.
pub(crate) struct Renderer {
    connection: ConnectionTo<Client>,
    host: Arc<dyn Host>,
    /// The ACP session (what the client is told).
    id: String,
    /// The host's session rendered (the ACP session's own, or the fork a rewind continues it
    /// in).
    target: String,
    cards: Cards,
    turns: Arc<Turns>,
    /// The last committed event seen (a new subscription continues after it).
    last_seq: Option<u64>,
    /// A turn is running (live), or the history is being replayed: a new title waits in
    /// `title` until it ends, so a turn's first update is its own output.
    busy: bool,
    title: Option<String>,
    /// The model's context window (`usage_update` needs it), from the session's settings.
    window: Option<u64>,
    /// The latest usage (context tokens, the session's totals), sent once the history is in.
    usage: Option<(u64, dsh_protocol::Usage)>,
    /// Approval and question requests already put to the client.
    asked: HashSet<String>,
}

impl Renderer {
    pub(crate) fn new(
        connection: ConnectionTo<Client>,
        host: Arc<dyn Host>,
        (id, target): (String, String),
        cwd: PathBuf,
        turns: Arc<Turns>,
    ) -> Self {
        Renderer {
            connection,
            host,
            id,
            target,
            cards: Cards::new(cwd),
            turns,
            last_seq: None,
            busy: true,
            title: None,
            window: None,
            usage: None,
            asked: HashSet::new(),
        }
    }

    fn send(&self, update: SessionUpdate) {
        notify(&self.connection, &self.id, update);
    }

    /// Subscribes from the start and renders the history up to the live state; returns the
    /// stream of live events.
    pub(crate) async fn replay(&mut self) -> Result<EventStream, ProtocolError> {
        self.catch_up_to_live(true).await
    }

    /// Subscribes from the start and renders nothing of the history (the client shows it
    /// already: a rewind's fork holds a prefix of it); returns the stream of live events.
    pub(crate) async fn skip_history(&mut self) -> Result<EventStream, ProtocolError> {
        self.catch_up_to_live(false).await
    }

    async fn catch_up_to_live(&mut self, render: bool) -> Result<EventStream, ProtocolError> {
        let mut stream = self.host.subscribe(&self.target, None).await?;
        while let Some(ev) = stream.next().await {
            if let EventMsg::Snapshot(s) = &ev.msg {
                self.busy = false;
                self.flush_title();
                self.window = s.session.settings.context_window.or(self.window);
                if let Some((used, total)) = self.usage.take() {
                    self.send_usage(used, &total);
                }
                if matches!(
                    s.session.state,
                    dsh_protocol::SessionState::Working
                        | dsh_protocol::SessionState::WaitingForApproval
                ) {
                    self.busy = true;
                }
                return Ok(stream);
            }
            if render {
                self.history(&ev);
            } else {
                self.committed(&ev);
            }
        }
        Err(ProtocolError::new(
            ErrorCode::SessionEnded,
            format!("session {} closed while it was being opened", self.target),
        ))
    }

    /// Renders live events until the session closes.
    pub(crate) async fn forward(mut self, mut stream: EventStream) {
        loop {
            let mut lagged = false;
            while let Some(ev) = stream.next().await {
                if let EventMsg::Error(e) = &ev.msg
                    && e.code == ErrorCode::SubscriberLagged
                {
                    tracing::warn!(session = %self.id, "fell behind the session; catching up from its log");
                    lagged = true;
                    break;
                }
                self.live(&ev);
            }
            if !lagged {
                break;
            }
            // Continue after the last committed event seen: the committed events missed are
            // rendered as history (their deltas are gone), up to the live state.
            let Ok(s) = self.host.subscribe(&self.target, self.last_seq).await else {
                break;
            };
            stream = s;
            while let Some(ev) = stream.next().await {
                if let EventMsg::Snapshot(s) = &ev.msg {
                    // Requests opened while this subscriber was behind are still waiting.
                    for a in &s.pending_approvals {
                        self.ask_approval(a);
                    }
                    for q in &s.pending_questions {
                        self.ask_questions(q);
                    }
                    if s.session.state == dsh_protocol::SessionState::Idle {
                        self.turns.idle();
                    }
                    break;
                }
                self.catch_up(&ev);
            }
        }
        // Closed in the host: a prompt still waiting learns that its turn did not end.
        self.turns.closed();
    }

    fn committed(&mut self, ev: &Event) {
        if !ev.is_live() {
            self.last_seq = Some(ev.seq);
        }
    }

    /// An event of the stored history (`session/load`).
    fn history(&mut self, ev: &Event) {
        self.committed(ev);
        match &ev.msg {
            // What the user typed; plugin context (runtime-context snapshots) is not.
            EventMsg::UserMessage {
                text,
                source: MessageSource::User,
                ..
            } if !text.is_empty() => self.send(SessionUpdate::UserMessageChunk(text_chunk(text))),
            EventMsg::AssistantMessage {
                text, reasoning, ..
            } => self.answer(text, reasoning.as_deref()),
            EventMsg::UsageUpdated {
                total,
                context_tokens,
                ..
            } => self.usage = Some((*context_tokens, *total)),
            // A session a rewind forked: where it continues (`session/load` it to go on there).
            EventMsg::SessionForked {
                session_id,
                to_turn,
                ..
            } => {
                let to = to_turn
                    .map(|t| format!(" (rewound to before turn {t})"))
                    .unwrap_or_default();
                self.send(SessionUpdate::AgentMessageChunk(text_chunk(&format!(
                    "\n\n↪ continued in session {session_id}{to}\n"
                ))));
            }
            _ => self.common(ev),
        }
    }

    /// A committed event missed live (after a lag): the answers whose deltas were lost.
    fn catch_up(&mut self, ev: &Event) {
        self.committed(ev);
        match &ev.msg {
            EventMsg::AssistantMessage {
                text, reasoning, ..
            } => self.answer(text, reasoning.as_deref()),
            EventMsg::TurnStarted { .. } => self.busy = true,
            EventMsg::TurnEnded { reason, .. } => self.turn_ended(ev.seq, reason),
            _ => self.common(ev),
        }
    }

    /// A turn ended: the title it set is sent, then the prompt waiting for it answers.
    fn turn_ended(&mut self, seq: u64, reason: &TurnEndReason) {
        self.busy = false;
        self.flush_title();
        self.turns.ended(seq, reason);
    }

    fn answer(&self, text: &str, reasoning: Option<&str>) {
        if let Some(r) = reasoning.filter(|r| !r.is_empty()) {
            self.send(SessionUpdate::AgentThoughtChunk(text_chunk(r)));
        }
        if !text.is_empty() {
            self.send(SessionUpdate::AgentMessageChunk(text_chunk(text)));
        }
    }

    /// A live event.
    fn live(&mut self, ev: &Event) {
        self.committed(ev);
        match &ev.msg {
            EventMsg::TextDelta { text } if !text.is_empty() => {
                self.send(SessionUpdate::AgentMessageChunk(text_chunk(text)));
            }
            EventMsg::ReasoningDelta { text } if !text.is_empty() => {
                self.send(SessionUpdate::AgentThoughtChunk(text_chunk(text)));
            }
            EventMsg::ToolCallProgress { call_id, output } => {
                if let Some(u) = self.cards.progress(call_id, output) {
                    self.send(u);
                }
            }
            EventMsg::ApprovalRequested(request) => self.ask_approval(request),
            EventMsg::QuestionAsked(request) => self.ask_questions(request),
            EventMsg::ApprovalResolved { request_id, .. }
            | EventMsg::QuestionAnswered { request_id, .. } => {
                self.asked.remove(request_id);
            }
            EventMsg::TurnStarted { .. } => self.busy = true,
            EventMsg::TurnEnded { reason, .. } => self.turn_ended(ev.seq, reason),
            EventMsg::State {
                state: dsh_protocol::SessionState::Idle,
            } => self.turns.idle(),
            _ => self.common(ev),
        }
    }

    /// A `usage_update`: the context in use of the model's window, and the session's cost.
    fn send_usage(&self, used: u64, total: &dsh_protocol::Usage) {
        let Some(size) = self.window else {
            return;
        };
        let cost = total.cost_usd.map(|amount| Cost::new(amount, "USD"));
        self.send(SessionUpdate::UsageUpdate(
            UsageUpdate::new(used, size).cost(cost),
        ));
    }

    /// Puts an approval request to the client (once).
    fn ask_approval(&mut self, request: &dsh_protocol::ApprovalRequest) {
        if !self.asked.insert(request.request_id.clone()) {
            return;
        }
        let title = self.cards.title(&request.display);
        crate::permission::ask_approval(
            self.connection.clone(),
            self.host.clone(),
            (self.id.clone(), self.target.clone()),
            request.clone(),
            title,
        );
    }

    /// Puts the agent's questions to the client (once).
    fn ask_questions(&mut self, request: &dsh_protocol::QuestionRequest) {
        if !self.asked.insert(request.request_id.clone()) {
            return;
        }
        crate::permission::ask_questions(
            self.connection.clone(),
            self.host.clone(),
            (self.id.clone(), self.target.clone()),
            request.clone(),
        );
    }

    fn flush_title(&mut self) {
        if let Some(title) = self.title.take() {
            self.send(SessionUpdate::SessionInfoUpdate(
                SessionInfoUpdate::new().title(title),
            ));
        }
    }

    /// What history and live events render alike.
    fn common(&mut self, ev: &Event) {
        match &ev.msg {
            EventMsg::ToolCallBegan {
                call_id, display, ..
            } => {
                if let Some(u) = self.cards.began(call_id, display) {
                    self.send(u);
                }
            }
            EventMsg::ToolCallEnded {
                call_id,
                display,
                is_error,
                error_code,
                error_message,
                ..
            } => {
                let code = error_code.as_ref().map(|c| c.as_str());
                let failure = is_error.then(|| Failure {
                    code: code.as_deref(),
                    message: error_message.as_deref(),
                });
                for u in self.cards.ended(call_id, display, failure) {
                    self.send(u);
                }
            }
            EventMsg::TodoList { items } => self.send(SessionUpdate::Plan(updates::plan(items))),
            EventMsg::Title { title } => {
                self.title = Some(title.clone());
                if !self.busy {
                    self.flush_title();
                }
            }
            EventMsg::WorkingDirectory { cwd } => self.cards.set_cwd(PathBuf::from(cwd)),
            EventMsg::UsageUpdated {
                total,
                context_tokens,
                ..
            } => self.send_usage(*context_tokens, total),
            EventMsg::SessionConfigured { settings, .. } => {
                self.window = settings.context_window.or(self.window);
                let options = crate::config::options(settings);
                if !options.is_empty() {
                    self.send(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                        options,
                    )));
                }
            }
            _ => {}
        }
    }
}
