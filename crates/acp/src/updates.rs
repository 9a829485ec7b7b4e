//! From dsh's vocabulary to ACP `session/update` payloads: message and thought chunks, tool cards
//! (kind, title, locations, diffs) and their results, and the stop reason of a turn.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionUpdate, StopReason, TextContent, ToolCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use dsh_llm::LlmFailure;
use dsh_llm::Message;
use dsh_protocol::{TodoStatus, ToolDisplay, ToolKind as DisplayKind};
use dsh_session::data::{ToolCallEvent, ToolResult, TurnEndReason};
use dsh_tools::{DisplayInput, DisplayResult};
use serde_json::Value;

/// A text chunk.
pub(crate) fn text_chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

/// Describes a call (the session's tools: `dsh_tools::Tools::display`).
pub(crate) type Displayer = Box<dyn Fn(&DisplayInput<'_>) -> ToolDisplay + Send + Sync>;

/// The tool cards of one session: each call becomes a `tool_call` (or a `plan` when its
/// display carries a task list), its result the `tool_call_update` that closes it; both from
/// the display the tool gives, so no tool is known here by name.
pub(crate) struct Cards {
    display: Displayer,
    cwd: PathBuf,
    /// Calls shown, by id: their name and arguments (the result's display needs them).
    open: HashMap<String, (String, dsh_llm::ToolArguments)>,
    /// Calls shown as a plan: their result closes no card.
    plans: HashSet<String>,
}

impl Cards {
    /// Cards described by `display`, paths resolved against `cwd`.
    pub(crate) fn new(display: Displayer, cwd: PathBuf) -> Self {
        Cards {
            display,
            cwd,
            open: HashMap::new(),
            plans: HashSet::new(),
        }
    }

    /// The update of a call: a `plan` for a call whose display is a task list, else its card.
    pub(crate) fn call(&mut self, call: &ToolCallEvent) -> SessionUpdate {
        let display = (self.display)(&DisplayInput::new(&call.name, &call.arguments));
        if let Some(plan) = plan(&display) {
            self.plans.insert(call.call_id.clone());
            return SessionUpdate::Plan(plan);
        }
        self.open.insert(
            call.call_id.clone(),
            (call.name.clone(), call.arguments.clone()),
        );
        SessionUpdate::ToolCall(tool_call(call, &display, &self.cwd))
    }

    /// The update closing a call's card (none for a call shown as a plan).
    pub(crate) fn result(&mut self, result: &ToolResult) -> Option<SessionUpdate> {
        let id = result.message.tool_call_id.clone().unwrap_or_default();
        if self.plans.remove(&id) {
            return None;
        }
        let display = self.open.remove(&id).map(|(name, arguments)| {
            let text = result_text(&result.message);
            let meta = result
                .meta
                .as_ref()
                .map(dsh_session::data::ToolMeta::to_value);
            let code = result.error.as_ref().map(|e| e.code.to_string());
            let ended = DisplayResult {
                text: &text,
                is_error: failed(result),
                error_code: code.as_deref(),
                meta: meta.as_ref(),
            };
            (self.display)(&DisplayInput::new(&name, &arguments).with_result(ended))
        });
        Some(SessionUpdate::ToolCallUpdate(tool_result(
            result,
            display.as_ref(),
            &self.cwd,
        )))
    }
}

/// ACP's kind of a display kind.
fn kind(kind: DisplayKind) -> ToolKind {
    match kind {
        DisplayKind::Shell => ToolKind::Execute,
        DisplayKind::Edit | DisplayKind::Write => ToolKind::Edit,
        DisplayKind::Read => ToolKind::Read,
        DisplayKind::Search => ToolKind::Search,
        DisplayKind::Fetch => ToolKind::Fetch,
        DisplayKind::Plan => ToolKind::SwitchMode,
        DisplayKind::Agent | DisplayKind::Todo | DisplayKind::Mcp | DisplayKind::Other => {
            ToolKind::Other
        }
    }
}

/// `path` resolved against `cwd` (ACP wants absolute paths).
fn absolute(cwd: &Path, path: &str) -> PathBuf {
    let p = PathBuf::from(path);
    if p.is_absolute() { p } else { cwd.join(p) }
}

/// The card's title: a command as it is, else the display's title and subject (a path the
/// call touches made absolute), with the result's headline once it ended.
fn title(display: &ToolDisplay, cwd: &Path) -> String {
    let subject = display
        .subject
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|s| {
            if display.locations.iter().any(|l| l.path == s) {
                absolute(cwd, s).display().to_string()
            } else {
                s.to_owned()
            }
        });
    let mut title = match (display.kind, subject) {
        (DisplayKind::Shell, Some(command)) => command,
        (_, Some(subject)) => format!("{} {subject}", display.title),
        (_, None) => display.title.clone(),
    };
    if let Some(h) = display.output.as_ref().and_then(|o| o.headline.as_deref()) {
        title.push_str(&format!(" ({h})"));
    }
    title
}

/// The content a display shows before any output: the diff, the plan, the labelled fields.
fn content(display: &ToolDisplay, cwd: &Path) -> Vec<ToolCallContent> {
    let mut content = Vec::new();
    if let Some(d) = &display.diff {
        content.push(ToolCallContent::Diff(
            Diff::new(absolute(cwd, &d.path), d.new_text.clone()).old_text(d.old_text.clone()),
        ));
    }
    let mut text: Vec<String> = Vec::new();
    if let Some(plan) = &display.plan {
        text.push(plan.clone());
    }
    text.extend(
        display
            .fields
            .iter()
            .map(|f| format!("{}: {}", f.label, f.value)),
    );
    if !text.is_empty() {
        content.push(ToolCallContent::from(ContentBlock::Text(TextContent::new(
            text.join("\n"),
        ))));
    }
    content
}

fn locations(display: &ToolDisplay, cwd: &Path) -> Vec<ToolCallLocation> {
    display
        .locations
        .iter()
        .map(|l| {
            ToolCallLocation::new(absolute(cwd, &l.path))
                .line(l.line.and_then(|n| u32::try_from(n).ok()))
        })
        .collect()
}

/// The tool card of a call, from its display: kind, title, content (a diff, a plan, the
/// display's fields), locations; the arguments as the raw input.
pub(crate) fn tool_call(call: &ToolCallEvent, display: &ToolDisplay, cwd: &Path) -> ToolCall {
    let args: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
    ToolCall::new(call.call_id.clone(), title(display, cwd))
        .kind(kind(display.kind))
        .status(ToolCallStatus::InProgress)
        .raw_input(Some(args))
        .content(content(display, cwd))
        .locations(locations(display, cwd))
}

fn failed(result: &ToolResult) -> bool {
    result.error.is_some() || result.message.is_error == Some(true)
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

/// The update that closes a tool card: completed or failed, with the output; the title once
/// more from the ended call's display (its headline), when it is known.
pub(crate) fn tool_result(
    result: &ToolResult,
    display: Option<&ToolDisplay>,
    cwd: &Path,
) -> ToolCallUpdate {
    let text = result_text(&result.message);
    let call_id = result.message.tool_call_id.clone().unwrap_or_default();
    let mut fields = ToolCallUpdateFields::new()
        .status(if failed(result) {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        })
        .content(vec![ToolCallContent::from(ContentBlock::Text(
            TextContent::new(text.clone()),
        ))])
        .raw_output(Some(Value::String(text)));
    if let Some(d) = display {
        fields = fields.title(title(d, cwd)).kind(kind(d.kind));
    }
    ToolCallUpdate::new(call_id, fields)
}

/// Why a prompt's turn answers `session/prompt` with an error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TurnFailure {
    /// The turn ended on a failure.
    #[error("turn failed: {}: {}", .0.code, .0.message)]
    Failed(LlmFailure),
    /// No turn end was logged.
    #[error("the turn did not run")]
    NotRun,
}

/// How a turn's end answers `session/prompt`: `Err` says why it failed.
pub(crate) fn stop_reason(
    reason: Option<&TurnEndReason>,
    cancelled: bool,
) -> Result<StopReason, TurnFailure> {
    if cancelled {
        return Ok(StopReason::Cancelled);
    }
    match reason {
        Some(TurnEndReason::Completed) | Some(TurnEndReason::Blocked) => Ok(StopReason::EndTurn),
        Some(TurnEndReason::MaxTokens) => Ok(StopReason::MaxTokens),
        Some(TurnEndReason::Aborted { .. }) | Some(TurnEndReason::Interrupted) => {
            Ok(StopReason::Cancelled)
        }
        Some(TurnEndReason::Error { error }) => Err(TurnFailure::Failed(error.clone())),
        // forked, and kinds this build does not know: the turn ended without a failure.
        Some(_) => Ok(StopReason::EndTurn),
        None => Err(TurnFailure::NotRun),
    }
}

/// The `plan` update of a call whose display is a task list (`todo_write`'s): one entry per
/// task, priority `medium` (tasks have none). `None` for any other display.
pub(crate) fn plan(display: &ToolDisplay) -> Option<Plan> {
    let todos = display.todos.as_ref()?;
    let entries = todos
        .iter()
        .map(|t| {
            let status = match t.status {
                TodoStatus::Pending => PlanEntryStatus::Pending,
                TodoStatus::InProgress => PlanEntryStatus::InProgress,
                TodoStatus::Completed => PlanEntryStatus::Completed,
            };
            PlanEntry::new(t.content.clone(), PlanEntryPriority::Medium, status)
        })
        .collect();
    Some(Plan::new(entries))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use dsh_kernel::{Kernel, PluginRegistry};
    use dsh_tools::{Tool, ToolContext, ToolError, ToolOutput, Tools, ToolsConfig, ToolsPlugin};
    use futures::future::BoxFuture;
    use serde_json::json;

    fn call(name: &str, arguments: &str) -> ToolCallEvent {
        serde_json::from_value(serde_json::json!({
            "turn": 1, "step": 1, "callId": "c1", "name": name, "arguments": arguments
        }))
        .unwrap()
    }

    fn result(text: &str, is_error: bool, meta: Option<Value>) -> ToolResult {
        let mut r = json!({
            "turn": 1, "step": 1,
            "message": {"role": "tool", "content": [{"type": "text", "text": text}],
                        "source": {"kind": "tool", "callId": "c1"}, "id": "r1",
                        "toolCallId": "c1", "isError": is_error}
        });
        if let Some(m) = meta {
            r["meta"] = m;
        }
        serde_json::from_value(r).unwrap()
    }

    /// `todo_write`'s own display (the test's tool set), any other tool the generic one.
    fn plan_of(name: &str, arguments: &str) -> Option<Plan> {
        let c = call(name, arguments);
        let input = DisplayInput::new(&c.name, &c.arguments);
        let display = match name {
            "todo_write" => dsh_tool_todo::display(&input),
            _ => dsh_tools::generic_display(&input),
        };
        plan(&display)
    }

    #[test]
    fn todo_write_calls_map_to_plan_entries() {
        let p = plan_of(
            "todo_write",
            r#"{"todos":[{"content":"Read the code","status":"completed"},{"content":"Fix it","status":"in_progress"},{"content":"Test","status":"pending"}]}"#,
        )
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
            plan_of(
                "todo_write",
                r#"{"todos":[{"content":"x","status":"done"}]}"#
            )
            .is_none()
        );
        assert!(plan_of("todo_write", "not json").is_none());
        assert!(plan_of("bash", r#"{"todos":[]}"#).is_none());
        assert_eq!(
            plan_of("todo_write", r#"{"todos":[]}"#)
                .unwrap()
                .entries
                .len(),
            0
        );
    }

    /// A tool this crate has never heard of, describing its own calls: it replaces a line of
    /// a file.
    struct Patch {
        parameters: Value,
    }

    impl Tool for Patch {
        fn name(&self) -> &str {
            "patch_line"
        }
        fn description(&self) -> &str {
            "Replace one line of a file."
        }
        fn parameters(&self) -> &Value {
            &self.parameters
        }
        fn execute<'a>(
            &'a self,
            _ctx: ToolContext,
            _args: Value,
        ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
            Box::pin(async { Ok(ToolOutput::text("patched")) })
        }
        fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
            #[derive(serde::Deserialize)]
            struct Args {
                file: String,
                line: u64,
                old: String,
                new: String,
            }
            let mut d = ToolDisplay::new(DisplayKind::Edit, "Patch");
            if let Some(a) = call.parse::<Args>() {
                d = d
                    .with_subject(a.file.clone())
                    .with_location(a.file.clone(), Some(a.line))
                    .with_diff(dsh_protocol::FileDiff {
                        path: a.file,
                        old_text: Some(a.old),
                        new_text: a.new,
                    })
                    .with_field("line", a.line.to_string());
            }
            if call.succeeded().is_some() {
                d = d.with_output(dsh_protocol::OutputSummary {
                    headline: Some("1 line".into()),
                    ..Default::default()
                });
            }
            d
        }
    }

    async fn tools() -> (Kernel, Arc<dyn Tools>) {
        let mut reg = PluginRegistry::new();
        reg.register::<ToolsPlugin>();
        let kernel = Kernel::new(reg);
        kernel
            .mount_plugin::<ToolsPlugin>(ToolsConfig::default())
            .unwrap()
            .ready()
            .await
            .unwrap();
        let root = kernel.root();
        let tools = root.get::<dyn Tools>().unwrap();
        let parameters = json!({"type": "object", "properties": {
            "file": {"type": "string"}, "line": {"type": "number"},
            "old": {"type": "string"}, "new": {"type": "string"}}});
        tools
            .register(&root, Arc::new(Patch { parameters }))
            .unwrap();
        (kernel, tools)
    }

    fn cards(tools: Arc<dyn Tools>) -> Cards {
        Cards::new(
            Box::new(move |c| tools.display(None, c)),
            PathBuf::from("/work"),
        )
    }

    #[tokio::test]
    async fn a_tool_defined_here_shows_its_own_kind_title_diff_and_location() {
        let (kernel, tools) = tools().await;
        let mut cards = cards(tools);
        let args = r#"{"file":"src/a.rs","line":7,"old":"let a = 1;\n","new":"let a = 2;\n"}"#;
        let SessionUpdate::ToolCall(card) = cards.call(&call("patch_line", args)) else {
            panic!("not a tool call");
        };
        let v = serde_json::to_value(&card).unwrap();
        assert_eq!(v["kind"], "edit");
        assert_eq!(v["title"], "Patch /work/src/a.rs");
        assert_eq!(v["status"], "in_progress");
        assert_eq!(
            v["locations"],
            json!([{"path": "/work/src/a.rs", "line": 7}])
        );
        assert_eq!(
            v["content"],
            json!([
                {"type": "diff", "path": "/work/src/a.rs", "oldText": "let a = 1;\n", "newText": "let a = 2;\n"},
                {"type": "content", "content": {"type": "text", "text": "line: 7"}}
            ])
        );
        let Some(SessionUpdate::ToolCallUpdate(update)) =
            cards.result(&result("patched", false, None))
        else {
            panic!("no update");
        };
        let v = serde_json::to_value(&update).unwrap();
        assert_eq!(v["status"], "completed");
        assert_eq!(v["title"], "Patch /work/src/a.rs (1 line)");
        assert_eq!(v["content"][0]["content"]["text"], "patched");
        kernel.dispose().await;
    }

    #[tokio::test]
    async fn an_unknown_tool_gets_the_generic_card() {
        let (kernel, tools) = tools().await;
        let mut cards = cards(tools);
        let SessionUpdate::ToolCall(card) = cards.call(&call("mcp__gone__lookup", r#"{"id": 7}"#))
        else {
            panic!("not a tool call");
        };
        let v = serde_json::to_value(&card).unwrap();
        // `other` is ACP's default kind: left out of the JSON.
        assert!(v.get("kind").is_none_or(|k| k == "other"), "{v}");
        assert_eq!(v["title"], r#"mcp__gone__lookup {"id":7}"#);
        assert!(v.get("locations").is_none_or(|l| l == &json!([])), "{v}");
        assert!(v.get("content").is_none_or(|c| c == &json!([])), "{v}");
        let Some(SessionUpdate::ToolCallUpdate(update)) =
            cards.result(&result("Error: gone", true, None))
        else {
            panic!("no update");
        };
        let v = serde_json::to_value(&update).unwrap();
        assert_eq!(v["status"], "failed");
        kernel.dispose().await;
    }
}
