//! `dsh-llm`: the provider-neutral LLM seam of dsh.
//!
//! - [`message`]: [`Message`], [`ContentBlock`], [`MessageSource`] — stored verbatim in session
//!   logs, so their JSON forms follow `session-format.md` §6 exactly.
//! - [`chunk`]: the stream vocabulary ([`StreamChunk`], [`FinishReason`], [`TokenUsage`],
//!   [`LlmFailure`]) every adapter yields for one attempt.
//! - [`assemble`]: [`BlockAssembler`], the one fold of chunks into blocks and a message.
//! - [`sse`]: [`SseFramer`], the byte-level SSE framer shared by adapters.
//!
//! This crate's vocabulary has no kernel dependency so that session and tool crates can use it
//! without pulling the runtime in.

pub mod assemble;
pub mod chunk;
pub mod message;
pub mod sse;

pub use assemble::{Assembled, BlockAssembler, ProtocolViolation};
pub use chunk::{BlockKind, FinishReason, LlmFailure, StreamChunk, TokenUsage, codes};
pub use message::{
    ContentBlock, Dimensions, FileRef, ImageRef, Message, MessageSource, Role, ToolCall,
    ToolResultBlock,
};
pub use sse::{SseError, SseEvent, SseFramer, SseItem};
