//! `dsh-tool-todo`: the `todo_write` tool, the agent's task list.
//!
//! Each call replaces the whole list and appends `todo/write {todos}` to the session log
//! ([`dsh_session::feature::TodoWrite`], latest wins), between the call's `tool/call` and
//! `tool/result`. Front ends fold the latest event ([`latest`]) and render it ([`checklist`]):
//! the TUI as a live checklist, `dsh sessions show` inline, ACP as `plan` updates (from the
//! call's arguments, which carry the same schema).

mod plugin;
mod tool;

pub use plugin::{TodoToolConfig, TodoToolPlugin};
pub use tool::{NAME, TodoWriteTool, display, summary};

use std::sync::Arc;

use dsh_session::Event;
use dsh_session::feature::{TodoItem, TodoStatus, TodoWrite};

/// The task list in force after `events`: the latest decodable `todo/write` (`None`: none yet).
pub fn latest(events: &[Arc<Event>]) -> Option<TodoWrite> {
    events
        .iter()
        .rev()
        .find_map(|e| e.plugin::<TodoWrite>().and_then(Result::ok))
}

/// The list as a plain-text checklist, one item a line: `[x]` completed, `[~]` in progress,
/// `[ ]` pending. An empty list is `(no tasks)`.
pub fn checklist(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "(no tasks)".into();
    }
    todos
        .iter()
        .map(|t| format!("{} {}", mark(t.status), t.content))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The checkbox of a status (`[x]`, `[~]`, `[ ]`): [`TodoStatus::mark`].
pub fn mark(status: TodoStatus) -> &'static str {
    status.mark()
}
