//! The stream vocabulary (`session-format.md` §6.5): what an adapter yields for one attempt.
//!
//! Contract (`architecture.md` §6): blocks open with `block-start`, receive deltas, close with
//! `block-end` carrying the assembled block; `usage` comes before `finish`; nothing comes after
//! `finish`. Errors are returned before streaming or carried in `finish {error|aborted}`. A tool
//! call's `block-end` may leave its arguments [`ToolArguments::streamed`](crate::ToolArguments::streamed)
//! (the adapter keeps no copy of megabyte arguments): the loop's `BlockAssembler` fills them in
//! before the chunk goes anywhere else, so subscribers and the log always see whole blocks.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::message::ContentBlock;

/// Declares [`FailureCode`] with its wire strings, in one place.
macro_rules! failure_codes {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal, $konst:ident;)*) => {
        /// The machine code of a failed attempt (`wire-protocol.md` §10–§11,
        /// `session-format.md` §6.5). The wire string appears only at the edge (serde, logs,
        /// [`FailureCode::as_str`]); code matches on variants. A code this build does not know
        /// (from another writer's log, an uppercased unknown finish reason, `HTTP_<status>`) is
        /// kept verbatim as [`FailureCode::Other`] and written back unchanged: never mapped to a
        /// default.
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum FailureCode {
            $($(#[$doc])* $variant,)*
            /// A code outside the known set, kept verbatim. Build it with
            /// [`FailureCode::from_wire`] so a known spelling never lands here.
            Other(String),
        }

        impl FailureCode {
            /// Every known code, in declaration order (for tests and schemas).
            pub const KNOWN: &'static [FailureCode] = &[$(FailureCode::$variant,)*];

            /// The wire spelling (`AUTH`, `STREAM_CLOSED`, ...; an unknown code verbatim).
            pub fn as_str(&self) -> &str {
                match self {
                    $(FailureCode::$variant => $wire,)*
                    FailureCode::Other(s) => s,
                }
            }

            /// Parses a wire spelling; unknown spellings become [`FailureCode::Other`].
            pub fn from_wire(s: &str) -> Self {
                match s {
                    $($wire => FailureCode::$variant,)*
                    other => FailureCode::Other(other.to_owned()),
                }
            }
        }

        /// The known codes as constants of [`FailureCode`] (kept so `codes::AUTH` reads as
        /// before; prefer the variants in new code).
        pub mod codes {
            use super::FailureCode;
            $($(#[$doc])* pub const $konst: FailureCode = FailureCode::$variant;)*
        }
    };
}

failure_codes! {
    /// 401/403.
    Auth => "AUTH", AUTH;
    /// Balance or quota exhausted.
    Quota => "QUOTA", QUOTA;
    /// 429 without quota wording.
    RateLimit => "RATE_LIMIT", RATE_LIMIT;
    /// The prompt does not fit the model's context window.
    ContextWindowExceeded => "CONTEXT_WINDOW_EXCEEDED", CONTEXT_WINDOW_EXCEEDED;
    /// Other 4xx.
    InvalidRequest => "INVALID_REQUEST", INVALID_REQUEST;
    /// 5xx and provider capacity finishes.
    Server => "SERVER", SERVER;
    /// Connection-level failure (DNS, refused, TLS, reset, body I/O error).
    Transport => "TRANSPORT", TRANSPORT;
    /// Connect timeout, idle watchdog, progress or total deadline.
    Timeout => "TIMEOUT", TIMEOUT;
    /// Clean EOF without a terminated `[DONE]` after data was delivered.
    StreamClosed => "STREAM_CLOSED", STREAM_CLOSED;
    /// Unparsable or oversized payload.
    MalformedResponse => "MALFORMED_RESPONSE", MALFORMED_RESPONSE;
    /// Completed response without any content.
    EmptyResponse => "EMPTY_RESPONSE", EMPTY_RESPONSE;
    /// The caller cancelled.
    Aborted => "ABORTED", ABORTED;
    /// No credential configured.
    MissingCredential => "MISSING_CREDENTIAL", MISSING_CREDENTIAL;
    /// The credential cannot be sent (not a valid header value).
    InvalidCredential => "INVALID_CREDENTIAL", INVALID_CREDENTIAL;
    /// The model stopped because of its content filter.
    ContentFilter => "CONTENT_FILTER", CONTENT_FILTER;
    /// The requested effort is not offered on this route.
    UnsupportedReasoningEffort => "UNSUPPORTED_REASONING_EFFORT", UNSUPPORTED_REASONING_EFFORT;
    /// The request holds content the route cannot carry (e.g. images on a text-only model).
    UnsupportedContent => "UNSUPPORTED_CONTENT", UNSUPPORTED_CONTENT;
    /// No adapter is registered for the requested provider route.
    NoAdapter => "NO_ADAPTER", NO_ADAPTER;
    /// More images must be offloaded before retrying.
    ImageOffloadRequired => "IMAGE_OFFLOAD_REQUIRED", IMAGE_OFFLOAD_REQUIRED;
    /// A stream broke the chunk contract (reported by the `BlockAssembler`).
    ProtocolViolation => "PROTOCOL_VIOLATION", PROTOCOL_VIOLATION;
    /// A flattened non-LLM error.
    Unknown => "UNKNOWN", UNKNOWN;
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for FailureCode {
    fn from(s: &str) -> Self {
        FailureCode::from_wire(s)
    }
}

impl From<String> for FailureCode {
    fn from(s: String) -> Self {
        match FailureCode::from_wire(&s) {
            FailureCode::Other(_) => FailureCode::Other(s),
            known => known,
        }
    }
}

impl From<&FailureCode> for FailureCode {
    fn from(c: &FailureCode) -> Self {
        c.clone()
    }
}

impl PartialEq<str> for FailureCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for FailureCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for FailureCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FailureCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(FailureCode::from)
    }
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
    /// Machine code (unknown codes kept verbatim).
    pub code: FailureCode,
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
    pub fn new(code: impl Into<FailureCode>, message: impl Into<String>) -> Self {
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
        /// What the adapter repaired or tolerated in this attempt (omitted when none), so the
        /// log's stream record shows it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        notes: Vec<StreamNote>,
    },
}

impl StreamChunk {
    /// A finish chunk without replay state or notes.
    pub fn finish(reason: FinishReason) -> Self {
        StreamChunk::Finish {
            reason,
            replay_state: None,
            notes: Vec::new(),
        }
    }
}

/// Something an adapter noticed in provider output and repaired or tolerated instead of failing
/// the attempt; carried on the `finish` chunk (`notes`), so it is in the log. The set is open:
/// notes of other writers are kept verbatim as [`StreamNote::Other`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum StreamNote {
    /// A tool call arrived without an id (absent or `""` in its first fragment); `id` was
    /// synthesised, deterministically, and is what the log and later requests carry.
    SynthesizedToolCallId {
        /// Block index of the call.
        index: u32,
        /// The synthesised id.
        id: String,
    },
    /// The stream ended (clean EOF) after a complete finish (finish reason and usage) without
    /// the `[DONE]` terminator; the attempt was accepted.
    MissingDone,
    /// A usage field was not a token count (negative, fractional, beyond `u64`, not a number)
    /// and was dropped.
    UsageFieldDropped {
        /// The provider's field path, e.g. `usage.prompt_tokens`.
        field: String,
        /// The offending value as sent (JSON text, at most 64 bytes).
        value: String,
    },
    /// Unpaired UTF-16 surrogate escapes (`\ud800`) were replaced with U+FFFD.
    SurrogatesReplaced {
        /// How many were replaced.
        count: u64,
    },
    /// A note this build does not know, kept verbatim.
    #[serde(untagged)]
    Other(Value),
}
