//! From dsh's vocabulary to ACP `session/update` payloads: message and thought chunks, tool cards
//! (kind, title, locations, diffs) and their results, and the stop reason of a turn.

use std::path::PathBuf;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    StopReason, TextContent, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use dsh_llm::Message;
use dsh_session::data::{ToolCallEvent, ToolResult, TurnEndReason};
use serde_json::Value;

/// A text chunk.
pub(crate) fn text_chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// The tool card of a call: kind from the tool, title from its arguments (the command for bash,
/// the path for file tools), locations and, for writes and edits, the diff.
pub(crate) fn tool_call(call: &ToolCallEvent, cwd: &std::path::Path) -> ToolCall {
    let args: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
    let path = str_arg(&args, "file_path")
        .or_else(|| str_arg(&args, "path"))
        .map(|p| {
            let p = PathBuf::from(p);
            if p.is_absolute() { p } else { cwd.join(p) }
        });
    let (kind, title) = match call.name.as_str() {
        "bash" => (
            ToolKind::Execute,
            str_arg(&args, "command").unwrap_or("bash").to_owned(),
        ),
        "read" => (ToolKind::Read, titled("Read", path.as_ref())),
        "write" => (ToolKind::Edit, titled("Write", path.as_ref())),
        "edit" => (ToolKind::Edit, titled("Edit", path.as_ref())),
        "glob" | "grep" => (
            ToolKind::Search,
            format!(
                "{} {}",
                call.name,
                str_arg(&args, "pattern").unwrap_or_default()
            ),
        ),
        other => (ToolKind::Other, other.to_owned()),
    };
    let mut content = Vec::new();
    if let Some(p) = &path {
        match call.name.as_str() {
            "write" => content.push(ToolCallContent::Diff(Diff::new(
                p.clone(),
                str_arg(&args, "content").unwrap_or_default(),
            ))),
            "edit" => content.push(ToolCallContent::Diff(
                Diff::new(p.clone(), str_arg(&args, "new_string").unwrap_or_default())
                    .old_text(str_arg(&args, "old_string").map(str::to_owned)),
            )),
            _ => {}
        }
    }
    if let Some(d) = str_arg(&args, "description") {
        content.push(ToolCallContent::from(ContentBlock::Text(TextContent::new(
            d,
        ))));
    }
    let mut card = ToolCall::new(call.call_id.clone(), title)
        .kind(kind)
        .status(ToolCallStatus::InProgress)
        .raw_input(Some(args))
        .content(content);
    if let Some(p) = path {
        card = card.locations(vec![ToolCallLocation::new(p)]);
    }
    card
}

fn titled(verb: &str, path: Option<&PathBuf>) -> String {
    match path {
        Some(p) => format!("{verb} {}", p.display()),
        None => verb.to_owned(),
    }
}

/// The text of a tool result message.
fn result_text(message: &Message) -> String {
    let mut out = String::new();
    for b in &message.content {
        match b {
            dsh_llm::ContentBlock::Text { text } => out.push_str(text),
            other => {
                if let Ok(v) = serde_json::to_value(other)
                    && let Some(t) = v.get("text").and_then(Value::as_str)
                {
                    out.push_str(t);
                }
            }
        }
    }
    out
}

/// The update that closes a tool card: completed or failed, with the output.
pub(crate) fn tool_result(result: &ToolResult) -> ToolCallUpdate {
    let failed = result.error.is_some() || result.message.is_error == Some(true);
    let text = result_text(&result.message);
    let call_id = result.message.tool_call_id.clone().unwrap_or_default();
    let fields = ToolCallUpdateFields::new()
        .status(if failed {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        })
        .content(vec![ToolCallContent::from(ContentBlock::Text(
            TextContent::new(text.clone()),
        ))])
        .raw_output(Some(Value::String(text)));
    ToolCallUpdate::new(call_id, fields)
}

/// How a turn's end answers `session/prompt`: `Err` carries the failure message.
pub(crate) fn stop_reason(
    reason: Option<&TurnEndReason>,
    cancelled: bool,
) -> Result<StopReason, String> {
    if cancelled {
        return Ok(StopReason::Cancelled);
    }
    match reason {
        Some(TurnEndReason::Completed) | Some(TurnEndReason::Blocked) => Ok(StopReason::EndTurn),
        Some(TurnEndReason::MaxTokens) => Ok(StopReason::MaxTokens),
        Some(TurnEndReason::Aborted { .. }) | Some(TurnEndReason::Interrupted) => {
            Ok(StopReason::Cancelled)
        }
        Some(TurnEndReason::Error { error }) => {
            Err(format!("turn failed: {}: {}", error.code, error.message))
        }
        // forked, and kinds this build does not know: the turn ended without a failure.
        Some(_) => Ok(StopReason::EndTurn),
        None => Err("the turn did not run".into()),
    }
}

/// The tool whose calls become `plan` updates.
pub(crate) const PLAN_TOOL: &str = "todo_write";

/// The `plan` update of a `todo_write` call (`{todos: [{content, status}]}`, the whole list,
/// as the original's schema says): one entry per todo, priority `medium` (the tool has none).
/// `None` when the arguments do not follow the schema (the tool itself reports that).
pub(crate) fn plan(call: &ToolCallEvent) -> Option<Plan> {
    if call.name != PLAN_TOOL {
        return None;
    }
    let args: Value = serde_json::from_str(&call.arguments).ok()?;
    let todos = args.get("todos")?.as_array()?;
    let mut entries = Vec::with_capacity(todos.len());
    for t in todos {
        let content = t.get("content")?.as_str()?;
        let status = match t.get("status")?.as_str()? {
            "pending" => PlanEntryStatus::Pending,
            "in_progress" => PlanEntryStatus::InProgress,
            "completed" => PlanEntryStatus::Completed,
            _ => return None,
        };
        entries.push(PlanEntry::new(content, PlanEntryPriority::Medium, status));
    }
    Some(Plan::new(entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ToolCallEvent {
        serde_json::from_value(serde_json::json!({
            "turn": 1, "step": 1, "callId": "c1", "name": name, "arguments": arguments
        }))
        .unwrap()
    }

    #[test]
    fn todo_write_calls_map_to_plan_entries() {
        let p = plan(&call(
            "todo_write",
            r#"{"todos":[{"content":"Read the code","status":"completed"},{"content":"Fix it","status":"in_progress"},{"content":"Test","status":"pending"}]}"#,
        ))
        .unwrap();
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(
            v["entries"],
            serde_json::json!([
                {"content":"Read the code","priority":"medium","status":"completed"},
                {"content":"Fix it","priority":"medium","status":"in_progress"},
                {"content":"Test","priority":"medium","status":"pending"}
            ])
        );
        assert!(
            plan(&call(
                "todo_write",
                r#"{"todos":[{"content":"x","status":"done"}]}"#
            ))
            .is_none()
        );
        assert!(plan(&call("todo_write", "not json")).is_none());
        assert!(plan(&call("bash", r#"{"todos":[]}"#)).is_none());
        assert_eq!(
            plan(&call("todo_write", r#"{"todos":[]}"#))
                .unwrap()
                .entries
                .len(),
            0
        );
    }
}
