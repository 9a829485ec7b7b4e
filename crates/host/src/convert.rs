//! Conversions between the engine's types and the protocol's.

use dsh_llm::{LlmFailure, ModelPricing, ReasoningEffort, TokenUsage};
use dsh_protocol::{
    ApprovalPolicy, Effort, ErrorCode, ProtocolError, SandboxMode, TodoItem, TodoStatus, Usage,
};
use dsh_session::feature::{TodoItem as LogTodo, TodoStatus as LogTodoStatus};
use dsh_session::wire::ApprovalPolicyName;

/// Usage in the protocol's form, priced when the route has prices.
pub fn usage(u: &TokenUsage, pricing: Option<&ModelPricing>) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_tokens.unwrap_or(0),
        cache_write_tokens: u.cache_write_tokens.unwrap_or(0),
        reasoning_tokens: u.reasoning_tokens.unwrap_or(0),
        cost_usd: pricing.map(|p| p.cost(u).usd()),
        requests: 1,
        unpriced_requests: u64::from(pricing.is_none()),
    }
}

/// A provider failure as a protocol error.
pub fn failure(f: &LlmFailure) -> ProtocolError {
    ProtocolError::new(ErrorCode::from_wire(f.code.as_str()), f.message.clone())
}

/// The protocol's effort of an engine effort (`None` for ids the protocol does not know).
pub fn effort_out(e: &ReasoningEffort) -> Option<Effort> {
    match e {
        ReasoningEffort::Off => Some(Effort::Off),
        ReasoningEffort::Low => Some(Effort::Low),
        ReasoningEffort::High => Some(Effort::High),
        ReasoningEffort::Max => Some(Effort::Max),
        ReasoningEffort::Other(s) => Effort::parse(s),
    }
}

/// The engine's effort of a protocol effort.
pub fn effort_in(e: Effort) -> ReasoningEffort {
    match e {
        Effort::Off => ReasoningEffort::Off,
        Effort::Low => ReasoningEffort::Low,
        Effort::High => ReasoningEffort::High,
        Effort::Max => ReasoningEffort::Max,
    }
}

/// A logged sandbox mode (`sandbox/mode {mode}`).
pub fn sandbox_mode(mode: &str) -> Option<SandboxMode> {
    match mode {
        "read-only" => Some(SandboxMode::ReadOnly),
        "workspace-write" => Some(SandboxMode::WorkspaceWrite),
        "danger-full-access" => Some(SandboxMode::DangerFullAccess),
        _ => None,
    }
}

/// A logged approval policy (`approval/policy {policy}`; the original's `ask` is dsh's
/// `on-request`).
pub fn approval_policy(p: ApprovalPolicyName) -> Option<ApprovalPolicy> {
    match p {
        ApprovalPolicyName::Ask | ApprovalPolicyName::OnRequest => Some(ApprovalPolicy::OnRequest),
        ApprovalPolicyName::Untrusted => Some(ApprovalPolicy::Untrusted),
        ApprovalPolicyName::OnFailure => Some(ApprovalPolicy::OnFailure),
        ApprovalPolicyName::Never => Some(ApprovalPolicy::Never),
        ApprovalPolicyName::Unknown(_) => None,
    }
}

/// A logged todo item.
pub fn todo(t: LogTodo) -> TodoItem {
    TodoItem {
        content: t.content,
        status: match t.status {
            LogTodoStatus::Pending => TodoStatus::Pending,
            LogTodoStatus::InProgress => TodoStatus::InProgress,
            LogTodoStatus::Completed => TodoStatus::Completed,
        },
    }
}

/// The goal a logged `goal/change` leaves (`None`: cleared).
pub fn goal(change: dsh_goal_api::GoalChange) -> Option<dsh_protocol::GoalInfo> {
    use dsh_goal_api::GoalPhase as P;
    use dsh_protocol::GoalPhase;
    match change {
        dsh_goal_api::GoalChange::Clear { .. } => None,
        dsh_goal_api::GoalChange::Snapshot {
            goal,
            rounds_started,
            ..
        } => Some(dsh_protocol::GoalInfo {
            id: goal.id,
            revision: goal.revision,
            objective: goal.objective,
            phase: match goal.phase {
                P::Active => GoalPhase::Active,
                P::Paused => GoalPhase::Paused,
                P::Blocked => GoalPhase::Blocked,
                P::Complete => GoalPhase::Complete,
            },
            rounds_started,
            max_rounds: goal.max_goal_rounds,
            blocked: goal.blocked_reason.map(|r| dsh_protocol::GoalBlocked {
                code: r.code,
                message: r.message,
            }),
        }),
    }
}

/// The protocol's cause of a logged abort.
pub fn abort_cause(cause: &dsh_session::wire::AbortCause) -> dsh_protocol::AbortCause {
    use dsh_session::wire::AbortCause as Log;
    match cause {
        Log::User => dsh_protocol::AbortCause::User,
        Log::Parent => dsh_protocol::AbortCause::Parent,
        Log::Hook { reason } => dsh_protocol::AbortCause::Hook {
            reason: reason.clone(),
        },
        Log::Disposed => dsh_protocol::AbortCause::Disposed,
        other => dsh_protocol::AbortCause::Other {
            kind: other.kind().to_owned(),
        },
    }
}
