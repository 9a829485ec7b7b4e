//! One model attempt: stream, fold, and commit `assistant/message` or `assistant/attempt`.

use std::collections::HashSet;

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
    // Deltas the assembler accepted are packed by length only (`push_folded`): the stream
    // record shares the assembled text, so megabyte arguments are not held twice.
    let attempt = |stream: dsh_session::data::StreamRecords| -> Result<(), SessionError> {
        session.append(NewEvent::core(AssistantAttempt { turn, step, stream }))?;
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
            attempt(packer.finish())?;
            return Ok(AttemptOutcome::Cancelled);
        }
        Some(Err(failure)) => {
            packer.push(
                now_ms(),
                &StreamChunk::finish(FinishReason::error(failure.clone())),
            );
            attempt(packer.finish())?;
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
        let Some(mut chunk) = next else { break };
        let is_finish = matches!(chunk, StreamChunk::Finish { .. });
        if is_finish && token.is_cancelled() {
            cancelled = true;
            break;
        }
        let received = now_ms();
        if let Err(violation) = assembler.push(&chunk) {
            packer.push(received, &chunk);
            let failure = violation.to_failure();
            packer.push(
                now_ms(),
                &StreamChunk::finish(FinishReason::error(failure.clone())),
            );
            attempt(packer.finish_with(&assembler))?;
            return Ok(AttemptOutcome::Failed(failure));
        }
        // A tool call's arguments left "as streamed" by the adapter are the assembler's text.
        assembler.fill(&mut chunk);
        packer.push_folded(received, &chunk);
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
        let stream = packer.finish_with(&assembler);
        if prefix.is_empty() {
            attempt(stream)?;
        } else {
            let mut message = Message::new(
                new_id(),
                dsh_llm::Role::Assistant,
                prefix,
                dsh_llm::MessageSource::model(provider, model, None),
            );
            assign_call_ids(session, &mut message, turn, step);
            let data = AssistantMessage {
                turn,
                step,
                message: message.into(),
                usage: None,
                interrupted: Some(true),
                stream,
            };
            session.append(NewEvent::core(data))?;
        }
        return Ok(AttemptOutcome::Cancelled);
    }
    if !finished {
        let failure = LlmFailure::new(codes::STREAM_CLOSED, "the stream ended without a finish");
        packer.push(
            now_ms(),
            &StreamChunk::finish(FinishReason::error(failure.clone())),
        );
        attempt(packer.finish_with(&assembler))?;
        return Ok(AttemptOutcome::Failed(failure));
    }
    let stream = packer.finish_with(&assembler);
    let assembled = match assembler.finish() {
        Ok(a) => a,
        Err(violation) => {
            attempt(stream)?;
            return Ok(AttemptOutcome::Failed(violation.to_failure()));
        }
    };
    if let Some(failure) = assembled.finish.failure().cloned() {
        attempt(stream)?;
        return Ok(AttemptOutcome::Failed(failure));
    }
    let finish = assembled.finish.clone();
    let usage = assembled.usage;
    let mut message = assembled.into_message(new_id(), provider, model);
    assign_call_ids(session, &mut message, turn, step);
    let tool_calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
    let data = AssistantMessage {
        turn,
        step,
        message: message.into(),
        usage,
        interrupted: None,
        stream,
    };
    session.append(NewEvent::core(data))?;
    Ok(AttemptOutcome::Done { finish, tool_calls })
}

/// Gives every tool call of `message` an id that is non-empty and new to the session: a
/// provider that sends an empty id, or reuses one from an earlier step or from this message,
/// must never make the log refuse the message (and the session unresumable). A replaced id is
/// `dsh-call-{turn}-{step}-{index}`; the stream record keeps the provider's original bytes, so
/// the log shows what was replaced. `advertised` answers for the session (the log's own
/// tracker: no second projection of its ids).
pub(crate) fn unique_call_ids(
    message: &mut Message,
    advertised: impl Fn(&str) -> bool,
    turn: u64,
    step: u64,
) {
    let mut seen: HashSet<String> = HashSet::new();
    let taken = |id: &str, seen: &HashSet<String>| advertised(id) || seen.contains(id);
    let mut index = 0usize;
    for block in &mut message.content {
        let dsh_llm::ContentBlock::ToolCall(call) = block else {
            continue;
        };
        if call.id.is_empty() || taken(&call.id, &seen) {
            let mut fresh = format!("dsh-call-{turn}-{step}-{index}");
            let mut n = 1;
            while taken(&fresh, &seen) {
                fresh = format!("dsh-call-{turn}-{step}-{index}-{n}");
                n += 1;
            }
            tracing::warn!(
                provider_id = %call.id,
                id = %fresh,
                tool = %call.name,
                "the provider sent an empty or reused tool-call id; a new id was assigned"
            );
            call.id = fresh;
        }
        seen.insert(call.id.clone());
        index += 1;
    }
}

/// [`unique_call_ids`] against the session's advertised ids.
fn assign_call_ids(session: &dsh_session::Session, message: &mut Message, turn: u64, step: u64) {
    session.with_log(|l| unique_call_ids(message, |id| l.tracker().is_advertised(id), turn, step));
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_llm::{ContentBlock, MessageSource, Role};

    fn calls(ids: &[&str]) -> Message {
        let content = ids
            .iter()
            .map(|id| {
                ContentBlock::ToolCall(ToolCall {
                    id: (*id).to_owned(),
                    name: "bash".into(),
                    arguments: "{}".into(),
                })
            })
            .collect();
        Message::new(
            "m",
            Role::Assistant,
            content,
            MessageSource::model("p", "m", None),
        )
    }

    fn ids(m: &Message) -> Vec<String> {
        m.tool_calls().map(|c| c.id.clone()).collect()
    }

    #[test]
    fn empty_reused_and_repeated_ids_are_replaced_once() {
        let mut seen: HashSet<String> = ["call_a".to_owned()].into();
        let mut m = calls(&["", "call_a", "call_b", "call_b", "call_c"]);
        unique_call_ids(&mut m, |id| seen.contains(id), 3, 2);
        seen.extend(ids(&m));
        assert_eq!(
            ids(&m),
            [
                "dsh-call-3-2-0",
                "dsh-call-3-2-1",
                "call_b",
                "dsh-call-3-2-3",
                "call_c"
            ]
        );
        assert_eq!(seen.len(), 6);
        // A second message reusing everything gets fresh ids that clash with nothing.
        let mut again = calls(&["dsh-call-3-2-0", "call_c"]);
        unique_call_ids(&mut again, |id| seen.contains(id), 3, 2);
        assert_eq!(ids(&again), ["dsh-call-3-2-0-1", "dsh-call-3-2-1-1"]);
    }

    #[test]
    fn fresh_ids_are_kept() {
        let mut m = calls(&["x", "y"]);
        unique_call_ids(&mut m, |_| false, 1, 1);
        assert_eq!(ids(&m), ["x", "y"]);
    }
}
