//! Tool failures: the error a tool body (or any pipeline stage) reports, and the codes the
//! pipeline itself produces (values of [`ToolErrorCode`], shared with the session log).

use dsh_llm::ToolErrorCode;

/// The codes the pipeline produces, as constants of [`ToolErrorCode`] (kept so `codes::X`
/// reads as before; the variants are the same values).
pub mod codes {
    use dsh_llm::ToolErrorCode;

    /// The tool is not registered, or not visible to the calling scope.
    pub const UNKNOWN_TOOL: ToolErrorCode = ToolErrorCode::UnknownTool;
    /// The arguments are not valid JSON or do not match the tool's schema.
    pub const INVALID_ARGS: ToolErrorCode = ToolErrorCode::InvalidArgs;
    /// The tool's deadline passed (set by the timeout-policy plugin).
    pub const TOOL_TIMEOUT: ToolErrorCode = ToolErrorCode::ToolTimeout;
    /// The call was cancelled before its body started.
    pub const ABORTED_BEFORE_DISPATCH: ToolErrorCode = ToolErrorCode::AbortedBeforeDispatch;
    /// The call was cancelled while its body ran.
    pub const ABORTED: ToolErrorCode = ToolErrorCode::Aborted;
    /// Crash repair: a call requested but never started.
    pub const TOOL_NOT_STARTED: ToolErrorCode = ToolErrorCode::ToolNotStarted;
    /// Crash repair: a call started but its result was not recorded.
    pub const TOOL_OUTCOME_UNKNOWN: ToolErrorCode = ToolErrorCode::ToolOutcomeUnknown;
    /// A `tools/pre-execute` listener or a guard denied the call.
    pub const TOOL_DENIED: ToolErrorCode = ToolErrorCode::ToolDenied;
    /// A `tools/post-execute` listener blocked the result.
    pub const TOOL_BLOCKED: ToolErrorCode = ToolErrorCode::ToolBlocked;
    /// The tool body (or a listener) failed without a code of its own, or panicked.
    pub const TOOL_FAILED: ToolErrorCode = ToolErrorCode::ToolFailed;
    /// A post-execute listener returned an invalid decision.
    pub const INVALID_TOOL_OUTPUT: ToolErrorCode = ToolErrorCode::InvalidToolOutput;
    /// The read-before-write policy refused a write or edit (file never read).
    pub const FS_NOT_OBSERVED: ToolErrorCode = ToolErrorCode::FsNotObserved;
}

/// A failed tool call, as the model and the log see it.
///
/// Rendered as `Error: <message>` with `isError: true`; `name` and `code` go to
/// `tool/result.error`, `reason` (raw user-facing text) is kept out of the model's content.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct ToolError {
    /// Error class name (`AbortError`, `ToolTimeoutError`, ...).
    pub name: String,
    /// Machine-readable code (`INVALID_ARGS`, `FS_NOT_OBSERVED`, ...).
    pub code: ToolErrorCode,
    /// The message shown to the model after `Error: `.
    pub message: String,
    /// Optional raw reason for users (not shown to the model).
    pub reason: Option<String>,
}

impl ToolError {
    /// An error with `code` and `message`; the name is derived from the code
    /// (`TOOL_TIMEOUT` → `ToolTimeoutError`; the two abort codes → `AbortError`).
    pub fn new(code: impl Into<ToolErrorCode>, message: impl Into<String>) -> Self {
        let code = code.into();
        let name = code.error_name();
        Self {
            name,
            code,
            message: message.into(),
            reason: None,
        }
    }

    /// Replace the derived error name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Attach a raw user-facing reason (kept out of model content).
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// `INVALID_ARGS` with the given message (argument checks beyond the schema).
    pub fn invalid_args(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_ARGS, message)
    }

    /// A body failure without a more specific code (`TOOL_FAILED`).
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(codes::TOOL_FAILED, message)
    }

    /// `unknown tool "<name>"` (`UNKNOWN_TOOL`).
    pub fn unknown_tool(name: &str) -> Self {
        Self::new(codes::UNKNOWN_TOOL, format!("unknown tool \"{name}\""))
    }

    /// `tool call aborted` (`ABORTED`).
    pub fn aborted() -> Self {
        Self::new(codes::ABORTED, "tool call aborted")
    }

    /// `tool call aborted before dispatch` (`ABORTED_BEFORE_DISPATCH`).
    pub fn aborted_before_dispatch() -> Self {
        Self::new(
            codes::ABORTED_BEFORE_DISPATCH,
            "tool call aborted before dispatch",
        )
    }

    /// `tool call timed out after <ms>ms` (`TOOL_TIMEOUT`, `ToolTimeoutError`).
    pub fn timeout(ms: u128) -> Self {
        Self::new(
            codes::TOOL_TIMEOUT,
            format!("tool call timed out after {ms}ms"),
        )
    }

    /// The text the model sees: `Error: <message>`.
    pub fn model_text(&self) -> String {
        format!("Error: {}", self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_upstream() {
        assert_eq!(ToolError::timeout(5).name, "ToolTimeoutError");
        assert_eq!(
            ToolError::timeout(5).message,
            "tool call timed out after 5ms"
        );
        assert_eq!(ToolError::aborted().name, "AbortError");
        assert_eq!(ToolError::aborted_before_dispatch().name, "AbortError");
        assert_eq!(
            ToolError::new("TOOL_OUTCOME_UNKNOWN", "x").name,
            "ToolOutcomeUnknownError"
        );
        assert_eq!(
            ToolError::unknown_tool("nope").model_text(),
            "Error: unknown tool \"nope\""
        );
        assert_eq!(
            ToolError::unknown_tool("nope").code,
            ToolErrorCode::UnknownTool
        );
        // A tool's own code keeps its spelling and gets a derived name.
        let own = ToolError::new("FS_NOT_FOUND", "x");
        assert_eq!(own.code, ToolErrorCode::from_wire("FS_NOT_FOUND"));
        assert_eq!(own.name, "FsNotFoundError");
        assert_eq!(own.to_string(), "x (FS_NOT_FOUND)");
    }
}
