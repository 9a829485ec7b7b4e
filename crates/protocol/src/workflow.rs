//! A `workflow` call's run as front ends show it ([`crate::EventMsg::WorkflowProgress`]): the
//! script's sub-agents, what each is doing and what it spent.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::usage::Usage;

/// Where a workflow run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WorkflowStatus {
    /// The script runs.
    Running,
    /// The script returned.
    Completed,
    /// The call (or its job) was cancelled.
    Cancelled,
    /// The script threw, or a limit stopped it.
    Error,
}

/// Where one of a run's sub-agents is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WorkflowAgentState {
    /// It runs.
    Running,
    /// It finished its task.
    Completed,
    /// It failed.
    Failed,
    /// It was stopped (the run ended or was cancelled first).
    Cancelled,
}

impl WorkflowAgentState {
    /// It has ended.
    pub fn ended(self) -> bool {
        self != WorkflowAgentState::Running
    }
}

/// One sub-agent a workflow script started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowAgent {
    /// The run's own counter of its agents (1-based, in start order).
    pub seq: u64,
    /// Its label (unique in the run).
    pub label: String,
    /// The phase the script named for it (`meta.phases[].title`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Its session (a child of the calling one), once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Where it is.
    pub state: WorkflowAgentState,
    /// What its run spent (its own sub-agents included), once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}
