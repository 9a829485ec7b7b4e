//! The serve loop: reads frames, runs the methods on the `Agents` service, streams every session
//! event and agent status as notifications, and tears down on `shutdown` or end of input.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_agent::events::AgentStatusChanged;
use dsh_agent::{Agent, AgentError, AgentOptions, AgentStatus, Agents, CreateAgent, ResumeAgent};
use dsh_kernel::{Ctx, Registration};
use dsh_llm::{CallSettings, Llm, Message, MessageSource, ReasoningEffort, Role};
use dsh_session::NewEvent;
use dsh_session::feature::WorkingDirectoryChange;
use dsh_session::plugin::SessionEvent;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

use crate::frame::{self, ErrorCode, Incoming, Line, LineSplitter};
use crate::output::{Out, write_loop};
use crate::protocol::{
    CwdResult, InitializeParams, InitializeResult, Method, PromptParams, PromptResult, ServerInfo,
    SessionParams, SetWorkingDirectoryParams, SubagentFinishedParams, SubagentStartedParams,
    SubagentStatus, WireStatus,
};
use crate::{SdkServerConfig, aliases};
use dsh_subagent_api::StopReason;
use dsh_subagent_api::events::{SubagentFinished, SubagentStarted};

/// How a serve run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServeEnd {
    /// The client called `shutdown`.
    Shutdown,
    /// stdin reached end of file (or failed).
    InputClosed,
    /// stdout could not be written any more.
    OutputClosed,
    /// The `stop` future resolved (SIGTERM, SIGINT): the same orderly teardown as end of input.
    Stopped,
}

/// Errors that stop the server before it serves.
#[derive(Debug, thiserror::Error)]
pub enum SdkServerError {
    /// The composition lacks a service the runtime needs.
    #[error("the composition mounts no `{0}` service (the SDK runtime needs it)")]
    MissingService(&'static str),
    /// A listener could not be registered.
    #[error(transparent)]
    Kernel(#[from] dsh_kernel::KernelError),
}

/// A failed method: answered as an error response with the message.
struct MethodError(String);

impl From<AgentError> for MethodError {
    fn from(e: AgentError) -> Self {
        MethodError(e.to_string())
    }
}

/// The route fixed by `initialize`.
#[derive(Clone, Debug)]
struct Route {
    cwd: PathBuf,
    provider: String,
    model: Option<String>,
    effort: Option<ReasoningEffort>,
    max_tokens: Option<u64>,
}

struct Server {
    root: Ctx,
    agents: Arc<dyn Agents>,
    llm: Option<Arc<dyn Llm>>,
    config: SdkServerConfig,
    route: Option<Route>,
    /// Sessions this runtime opened, by id.
    open: HashMap<String, Arc<dyn Agent>>,
}

/// Serves the SDK protocol on `input`/`output` until `shutdown`, end of input, a closed output
/// or `stop`; then disposes every agent it opened (each flushes its session) and returns.
pub async fn serve<R, W>(
    root: Ctx,
    input: R,
    output: W,
    config: SdkServerConfig,
    stop: impl std::future::Future<Output = ()>,
) -> Result<ServeEnd, SdkServerError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut stop = std::pin::pin!(stop);
    let agents = root
        .get::<dyn Agents>()
        .ok_or(SdkServerError::MissingService("agents"))?;
    let llm = root.get::<dyn Llm>();
    let (tx, rx) = mpsc::unbounded_channel::<Out>();
    let (closed_tx, mut closed_rx) = watch::channel(false);
    let writer = tokio::spawn(write_loop(output, rx, closed_tx));
    let registrations = listen(&root, &tx)?;
    let permits = Arc::new(Semaphore::new(config.max_pending_responses.max(1)));
    let mut server = Server {
        root,
        agents,
        llm,
        config,
        route: None,
        open: HashMap::new(),
    };

    let mut input = input;
    let mut splitter = LineSplitter::new(server.config.max_line_bytes);
    let mut buf = vec![0u8; 64 * 1024];
    let mut lines = Vec::new();
    let end = 'serve: loop {
        let n = tokio::select! {
            r = input.read(&mut buf) => match r {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "reading stdin failed");
                    0
                }
            },
            _ = closed_rx.wait_for(|c| *c) => break 'serve ServeEnd::OutputClosed,
            () = &mut stop => break 'serve ServeEnd::Stopped,
        };
        if n == 0 {
            if let Some(last) = splitter.finish() {
                lines.push(last);
            }
        } else {
            splitter.push(&buf[..n], &mut lines);
        }
        for line in lines.drain(..) {
            // A response waits for a free slot in the output queue: a client that stops
            // reading stops being read.
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break 'serve ServeEnd::OutputClosed;
            };
            let incoming = match line {
                Line::Complete(bytes) => frame::parse_line(&bytes),
                Line::TooLong => Incoming::Invalid {
                    id: None,
                    code: ErrorCode::InvalidRequest,
                    message: format!(
                        "invalid request: a frame is longer than {} bytes",
                        server.config.max_line_bytes
                    ),
                },
            };
            match incoming {
                Incoming::Blank | Incoming::Response => {}
                Incoming::Notification { method } => {
                    tracing::debug!(%method, "ignoring a client notification");
                }
                Incoming::Invalid { id, code, message } => {
                    tracing::warn!(%message, "bad frame from the client");
                    let line = frame::error_response(id.as_ref(), code, &message);
                    let _ = tx.send(Out::Line {
                        text: line,
                        _permit: Some(permit),
                    });
                }
                Incoming::Request { id, method, params } => {
                    let shutdown = method == Method::Shutdown.name();
                    let result = server.handle(&method, params).await;
                    let line = match result {
                        Ok(v) => frame::response(&id, &v),
                        Err(MethodError(m)) => {
                            frame::error_response(Some(&id), ErrorCode::Internal, &m)
                        }
                    };
                    let _ = tx.send(Out::Line {
                        text: line,
                        _permit: Some(permit),
                    });
                    if shutdown {
                        flush(&tx).await;
                        break 'serve ServeEnd::Shutdown;
                    }
                }
            }
        }
        if n == 0 {
            break ServeEnd::InputClosed;
        }
    };
    // Teardown: every agent this runtime opened is disposed (its turn cancelled, its closing
    // events committed and flushed); what they emit on the way out is still written.
    let agents: Vec<Arc<dyn Agent>> = server.open.drain().map(|(_, a)| a).collect();
    futures_join_all(agents.iter().map(|a| a.dispose())).await;
    for r in registrations {
        r.dispose();
    }
    drop(tx);
    let _ = writer.await;
    Ok(end)
}

/// Awaits the futures one after another (disposal is flush-bound, not CPU-bound).
async fn futures_join_all<F: std::future::Future<Output = ()>>(futs: impl Iterator<Item = F>) {
    for f in futs {
        f.await;
    }
}

async fn flush(tx: &mpsc::UnboundedSender<Out>) {
    let (done, wait) = oneshot::channel();
    if tx.send(Out::Flush(done)).is_ok() {
        let _ = wait.await;
    }
}

/// Streams every committed session event and every agent status change into the queue.
fn listen(
    root: &Ctx,
    tx: &mpsc::UnboundedSender<Out>,
) -> Result<Vec<Registration>, SdkServerError> {
    let events = tx.clone();
    let a = root.on::<SessionEvent>(move |e| {
        let _ = events.send(Out::Event(e.session_id.clone(), e.event.clone()));
        Ok(())
    })?;
    let status = tx.clone();
    let b = root.on::<AgentStatusChanged>(move |e| {
        let wire = match e.status {
            AgentStatus::Idle => WireStatus::Idle,
            AgentStatus::Running => WireStatus::Running,
            AgentStatus::Disposed => return Ok(()),
        };
        let _ = status.send(Out::Status(Arc::from(e.agent_id.as_str()), wire));
        Ok(())
    })?;
    let started = tx.clone();
    let c = root.on::<SubagentStarted>(move |e| {
        let params = SubagentStartedParams {
            parent_session_id: e.parent_id.clone(),
            child_session_id: e.child_id.clone(),
            label: e.label.clone(),
            mode: "one-shot",
            provider: e.mode.provider(),
        };
        notification(&started, "subagent.started", &params);
        Ok(())
    })?;
    let finished = tx.clone();
    let d = root.on::<SubagentFinished>(move |e| {
        let o = &e.outcome;
        let params = SubagentFinishedParams {
            provider: e.mode.provider(),
            agent_id: o.child_id.clone(),
            parent_session_id: e.parent_id.clone(),
            child_session_id: o.child_id.clone(),
            status: if o.stop_reason == StopReason::Completed {
                SubagentStatus::Ok
            } else {
                SubagentStatus::Error
            },
            stop_reason: o.stop_reason.as_str(),
            last_assistant_message: Some(o.output.clone()).filter(|t| !t.is_empty()),
        };
        notification(&finished, "subagent.finished", &params);
        Ok(())
    })?;
    Ok(vec![a, b, c, d])
}

/// Queues a notification (unbounded like events: their number follows the agents' work, not
/// the client's requests).
fn notification<T: serde::Serialize>(tx: &mpsc::UnboundedSender<Out>, method: &str, params: &T) {
    match serde_json::to_string(params) {
        Ok(p) => {
            let _ = tx.send(Out::Line {
                text: frame::notification_raw(method, &p),
                _permit: None,
            });
        }
        Err(error) => tracing::warn!(%error, "cannot encode {method}"),
    }
}

fn params<T: DeserializeOwned>(method: Method, params: Value) -> Result<T, MethodError> {
    serde_json::from_value(params)
        .map_err(|e| MethodError(format!("invalid params for {}: {e}", method.name())))
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, MethodError> {
    serde_json::to_value(v).map_err(|e| MethodError(format!("cannot encode the result: {e}")))
}

impl Server {
    async fn handle(&mut self, method: &str, raw: Value) -> Result<Value, MethodError> {
        let Some(m) = Method::parse(method) else {
            return Err(MethodError(format!(
                "unknown DeepSeek Harness SDK runtime method: {method}"
            )));
        };
        match m {
            Method::Initialize => self.initialize(params(m, raw)?),
            Method::Shutdown => Ok(Value::Object(Default::default())),
            Method::Prompt => self.prompt(params(m, raw)?).await,
            Method::Resume => self.resume(params(m, raw)?).await,
            Method::WorkingDirectoryGet => {
                let p: SessionParams = params(m, raw)?;
                let agent = self.agent(&p.session_id, m).await?;
                let cwd = current_cwd(&agent)?;
                to_value(&CwdResult {
                    cwd: cwd.display().to_string(),
                })
            }
            Method::WorkingDirectorySet => {
                let p: SetWorkingDirectoryParams = params(m, raw)?;
                let agent = self.agent(&p.session_id, m).await?;
                let base = current_cwd(&agent)?;
                let target = resolve_dir(&base, &p.path)?;
                change_cwd(&agent, target.clone())?;
                to_value(&CwdResult {
                    cwd: target.display().to_string(),
                })
            }
        }
    }

    fn initialize(&mut self, p: InitializeParams) -> Result<Value, MethodError> {
        if self.route.is_some() {
            return Err(MethodError(
                "the runtime is already initialized (reinitialization is unsupported)".into(),
            ));
        }
        let cwd = PathBuf::from(&p.cwd);
        if !cwd.is_absolute() {
            return Err(MethodError(format!(
                "initialize: cwd must be an absolute path, got \"{}\"",
                p.cwd
            )));
        }
        if !cwd.is_dir() {
            return Err(MethodError(format!(
                "initialize: cwd \"{}\" is not a directory",
                p.cwd
            )));
        }
        let max_tokens = match &p.max_tokens {
            None => None,
            Some(n) => match n.as_u64().filter(|v| *v > 0 && *v < (1u64 << 53)) {
                Some(v) => Some(v),
                None => {
                    return Err(MethodError(format!(
                        "initialize: maxTokens must be a positive safe integer, got {n}"
                    )));
                }
            },
        };
        let effort = match p.reasoning_effort.as_deref() {
            None => None,
            Some("") => {
                return Err(MethodError(
                    "initialize: reasoningEffort must be a non-empty string".into(),
                ));
            }
            Some(e) => Some(ReasoningEffort::from_wire(e)),
        };
        let provider = p
            .provider
            .unwrap_or_else(|| aliases::CLIENT_PROVIDER.into());
        let model = p.model;
        let route = self.resolve_route(provider, model, effort, max_tokens, cwd)?;
        tracing::info!(provider = %route.provider, model = ?route.model, "SDK runtime initialized");
        self.route = Some(route);
        to_value(&InitializeResult {
            server_info: ServerInfo {
                name: self.config.server_name.clone(),
                version: self.config.server_version.clone(),
            },
        })
    }

    /// Maps the client's provider and model names onto mounted routes and validates them with
    /// the route's own checks (`prepare_call`), so a bad route fails here, not on the first
    /// prompt.
    fn resolve_route(
        &self,
        provider: String,
        model: Option<String>,
        effort: Option<ReasoningEffort>,
        max_tokens: Option<u64>,
        cwd: PathBuf,
    ) -> Result<Route, MethodError> {
        let Some(llm) = &self.llm else {
            return Err(MethodError(
                "the composition mounts no `llm` service".into(),
            ));
        };
        let routes = llm.routes();
        let provider = aliases::provider(&provider, &routes).ok_or_else(|| {
            MethodError(format!("no adapter registered for provider \"{provider}\""))
        })?;
        let check = |model: Option<String>| {
            llm.prepare_call(&CallSettings {
                provider: provider.clone(),
                model,
                effort: effort.clone(),
                max_tokens,
                ..Default::default()
            })
        };
        // The original's model names are served under dsh's ids (`deepseek-v4-flash` is
        // `deepseek-flash`).
        let model = model.map(|m| aliases::model(&m).map(str::to_owned).unwrap_or(m));
        if let Err(e) = check(model.clone()) {
            return Err(MethodError(format!(
                "initialize: {} ({})",
                e.message,
                e.code.as_str()
            )));
        }
        Ok(Route {
            cwd,
            provider,
            model,
            effort,
            max_tokens,
        })
    }

    fn route(&self, m: Method) -> Result<&Route, MethodError> {
        self.route
            .as_ref()
            .ok_or_else(|| MethodError(format!("initialize must be called before {}", m.name())))
    }

    fn options(&self, route: &Route) -> AgentOptions {
        AgentOptions {
            provider: Some(route.provider.clone()),
            model: route.model.clone(),
            reasoning_effort: route.effort.clone(),
            max_tokens: route.max_tokens,
            temperature: None,
            cwd: route.cwd.clone(),
        }
    }

    /// The session's agent, created (or its stored session opened) on first use.
    async fn agent(&mut self, id: &str, m: Method) -> Result<Arc<dyn Agent>, MethodError> {
        let route = self.route(m)?.clone();
        if id.is_empty() {
            return Err(MethodError(format!(
                "{}: sessionId must be non-empty",
                m.name()
            )));
        }
        if let Some(a) = self.open.get(id) {
            return Ok(a.clone());
        }
        let agent = self
            .agents
            .create(
                &self.root,
                CreateAgent {
                    session_id: Some(id.to_owned()),
                    label: None,
                    options: self.options(&route),
                    setup: None,
                },
            )
            .await?;
        restore_cwd(&agent)?;
        self.open.insert(id.to_owned(), agent.clone());
        Ok(agent)
    }

    async fn prompt(&mut self, p: PromptParams) -> Result<Value, MethodError> {
        if p.content_blocks.is_empty() {
            return Err(MethodError(
                "session/prompt: contentBlocks must not be empty".into(),
            ));
        }
        let agent = self.agent(&p.session_id, Method::Prompt).await?;
        let message = Message::new("", Role::User, p.content_blocks, MessageSource::user());
        let message_id = agent.followup(message)?;
        to_value(&PromptResult { message_id })
    }

    async fn resume(&mut self, p: SessionParams) -> Result<Value, MethodError> {
        let route = self.route(Method::Resume)?.clone();
        if self.open.contains_key(&p.session_id) {
            return Err(MethodError(format!(
                "session/resume: session \"{}\" is already open in this runtime",
                p.session_id
            )));
        }
        let mut options = self.options(&route);
        // The stored directory is kept: an empty cwd lets the factory use the session's own.
        options.cwd = PathBuf::new();
        let agent = self
            .agents
            .resume(
                &self.root,
                ResumeAgent {
                    session_id: p.session_id.clone(),
                    options,
                    setup: None,
                },
            )
            .await
            .map_err(|e| match e {
                AgentError::NotFound(_) => MethodError(format!(
                    "session/resume: no stored session \"{}\"",
                    p.session_id
                )),
                other => MethodError(format!("session/resume: {other}")),
            })?;
        restore_cwd(&agent)?;
        self.open.insert(p.session_id, agent);
        Ok(Value::Object(Default::default()))
    }
}

/// The session's effective directory: its current one, or its origin when that vanished.
fn current_cwd(agent: &Arc<dyn Agent>) -> Result<PathBuf, MethodError> {
    let cwd = agent.options().cwd;
    if cwd.is_dir() {
        return Ok(cwd);
    }
    let origin = agent
        .session()
        .header()
        .cwd
        .map(PathBuf::from)
        .filter(|p| p.is_dir());
    match origin {
        Some(o) => {
            change_cwd(agent, o.clone())?;
            Ok(o)
        }
        None => Err(MethodError(format!(
            "the working directory {} no longer exists",
            cwd.display()
        ))),
    }
}

/// Moves the agent to `cwd` and records it: `working-directory/change {cwd}` in the log (so a
/// resumed session starts there) and a one-line notice for the model's next request, as the
/// original does. Unchanged directories record nothing.
fn change_cwd(agent: &Arc<dyn Agent>, cwd: PathBuf) -> Result<(), MethodError> {
    if agent.options().cwd == cwd {
        return Ok(());
    }
    agent.set_cwd(cwd.clone())?;
    let text = cwd.display().to_string();
    let event = NewEvent::plugin(&WorkingDirectoryChange { cwd: text.clone() })
        .map_err(|e| MethodError(format!("cannot encode working-directory/change: {e}")))?;
    agent
        .session()
        .append(event)
        .map_err(|e| MethodError(format!("cannot log working-directory/change: {e}")))?;
    let notice = Message::new(
        "",
        Role::User,
        vec![dsh_llm::ContentBlock::text(format!(
            "The working directory is now {text}."
        ))],
        MessageSource::new("working-directory").with("form", Value::from("notice")),
    );
    agent.inject(notice)?;
    Ok(())
}

/// A stored session continues in its latest logged directory (nothing is logged again).
fn restore_cwd(agent: &Arc<dyn Agent>) -> Result<(), MethodError> {
    if let Some(cwd) = logged_cwd(agent)
        && agent.options().cwd != cwd
    {
        agent.set_cwd(cwd)?;
    }
    Ok(())
}

/// The latest `working-directory/change` of a stored session, when that directory still
/// exists: where a resumed session continues.
fn logged_cwd(agent: &Arc<dyn Agent>) -> Option<PathBuf> {
    let latest = agent.session().with_log(|l| {
        l.events()
            .iter()
            .rev()
            .find_map(|e| e.plugin::<WorkingDirectoryChange>().and_then(Result::ok))
    })?;
    Some(PathBuf::from(latest.cwd)).filter(|p| p.is_dir())
}

/// `path` (absolute, or relative to `base`) as an existing absolute directory.
fn resolve_dir(base: &Path, path: &str) -> Result<PathBuf, MethodError> {
    if path.is_empty() {
        return Err(MethodError(
            "session/working-directory/set: path must be non-empty".into(),
        ));
    }
    let joined = base.join(path);
    let canonical = joined.canonicalize().map_err(|e| {
        MethodError(format!(
            "session/working-directory/set: {}: {e}",
            joined.display()
        ))
    })?;
    if !canonical.is_dir() {
        return Err(MethodError(format!(
            "session/working-directory/set: {} is not a directory",
            canonical.display()
        )));
    }
    Ok(canonical)
}
