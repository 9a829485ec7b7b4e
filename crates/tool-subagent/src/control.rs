//! `list_agents` and `interrupt_agent`.

use std::sync::Arc;

use dsh_subagent_api::Subagents;
use dsh_tools::{Concurrency, DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolOutput};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::args::{AgentArgs, ListArgs, Scope, non_empty, parse};

/// `list_agents`: the live subagents this agent started.
pub struct ListAgentsTool {
    subagents: Arc<dyn Subagents>,
    parameters: Value,
}

impl std::fmt::Debug for ListAgentsTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListAgentsTool").finish_non_exhaustive()
    }
}

impl ListAgentsTool {
    /// The tool over `subagents`.
    pub fn new(subagents: Arc<dyn Subagents>) -> Self {
        Self {
            subagents,
            parameters: json!({
                "type": "object",
                "properties": {
                    "scope": {
                        "type": "string",
                        "enum": ["children", "descendants"],
                        "description": "children (default): the subagents you started; descendants: theirs too."
                    }
                }
            }),
        }
    }
}

impl Tool for ListAgentsTool {
    fn name(&self) -> &str {
        "list_agents"
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        crate::display::control_display(call)
    }

    fn description(&self) -> &str {
        "List your live subagents with their status."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let a: ListArgs = parse(&args)?;
            let descendants = a.scope.unwrap_or_default() == Scope::Descendants;
            let children = self.subagents.children(ctx.session_id(), descendants);
            if children.is_empty() {
                return Ok(ToolOutput::text("(no subagents)"));
            }
            let lines: Vec<String> = children
                .iter()
                .map(|c| {
                    let status = c.status.as_str();
                    let mut line = format!("{} [{status}] \u{2014} {}", c.id, c.label);
                    if descendants {
                        line.push_str(&format!(" parent={} depth={}", c.parent_id, c.depth));
                    }
                    line
                })
                .collect();
            Ok(ToolOutput::text(lines.join("\n")))
        })
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }

    fn read_only(&self) -> bool {
        true
    }
}

/// `interrupt_agent`: asks a descendant subagent to stop, without waiting.
pub struct InterruptAgentTool {
    subagents: Arc<dyn Subagents>,
    parameters: Value,
}

impl std::fmt::Debug for InterruptAgentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterruptAgentTool").finish_non_exhaustive()
    }
}

impl InterruptAgentTool {
    /// The tool over `subagents`.
    pub fn new(subagents: Arc<dyn Subagents>) -> Self {
        Self {
            subagents,
            parameters: json!({
                "type": "object",
                "properties": {
                    "agent_id": {"type": "string"}
                },
                "required": ["agent_id"]
            }),
        }
    }
}

impl Tool for InterruptAgentTool {
    fn name(&self) -> &str {
        "interrupt_agent"
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        crate::display::control_display(call)
    }

    fn description(&self) -> &str {
        "Ask a descendant subagent to stop, without waiting for it."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let a: AgentArgs = parse(&args)?;
            let id = non_empty(a.agent_id, "agent_id")?;
            let id = id.as_str();
            self.subagents
                .interrupt(ctx.session_id(), id)
                .map_err(|e| ToolError::failed(e.to_string()))?;
            Ok(ToolOutput::text(format!(
                "interrupt requested for agent {id}"
            )))
        })
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }
}

/// `send_message(agent_id, message)`: to a direct child (its next turn) or to the parent.
pub struct SendMessageTool {
    subagents: Arc<dyn Subagents>,
    parameters: Value,
}

impl std::fmt::Debug for SendMessageTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendMessageTool").finish_non_exhaustive()
    }
}

impl SendMessageTool {
    /// The tool over `subagents`.
    pub fn new(subagents: Arc<dyn Subagents>) -> Self {
        Self {
            subagents,
            parameters: json!({
                "type": "object",
                "properties": {
                    "agent_id": {"type": "string"},
                    "message": {"type": "string", "description": "Self-contained."}
                },
                "required": ["agent_id", "message"]
            }),
        }
    }
}

impl Tool for SendMessageTool {
    fn name(&self) -> &str {
        "send_message"
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        crate::display::control_display(call)
    }

    fn description(&self) -> &str {
        "Message a subagent you started (its next turn; a finished continuable one resumes) or \
         the agent that started you (seen at its next step). Sending does not end your turn."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let a: AgentArgs = parse(&args)?;
            let (target, message) = (
                non_empty(a.agent_id, "agent_id")?,
                non_empty(a.message, "message")?,
            );
            let text = self
                .subagents
                .send_message(ctx.session_id(), &target, &message)
                .await
                .map_err(|e| ToolError::failed(e.to_string()))?;
            Ok(ToolOutput::text(text))
        })
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }
}
