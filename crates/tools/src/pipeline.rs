//! The execution pipeline: its hooks, their vocabulary, and the driver that runs one call.
//!
//! Order: resolve → parse and validate → `tools/pre-execute` (allow / deny / ask) → guards →
//! `tools/execute` (around the body) → render → `tools/post-execute` → `tools/result`.
//! Every failure, including a panic in a listener or the body, becomes an error result.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dsh_kernel::{Ctx, Hook, Notify, ScopeKey, Service, contain, contain_sync};
use dsh_llm::ContentBlock;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::def::{Tool, ToolContext, ToolOutput, ToolResult};
use crate::error::{ToolError, codes};
use crate::registry::Registry;
use crate::schema;

/// One call as the model made it, plus the session facts the pipeline runs it with.
#[derive(Clone, Debug)]
pub struct ToolRequest {
    /// The provider's call id.
    pub call_id: String,
    /// The tool name as called.
    pub name: String,
    /// The raw argument string exactly as streamed (`""` means `{}`).
    pub arguments: String,
    /// The session the call belongs to.
    pub session_id: String,
    /// The working directory of the session or agent.
    pub cwd: PathBuf,
    /// The agent scope (`None`: global tools only).
    pub scope: Option<ScopeKey>,
    /// Cancelled when the turn is aborted.
    pub cancel: CancellationToken,
    /// Session-private directory for spill files (`None`: the default under the temp dir).
    pub scratch_dir: Option<PathBuf>,
}

impl ToolRequest {
    /// A request with a fresh token, no scope and the default scratch directory.
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
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
        }
    }
}

/// A validated call, shared by every stage of the pipeline.
#[derive(Clone, Debug)]
pub struct CallInfo {
    /// The provider's call id.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// The raw argument string.
    pub arguments: String,
    /// The parsed, schema-valid arguments.
    pub args: Value,
    /// The session id.
    pub session_id: String,
    /// The working directory.
    pub cwd: PathBuf,
    /// The agent scope.
    pub scope: Option<ScopeKey>,
}

/// `tools/pre-execute`: may allow, deny or ask for approval. It cannot rewrite arguments.
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

/// Runs one pipeline stage with the kernel's panic containment: a panic becomes `TOOL_FAILED`.
async fn contained<T>(stage: &str, fut: BoxFuture<'_, T>) -> Result<T, ToolError> {
    contain(fut).await.map_err(|panicked| {
        let msg = panicked.message;
        tracing::error!(stage, error = %msg, "tool pipeline stage panicked");
        ToolError::failed(format!("{stage} failed: {msg}"))
    })
}

/// Run one call through the pipeline. Never panics; every failure is an error result.
pub(crate) async fn run_call(ctx: Ctx, registry: Arc<Registry>, req: ToolRequest) -> ToolResult {
    let scope = req.scope.clone();
    let mut call = CallInfo {
        call_id: req.call_id.clone(),
        name: req.name.clone(),
        arguments: req.arguments.clone(),
        args: Value::Null,
        session_id: req.session_id.clone(),
        cwd: req.cwd.clone(),
        scope: scope.clone(),
    };
    let result = match prepare(&ctx, &registry, &req, &mut call).await {
        Ok((tool, call)) => {
            let result = dispatch(&ctx, &req, tool, call).await;
            crate::spill::apply(&req, registry.max_inline_bytes, result)
        }
        Err(err) => ToolResult::failure(&req.call_id, &req.name, err),
    };
    let event = ToolsResultEvent {
        call: Arc::new(call),
        result: Arc::new(result.clone()),
    };
    ctx.emit_in(scope.as_ref(), &event);
    result
}

/// Resolve, validate, pre-execute and guards. On success the call may run.
async fn prepare(
    ctx: &Ctx,
    registry: &Registry,
    req: &ToolRequest,
    call: &mut CallInfo,
) -> Result<(Arc<dyn Tool>, Arc<CallInfo>), ToolError> {
    let scope = req.scope.as_ref();
    let tool = registry
        .resolve(scope, &req.name)
        .ok_or_else(|| ToolError::unknown_tool(&req.name))?;
    if req.cancel.is_cancelled() {
        return Err(ToolError::aborted_before_dispatch());
    }
    let args = schema::parse_arguments(&req.arguments);
    let violations = schema::validate(tool.parameters(), &args);
    if !violations.is_empty() {
        return Err(ToolError::invalid_args(schema::violations_message(
            &violations,
        )));
    }
    call.args = args;
    let shared = Arc::new(call.clone());
    let decision = contained(
        ToolsPreExecute::NAME,
        ctx.call_in::<ToolsPreExecute, _, _>(scope, shared.clone(), |_| async {
            PreDecision::Allow
        }),
    )
    .await?;
    match decision {
        PreDecision::Allow => {}
        PreDecision::Deny { reason } => return Err(ToolError::new(codes::TOOL_DENIED, reason)),
        PreDecision::Ask { reason } => ask(ctx, &shared, reason.as_deref()).await?,
    }
    if req.cancel.is_cancelled() {
        return Err(ToolError::aborted_before_dispatch());
    }
    for guard in registry.guards(scope) {
        contained("guard", guard.check(&shared)).await??;
    }
    if req.cancel.is_cancelled() {
        return Err(ToolError::aborted_before_dispatch());
    }
    Ok((tool, shared))
}

async fn ask(ctx: &Ctx, call: &CallInfo, reason: Option<&str>) -> Result<(), ToolError> {
    let name = &call.name;
    let Some(approvals) = ctx.get::<dyn Approvals>() else {
        let why = reason.map(|r| format!(" ({r})")).unwrap_or_default();
        return Err(ToolError::new(
            codes::TOOL_DENIED,
            format!("tool \"{name}\" requires approval{why}, but no approval service is available"),
        ));
    };
    let outcome = contained("approval", approvals.ask(call, reason)).await?;
    let message = match outcome {
        ApprovalOutcome::AllowedOnce => return Ok(()),
        ApprovalOutcome::Rejected => {
            format!("the user rejected tool \"{name}\"; its body was not executed")
        }
        ApprovalOutcome::Cancelled => {
            format!("approval for tool \"{name}\" was cancelled; its body was not executed")
        }
        ApprovalOutcome::Unavailable => {
            format!("approval for tool \"{name}\" is unavailable; its body was not executed")
        }
    };
    Err(ToolError::new(codes::TOOL_DENIED, message))
}

/// `tools/execute` around the body, then render and `tools/post-execute`.
async fn dispatch(
    ctx: &Ctx,
    req: &ToolRequest,
    tool: Arc<dyn Tool>,
    call: Arc<CallInfo>,
) -> ToolResult {
    let body_token = req.cancel.child_token();
    let mut tctx = ToolContext::new(&req.call_id, &req.session_id, &req.cwd)
        .with_tool_name(&req.name)
        .with_cancel(body_token.clone())
        .with_scope(req.scope.as_ref().map(|s| s.as_str().to_owned()));
    if let Some(dir) = &req.scratch_dir {
        tctx = tctx.with_scratch_dir(dir);
    }
    let timeout = contain_sync(|| tool.timeout()).unwrap_or(None);
    let input = ExecuteInput {
        call: call.clone(),
        ctx: tctx,
        timeout,
    };
    let started = Arc::new(AtomicBool::new(false));
    let body_started = started.clone();
    let body_tool = tool.clone();
    let outcome = contained(
        ToolsExecute::NAME,
        ctx.call_in::<ToolsExecute, _, _>(req.scope.as_ref(), input, move |input| async move {
            body_started.store(true, Ordering::SeqCst);
            let ExecuteInput { call, ctx, .. } = input;
            let args = call.args.clone();
            match contain(body_tool.execute(ctx, args)).await {
                Ok(r) => r,
                Err(panicked) => Err(ToolError::failed(format!(
                    "tool \"{}\" panicked: {}",
                    call.name, panicked.message
                ))),
            }
        }),
    )
    .await
    .and_then(|r| r);
    let outcome = match outcome {
        Ok(_) if req.cancel.is_cancelled() => Err(if started.load(Ordering::SeqCst) {
            ToolError::aborted()
        } else {
            ToolError::aborted_before_dispatch()
        }),
        other => other,
    };
    let output = match outcome {
        Ok(output) => output,
        Err(err) => return ToolResult::failure(&req.call_id, &req.name, err),
    };
    let result = match render(&*tool, &req.call_id, &req.name, output) {
        Ok(r) => r,
        Err(err) => return ToolResult::failure(&req.call_id, &req.name, err),
    };
    post_execute(ctx, req, &*tool, call, result).await
}

fn render(
    tool: &dyn Tool,
    call_id: &str,
    name: &str,
    output: ToolOutput,
) -> Result<ToolResult, ToolError> {
    let content = contain_sync(|| tool.render(&output)).map_err(|panicked| {
        ToolError::failed(format!(
            "tool \"{name}\" failed to render its result: {}",
            panicked.message
        ))
    })?;
    Ok(ToolResult {
        call_id: call_id.to_owned(),
        name: name.to_owned(),
        content,
        is_error: false,
        error: None,
        value: Some(output.value),
        meta: output.meta,
        contexts: output.contexts,
    })
}

async fn post_execute(
    ctx: &Ctx,
    req: &ToolRequest,
    tool: &dyn Tool,
    call: Arc<CallInfo>,
    result: ToolResult,
) -> ToolResult {
    let input = PostExecuteInput {
        call,
        result: Arc::new(result.clone()),
    };
    let decision = contained(
        ToolsPostExecute::NAME,
        ctx.call_in::<ToolsPostExecute, _, _>(req.scope.as_ref(), input, |_| async {
            PostDecision::accept()
        }),
    )
    .await;
    let fail = |err| ToolResult::failure(&req.call_id, &req.name, err);
    match decision {
        Err(err) => fail(err),
        Ok(PostDecision::Block { feedback }) => fail(ToolError::new(codes::TOOL_BLOCKED, feedback)),
        Ok(PostDecision::Accept {
            content,
            value,
            additional_contexts,
        }) => {
            let mut result = result;
            match (content, value) {
                (Some(_), Some(_)) => {
                    return fail(ToolError::new(
                        codes::INVALID_TOOL_OUTPUT,
                        format!(
                            "tool \"{}\" returned invalid output: a post-execute listener replaced both content and value",
                            req.name
                        ),
                    ));
                }
                (Some(content), None) => result.content = content,
                (None, Some(value)) => {
                    let output = ToolOutput {
                        value,
                        meta: result.meta.clone(),
                        contexts: Vec::new(),
                    };
                    match render(tool, &req.call_id, &req.name, output) {
                        Ok(r) => {
                            result.content = r.content;
                            result.value = r.value;
                        }
                        Err(err) => return fail(err),
                    }
                }
                (None, None) => {}
            }
            result.contexts.extend(additional_contexts);
            result
        }
    }
}
