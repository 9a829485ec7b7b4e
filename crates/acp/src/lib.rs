//! `dsh-acp`: dsh as an Agent Client Protocol (v1) agent over stdio, on the
//! `agent-client-protocol` crate. A front end on the agent vocabulary: sessions are agents of the
//! `Agents` service, updates come from `agent/stream` chunks (message and thought deltas) and
//! committed session events (tool cards and results), permission questions go through the
//! approval seam (`ApprovalAnswerer`) as `session/request_permission`.

mod files;
mod mcp;
mod terminal;
mod updates;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, Implementation, InitializeRequest,
    InitializeResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities,
    NewSessionRequest, NewSessionResponse, PermissionOption, PermissionOptionKind, PromptRequest,
    PromptResponse, RequestPermissionOutcome, RequestPermissionRequest, SessionId,
    SessionNotification, SessionUpdate, ToolCallUpdate, ToolCallUpdateFields,
};
use agent_client_protocol::{Agent, Client, ConnectTo, Error};
use dsh_agent::events::AgentStreamChunk;
use dsh_agent::{Agent as DshAgent, AgentOptions, Agents, CancelCause, CreateAgent, ResumeAgent};
use dsh_approval_api::{ApprovalAnswer, ApprovalAnswerer, ApprovalRequest};
use dsh_kernel::{Ctx, Registration};
use dsh_llm::{Message, StreamChunk};
use dsh_session::plugin::SessionEvent;
use dsh_session::{CoreEvent, EventKind};
use futures::future::BoxFuture;
use parking_lot::Mutex;

/// Errors that stop the ACP server.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// The composition lacks a service the server needs.
    #[error("the composition mounts no `{0}` service (the ACP server needs it)")]
    MissingService(&'static str),
    /// The connection failed.
    #[error("ACP connection: {0}")]
    Connection(String),
}

/// What the server needs to know besides the kernel.
#[derive(Clone, Debug)]
pub struct AcpOptions {
    /// Provider route of new sessions (`None`: the composition's default).
    pub provider: Option<String>,
    /// Model of new sessions.
    pub model: Option<String>,
    /// `agentInfo.version`.
    pub version: String,
    /// Run `bash` through the client's terminal (`terminal/*`) when the client offers it.
    pub client_terminal: bool,
    /// Serve `read`, `write` and `edit` from the client's files (`fs/read_text_file`,
    /// `fs/write_text_file`) when the client offers both (on unless `dsh acp --local-fs`).
    pub client_fs: bool,
}

/// One open session.
struct Open {
    agent: Arc<dyn DshAgent>,
    /// Listeners forwarding its updates; dropped with the entry.
    _registrations: Vec<Registration>,
    /// The session's files served by the client (`fs/*`); dropped with the entry.
    _files: Option<dsh_fs_backend::BackendRegistration>,
    /// Set by `session/cancel` while a prompt runs.
    cancelled: Arc<std::sync::atomic::AtomicBool>,
}

struct State {
    root: Ctx,
    agents: Arc<dyn Agents>,
    options: AcpOptions,
    open: Mutex<HashMap<String, Open>>,
    /// The connection, once the client spoke (permission requests need it).
    connection: Mutex<Option<ConnectionTo<Client>>>,
    /// The client said `clientCapabilities.terminal: true`.
    client_has_terminal: std::sync::atomic::AtomicBool,
    /// The client said `clientCapabilities.fs.readTextFile` and `.writeTextFile: true`.
    client_has_fs: std::sync::atomic::AtomicBool,
}

fn internal(message: impl Into<String>) -> Error {
    Error::new(-32603, message.into())
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(-32602, message.into())
}

/// Serves ACP on `transport` (the binary passes `Stdio`) until the client disconnects; then
/// disposes every agent it opened (each flushes its session).
pub async fn serve(
    root: Ctx,
    options: AcpOptions,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), AcpError> {
    let agents = root
        .get::<dyn Agents>()
        .ok_or(AcpError::MissingService("agents"))?;
    let state = Arc::new(State {
        root,
        agents,
        options,
        open: Mutex::new(HashMap::new()),
        connection: Mutex::new(None),
        client_has_terminal: std::sync::atomic::AtomicBool::new(false),
        client_has_fs: std::sync::atomic::AtomicBool::new(false),
    });
    // Permission questions of this runtime's agents go to the client.
    let answerer: Arc<dyn ApprovalAnswerer> = Arc::new(ClientAnswerer {
        state: Arc::downgrade(&state),
    });
    if let Err(e) = state.root.provide::<dyn ApprovalAnswerer>(answerer) {
        tracing::warn!(error = %e, "another approval answerer is mounted; ACP permission requests are off");
    }
    let s1 = state.clone();
    let s2 = state.clone();
    let s3 = state.clone();
    let s4 = state.clone();
    let s5 = state.clone();
    let result = Agent
        .v1()
        .name("dsh")
        .on_receive_request(
            async move |req: InitializeRequest, responder, connection: ConnectionTo<Client>| {
                *s1.connection.lock() = Some(connection);
                s1.client_has_terminal.store(
                    req.client_capabilities.terminal,
                    std::sync::atomic::Ordering::SeqCst,
                );
                let fs = &req.client_capabilities.fs;
                s1.client_has_fs.store(
                    fs.read_text_file && fs.write_text_file,
                    std::sync::atomic::Ordering::SeqCst,
                );
                responder.respond(
                    InitializeResponse::new(req.protocol_version)
                        .agent_capabilities(
                            AgentCapabilities::new()
                                .load_session(true)
                                .mcp_capabilities(McpCapabilities::new().http(true)),
                        )
                        .agent_info(Implementation::new("dsh", s1.options.version.clone())),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder, connection: ConnectionTo<Client>| {
                *s2.connection.lock() = Some(connection.clone());
                match s2.new_session(req, connection).await {
                    Ok(r) => responder.respond(r),
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest, responder, connection: ConnectionTo<Client>| {
                *s3.connection.lock() = Some(connection.clone());
                match s3.load_session(req, connection).await {
                    Ok(r) => responder.respond(r),
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, _connection: ConnectionTo<Client>| {
                // The turn runs outside the dispatch loop: cancel and permission answers must
                // get through while it runs.
                let state = s4.clone();
                tokio::spawn(async move {
                    let answer = state.prompt(req).await;
                    let _ = match answer {
                        Ok(r) => responder.respond(r),
                        Err(e) => responder.respond_with_error(e),
                    };
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _connection: ConnectionTo<Client>| {
                s5.cancel(&n.session_id);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await;
    let open: Vec<Open> = state.open.lock().drain().map(|(_, o)| o).collect();
    for o in open {
        o.agent.dispose().await;
    }
    *state.connection.lock() = None;
    result.map_err(|e| AcpError::Connection(e.to_string()))
}

fn notify(connection: &ConnectionTo<Client>, session: &str, update: SessionUpdate) {
    if let Err(e) =
        connection.send_notification(SessionNotification::new(SessionId::new(session), update))
    {
        tracing::debug!(error = %e, "session/update not sent");
    }
}

impl State {
    fn options_for(&self, cwd: PathBuf) -> AgentOptions {
        AgentOptions {
            provider: self.options.provider.clone(),
            model: self.options.model.clone(),
            reasoning_effort: None,
            max_tokens: None,
            temperature: None,
            cwd,
        }
    }

    async fn new_session(
        &self,
        req: NewSessionRequest,
        connection: ConnectionTo<Client>,
    ) -> Result<NewSessionResponse, Error> {
        if !req.cwd.is_absolute() || !req.cwd.is_dir() {
            return Err(invalid(format!(
                "cwd must be an absolute directory, got {}",
                req.cwd.display()
            )));
        }
        let servers = mcp::configs(&req.mcp_servers).map_err(|e| invalid(e.to_string()))?;
        let agent = self
            .agents
            .create(
                &self.root,
                CreateAgent {
                    session_id: None,
                    label: Some("acp".into()),
                    options: self.options_for(req.cwd.clone()),
                    setup: None,
                },
            )
            .await
            .map_err(|e| internal(e.to_string()))?;
        let id = agent.id().to_owned();
        if let Err(e) = mcp::mount(&self.root, &agent, servers).await {
            agent.dispose().await;
            return Err(internal(e.to_string()));
        }
        self.attach(agent, connection)?;
        Ok(NewSessionResponse::new(id))
    }

    async fn load_session(
        &self,
        req: LoadSessionRequest,
        connection: ConnectionTo<Client>,
    ) -> Result<LoadSessionResponse, Error> {
        let id = req.session_id.0.to_string();
        if self.open.lock().contains_key(&id) {
            return Err(invalid(format!("session {id} is already open")));
        }
        let servers = mcp::configs(&req.mcp_servers).map_err(|e| invalid(e.to_string()))?;
        let agent = self
            .agents
            .resume(
                &self.root,
                ResumeAgent {
                    session_id: id.clone(),
                    options: self.options_for(req.cwd.clone()),
                    setup: None,
                },
            )
            .await
            .map_err(|e| match e {
                dsh_agent::AgentError::NotFound(_) => {
                    Error::new(-32002, format!("no stored session {id}"))
                }
                other => internal(other.to_string()),
            })?;
        if let Err(e) = mcp::mount(&self.root, &agent, servers).await {
            agent.dispose().await;
            return Err(internal(e.to_string()));
        }
        // Replay the conversation before answering, in log order.
        let mut cards = cards(&self.root, &*agent);
        for e in agent.session().events() {
            match e.core() {
                // What the user typed; plugin context (runtime-context snapshots) is not.
                Some(CoreEvent::UserMessage(m)) if m.0.source.kind == "user" => {
                    let text = m.0.text();
                    if !text.is_empty() {
                        notify(
                            &connection,
                            &id,
                            SessionUpdate::UserMessageChunk(updates::text_chunk(&text)),
                        );
                    }
                }
                Some(CoreEvent::AssistantMessage(m)) => {
                    let thought = m.message.reasoning();
                    if !thought.is_empty() {
                        notify(
                            &connection,
                            &id,
                            SessionUpdate::AgentThoughtChunk(updates::text_chunk(&thought)),
                        );
                    }
                    let text = m.message.text();
                    if !text.is_empty() {
                        notify(
                            &connection,
                            &id,
                            SessionUpdate::AgentMessageChunk(updates::text_chunk(&text)),
                        );
                    }
                }
                Some(CoreEvent::ToolCallEvent(c)) => {
                    notify(&connection, &id, cards.call(c));
                }
                Some(CoreEvent::ToolResult(r)) => {
                    if let Some(u) = cards.result(r) {
                        notify(&connection, &id, u);
                    }
                }
                _ => {}
            }
        }
        self.attach(agent, connection)?;
        Ok(LoadSessionResponse::new())
    }

    /// Forwards the agent's live output to the client and records the session as open.
    fn attach(
        &self,
        agent: Arc<dyn DshAgent>,
        connection: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let id: Arc<str> = Arc::from(agent.id());
        if self.options.client_terminal
            && self
                .client_has_terminal
                .load(std::sync::atomic::Ordering::SeqCst)
        {
            let tools = self
                .root
                .get::<dyn dsh_tools::Tools>()
                .ok_or_else(|| internal("the composition mounts no `tools` service"))?;
            tools
                .register(agent.ctx(), terminal::bash_tool(connection.clone(), &id))
                .map_err(|e| internal(format!("cannot route bash to the client: {e}")))?;
        }
        let files = self.client_files(&connection, &id);
        let c1 = connection.clone();
        let i1 = id.clone();
        let chunks = self
            .root
            .on::<AgentStreamChunk>(move |e| {
                if *e.agent_id != *i1 {
                    return Ok(());
                }
                match &e.chunk {
                    StreamChunk::TextDelta { text, .. } if !text.is_empty() => notify(
                        &c1,
                        &i1,
                        SessionUpdate::AgentMessageChunk(updates::text_chunk(text)),
                    ),
                    StreamChunk::ReasoningDelta { text, .. } if !text.is_empty() => notify(
                        &c1,
                        &i1,
                        SessionUpdate::AgentThoughtChunk(updates::text_chunk(text)),
                    ),
                    _ => {}
                }
                Ok(())
            })
            .map_err(|e| internal(e.to_string()))?;
        let c2 = connection;
        let i2 = id.clone();
        let cards = Mutex::new(cards(&self.root, &*agent));
        let events = self
            .root
            .on::<SessionEvent>(move |e| {
                if e.session_id != i2 {
                    return Ok(());
                }
                let update = match e.event.core() {
                    Some(CoreEvent::ToolCallEvent(c)) => Some(cards.lock().call(c)),
                    Some(CoreEvent::ToolResult(r)) => cards.lock().result(r),
                    _ => None,
                };
                if let Some(u) = update {
                    notify(&c2, &i2, u);
                }
                Ok(())
            })
            .map_err(|e| internal(e.to_string()))?;
        self.open.lock().insert(
            id.to_string(),
            Open {
                agent,
                _registrations: vec![chunks, events],
                _files: files,
                cancelled: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            },
        );
        Ok(())
    }

    /// Routes the session's `read`/`write`/`edit` through the client's `fs/*` when it offers
    /// both methods and the server was not told to keep them local.
    fn client_files(
        &self,
        connection: &ConnectionTo<Client>,
        id: &str,
    ) -> Option<dsh_fs_backend::BackendRegistration> {
        if !self.options.client_fs || !self.client_has_fs.load(std::sync::atomic::Ordering::SeqCst)
        {
            return None;
        }
        // No file tools mounted: nothing to route.
        let backends = self.root.get::<dsh_fs_backend::FileBackends>()?;
        let files = Arc::new(files::ClientFiles {
            connection: connection.clone(),
            session: id.to_owned(),
        });
        Some(backends.set(id, files))
    }

    async fn prompt(&self, req: PromptRequest) -> Result<PromptResponse, Error> {
        let id = req.session_id.0.to_string();
        let (agent, cancelled) = {
            let open = self.open.lock();
            let o = open
                .get(&id)
                .ok_or_else(|| invalid(format!("unknown session: {id}")))?;
            (o.agent.clone(), o.cancelled.clone())
        };
        if agent.status() == dsh_agent::AgentStatus::Running {
            return Err(invalid("a prompt is already running in this session"));
        }
        let text = prompt_text(&req.prompt)?;
        cancelled.store(false, std::sync::atomic::Ordering::SeqCst);
        let from = agent.session().len();
        agent
            .followup(Message::user_text("", text))
            .map_err(|e| internal(e.to_string()))?;
        // The waking send made the agent busy: idle now means this prompt's turn is over.
        agent.when_idle().await;
        let reason = agent.session().with_events_since(from, |events| {
            events.iter().rev().find_map(|e| match e.core() {
                Some(CoreEvent::TurnEnd(end)) if *e.event_kind() == EventKind::TurnEnd => {
                    Some(end.reason.clone())
                }
                _ => None,
            })
        });
        let was_cancelled = cancelled.swap(false, std::sync::atomic::Ordering::SeqCst);
        updates::stop_reason(reason.as_ref(), was_cancelled)
            .map(PromptResponse::new)
            .map_err(|e| internal(e.to_string()))
    }

    fn cancel(&self, session: &SessionId) {
        let open = self.open.lock();
        if let Some(o) = open.get(&*session.0) {
            o.cancelled.store(true, std::sync::atomic::Ordering::SeqCst);
            // Delivered text is kept: the loop commits it as an interrupted message.
            o.agent.cancel(CancelCause::User, false);
        }
    }
}

/// The tool cards of `agent`'s session, described by the tools it sees (the generic display
/// when the composition mounts no `tools` service).
fn cards(root: &Ctx, agent: &dyn DshAgent) -> updates::Cards {
    let tools = root.get::<dyn dsh_tools::Tools>();
    let scope = agent.ctx().scope_key();
    let display: updates::Displayer = Box::new(move |call| match &tools {
        Some(t) => t.display(scope.as_ref(), call),
        None => dsh_tools::generic_display(call),
    });
    updates::Cards::new(display, agent.options().cwd)
}

/// The prompt as one user text: text blocks in order, resource links flattened.
fn prompt_text(blocks: &[ContentBlock]) -> Result<String, Error> {
    let mut parts = Vec::new();
    for b in blocks {
        match b {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::ResourceLink(l) => parts.push(format!(
                "[resource_link name=\"{}\" uri=\"{}\"]",
                l.name, l.uri
            )),
            _ => {
                return Err(invalid(
                    "only text and resource_link prompt blocks are supported",
                ));
            }
        }
    }
    let text = parts.join("\n");
    if text.trim().is_empty() {
        return Err(invalid("the prompt is empty"));
    }
    Ok(text)
}

/// The approval seam answered by the client's `session/request_permission`.
struct ClientAnswerer {
    state: std::sync::Weak<State>,
}

impl ApprovalAnswerer for ClientAnswerer {
    fn answer<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async move {
            let Some(state) = self.state.upgrade() else {
                return ApprovalAnswer::Cancelled;
            };
            let Some(connection) = state.connection.lock().clone() else {
                return ApprovalAnswer::Deny {
                    reason: Some("no ACP client is connected".into()),
                };
            };
            let tool_call = ToolCallUpdate::new(
                request.call_id.clone(),
                ToolCallUpdateFields::new()
                    .title(format!("{}: {}", request.tool_name, request.reason))
                    .raw_input(Some(request.arguments.clone())),
            );
            let ask = RequestPermissionRequest::new(
                SessionId::new(request.session_id.as_str()),
                tool_call,
                vec![
                    PermissionOption::new(
                        "allow-once",
                        "Allow once",
                        PermissionOptionKind::AllowOnce,
                    ),
                    PermissionOption::new(
                        "allow-always",
                        "Always allow",
                        PermissionOptionKind::AllowAlways,
                    ),
                    PermissionOption::new(
                        "reject-once",
                        "Reject",
                        PermissionOptionKind::RejectOnce,
                    ),
                ],
            );
            match connection.send_request(ask).block_task().await {
                Ok(r) => match r.outcome {
                    RequestPermissionOutcome::Selected(s) => match &*s.option_id.0 {
                        "allow-once" => ApprovalAnswer::AllowOnce,
                        "allow-always" => ApprovalAnswer::AllowAlways,
                        _ => ApprovalAnswer::Deny {
                            reason: Some("the user rejected it".into()),
                        },
                    },
                    RequestPermissionOutcome::Cancelled => ApprovalAnswer::Cancelled,
                    _ => ApprovalAnswer::Cancelled,
                },
                // A failed request fails closed.
                Err(e) => ApprovalAnswer::Deny {
                    reason: Some(format!("the permission request failed: {e}")),
                },
            }
        })
    }
}
