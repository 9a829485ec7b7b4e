//! The stream vocabulary (`session-format.md` §6.5): what an adapter yields for one attempt.
//!
//! Contract (ARCHITECTURE §6): blocks open with `block-start`, receive deltas, close with
//! `block-end` carrying the assembled block; `usage` comes before `finish`; nothing comes after
//! `finish`. Errors are returned before streaming or carried in `finish {error|aborted}`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::message::ContentBlock;

/// Well-known failure codes (`deepseek-wire.md` §10–§11, `session-format.md` §6.5). The set is
/// open: adapters may report others (e.g. an uppercased unknown finish reason).
pub mod codes {
    /// 401/403.
    pub const AUTH: &str = "AUTH";
    /// Balance or quota exhausted.
    pub const QUOTA: &str = "QUOTA";
    /// 429 without quota wording.
    pub const RATE_LIMIT: &str = "RATE_LIMIT";
    /// The prompt does not fit the model's context window.
    pub const CONTEXT_WINDOW_EXCEEDED: &str = "CONTEXT_WINDOW_EXCEEDED";
    /// Other 4xx.
    pub const INVALID_REQUEST: &str = "INVALID_REQUEST";
    /// 5xx and provider capacity finishes.
    pub const SERVER: &str = "SERVER";
    /// Connection-level failure (DNS, refused, TLS, reset, body I/O error).
    pub const TRANSPORT: &str = "TRANSPORT";
    /// Connect timeout, idle watchdog, progress or total deadline.
    pub const TIMEOUT: &str = "TIMEOUT";
    /// Clean EOF without a terminated `[DONE]` after data was delivered.
    pub const STREAM_CLOSED: &str = "STREAM_CLOSED";
    /// Unparsable or oversized payload.
    pub const MALFORMED_RESPONSE: &str = "MALFORMED_RESPONSE";
    /// Completed response without any content.
    pub const EMPTY_RESPONSE: &str = "EMPTY_RESPONSE";
    /// The caller cancelled.
    pub const ABORTED: &str = "ABORTED";
    /// No credential configured.
    pub const MISSING_CREDENTIAL: &str = "MISSING_CREDENTIAL";
    /// The credential cannot be sent (not a valid header value).
    pub const INVALID_CREDENTIAL: &str = "INVALID_CREDENTIAL";
    /// The model stopped because of its content filter.
    pub const CONTENT_FILTER: &str = "CONTENT_FILTER";
    /// The requested effort is not offered on this route.
    pub const UNSUPPORTED_REASONING_EFFORT: &str = "UNSUPPORTED_REASONING_EFFORT";
    /// The request holds content the route cannot carry (e.g. images on a text-only model).
    pub const UNSUPPORTED_CONTENT: &str = "UNSUPPORTED_CONTENT";
    /// No adapter is registered for the requested provider route.
    pub const NO_ADAPTER: &str = "NO_ADAPTER";
    /// More images must be offloaded before retrying.
    pub const IMAGE_OFFLOAD_REQUIRED: &str = "IMAGE_OFFLOAD_REQUIRED";
    /// A stream broke the chunk contract (reported by the `BlockAssembler`).
    pub const PROTOCOL_VIOLATION: &str = "PROTOCOL_VIOLATION";
    /// A flattened non-LLM error.
    pub const UNKNOWN: &str = "UNKNOWN";
}

/// Token counts of one attempt. Counts are disjoint: `input_tokens` excludes cached input;
/// `reasoning_tokens` is part of `output_tokens`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Total as reported by the provider, when it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Input tokens served from the provider's prefix cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the cache (DeepSeek never reports this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Reasoning tokens (a part of `output_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// A failed attempt, as recorded in logs and handed to the retry policy.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmFailure {
    /// Human-readable message (never contains a credential).
    pub message: String,
    /// Machine code, see [`codes`].
    pub code: String,
    /// HTTP status, when the failure came from a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The provider's `Retry-After`, in milliseconds (> 0 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_retry_after_ms: Option<u64>,
    /// Provider request id (`x-ds-trace-id`, `x-request-id`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// With `IMAGE_OFFLOAD_REQUIRED`: how many more of the oldest images to offload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload_images: Option<u64>,
}

impl LlmFailure {
    /// A failure with only a code and a message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: code.into(),
            status: None,
            provider_retry_after_ms: None,
            request_id: None,
            offload_images: None,
        }
    }

    /// Sets the HTTP status; builder style.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets the request id; builder style.
    pub fn with_request_id(mut self, id: Option<String>) -> Self {
        self.request_id = id;
        self
    }

    /// Sets the provider retry-after; builder style.
    pub fn with_retry_after_ms(mut self, ms: Option<u64>) -> Self {
        self.provider_retry_after_ms = ms;
        self
    }
}

impl fmt::Debug for LlmFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("LlmFailure");
        d.field("code", &self.code).field("message", &self.message);
        if let Some(s) = self.status {
            d.field("status", &s);
        }
        if let Some(r) = self.provider_retry_after_ms {
            d.field("provider_retry_after_ms", &r);
        }
        if let Some(r) = &self.request_id {
            d.field("request_id", r);
        }
        if let Some(o) = self.offload_images {
            d.field("offload_images", &o);
        }
        d.finish()
    }
}

impl fmt::Display for LlmFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for LlmFailure {}

/// Why an attempt finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The model asked for tool calls.
    ToolCalls,
    /// The output hit `max_tokens`; tool calls of that message are never run.
    MaxTokens,
    /// The attempt failed.
    Error {
        /// What went wrong.
        failure: LlmFailure,
    },
    /// The caller cancelled the attempt.
    Aborted {
        /// Usually code `ABORTED`.
        failure: LlmFailure,
    },
}

impl FinishReason {
    /// An error finish.
    pub fn error(failure: LlmFailure) -> Self {
        FinishReason::Error { failure }
    }

    /// The failure of an error or aborted finish.
    pub fn failure(&self) -> Option<&LlmFailure> {
        match self {
            FinishReason::Error { failure } | FinishReason::Aborted { failure } => Some(failure),
            _ => None,
        }
    }

    /// Whether this is a successful finish (stop, tool-calls, max-tokens).
    pub fn is_success(&self) -> bool {
        matches!(
            self,
            FinishReason::Stop | FinishReason::ToolCalls | FinishReason::MaxTokens
        )
    }
}

/// The kind of a block announced by `block-start`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// `text`
    Text,
    /// `reasoning`
    Reasoning,
    /// `tool-call`
    ToolCall,
    /// A plugin tag, kept verbatim.
    Other(String),
}

impl BlockKind {
    /// The tag as written in logs.
    pub fn as_str(&self) -> &str {
        match self {
            BlockKind::Text => "text",
            BlockKind::Reasoning => "reasoning",
            BlockKind::ToolCall => "tool-call",
            BlockKind::Other(s) => s,
        }
    }
}

impl From<&str> for BlockKind {
    fn from(s: &str) -> Self {
        match s {
            "text" => BlockKind::Text,
            "reasoning" => BlockKind::Reasoning,
            "tool-call" => BlockKind::ToolCall,
            other => BlockKind::Other(other.to_owned()),
        }
    }
}

impl Serialize for BlockKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for BlockKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Ok(BlockKind::from(s.as_str()))
    }
}

/// One streamed chunk of a model attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum StreamChunk {
    /// A block opens at `index` (indexes are assigned in first-seen order).
    BlockStart {
        /// Block index within the message.
        index: u32,
        /// What kind of block.
        block_type: BlockKind,
    },
    /// Text appended to the text block at `index`.
    TextDelta {
        /// Block index.
        index: u32,
        /// The delta.
        text: String,
    },
    /// Reasoning appended to the reasoning block at `index`.
    ReasoningDelta {
        /// Block index.
        index: u32,
        /// The delta.
        text: String,
    },
    /// A fragment of a tool call's raw argument string.
    ToolCallDelta {
        /// Block index.
        index: u32,
        /// Call id (possibly `""` when the provider has not sent it).
        id: String,
        /// Tool name, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The fragment, verbatim.
        arguments_delta: String,
    },
    /// The block at `index` is complete.
    BlockEnd {
        /// Block index.
        index: u32,
        /// The assembled block.
        block: ContentBlock,
    },
    /// Token usage of the attempt (before `finish`).
    Usage {
        /// The counts.
        usage: TokenUsage,
    },
    /// The attempt ended; nothing follows.
    Finish {
        /// Why.
        reason: FinishReason,
        /// Opaque provider-owned replay state for the assistant message source.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replay_state: Option<Value>,
    },
}

impl StreamChunk {
    /// A finish chunk without replay state.
    pub fn finish(reason: FinishReason) -> Self {
        StreamChunk::Finish {
            reason,
            replay_state: None,
        }
    }
}
