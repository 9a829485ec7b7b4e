//! Typed payloads of feature events that the original harness 0.2.1 writes and that more than one
//! dsh plugin reads (`original-0.2.1.md` §3.2–§3.3, `session-format.md` §7.13–§7.14): jobs, the
//! working directory, permission knobs, session titles, delivery markers, the todo list and plan
//! mode. Their owners (the jobs, sandbox, approval, title, todo and plan-mode plugins) append them
//! with [`crate::NewEvent::plugin`]; readers decode them with [`crate::Event::plugin`]. None of
//! them is model-visible.

use serde::{Deserialize, Serialize};

use crate::PluginEvent;
use crate::wire::{ApprovalPolicyName, JobCause, JobStatus, PermissionPresetName};

/// The tool call that started a job (`job/registered.toolCall`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobToolCall {
    /// The call that started the job.
    pub call_id: String,
    /// The outermost call (equal to `call_id` for a direct call).
    pub root_call_id: String,
}

/// `job/registered`: a background-job record owned by this session was created. The original
/// registers every `bash` call as a job, foreground ones too, between `tool/call` and
/// `tool/result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobRegistered {
    /// `<kind>-<16 hex digits>`.
    pub job_id: String,
    /// The owning session's id.
    pub owner: String,
    /// The producer kind (`bash`, `subagent`, …).
    pub kind: String,
    /// A label for listings (bash: the command).
    pub label: String,
    /// Epoch milliseconds.
    pub started_at: u64,
    /// The call that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<JobToolCall>,
}

impl PluginEvent for JobRegistered {
    const TYPE: &'static str = crate::vocab::JOB_REGISTERED;
}

/// `job/settled`: a job's first terminal outcome (the fields of its registration, then the
/// outcome).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSettled {
    /// `<kind>-<16 hex digits>`.
    pub job_id: String,
    /// The owning session's id.
    pub owner: String,
    /// The producer kind.
    pub kind: String,
    /// A label for listings.
    pub label: String,
    /// Epoch milliseconds.
    pub started_at: u64,
    /// The call that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<JobToolCall>,
    /// Epoch milliseconds.
    pub finished_at: u64,
    /// How it ended.
    pub status: JobStatus,
    /// Who settled it.
    pub cause: JobCause,
    /// `false`: the producer broke its contract and the job was failed for it.
    pub producer_reported: bool,
    /// E.g. `exit code: 0`; a kill reason is appended after `; `.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl PluginEvent for JobSettled {
    const TYPE: &'static str = crate::vocab::JOB_SETTLED;
}

/// `working-directory/change`: the session's working directory from this event on (absolute).
/// The latest one wins; without any, the header's `cwd`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkingDirectoryChange {
    /// The new working directory.
    pub cwd: String,
}

impl PluginEvent for WorkingDirectoryChange {
    const TYPE: &'static str = crate::vocab::WORKING_DIRECTORY_CHANGE;
}

/// A todo item's state (`todo/write`, the `todo_write` tool's `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

impl TodoStatus {
    /// The wire name (`pending`, `in_progress`, `completed`).
    pub fn as_str(self) -> &'static str {
        match self {
            TodoStatus::Pending => "pending",
            TodoStatus::InProgress => "in_progress",
            TodoStatus::Completed => "completed",
        }
    }

    /// The checkbox drawn for it in checklists (`[x]`, `[~]`, `[ ]`).
    pub fn mark(self) -> &'static str {
        match self {
            TodoStatus::Completed => "[x]",
            TodoStatus::InProgress => "[~]",
            TodoStatus::Pending => "[ ]",
        }
    }
}

/// One item of the agent's task list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    /// What to do (trimmed, non-empty, unique in the list).
    pub content: String,
    /// Its state.
    pub status: TodoStatus,
}

/// `todo/write`: the agent's whole task list from this event on (the latest one wins). Written
/// by the `todo_write` tool between its `tool/call` and `tool/result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoWrite {
    /// The list, in the agent's order.
    pub todos: Vec<TodoItem>,
}

impl PluginEvent for TodoWrite {
    const TYPE: &'static str = "todo/write";
}

/// `plan/mode`: whether the session is in plan mode from this event on (the latest one wins;
/// none: not in plan mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanModeChange {
    /// `true`: only read-only tools run until a plan is accepted.
    pub active: bool,
}

impl PluginEvent for PlanModeChange {
    const TYPE: &'static str = "plan/mode";
}

/// `permission/preset`: the named combination of sandbox mode and approval policy in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionPreset {
    /// The preset.
    pub preset: PermissionPresetName,
}

impl PluginEvent for PermissionPreset {
    const TYPE: &'static str = "permission/preset";
}

/// `approval/policy`: the session's approval policy from this point on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalPolicyEvent {
    /// The policy.
    pub policy: ApprovalPolicyName,
    /// `delegation` when inherited from a parent agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl PluginEvent for ApprovalPolicyEvent {
    const TYPE: &'static str = "approval/policy";
}

/// A model route as the title source names it (`{provider, model}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TitleRoute {
    /// Provider id.
    pub provider: String,
    /// Model id.
    pub model: String,
}

/// Where a session title came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TitleSource {
    /// Derived from the first prompt's text, before (or without) a model title.
    Fallback,
    /// Made by a title provider's model call.
    Provider {
        /// The title provider's id (e.g. `session-title-first-prompt-llm`).
        provider: String,
        /// The route the title call used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<TitleRoute>,
    },
    /// Set by the user.
    User,
}

/// `session/title`: the session's title from this event on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTitle {
    /// The title.
    pub title: String,
    /// Seqs of the messages it was made from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message_seqs: Vec<u64>,
    /// Where it came from.
    pub source: TitleSource,
}

impl PluginEvent for SessionTitle {
    const TYPE: &'static str = "session/title";
}

/// `session-log-deepseek/delivery-accepted`: the provider accepted a request carrying the
/// session log up to `through_seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryAccepted {
    /// The session.
    pub session_id: String,
    /// The log format version (4).
    pub session_format_version: u32,
    /// The last seq delivered.
    pub through_seq: u64,
}

impl PluginEvent for DeliveryAccepted {
    const TYPE: &'static str = "session-log-deepseek/delivery-accepted";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Event, NewEvent};

    fn line(kind: &str, data: &str) -> String {
        format!(r#"{{"type":"{kind}","seq":19,"time":1796150938109,"data":{data}}}"#)
    }

    #[test]
    fn original_job_events_decode_and_round_trip() {
        let reg = line(
            "job/registered",
            r#"{"jobId":"bash-e8fa108caa7e4e57","owner":"session-cff1","kind":"bash","label":"echo hi-from-bash","startedAt":1796150938109,"toolCall":{"callId":"toolu_560c","rootCallId":"toolu_560c"}}"#,
        );
        let ev = Event::from_line(&reg, 19).expect("event");
        let job = ev
            .plugin::<JobRegistered>()
            .expect("typed")
            .expect("decodes");
        assert_eq!(job.job_id, "bash-e8fa108caa7e4e57");
        assert_eq!(
            job.tool_call.as_ref().map(|t| t.root_call_id.as_str()),
            Some("toolu_560c")
        );
        let back = NewEvent::plugin(&job).expect("encode");
        assert_eq!(back.kind.as_str(), "job/registered");

        let settled = line(
            "job/settled",
            r#"{"jobId":"bash-e8fa108caa7e4e57","owner":"s","kind":"bash","label":"x","startedAt":1,"finishedAt":2,"status":"completed","cause":"producer","producerReported":true,"detail":"exit code: 0"}"#,
        );
        let ev = Event::from_line(&settled, 19).expect("event");
        let s = ev.plugin::<JobSettled>().expect("typed").expect("decodes");
        assert_eq!(s.status, JobStatus::Completed);
        assert_eq!(s.cause, JobCause::Producer);
        let odd = line(
            "job/settled",
            r#"{"jobId":"j","owner":"s","kind":"bash","label":"x","startedAt":1,"finishedAt":2,"status":"vanished","cause":"producer","producerReported":false}"#,
        );
        let s = Event::from_line(&odd, 19)
            .expect("event")
            .plugin::<JobSettled>()
            .expect("typed")
            .expect("decodes");
        assert_eq!(s.status, JobStatus::Unknown("vanished".into()));
    }

    #[test]
    fn original_titles_and_knobs_decode() {
        let t = line(
            "session/title",
            r#"{"title":"Say hi","messageSeqs":[8],"source":{"kind":"provider","provider":"session-title-first-prompt-llm","model":{"provider":"deepseek-official","model":"deepseek-flash"}}}"#,
        );
        let title = Event::from_line(&t, 19)
            .expect("event")
            .plugin::<SessionTitle>()
            .expect("typed")
            .expect("decodes");
        assert_eq!(title.title, "Say hi");
        assert!(
            matches!(title.source, TitleSource::Provider { ref provider, .. } if provider == "session-title-first-prompt-llm")
        );
        let f = line(
            "session/title",
            r#"{"title":"x","messageSeqs":[8],"source":{"kind":"fallback"}}"#,
        );
        let title = Event::from_line(&f, 19)
            .expect("event")
            .plugin::<SessionTitle>()
            .expect("typed")
            .expect("decodes");
        assert_eq!(title.source, TitleSource::Fallback);

        let p = line("permission/preset", r#"{"preset":"danger-full-access"}"#);
        let preset = Event::from_line(&p, 19)
            .expect("event")
            .plugin::<PermissionPreset>()
            .expect("typed")
            .expect("decodes");
        assert_eq!(preset.preset, PermissionPresetName::DangerFullAccess);
        let a = line(
            "approval/policy",
            r#"{"policy":"never","source":"delegation"}"#,
        );
        let pol = Event::from_line(&a, 19)
            .expect("event")
            .plugin::<ApprovalPolicyEvent>()
            .expect("typed")
            .expect("decodes");
        assert_eq!(pol.policy, ApprovalPolicyName::Never);
        let d = line(
            "session-log-deepseek/delivery-accepted",
            r#"{"sessionId":"session-1","sessionFormatVersion":4,"throughSeq":13}"#,
        );
        let del = Event::from_line(&d, 19)
            .expect("event")
            .plugin::<DeliveryAccepted>()
            .expect("typed")
            .expect("decodes");
        assert_eq!(del.through_seq, 13);
        let w = line("working-directory/change", r#"{"cwd":"/tmp/x"}"#);
        let wd = Event::from_line(&w, 19)
            .expect("event")
            .plugin::<WorkingDirectoryChange>()
            .expect("typed")
            .expect("decodes");
        assert_eq!(wd.cwd, "/tmp/x");
    }

    #[test]
    fn todo_and_plan_mode_round_trip() {
        let t = line(
            "todo/write",
            r#"{"todos":[{"content":"a","status":"pending"},{"content":"b","status":"in_progress"},{"content":"c","status":"completed"}]}"#,
        );
        let todo = Event::from_line(&t, 19)
            .expect("event")
            .plugin::<TodoWrite>()
            .expect("typed")
            .expect("decodes");
        assert_eq!(todo.todos[1].status, TodoStatus::InProgress);
        let back = NewEvent::plugin(&todo).expect("encode");
        assert_eq!(back.kind.as_str(), "todo/write");
        let bad = line(
            "todo/write",
            r#"{"todos":[{"content":"a","status":"done"}]}"#,
        );
        assert!(
            Event::from_line(&bad, 19)
                .expect("event")
                .plugin::<TodoWrite>()
                .expect("typed")
                .is_err()
        );
        let p = line("plan/mode", r#"{"active":true}"#);
        let mode = Event::from_line(&p, 19)
            .expect("event")
            .plugin::<PlanModeChange>()
            .expect("typed")
            .expect("decodes");
        assert!(mode.active);
    }
}
