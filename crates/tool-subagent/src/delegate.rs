//! `subagent` and `subagent_fork`.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_subagent::{StopReason, SubagentError, SubagentMode, SubagentRequest, Subagents, texts};
use dsh_tools::{Concurrency, Tool, ToolContext, ToolError, ToolOutput};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// Description of `subagent`. Part of the cached prompt prefix: keep it stable.
pub const SPAWN_DESCRIPTION: &str = "Start an independent subagent with a fresh context to do a \
self-contained task, and wait for its final answer.\n\
\n\
The subagent starts with no knowledge of this conversation: put everything it needs in `prompt` \
(the goal, file paths, constraints, what to report back). It has the same tools as you, works in \
this session's working directory (or `cwd`), and its final message is this call's result. \
Independent tasks can be delegated together: several calls in one response run at the same time. \
`description` is a 3-5 word label for the task.";

/// Description of `subagent_fork`. Part of the cached prompt prefix: keep it stable.
pub const FORK_DESCRIPTION: &str = "Start a subagent seeded with this conversation's completed \
turns (not the current one), and wait for its final answer.\n\
\n\
The subagent already knows what was said and done before this turn, so `prompt` only needs the \
new task. It has the same tools as you, works in this session's working directory (or `cwd`), \
and its final message is this call's result. Several calls in one response run at the same \
time. `description` is a 3-5 word label for the task.";

/// The arguments schema shared by both tools (the original's, property for property).
fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "cwd": {"type": "string", "description": "Working directory of the subagent (default: this session's)."},
            "description": {"type": "string", "description": "A short (3-5 words) label for the task."},
            "prompt": {"type": "string", "description": "The task for the subagent."}
        },
        "required": ["description", "prompt"]
    })
}

/// `subagent` (spawn) or `subagent_fork` (fork).
pub struct DelegateTool {
    name: &'static str,
    description: &'static str,
    mode: SubagentMode,
    subagents: Arc<dyn Subagents>,
    parameters: Value,
}

impl std::fmt::Debug for DelegateTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegateTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl DelegateTool {
    /// The `subagent` tool (fresh context).
    pub fn spawn(subagents: Arc<dyn Subagents>) -> Self {
        Self {
            name: "subagent",
            description: SPAWN_DESCRIPTION,
            mode: SubagentMode::Spawn,
            subagents,
            parameters: parameters(),
        }
    }

    /// The `subagent_fork` tool (seeded with the completed turns).
    pub fn fork(subagents: Arc<dyn Subagents>) -> Self {
        Self {
            name: "subagent_fork",
            description: FORK_DESCRIPTION,
            mode: SubagentMode::Fork,
            subagents,
            parameters: parameters(),
        }
    }

    async fn call(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let text = |key: &str| -> Result<String, ToolError> {
            match args.get(key).and_then(Value::as_str) {
                Some(s) if !s.trim().is_empty() => Ok(s.to_owned()),
                _ => Err(ToolError::invalid_args(format!(
                    "invalid {key}: expected a non-empty string"
                ))),
            }
        };
        let label = text("description")?;
        let prompt = text("prompt")?;
        let cwd = match args.get("cwd").and_then(Value::as_str) {
            Some(c) if !c.is_empty() => {
                let p = PathBuf::from(c);
                let p = if p.is_absolute() {
                    p
                } else {
                    ctx.cwd().join(p)
                };
                if !p.is_dir() {
                    return Err(ToolError::invalid_args(format!(
                        "invalid cwd: {} is not a directory",
                        p.display()
                    )));
                }
                Some(p)
            }
            _ => None,
        };
        let request = SubagentRequest {
            parent_id: ctx.session_id().to_owned(),
            mode: self.mode,
            label,
            prompt,
            cwd,
            cancel: ctx.cancel_token().clone(),
        };
        let outcome = self.subagents.run(request).await.map_err(|e| match e {
            SubagentError::Cancelled => ToolError::aborted(),
            other => ToolError::failed(other.to_string()),
        })?;
        if outcome.stop_reason == StopReason::Aborted && ctx.cancel_token().is_cancelled() {
            return Err(ToolError::aborted());
        }
        let meta = json!({
            "childSessionId": outcome.child_id,
            "provider": self.mode.provider(),
            "stopReason": outcome.stop_reason.as_str(),
            "requests": outcome.requests,
            "usage": serde_json::to_value(outcome.usage).unwrap_or(Value::Null),
        });
        if outcome.stop_reason != StopReason::Completed {
            return Err(ToolError::failed(texts::failure_text(
                outcome.stop_reason,
                outcome.diagnostic.as_deref(),
                &outcome.output,
            )));
        }
        Ok(ToolOutput::text(outcome.output).with_meta(meta))
    }
}

impl Tool for DelegateTool {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.call(ctx, args))
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }
}
