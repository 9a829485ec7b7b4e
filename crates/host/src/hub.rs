//! One session as the host serves it: the projection of its log, its live state, and the
//! fan-out to every subscriber.
//!
//! Committed events, stream chunks and status changes arrive from the kernel's notifications on
//! the session's own task; each is projected and sent on one broadcast channel under the hub's
//! lock, so a subscription taken under the same lock sees every event exactly once. A
//! subscriber that falls behind the channel's bound is told so and ends: it continues from
//! the log with a new subscription (the log is the truth), never slowing the session.

use std::sync::Arc;

use dsh_agent::events::{AgentStatusChanged, AgentStreamChunk};
use dsh_agent::hooks::{AgentRequest, PreStep};
use dsh_agent::{Agent, AgentStatus};
use dsh_jobs_api::Jobs;
use dsh_kernel::{Ctx, Registration};
use dsh_llm::{Message, ReasoningEffort, StreamChunk};
use dsh_protocol::{
    ApprovalRequest, BackgroundWork, ErrorCode, Event, EventMsg, EventStream, LiveAttempt,
    ProtocolError, QuestionRequest, QueuedSteer, SessionState, Snapshot, SubagentMode,
};
use dsh_session::plugin::SessionEvent;
use dsh_subagent_api::Subagents;
use dsh_subagent_api::events::SubagentStarted;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::broadcast;

use crate::project::Projector;

/// Events a subscriber may lag behind the live edge before it is cut off (and resubscribes
/// from the log). The ring is allocated per open session (a pointer and its slot state a slot:
/// ~160 KB).
pub const SUBSCRIBER_BUFFER: usize = 4096;

/// `/model` and `/effort` choices, applied by the hub's `agent/request` hook.
#[derive(Default)]
pub(crate) struct Overrides {
    pub model: Option<String>,
    pub effort: Option<ReasoningEffort>,
}

/// The hub's mutable state, behind its lock.
pub(crate) struct HubState {
    pub projector: Projector,
    /// The last committed seq (`None`: the log is empty).
    pub last_seq: Option<u64>,
    pub live: Option<LiveAttempt>,
    pub steers: Vec<QueuedSteer>,
    pub approvals: Vec<ApprovalRequest>,
    /// Questions of `ask_user_question` waiting for an answer.
    pub questions: Vec<QuestionRequest>,
    pub state: SessionState,
    /// Background work as of the last idle point or settlement.
    pub background: BackgroundWork,
}

/// One served session.
pub(crate) struct Hub {
    pub id: String,
    /// The kernel's root (the jobs and sub-agent services, for the background work).
    root: Ctx,
    pub agent: Arc<dyn Agent>,
    /// Opened by the host (closed and disposed by it), or watched (a sub-agent).
    pub owned: bool,
    tx: broadcast::Sender<Arc<Event>>,
    pub state: Mutex<HubState>,
    registrations: Mutex<Vec<Registration>>,
    pub overrides: Arc<Mutex<Overrides>>,
    /// Builds a fresh projector for subscriptions' replays.
    pub fresh: Box<dyn Fn() -> Projector + Send + Sync>,
}

impl Hub {
    /// A hub over `agent`, its projection caught up with the log so far, listening from now on.
    pub fn attach(
        root: &Ctx,
        agent: Arc<dyn Agent>,
        owned: bool,
        fresh: Box<dyn Fn() -> Projector + Send + Sync>,
    ) -> Result<Arc<Hub>, ProtocolError> {
        let (tx, _) = broadcast::channel(SUBSCRIBER_BUFFER);
        let mut projector = fresh();
        let events = agent.session().events();
        for e in &events {
            projector.project(e);
        }
        let state = match agent.status() {
            AgentStatus::Running => SessionState::Working,
            AgentStatus::Idle => SessionState::Idle,
            _ => SessionState::Ended,
        };
        let hub = Arc::new(Hub {
            id: agent.id().to_owned(),
            root: root.clone(),
            agent: agent.clone(),
            owned,
            tx,
            state: Mutex::new(HubState {
                projector,
                last_seq: events.last().map(|e| e.seq()),
                live: None,
                steers: Vec::new(),
                approvals: Vec::new(),
                questions: Vec::new(),
                state,
                background: BackgroundWork::default(),
            }),
            registrations: Mutex::new(Vec::new()),
            overrides: Arc::default(),
            fresh,
        });
        hub.listen(root)?;
        Ok(hub)
    }

    fn listen(self: &Arc<Self>, root: &Ctx) -> Result<(), ProtocolError> {
        let mut regs = Vec::new();
        let internal = |e: dsh_kernel::KernelError| {
            ProtocolError::new(ErrorCode::Internal, format!("cannot listen: {e}"))
        };
        let weak = Arc::downgrade(self);
        regs.push(
            root.on::<SessionEvent>(move |e| {
                if let Some(hub) = weak.upgrade()
                    && *e.session_id == *hub.id
                {
                    hub.committed(&e.event);
                }
                Ok(())
            })
            .map_err(internal)?,
        );
        let weak = Arc::downgrade(self);
        regs.push(
            root.on::<AgentStreamChunk>(move |e| {
                if let Some(hub) = weak.upgrade()
                    && *e.agent_id == *hub.id
                {
                    hub.chunk(e.turn, &e.chunk);
                }
                Ok(())
            })
            .map_err(internal)?,
        );
        let weak = Arc::downgrade(self);
        regs.push(
            root.on::<AgentStatusChanged>(move |e| {
                if let Some(hub) = weak.upgrade()
                    && *e.agent_id == *hub.id
                {
                    hub.status(e.status);
                    if e.status == AgentStatus::Idle && hub.owned {
                        // Steers still queued when the turn ended without another step
                        // become the next prompt (off this notification's stack).
                        match tokio::runtime::Handle::try_current() {
                            Ok(rt) => {
                                let hub = hub.clone();
                                rt.spawn(async move { hub.flush_steers_if_idle() });
                            }
                            Err(_) => hub.flush_steers_if_idle(),
                        }
                    }
                }
                Ok(())
            })
            .map_err(internal)?,
        );
        let weak = Arc::downgrade(self);
        regs.push(
            root.on::<SubagentStarted>(move |e| {
                if let Some(hub) = weak.upgrade()
                    && *e.parent_id == *hub.id
                {
                    hub.live_event(EventMsg::SubagentStarted {
                        session_id: e.child_id.clone(),
                        call_id: None,
                        label: e.label.clone(),
                        mode: Some(match e.mode {
                            dsh_subagent_api::SubagentMode::Spawn => SubagentMode::Spawn,
                            dsh_subagent_api::SubagentMode::Fork => SubagentMode::Fork,
                        }),
                    });
                }
                Ok(())
            })
            .map_err(internal)?,
        );
        *self.registrations.lock() = regs;
        if self.owned {
            self.install_hooks().map_err(internal)?;
        }
        Ok(())
    }

    /// The agent-scoped hooks of a session the host drives: queued steers join the next
    /// step's batch; `/model` and `/effort` apply to every request.
    fn install_hooks(self: &Arc<Self>) -> Result<(), dsh_kernel::KernelError> {
        let weak = Arc::downgrade(self);
        self.agent
            .ctx()
            .hook::<PreStep, _, _>(move |mut input, next| {
                if let Some(hub) = weak.upgrade() {
                    let delivered = hub.take_steers();
                    for s in delivered {
                        input
                            .batch
                            .push(Message::user_text(dsh_session::ids::message_id(), s.text));
                        hub.live_event(EventMsg::SteerDelivered {
                            steer_id: s.steer_id,
                        });
                    }
                }
                next.run(input)
            })?;
        let overrides = self.overrides.clone();
        self.agent
            .ctx()
            .hook::<AgentRequest, _, _>(move |mut input, next| {
                {
                    let o = overrides.lock();
                    if let Some(m) = &o.model {
                        input.settings.model = Some(m.clone());
                    }
                    if let Some(e) = &o.effort {
                        input.settings.effort = Some(e.clone());
                    }
                }
                next.run(input)
            })?;
        Ok(())
    }

    fn take_steers(&self) -> Vec<QueuedSteer> {
        std::mem::take(&mut self.state.lock().steers)
    }

    /// Stops listening.
    pub fn detach(&self) {
        for r in self.registrations.lock().drain(..) {
            r.dispose();
        }
    }

    fn send(&self, seq: u64, msg: EventMsg) {
        // No subscriber is not an error: the log keeps everything.
        let _ = self.tx.send(Arc::new(Event::new(seq, msg)));
    }

    fn committed(&self, ev: &dsh_session::Event) {
        let mut st = self.state.lock();
        let msgs = st.projector.project(ev);
        st.last_seq = Some(ev.seq());
        for msg in msgs {
            if matches!(
                msg,
                EventMsg::AssistantMessage { .. } | EventMsg::TurnEnded { .. }
            ) {
                st.live = None;
            }
            self.send(ev.seq(), msg);
        }
    }

    fn chunk(&self, turn: u64, chunk: &StreamChunk) {
        let (text, reasoning) = match chunk {
            StreamChunk::TextDelta { text, .. } => (Some(text), None),
            StreamChunk::ReasoningDelta { text, .. } => (None, Some(text)),
            StreamChunk::Usage { usage } => {
                let st = self.state.lock();
                let msg = st.projector.streamed_usage(turn, usage);
                self.send(st.last_seq.unwrap_or(0), msg);
                return;
            }
            _ => return,
        };
        let mut st = self.state.lock();
        let seq = st.last_seq.unwrap_or(0);
        let live = st.live.get_or_insert_with(|| LiveAttempt {
            turn,
            ..Default::default()
        });
        if let Some(t) = text {
            live.text.push_str(t);
            self.send(seq, EventMsg::TextDelta { text: t.clone() });
        }
        if let Some(r) = reasoning {
            live.reasoning.push_str(r);
            self.send(seq, EventMsg::ReasoningDelta { text: r.clone() });
        }
    }

    fn status(self: &Arc<Self>, status: AgentStatus) {
        let mut st = self.state.lock();
        let state = match status {
            AgentStatus::Running if !st.approvals.is_empty() || !st.questions.is_empty() => {
                SessionState::WaitingForApproval
            }
            AgentStatus::Running => SessionState::Working,
            AgentStatus::Idle => SessionState::Idle,
            _ => SessionState::Ended,
        };
        if state != SessionState::Working {
            st.live = None;
        }
        if state == SessionState::Idle {
            self.quiet_point();
        }
        self.set_state(&mut st, state);
    }

    /// The session's background work now (jobs and continuable sub-agents still running).
    fn background_now(&self) -> BackgroundWork {
        let jobs = self
            .root
            .get::<dyn Jobs>()
            .map(|j| j.running(&self.id))
            .unwrap_or_default();
        let subagents = self
            .root
            .get::<dyn Subagents>()
            .map_or(0, |s| s.busy_children(&self.id));
        BackgroundWork {
            jobs,
            subagents: u32::try_from(subagents).unwrap_or(u32::MAX),
        }
    }

    /// Once the agent is quiet (idle with no input waiting to start a turn: its status is idle
    /// between turns too), tells the subscribers the background work still running; when that
    /// work settles, waits for quiet again and tells again (its notices are in the inbox by
    /// then, so a turn they wake runs first).
    fn quiet_point(self: &Arc<Self>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let idle = self.agent.when_idle();
        let weak = Arc::downgrade(self);
        rt.spawn(async move {
            idle.await;
            let Some(hub) = weak.upgrade() else {
                return;
            };
            let work = {
                // Asked before the hub's lock is taken: the agent and the services commit
                // events, which reach `committed`, under their own locks.
                let agent_idle = hub.agent.status() == AgentStatus::Idle;
                let work = hub.background_now();
                let mut st = hub.state.lock();
                if st.state != SessionState::Idle || !agent_idle {
                    // A turn started meanwhile: its end brings another quiet point.
                    return;
                }
                st.background = work.clone();
                hub.send(st.last_seq.unwrap_or(0), EventMsg::Background(work.clone()));
                work
            };
            if work.is_empty() {
                return;
            }
            let jobs = hub.root.get::<dyn Jobs>().map(|j| j.when_settled(&hub.id));
            let children = hub
                .root
                .get::<dyn Subagents>()
                .map(|s| s.when_children_settled(&hub.id));
            let weak = Arc::downgrade(&hub);
            drop(hub);
            if let Some(j) = jobs {
                j.await;
            }
            if let Some(c) = children {
                c.await;
            }
            if let Some(hub) = weak.upgrade() {
                hub.quiet_point();
            }
        });
    }

    /// Writes the log through to storage now ([`dsh_protocol::Op::Persist`]).
    pub async fn persist(&self) -> Result<(), ProtocolError> {
        self.agent
            .session()
            .write_through()
            .await
            .map_err(|e| crate::session_error(&e))
    }

    fn set_state(&self, st: &mut HubState, state: SessionState) {
        if st.state != state {
            st.state = state;
            self.send(st.last_seq.unwrap_or(0), EventMsg::State { state });
        }
    }

    /// Sends a live event at the current seq.
    pub fn live_event(&self, msg: EventMsg) {
        let st = self.state.lock();
        self.send(st.last_seq.unwrap_or(0), msg);
    }

    /// Queues a steer (delivered at the next step boundary).
    pub fn queue_steer(&self, steer: QueuedSteer) {
        let mut st = self.state.lock();
        let seq = st.last_seq.unwrap_or(0);
        st.steers.push(steer.clone());
        self.send(
            seq,
            EventMsg::SteerQueued {
                steer_id: steer.steer_id,
                text: steer.text,
            },
        );
    }

    /// Withdraws a queued steer; `false` when it was delivered (or never queued).
    pub fn withdraw_steer(&self, steer_id: &str) -> bool {
        let mut st = self.state.lock();
        let Some(i) = st.steers.iter().position(|s| s.steer_id == steer_id) else {
            return false;
        };
        st.steers.remove(i);
        let seq = st.last_seq.unwrap_or(0);
        self.send(
            seq,
            EventMsg::SteerWithdrawn {
                steer_id: steer_id.to_owned(),
            },
        );
        true
    }

    /// Steers still queued when a turn ended become the next prompt.
    pub fn flush_steers_if_idle(&self) {
        if self.agent.status() != AgentStatus::Idle {
            return;
        }
        for s in self.take_steers() {
            if self
                .agent
                .followup(Message::user_text(dsh_session::ids::message_id(), s.text))
                .is_ok()
            {
                self.live_event(EventMsg::SteerDelivered {
                    steer_id: s.steer_id,
                });
            }
        }
    }

    /// An approval question is open. Its request was projected from `approval/asked` when the
    /// approval plugin logged one; a question asked without one (plan mode's accept question)
    /// is sent to the subscribers here.
    pub fn approval_opened(&self, request: ApprovalRequest) {
        let mut st = self.state.lock();
        st.approvals.retain(|a| a.request_id != request.request_id);
        if !st.projector.asked.contains(&request.request_id) {
            self.send(
                st.last_seq.unwrap_or(0),
                EventMsg::ApprovalRequested(request.clone()),
            );
        }
        st.approvals.push(request);
        self.set_state(&mut st, SessionState::WaitingForApproval);
    }

    /// An approval question closed.
    pub fn approval_closed(&self, request_id: &str) {
        // The agent's state first: never ask the agent while holding the hub's lock (the agent
        // commits events, which reach `committed`, under its own lock).
        let agent_state = self.agent_state();
        let mut st = self.state.lock();
        st.approvals.retain(|a| a.request_id != request_id);
        if st.approvals.is_empty()
            && st.questions.is_empty()
            && st.state == SessionState::WaitingForApproval
        {
            self.set_state(&mut st, agent_state);
        }
    }

    /// The session state the agent's status alone implies.
    fn agent_state(&self) -> SessionState {
        match self.agent.status() {
            AgentStatus::Running => SessionState::Working,
            AgentStatus::Idle => SessionState::Idle,
            _ => SessionState::Ended,
        }
    }

    /// A question is open: told to every subscriber, kept in the snapshot until it closes.
    pub fn question_opened(&self, request: QuestionRequest) {
        let mut st = self.state.lock();
        st.questions.retain(|q| q.request_id != request.request_id);
        st.questions.push(request.clone());
        self.send(st.last_seq.unwrap_or(0), EventMsg::QuestionAsked(request));
        self.set_state(&mut st, SessionState::WaitingForApproval);
    }

    /// A question closed (answered or dismissed).
    pub fn question_closed(&self, request_id: &str) {
        let agent_state = self.agent_state();
        let mut st = self.state.lock();
        st.questions.retain(|q| q.request_id != request_id);
        if st.approvals.is_empty()
            && st.questions.is_empty()
            && st.state == SessionState::WaitingForApproval
        {
            self.set_state(&mut st, agent_state);
        }
    }

    /// The summary of this session now.
    pub fn summary(&self, st: &HubState) -> dsh_protocol::SessionSummary {
        let session = self.agent.session();
        let header = session.header();
        let options = self.agent.options();
        dsh_protocol::SessionSummary {
            id: self.id.clone(),
            parent_id: header.parent_session.clone(),
            title: st.projector.title.clone(),
            cwd: st
                .projector
                .cwd
                .clone()
                .unwrap_or_else(|| options.cwd.display().to_string()),
            created_ms: header.created_at,
            updated_ms: dsh_session::log::now_ms(),
            state: st.state,
            turns: st.projector.turns,
            last_seq: st.last_seq,
            settings: st.projector.settings.clone(),
            usage: Some(st.projector.total),
            subagent_usage: Some(st.projector.subagents),
            first_prompt: st.projector.first_prompt.clone(),
            last_turn_end: st.projector.last_turn_end.clone(),
            matched: None,
        }
    }

    /// Every committed event after `after`, the live state, then live events.
    pub fn subscribe(self: &Arc<Self>, after: Option<u64>) -> EventStream {
        let (events, rx, mut snapshot) = {
            let st = self.state.lock();
            let events = self.agent.session().events();
            let snapshot = Snapshot {
                session: self.summary(&st),
                usage: st.projector.total,
                pending_approvals: st.approvals.clone(),
                pending_questions: st.questions.clone(),
                queued_steers: st.steers.clone(),
                live: st.live.clone(),
                background: st.background.clone(),
            };
            (events, self.tx.subscribe(), snapshot)
        };
        let mut projector = (self.fresh)();
        let replay = replay(&mut projector, &events, after);
        let replayed_to = events.last().map(|e| e.seq());
        snapshot.usage = projector.total;
        let tail = Event::new(
            replayed_to.unwrap_or(0),
            EventMsg::Snapshot(Box::new(snapshot)),
        );
        let live = futures::stream::unfold(rx, move |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(ev) => {
                        // Committed events already replayed are skipped; live ones are new (a
                        // question asked without a log record is sent at the last seq).
                        if !ev.is_live()
                            && !matches!(ev.msg, EventMsg::ApprovalRequested(_))
                            && replayed_to.is_some_and(|r| ev.seq <= r)
                        {
                            continue;
                        }
                        return Some((Arc::unwrap_or_clone(ev), rx));
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        let ev = Event::new(
                            0,
                            EventMsg::Error(ProtocolError::new(
                                ErrorCode::SubscriberLagged,
                                format!(
                                    "this subscriber fell {n} events behind the session; \
                                     subscribe again after the last seq it saw"
                                ),
                            )),
                        );
                        // End after telling: a new subscription continues from the log.
                        let (_, closed) = broadcast::channel(1);
                        return Some((ev, closed));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        });
        futures::stream::iter(replay)
            .chain(futures::stream::once(async move { tail }))
            .chain(live)
            .boxed()
    }
}

/// The protocol events of `events` after `after` (the projector sees them all, so calls opened
/// earlier and the usage so far are known).
pub(crate) fn replay(
    projector: &mut Projector,
    events: &[Arc<dsh_session::Event>],
    after: Option<u64>,
) -> Vec<Event> {
    let mut out = Vec::new();
    for e in events {
        let msgs = projector.project(e);
        if after.is_none_or(|a| e.seq() > a) {
            out.extend(msgs.into_iter().map(|m| Event::new(e.seq(), m)));
        }
    }
    out
}
