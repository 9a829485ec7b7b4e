//! Why a workflow run stopped without a value.

/// A run that did not return a value: a limit, a cancellation, the script's own error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WorkflowError {
    /// The wall-time limit passed.
    #[error(
        "workflow stopped: it ran past its wall-time limit of {ms} ms (maxWallMs); its sub-agents were cancelled"
    )]
    WallTime {
        /// The limit.
        ms: u64,
    },
    /// The script's heap passed the memory limit.
    #[error(
        "workflow stopped: the script ran out of memory (limit {bytes} bytes, maxMemoryBytes); its sub-agents were cancelled"
    )]
    Memory {
        /// The limit.
        bytes: u64,
    },
    /// The script tried to start more sub-agents than allowed.
    #[error(
        "workflow stopped: it tried to start more than {max} sub-agents (maxAgents); its sub-agents were cancelled"
    )]
    Agents {
        /// The limit.
        max: u64,
    },
    /// The sub-agents' tokens passed the limit.
    #[error(
        "workflow stopped: its sub-agents used {used} tokens, over the limit of {max} (maxTokens); its sub-agents were cancelled"
    )]
    Tokens {
        /// Tokens used so far.
        used: u64,
        /// The limit.
        max: u64,
    },
    /// The call was cancelled.
    #[error("workflow cancelled; its sub-agents were cancelled")]
    Cancelled,
    /// The script threw (or did not parse).
    #[error("workflow script failed: {0}")]
    Script(String),
    /// The script's promise never settled (it awaited something that never resolves).
    #[error(
        "workflow script failed: its result never settled (an await on a promise nothing resolves)"
    )]
    NeverSettled,
    /// The return value is not JSON (a function, a cycle, a BigInt).
    #[error("workflow script failed: its return value is not JSON: {0}")]
    NotJson(String),
    /// QuickJS could not be set up (runtime, context or the script API).
    #[error("workflow engine unavailable: {0}")]
    Engine(String),
    /// The engine's thread could not be started.
    #[error("workflow engine unavailable: cannot start its thread: {0}")]
    Thread(String),
    /// The engine's thread ended without a result (it panicked).
    #[error("workflow engine failed: its thread ended without a result")]
    ThreadLost,
}

impl WorkflowError {
    /// The stop reason a run with this error records.
    pub fn stop_reason(&self) -> crate::events::RunStopReason {
        match self {
            WorkflowError::Cancelled => crate::events::RunStopReason::Cancelled,
            _ => crate::events::RunStopReason::Error,
        }
    }
}

/// Why a call the script made (`agent`, `wait`, `tools.*`) failed: thrown into the script as
/// an `Error` with this text ([`HostError::Stopped`] as an uncatchable stop).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The run is stopping (its reason is the run's [`WorkflowError`]).
    #[error("workflow stopped")]
    Stopped,
    /// A limit passed at this call; the run stops with it.
    #[error(transparent)]
    Limit(WorkflowError),
    /// `agent(options)`: an unknown key or a value of the wrong type.
    #[error("agent(options): {0}")]
    Options(#[source] serde_json::Error),
    /// `agent(options)`: no prompt.
    #[error("agent(options): `prompt` must be a non-empty string")]
    NoPrompt,
    /// `agent(options)`: an empty persona.
    #[error("agent(options): `persona` is empty")]
    EmptyPersona,
    /// `agent(options)`: a schema outside the supported subset.
    #[error("agent(options): invalid schema: {0}")]
    Schema(#[source] dsh_tools::schema::SchemaError),
    /// This run cannot start sub-agents (an engine without a host).
    #[error("sub-agents are not available in this run")]
    NoSubagents,
    /// `wait(run)` of a sub-agent this run did not start.
    #[error("wait: no sub-agent {0} in this run")]
    NoSuchAgent(u64),
    /// `tools.<name>` is not one the config lets scripts call.
    #[error("tools.{name}: not available to workflow scripts (they may call: {allowed})")]
    ToolNotAllowed {
        /// The tool.
        name: String,
        /// The tools scripts may call, comma-separated (empty: none).
        allowed: String,
    },
    /// No tools service is mounted.
    #[error("tools.{0}: no tools service is mounted")]
    NoTools(String),
    /// The tool ran and answered with an error: its own text.
    #[error("{0}")]
    Tool(String),
}

/// A config the `tool-workflow` plugin refuses.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `tools` names a tool that is not read-only.
    #[error("tool-workflow: tools: `{0}` is not read-only; scripts may call read-only tools only")]
    NotReadOnly(String),
    /// A limit is 0.
    #[error("tool-workflow: {0} must be above 0")]
    Zero(&'static str),
}
