//! Crash repair (format §15) and the fork closers (§12): an error result per pending call, then
//! `step/end` and `turn/end`.

use std::sync::Arc;

use crate::data::{StepEnd, ToolResult, TurnEnd, TurnEndReason};
use crate::error::AppendError;
use crate::event::{Event, NewEvent};
use crate::vocab::EventKind;
use dsh_llm::ToolErrorCode;

use super::SessionLog;

/// Crash-repair texts (format §15), exact.
pub mod texts {
    /// Crash, call never started.
    pub const CRASH_NOT_STARTED: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";
    /// Crash, call started.
    pub const CRASH_UNKNOWN: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";
    /// Fork, call never started.
    pub const FORK_NOT_STARTED: &str = "The history inherited by this branch has no record of this tool call starting. The parent session may have executed it after the fork point. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";
    /// Fork, call started.
    pub const FORK_UNKNOWN: &str = "The history inherited by this branch records this tool call starting but does not include its result. The parent session may have completed it after the fork point. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";
}

/// Why closers are synthesized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseCause {
    /// Crash repair on resume (`turn/end {interrupted}`).
    Interrupted,
    /// Fork seed (`turn/end {forked}`).
    Forked,
}

impl SessionLog {
    /// The closers of format §15 (cause `Interrupted`) or §12 (cause `Forked`) for the open
    /// turn: one error result per pending call, `step/end` if a step is open, then `turn/end`.
    /// Empty when no turn is open. Seqs continue the log; times equal the last event's time.
    pub fn closers(&self, cause: CloseCause) -> Vec<NewEvent> {
        let Some(turn) = self.tracker.open_turn() else {
            return Vec::new();
        };
        let time = self
            .events
            .last()
            .map(|e| e.time())
            .unwrap_or(self.header.created_at);
        let mut out = Vec::new();
        for (seq, p) in (self.len()..).zip(self.tracker.pending()) {
            let started = p.call_seq.is_some();
            let (prefix, text) = match (cause, started) {
                (CloseCause::Interrupted, false) => ("interrupted", texts::CRASH_NOT_STARTED),
                (CloseCause::Interrupted, true) => ("interrupted", texts::CRASH_UNKNOWN),
                (CloseCause::Forked, false) => ("forked", texts::FORK_NOT_STARTED),
                (CloseCause::Forked, true) => ("forked", texts::FORK_UNKNOWN),
            };
            let code = if started {
                ToolErrorCode::ToolOutcomeUnknown
            } else {
                ToolErrorCode::ToolNotStarted
            };
            let (name, code) = (code.error_name(), code.as_str().to_owned());
            // The message's member order is the one §15 prescribes (not the writer's order of
            // live tool results), so this payload is built as JSON; it is decoded into its typed
            // form when appended.
            let data = serde_json::json!({
                "turn": turn,
                "step": p.step,
                "message": {
                    "id": format!("{prefix}-tool-result-{}-{seq}", p.call_id),
                    "role": "tool",
                    "toolCallId": p.call_id,
                    "isError": true,
                    "source": {"kind": "tool", "callId": p.call_id},
                    "content": [{"type": "text", "text": text}],
                },
                "error": {"name": name, "code": code},
            });
            let mut ev = NewEvent::new(EventKind::ToolResult, data).at(time);
            if let Some(c) = p.call_seq {
                ev = ev.with_sources(vec![c]);
            }
            out.push(ev);
        }
        if let Some(step) = self.tracker.open_step() {
            out.push(NewEvent::core(StepEnd { turn, step }).at(time));
        }
        let reason = match cause {
            CloseCause::Interrupted => TurnEndReason::Interrupted,
            CloseCause::Forked => TurnEndReason::Forked,
        };
        out.push(NewEvent::core(TurnEnd { turn, reason }).at(time));
        out
    }

    /// Crash repair (format §15): appends the closers of an open last turn, exactly once.
    /// Returns the appended events (empty for a balanced log).
    pub fn repair(&mut self) -> Result<Vec<Arc<Event>>, AppendError> {
        let closers = self.closers(CloseCause::Interrupted);
        self.append_all(closers)
    }
}

/// Whether a result without a `tool/call` is the exact `TOOL_NOT_STARTED` closer of §15 / §12.
pub(super) fn is_not_started_repair(ev: &Event, result: &ToolResult, call_id: &str) -> bool {
    if ev.source_event_seqs().is_some() {
        return false;
    }
    if result.error.as_ref().map(|e| &e.code) != Some(&ToolErrorCode::ToolNotStarted) {
        return false;
    }
    let id = result.message.id.as_str();
    let text = result.message.content.first().and_then(|b| b.as_text());
    let suffix_ok = |rest: &str| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = id
        .strip_prefix("interrupted-tool-result-")
        .and_then(|r| r.strip_prefix(call_id))
        .and_then(|r| r.strip_prefix('-'))
    {
        return suffix_ok(rest) && text == Some(texts::CRASH_NOT_STARTED);
    }
    if let Some(rest) = id
        .strip_prefix("forked-tool-result-")
        .and_then(|r| r.strip_prefix(call_id))
        .and_then(|r| r.strip_prefix('-'))
    {
        return rest == ev.seq().to_string() && text == Some(texts::FORK_NOT_STARTED);
    }
    false
}
