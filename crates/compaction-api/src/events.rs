//! The compaction log events (`session-format.md` §14), typed. All four are log-only: the model
//! history changes only through the replacement `user/message` / `tool/result` they bracket.

use dsh_llm::{ContentBlock, TokenUsage};
use dsh_session::PluginEvent;
use serde::{Deserialize, Serialize};

/// Inclusive seqs of a shadowed span (`{start, end}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowedRange {
    /// First shadowed node's seq.
    pub start: u64,
    /// Last shadowed node's seq.
    pub end: u64,
}

/// `compaction/start`: opens the bracket (appended before any await, so a crash leaves a
/// detectable unmatched start).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionStart {
    /// Id shared by the bracket's events.
    pub compaction_id: String,
    /// The front-end command that asked for it (manual compaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_command_id: Option<String>,
    /// The open turn; `None` (`null`) for a manual compaction between turns.
    pub turn: Option<u64>,
}
impl PluginEvent for CompactionStart {
    const TYPE: &'static str = "compaction/start";
}

/// `compaction/summary`: what the summariser produced and what it replaces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummary {
    /// Id of the bracket.
    pub compaction_id: String,
    /// Front-end command id (manual compaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_command_id: Option<String>,
    /// The summary blocks (text only).
    pub summary: Vec<ContentBlock>,
    /// The model's raw output (present with `llm_stream_call`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<Vec<ContentBlock>>,
    /// `Some(true)` when a streamed model call produced the summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_stream_call: Option<bool>,
    /// Inclusive seqs of the span.
    pub shadowed_range: ShadowedRange,
    /// The current nodes in that span.
    pub shadowed_seqs: Vec<u64>,
    /// Estimated tokens of the shadowed messages.
    pub shadowed_token_count: u64,
    /// Provider route of the summary call.
    pub provider: String,
    /// Model of the summary call.
    pub model: String,
    /// Output cap of the summary call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Usage of the summary call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
}
impl PluginEvent for CompactionSummary {
    const TYPE: &'static str = "compaction/summary";
}

/// `compaction/prune`: one tool result is about to be replaced by its shortened copy (the
/// adjacent `tool/result` replacement that follows).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionPrune {
    /// The pruned result's seq, as a one-node span.
    pub shadowed_range: ShadowedRange,
    /// `[seq]`.
    pub shadowed_seqs: Vec<u64>,
    /// Estimated tokens of the original result.
    pub shadowed_token_count: u64,
}
impl PluginEvent for CompactionPrune {
    const TYPE: &'static str = "compaction/prune";
}

/// `compaction/end`: closes the bracket; `error` says why nothing was replaced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionEnd {
    /// Id of the bracket.
    pub compaction_id: String,
    /// Front-end command id (manual compaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_command_id: Option<String>,
    /// The turn of the start.
    pub turn: Option<u64>,
    /// Why the compaction failed (no summary or replacement was written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
impl PluginEvent for CompactionEnd {
    const TYPE: &'static str = "compaction/end";
}

/// `dsh/compaction-tokens`: dsh's own record of what a compaction achieved, inside the bracket
/// just before `compaction/end` (ignorable for other readers), so `--json` consumers and
/// `dsh sessions show` see the meter before and after without recomputing it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionTokens {
    /// Id of the bracket.
    pub compaction_id: String,
    /// Metered tokens of the next request before the compaction.
    pub tokens_before: u64,
    /// Metered tokens of the next request after it.
    pub tokens_after: u64,
}
impl PluginEvent for CompactionTokens {
    const TYPE: &'static str = "dsh/compaction-tokens";
}

/// A one-line human description of a compaction event (for transcripts such as
/// `dsh sessions show`); `None` for any other event or an unreadable payload.
pub fn describe(event: &dsh_session::Event) -> Option<String> {
    match event.kind() {
        CompactionStart::TYPE => {
            let s = event.plugin::<CompactionStart>()?.ok()?;
            Some(format!("compaction {} started", s.compaction_id))
        }
        CompactionSummary::TYPE => {
            let s = event.plugin::<CompactionSummary>()?.ok()?;
            Some(format!(
                "compaction summary by {}/{}: replaces {} history items (~{} tokens)",
                s.provider,
                s.model,
                s.shadowed_seqs.len(),
                s.shadowed_token_count
            ))
        }
        CompactionPrune::TYPE => {
            let p = event.plugin::<CompactionPrune>()?.ok()?;
            Some(format!(
                "pruned tool result #{} (~{} tokens)",
                p.shadowed_range.start, p.shadowed_token_count
            ))
        }
        CompactionTokens::TYPE => {
            let t = event.plugin::<CompactionTokens>()?.ok()?;
            Some(format!(
                "compaction: ~{} → ~{} tokens",
                t.tokens_before, t.tokens_after
            ))
        }
        CompactionEnd::TYPE => {
            let e = event.plugin::<CompactionEnd>()?.ok()?;
            Some(match e.error {
                Some(err) => format!("compaction {} failed: {err}", e.compaction_id),
                None => format!("compaction {} ended", e.compaction_id),
            })
        }
        _ => None,
    }
}
