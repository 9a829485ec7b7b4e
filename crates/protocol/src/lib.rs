//! `dsh-protocol`: the one vocabulary every dsh front end speaks.
//!
//! A client sends [`Op`]s to a session and receives [`Event`]s from it; it opens sessions with
//! [`OpenSession`] and lists them as [`SessionSummary`]s. Tools describe their calls as
//! [`ToolDisplay`]s; slash commands come from a registry as [`CommandInfo`]s. The same types
//! travel in-process (the [`Client`] trait) and over HTTP (JSON, Server-Sent Events). This crate
//! depends on no engine crate: a client holds it without linking the harness.
//!
//! The JSON form is stable: tagged unions carry `"type"` in camelCase, fields are camelCase,
//! value enums (efforts, modes, policies, kinds) are kebab-case as on the command line.
//! [`schema::protocol_schema`] generates the JSON Schema committed as
//! `docs/protocol.schema.json`; `docs/protocol.md` explains it to a client author.

pub mod display;
pub mod settings;

pub use display::{
    DisplayField, ExitStatus, FileDiff, Location, OutputSummary, TodoItem, TodoStatus, ToolDisplay,
    ToolKind,
};
pub use settings::{ApprovalPolicy, Effort, SandboxMode, SessionSettings};
pub mod client;
pub mod command;
pub mod error;
pub mod event;
pub mod op;
pub mod schema;
pub mod session;
pub mod usage;
pub mod workflow;

pub use client::{Client, EventStream, LogRecord, LogStream};
pub use command::{CommandInfo, CommandOutcome, CommandSource};
pub use error::{ErrorCode, ProtocolError};
pub use event::ApprovalPurpose;
pub use event::{
    AbortCause, ApprovalOutcome, ApprovalRequest, BackgroundWork, Event, EventMsg, ForkReason,
    GoalBlocked, GoalInfo, GoalPhase, JobState, LiveAttempt, MessageSource, NoticeLevel, Question,
    QuestionOption, QuestionRequest, QueuedSteer, RunStatus, Snapshot, SubagentMode, TurnEndReason,
};
pub use op::{ApprovalDecision, Attachment, Op, OpAccepted, QuestionAnswer};
pub use session::SearchMatch;
pub use session::{OpenSession, SessionOptions, SessionQuery, SessionState, SessionSummary};
pub use usage::Usage;
pub use workflow::{WorkflowAgent, WorkflowAgentState, WorkflowStatus};
