//! Errors of the sub-agent seam.

use dsh_agent::AgentError;
use dsh_session::SessionError;

/// Why a child could not be run (a child that ran and failed is an outcome, not an error).
#[derive(Debug, thiserror::Error)]
pub enum SubagentError {
    /// The child would be deeper than the configured limit.
    #[error("{}", crate::texts::depth_exceeded(*.depth, *.max))]
    DepthExceeded {
        /// The child's depth.
        depth: u64,
        /// The limit.
        max: u64,
    },
    /// The calling agent is not live in this process.
    #[error("parent agent `{0}` is not live (PARENT_UNAVAILABLE)")]
    ParentUnavailable(String),
    /// The caller is not an ancestor of the target.
    #[error("agent `{caller}` is not an ancestor of `{target}` (UNAUTHORIZED)")]
    Unauthorized {
        /// Who asked.
        caller: String,
        /// The target.
        target: String,
    },
    /// The target is neither a live direct child nor the live parent of the caller.
    #[error(
        "agent {target} is not a live subagent or parent of this agent; the message was not delivered"
    )]
    NotDeliverable {
        /// The target.
        target: String,
    },
    /// The child session could not be created or forked.
    #[error("cannot create the child session: {0}")]
    Session(#[from] SessionError),
    /// The child agent could not be created or prompted.
    #[error("cannot start the child agent: {0}")]
    Agent(#[from] AgentError),
    /// The call was cancelled before the child started.
    #[error("subagent run was cancelled (CANCELLED)")]
    Cancelled,
    /// A capability (persona, tool filter, structured output) could not be given to the child.
    #[error("subagent capability unavailable: {0} (UNSUPPORTED_CAPABILITY)")]
    Capability(String),
}

impl SubagentError {
    /// The original's error code.
    pub fn code(&self) -> &'static str {
        match self {
            SubagentError::DepthExceeded { .. } => "DEPTH_EXCEEDED",
            SubagentError::ParentUnavailable(_) => "PARENT_UNAVAILABLE",
            SubagentError::Unauthorized { .. } => "UNAUTHORIZED",
            SubagentError::NotDeliverable { .. } => "PARENT_UNAVAILABLE",
            SubagentError::Session(_) => "PERSISTENCE_UNAVAILABLE",
            SubagentError::Agent(_) => "NO_PROVIDER",
            SubagentError::Cancelled => "CANCELLED",
            SubagentError::Capability(_) => "UNSUPPORTED_CAPABILITY",
        }
    }
}
