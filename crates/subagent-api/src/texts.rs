//! The original's model-visible texts (upstream 0.1.1 `tool-subagent` and `subagent`).

use crate::StopReason;

/// `subagent depth <d> exceeds maxDepth <m>`.
pub fn depth_exceeded(depth: u64, max: u64) -> String {
    format!("subagent depth {depth} exceeds maxDepth {max}")
}

/// Line 1 of a non-completed foreground result.
pub fn failure_head(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Completed => "subagent run completed",
        StopReason::Aborted => "subagent run was cancelled",
        StopReason::Error => "subagent run failed",
        StopReason::MaxTokens => "subagent run hit its token limit before finishing",
        StopReason::Refusal => "subagent declined the task",
    }
}

/// The whole error text of a non-completed foreground run: the head, then
/// `\nDiagnostic: …`, then `\nPartial output before the run ended:\n…` when present.
pub fn failure_text(reason: StopReason, diagnostic: Option<&str>, partial: &str) -> String {
    let mut text = failure_head(reason).to_owned();
    if let Some(d) = diagnostic.filter(|d| !d.is_empty()) {
        text.push_str("\nDiagnostic: ");
        text.push_str(d);
    }
    if !partial.is_empty() {
        text.push_str("\nPartial output before the run ended:\n");
        text.push_str(partial);
    }
    text
}

/// The `subagent:delegation` runtime-context text of a child at `depth`.
pub fn delegation_context(depth: u64) -> String {
    format!(
        "You are a delegated subagent (delegation depth {depth}), working for the agent that \
         started you. Your sandbox scope is fixed by that agent and cannot be widened, and \
         approval requests are rejected automatically. When the task needs access you do not \
         have, report that limitation in your final answer instead of retrying."
    )
}

/// `message queued as the next turn for subagent <id>`.
pub fn message_queued(child: &str) -> String {
    format!("message queued as the next turn for subagent {child}")
}

/// What a parent sees of a child's `send_message`.
pub fn message_from_child(child: &str, text: &str) -> String {
    format!("Message from subagent {child}:\n{text}")
}

/// The confirmation a child gets.
pub fn message_sent_to_parent(parent: &str) -> String {
    format!("message delivered to agent {parent}")
}

/// `started subagent <childId>`: a continuable child started in the background.
pub fn started_continuable(child: &str) -> String {
    format!("started subagent {child}")
}

/// The settlement notice a continuable child's direct parent gets when a turn of the child
/// ends (source `subagent-settled`): line 1 by stop reason, then the closing message.
pub fn settled_notice(child: &str, reason: StopReason, closing: &str) -> String {
    let how = match reason {
        StopReason::Completed => "finished and will do no further work unless you send it more.",
        StopReason::Aborted => "was stopped before it finished.",
        StopReason::MaxTokens => "ran out of room before it finished.",
        StopReason::Refusal => "declined the task.",
        StopReason::Error => "failed before it finished.",
    };
    if closing.trim().is_empty() {
        format!("Background subagent {child} {how}\nIt left no closing message.")
    } else {
        format!("Background subagent {child} {how}\nIts closing message:\n{closing}")
    }
}

/// What a parent sees of a child's `report` (source `subagent-report`).
pub fn report_notice(child: &str, output: &str) -> String {
    format!("Background subagent {child} reported:\n{output}")
}

/// The child's `report` result.
pub fn report_accepted(message_id: &str) -> String {
    format!("report accepted by the agent that started you as message {message_id}")
}

/// The child's `report` error when its parent is not live.
pub const REPORT_PARENT_GONE: &str = "direct parent is not live; report was not delivered";

/// The `structured_output` acknowledgement.
pub const STRUCTURED_RECORDED: &str = "Structured output recorded.";

/// The diagnostic of a run with an `outputSchema` that never recorded a value.
pub const STRUCTURED_MISSING: &str =
    "the subagent ended without recording its answer with structured_output";

/// Largest diagnostic kept, in bytes.
pub const MAX_DIAGNOSTIC_BYTES: usize = 4096;

/// `text` cut to at most [`MAX_DIAGNOSTIC_BYTES`] on a char boundary.
pub fn clip_diagnostic(text: &str) -> String {
    text[..text.floor_char_boundary(MAX_DIAGNOSTIC_BYTES)].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_texts_follow_the_original() {
        assert_eq!(depth_exceeded(4, 3), "subagent depth 4 exceeds maxDepth 3");
        assert_eq!(
            failure_text(StopReason::Error, Some("SERVER: boom"), "half"),
            "subagent run failed\nDiagnostic: SERVER: boom\nPartial output before the run ended:\nhalf"
        );
        assert_eq!(
            failure_text(StopReason::Aborted, None, ""),
            "subagent run was cancelled"
        );
        assert_eq!(clip_diagnostic(&"é".repeat(3000)).len(), 4096);
        assert_eq!(
            settled_notice("c1", StopReason::Completed, "done"),
            "Background subagent c1 finished and will do no further work unless you send it more.\nIts closing message:\ndone"
        );
        assert_eq!(
            settled_notice("c1", StopReason::Error, ""),
            "Background subagent c1 failed before it finished.\nIt left no closing message."
        );
    }
}
