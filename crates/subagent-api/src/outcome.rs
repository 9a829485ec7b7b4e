//! The vocabulary of a delegation: request, outcome, stop reason, the child's descriptor record.

use std::path::PathBuf;

use dsh_llm::TokenUsage;
use dsh_session::PluginEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
    /// Fires when the delegating call is cancelled: the child is cancelled too (a
    /// continuable child started in the background outlives the call).
    pub cancel: CancellationToken,
    /// A continuable child: one durable session that later `send_message`s continue (each a
    /// new turn, cold-resumed from its log when it is not live); it gets the `report` tool.
    pub continuable: bool,
    /// Persona, tool filter, structured output.
    pub capabilities: Capabilities,
}

/// Which tools a child sees (the original's `toolFilter {allow?, deny?}`). `report` and
/// `structured_output` are never filtered out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolFilterSpec {
    /// When set, only these tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// Never these tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

impl ToolFilterSpec {
    /// Whether the filter says nothing (refused by the config: the original fails the load).
    pub fn is_empty(&self) -> bool {
        self.allow.is_none() && self.deny.is_empty()
    }
}

/// The original's capabilities of a delegation (`persona`, `toolFilter`, `outputSchema`; the
/// depth limit is the plugin's `maxDepth`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Capabilities {
    /// Replaces the parent's persona section (`persona`, order 0) in the child's prompt.
    pub persona: Option<String>,
    /// Restricts the child's tools.
    pub tool_filter: Option<ToolFilterSpec>,
    /// The JSON Schema (an object schema, the tools' argument subset) of the child's answer:
    /// the child gets the `structured_output` tool with it as its parameters, and a run that
    /// never records a valid value ends as `error`.
    pub output_schema: Option<Value>,
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
    /// The value the child recorded with `structured_output` (with an `outputSchema`).
    pub structured: Option<Value>,
}

/// What a listed child is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChildStatus {
    /// Running a turn.
    Running,
    /// Live and waiting.
    Idle,
    /// A continuable child with no live activation: a message resumes it.
    Ready,
}

impl ChildStatus {
    /// The word `list_agents` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            ChildStatus::Running => "running",
            ChildStatus::Idle => "idle",
            ChildStatus::Ready => "ready",
        }
    }
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
    /// Running, idle or ready.
    pub status: ChildStatus,
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
    /// The persona text the child was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persona: Option<String>,
    /// The tool filter the child was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_filter: Option<ToolFilterSpec>,
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

/// `dsh/subagent-usage` (dsh-only, ignorable; format §17 rule 3): the tokens one run of a
/// child (and of its own children) spent, logged in the parent when the run ends — completed
/// or not, foreground, job or continuable turn — so the parent's totals include it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentUsage {
    /// The child's session id.
    pub child_id: String,
    /// `spawn` or `fork`.
    pub provider: String,
    /// How the run ended.
    pub stop_reason: StopReason,
    /// Model requests of the run (the child's own).
    pub requests: u64,
    /// The child's own usage (priced with `model`).
    pub usage: TokenUsage,
    /// The model of the child's last response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Usage of the child's own children during the run, as they logged it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nested: Vec<SubagentUsage>,
}

impl PluginEvent for SubagentUsage {
    const TYPE: &'static str = "dsh/subagent-usage";
}
