//! One model attempt: stream, fold, and commit `assistant/message` or `assistant/attempt`.

use dsh_agent::events::AgentStreamChunk;
use dsh_kernel::CancellationToken;
use dsh_llm::adapter::LlmRequest;
use dsh_llm::service::PreparedCall;
use dsh_llm::{BlockAssembler, FinishReason, LlmFailure, Message, StreamChunk, ToolCall, codes};
use dsh_session::data::{AssistantAttempt, AssistantMessage};
use dsh_session::stream::StreamPacker;
use dsh_session::{NewEvent, SessionError, now_ms};
use futures::StreamExt;

use crate::agent::LoopAgent;
use crate::request::new_id;

/// How an attempt settled.
pub(crate) enum AttemptOutcome {
    /// A successful finish; the message is committed.
    Done {
        /// Why the model stopped.
        finish: FinishReason,
        /// The tool calls to run (none after a max-tokens finish).
        tool_calls: Vec<ToolCall>,
    },
    /// Cancelled; the delivered prefix (if any) is committed as an interrupted message.
    Cancelled,
    /// Failed; the attempt is logged as `assistant/attempt`.
    Failed(LlmFailure),
}

fn typed<T: dsh_session::data::EventData>(data: &T) -> Result<NewEvent, SessionError> {
    NewEvent::typed(data).map_err(|e| SessionError::Io(format!("{}: {e}", T::TYPE)))
}

/// Runs one attempt of `prepared` with `request`.
pub(crate) async fn run_attempt(
    agent: &LoopAgent,
    prepared: &PreparedCall,
    request: LlmRequest,
    token: &CancellationToken,
    turn: u64,
    step: u64,
) -> Result<AttemptOutcome, SessionError> {
    let provider = prepared.provider.clone();
    let model = prepared.model.id.clone();
    let mut packer = StreamPacker::new();
    let mut assembler = BlockAssembler::new();
    let session = &agent.session;
    let attempt = |packer: StreamPacker| -> Result<(), SessionError> {
        session.append(typed(&AssistantAttempt {
            turn,
            step,
            stream: packer.finish(),
        })?)?;
        Ok(())
    };

    let started = tokio::select! {
        biased;
        _ = token.cancelled() => None,
        r = agent.shared.llm.stream(agent.scope_ctx(), request) => Some(r),
    };
    let mut stream = match started {
        None => {
            packer.push(
                now_ms(),
                &StreamChunk::finish(FinishReason::Aborted {
                    failure: LlmFailure::new(codes::ABORTED, "request cancelled"),
                }),
            );
            attempt(packer)?;
            return Ok(AttemptOutcome::Cancelled);
        }
        Some(Err(failure)) => {
            packer.push(
                now_ms(),
                &StreamChunk::finish(FinishReason::error(failure.clone())),
            );
            attempt(packer)?;
            return Ok(AttemptOutcome::Failed(failure));
        }
        Some(Ok(s)) => s,
    };

    let mut cancelled = false;
    let mut finished = false;
    let mut visible = false;
    loop {
        let next = tokio::select! {
            biased;
            _ = token.cancelled() => { cancelled = true; break; }
            n = stream.next() => n,
        };
        let Some(chunk) = next else { break };
        let is_finish = matches!(chunk, StreamChunk::Finish { .. });
        if is_finish && token.is_cancelled() {
            cancelled = true;
            break;
        }
        packer.push(now_ms(), &chunk);
        if let Err(violation) = assembler.push(&chunk) {
            let failure = violation.to_failure();
            packer.push(
                now_ms(),
                &StreamChunk::finish(FinishReason::error(failure.clone())),
            );
            attempt(packer)?;
            return Ok(AttemptOutcome::Failed(failure));
        }
        if !visible
            && matches!(
                chunk,
                StreamChunk::TextDelta { .. } | StreamChunk::ReasoningDelta { .. }
            )
        {
            visible = true;
            tracing::debug!(agent = %agent.id, turn, step, "first visible output delivered");
        }
        agent.scope_ctx().emit(&AgentStreamChunk {
            agent_id: agent.id.clone(),
            turn,
            step,
            chunk,
        });
        if is_finish {
            finished = true;
            break;
        }
    }
    // Close the connection promptly.
    drop(stream);

    if cancelled {
        let prefix = assembler.interrupted_prefix();
        if prefix.is_empty() {
            attempt(packer)?;
        } else {
            let message = Message::new(
                new_id(),
                dsh_llm::Role::Assistant,
                prefix,
                dsh_llm::MessageSource::model(provider, model, None),
            );
            let data = AssistantMessage {
                turn,
                step,
                message: message.into(),
                usage: None,
                interrupted: Some(true),
                stream: packer.finish(),
            };
            session.append(typed(&data)?)?;
        }
        return Ok(AttemptOutcome::Cancelled);
    }
    if !finished {
        let failure = LlmFailure::new(codes::STREAM_CLOSED, "the stream ended without a finish");
        packer.push(
            now_ms(),
            &StreamChunk::finish(FinishReason::error(failure.clone())),
        );
        attempt(packer)?;
        return Ok(AttemptOutcome::Failed(failure));
    }
    let assembled = match assembler.finish() {
        Ok(a) => a,
        Err(violation) => {
            attempt(packer)?;
            return Ok(AttemptOutcome::Failed(violation.to_failure()));
        }
    };
    if let Some(failure) = assembled.finish.failure().cloned() {
        attempt(packer)?;
        return Ok(AttemptOutcome::Failed(failure));
    }
    let finish = assembled.finish.clone();
    let usage = assembled.usage;
    let tool_calls: Vec<ToolCall> = assembled.tool_calls().cloned().collect();
    let message = assembled.into_message(new_id(), provider, model);
    let data = AssistantMessage {
        turn,
        step,
        message: message.into(),
        usage,
        interrupted: None,
        stream: packer.finish(),
    };
    session.append(typed(&data)?)?;
    Ok(AttemptOutcome::Done { finish, tool_calls })
}
