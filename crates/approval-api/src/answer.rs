//! The seam a front end implements: one question, one answer.

use dsh_kernel::Service;
use dsh_sandbox::SandboxMode;
use futures::future::BoxFuture;
use serde_json::Value;

/// One question to the user.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalRequest {
    /// The id logged in `approval/asked` and `approval/decided`.
    pub id: String,
    /// The session (agent) asking.
    pub session_id: String,
    /// The tool call.
    pub call_id: String,
    /// The tool.
    pub tool_name: String,
    /// The call's arguments.
    pub arguments: Value,
    /// Why approval is needed (shown to the user).
    pub reason: String,
    /// The sandbox mode the call would run under when allowed (an escalation), if any.
    pub escalation: Option<SandboxMode>,
}

/// The user's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Run this call once.
    AllowOnce,
    /// Run it, and store a rule so that calls like it run without asking in this project.
    AllowAlways,
    /// Do not run it; `reason` is shown to the model.
    Deny {
        /// The user's reason.
        reason: Option<String>,
    },
    /// The question was dismissed (the turn ended, the front end went away).
    Cancelled,
}

/// Answers approval requests: the TUI's prompt, the SDK/ACP permission requests, a script.
/// Provided as the kernel service `approval-answerer` by the front end that is attached.
pub trait ApprovalAnswerer: Send + Sync + 'static {
    /// Asks the user about `request`.
    fn answer<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer>;
}

impl Service for dyn ApprovalAnswerer {
    const NAME: &'static str = "approval-answerer";
}
