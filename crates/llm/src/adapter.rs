//! The adapter seam: what a provider implementation offers the [`crate::Llm`] service.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::chunk::{LlmFailure, StreamChunk};
use crate::message::Message;

/// The chunks of one attempt. Contract: see [`crate::chunk`]; the last item is always a
/// `finish` chunk (a stream that ends without one was cut off and is a protocol violation).
pub type ChunkStream = BoxStream<'static, StreamChunk>;

/// One tool as offered to the model: `{name, description, parameters, deferLoading?}` — the one
/// tool spec type of dsh (the `request/header` `tools` member, the tool registry's schema and the
/// adapter's input). camelCase members in this order; `parameters` is a JSON Schema kept and
/// sent verbatim (member order preserved), so the serialisation is byte-stable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// Description shown to the model.
    pub description: String,
    /// JSON Schema of the arguments, shared: copies of a spec (the registry's, each step's
    /// assembled list, the request's) point at one schema, and comparing two copies is a pointer
    /// comparison. Serialised as the schema itself.
    #[serde(
        serialize_with = "shared_value::serialize",
        deserialize_with = "shared_value::deserialize"
    )]
    pub parameters: Arc<Value>,
    /// `Some(true)` for a deferred declaration (session-format §9.7, routes with `toolUpdate`);
    /// absent otherwise. Adapters without deferred loading ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defer_loading: Option<bool>,
}

impl ToolSpec {
    /// A plain (not deferred) tool spec.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: impl Into<Arc<Value>>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: parameters.into(),
            defer_loading: None,
        }
    }
}

/// Serde of an `Arc<Value>` member as the value itself (without serde's `rc` feature).
mod shared_value {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    pub(super) fn serialize<S: Serializer>(value: &Arc<Value>, s: S) -> Result<S::Ok, S::Error> {
        value.as_ref().serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<Value>, D::Error> {
        Value::deserialize(d).map(Arc::new)
    }
}

/// A reasoning effort id. The set a route accepts is its own ([`ModelInfo::reasoning_efforts`]);
/// [`crate::Llm::prepare_call`] validates the requested one against it once, and adapters map
/// the variants to their wire. The wire/config spelling (`off`, `low`, `high`, `max`) appears
/// only at the edge; an unknown spelling is kept verbatim as [`ReasoningEffort::Other`] (and
/// refused by every route that does not list it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReasoningEffort {
    /// No reasoning (`off`).
    Off,
    /// `low`.
    Low,
    /// `high`.
    High,
    /// `max`.
    Max,
    /// Any other id, verbatim. Build it with [`ReasoningEffort::from_wire`].
    Other(String),
}

impl ReasoningEffort {
    /// The known efforts, lowest first.
    pub const KNOWN: &'static [ReasoningEffort] = &[
        ReasoningEffort::Off,
        ReasoningEffort::Low,
        ReasoningEffort::High,
        ReasoningEffort::Max,
    ];

    /// The wire/config spelling.
    pub fn as_str(&self) -> &str {
        match self {
            ReasoningEffort::Off => "off",
            ReasoningEffort::Low => "low",
            ReasoningEffort::High => "high",
            ReasoningEffort::Max => "max",
            ReasoningEffort::Other(s) => s,
        }
    }

    /// Parses a spelling; unknown ones become [`ReasoningEffort::Other`].
    pub fn from_wire(s: &str) -> Self {
        match s {
            "off" => ReasoningEffort::Off,
            "low" => ReasoningEffort::Low,
            "high" => ReasoningEffort::High,
            "max" => ReasoningEffort::Max,
            other => ReasoningEffort::Other(other.to_owned()),
        }
    }
}

impl std::fmt::Display for ReasoningEffort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for ReasoningEffort {
    fn from(s: &str) -> Self {
        ReasoningEffort::from_wire(s)
    }
}

impl From<String> for ReasoningEffort {
    fn from(s: String) -> Self {
        match ReasoningEffort::from_wire(&s) {
            ReasoningEffort::Other(_) => ReasoningEffort::Other(s),
            known => known,
        }
    }
}

impl PartialEq<str> for ReasoningEffort {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ReasoningEffort {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for ReasoningEffort {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ReasoningEffort {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(ReasoningEffort::from)
    }
}

/// How a route takes a changed system prompt (session-format §7.10, §10): `in-history` = a
/// changed prompt may be appended as a later system message (logged in `request/context`).
/// Absent = the route needs the prompt consolidated at the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SystemPromptUpdate {
    /// `in-history`.
    InHistory,
}

impl SystemPromptUpdate {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SystemPromptUpdate::InHistory => "in-history",
        }
    }
}

/// How a route takes tool-set changes (session-format §9.7): developer `tool-addition` /
/// `tool-removal` messages and deferred declarations. Absent = developer messages are dropped
/// and the declarations are the current tools (and a tool change forces prompt consolidation).
/// Never logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolUpdate {
    /// `addition-only`: additions are declared deferred; removals are never sent.
    AdditionOnly,
    /// `in-history`: additions and removals travel as developer messages.
    InHistory,
}

impl ToolUpdate {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolUpdate::AdditionOnly => "addition-only",
            ToolUpdate::InHistory => "in-history",
        }
    }
}

/// An input modality a model accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    /// Text.
    Text,
    /// Images.
    Image,
}

/// What an adapter knows about a model id on its route. Unknown ids still resolve (with the
/// adapter's defaults): model ids are configuration, never an enum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// The model id sent on the wire.
    pub id: String,
    /// Context window in tokens.
    pub context_window: u64,
    /// `max_tokens` materialised when the caller sets none.
    pub default_max_tokens: u64,
    /// Largest accepted `max_tokens`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Efforts the route accepts (adapter-owned, e.g. `off|low|high|max`); empty = none.
    pub reasoning_efforts: Vec<ReasoningEffort>,
    /// Effort materialised when the caller sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_effort: Option<ReasoningEffort>,
    /// Accepted input modalities.
    pub input_modalities: Vec<Modality>,
    /// Whether a changed system prompt may be appended in history (`None` = no).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt_update: Option<SystemPromptUpdate>,
    /// How tool-set changes reach the model (`None` = they do not; declarations are replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_update: Option<ToolUpdate>,
    /// What the route charges (`None`: unknown; front ends then show tokens without a cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<crate::pricing::ModelPricing>,
}

/// Everything one attempt needs. Built by [`crate::PreparedCall::request`]: the call settings
/// are the prepared call itself (one shape from `prepare_call` to the wire, every default
/// materialised); listeners of `llm/stream` may inspect or rewrite it.
#[derive(Clone, Debug)]
pub struct LlmRequest {
    /// Route, model, effort, output cap, sampling and capabilities of this call.
    pub call: crate::service::PreparedCall,
    /// The history, system messages included, in order. Shared with the session's derived
    /// history (no per-step copy of old messages).
    pub messages: Vec<Arc<Message>>,
    /// Tools offered, in canonical order; empty = none.
    pub tools: Vec<ToolSpec>,
    /// Cancels the attempt: the stream then ends with an `aborted` finish, promptly.
    pub cancel: CancellationToken,
}

/// A provider implementation. One [`LlmAdapter::stream`] call is exactly one provider attempt:
/// adapters never retry by themselves.
pub trait LlmAdapter: Send + Sync + 'static {
    /// The model used when the caller names none.
    fn default_model(&self) -> String;

    /// Resolves a model id (unknown ids pass through with defaults).
    fn resolve_model(&self, model: &str) -> ModelInfo;

    /// The route's model catalog (what `dsh models` lists); other ids still resolve. Default:
    /// none known.
    fn models(&self) -> Vec<ModelInfo> {
        Vec::new()
    }

    /// Starts one attempt. `Err` = failed before any chunk (credential, transport, HTTP status);
    /// later failures arrive as `finish {error|aborted}` in the stream.
    fn stream(&self, request: LlmRequest) -> BoxFuture<'static, Result<ChunkStream, LlmFailure>>;
}
