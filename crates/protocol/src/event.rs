//! `Event`: what a session tells its clients.
//!
//! Every event carries `seq`, the log sequence number it derives from. Events projected from
//! a committed log event carry that event's seq; live events (deltas, status, queued steers,
//! pending approvals) carry the seq of the last committed event before them. A client that
//! reconnects with `after = N` receives every committed event after `N` and then a
//! [`EventMsg::Snapshot`] of the live state: no gap, no duplicate.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::display::{TodoItem, ToolDisplay};
use crate::error::{ErrorCode, ProtocolError};
use crate::op::QuestionAnswer;
use crate::session::{SessionState, SessionSummary};
use crate::settings::{SandboxMode, SessionSettings};
use crate::usage::Usage;

/// One event of a session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// The log sequence number this event derives from (see the module docs).
    pub seq: u64,
    /// What happened.
    #[serde(flatten)]
    pub msg: EventMsg,
}

impl Event {
    /// An event at `seq`.
    pub fn new(seq: u64, msg: EventMsg) -> Self {
        Event { seq, msg }
    }

    /// Whether the event is live state rather than a projection of a committed log event (a
    /// reconnecting client gets live state again in the snapshot, never these events).
    pub fn is_live(&self) -> bool {
        self.msg.is_live()
    }
}

/// Why a turn ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum TurnEndReason {
    /// The model finished.
    Completed,
    /// A failure ended it.
    Error {
        /// The failure.
        error: ProtocolError,
    },
    /// Someone interrupted it.
    Aborted,
    /// The answer reached the output cap.
    MaxTokens,
    /// A plugin blocked it.
    Blocked,
    /// The process died during it (repaired on resume).
    Interrupted,
    /// The log was forked here.
    Forked,
    /// A reason this protocol does not know.
    #[serde(rename_all = "camelCase")]
    Other {
        /// The log's spelling.
        kind: String,
    },
}

/// Who or what aborted a turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AbortCause {
    /// A person (an interrupt).
    User,
    /// The parent agent (a sub-agent's turn).
    Parent,
    /// A hook.
    #[serde(rename_all = "camelCase")]
    Hook {
        /// The hook's reason.
        reason: String,
    },
    /// The session was closed during the turn.
    Disposed,
    /// A cause this protocol does not know.
    #[serde(rename_all = "camelCase")]
    Other {
        /// The log's spelling.
        kind: String,
    },
}

impl AbortCause {
    /// The log's spelling of the cause (`user`, `parent`, `hook`, `disposed`, ...).
    pub fn kind(&self) -> &str {
        match self {
            AbortCause::User => "user",
            AbortCause::Parent => "parent",
            AbortCause::Hook { .. } => "hook",
            AbortCause::Disposed => "disposed",
            AbortCause::Other { kind } => kind,
        }
    }
}

/// Background work of a session that outlives its turns: jobs and sub-agents still running.
/// When one settles, its notice may start a new turn.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundWork {
    /// The ids of the session's background jobs that have not settled, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<String>,
    /// Continuable sub-agents of the session still running.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub subagents: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl BackgroundWork {
    /// Nothing is running.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty() && self.subagents == 0
    }
}

/// Who wrote a user-role message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MessageSource {
    /// A person (a prompt or a steer).
    User,
    /// A slash command expanded into a prompt.
    Command,
    /// A goal's continuation round.
    Goal,
    /// A sub-agent or a background job reporting.
    Agent,
    /// Anything else (plugins), by its log kind.
    #[serde(untagged)]
    Other(String),
}

/// How an approval request was resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalOutcome {
    /// Allowed for this call.
    AllowedOnce,
    /// Allowed, and a rule stored for calls like it.
    AllowedAlways,
    /// Refused.
    Denied,
    /// Dismissed (the turn ended, no one answered).
    Cancelled,
    /// Nobody could be asked.
    Unavailable,
}

/// A tool call waiting for a person's approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    /// Answer with this id ([`crate::Op::AnswerApproval`]).
    pub request_id: String,
    /// The session asking (a sub-agent asks through its parent's clients).
    pub session_id: String,
    /// The tool call.
    pub call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The call, as the tool describes it.
    pub display: ToolDisplay,
    /// Why approval is needed.
    pub reason: String,
    /// The sandbox mode the call would run under when allowed (an escalation), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<SandboxMode>,
    /// What is asked: a tool call to allow, or a plan to review (absent in older streams: a tool
    /// call).
    #[serde(default)]
    pub purpose: ApprovalPurpose,
}

/// What an [`ApprovalRequest`] asks a person to decide.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPurpose {
    /// Allow a tool call (allow once, allow always, deny).
    #[default]
    ToolCall,
    /// Accept a plan submitted in plan mode (`exit_plan_mode`; its `display` carries the plan):
    /// allowing accepts it and leaves plan mode, denying keeps planning.
    PlanReview,
}

/// One option of a question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionOption {
    /// The label (what an answer names).
    pub label: String,
    /// More about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One question of a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    /// Its id within the request.
    pub id: String,
    /// A short header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// The question.
    pub question: String,
    /// The options to choose from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<QuestionOption>,
    /// Several options may be chosen.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub multi_select: bool,
}

/// The agent asks the user something.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionRequest {
    /// Answer with this id ([`crate::Op::AnswerQuestion`]).
    pub request_id: String,
    /// The questions.
    pub questions: Vec<Question>,
}

/// Where a goal is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GoalPhase {
    /// Rounds continue.
    Active,
    /// Stopped by a person (or an interrupted round).
    Paused,
    /// Stopped by a blocker or its round limit (see `blocked`).
    Blocked,
    /// Achieved.
    Complete,
}

/// Why a goal is blocked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalBlocked {
    /// `round-limit` (out of rounds), `model-reported`, or another kebab-case code.
    pub code: String,
    /// What blocks it.
    pub message: String,
}

/// A session's goal: a persistent objective that drives automatic continuation rounds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalInfo {
    /// Its id.
    pub id: String,
    /// Its revision (one more at each change).
    pub revision: u64,
    /// What to achieve.
    pub objective: String,
    /// Where it is.
    pub phase: GoalPhase,
    /// Rounds started so far.
    pub rounds_started: u64,
    /// The most rounds it may start.
    pub max_rounds: u64,
    /// Why it is blocked, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<GoalBlocked>,
}

/// A steer waiting for the next step boundary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueuedSteer {
    /// Its id (withdraw with [`crate::Op::WithdrawSteer`]).
    pub steer_id: String,
    /// The text.
    pub text: String,
}

/// How a sub-agent's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    /// It finished its task.
    Completed,
    /// It failed.
    Failed,
    /// It was stopped.
    Cancelled,
}

/// How a sub-agent was started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SubagentMode {
    /// A fresh session with its own prompt.
    Spawn,
    /// A session seeded with the parent's history.
    Fork,
}

/// The state of a background job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum JobState {
    /// Running.
    Running,
    /// Finished.
    Completed,
    /// Failed.
    Failed,
    /// Killed or cancelled.
    Cancelled,
}

/// The attempt being streamed when a client subscribed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LiveAttempt {
    /// The turn.
    pub turn: u64,
    /// Reasoning streamed so far.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// Answer text streamed so far.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
}

/// The live state of a session, sent once a subscription has replayed the committed events.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// The session.
    pub session: SessionSummary,
    /// Tokens and cost of the whole session so far (sub-agents included).
    pub usage: Usage,
    /// Approval requests waiting for an answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_approvals: Vec<ApprovalRequest>,
    /// Questions waiting for an answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_questions: Vec<QuestionRequest>,
    /// Steers not yet delivered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queued_steers: Vec<QueuedSteer>,
    /// The attempt in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveAttempt>,
    /// Background work still running (as of the last quiet point).
    #[serde(default, skip_serializing_if = "BackgroundWork::is_empty")]
    pub background: BackgroundWork,
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum EventMsg {
    /// The live state, after the committed events a subscription replays.
    Snapshot(Box<Snapshot>),
    /// The session's settings changed (live: `setModel`, `setEffort`; a subscription's snapshot
    /// carries the settings in force).
    #[serde(rename_all = "camelCase")]
    SessionConfigured {
        /// The working directory.
        cwd: String,
        /// Route, model, effort, sandbox mode, approval policy.
        settings: SessionSettings,
        /// Whether the session was resumed from storage.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resumed: bool,
    },
    /// What the session is doing now (live).
    #[serde(rename_all = "camelCase")]
    State {
        /// The state.
        state: SessionState,
    },
    /// The session's title.
    #[serde(rename_all = "camelCase")]
    Title {
        /// The title.
        title: String,
    },
    /// The working directory changed.
    #[serde(rename_all = "camelCase")]
    WorkingDirectory {
        /// The new directory.
        cwd: String,
    },
    /// A turn began.
    #[serde(rename_all = "camelCase")]
    TurnStarted {
        /// Its number (1-based).
        turn: u64,
    },
    /// A turn ended.
    #[serde(rename_all = "camelCase")]
    TurnEnded {
        /// Its number.
        turn: u64,
        /// Why.
        reason: TurnEndReason,
        /// Tokens and cost of the turn (its steps, retries and sub-agents).
        usage: Usage,
        /// Who or what aborted it (reason `aborted`), when the log says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        abort_cause: Option<AbortCause>,
    },
    /// A user-role message entered the history.
    #[serde(rename_all = "camelCase")]
    UserMessage {
        /// The turn.
        turn: u64,
        /// Its text.
        text: String,
        /// Who wrote it.
        source: MessageSource,
    },
    /// Answer text streamed (live).
    #[serde(rename_all = "camelCase")]
    TextDelta {
        /// The text.
        text: String,
    },
    /// Reasoning streamed (live).
    #[serde(rename_all = "camelCase")]
    ReasoningDelta {
        /// The text.
        text: String,
    },
    /// The model's message was committed.
    #[serde(rename_all = "camelCase")]
    AssistantMessage {
        /// The turn.
        turn: u64,
        /// Its answer text.
        text: String,
        /// Its reasoning.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        /// Cut short by an interrupt (what was delivered is kept).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
        /// The model that wrote it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// Tokens and cost of one request, and the session's totals.
    #[serde(rename_all = "camelCase")]
    UsageUpdated {
        /// The turn.
        turn: u64,
        /// This request.
        usage: Usage,
        /// The session so far.
        total: Usage,
        /// Context tokens of this request (input, cached and output).
        context_tokens: u64,
    },
    /// A request's usage arrived in its stream (live): shown at once, before its message
    /// commits. The committed [`EventMsg::UsageUpdated`] of the same request follows with the
    /// same figures; fold that one (this event is provisional: a client that folds usage must
    /// not add it twice).
    #[serde(rename_all = "camelCase")]
    UsageStreamed {
        /// The turn.
        turn: u64,
        /// This request (priced when the route has prices).
        usage: Usage,
        /// The session so far, this request included.
        total: Usage,
        /// Context tokens of this request (input, cached and output).
        context_tokens: u64,
    },
    /// A failed request is retried.
    #[serde(rename_all = "camelCase")]
    Retrying {
        /// The retry's number (1-based).
        attempt: u32,
        /// The most there will be, when bounded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_attempts: Option<u32>,
        /// The wait before it.
        delay_ms: u64,
        /// What failed.
        error: ProtocolError,
    },
    /// The model called a tool.
    #[serde(rename_all = "camelCase")]
    ToolCallBegan {
        /// The call id.
        call_id: String,
        /// The tool.
        tool_name: String,
        /// How it looks.
        display: ToolDisplay,
    },
    /// Partial output of a running call (live).
    #[serde(rename_all = "camelCase")]
    ToolCallProgress {
        /// The call id.
        call_id: String,
        /// New output.
        output: String,
    },
    /// A tool call's result was committed.
    #[serde(rename_all = "camelCase")]
    ToolCallEnded {
        /// The call id.
        call_id: String,
        /// The tool.
        tool_name: String,
        /// How it looks now (with its output summary).
        display: ToolDisplay,
        /// The result is an error.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        /// The error's code.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_code: Option<ErrorCode>,
        /// The first line of an error result (what the card says went wrong).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
    },
    /// A tool call waits for approval.
    ApprovalRequested(ApprovalRequest),
    /// An approval request was answered or dismissed.
    #[serde(rename_all = "camelCase")]
    ApprovalResolved {
        /// The request.
        request_id: String,
        /// The tool call, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// How.
        outcome: ApprovalOutcome,
        /// A denial's reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The agent asks the user.
    QuestionAsked(QuestionRequest),
    /// A question was answered (or dismissed: no answers).
    #[serde(rename_all = "camelCase")]
    QuestionAnswered {
        /// The request.
        request_id: String,
        /// The answers.
        answers: Vec<QuestionAnswer>,
    },
    /// A compaction began.
    #[serde(rename_all = "camelCase")]
    CompactionStarted {
        /// Context tokens before it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_before: Option<u64>,
    },
    /// A compaction ended.
    #[serde(rename_all = "camelCase")]
    CompactionEnded {
        /// Context tokens before it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_before: Option<u64>,
        /// Context tokens after it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_after: Option<u64>,
        /// It failed (the history is unchanged).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ProtocolError>,
    },
    /// A sub-agent started (live; its own session: subscribe to it to watch).
    #[serde(rename_all = "camelCase")]
    SubagentStarted {
        /// The child's session id.
        session_id: String,
        /// The tool call that started it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// Its label.
        label: String,
        /// How it was started, when the host knows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<SubagentMode>,
    },
    /// A sub-agent's run ended.
    #[serde(rename_all = "camelCase")]
    SubagentFinished {
        /// The child's session id.
        session_id: String,
        /// How it ended.
        status: RunStatus,
        /// Its tokens and cost (counted in the parent's totals).
        usage: Usage,
    },
    /// A `workflow` call's run changed (committed: each `tool-workflow/*` record of the run,
    /// and the usage of each of its sub-agents as it ends): the whole run as it stands, so a
    /// client replaces what it showed for `call_id`.
    #[serde(rename_all = "camelCase")]
    WorkflowProgress {
        /// The `workflow` call.
        call_id: String,
        /// The run (unique in the session).
        run_id: String,
        /// The script's `meta.name`.
        name: String,
        /// Where the run is.
        status: crate::workflow::WorkflowStatus,
        /// The sub-agents it started, in start order.
        agents: Vec<crate::workflow::WorkflowAgent>,
    },
    /// A background job was registered or settled.
    #[serde(rename_all = "camelCase")]
    JobUpdated {
        /// The job.
        job_id: String,
        /// What kind of job (`bash`, `subagent`, `workflow`).
        kind: String,
        /// Its state.
        state: JobState,
        /// A short description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// The session became quiet (live): idle, with no input waiting to start a turn; sent
    /// after each turn once that holds, with the background work still running, and again
    /// when that work settles (its notices are in the inbox by then: a turn they wake starts
    /// first). Quiet with no background work means nothing will start a turn by itself.
    Background(BackgroundWork),
    /// The agent's task list.
    #[serde(rename_all = "camelCase")]
    TodoList {
        /// The tasks.
        items: Vec<TodoItem>,
    },
    /// The session's goal was created or changed (committed: `goal/change`).
    #[serde(rename_all = "camelCase")]
    GoalUpdated {
        /// The goal now (`None`: cleared).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        goal: Option<GoalInfo>,
    },
    /// A goal's continuation round ended (committed: sent after its turn's `turnEnded`).
    #[serde(rename_all = "camelCase")]
    GoalRoundEnded {
        /// The goal.
        goal_id: String,
        /// The round (1-based).
        round: u64,
        /// The goal's round limit.
        max_rounds: u64,
        /// Tokens and cost of the round (its turn).
        usage: Usage,
    },
    /// Plan mode was entered or left.
    #[serde(rename_all = "camelCase")]
    PlanMode {
        /// In plan mode now.
        active: bool,
        /// The plan that ended it, when one was accepted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan: Option<String>,
    },
    /// A steer was queued (live).
    #[serde(rename_all = "camelCase")]
    SteerQueued {
        /// Its id.
        steer_id: String,
        /// The text.
        text: String,
    },
    /// A queued steer was delivered to the model (live: its text is committed as a user
    /// message of the step it joined).
    #[serde(rename_all = "camelCase")]
    SteerDelivered {
        /// Its id.
        steer_id: String,
    },
    /// A queued steer was withdrawn.
    #[serde(rename_all = "camelCase")]
    SteerWithdrawn {
        /// Its id.
        steer_id: String,
    },
    /// A slash command ran (live: its output is for the clients watching now).
    #[serde(rename_all = "camelCase")]
    CommandRan {
        /// The command.
        name: String,
        /// Its outcome.
        outcome: crate::command::CommandOutcome,
    },
    /// The session was continued in another one (committed: `dsh/forked`, after the last
    /// event of the branch left behind). A client showing the session live follows
    /// `session_id` (subscribes to it, sends its input there); one replaying the session's
    /// history shows where it continues. A conversation rewind is the one fork today.
    #[serde(rename_all = "camelCase")]
    SessionForked {
        /// The session that continues this one.
        session_id: String,
        /// Why it was forked.
        reason: ForkReason,
        /// A rewind: the fork holds the turns before this one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to_turn: Option<u64>,
        /// A rewind that restored files too: its record (`dsh rewind --undo` undoes it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rewind_id: Option<String>,
    },
    /// Something a person should know that is not part of a turn (live).
    #[serde(rename_all = "camelCase")]
    Notice {
        /// How important.
        level: NoticeLevel,
        /// The text.
        text: String,
    },
    /// A failure outside a turn's record (a command failed, a subscription fell behind).
    Error(ProtocolError),
}

/// Why a session was continued in another ([`EventMsg::SessionForked`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ForkReason {
    /// A conversation rewind (`/rewind`, `dsh rewind`).
    Rewind,
    /// A reason this protocol does not know, as the log spells it.
    #[serde(untagged)]
    Other(String),
}

/// The weight of a notice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NoticeLevel {
    /// For information.
    Info,
    /// Something is off.
    Warning,
}

impl EventMsg {
    /// Whether this is live state rather than a projection of a committed log event.
    pub fn is_live(&self) -> bool {
        matches!(
            self,
            EventMsg::Snapshot(_)
                | EventMsg::SessionConfigured { .. }
                | EventMsg::State { .. }
                | EventMsg::TextDelta { .. }
                | EventMsg::UsageStreamed { .. }
                | EventMsg::Background(_)
                | EventMsg::ReasoningDelta { .. }
                | EventMsg::ToolCallProgress { .. }
                | EventMsg::SteerQueued { .. }
                | EventMsg::SteerDelivered { .. }
                | EventMsg::SteerWithdrawn { .. }
                | EventMsg::SubagentStarted { .. }
                | EventMsg::CommandRan { .. }
                | EventMsg::Notice { .. }
                | EventMsg::Error(_)
        )
    }
}
