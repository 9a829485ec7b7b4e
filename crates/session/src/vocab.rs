//! Event type names (format §5): the wire constants and the typed [`EventKind`].

use std::sync::Arc;

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

/// `job/registered` (new in 0.2.1: a background job of this session was created)
pub const JOB_REGISTERED: &str = "job/registered";
/// `job/settled` (new in 0.2.1: a job's first terminal outcome)
pub const JOB_SETTLED: &str = "job/settled";
/// `working-directory/change` (new in 0.2.1: the session's working directory from here on)
pub const WORKING_DIRECTORY_CHANGE: &str = "working-directory/change";

/// The three types the original 0.2.1 added to the v4 vocabulary (log-only, not model-visible,
/// written without `ignorable`; `original-0.2.1.md` §3.2).
pub const ADDED_IN_0_2_1: [&str; 3] = [JOB_REGISTERED, JOB_SETTLED, WORKING_DIRECTORY_CHANGE];

/// Retired v3 names of `tool/ptc-dispatch-start` / `tool/ptc-dispatch` (format §5): refused when
/// required, renamed `plugin:<name>` by the v3 conversion when ignorable.
pub const RETIRED_CODE_DISPATCH: [&str; 2] = ["tool/code-dispatch-start", "tool/code-dispatch"];

/// The five surface types.
pub const SURFACE_TYPES: [&str; 5] = [
    SYSTEM_MESSAGE,
    DEVELOPER_MESSAGE,
    USER_MESSAGE,
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
];

/// All 63 type names a v4 reader must know: format §5's 60 and the three 0.2.1 added.
pub const KNOWN_TYPES: [&str; 63] = [
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
    JOB_REGISTERED,
    JOB_SETTLED,
    WORKING_DIRECTORY_CHANGE,
];

/// Whether `kind` is one of the five surface types.
pub fn is_surface(kind: &str) -> bool {
    SURFACE_TYPES.contains(&kind)
}

/// Whether `kind` is one of the 63 known v4 types.
pub fn is_known(kind: &str) -> bool {
    KNOWN_TYPES.contains(&kind)
}

/// Whether `kind` belongs to the frozen 58-name v3 vocabulary (§16.2 rule 2).
pub fn is_known_v3(kind: &str) -> bool {
    kind != DEVELOPER_MESSAGE
        && kind != "slots/dispatch"
        && !ADDED_IN_0_2_1.contains(&kind)
        && is_known(kind)
}

macro_rules! event_kinds {
    ($($(#[$doc:meta])* $v:ident => $s:literal,)*) => {
        /// An event type (format §5): one of the 63 known names, or a type this reader does not
        /// know (a plugin's own `dsh/…` type, or a newer writer's). The wire string appears only at
        /// the edge ([`EventKind::parse`], [`EventKind::as_str`]).
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $($(#[$doc])* $v,)*
            /// A type outside the 63 known names, kept verbatim.
            Other(Arc<str>),
        }

        impl EventKind {
            /// Every known kind, in the order of format §5.
            pub const KNOWN: [EventKind; 63] = [$(EventKind::$v,)*];

            /// The kind of a wire type name.
            pub fn parse(name: &str) -> EventKind {
                match name {
                    $($s => EventKind::$v,)*
                    other => EventKind::Other(Arc::from(other)),
                }
            }

            /// The wire type name.
            pub fn as_str(&self) -> &str {
                match self {
                    $(EventKind::$v => $s,)*
                    EventKind::Other(name) => name,
                }
            }
        }
    };
}

event_kinds! {
    /// `turn/start`
    TurnStart => "turn/start",
    /// `turn/end`
    TurnEnd => "turn/end",
    /// `step/start`
    StepStart => "step/start",
    /// `step/end`
    StepEnd => "step/end",
    /// `system/message`
    SystemMessage => "system/message",
    /// `developer/message`
    DeveloperMessage => "developer/message",
    /// `user/message`
    UserMessage => "user/message",
    /// `assistant/message`
    AssistantMessage => "assistant/message",
    /// `assistant/attempt`
    AssistantAttempt => "assistant/attempt",
    /// `tool/call`
    ToolCall => "tool/call",
    /// `tool/result`
    ToolResult => "tool/result",
    /// `request/header`
    RequestHeader => "request/header",
    /// `request/context`
    RequestContext => "request/context",
    /// `agent/inbox/spliced`
    InboxSpliced => "agent/inbox/spliced",
    /// `session/end-seed`
    EndSeed => "session/end-seed",
    /// `llm/retry`
    LlmRetry => "llm/retry",
    /// `llm/retry-started`
    LlmRetryStarted => "llm/retry-started",
    /// `session/title`
    SessionTitle => "session/title",
    /// `session/title-llm-request`
    SessionTitleLlmRequest => "session/title-llm-request",
    /// `compaction/start`
    CompactionStart => "compaction/start",
    /// `compaction/summary`
    CompactionSummary => "compaction/summary",
    /// `compaction/prune`
    CompactionPrune => "compaction/prune",
    /// `compaction/end`
    CompactionEnd => "compaction/end",
    /// `image/offload`
    ImageOffload => "image/offload",
    /// `todo/write`
    TodoWrite => "todo/write",
    /// `permission/preset`
    PermissionPreset => "permission/preset",
    /// `sandbox/mode`
    SandboxMode => "sandbox/mode",
    /// `approval/policy`
    ApprovalPolicy => "approval/policy",
    /// `approval/asked`
    ApprovalAsked => "approval/asked",
    /// `approval/decided`
    ApprovalDecided => "approval/decided",
    /// `subagent/catalog`
    SubagentCatalog => "subagent/catalog",
    /// `subagent/descriptor`
    SubagentDescriptor => "subagent/descriptor",
    /// `subagent/model-selection-policy`
    SubagentModelSelectionPolicy => "subagent/model-selection-policy",
    /// `hook/invoked`
    HookInvoked => "hook/invoked",
    /// `hook/result`
    HookResult => "hook/result",
    /// `model/selection`
    ModelSelection => "model/selection",
    /// `command/run`
    CommandRun => "command/run",
    /// `command/done`
    CommandDone => "command/done",
    /// `tool/ptc-dispatch-start`
    ToolPtcDispatchStart => "tool/ptc-dispatch-start",
    /// `tool/ptc-dispatch`
    ToolPtcDispatch => "tool/ptc-dispatch",
    /// `agent-preset/selected`
    AgentPresetSelected => "agent-preset/selected",
    /// `deliverables/presented`
    DeliverablesPresented => "deliverables/presented",
    /// `feedback/record`
    FeedbackRecord => "feedback/record",
    /// `feedback/message-put`
    FeedbackMessagePut => "feedback/message-put",
    /// `feedback/message-delete`
    FeedbackMessageDelete => "feedback/message-delete",
    /// `goal/change`
    GoalChange => "goal/change",
    /// `plan/mode`
    PlanMode => "plan/mode",
    /// `schedule/change`
    ScheduleChange => "schedule/change",
    /// `session-log-deepseek/delivery-accepted`
    SessionLogDeepseekDeliveryAccepted => "session-log-deepseek/delivery-accepted",
    /// `team/member`
    TeamMember => "team/member",
    /// `team/message/queued`
    TeamMessageQueued => "team/message/queued",
    /// `team/message/delivered`
    TeamMessageDelivered => "team/message/delivered",
    /// `team/task`
    TeamTask => "team/task",
    /// `tool-workflow/run-start`
    ToolWorkflowRunStart => "tool-workflow/run-start",
    /// `tool-workflow/agent-start`
    ToolWorkflowAgentStart => "tool-workflow/agent-start",
    /// `tool-workflow/agent-end`
    ToolWorkflowAgentEnd => "tool-workflow/agent-end",
    /// `tool-workflow/run-end`
    ToolWorkflowRunEnd => "tool-workflow/run-end",
    /// `web/deepseek-search-llm-request`
    WebDeepseekSearchLlmRequest => "web/deepseek-search-llm-request",
    /// `workspace/changes`
    WorkspaceChanges => "workspace/changes",
    /// `slots/dispatch`
    SlotsDispatch => "slots/dispatch",
    /// `job/registered` (0.2.1)
    JobRegistered => "job/registered",
    /// `job/settled` (0.2.1)
    JobSettled => "job/settled",
    /// `working-directory/change` (0.2.1)
    WorkingDirectoryChange => "working-directory/change",
}

impl EventKind {
    /// Whether this is one of the 63 known v4 types.
    pub fn is_known(&self) -> bool {
        !matches!(self, EventKind::Other(_))
    }

    /// Whether this is one of the five surface types.
    pub fn is_surface(&self) -> bool {
        matches!(
            self,
            EventKind::SystemMessage
                | EventKind::DeveloperMessage
                | EventKind::UserMessage
                | EventKind::AssistantMessage
                | EventKind::ToolResult
        )
    }

    /// Whether this kind belongs to the frozen 58-name v3 vocabulary (§16.2 rule 2).
    pub fn is_known_v3(&self) -> bool {
        self.is_known()
            && !matches!(
                self,
                EventKind::DeveloperMessage
                    | EventKind::SlotsDispatch
                    | EventKind::JobRegistered
                    | EventKind::JobSettled
                    | EventKind::WorkingDirectoryChange
            )
    }

    /// The static wire name of a known kind (`None` for [`EventKind::Other`]).
    pub fn static_name(&self) -> Option<&'static str> {
        match self {
            EventKind::Other(_) => None,
            known => KNOWN_TYPES.iter().copied().find(|k| *k == known.as_str()),
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for EventKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for EventKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl From<&str> for EventKind {
    fn from(name: &str) -> Self {
        EventKind::parse(name)
    }
}

impl From<String> for EventKind {
    fn from(name: String) -> Self {
        EventKind::parse(&name)
    }
}

impl serde::Serialize for EventKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for EventKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(EventKind::parse(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_is_complete_and_distinct() {
        let set: std::collections::HashSet<_> = KNOWN_TYPES.iter().collect();
        assert_eq!(set.len(), 63);
        assert_eq!(KNOWN_TYPES.iter().filter(|k| is_known_v3(k)).count(), 58);
    }

    #[test]
    fn event_kind_wire_round_trip() {
        for (kind, name) in EventKind::KNOWN.iter().zip(KNOWN_TYPES) {
            assert_eq!(kind.as_str(), name);
            assert_eq!(&EventKind::parse(name), kind);
            assert!(kind.is_known());
            assert_eq!(kind.is_surface(), is_surface(name));
            assert_eq!(kind.is_known_v3(), is_known_v3(name));
            assert_eq!(kind.static_name(), Some(name));
        }
        let other = EventKind::parse("dsh/turn-budget");
        assert_eq!(other, EventKind::Other("dsh/turn-budget".into()));
        assert_eq!(other.as_str(), "dsh/turn-budget");
        assert!(!other.is_known() && !other.is_surface());
        let json = serde_json::to_string(&other).unwrap();
        assert_eq!(json, "\"dsh/turn-budget\"");
        assert_eq!(serde_json::from_str::<EventKind>(&json).unwrap(), other);
        assert_eq!(
            serde_json::from_str::<EventKind>("\"turn/end\"").unwrap(),
            EventKind::TurnEnd
        );
    }
}
