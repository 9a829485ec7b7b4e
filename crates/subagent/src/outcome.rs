//! The vocabulary of a delegation: request, outcome, stop reason, the child's descriptor record.

use std::path::PathBuf;

use dsh_llm::TokenUsage;
use dsh_session::PluginEvent;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// How the child's history starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SubagentMode {
    /// An empty history (provider `spawn`).
    Spawn,
    /// The parent's log up to its last `turn/end` (provider `fork`).
    Fork,
}

impl SubagentMode {
    /// The provider name the original logs (`spawn` / `fork`).
    pub fn provider(self) -> &'static str {
        match self {
            SubagentMode::Spawn => "spawn",
            SubagentMode::Fork => "fork",
        }
    }
}

/// One delegation.
#[derive(Clone, Debug)]
pub struct SubagentRequest {
    /// The delegating agent (= its session id).
    pub parent_id: String,
    /// Spawn or fork.
    pub mode: SubagentMode,
    /// The short label (`description` argument).
    pub label: String,
    /// The child's task.
    pub prompt: String,
    /// The child's working directory (`None`: the parent's).
    pub cwd: Option<PathBuf>,
    /// Fires when the delegating call is cancelled: the child is cancelled too.
    pub cancel: CancellationToken,
}

/// Why a child's run ended (the original's `stopReason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The turn completed.
    Completed,
    /// Cancelled (by the parent, the user or teardown).
    Aborted,
    /// The turn failed.
    Error,
    /// The output cap was hit.
    MaxTokens,
    /// The model declined.
    Refusal,
}

impl StopReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::Aborted => "aborted",
            StopReason::Error => "error",
            StopReason::MaxTokens => "max-tokens",
            StopReason::Refusal => "refusal",
        }
    }
}

/// What a child's run produced.
#[derive(Clone, Debug, PartialEq)]
pub struct SubagentOutcome {
    /// The child's session id.
    pub child_id: String,
    /// The last non-empty assistant text of the run (else all its text, concatenated).
    pub output: String,
    /// Why the run ended.
    pub stop_reason: StopReason,
    /// What went wrong (at most 4096 bytes), never part of `output`.
    pub diagnostic: Option<String>,
    /// The child's token usage, summed over its requests (for the parent's totals).
    pub usage: TokenUsage,
    /// Model requests the child made.
    pub requests: u64,
    /// The model of the child's last response (to price `usage`).
    pub model: Option<String>,
}

/// A live child, for `list_agents`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildInfo {
    /// The child's id.
    pub id: String,
    /// Its direct parent.
    pub parent_id: String,
    /// Its delegation depth.
    pub depth: u64,
    /// Its label.
    pub label: String,
    /// Whether it is running a turn.
    pub running: bool,
}

/// `subagent/descriptor` (format §7.13): written in the child so that it knows what it is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentDescriptor {
    /// Descriptor version (3, as the original writes).
    pub version: u64,
    /// `one-shot` or `continuable`.
    pub mode: String,
    /// The provider name (`spawn` / `fork`).
    pub provider: String,
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The child's route provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_provider: Option<String>,
    /// The child's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_model: Option<String>,
}

impl PluginEvent for SubagentDescriptor {
    const TYPE: &'static str = "subagent/descriptor";
}

/// `subagent/catalog` v0 (format §7.13): written in the parent when a child is created, before
/// the delegating call's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentCatalog {
    /// Payload version (0).
    pub version: u64,
    /// The child's session id.
    pub child_id: String,
    /// The child header's `createdAt`.
    pub child_created_at: i64,
    /// `one-shot` or `continuable`.
    pub mode: String,
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl PluginEvent for SubagentCatalog {
    const TYPE: &'static str = "subagent/catalog";
}
