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

/// One tool as offered to the model: `{name, description, parameters}` (the `request/header`
/// shape). `parameters` is a JSON Schema, sent verbatim (its member order is preserved).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// Description shown to the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
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
    /// Effort ids the route accepts (adapter-owned, e.g. `off|low|high|max`); empty = none.
    pub reasoning_efforts: Vec<String>,
    /// Effort materialised when the caller sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_effort: Option<String>,
    /// Accepted input modalities.
    pub input_modalities: Vec<Modality>,
}

/// Everything one attempt needs. Built by [`crate::PreparedCall::request`], so every setting is
/// materialised; listeners of `llm/stream` may inspect or rewrite it.
#[derive(Clone, Debug)]
pub struct LlmRequest {
    /// Provider route (e.g. `deepseek`) that picks the adapter.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// The history, system messages included, in order. Shared with the session's derived
    /// history (no per-step copy of old messages).
    pub messages: Vec<Arc<Message>>,
    /// Tools offered, in canonical order; empty = none.
    pub tools: Vec<ToolSpec>,
    /// Effort id, when the route has efforts.
    pub effort: Option<String>,
    /// Output cap (reasoning included).
    pub max_tokens: u64,
    /// Sampling temperature, when configured.
    pub temperature: Option<f64>,
    /// Stop sequences; empty = none.
    pub stop: Vec<String>,
    /// Why the call is made (e.g. `session-title`); adapters may special-case it.
    pub purpose: Option<String>,
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

    /// Starts one attempt. `Err` = failed before any chunk (credential, transport, HTTP status);
    /// later failures arrive as `finish {error|aborted}` in the stream.
    fn stream(&self, request: LlmRequest) -> BoxFuture<'static, Result<ChunkStream, LlmFailure>>;
}
