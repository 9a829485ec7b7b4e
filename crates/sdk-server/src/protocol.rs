//! The methods' parameters and results (protocol §1.3), typed.

use serde::{Deserialize, Serialize};

/// The methods the runtime serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `initialize`.
    Initialize,
    /// `session/prompt`.
    Prompt,
    /// `session/resume`.
    Resume,
    /// `session/working-directory/get`.
    WorkingDirectoryGet,
    /// `session/working-directory/set`.
    WorkingDirectorySet,
    /// `shutdown`.
    Shutdown,
}

impl Method {
    /// The method of a wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "initialize" => Method::Initialize,
            "session/prompt" => Method::Prompt,
            "session/resume" => Method::Resume,
            "session/working-directory/get" => Method::WorkingDirectoryGet,
            "session/working-directory/set" => Method::WorkingDirectorySet,
            "shutdown" => Method::Shutdown,
            _ => return None,
        })
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Initialize => "initialize",
            Method::Prompt => "session/prompt",
            Method::Resume => "session/resume",
            Method::WorkingDirectoryGet => "session/working-directory/get",
            Method::WorkingDirectorySet => "session/working-directory/set",
            Method::Shutdown => "shutdown",
        }
    }
}

/// `initialize` params.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// Absolute workspace, recorded on every session the runtime creates.
    pub cwd: String,
    /// Provider route (the client's default is `deepseek-official`).
    #[serde(default)]
    pub provider: Option<String>,
    /// Model id (the client's default is `deepseek-v4-flash`).
    #[serde(default)]
    pub model: Option<String>,
    /// Adapter-owned effort id; absent: the model's default.
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// Positive output cap per request; absent: the model's default.
    #[serde(default)]
    pub max_tokens: Option<serde_json::Number>,
}

/// `session/prompt` params.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptParams {
    /// Client-chosen session id; unknown ids create the session.
    pub session_id: String,
    /// The user message's content blocks, verbatim.
    pub content_blocks: Vec<ContentBlock>,
}

/// Params of the methods that name only a session.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionParams {
    /// The session.
    pub session_id: String,
}

/// `session/working-directory/set` params.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetWorkingDirectoryParams {
    /// The session.
    pub session_id: String,
    /// Absolute, or relative to the session's current directory.
    pub path: String,
}

/// `initialize` result.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// Name and version.
    pub server_info: ServerInfo,
}

/// `serverInfo`.
#[derive(Clone, Debug, Serialize)]
pub struct ServerInfo {
    /// Wire-stable name (`deepseek-harness-sdk-runtime`).
    pub name: String,
    /// Version.
    pub version: String,
}

/// `session/prompt` result.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResult {
    /// Id of the queued user message (also in the receipt event).
    pub message_id: String,
}

/// Working-directory results.
#[derive(Clone, Debug, Serialize)]
pub struct CwdResult {
    /// Absolute directory.
    pub cwd: String,
}

/// `session.status` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WireStatus {
    /// Work started.
    Running,
    /// Nothing more to do without new input.
    Idle,
}

/// `subagent.started` params: a child session of a session in the runtime was created (sent
/// before the child's first `session.event`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentStartedParams {
    /// The delegating session.
    pub parent_session_id: String,
    /// The child session.
    pub child_session_id: String,
    /// The delegation's label (a later revision's extra; 0.2.1rc2 ignores it).
    pub label: String,
    /// `one-shot` (later revision's extra).
    pub mode: &'static str,
    /// `spawn` / `fork` (later revision's extra).
    pub provider: &'static str,
}

/// `subagent.finished` status: `ok` for a completed child, else `error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SubagentStatus {
    /// The child completed.
    Ok,
    /// It ended otherwise.
    Error,
}

/// `subagent.finished` params: an in-process child's run ended.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentFinishedParams {
    /// `spawn` / `fork`.
    pub provider: &'static str,
    /// The child session (= `childSessionId`).
    pub agent_id: String,
    /// The delegating session.
    pub parent_session_id: String,
    /// The child session.
    pub child_session_id: String,
    /// `ok` / `error`.
    pub status: SubagentStatus,
    /// `completed`, `max-tokens`, `error`, `aborted`, `refusal`.
    pub stop_reason: &'static str,
    /// The child's last non-empty assistant text (else all its text); absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_assistant_message: Option<String>,
}

/// One content block of a prompt (only `text` blocks are accepted).
#[derive(Clone, Debug, Deserialize)]
pub struct ContentBlock {
    /// The block's type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` block.
    #[serde(default)]
    pub text: Option<String>,
}
