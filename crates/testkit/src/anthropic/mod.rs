//! The Anthropic Messages dialect (`POST /v1/messages`, streaming): what DeepSeek's
//! Anthropic-compatible endpoint and Anthropic serve, so dsh's Messages adapter and the original
//! harness (which speaks this dialect to DeepSeek) can run against the mock.
//!
//! - [`Message`]: SSE replies from a high-level description: thinking blocks with signatures,
//!   redacted thinking, text, `tool_use` (input streamed as `input_json_delta` fragments),
//!   usage with `cache_read_input_tokens` / `cache_creation_input_tokens`, any stop reason.
//! - error replies in Anthropic's envelope (`{"type":"error","error":{"type","message"}}`),
//!   in-stream `error` events.
//! - [`validate_request`]: the checks a Messages endpoint makes (served when the server's
//!   validation is on); [`rule_violations`]: dsh's prefix rules adapted to this dialect.

mod reply;
mod validate;

pub use reply::{
    ErrorKind, Message, StreamUsage, context_exceeded, error_body, error_reply, overloaded,
    rate_limited, server_error, stream_error, unauthorized,
};
pub use validate::{BODY_KEY_ORDER, rule_violations, strip_cache_control, validate_request};

/// Paths of the dialect (the base URL may or may not end with `/v1`; DeepSeek's is
/// `…/anthropic`, so the mock also answers under that prefix).
pub const MESSAGES_PATHS: &[&str] = &["/v1/messages", "/anthropic/v1/messages"];
