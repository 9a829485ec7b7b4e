//! The `tool-workflow/*` records (format §7.14), written in the calling session between the
//! `workflow` call and its result: a run's start and end, and each sub-agent's start and end.

use dsh_session::PluginEvent;
use serde::{Deserialize, Serialize};

/// `tool-workflow/run-start`: a script began.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStart {
    /// The run (unique in the session).
    pub run_id: String,
    /// The script's `meta.name`.
    pub name: String,
}

impl PluginEvent for RunStart {
    const TYPE: &'static str = "tool-workflow/run-start";
}

/// `tool-workflow/agent-start`: the script started a sub-agent (its child session exists).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStart {
    /// The run.
    pub run_id: String,
    /// The workflow's own counter (1-based), not a log seq.
    pub seq: u64,
    /// The sub-agent's label.
    pub label: String,
    /// The phase the script named for it (`meta.phases[].title`), if any.
    pub phase: Option<String>,
    /// The child's session id.
    pub child_id: String,
}

impl PluginEvent for AgentStart {
    const TYPE: &'static str = "tool-workflow/agent-start";
}

/// How a sub-agent's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentOutcome {
    /// It completed.
    Completed,
    /// It failed (error, refusal, output cap, no valid structured answer).
    Failed,
    /// It was cancelled (the run ended or was cancelled first).
    Cancelled,
}

impl AgentOutcome {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentOutcome::Completed => "completed",
            AgentOutcome::Failed => "failed",
            AgentOutcome::Cancelled => "cancelled",
        }
    }
}

/// `tool-workflow/agent-end`: a sub-agent's run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentEnd {
    /// The run.
    pub run_id: String,
    /// The workflow's counter of the agent.
    pub seq: u64,
    /// How it ended.
    pub outcome: AgentOutcome,
}

impl PluginEvent for AgentEnd {
    const TYPE: &'static str = "tool-workflow/agent-end";
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStopReason {
    /// The script returned.
    Completed,
    /// The call (or the job) was cancelled.
    Cancelled,
    /// The script threw, or a limit stopped it.
    Error,
}

impl RunStopReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStopReason::Completed => "completed",
            RunStopReason::Cancelled => "cancelled",
            RunStopReason::Error => "error",
        }
    }
}

/// `tool-workflow/run-end`: a run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEnd {
    /// The run.
    pub run_id: String,
    /// Why.
    pub stop_reason: RunStopReason,
}

impl PluginEvent for RunEnd {
    const TYPE: &'static str = "tool-workflow/run-end";
}
