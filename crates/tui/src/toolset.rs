//! The TUI side of issue 22's tools: the live checklist of the agent's task list (each
//! `todoList` event is drawn as a checklist), plan-mode and working-directory changes. (`/plan`
//! and Shift+Tab run the registry's `plan` command.)

use dsh_protocol::{EventMsg, TodoStatus};
use ratatui::text::{Line, Span};

use crate::theme::Theme;

/// The mark of a task's state.
pub fn mark(status: TodoStatus) -> &'static str {
    match status {
        TodoStatus::Completed => "[x]",
        TodoStatus::InProgress => "[~]",
        TodoStatus::Pending => "[ ]",
    }
}

/// The lines of a task list, plan-mode or working-directory event (`None` for other events).
pub fn lines(ev: &EventMsg, theme: Theme) -> Option<Vec<Line<'static>>> {
    match ev {
        EventMsg::TodoList { items } => {
            let mut out = vec![Line::from(Span::styled("☰ tasks", theme.heading()))];
            for t in items {
                let style = match t.status {
                    TodoStatus::Completed => theme.ok(),
                    TodoStatus::InProgress => theme.warn(),
                    TodoStatus::Pending => theme.dim(),
                };
                out.push(Line::from(vec![
                    Span::styled(format!("  {} ", mark(t.status)), style),
                    Span::raw(t.content.clone()),
                ]));
            }
            Some(out)
        }
        EventMsg::PlanMode { active, .. } => {
            let text = if *active {
                "◇ plan mode on: read-only tools until the plan is accepted (Shift+Tab to leave)"
            } else {
                "◆ plan mode off"
            };
            Some(vec![Line::from(Span::styled(text, theme.warn()))])
        }
        EventMsg::WorkingDirectory { cwd } => Some(vec![Line::from(Span::styled(
            format!("· working directory: {cwd}"),
            theme.dim(),
        ))]),
        _ => None,
    }
}
