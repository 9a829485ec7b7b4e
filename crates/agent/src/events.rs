//! The `agent/*` notifications (kernel `Notify` events). They are dispatched in the agent's scope:
//! global listeners and that agent's scoped listeners hear them.

use std::sync::Arc;

use dsh_kernel::Notify;
use dsh_llm::{LlmFailure, Message};

use crate::{Agent, AgentStatus, Target};

/// `agent/created`: a new or resumed agent was published.
pub struct AgentCreated {
    /// The agent.
    pub agent: Arc<dyn Agent>,
}
impl Notify for AgentCreated {
    const NAME: &'static str = "agent/created";
}

/// `agent/disposed`: an agent was torn down.
pub struct AgentDisposed {
    /// Its id.
    pub agent_id: String,
}
impl Notify for AgentDisposed {
    const NAME: &'static str = "agent/disposed";
}

/// `agent/disposing`: an agent's teardown begins; its session is still open, so listeners can
/// log what the teardown ends (e.g. background jobs settled with cause `teardown`). Emitted
/// once, before the running turn is cancelled.
pub struct AgentDisposing {
    /// The agent.
    pub agent_id: String,
}
impl Notify for AgentDisposing {
    const NAME: &'static str = "agent/disposing";
}

/// `agent/session-start`: the agent's session is attached (fresh or resumed).
pub struct AgentSessionStart {
    /// The agent.
    pub agent_id: String,
    /// Whether the session was resumed from storage.
    pub resumed: bool,
}
impl Notify for AgentSessionStart {
    const NAME: &'static str = "agent/session-start";
}

/// `agent/status`: idle ↔ running, and disposed.
pub struct AgentStatusChanged {
    /// The agent.
    pub agent_id: String,
    /// The new status.
    pub status: AgentStatus,
}
impl Notify for AgentStatusChanged {
    const NAME: &'static str = "agent/status";
}

/// `agent/inbox/inserted`: a message joined a pending list.
pub struct InboxInserted {
    /// The agent.
    pub agent_id: String,
    /// The list.
    pub target: Target,
    /// The message.
    pub message: Message,
}
impl Notify for InboxInserted {
    const NAME: &'static str = "agent/inbox/inserted";
}

/// `agent/inbox/claimed`: messages were taken for a step.
pub struct InboxClaimed {
    /// The agent.
    pub agent_id: String,
    /// The list.
    pub target: Target,
    /// The claimed messages, in order.
    pub messages: Vec<Message>,
}
impl Notify for InboxClaimed {
    const NAME: &'static str = "agent/inbox/claimed";
}

/// `agent/inbox/discarded`: a pending message was dropped by cancellation.
pub struct InboxDiscarded {
    /// The agent.
    pub agent_id: String,
    /// The message.
    pub message: Message,
}
impl Notify for InboxDiscarded {
    const NAME: &'static str = "agent/inbox/discarded";
}

/// `agent/error`: a turn ended with an error.
pub struct AgentErrorEvent {
    /// The agent.
    pub agent_id: String,
    /// The turn.
    pub turn: u64,
    /// The failure as recorded in `turn/end`.
    pub error: LlmFailure,
}
impl Notify for AgentErrorEvent {
    const NAME: &'static str = "agent/error";
}

/// `agent/stream`: one chunk of the model attempt in progress, after the loop folded it (for
/// live display). Process-local: the durable record is the `assistant/message` stream.
pub struct AgentStreamChunk {
    /// The agent.
    pub agent_id: String,
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// The chunk.
    pub chunk: dsh_llm::StreamChunk,
}
impl Notify for AgentStreamChunk {
    const NAME: &'static str = "agent/stream";
}
