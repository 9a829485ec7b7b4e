//! The vocabulary of the tools pipeline: the request a caller hands to
//! [`crate::Tools::execute`], the validated call every stage sees, the pipeline's hooks and
//! their answers, the approval seam, guards, and the `tools/result` notification.
//!
//! Only types live here; the engine that runs a call is `pipeline.rs`, the registry
//! `registry.rs`. Both import from this module, never the other way round.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::{Hook, Notify, ScopeKey, Service};
use dsh_llm::{ContentBlock, ToolArguments};
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::def::{ToolContext, ToolOutput, ToolResult};
use crate::error::ToolError;

/// One call as the model made it, plus the session facts the pipeline runs it with.
#[derive(Clone, Debug)]
pub struct ToolRequest {
    /// The provider's call id.
    pub call_id: String,
    /// The tool name as called.
    pub name: String,
    /// The raw argument string exactly as streamed (`""` means `{}`), shared with the message.
    pub arguments: ToolArguments,
    /// The session the call belongs to.
    pub session_id: String,
    /// The working directory of the session or agent.
    pub cwd: PathBuf,
    /// The agent scope (`None`: global tools only).
    pub scope: Option<ScopeKey>,
    /// Cancelled when the turn is aborted.
    pub cancel: CancellationToken,
    /// The session's own directory for spill files (its artefact directory in the session
    /// store, given by the composition). `None`: a per-session directory inside the Tools
    /// service's private temporary directory, removed when the service is dropped.
    pub scratch_dir: Option<PathBuf>,
    /// Cap on the total size of the files in the scratch directory (the session's spill
    /// budget); a spill that would pass it is not written and the result says so. `None`: no
    /// cap.
    pub scratch_cap: Option<u64>,
}

impl ToolRequest {
    /// A request with a fresh token, no scope, and the service's private scratch directory.
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<ToolArguments>,
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            name: name.into(),
            arguments: arguments.into(),
            session_id: session_id.into(),
            cwd: cwd.into(),
            scope: None,
            cancel: CancellationToken::new(),
            scratch_dir: None,
            scratch_cap: None,
        }
    }

    /// Builder: the session's spill directory and the cap on its total size.
    pub fn with_scratch(mut self, dir: impl Into<PathBuf>, cap: Option<u64>) -> Self {
        self.scratch_dir = Some(dir.into());
        self.scratch_cap = cap;
        self
    }
}

/// A validated call, shared by every stage of the pipeline.
#[derive(Clone, Debug)]
pub struct CallInfo {
    /// The provider's call id.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// The raw argument string (shared with the message).
    pub arguments: ToolArguments,
    /// The parsed, schema-valid arguments (shared by every stage: a clone of the call copies
    /// no argument bytes).
    pub args: Arc<Value>,
    /// The session id.
    pub session_id: String,
    /// The working directory.
    pub cwd: PathBuf,
    /// The agent scope.
    pub scope: Option<ScopeKey>,
    /// The request's token, cancelled when the turn is aborted: a stage that waits (an
    /// approval question) stops waiting when it fires.
    pub cancel: CancellationToken,
    /// The tool says its calls only read ([`crate::Tool::read_only`]); `false` until the tool
    /// is resolved.
    pub read_only: bool,
}

/// `tools/pre-execute`: may allow, deny, ask for approval, or allow with rewritten arguments.
#[derive(Debug)]
pub struct ToolsPreExecute;

impl Hook for ToolsPreExecute {
    const NAME: &'static str = "tools/pre-execute";
    type Input = Arc<CallInfo>;
    type Output = PreDecision;
}

/// A `tools/pre-execute` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreDecision {
    /// Run the call.
    Allow,
    /// Refuse it: `Error: <reason>` (`TOOL_DENIED`).
    Deny {
        /// Shown to the model.
        reason: String,
    },
    /// Ask the approval service; without one the call is denied.
    Ask {
        /// Why approval is needed.
        reason: Option<String>,
    },
    /// Run the call with these arguments instead (e.g. a hook's `updatedInput`). They are
    /// validated against the tool's schema again (`INVALID_ARGS` when they do not fit); the
    /// logged call keeps the model's arguments.
    Rewrite {
        /// The replacement arguments (an object).
        args: Value,
    },
}

/// What an approval service answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// Run this call once.
    AllowedOnce,
    /// The user said no.
    Rejected,
    /// The question was cancelled (e.g. the turn ended).
    Cancelled,
    /// No one could answer.
    Unavailable,
}

/// The approval seam: a plugin that can ask the user provides it.
pub trait Approvals: Send + Sync + 'static {
    /// Ask whether `call` may run.
    fn ask<'a>(
        &'a self,
        call: &'a CallInfo,
        reason: Option<&'a str>,
    ) -> BoxFuture<'a, ApprovalOutcome>;
}

impl Service for dyn Approvals {
    const NAME: &'static str = "approvals";
}

/// `tools/execute`: middleware around the body (timeouts, checkpoints, sandboxes).
///
/// A listener that limits time cancels `input.ctx.cancel_token()` and keeps awaiting
/// `next.run(..)`; it never drops the inner future.
#[derive(Debug)]
pub struct ToolsExecute;

impl Hook for ToolsExecute {
    const NAME: &'static str = "tools/execute";
    type Input = ExecuteInput;
    type Output = Result<ToolOutput, ToolError>;
}

/// The input of `tools/execute`.
#[derive(Clone, Debug)]
pub struct ExecuteInput {
    /// The call.
    pub call: Arc<CallInfo>,
    /// What the body receives (its token is a child of the turn's).
    pub ctx: ToolContext,
    /// The tool's declared budget, if any.
    pub timeout: Option<Duration>,
}

/// `tools/post-execute`: sees a successful result; may accept (optionally replacing content or
/// value, adding context) or block it.
#[derive(Debug)]
pub struct ToolsPostExecute;

impl Hook for ToolsPostExecute {
    const NAME: &'static str = "tools/post-execute";
    type Input = PostExecuteInput;
    type Output = PostDecision;
}

/// The input of `tools/post-execute`.
#[derive(Clone, Debug)]
pub struct PostExecuteInput {
    /// The call.
    pub call: Arc<CallInfo>,
    /// The result so far.
    pub result: Arc<ToolResult>,
}

/// A `tools/post-execute` answer.
#[derive(Clone, Debug, PartialEq)]
pub enum PostDecision {
    /// Keep the result, possibly amended.
    Accept {
        /// Replacement content (value and meta are kept).
        content: Option<Vec<ContentBlock>>,
        /// Replacement value (re-rendered by the tool). Not together with `content`.
        value: Option<Value>,
        /// Context for the next step, after the tool's and wrappers' contexts.
        additional_contexts: Vec<String>,
    },
    /// Turn the result into a failure carrying `feedback` (`TOOL_BLOCKED`).
    Block {
        /// Shown to the model.
        feedback: String,
    },
}

impl PostDecision {
    /// Accept unchanged.
    pub fn accept() -> Self {
        PostDecision::Accept {
            content: None,
            value: None,
            additional_contexts: Vec::new(),
        }
    }
}

/// `tools/result`: every finished call, success or failure, before it is returned.
#[derive(Clone, Debug)]
pub struct ToolsResultEvent {
    /// The call (`args` is `Null` when the call failed before validation).
    pub call: Arc<CallInfo>,
    /// The final result.
    pub result: Arc<ToolResult>,
}

impl Notify for ToolsResultEvent {
    const NAME: &'static str = "tools/result";
}

/// A deny-only check run after `tools/pre-execute` and before the body: `Ok(())` lets the call
/// through, an error denies it (and becomes the result, code included).
pub trait Guard: Send + Sync + 'static {
    /// Check one call (arguments already validated).
    fn check<'a>(&'a self, call: &'a CallInfo) -> BoxFuture<'a, Result<(), ToolError>>;
}
