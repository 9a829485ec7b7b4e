//! The turn and step machine (`session-format.md` §9.1).

use std::sync::Arc;

use dsh_agent::events::AgentErrorEvent;
use dsh_agent::hooks::{
    AgentRequest, AgentRequestError, PreStep, PreStepDecision, PreStepInput, RequestErrorDecision,
    RequestErrorInput, RequestInput, TurnEnding, TurnEndingInput, TurnStopping, TurnStoppingInput,
};
use dsh_agent::{Agent, Target};
use dsh_kernel::{CancellationToken, Hook};
use dsh_llm::adapter::ToolSpec;
use dsh_llm::service::CallSettings;
use dsh_llm::{FailureCode, FinishReason, LlmFailure, Message, Role};
use dsh_session::data::{
    EpochHeader, RequestContext, StepEnd, StepStart, TurnEnd, TurnEndReason, TurnStart, UserMessage,
};
use dsh_session::{CloseCause, CoreEvent, EventKind, NewEvent, SessionError};
use dsh_system_prompt::runtime_context::propose;
use dsh_system_prompt::{AssembleContext, ContextSection, SystemPrompt};

use crate::agent::LoopAgent;
use crate::attempt::{AttemptOutcome, run_attempt};
use crate::request::{RequestState, log_request, new_id, reconcile_prompt, tools_changed};
use crate::tools::{context_message, run_tools};

/// A failure that ends the turn with `{kind: error}`.
struct TurnError(LlmFailure);

/// A session failure keeps its own code (`SESSION_IO`, `EVENT_REJECTED`, `SESSION_CLOSED`, …),
/// so the turn end says what went wrong with the log.
impl From<SessionError> for TurnError {
    fn from(e: SessionError) -> Self {
        TurnError(LlmFailure::new(
            FailureCode::from_wire(e.code()),
            e.to_string(),
        ))
    }
}

/// A failure of the loop's own machinery (a hook listener panicked, the agent was dropped, no
/// provider configured): `UNKNOWN`, as the original reports an error without a code.
fn internal(message: impl Into<String>) -> TurnError {
    TurnError(LlmFailure::new(FailureCode::Unknown, message))
}

fn append(agent: &LoopAgent, data: impl Into<CoreEvent>) -> Result<(), TurnError> {
    agent.session.append(NewEvent::core(data))?;
    Ok(())
}

/// Runs a hook with panic containment: a panicking listener fails the turn, never the loop.
async fn call_hook<H: Hook, T, Fut>(
    agent: &LoopAgent,
    input: H::Input,
    terminal: T,
) -> Result<H::Output, TurnError>
where
    T: FnOnce(H::Input) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = H::Output> + Send + 'static,
{
    let fut = agent.scope_ctx().call::<H, T, Fut>(input, terminal);
    dsh_kernel::contain(fut)
        .await
        .map_err(|p| internal(format!("a `{}` listener panicked: {}", H::NAME, p.message)))
}

/// One turn: `turn/start` … `turn/end`, then the durability barrier.
pub(crate) async fn run_turn(agent: &Arc<LoopAgent>, rs: &mut RequestState) {
    let token = agent.turn_token();
    let turn = agent.session.with_log(|l| l.tracker().last_turn()) + 1;
    if let Err(TurnError(e)) = append(agent, TurnStart { turn }) {
        tracing::error!(agent = %agent.id, error = %e.message, "could not open a turn");
        return;
    }
    let reason = match run_steps(agent, rs, &token, turn).await {
        Ok(reason) => reason,
        Err(TurnError(failure)) => TurnEndReason::Error { error: failure },
    };
    if let TurnEndReason::Error { error } = &reason {
        tracing::info!(agent = %agent.id, turn, code = %error.code, error = %error.message, "turn failed");
        agent.scope_ctx().emit(&AgentErrorEvent {
            agent_id: agent.id.clone(),
            turn,
            error: error.clone(),
        });
    }
    // Every end, not only a completed one (a checkpoint of what an interrupted turn changed).
    if let Some(handle) = agent.handle() {
        let input = TurnEndingInput {
            agent: handle,
            turn,
            reason: reason.clone(),
        };
        if let Err(TurnError(e)) = call_hook::<TurnEnding, _, _>(agent, input, |_| async {}).await {
            tracing::error!(agent = %agent.id, error = %e.message, "turn-ending listener failed");
        }
    }
    if let Err(TurnError(e)) = append(agent, TurnEnd { turn, reason }) {
        tracing::error!(agent = %agent.id, error = %e.message, "could not close the turn");
    }
    if let Err(e) = agent.session.flush().await {
        tracing::error!(agent = %agent.id, error = %e, "session flush failed at turn end");
    }
}

enum StepOutcome {
    /// Tool calls ran: another step is owed.
    Continue,
    /// The model answered without tool calls.
    Stop,
    /// The output hit the token cap.
    MaxTokens,
    /// Cancelled.
    Aborted,
}

fn aborted(agent: &LoopAgent) -> TurnEndReason {
    TurnEndReason::Aborted {
        reason: agent.cancel_cause().into(),
    }
}

/// Prompt, tools (one spec type for the header and the request) and runtime-context sections
/// of one step.
struct Assembly {
    prompt: String,
    tools: Vec<ToolSpec>,
    runtime: Vec<ContextSection>,
}

async fn assemble(agent: &LoopAgent, provider: &str, model: &str) -> Result<Assembly, TurnError> {
    let scope = agent.scope_ctx().scope_key();
    let (prompt, tools, runtime) = match agent.shared.ctx.get::<dyn SystemPrompt>() {
        Some(sp) => {
            let cwd = agent.options.lock().cwd.to_string_lossy().into_owned();
            let context = AssembleContext::new(provider, model, cwd)
                .with_scope(scope)
                .with_agent_id(agent.id.clone());
            let a = sp
                .assemble(context)
                .await
                .map_err(|e| internal(e.to_string()))?;
            (a.prompt(), a.tools, a.runtime_context)
        }
        None => (
            String::new(),
            agent.shared.tools.schemas(scope.as_ref()),
            Vec::new(),
        ),
    };
    // Tools declared before keep their places; late ones are appended (prefix cache).
    let tools = crate::request::keep_declared_order(&agent.session, tools);
    Ok(Assembly {
        prompt,
        tools,
        runtime,
    })
}

async fn run_steps(
    agent: &Arc<LoopAgent>,
    rs: &mut RequestState,
    token: &CancellationToken,
    turn: u64,
) -> Result<TurnEndReason, TurnError> {
    let handle = agent.handle().ok_or_else(|| internal("agent dropped"))?;
    let mut step = 0u64;
    loop {
        step += 1;
        let mut batch = agent
            .claim(step == 1)
            .map_err(|e| internal(e.to_string()))?;
        if token.is_cancelled() {
            return Ok(aborted(agent));
        }
        let options = agent.options.lock().clone();
        let provider = options
            .provider
            .clone()
            .ok_or_else(|| internal("no provider is configured for this agent"))?;
        let model = match options.model.clone() {
            Some(m) => m,
            None => match agent.shared.llm.adapter(&provider) {
                Some(a) => a.default_model(),
                None => {
                    return Err(TurnError(LlmFailure::new(
                        dsh_llm::codes::NO_ADAPTER,
                        format!("no adapter is registered for provider `{provider}`"),
                    )));
                }
            },
        };
        let assembly = assemble(agent, &provider, &model).await?;
        if let Some(p) = propose(rs.context.current(&agent.session), &assembly.runtime) {
            batch.push(Message::new(new_id(), Role::User, p.content(), p.source));
        }
        let input = PreStepInput {
            agent: handle.clone(),
            turn,
            step,
            batch,
            starts_request_series: false,
            cancel: token.clone(),
        };
        let decision = call_hook::<PreStep, _, _>(agent, input, |i: PreStepInput| async move {
            PreStepDecision::Enter {
                batch: i.batch,
                starts_request_series: i.starts_request_series,
            }
        })
        .await?;
        let (batch, starts) = match decision {
            PreStepDecision::Reject { reason } => {
                tracing::info!(agent = %agent.id, turn, %reason, "pre-step rejected the turn");
                return Ok(TurnEndReason::Blocked);
            }
            PreStepDecision::Enter {
                batch,
                starts_request_series,
            } => (batch, starts_request_series),
        };
        if step == 1 && batch.is_empty() {
            return Ok(TurnEndReason::Completed);
        }
        if token.is_cancelled() {
            return Ok(aborted(agent));
        }
        append(agent, StepStart { turn, step })?;
        let outcome = run_step(
            agent, &handle, rs, token, turn, step, batch, starts, &model, assembly,
        )
        .await;
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                close_failed_step(agent, turn, step);
                return Err(e);
            }
        };
        append(agent, StepEnd { turn, step })?;
        match outcome {
            StepOutcome::Aborted => return Ok(aborted(agent)),
            // Sticky for the turn: a truncated step ends it `max-tokens`.
            StepOutcome::MaxTokens => return Ok(TurnEndReason::MaxTokens),
            StepOutcome::Continue => {
                if token.is_cancelled() {
                    return Ok(aborted(agent));
                }
                continue;
            }
            StepOutcome::Stop => {
                if agent.has_next_step() {
                    continue;
                }
                let input = TurnStoppingInput {
                    agent: handle.clone(),
                    turn,
                    step,
                };
                call_hook::<TurnStopping, _, _>(agent, input, |_| async {}).await?;
                if agent.has_next_step() && !token.is_cancelled() {
                    continue;
                }
                if token.is_cancelled() {
                    return Ok(aborted(agent));
                }
                return Ok(TurnEndReason::Completed);
            }
        }
    }
}

/// Failed-step recovery: one error result per unanswered call, then `step/end`.
fn close_failed_step(agent: &LoopAgent, turn: u64, step: u64) {
    let closers = agent
        .session
        .with_log(|l| l.closers(CloseCause::Interrupted));
    let results: Vec<NewEvent> = closers
        .into_iter()
        .filter(|e| e.kind == EventKind::ToolResult)
        .collect();
    if let Err(e) = agent.session.append_all(results) {
        tracing::error!(agent = %agent.id, error = %e, "could not record recovery results");
    }
    if let Err(TurnError(e)) = append(agent, StepEnd { turn, step }) {
        tracing::error!(agent = %agent.id, error = %e.message, "could not close the failed step");
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_step(
    agent: &Arc<LoopAgent>,
    handle: &Arc<dyn Agent>,
    rs: &mut RequestState,
    token: &CancellationToken,
    turn: u64,
    step: u64,
    batch: Vec<Message>,
    starts: bool,
    model: &str,
    mut assembly: Assembly,
) -> Result<StepOutcome, TurnError> {
    let options = agent.options.lock().clone();
    let proposed = CallSettings {
        provider: options.provider.clone().unwrap_or_default(),
        model: Some(model.to_owned()),
        effort: options.reasoning_effort.clone(),
        max_tokens: options.max_tokens,
        temperature: options.temperature,
        stop: Vec::new(),
        purpose: None,
    };
    let input = RequestInput {
        agent: handle.clone(),
        turn,
        step,
        settings: proposed,
    };
    let settings =
        call_hook::<AgentRequest, _, _>(agent, input, |i: RequestInput| async move { i.settings })
            .await?;
    // The tools offered, shared by the attempts' headers (see `RequestState::shared_tools`).
    let shared = rs.shared_tools(&assembly.tools);
    let mut attempt = 1u32;
    // Whether the accepted batch is in the log. Not `attempt == 1`: a first attempt that fails
    // in `prepare_call` and is retried has admitted nothing yet.
    let mut admitted = false;
    loop {
        if token.is_cancelled() {
            return Ok(StepOutcome::Aborted);
        }
        let failure = match agent.shared.llm.prepare_call(&settings) {
            Err(failure) => failure,
            Ok(prepared) => {
                let session = &agent.session;
                let generation = session.content_generation();
                // The first built request of the step carries the pre-step series decision.
                let first = !admitted;
                // The route's capabilities decide (format §10.1): an in-history route appends a
                // changed prompt; a route without tool updates starts a series on a tool change.
                let in_history = prepared.system_prompt_update.is_some();
                let starts_recon = (first && starts)
                    || rs.request_surface_generation != generation
                    || (prepared.tool_update.is_none() && tools_changed(session, shared.as_ref()));
                reconcile_prompt(
                    session,
                    &assembly.prompt,
                    in_history,
                    starts_recon,
                    turn,
                    step,
                )?;
                if first {
                    for message in &batch {
                        session.append(NewEvent::core(UserMessage(Arc::new(message.clone()))))?;
                    }
                    admitted = true;
                }
                let header = EpochHeader::of_shared(&prepared, shared.clone());
                let context = RequestContext {
                    provider: prepared.provider.clone(),
                    model: prepared.model.id.clone(),
                    context_window: Some(prepared.model.context_window),
                    system_prompt_update: prepared
                        .system_prompt_update
                        .map(|u| u.as_str().to_owned()),
                };
                log_request(session, rs, header, context, first && starts, turn, step)?;
                let messages: Vec<Arc<Message>> = session
                    .derive_messages()
                    .into_iter()
                    .filter(|m| m.role != Role::Developer)
                    .collect();
                rs.request_surface_generation = session.content_generation();
                // The assembled list itself the first time (no copy of every schema), a copy
                // of the shared one for a retry.
                let tools = if assembly.tools.is_empty() {
                    shared.as_deref().map(<[_]>::to_vec).unwrap_or_default()
                } else {
                    std::mem::take(&mut assembly.tools)
                };
                let request = prepared.request(messages, tools, token.clone());
                match run_attempt(agent, &prepared, request, token, turn, step).await? {
                    AttemptOutcome::Done { finish, tool_calls } => {
                        if finish == FinishReason::MaxTokens {
                            return Ok(StepOutcome::MaxTokens);
                        }
                        if tool_calls.is_empty() {
                            return Ok(StepOutcome::Stop);
                        }
                        let contexts = run_tools(agent, tool_calls, token, turn, step).await?;
                        // Contexts of a batch that a cancel cut short go where the inbox went.
                        let contexts = if agent.may_queue() {
                            contexts
                        } else {
                            Vec::new()
                        };
                        for text in contexts {
                            if let Err(e) =
                                agent.send(context_message(text), Target::NextStep, false)
                            {
                                tracing::warn!(agent = %agent.id, error = %e, "tool context dropped");
                            }
                        }
                        if token.is_cancelled() {
                            return Ok(StepOutcome::Aborted);
                        }
                        return Ok(StepOutcome::Continue);
                    }
                    AttemptOutcome::Cancelled => return Ok(StepOutcome::Aborted),
                    AttemptOutcome::Failed(failure) => failure,
                }
            }
        };
        if token.is_cancelled() {
            return Ok(StepOutcome::Aborted);
        }
        let input = RequestErrorInput {
            agent: handle.clone(),
            turn,
            step,
            attempt,
            provider: settings.provider.clone(),
            model: settings.model.clone().unwrap_or_default(),
            failure: failure.clone(),
            cancel: token.clone(),
        };
        let decision = call_hook::<AgentRequestError, _, _>(agent, input, |_| async {
            RequestErrorDecision::Fail
        })
        .await?;
        if token.is_cancelled() {
            return Ok(StepOutcome::Aborted);
        }
        match decision {
            RequestErrorDecision::Retry => attempt += 1,
            RequestErrorDecision::Fail => return Err(TurnError(failure)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_failures_keep_their_code() {
        let TurnError(f) = SessionError::Closed("s1".into()).into();
        assert_eq!(f.code, FailureCode::Other("SESSION_CLOSED".into()));
        let TurnError(f) = SessionError::Locked("s1".into()).into();
        assert_eq!(f.code.as_str(), "SESSION_LOCKED");
        assert!(f.message.contains("s1"), "{}", f.message);
    }
}
