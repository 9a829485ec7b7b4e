//! The Agent handle and its vocabulary.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx};
use dsh_llm::Message;
use dsh_session::Session;
use dsh_session::data::AbortCause;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

/// Which pending list a sent message joins (format §11): the session's one inbox target type.
pub use dsh_session::Target;

/// Whether an agent is working.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentStatus {
    /// Waiting for input.
    Idle,
    /// Running a turn.
    Running,
    /// Torn down.
    Disposed,
}

/// Why an agent's current activity is cancelled. The first cause of a turn wins.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CancelCause {
    /// The user (Ctrl-C, an editor's stop button).
    User,
    /// The parent agent.
    Parent,
    /// A plugin, with its reason.
    Hook {
        /// Why.
        reason: String,
    },
    /// The agent is being disposed.
    Disposed,
}

impl From<CancelCause> for AbortCause {
    fn from(c: CancelCause) -> Self {
        match c {
            CancelCause::User => AbortCause::User,
            CancelCause::Parent => AbortCause::Parent,
            CancelCause::Hook { reason } => AbortCause::Hook { reason },
            CancelCause::Disposed => AbortCause::Disposed,
        }
    }
}

/// The model route and workspace of an agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentOptions {
    /// Provider route, e.g. `deepseek`.
    pub provider: Option<String>,
    /// Model id (`None`: the adapter's default).
    pub model: Option<String>,
    /// Reasoning effort (`None`: the adapter's default); the route validates it once, in
    /// `prepare_call`.
    pub reasoning_effort: Option<dsh_llm::ReasoningEffort>,
    /// Per-request output-token cap (`None`: the adapter's default).
    pub max_tokens: Option<u64>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Working directory of the session.
    pub cwd: PathBuf,
}

/// Errors of the agent API.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The agent was disposed.
    #[error("agent `{0}` is disposed")]
    Disposed(String),
    /// A message that cannot be sent (wrong role, content that is not JSON-safe).
    #[error("invalid message: {0}")]
    InvalidMessage(String),
    /// No agent loop is mounted to create agents.
    #[error("no agent factory is mounted (mount the agent loop plugin)")]
    NoFactory,
    /// An agent with that id is already running.
    #[error("agent `{0}` already exists")]
    Exists(String),
    /// No agent or session with that id.
    #[error("no agent or session `{0}`")]
    NotFound(String),
    /// The session layer refused (e.g. `SESSION_LOCKED`).
    #[error(transparent)]
    Session(#[from] dsh_session::SessionError),
    /// The setup callback failed; nothing was published.
    #[error("agent setup failed: {0}")]
    Setup(String),
    /// A kernel registration failed.
    #[error(transparent)]
    Kernel(#[from] dsh_kernel::KernelError),
    /// The driver does not support the operation.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// A setup callback: scoped registrations for a new agent before it is published.
pub type SetupFn =
    Box<dyn FnOnce(Ctx, Arc<dyn Agent>) -> BoxFuture<'static, Result<(), BoxError>> + Send>;

/// What `Agents::create` needs.
#[derive(Default)]
pub struct CreateAgent {
    /// Exact session id: created if new, resumed if it exists (`None`: a fresh id).
    pub session_id: Option<String>,
    /// Prefix of a fresh id (`<label>-session-<uuid>`), used when `session_id` is `None`.
    pub label: Option<String>,
    /// Route and workspace.
    pub options: AgentOptions,
    /// Scoped registrations run before the agent is published.
    pub setup: Option<SetupFn>,
}

/// The session a brand-new agent starts on, made by the factory itself, so the agent is
/// created (`agent/session-start {resumed: false}`), never resumed: a child session with its
/// lineage (`parentSession`, `origin`, `delegationDepth`, `agentPreset`), or a fork seeded
/// with another session's completed turns.
#[derive(Clone, Debug)]
pub enum SessionSeed {
    /// A new session with these header fields.
    Create(dsh_session::CreateOptions),
    /// A fork of stored or open session `from` (format §12).
    Fork {
        /// The session forked.
        from: String,
        /// Boundary, child id, cwd, subagent marking.
        options: dsh_session::ForkOptions,
    },
}

/// What `Agents::resume` needs.
#[derive(Default)]
pub struct ResumeAgent {
    /// The stored session to continue.
    pub session_id: String,
    /// Route and workspace for the resumed agent (the workspace defaults to the session's).
    pub options: AgentOptions,
    /// Scoped registrations run before the agent is published.
    pub setup: Option<SetupFn>,
}

impl std::fmt::Debug for CreateAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateAgent")
            .field("session_id", &self.session_id)
            .field("options", &self.options)
            .finish()
    }
}

impl std::fmt::Debug for ResumeAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResumeAgent")
            .field("session_id", &self.session_id)
            .field("options", &self.options)
            .finish()
    }
}

/// One running agent. Its id is its session id.
pub trait Agent: Send + Sync + 'static {
    /// The agent id (= session id).
    fn id(&self) -> &str;

    /// Current route and workspace.
    fn options(&self) -> AgentOptions;

    /// The session the agent writes.
    fn session(&self) -> Arc<Session>;

    /// Idle, running or disposed.
    fn status(&self) -> AgentStatus;

    /// The agent's scope: registrations through it are visible only to this agent and are
    /// disposed with it.
    fn ctx(&self) -> &Ctx;

    /// Cancels the current activity. Unless `keep_inbox`, pending input is discarded. The first
    /// cause of a turn wins; cancelling an idle agent is a no-op.
    fn cancel(&self, cause: CancelCause, keep_inbox: bool);

    /// Resolves when the agent is idle with nothing to do (or disposed).
    fn when_idle(&self) -> BoxFuture<'static, ()>;

    /// Queues a user message (role user) on `target`; `wakeup` starts a turn when idle. Returns
    /// the message id.
    fn send(&self, message: Message, target: Target, wakeup: bool) -> Result<String, AgentError>;

    /// Tears the agent down: cancels with cause `disposed`, commits the closing events, flushes
    /// and releases the session.
    fn dispose(&self) -> BoxFuture<'static, ()>;

    /// Changes the working directory later tool calls and prompts use (front ends validate
    /// the directory first). Running processes keep theirs; the session's origin is
    /// unchanged. Drivers that cannot change it keep the default, which refuses.
    fn set_cwd(&self, cwd: PathBuf) -> Result<(), AgentError> {
        let _ = cwd;
        Err(AgentError::Unsupported(
            "this agent driver cannot change the working directory".into(),
        ))
    }
}

impl dyn Agent {
    /// A prompt for its own turn (next-turn, wakes the agent).
    pub fn followup(&self, message: Message) -> Result<String, AgentError> {
        self.send(message, Target::NextTurn, true)
    }

    /// Steering for the next step of the current turn (starts a turn when idle).
    pub fn steer(&self, message: Message) -> Result<String, AgentError> {
        self.send(message, Target::NextStep, true)
    }

    /// Context for the next request, without starting a turn.
    pub fn inject(&self, message: Message) -> Result<String, AgentError> {
        self.send(message, Target::NextStep, false)
    }
}
