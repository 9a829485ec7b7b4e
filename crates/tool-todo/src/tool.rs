//! `todo_write`: replace the agent's task list.

use std::collections::HashSet;

use dsh_agent::Agents;
use dsh_kernel::Ctx;
use dsh_session::NewEvent;
use dsh_session::feature::{TodoItem, TodoStatus, TodoWrite};
use dsh_tools::{
    DisplayInput, TodoStatus as DisplayStatus, Tool, ToolContext, ToolDisplay, ToolError, ToolKind,
    ToolOutput,
};
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

const DESCRIPTION: &str = "Replace your task list, shown to the user: send every item each call, \
mark items in_progress and completed as you go. Skip it for one-step tasks.";

/// The `todo_write` tool.
pub struct TodoWriteTool {
    ctx: Ctx,
    allow_parallel_in_progress: bool,
    parameters: Value,
}

impl std::fmt::Debug for TodoWriteTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TodoWriteTool")
            .field(
                "allow_parallel_in_progress",
                &self.allow_parallel_in_progress,
            )
            .finish_non_exhaustive()
    }
}

impl TodoWriteTool {
    /// The tool; it finds the calling agent's session through the `agents` service of `ctx`.
    pub fn new(ctx: Ctx, allow_parallel_in_progress: bool) -> Self {
        // The original's schema exactly (key order included), so logs and models carry over.
        let parameters = json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "properties": {
                            "content": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                        },
                        "required": ["content", "status"]
                    }
                }
            },
            "required": ["todos"]
        });
        Self {
            ctx,
            allow_parallel_in_progress,
            parameters,
        }
    }

    fn check(&self, args: &Value) -> Result<Vec<TodoItem>, ToolError> {
        let raw = args
            .get("todos")
            .cloned()
            .ok_or_else(|| ToolError::invalid_args("invalid todos: `todos` is required"))?;
        let items: Vec<TodoItem> = serde_json::from_value(raw)
            .map_err(|e| ToolError::invalid_args(format!("invalid todos: {e}")))?;
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let content = item.content.trim().to_owned();
            if content.is_empty() {
                return Err(ToolError::invalid_args(
                    "invalid todo: `content` must be a non-empty string",
                ));
            }
            if !seen.insert(content.clone()) {
                return Err(ToolError::invalid_args(format!(
                    "invalid todos: duplicate content {}",
                    serde_json::to_string(&content).unwrap_or_default()
                )));
            }
            out.push(TodoItem {
                content,
                status: item.status,
            });
        }
        let running = out
            .iter()
            .filter(|t| t.status == TodoStatus::InProgress)
            .count();
        if !self.allow_parallel_in_progress && running > 1 {
            return Err(ToolError::invalid_args(format!(
                "invalid todos: at most one task may be in_progress (got {running})"
            )));
        }
        Ok(out)
    }
}

/// `Updated todo list: <p> pending, <i> in progress, <c> completed.`
pub fn summary(todos: &[TodoItem]) -> String {
    let count = |s: TodoStatus| todos.iter().filter(|t| t.status == s).count();
    format!(
        "Updated todo list: {} pending, {} in progress, {} completed.",
        count(TodoStatus::Pending),
        count(TodoStatus::InProgress),
        count(TodoStatus::Completed)
    )
}

/// The display of a `todo_write` call: the whole list it sets, and its counts as the subject.
/// A list that does not follow the schema shows no items (the tool itself reports that).
pub fn display(call: &DisplayInput<'_>) -> ToolDisplay {
    #[derive(Deserialize)]
    struct Shown {
        todos: Vec<dsh_tools::TodoItem>,
    }
    let mut d = ToolDisplay::new(ToolKind::Todo, NAME);
    if let Some(Shown { todos }) = call.parse::<Shown>() {
        let count = |s: DisplayStatus| todos.iter().filter(|t| t.status == s).count();
        d = d.with_subject(format!(
            "{} pending, {} in progress, {} completed",
            count(DisplayStatus::Pending),
            count(DisplayStatus::InProgress),
            count(DisplayStatus::Completed)
        ));
        d.todos = Some(todos);
    }
    d
}

/// The tool's name.
pub const NAME: &str = "todo_write";

impl Tool for TodoWriteTool {
    fn name(&self) -> &str {
        NAME
    }

    /// It writes the session's own todo list only.
    fn read_only(&self) -> bool {
        true
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        display(call)
    }

    fn description(&self) -> &str {
        DESCRIPTION
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
            let todos = self.check(&args)?;
            let agent = self
                .ctx
                .get::<dyn Agents>()
                .and_then(|a| a.get(ctx.session_id()))
                .ok_or_else(|| ToolError::failed("todo_write requires an owning agent session"))?;
            let text = summary(&todos);
            let event = NewEvent::plugin(&TodoWrite { todos })
                .map_err(|e| ToolError::failed(format!("cannot encode the todo list: {e}")))?;
            agent
                .session()
                .append(event)
                .map_err(|e| ToolError::failed(format!("cannot record the todo list: {e}")))?;
            Ok(ToolOutput::text(text))
        })
    }
}
