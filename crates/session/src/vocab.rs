//! Event type names (format §5).

/// `turn/start`
pub const TURN_START: &str = "turn/start";
/// `turn/end`
pub const TURN_END: &str = "turn/end";
/// `step/start`
pub const STEP_START: &str = "step/start";
/// `step/end`
pub const STEP_END: &str = "step/end";
/// `system/message` (surface)
pub const SYSTEM_MESSAGE: &str = "system/message";
/// `developer/message` (surface, new in v4)
pub const DEVELOPER_MESSAGE: &str = "developer/message";
/// `user/message` (surface)
pub const USER_MESSAGE: &str = "user/message";
/// `assistant/message` (surface)
pub const ASSISTANT_MESSAGE: &str = "assistant/message";
/// `assistant/attempt`
pub const ASSISTANT_ATTEMPT: &str = "assistant/attempt";
/// `tool/call`
pub const TOOL_CALL: &str = "tool/call";
/// `tool/result` (surface)
pub const TOOL_RESULT: &str = "tool/result";
/// `request/header`
pub const REQUEST_HEADER: &str = "request/header";
/// `request/context`
pub const REQUEST_CONTEXT: &str = "request/context";
/// `agent/inbox/spliced`
pub const INBOX_SPLICED: &str = "agent/inbox/spliced";
/// `session/end-seed`
pub const END_SEED: &str = "session/end-seed";
/// `image/offload` (the one projection type)
pub const IMAGE_OFFLOAD: &str = "image/offload";

/// The five surface types.
pub const SURFACE_TYPES: [&str; 5] = [
    SYSTEM_MESSAGE,
    DEVELOPER_MESSAGE,
    USER_MESSAGE,
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
];

/// All 60 type names a v4 reader must know.
pub const KNOWN_TYPES: [&str; 60] = [
    TURN_START,
    TURN_END,
    STEP_START,
    STEP_END,
    SYSTEM_MESSAGE,
    DEVELOPER_MESSAGE,
    USER_MESSAGE,
    ASSISTANT_MESSAGE,
    ASSISTANT_ATTEMPT,
    TOOL_CALL,
    TOOL_RESULT,
    REQUEST_HEADER,
    REQUEST_CONTEXT,
    INBOX_SPLICED,
    END_SEED,
    "llm/retry",
    "llm/retry-started",
    "session/title",
    "session/title-llm-request",
    "compaction/start",
    "compaction/summary",
    "compaction/prune",
    "compaction/end",
    IMAGE_OFFLOAD,
    "todo/write",
    "permission/preset",
    "sandbox/mode",
    "approval/policy",
    "approval/asked",
    "approval/decided",
    "subagent/catalog",
    "subagent/descriptor",
    "subagent/model-selection-policy",
    "hook/invoked",
    "hook/result",
    "model/selection",
    "command/run",
    "command/done",
    "tool/ptc-dispatch-start",
    "tool/ptc-dispatch",
    "agent-preset/selected",
    "deliverables/presented",
    "feedback/record",
    "feedback/message-put",
    "feedback/message-delete",
    "goal/change",
    "plan/mode",
    "schedule/change",
    "session-log-deepseek/delivery-accepted",
    "team/member",
    "team/message/queued",
    "team/message/delivered",
    "team/task",
    "tool-workflow/run-start",
    "tool-workflow/agent-start",
    "tool-workflow/agent-end",
    "tool-workflow/run-end",
    "web/deepseek-search-llm-request",
    "workspace/changes",
    "slots/dispatch",
];

/// Whether `kind` is one of the five surface types.
pub fn is_surface(kind: &str) -> bool {
    SURFACE_TYPES.contains(&kind)
}

/// Whether `kind` is one of the 60 known v4 types.
pub fn is_known(kind: &str) -> bool {
    KNOWN_TYPES.contains(&kind)
}

/// Whether `kind` belongs to the frozen 58-name v3 vocabulary (§16.2 rule 2).
pub fn is_known_v3(kind: &str) -> bool {
    kind != DEVELOPER_MESSAGE && kind != "slots/dispatch" && is_known(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_is_complete_and_distinct() {
        let set: std::collections::HashSet<_> = KNOWN_TYPES.iter().collect();
        assert_eq!(set.len(), 60);
        assert_eq!(KNOWN_TYPES.iter().filter(|k| is_known_v3(k)).count(), 58);
    }
}
