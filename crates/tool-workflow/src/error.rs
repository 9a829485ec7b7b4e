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
    /// The engine could not be set up.
    #[error("workflow engine unavailable: {0}")]
    Engine(String),
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
