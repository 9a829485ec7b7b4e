//! `dsh-host`: the in-process host of sessions, the [`dsh_protocol::Client`] over the engine.
//!
//! Front ends (the TUI, ACP, the SDK server, `dsh exec`, `dsh serve`) are handed an
//! `Arc<dyn Client>` by their composition root; this crate is the implementation that runs in
//! the same process as the kernel. It opens sessions through the `Agents` service, sends ops
//! to them (prompts, steers, interrupts, approvals, commands, model and effort), and serves
//! each session's events: the committed log projected into protocol events ([`project`]),
//! then live deltas and state, to any number of subscribers ([`hub`]).
//!
//! An implementation crate: it depends on interface crates only, and only composition roots
//! depend on it.

mod approvals;
mod builtins;
pub mod convert;
pub mod hub;
mod log;
mod opening;
mod policy;
pub mod project;
mod questions;
mod sessions;
mod workdir;
pub mod workflow;

use std::collections::HashMap;
use std::sync::Arc;

use dsh_agent::{Agent, AgentError, AgentOptions, AgentStatus, Agents, CancelCause};
use dsh_commands::{CommandCall, CommandError, Commands};
use dsh_kernel::Ctx;
use dsh_llm::Llm;
use dsh_llm::service::CallSettings;
use dsh_protocol::{
    Client, CommandInfo, ErrorCode, EventMsg, EventStream, LogStream, Op, OpAccepted, OpenSession,
    ProtocolError, QueuedSteer, SessionQuery, SessionSummary,
};
use dsh_session::SessionError;
use dsh_tools::Tools;
use futures::future::BoxFuture;
use parking_lot::Mutex;

use crate::hub::Hub;
use crate::project::{Pricer, Projector};

pub use approvals::HostAnswerer;
pub use questions::HostQuestions;
pub use sessions::StoredView;

/// What a host needs.
pub struct HostOptions {
    /// Options of new sessions where the client leaves them open (route, model, effort, cwd).
    pub defaults: AgentOptions,
    /// Provide the `approval-answerer` service, so approval questions reach the clients (the
    /// TUI, the server), and the `question-answerer` service (`ask_user_question`). Off for hosts
    /// whose composition answers otherwise (a script) or that have no person (`dsh exec`).
    pub answer_approvals: bool,
}

impl std::fmt::Debug for HostOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostOptions")
            .field("defaults", &self.defaults)
            .field("answer_approvals", &self.answer_approvals)
            .finish()
    }
}

pub(crate) struct Inner {
    pub root: Ctx,
    pub defaults: AgentOptions,
    pub hubs: Mutex<HashMap<String, Arc<Hub>>>,
    pub approvals: approvals::Pending,
    pub questions: questions::PendingQuestions,
    pub next_steer: std::sync::atomic::AtomicU64,
    /// Openings of one session id in progress (see [`opening`]).
    pub(crate) openings: opening::Openings,
}

/// The in-process host: a [`Client`] over the kernel in `root`.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("open", &self.inner.hubs.lock().len())
            .finish_non_exhaustive()
    }
}

/// The protocol error of an agent failure.
pub fn agent_error(e: AgentError) -> ProtocolError {
    let code = match &e {
        AgentError::NotFound(_) => ErrorCode::SessionNotFound,
        AgentError::Disposed(_) => ErrorCode::SessionEnded,
        AgentError::InvalidMessage(_) => ErrorCode::InvalidRequest,
        AgentError::Exists(_) => ErrorCode::Conflict,
        AgentError::Session(s) => return session_error(s),
        _ => ErrorCode::Internal,
    };
    ProtocolError::new(code, e.to_string())
}

/// The protocol error of a session-layer failure.
pub fn session_error(e: &SessionError) -> ProtocolError {
    let code = match e {
        SessionError::Locked(_) => ErrorCode::SessionLocked,
        SessionError::NotFound(_) => ErrorCode::SessionNotFound,
        SessionError::Exists(_) => ErrorCode::Conflict,
        SessionError::InvalidId(_) => ErrorCode::InvalidRequest,
        SessionError::Closed(_) => ErrorCode::SessionEnded,
        SessionError::Log(l) if !l.is_unsupported() => ErrorCode::SessionCorrupt,
        SessionError::Io(_)
        | SessionError::Storage { .. }
        | SessionError::Unpersisted(_)
        | SessionError::Flush(_) => ErrorCode::StorageFailed,
        _ => ErrorCode::Internal,
    };
    ProtocolError::new(code, e.to_string())
}

fn not_open(id: &str) -> ProtocolError {
    ProtocolError::new(
        ErrorCode::SessionNotFound,
        format!("no open session `{id}` in this host"),
    )
}

impl Host {
    /// A host over the kernel in `root`. With `answer_approvals`, it provides the
    /// `approval-answerer` service in `root` (an error when another one is provided).
    pub fn new(root: Ctx, options: HostOptions) -> Result<Self, ProtocolError> {
        let inner = Arc::new(Inner {
            root: root.clone(),
            defaults: options.defaults,
            hubs: Mutex::new(HashMap::new()),
            approvals: approvals::Pending::default(),
            questions: questions::PendingQuestions::default(),
            next_steer: std::sync::atomic::AtomicU64::new(1),
            openings: opening::Openings::default(),
        });
        if options.answer_approvals {
            let answerer: Arc<dyn dsh_approval_api::ApprovalAnswerer> =
                Arc::new(HostAnswerer::new(Arc::downgrade(&inner)));
            root.provide::<dyn dsh_approval_api::ApprovalAnswerer>(answerer)
                .map_err(|e| {
                    ProtocolError::new(
                        ErrorCode::Conflict,
                        format!("approval questions cannot be answered here: {e}"),
                    )
                })?;
            // A host whose clients answer approvals has a person: it answers the agent's
            // questions too (`ask_user_question`).
            let questions: Arc<dyn dsh_approval_api::QuestionAnswerer> =
                Arc::new(HostQuestions::new(Arc::downgrade(&inner)));
            root.provide::<dyn dsh_approval_api::QuestionAnswerer>(questions)
                .map_err(|e| {
                    ProtocolError::new(
                        ErrorCode::Conflict,
                        format!("questions to the user cannot be answered here: {e}"),
                    )
                })?;
        }
        if let Some(commands) = root.get::<dyn Commands>() {
            builtins::register(&root, commands.as_ref(), &Arc::downgrade(&inner)).map_err(|e| {
                ProtocolError::new(
                    ErrorCode::Conflict,
                    format!("cannot register commands: {e}"),
                )
            })?;
        }
        Ok(Host { inner })
    }

    /// This host as a client.
    pub fn client(&self) -> Arc<dyn Client> {
        Arc::new(self.clone())
    }

    /// The agent of an open session (composition roots use it for what the protocol does not
    /// carry yet, such as `exec`'s exit status).
    pub fn agent(&self, session_id: &str) -> Option<Arc<dyn Agent>> {
        self.inner
            .hubs
            .lock()
            .get(session_id)
            .map(|h| h.agent.clone())
    }

    /// A view of the stored session `header` describes, to follow batch by batch what another
    /// process commits to it (its events projected as this host projects its own sessions').
    pub fn stored_view(&self, header: &dsh_session::SessionHeader) -> StoredView {
        sessions::view(&self.inner, header)
    }

    /// Closes every open session (flushed and unlocked).
    pub async fn shutdown(&self) {
        let hubs: Vec<Arc<Hub>> = self.inner.hubs.lock().drain().map(|(_, h)| h).collect();
        for hub in hubs {
            hub.detach();
            if hub.owned {
                hub.agent.dispose().await;
            }
        }
    }
}

impl Inner {
    fn agents(&self) -> Result<Arc<dyn Agents>, ProtocolError> {
        self.root.get::<dyn Agents>().ok_or_else(|| {
            ProtocolError::new(
                ErrorCode::Internal,
                "the composition mounts no agents service",
            )
        })
    }

    fn pricer(&self, provider: String) -> Option<Pricer> {
        let llm = self.root.get::<dyn Llm>()?;
        Some(Arc::new(move |model: &str| llm.pricing(&provider, model)))
    }

    /// A projector factory for one session.
    pub(crate) fn projector_factory(
        &self,
        session_id: &str,
        provider: String,
        scope: Option<dsh_kernel::ScopeKey>,
    ) -> Box<dyn Fn() -> Projector + Send + Sync> {
        let tools = self.root.get::<dyn Tools>();
        let pricer = self.pricer(provider);
        let id = session_id.to_owned();
        Box::new(move || Projector::new(id.clone(), tools.clone(), scope.clone(), pricer.clone()))
    }

    pub(crate) fn hub(&self, id: &str) -> Option<Arc<Hub>> {
        self.hubs.lock().get(id).cloned()
    }

    /// Serves `agent` (owned: opened by this host).
    fn adopt(&self, agent: Arc<dyn Agent>, owned: bool) -> Result<Arc<Hub>, ProtocolError> {
        if let Some(h) = self.hub(agent.id()) {
            return Ok(h);
        }
        let provider = agent.options().provider.unwrap_or_default();
        let scope = agent.ctx().scope_key();
        let fresh = self.projector_factory(agent.id(), provider, scope);
        let hub = Hub::attach(&self.root, agent, owned, fresh)?;
        self.resolve_settings(&hub);
        self.hubs.lock().insert(hub.id.clone(), hub.clone());
        Ok(hub)
    }

    /// Fills in the route, model and effort the next request will use.
    fn resolve_settings(&self, hub: &Hub) {
        let options = hub.agent.options();
        let o = hub.overrides.lock();
        let settings = CallSettings {
            provider: options.provider.clone().unwrap_or_default(),
            model: o.model.clone().or(options.model.clone()),
            effort: o.effort.clone().or(options.reasoning_effort.clone()),
            ..Default::default()
        };
        drop(o);
        let mut st = hub.state.lock();
        let s = &mut st.projector.settings;
        if let Some(llm) = self.root.get::<dyn Llm>()
            && let Ok(p) = llm.prepare_call(&settings)
        {
            s.route = Some(p.provider.clone());
            s.model = Some(p.model.id.clone());
            s.effort = p.effort.as_ref().and_then(convert::effort_out);
            s.context_window = Some(p.model.context_window);
            s.priced = Some(p.model.pricing.is_some());
        } else {
            s.route = options.provider;
            s.model = settings.model;
            s.effort = settings.effort.as_ref().and_then(convert::effort_out);
        }
    }

    fn options(&self, o: &dsh_protocol::SessionOptions) -> AgentOptions {
        let mut options = self.defaults.clone();
        if let Some(cwd) = &o.cwd {
            options.cwd = cwd.into();
        }
        if let Some(r) = &o.settings.route {
            options.provider = Some(r.clone());
        }
        if let Some(m) = &o.settings.model {
            options.model = Some(m.clone());
        }
        if let Some(e) = o.settings.effort {
            options.reasoning_effort = Some(convert::effort_in(e));
        }
        options
    }

    async fn open(&self, request: OpenSession) -> Result<SessionSummary, ProtocolError> {
        let agents = self.agents()?;
        let chosen = policy::Chosen::of(&self.root, &open_options(&request).settings)?;
        // Another client opening the same id at once joins the session this opening serves.
        let _opening = match &request {
            OpenSession::Create {
                session_id: Some(id),
                ..
            }
            | OpenSession::Resume { session_id: id, .. } => Some(self.openings.lock(id).await),
            _ => None,
        };
        let (agent, prompt) = match request {
            OpenSession::Create {
                session_id,
                options,
                prompt,
            } => {
                if let Some(id) = &session_id
                    && let Some(h) = self.hub(id)
                {
                    self.check_open(&h, &chosen)?;
                    (h.agent.clone(), prompt)
                } else {
                    let spec = dsh_agent::CreateAgent {
                        session_id,
                        options: self.options(&options),
                        setup: chosen.setup(),
                        ..Default::default()
                    };
                    (
                        agents.create(&self.root, spec).await.map_err(agent_error)?,
                        prompt,
                    )
                }
            }
            OpenSession::Resume {
                session_id,
                options,
            } => {
                if let Some(h) = self.hub(&session_id) {
                    self.check_open(&h, &chosen)?;
                    (h.agent.clone(), None)
                } else {
                    let mut o = self.options(&options);
                    if options.cwd.is_none() {
                        // A resumed session keeps its own working directory.
                        o.cwd = std::path::PathBuf::new();
                    }
                    let spec = dsh_agent::ResumeAgent {
                        session_id,
                        options: o,
                        setup: chosen.setup(),
                    };
                    (
                        agents.resume(&self.root, spec).await.map_err(agent_error)?,
                        None,
                    )
                }
            }
            OpenSession::Fork {
                session_id,
                before_turn,
                options,
            } => {
                let boundary = match before_turn {
                    None => None,
                    Some(n) => Some(sessions::turn_boundary(&self.root, &session_id, n)?),
                };
                let seed = dsh_agent::SessionSeed::Fork {
                    from: session_id,
                    options: dsh_session::ForkOptions {
                        boundary,
                        cwd: options.cwd.clone(),
                        ..Default::default()
                    },
                };
                let spec = dsh_agent::CreateAgent {
                    options: self.options(&options),
                    setup: chosen.setup(),
                    ..Default::default()
                };
                (
                    agents
                        .create_seeded(&self.root, spec, seed)
                        .await
                        .map_err(agent_error)?,
                    None,
                )
            }
        };
        let hub = self.adopt(agent, true)?;
        if let Some(p) = prompt {
            self.send(
                &hub.id,
                Op::Submit {
                    text: p,
                    attachments: Vec::new(),
                },
            )
            .await?;
        }
        let st = hub.state.lock();
        Ok(hub.summary(&st))
    }

    /// A session this host serves, reopened: its sandbox mode and approval policy stay.
    fn check_open(&self, hub: &Hub, chosen: &policy::Chosen) -> Result<(), ProtocolError> {
        if chosen.is_empty() {
            return Ok(());
        }
        let current = {
            let st = hub.state.lock();
            st.projector.settings.clone()
        };
        chosen.check_open(&hub.id, &current)
    }

    fn open_hub(&self, id: &str) -> Result<Arc<Hub>, ProtocolError> {
        if let Some(h) = self.hub(id) {
            return Ok(h);
        }
        // A live agent this host did not open (a sub-agent): watched, not driven.
        match self.agents()?.get(id) {
            Some(agent) => self.adopt(agent, false),
            None => Err(not_open(id)),
        }
    }

    pub(crate) async fn send(&self, id: &str, op: Op) -> Result<OpAccepted, ProtocolError> {
        let hub = match self.hub(id) {
            Some(h) => h,
            None => {
                // A stored session is opened for the op (taking its write lock); a live one
                // driven by someone else (a sub-agent) is refused below.
                let stored = self
                    .root
                    .get::<dyn dsh_session::Sessions>()
                    .is_some_and(|s| s.exists(id));
                let live = self.agents()?.get(id).is_some();
                if !stored || live {
                    self.open_hub(id)?
                } else {
                    let resume = OpenSession::Resume {
                        session_id: id.to_owned(),
                        options: dsh_protocol::SessionOptions::default(),
                    };
                    Box::pin(self.open(resume)).await?;
                    self.hub(id).ok_or_else(|| not_open(id))?
                }
            }
        };
        if !hub.owned {
            return Err(ProtocolError::new(
                ErrorCode::Forbidden,
                format!("session `{id}` is driven by its parent; it can only be watched"),
            ));
        }
        let seq = hub.state.lock().last_seq;
        let accepted = |id: Option<String>| OpAccepted {
            seq,
            id,
            command: None,
        };
        let agent = &hub.agent;
        match op {
            Op::Submit { text, attachments } => {
                let text = with_attachments(text, &attachments)?;
                let mid = agent
                    .followup(dsh_llm::Message::user_text(
                        dsh_session::ids::message_id(),
                        text,
                    ))
                    .map_err(agent_error)?;
                Ok(accepted(Some(mid)))
            }
            Op::Steer { text } => {
                let n = self
                    .next_steer
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let steer_id = format!("steer-{n}");
                hub.queue_steer(QueuedSteer {
                    steer_id: steer_id.clone(),
                    text,
                });
                // Idle: it becomes the next turn at once.
                hub.flush_steers_if_idle();
                Ok(accepted(Some(steer_id)))
            }
            Op::WithdrawSteer { steer_id } => {
                if hub.withdraw_steer(&steer_id) {
                    Ok(accepted(Some(steer_id)))
                } else {
                    Err(ProtocolError::new(
                        ErrorCode::Conflict,
                        format!("steer `{steer_id}` is not queued (already delivered?)"),
                    ))
                }
            }
            Op::Interrupt => {
                agent.cancel(CancelCause::User, true);
                Ok(accepted(None))
            }
            Op::InterruptDropQueued => {
                let queued: Vec<String> = hub
                    .state
                    .lock()
                    .steers
                    .iter()
                    .map(|s| s.steer_id.clone())
                    .collect();
                for steer_id in queued {
                    hub.withdraw_steer(&steer_id);
                }
                agent.cancel(CancelCause::User, false);
                Ok(accepted(None))
            }
            Op::Persist => {
                hub.persist().await?;
                Ok(accepted(None))
            }
            Op::AnswerApproval {
                request_id,
                decision,
            } => {
                self.approvals.answer(&request_id, decision)?;
                hub.approval_closed(&request_id);
                Ok(accepted(Some(request_id)))
            }
            Op::AnswerQuestion {
                request_id,
                answers,
            } => {
                let told = EventMsg::QuestionAnswered {
                    request_id: request_id.clone(),
                    answers: answers.clone(),
                };
                self.questions.answer(id, &request_id, answers, || {
                    hub.question_closed(&request_id);
                    hub.live_event(told);
                })?;
                Ok(accepted(Some(request_id)))
            }
            Op::RunCommand { name, args } => {
                let call = CommandCall {
                    agent: agent.clone(),
                    args: args.trim().to_owned(),
                    cancel: tokio_util::sync::CancellationToken::new(),
                };
                let outcome = match self.root.get::<dyn Commands>() {
                    Some(c) => c.run(&name, call).await,
                    // No registry mounted: the builtins still answer.
                    None => builtins::run(self, &name, call).await,
                };
                match outcome {
                    Ok(outcome) => {
                        hub.live_event(EventMsg::CommandRan {
                            name,
                            outcome: outcome.clone(),
                        });
                        Ok(OpAccepted {
                            seq,
                            id: None,
                            command: Some(outcome),
                        })
                    }
                    Err(e) => Err(command_error(e)),
                }
            }
            Op::SetModel { model } => {
                self.set_route(&hub, Some(model), None);
                Ok(accepted(None))
            }
            Op::SetEffort { effort } => {
                self.set_route(&hub, None, Some(effort));
                Ok(accepted(None))
            }
            Op::SetWorkingDirectory { path } => {
                let cwd = workdir::set(agent, &path)?;
                Ok(accepted(Some(cwd)))
            }
        }
    }

    /// Applies `/model` and `/effort` to the next requests of `hub`'s session.
    pub(crate) fn set_route(
        &self,
        hub: &Hub,
        model: Option<String>,
        effort: Option<dsh_protocol::Effort>,
    ) {
        {
            let mut o = hub.overrides.lock();
            if let Some(m) = model {
                o.model = Some(m);
            }
            if let Some(e) = effort {
                o.effort = Some(convert::effort_in(e));
            }
        }
        self.settings_changed(hub);
    }

    fn settings_changed(&self, hub: &Hub) {
        self.resolve_settings(hub);
        let (cwd, settings) = {
            let st = hub.state.lock();
            let s = hub.summary(&st);
            (s.cwd, s.settings)
        };
        hub.live_event(EventMsg::SessionConfigured {
            cwd,
            settings,
            resumed: false,
        });
    }

    async fn close(&self, id: &str) -> Result<(), ProtocolError> {
        let hub = self.hubs.lock().remove(id).ok_or_else(|| not_open(id))?;
        hub.detach();
        if hub.owned {
            hub.agent.dispose().await;
        }
        Ok(())
    }
}

/// The options of an open request.
fn open_options(request: &OpenSession) -> &dsh_protocol::SessionOptions {
    match request {
        OpenSession::Create { options, .. }
        | OpenSession::Resume { options, .. }
        | OpenSession::Fork { options, .. } => options,
    }
}

fn command_error(e: CommandError) -> ProtocolError {
    let code = match &e {
        CommandError::Unknown(_) => ErrorCode::UnknownCommand,
        CommandError::Usage(_) => ErrorCode::InvalidRequest,
        CommandError::Failed(_) => ErrorCode::CommandFailed,
    };
    ProtocolError::new(code, e.to_string())
}

/// The prompt with its attachments: files become `@path` mentions the model reads with its
/// tools.
fn with_attachments(
    mut text: String,
    attachments: &[dsh_protocol::Attachment],
) -> Result<String, ProtocolError> {
    for a in attachments {
        match a {
            dsh_protocol::Attachment::File { path } => {
                text.push_str(if text.is_empty() { "@" } else { " @" });
                text.push_str(path);
            }
            dsh_protocol::Attachment::Image { .. } => {
                return Err(ProtocolError::new(
                    ErrorCode::InvalidRequest,
                    "image attachments are not accepted by this host yet; attach the file \
                     instead and let the agent read it with read_image",
                ));
            }
        }
    }
    Ok(text)
}

impl Client for Host {
    fn open(&self, request: OpenSession) -> BoxFuture<'_, Result<SessionSummary, ProtocolError>> {
        Box::pin(self.inner.open(request))
    }

    fn send(&self, session_id: &str, op: Op) -> BoxFuture<'_, Result<OpAccepted, ProtocolError>> {
        let id = session_id.to_owned();
        Box::pin(async move { self.inner.send(&id, op).await })
    }

    fn subscribe(
        &self,
        session_id: &str,
        after: Option<u64>,
    ) -> BoxFuture<'_, Result<EventStream, ProtocolError>> {
        let id = session_id.to_owned();
        Box::pin(async move {
            match self.inner.open_hub(&id) {
                Ok(hub) => Ok(hub.subscribe(after)),
                Err(e) if e.code == ErrorCode::SessionNotFound => {
                    sessions::stored_stream(&self.inner, &id, after).await
                }
                Err(e) => Err(e),
            }
        })
    }

    fn log(
        &self,
        session_id: &str,
        after: Option<u64>,
    ) -> BoxFuture<'_, Result<LogStream, ProtocolError>> {
        let id = session_id.to_owned();
        Box::pin(async move { log::open(&self.inner, &id, after).await })
    }

    fn sessions(
        &self,
        query: SessionQuery,
    ) -> BoxFuture<'_, Result<Vec<SessionSummary>, ProtocolError>> {
        Box::pin(sessions::list(&self.inner, query))
    }

    fn session(&self, session_id: &str) -> BoxFuture<'_, Result<SessionSummary, ProtocolError>> {
        let id = session_id.to_owned();
        Box::pin(async move {
            if let Some(h) = self.inner.hub(&id) {
                let st = h.state.lock();
                return Ok(h.summary(&st));
            }
            sessions::stored_summary(&self.inner, &id).await
        })
    }

    fn commands(&self, session_id: &str) -> BoxFuture<'_, Result<Vec<CommandInfo>, ProtocolError>> {
        let r = self.inner.open_hub(session_id).map(|hub| {
            match self.inner.root.get::<dyn Commands>() {
                Some(c) => c.list(&hub.agent),
                None => builtins::specs().iter().map(|s| s.info()).collect(),
            }
        });
        Box::pin(async move { r })
    }

    fn close(&self, session_id: &str) -> BoxFuture<'_, Result<(), ProtocolError>> {
        let id = session_id.to_owned();
        Box::pin(async move { self.inner.close(&id).await })
    }
}

/// Whether an agent is running a turn.
pub fn is_running(agent: &dyn Agent) -> bool {
    agent.status() == AgentStatus::Running
}
