//! One summary compaction as a durable bracket (`session-format.md` §14):
//! `compaction/start → compaction/summary → user/message {replace} → dsh/compaction-tokens →
//! compaction/end`, or `compaction/start → compaction/end {error}` with the history untouched.
//!
//! The summary request is the conversation's own next request (its system prompt, tools and
//! derived messages, exactly as the loop would send them) with the instruction appended as one
//! final user message, so the provider serves the whole history from its prefix cache.

use std::pin::pin;
use std::sync::Arc;

use dsh_agent::Agent;
use dsh_kernel::CancellationToken;
use dsh_llm::service::CallSettings;
use dsh_llm::{BlockAssembler, ContentBlock, FinishReason, Llm, Message, Role, TokenUsage};
use dsh_session::data::UserMessage;
use dsh_session::{CoreEvent, NewEvent, SessionLog};
use futures::StreamExt;
use futures::future::{Either, select};

use crate::select::{NodeInfo, Span, select_span};
use crate::summary::{checkpoint_message, instruction_message};
use dsh_compaction_api::events::{
    CompactionEnd, CompactionStart, CompactionSummary, CompactionTokens, ShadowedRange,
};
use dsh_compaction_api::meter::TokenMeter;
pub use dsh_compaction_api::{CompactionError, CompactionOutcome};

/// A span estimated under this many tokens is not worth a model call (a checkpoint's frame
/// alone is about 80 tokens and a useful summary several hundred): it counts as nothing
/// compactable.
pub const MIN_SHADOWED_TOKENS: u64 = 1024;

/// The route a summary call uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// Provider route.
    pub provider: String,
    /// Model id.
    pub model: String,
}

/// What one compaction is asked to do.
#[derive(Clone, Debug)]
pub struct CompactionRequest {
    /// The open turn (`None`: manual, between turns).
    pub turn: Option<u64>,
    /// Tokens the retained tail must hold (0: only the newest indivisible unit).
    pub retain_tokens: u64,
    /// The front-end command that asked.
    pub source_command_id: Option<String>,
    /// Messages the next step will append (counted by the meter, not summarised).
    pub pending: Vec<Message>,
    /// A configured summariser route (instead of the conversation's own).
    pub target: Option<Target>,
    /// Output cap of the summary call.
    pub max_tokens: u64,
    /// Stops the summary call; the bracket closes with `error: cancelled`.
    pub cancel: CancellationToken,
}

/// The history as the loop would send it next, plus what selection needs, taken under one
/// lock: the CPU-side part of a compaction before its model call.
#[derive(Debug)]
pub struct Snapshot {
    /// Selection view of the current nodes.
    pub nodes: Vec<NodeInfo>,
    /// The derived messages the loop's next request would carry.
    pub messages: Vec<Arc<Message>>,
    /// Tools of the newest `request/header`.
    pub tools: Vec<dsh_llm::ToolSpec>,
    /// Route config of the newest `request/header`.
    pub header: Option<dsh_session::data::RequestConfig>,
    /// `content_generation` when taken (a change means the history moved).
    pub generation: u64,
    /// The meter's reading.
    pub tokens_before: u64,
}

impl Snapshot {
    /// The span to shadow for `retain_tokens` (see [`select_span`]).
    pub fn select(&self, retain_tokens: u64) -> Option<Span> {
        select_span(&self.nodes, retain_tokens)
    }

    /// The summary request's messages: the conversation's own, then the instruction.
    pub fn summary_messages(&self, span: Span) -> Vec<Arc<Message>> {
        let retained = self.nodes.len() - 1 - span.end;
        let mut messages = Vec::with_capacity(self.messages.len() + 1);
        messages.extend(self.messages.iter().cloned());
        messages.push(Arc::new(instruction_message(
            dsh_session::ids::message_id(),
            retained,
        )));
        messages
    }
}

/// Takes the [`Snapshot`] of `log` (`pending`: what the next step will append).
pub fn snapshot(log: &SessionLog, meter: &TokenMeter, pending: &[Message]) -> Snapshot {
    let nodes = log
        .surface()
        .nodes()
        .iter()
        .map(|n| NodeInfo::of(n, meter))
        .collect();
    let messages = log
        .surface()
        .derive_messages()
        .into_iter()
        .filter(|m| m.role != Role::Developer)
        .collect();
    let (header, tools) = match log.latest_request_header().and_then(|e| e.core()) {
        Some(CoreEvent::RequestHeader(h)) => (
            Some(h.header.config.clone()),
            h.header.tools.as_deref().unwrap_or_default().to_vec(),
        ),
        _ => (None, Vec::new()),
    };
    Snapshot {
        nodes,
        messages,
        tools,
        header,
        generation: log.surface().content_generation(),
        tokens_before: meter.measure(log, pending).tokens,
    }
}

/// Why a finished summary call is unusable.
#[derive(Debug, thiserror::Error)]
enum UnusableSummary {
    /// The summariser called a tool.
    #[error("UNSUPPORTED_CONTENT: the summariser called tool `{0}`")]
    ToolCall(String),
    /// Content other than text and reasoning.
    #[error("UNSUPPORTED_CONTENT: the summary is not text")]
    NotText,
    /// Only blank text.
    #[error("the summariser returned no text")]
    Blank,
}

/// The text of a finished summary call, or why it is unusable.
fn summary_blocks(content: Vec<ContentBlock>) -> Result<Vec<ContentBlock>, UnusableSummary> {
    let mut out = Vec::new();
    for b in content {
        match b {
            ContentBlock::Text { .. } => out.push(b),
            ContentBlock::Reasoning { .. } => {}
            ContentBlock::ToolCall(c) => {
                return Err(UnusableSummary::ToolCall(c.name));
            }
            _ => return Err(UnusableSummary::NotText),
        }
    }
    let blank = out.iter().all(|b| match b {
        ContentBlock::Text { text } => text.trim().is_empty(),
        _ => true,
    });
    if blank {
        return Err(UnusableSummary::Blank);
    }
    Ok(out)
}

/// Runs one compaction of `agent`'s history. `Ok(None)`: nothing compactable (nothing logged).
pub async fn compact(
    llm: &Arc<dyn Llm>,
    meter: &TokenMeter,
    agent: &Arc<dyn Agent>,
    req: CompactionRequest,
) -> Result<Option<CompactionOutcome>, CompactionError> {
    let session = agent.session();
    let snap = session.with_log(|l| snapshot(l, meter, &req.pending));
    let Some(span) = snap.select(req.retain_tokens) else {
        return Ok(None);
    };
    let worth: u64 = snap.nodes[span.start..=span.end]
        .iter()
        .map(|n| n.tokens)
        .sum();
    if worth < MIN_SHADOWED_TOKENS {
        return Ok(None);
    }
    let target = match (&req.target, &snap.header) {
        (Some(t), _) => t.clone(),
        (None, Some(h)) => Target {
            provider: h.provider.clone(),
            model: h.model.clone(),
        },
        (None, None) => {
            let o = agent.options();
            match (o.provider, o.model) {
                (Some(provider), Some(model)) => Target { provider, model },
                _ => return Err(CompactionError::NoTarget),
            }
        }
    };
    let compaction_id = format!("compaction-{}", uuid::Uuid::now_v7());
    let start = session.append(plugin_event(&CompactionStart {
        compaction_id: compaction_id.clone(),
        source_command_id: req.source_command_id.clone(),
        turn: req.turn,
    })?)?;
    let end = |error: Option<String>| -> Result<(), CompactionError> {
        session.append(plugin_event(&CompactionEnd {
            compaction_id: compaction_id.clone(),
            source_command_id: req.source_command_id.clone(),
            turn: req.turn,
            error,
        })?)?;
        Ok(())
    };
    let result = summarise(llm, agent, &snap, span, &target, &req).await;
    let (summary, raw, usage, max_tokens) = match result {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(agent = %agent.id(), error = %e, "compaction failed");
            end(Some(e.to_string()))?;
            return Err(e);
        }
    };
    let shadowed = &snap.nodes[span.start..=span.end];
    let shadowed_seqs: Vec<u64> = shadowed.iter().map(|n| n.seq).collect();
    let shadowed_token_count: u64 = shadowed.iter().map(|n| n.tokens).sum();
    let checkpoint = checkpoint_message(
        dsh_session::ids::message_id(),
        &compaction_id,
        req.source_command_id.as_deref(),
        &summary,
    );
    if meter.message_tokens(&checkpoint) >= shadowed_token_count {
        let e = CompactionError::Summary(format!(
            "summary is not smaller than the shadowed content (~{} ≥ ~{shadowed_token_count} tokens)",
            meter.message_tokens(&checkpoint)
        ));
        end(Some(e.to_string()))?;
        return Err(e);
    }
    if session.content_generation() != snap.generation {
        end(Some(CompactionError::Changed.to_string()))?;
        return Err(CompactionError::Changed);
    }
    let range = ShadowedRange {
        start: shadowed_seqs[0],
        end: shadowed_seqs[shadowed_seqs.len() - 1],
    };
    let committed = (|| -> Result<(u64, u64), CompactionError> {
        let summary_ev = session.append(plugin_event(&CompactionSummary {
            compaction_id: compaction_id.clone(),
            source_command_id: req.source_command_id.clone(),
            summary: summary.clone(),
            raw_output: Some(raw),
            llm_stream_call: Some(true),
            shadowed_range: range,
            shadowed_seqs: shadowed_seqs.clone(),
            shadowed_token_count,
            provider: target.provider.clone(),
            model: target.model.clone(),
            max_tokens: Some(max_tokens),
            usage,
        })?)?;
        let mut sources = vec![start.seq(), summary_ev.seq()];
        sources.extend(&shadowed_seqs);
        let replacement = session.append(
            NewEvent::core(UserMessage(Arc::new(checkpoint)))
                .replacing(range.start, range.end)
                .with_sources(sources),
        )?;
        Ok((summary_ev.seq(), replacement.seq()))
    })();
    let (summary_seq, replacement_seq) = match committed {
        Ok(s) => s,
        Err(e) => {
            end(Some(e.to_string()))?;
            return Err(e);
        }
    };
    let tokens_after = session.with_log(|l| meter.measure(l, &req.pending).tokens);
    session.append(plugin_event(&CompactionTokens {
        compaction_id: compaction_id.clone(),
        tokens_before: snap.tokens_before,
        tokens_after,
    })?)?;
    end(None)?;
    tracing::info!(agent = %agent.id(), %compaction_id, before = snap.tokens_before, after = tokens_after, nodes = shadowed_seqs.len(), "compacted");
    Ok(Some(CompactionOutcome {
        compaction_id,
        summary_seq,
        replacement_seq,
        shadowed_nodes: shadowed_seqs.len(),
        shadowed_token_count,
        tokens_before: snap.tokens_before,
        tokens_after,
    }))
}

fn plugin_event<T: dsh_session::PluginEvent>(e: &T) -> Result<NewEvent, serde_json::Error> {
    NewEvent::plugin(e)
}

type Summarised = (
    Vec<ContentBlock>,
    Vec<ContentBlock>,
    Option<TokenUsage>,
    u64,
);

/// The summary call: the conversation's next request plus the instruction, streamed directly
/// (no `agent/request` waterfall) through `llm/stream` in the agent's scope.
async fn summarise(
    llm: &Arc<dyn Llm>,
    agent: &Arc<dyn Agent>,
    snap: &Snapshot,
    span: Span,
    target: &Target,
    req: &CompactionRequest,
) -> Result<Summarised, CompactionError> {
    let same_route = snap
        .header
        .as_ref()
        .is_some_and(|h| h.provider == target.provider && h.model == target.model);
    let header = snap.header.as_ref().filter(|_| same_route);
    let settings = CallSettings {
        provider: target.provider.clone(),
        model: Some(target.model.clone()),
        effort: header.and_then(|h| h.reasoning_effort.clone()),
        max_tokens: Some(req.max_tokens),
        temperature: header.and_then(|h| h.temperature),
        stop: Vec::new(),
        purpose: Some("compaction".into()),
    };
    let prepared = llm
        .prepare_call(&settings)
        .map_err(|f| CompactionError::Summary(f.to_string()))?;
    let max_tokens = prepared.max_tokens;
    let messages = snap.summary_messages(span);
    let tools = if same_route {
        snap.tools.clone()
    } else {
        Vec::new()
    };
    let cancel = req.cancel.child_token();
    let request = prepared.request(messages, tools, cancel.clone());
    let stream = llm.stream(agent.ctx(), request);
    let mut stream = match select(pin!(req.cancel.cancelled()), stream).await {
        Either::Left(_) => return Err(CompactionError::Cancelled),
        Either::Right((Err(f), _)) => return Err(CompactionError::Summary(f.to_string())),
        Either::Right((Ok(s), _)) => s,
    };
    let mut assembler = BlockAssembler::new();
    loop {
        let next = match select(pin!(req.cancel.cancelled()), stream.next()).await {
            Either::Left(_) => {
                cancel.cancel();
                return Err(CompactionError::Cancelled);
            }
            Either::Right((next, _)) => next,
        };
        let Some(chunk) = next else { break };
        assembler
            .push(&chunk)
            .map_err(|v| CompactionError::Summary(v.to_failure().to_string()))?;
        if assembler.is_finished() {
            break;
        }
    }
    let assembled = assembler
        .finish()
        .map_err(|v| CompactionError::Summary(v.to_failure().to_string()))?;
    match &assembled.finish {
        FinishReason::Stop | FinishReason::ToolCalls => {}
        FinishReason::MaxTokens => {
            return Err(CompactionError::Summary(format!(
                "MAX_TOKENS: the summary hit its {max_tokens}-token cap"
            )));
        }
        FinishReason::Aborted { .. } if req.cancel.is_cancelled() => {
            return Err(CompactionError::Cancelled);
        }
        FinishReason::Error { failure } | FinishReason::Aborted { failure } => {
            return Err(CompactionError::Summary(failure.to_string()));
        }
    }
    let raw = assembled.content.clone();
    let summary =
        summary_blocks(assembled.content).map_err(|e| CompactionError::Summary(e.to_string()))?;
    Ok((summary, raw, assembled.usage, max_tokens))
}
