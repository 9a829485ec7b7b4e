//! Tool scheduling: exclusive calls are barriers, consecutive parallel-safe calls share a rolling
//! pool of `maxParallelToolCalls`; `tool/call` is logged at dispatch, results in model order.

use dsh_kernel::CancellationToken;
use dsh_llm::{ContentBlock, Message, MessageSource, ToolCall};
use dsh_session::data::{ToolCallEvent, ToolError as LogToolError, ToolResult as LogToolResult};
use dsh_session::{NewEvent, SessionError};
use dsh_tools::{Concurrency, ToolRequest, ToolResult, codes};
use futures::StreamExt;

use crate::agent::LoopAgent;
use crate::request::new_id;

/// The text of a call never dispatched because the turn was cancelled.
pub(crate) const ABORTED_BEFORE_DISPATCH_TEXT: &str = "Error: tool call aborted before dispatch";

fn log_call(agent: &LoopAgent, call: &ToolCall, turn: u64, step: u64) -> Result<u64, SessionError> {
    let data = ToolCallEvent {
        turn,
        step,
        call_id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
    };
    Ok(agent.session.append(NewEvent::core(data))?.seq())
}

fn log_result(
    agent: &LoopAgent,
    result: &ToolResult,
    call_seq: u64,
    turn: u64,
    step: u64,
) -> Result<(), SessionError> {
    let message = Message::tool_result(
        new_id(),
        result.call_id.clone(),
        result.content.clone(),
        result.is_error,
    );
    let error = if result.is_error {
        result.error.as_ref().map(|e| LogToolError {
            name: e.name.clone(),
            code: e.code.clone(),
            reason: e.reason.clone(),
        })
    } else {
        None
    };
    let data = LogToolResult {
        turn,
        step,
        message: message.into(),
        error,
        meta: result
            .meta
            .as_ref()
            .map(dsh_session::data::ToolMeta::from_value),
    };
    agent
        .session
        .append(NewEvent::core(data).with_sources(vec![call_seq]))?;
    Ok(())
}

fn not_dispatched(call: &ToolCall) -> ToolResult {
    let err = dsh_tools::ToolError::new(
        codes::ABORTED_BEFORE_DISPATCH,
        "tool call aborted before dispatch",
    );
    let mut r = ToolResult::failure(call.id.clone(), call.name.clone(), err);
    r.content = vec![ContentBlock::text(ABORTED_BEFORE_DISPATCH_TEXT)];
    r
}

/// Runs the calls of one step and commits their results in model order. Returns the contexts
/// the tools deferred to the next step, in model order.
pub(crate) async fn run_tools(
    agent: &LoopAgent,
    calls: Vec<ToolCall>,
    token: &CancellationToken,
    turn: u64,
    step: u64,
) -> Result<Vec<String>, SessionError> {
    let scope = agent.scope_ctx().scope_key();
    let tools = agent.shared.tools.clone();
    // Group: consecutive parallel-safe calls share a group; an exclusive call is its own.
    let mut groups: Vec<(Concurrency, Vec<ToolCall>)> = Vec::new();
    for call in calls {
        let c = tools.concurrency(scope.as_ref(), &call.name, &call.arguments);
        match (groups.last_mut(), c) {
            (Some((Concurrency::ParallelSafe, g)), Concurrency::ParallelSafe) => g.push(call),
            _ => groups.push((c, vec![call])),
        }
    }
    let session_id = agent.id.clone();
    // Spill files live in the session's own storage, removed with it; the pipeline's private
    // default only when the storage keeps no artefacts.
    let scratch_cap = agent.shared.sessions.artifact_cap();
    let scratch = match agent.shared.sessions.artifact_dir(&agent.id) {
        Ok(dir) => dir,
        Err(e) => {
            tracing::warn!(agent = %agent.id, error = %e, "no session artefact directory");
            None
        }
    };
    let mut contexts = Vec::new();
    for (kind, group) in groups {
        let pool = match kind {
            Concurrency::ParallelSafe => agent.shared.max_parallel(),
            Concurrency::Exclusive => 1,
        };
        let dispatch = |call: ToolCall| {
            let tools = tools.clone();
            let token = token.clone();
            let scope = scope.clone();
            let session_id = session_id.clone();
            let scratch = scratch.clone();
            async move {
                if token.is_cancelled() {
                    return (call, None);
                }
                // Read per call: a `working_directory` change applies to the calls after it.
                let cwd = agent.options.lock().cwd.clone();
                let call_seq = match log_call(agent, &call, turn, step) {
                    Ok(seq) => seq,
                    Err(e) => return (call, Some(Err(e))),
                };
                // Written before the side effect: a crash of dsh now reads as
                // TOOL_OUTCOME_UNKNOWN on resume. The disk sync waits for the turn end (the
                // tool's own effects are not synced either).
                if let Err(e) = agent.session.write_through().await {
                    return (call, Some(Err(e)));
                }
                let mut request = ToolRequest::new(
                    call.id.clone(),
                    call.name.clone(),
                    call.arguments.clone(),
                    session_id,
                    cwd,
                );
                request.scope = scope;
                if let Some(dir) = scratch {
                    request = request.with_scratch(dir, scratch_cap);
                }
                request.cancel = token.child_token();
                let result = tools.execute(request).await;
                (call, Some(Ok((call_seq, result))))
            }
        };
        let mut results = futures::stream::iter(group).map(dispatch).buffered(pool);
        while let Some((call, outcome)) = results.next().await {
            match outcome {
                None => {
                    let seq = log_call(agent, &call, turn, step)?;
                    log_result(agent, &not_dispatched(&call), seq, turn, step)?;
                }
                Some(Ok((seq, result))) => {
                    contexts.extend(result.contexts.iter().cloned());
                    log_result(agent, &result, seq, turn, step)?;
                }
                Some(Err(e)) => return Err(e),
            }
        }
    }
    Ok(contexts)
}

/// A deferred tool context as a next-step user message.
pub(crate) fn context_message(text: String) -> Message {
    Message::new(
        new_id(),
        dsh_llm::Role::User,
        vec![ContentBlock::text(text)],
        MessageSource::new("tool-context"),
    )
}
