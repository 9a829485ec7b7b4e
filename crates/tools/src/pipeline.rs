//! The execution pipeline: the driver that runs one call through the hooks declared in
//! [`crate::vocab`].
//!
//! Order: resolve → parse and validate → `tools/pre-execute` (allow / deny / ask) → guards →
//! `tools/execute` (around the body) → render → `tools/post-execute` → `tools/result`.
//! Every failure, including a panic in a listener or the body, becomes an error result.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_kernel::{Ctx, Hook, contain, contain_sync};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::def::{Tool, ToolContext, ToolOutput, ToolResult};
use crate::error::{ToolError, codes};
use crate::registry::Registry;
use crate::schema;
use crate::vocab::{
    ApprovalOutcome, Approvals, CallInfo, ExecuteInput, PostDecision, PostExecuteInput,
    PreDecision, ToolRequest, ToolsExecute, ToolsPostExecute, ToolsPreExecute, ToolsResultEvent,
};

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
        args: Arc::new(Value::Null),
        session_id: req.session_id.clone(),
        cwd: req.cwd.clone(),
        scope: scope.clone(),
        cancel: req.cancel.clone(),
        read_only: false,
    };
    let (result, call) = match prepare(&ctx, &registry, &req, &mut call).await {
        Ok((tool, shared)) => {
            // The shared call is the only holder of the parsed arguments now, so the body can
            // own them without a copy (see `dispatch`).
            drop(call);
            let (result, call) = dispatch(&ctx, &registry, &req, tool, shared).await;
            (crate::spill::apply(&registry, &req, result), call)
        }
        Err(err) => (
            ToolResult::failure(&req.call_id, &req.name, err),
            Arc::new(call),
        ),
    };
    let event = ToolsResultEvent {
        call,
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
    if tool.foreign_schema() {
        if !args.is_object() {
            return Err(ToolError::invalid_args(
                "invalid arguments: arguments must be a JSON object",
            ));
        }
    } else if let violations = schema::validate(tool.parameters(), &args)
        && !violations.is_empty()
    {
        return Err(ToolError::invalid_args(schema::violations_message(
            &violations,
        )));
    }
    call.args = Arc::new(args);
    call.read_only = tool.read_only();
    let mut shared = Arc::new(call.clone());
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
        PreDecision::Rewrite { args } => {
            let violations = schema::validate(tool.parameters(), &args);
            if !violations.is_empty() {
                return Err(ToolError::invalid_args(format!(
                    "the arguments rewritten before execution are invalid: {}",
                    schema::violations_message(&violations)
                )));
            }
            tracing::info!(tool = %req.name, call = %req.call_id, "arguments rewritten before execution");
            call.arguments = args.to_string().into();
            call.args = Arc::new(args);
            shared = Arc::new(call.clone());
        }
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
        ApprovalOutcome::Cancelled if call.cancel.is_cancelled() => format!(
            "approval for tool \"{name}\" was cancelled: the turn was interrupted; its body was \
             not executed"
        ),
        ApprovalOutcome::Cancelled => {
            format!("approval for tool \"{name}\" was cancelled; its body was not executed")
        }
        ApprovalOutcome::Unavailable => {
            format!("approval for tool \"{name}\" is unavailable; its body was not executed")
        }
    };
    Err(ToolError::new(codes::TOOL_DENIED, message))
}

/// `tools/execute` around the body, then render and `tools/post-execute`. Returns the call as
/// the later stages see it.
///
/// Large arguments ([`schema::LARGE_ARGUMENTS`]): the body owns the parse when nothing else
/// holds the call (no hook kept it), moved, not copied (megabytes for a `write`), and the later
/// stages get the call with its arguments parsed again from the raw string once the body is
/// done. Small ones are shared with the later stages and copied into the body (no second parse).
async fn dispatch(
    ctx: &Ctx,
    registry: &Registry,
    req: &ToolRequest,
    tool: Arc<dyn Tool>,
    call: Arc<CallInfo>,
) -> (ToolResult, Arc<CallInfo>) {
    let mut after = CallInfo::clone(&call);
    let large = after.arguments.len() > schema::LARGE_ARGUMENTS;
    if large {
        after.args = Arc::new(Value::Null);
    }
    let body_token = req.cancel.child_token();
    let mut tctx = ToolContext::new(&req.call_id, &req.session_id, &req.cwd)
        .with_tool_name(&req.name)
        .with_cancel(body_token.clone())
        .with_scope(req.scope.as_ref().map(|s| s.as_str().to_owned()));
    if let Some(dir) = registry.scratch_dir(req) {
        tctx = tctx.with_scratch_dir(dir);
    }
    tctx = tctx.with_scratch_cap(req.scratch_cap);
    let timeout = contain_sync(|| tool.timeout()).unwrap_or(None);
    let input = ExecuteInput {
        call,
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
            let name = call.name.clone();
            let args = match Arc::try_unwrap(call) {
                Ok(info) => Arc::try_unwrap(info.args).unwrap_or_else(|a| Value::clone(&a)),
                Err(shared) => Value::clone(&shared.args),
            };
            match contain(body_tool.execute(ctx, args)).await {
                Ok(r) => r,
                Err(panicked) => Err(ToolError::failed(format!(
                    "tool \"{name}\" panicked: {}",
                    panicked.message
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
    if large {
        // The later stages see the call with its arguments again (the body may have owned them).
        after.args = Arc::new(schema::parse_arguments(&after.arguments));
    }
    let call = Arc::new(after);
    let output = match outcome {
        Ok(output) => output,
        Err(err) => return (ToolResult::failure(&req.call_id, &req.name, err), call),
    };
    let result = match render(&*tool, &req.call_id, &req.name, output) {
        Ok(r) => r,
        Err(err) => return (ToolResult::failure(&req.call_id, &req.name, err), call),
    };
    (
        post_execute(ctx, req, &*tool, Arc::clone(&call), result).await,
        call,
    )
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
