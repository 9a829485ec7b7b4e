//! The TUI side of issue 22's tools: the live checklist of `todo_write` (each `todo/write`
//! event is drawn as a checklist), plan-mode and working-directory changes. (`/plan` and
//! Shift+Tab run the registry's `plan` command.)

use dsh_session::Event;
use dsh_session::feature::{PlanModeChange, TodoStatus, TodoWrite, WorkingDirectoryChange};
use ratatui::text::{Line, Span};

use crate::theme::Theme;

/// The lines of a `todo/write`, `plan/mode` or `working-directory/change` event (`None` for
/// other events or an undecodable payload).
pub fn lines(ev: &Event, theme: Theme) -> Option<Vec<Line<'static>>> {
    if let Some(Ok(todo)) = ev.plugin::<TodoWrite>() {
        let mut out = vec![Line::from(Span::styled("☰ tasks", theme.heading()))];
        for t in &todo.todos {
            let style = match t.status {
                TodoStatus::Completed => theme.ok(),
                TodoStatus::InProgress => theme.warn(),
                TodoStatus::Pending => theme.dim(),
            };
            out.push(Line::from(vec![
                Span::styled(format!("  {} ", t.status.mark()), style),
                Span::raw(t.content.clone()),
            ]));
        }
        return Some(out);
    }
    if let Some(Ok(mode)) = ev.plugin::<PlanModeChange>() {
        let text = if mode.active {
            "◇ plan mode on: read-only tools until the plan is accepted (Shift+Tab to leave)"
        } else {
            "◆ plan mode off"
        };
        return Some(vec![Line::from(Span::styled(text, theme.warn()))]);
    }
    if let Some(Ok(wd)) = ev.plugin::<WorkingDirectoryChange>() {
        return Some(vec![Line::from(Span::styled(
            format!("· working directory: {}", wd.cwd),
            theme.dim(),
        ))]);
    }
    None
}
