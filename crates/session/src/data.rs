//! Typed payloads of the core events (format §7). These are projections: the committed JSON stays
//! the truth, and [`crate::Event::data_as`] reads it back. Writers build them and append with
//! [`crate::NewEvent::typed`].

use dsh_llm::{LlmFailure, Message, TokenUsage};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::vocab;

/// A typed event payload with its type tag.
pub trait EventData: Serialize + DeserializeOwned {
    /// The event type tag.
    const TYPE: &'static str;
}

macro_rules! event_data {
    ($t:ty, $name:expr) => {
        impl EventData for $t {
            const TYPE: &'static str = $name;
        }
    };
}

/// `turn/start {turn}`: 1-based, strictly increasing per session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStart {
    /// Turn number.
    pub turn: u64,
}
event_data!(TurnStart, vocab::TURN_START);

/// Why a turn ended (format §7.1). Closed union: never add kinds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TurnEndReason {
    /// The last step produced no tool calls and nothing is owed.
    Completed,
    /// Cancellation.
    Aborted {
        /// The cause.
        reason: AbortCause,
    },
    /// The pre-step hook rejected the turn.
    Blocked,
    /// Unrecoverable failure.
    Error {
        /// The failure (non-LLM errors flattened to code `UNKNOWN`).
        error: LlmFailure,
    },
    /// Some step of this turn hit the output cap.
    MaxTokens,
    /// Crash repair only.
    Interrupted,
    /// Fork seed closers only.
    Forked,
}

/// The cause of an aborted turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AbortCause {
    /// The user cancelled.
    User,
    /// The parent agent cancelled.
    Parent,
    /// A hook cancelled, with its reason (`dsh/<cause>` for dsh-only causes).
    Hook {
        /// The hook's reason.
        reason: String,
    },
    /// The agent was disposed.
    Disposed,
    /// Imported old logs only.
    Legacy,
}

/// `turn/end {turn, reason}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEnd {
    /// Turn number (matches the open turn).
    pub turn: u64,
    /// Why it ended.
    pub reason: TurnEndReason,
}
event_data!(TurnEnd, vocab::TURN_END);

/// `step/start {turn, step}`: `step` restarts at 1 in every turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepStart {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
}
event_data!(StepStart, vocab::STEP_START);

/// `step/end {turn, step}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepEnd {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
}
event_data!(StepEnd, vocab::STEP_END);

/// `system/message` (surface).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemMessage {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// Role `system`, source `{kind:"system-prompt"}`; empty content = dormant node.
    pub message: Message,
}
event_data!(SystemMessage, vocab::SYSTEM_MESSAGE);

/// `developer/message` (surface, v4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeveloperMessage {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// Role `developer`: tool additions then removals.
    pub message: Message,
    /// The `request/header` binding the additions (present exactly when there are additions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_seq: Option<u64>,
}
event_data!(DeveloperMessage, vocab::DEVELOPER_MESSAGE);

/// `user/message` (surface): the payload **is** the message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserMessage(pub Message);
event_data!(UserMessage, vocab::USER_MESSAGE);

/// `assistant/message` (surface).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// Role `assistant`, source `{kind:"model", provider, model, replayState?}`.
    pub message: Message,
    /// Usage when the adapter reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// `Some(true)` when cancelled mid-stream (content = the delivered prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    /// The packed stream records of the attempt (see [`crate::stream::StreamPacker`]).
    pub stream: Vec<Value>,
}
event_data!(AssistantMessage, vocab::ASSISTANT_MESSAGE);

/// `assistant/attempt`: a settled attempt that committed no surface message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantAttempt {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// The packed stream records.
    pub stream: Vec<Value>,
}
event_data!(AssistantAttempt, vocab::ASSISTANT_ATTEMPT);

/// `tool/call`: logged when a call is dispatched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallEvent {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// The provider's call id.
    pub call_id: String,
    /// Tool name (as in the tool-call block).
    pub name: String,
    /// Raw argument string (as in the tool-call block).
    pub arguments: String,
}
event_data!(ToolCallEvent, vocab::TOOL_CALL);

/// The `error` member of a failed tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolError {
    /// Error class name (`AbortError`, `ToolNotStartedError`, …).
    pub name: String,
    /// Error code (`ABORTED`, `TOOL_NOT_STARTED`, …).
    pub code: String,
    /// Raw user-facing text, kept out of model content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `tool/result` (surface).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// Role `tool`, `toolCallId` = `source.callId`, `isError` always written by dsh.
    pub message: Message,
    /// Only with `message.isError == Some(true)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// Tool-private presentation payload, opaque to core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}
event_data!(ToolResult, vocab::TOOL_RESULT);

/// `request/header {header, reason, startsSeries?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestHeader {
    /// The canonical non-history request envelope.
    pub header: EpochHeader,
    /// `initial`, `resume`, `change` or `series`.
    pub reason: String,
    /// `Some(true)` only on `initial`/`resume`/`change`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_series: Option<bool>,
}
event_data!(RequestHeader, vocab::REQUEST_HEADER);

/// The request envelope snapshot of a `request/header`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochHeader {
    /// Route configuration.
    pub config: RequestConfig,
    /// Config fields filled by the adapter (each `true`); omitted when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_defaults: Option<Value>,
    /// Tool schemas in canonical order; omitted when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolSchema>>,
}

/// `request/header.header.config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestConfig {
    /// Provider id.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
}

/// One tool declaration in a request header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSchema {
    /// Tool name.
    pub name: String,
    /// Description.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    /// `Some(true)` for deferred declarations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defer_loading: Option<bool>,
}

/// `request/context`: route metadata of the prepared call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestContext {
    /// Provider id.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Context window, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// `"in-history"` when the route accepts appended system prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt_update: Option<String>,
}
event_data!(RequestContext, vocab::REQUEST_CONTEXT);

/// `agent/inbox/spliced` (format §11).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxSpliced {
    /// `next-turn` or `next-step`.
    pub target: String,
    /// Splice index in that list.
    pub start: u64,
    /// Removed count (omitted when 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_count: Option<u64>,
    /// Inserted user messages.
    pub inserted: Vec<Message>,
    /// `Some("canceled")` on removals discarded by cancellation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}
event_data!(InboxSpliced, vocab::INBOX_SPLICED);

/// `session/end-seed`: `{}` (restored/live boundary) or `{"inherited":true}` (fork cut).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EndSeed {
    /// `Some(true)` for the fork cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherited: Option<bool>,
}
event_data!(EndSeed, vocab::END_SEED);
