//! `dsh-llm`: the provider-neutral LLM seam of dsh.
//!
//! - [`message`]: [`Message`], [`ContentBlock`], [`MessageSource`] — stored verbatim in session
//!   logs, so their JSON forms follow `session-format.md` §6 exactly.
//! - [`chunk`]: the stream vocabulary ([`StreamChunk`], [`FinishReason`], [`TokenUsage`],
//!   [`LlmFailure`]) every adapter yields for one attempt.
//! - [`assemble`]: [`BlockAssembler`], the one fold of chunks into blocks and a message.
//! - [`pricing`]: [`ModelPricing`] (per-route prices), [`Cost`] and [`UsageTally`], the one
//!   fold of usage into dollars for every front end.
//! - [`sse`]: [`SseFramer`], the byte-level SSE framer shared by adapters.
//! - [`attachments`]: the [`AttachmentStore`] service adapters read image bytes from, and the
//!   placeholder texts of images and files that are not sent.
//!
//! - [`adapter`]: the [`LlmAdapter`] trait (one `stream()` = one attempt) and model resolution.
//! - [`service`]: the [`Llm`] kernel service ([`LlmRouter`], provided by [`LlmPlugin`]): routes
//!   owned by the registering fiber, `prepare_call`, and streaming through the `llm/stream` hook.
//!
//! The vocabulary modules (`message`, `chunk`, `assemble`, `sse`) do not use the kernel.

pub mod adapter;
pub mod arguments;
pub mod assemble;
mod attachment_local;
pub mod attachments;
pub mod chunk;
pub mod message;
pub mod pricing;
pub mod service;
pub mod sse;
pub mod tool_code;

pub use adapter::{
    ChunkStream, LlmAdapter, LlmRequest, Modality, ModelInfo, ReasoningEffort, SystemPromptUpdate,
    ToolSpec, ToolUpdate,
};
pub use arguments::ToolArguments;
pub use assemble::{Assembled, BlockAssembler, ProtocolViolation};
pub use attachments::{
    AttachmentError, AttachmentLocalPlugin, AttachmentLookup, AttachmentStore, DirAttachments,
    LocalAttachments, fixed_attachments, no_attachments,
};
pub use chunk::{
    BlockKind, FailureCode, FinishReason, LlmFailure, StreamChunk, StreamNote, TokenUsage, codes,
};
pub use message::{
    ContentBlock, Dimensions, FileRef, ImageRef, Message, MessageSource, Role, SourceMembers,
    ToolCall, ToolResultBlock,
};
pub use pricing::{
    Cost, DailyWindow, ModelPricing, OffPeak, Rates, TimeOfDay, UsageTally, UsdPerMTok,
};
pub use service::{
    CallSettings, Defaulted, Llm, LlmError, LlmPlugin, LlmRouter, LlmStream, PreparedCall,
};
pub use sse::{SseError, SseEvent, SseFramer, SseItem};
pub use tool_code::ToolErrorCode;
