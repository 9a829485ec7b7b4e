//! `subagent/start` and `subagent/end` notifications (kernel `Notify` events, as the original's
//! cordis events of the same names): front ends (the SDK runtime's `subagent.*`) and hooks
//! observe children without depending on a provider.

use dsh_kernel::Notify;

use crate::{SubagentMode, SubagentOutcome};

/// `subagent/start`: a child's session was created, before it logs its first event.
#[derive(Clone, Debug)]
pub struct SubagentStarted {
    /// The delegating agent (= its session id).
    pub parent_id: String,
    /// The child's session id.
    pub child_id: String,
    /// Spawn or fork.
    pub mode: SubagentMode,
    /// The delegation's label.
    pub label: String,
}

impl Notify for SubagentStarted {
    const NAME: &'static str = "subagent/start";
}

/// `subagent/end`: a child's run ended (before the child is disposed).
#[derive(Clone, Debug)]
pub struct SubagentFinished {
    /// The delegating agent.
    pub parent_id: String,
    /// Spawn or fork.
    pub mode: SubagentMode,
    /// What the run produced (`child_id`, `stop_reason`, `output`, …).
    pub outcome: SubagentOutcome,
}

impl Notify for SubagentFinished {
    const NAME: &'static str = "subagent/end";
}
