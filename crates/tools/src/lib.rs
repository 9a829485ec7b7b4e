//! `dsh-tools`: the Tools service of dsh.
//!
//! A tool is a name, a description, a JSON Schema for its arguments, an async body returning
//! JSON, a renderer to content blocks, an optional time budget and a per-call concurrency
//! classification ([`Tool`]). The [`Tools`] service (provided by [`ToolsPlugin`]) owns the
//! registry — registrations are effects of the caller's fiber, scoped registrations shadow
//! global ones, per-scope allow/deny filters and deny-only [`Guard`]s — and runs each call
//! through the pipeline: validation ([`schema`]), `tools/pre-execute`, guards,
//! `tools/execute` around the body, rendering, `tools/post-execute` and the `tools/result`
//! notification. Every failure becomes an error result with a code ([`ToolError`], [`codes`]).
//! [`ToolTimeoutPlugin`] enforces tool budgets on `tools/execute`.

pub mod def;
pub mod display;
pub mod error;
mod parse;
mod pipeline;
pub mod registry;
pub mod schema;
pub mod service;
mod spill;
pub mod vocab;

pub use def::{Concurrency, FnTool, Tool, ToolContext, ToolOutput, ToolResult, render_default};
pub use display::{DisplayInput, DisplayResult, generic_display};
pub use dsh_llm::ToolErrorCode;
pub use dsh_llm::ToolSpec;
/// The display vocabulary of `dsh-protocol`, re-exported for tool authors.
pub use dsh_protocol::{
    DisplayField, ExitStatus, FileDiff, Location, OutputSummary, TodoItem, TodoStatus, ToolDisplay,
    ToolKind,
};
pub use error::{ToolError, codes};
pub use registry::{ToolFilter, ToolsError, valid_tool_name};
pub use service::{
    DEFAULT_MAX_INLINE_BYTES, ToolTimeoutConfig, ToolTimeoutPlugin, Tools, ToolsConfig,
    ToolsPlugin, ToolsService,
};
pub use vocab::{
    ApprovalOutcome, Approvals, CallInfo, ExecuteInput, Guard, PostDecision, PostExecuteInput,
    PreDecision, ToolRequest, ToolsExecute, ToolsPostExecute, ToolsPreExecute, ToolsResultEvent,
};
