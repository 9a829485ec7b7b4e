//! From the protocol's vocabulary to ACP `session/update` payloads: message and thought chunks,
//! tool cards (kind, title, locations, diffs) built from each call's [`ToolDisplay`] and their
//! results, plans from task lists, and the stop reason of a turn. Pure functions: no tool is
//! known here by name, and nothing here touches a session.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, ContentBlock, ContentChunk, Diff, Plan, PlanEntry,
    PlanEntryPriority, PlanEntryStatus, SessionUpdate, StopReason, TextContent, ToolCall,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind, UnstructuredCommandInput,
};
use dsh_protocol::{
    CommandInfo, ProtocolError, TodoItem, TodoStatus, ToolDisplay, ToolKind as DisplayKind,
    TurnEndReason,
};

/// A text chunk.
pub(crate) fn text_chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

/// The tool cards of one session: each call becomes a `tool_call` built from the display its
/// tool gives, its end the `tool_call_update` that closes it. A call whose display is a task
/// list (`todos`, or the `todo` kind) is no card: the session's task list arrives as a `plan`
/// ([`plan`]); its end closes nothing unless it failed.
pub(crate) struct Cards {
    cwd: PathBuf,
    /// Calls shown as cards.
    open: HashSet<String>,
    /// Task-list calls (no card), by id: their display, for a failure's card.
    plans: HashMap<String, ToolDisplay>,
    /// Output streamed so far by running calls.
    progress: HashMap<String, String>,
}

impl Cards {
    /// Cards with paths resolved against `cwd`.
    pub(crate) fn new(cwd: PathBuf) -> Self {
        Cards {
            cwd,
            open: HashSet::new(),
            plans: HashMap::new(),
            progress: HashMap::new(),
        }
    }

    /// The session's working directory changed.
    pub(crate) fn set_cwd(&mut self, cwd: PathBuf) {
        self.cwd = cwd;
    }

    /// The card of a call being shown (title, kind), for a permission request about it.
    pub(crate) fn title(&self, display: &ToolDisplay) -> String {
        title(display, &self.cwd)
    }

    /// The update of a call that began: its card, or nothing for a task-list call.
    pub(crate) fn began(&mut self, call_id: &str, display: &ToolDisplay) -> Option<SessionUpdate> {
        if is_task_list(display) {
            self.plans.insert(call_id.to_owned(), display.clone());
            return None;
        }
        self.open.insert(call_id.to_owned());
        Some(SessionUpdate::ToolCall(tool_call(
            call_id, display, &self.cwd,
        )))
    }

    /// The update of partial output of a running call: the output so far.
    pub(crate) fn progress(&mut self, call_id: &str, output: &str) -> Option<SessionUpdate> {
        if !self.open.contains(call_id) {
            return None;
        }
        let so_far = self.progress.entry(call_id.to_owned()).or_default();
        so_far.push_str(output);
        Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            call_id.to_owned(),
            ToolCallUpdateFields::new().content(vec![text_content(so_far.clone())]),
        )))
    }

    /// The updates closing a call: its card's `tool_call_update` (completed or failed, the
    /// output the display summarises, the title with the headline). A task-list call closes
    /// nothing, unless it failed: then its card appears, failed.
    pub(crate) fn ended(
        &mut self,
        call_id: &str,
        display: &ToolDisplay,
        failure: Option<Failure<'_>>,
    ) -> Vec<SessionUpdate> {
        let is_error = failure.is_some();
        self.progress.remove(call_id);
        let mut out = Vec::new();
        if let Some(began) = self.plans.remove(call_id) {
            if !is_error {
                return out;
            }
            out.push(SessionUpdate::ToolCall(tool_call(
                call_id, &began, &self.cwd,
            )));
        } else {
            self.open.remove(call_id);
        }
        out.push(SessionUpdate::ToolCallUpdate(tool_ended(
            call_id, display, failure, &self.cwd,
        )));
        out
    }
}

/// Whether a display is a task list (shown as the plan, not as a card).
fn is_task_list(display: &ToolDisplay) -> bool {
    display.todos.is_some() || display.kind == DisplayKind::Todo
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

fn text_content(text: String) -> ToolCallContent {
    ToolCallContent::from(ContentBlock::Text(TextContent::new(text)))
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
        content.push(text_content(text.join("\n")));
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
/// display's fields), locations.
pub(crate) fn tool_call(call_id: &str, display: &ToolDisplay, cwd: &Path) -> ToolCall {
    ToolCall::new(call_id.to_owned(), title(display, cwd))
        .kind(kind(display.kind))
        .status(ToolCallStatus::InProgress)
        .content(content(display, cwd))
        .locations(locations(display, cwd))
}

/// The output a card shows once its call ended: the display's output summary (the head or
/// tail the tool chose, with a note of what was left out), else its headline.
fn output_text(display: &ToolDisplay) -> String {
    let Some(o) = &display.output else {
        return String::new();
    };
    if o.text.is_empty() {
        return o.headline.clone().unwrap_or_default();
    }
    if !o.truncated {
        return o.text.clone();
    }
    let note = match o.lines {
        Some(n) => format!("[{n} lines in all]"),
        None => "[output truncated]".to_owned(),
    };
    if o.tail {
        format!("{note}\n{}", o.text)
    } else {
        format!("{}\n{note}", o.text)
    }
}

/// How a call failed, as its end says.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Failure<'a> {
    /// The error's code.
    pub(crate) code: Option<&'a str>,
    /// The first line of the error result.
    pub(crate) message: Option<&'a str>,
}

impl Failure<'_> {
    /// What the card says went wrong: `CODE: message`, either alone, or `failed`.
    fn text(&self) -> String {
        match (self.code, self.message.filter(|m| !m.is_empty())) {
            (Some(c), Some(m)) if !m.contains(c) => format!("{c}: {m}"),
            (_, Some(m)) => m.to_owned(),
            (Some(c), None) => c.to_owned(),
            (None, None) => "failed".to_owned(),
        }
    }
}

/// The update that closes a tool card: completed or failed, the output (for a failed call
/// whose display shows no output: what went wrong), the title and kind once more from the
/// ended call's display (its headline).
pub(crate) fn tool_ended(
    call_id: &str,
    display: &ToolDisplay,
    failure: Option<Failure<'_>>,
    cwd: &Path,
) -> ToolCallUpdate {
    let mut text = output_text(display);
    if let Some(f) = &failure
        && text.is_empty()
    {
        text = f.text();
    }
    let fields = ToolCallUpdateFields::new()
        .status(if failure.is_some() {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        })
        .content(vec![text_content(text.clone())])
        .raw_output(Some(serde_json::Value::String(text)))
        .title(title(display, cwd))
        .kind(kind(display.kind));
    ToolCallUpdate::new(call_id.to_owned(), fields)
}

/// Why a prompt's turn answers `session/prompt` with an error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TurnFailure {
    /// The turn ended on a failure.
    #[error("turn failed: {}: {}", .0.code, .0.message)]
    Failed(ProtocolError),
    /// No turn end was seen (the session closed first).
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
        Some(TurnEndReason::Aborted) | Some(TurnEndReason::Interrupted) => {
            Ok(StopReason::Cancelled)
        }
        Some(TurnEndReason::Error { error }) => Err(TurnFailure::Failed(error.clone())),
        // forked, and reasons this build does not know: the turn ended without a failure.
        Some(TurnEndReason::Forked) | Some(TurnEndReason::Other { .. }) => Ok(StopReason::EndTurn),
        None => Err(TurnFailure::NotRun),
    }
}

/// The `plan` update of a task list: one entry per task, priority `medium` (tasks have none).
pub(crate) fn plan(items: &[TodoItem]) -> Plan {
    let entries = items
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
    Plan::new(entries)
}

/// The slash commands of a session as ACP's available commands.
pub(crate) fn commands(commands: &[CommandInfo]) -> Vec<AvailableCommand> {
    commands
        .iter()
        .map(|c| {
            let mut a = AvailableCommand::new(c.name.clone(), c.description.clone());
            if let Some(hint) = &c.argument_hint {
                a = a.input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(hint.clone()),
                ));
            }
            a
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use dsh_kernel::{Kernel, PluginRegistry};
    use dsh_tools::{
        DisplayInput, DisplayResult, Tool, ToolContext, ToolError, ToolOutput, Tools, ToolsConfig,
        ToolsPlugin,
    };
    use futures::future::BoxFuture;
    use serde_json::{Value, json};

    /// The display `tools` give a call of `name` with `arguments` (ended with `result`).
    fn shown(
        tools: &dyn Tools,
        name: &str,
        arguments: &str,
        result: Option<(&str, bool)>,
    ) -> ToolDisplay {
        let input = DisplayInput::new(name, arguments);
        match result {
            None => tools.display(None, &input),
            Some((text, is_error)) => tools.display(
                None,
                &input.with_result(DisplayResult {
                    text,
                    is_error,
                    error_code: None,
                    meta: None,
                }),
            ),
        }
    }

    /// `todo_write`'s own display (the test's tool set), any other tool the generic one.
    fn plan_of(name: &str, arguments: &str) -> Option<Plan> {
        let input = DisplayInput::new(name, arguments);
        let display = match name {
            "todo_write" => dsh_tool_todo::display(&input),
            _ => dsh_tools::generic_display(&input),
        };
        display.todos.as_deref().map(plan)
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
            if let Some(r) = call.succeeded() {
                d = d.with_output(dsh_protocol::OutputSummary {
                    text: r.text.to_owned(),
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

    fn cards() -> Cards {
        Cards::new(PathBuf::from("/work"))
    }

    #[tokio::test]
    async fn a_tool_defined_here_shows_its_own_kind_title_diff_and_location() {
        let (kernel, tools) = tools().await;
        let mut cards = cards();
        let args = r#"{"file":"src/a.rs","line":7,"old":"let a = 1;\n","new":"let a = 2;\n"}"#;
        let began = shown(&*tools, "patch_line", args, None);
        let Some(SessionUpdate::ToolCall(card)) = cards.began("c1", &began) else {
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
        let ended = shown(&*tools, "patch_line", args, Some(("patched", false)));
        let [SessionUpdate::ToolCallUpdate(update)] = &cards.ended("c1", &ended, None)[..] else {
            panic!("no update");
        };
        let v = serde_json::to_value(update).unwrap();
        assert_eq!(v["status"], "completed");
        assert_eq!(v["title"], "Patch /work/src/a.rs (1 line)");
        assert_eq!(v["content"][0]["content"]["text"], "patched");
        kernel.dispose().await;
    }

    #[tokio::test]
    async fn an_unknown_tool_gets_the_generic_card() {
        let (kernel, tools) = tools().await;
        let mut cards = cards();
        let began = shown(&*tools, "mcp__gone__lookup", r#"{"id": 7}"#, None);
        let Some(SessionUpdate::ToolCall(card)) = cards.began("c1", &began) else {
            panic!("not a tool call");
        };
        let v = serde_json::to_value(&card).unwrap();
        // `other` is ACP's default kind: left out of the JSON.
        assert!(v.get("kind").is_none_or(|k| k == "other"), "{v}");
        assert_eq!(v["title"], r#"mcp__gone__lookup {"id":7}"#);
        assert!(v.get("locations").is_none_or(|l| l == &json!([])), "{v}");
        assert!(v.get("content").is_none_or(|c| c == &json!([])), "{v}");
        let ended = shown(
            &*tools,
            "mcp__gone__lookup",
            r#"{"id": 7}"#,
            Some(("Error: gone", true)),
        );
        let failure = Failure {
            code: Some("MCP_TOOL_ERROR"),
            message: Some("Error: gone"),
        };
        let [SessionUpdate::ToolCallUpdate(update)] = &cards.ended("c1", &ended, Some(failure))[..]
        else {
            panic!("no update");
        };
        let v = serde_json::to_value(update).unwrap();
        assert_eq!(v["status"], "failed");
        // The generic display shows no output of a failure: the card says what went wrong.
        assert_eq!(
            v["content"][0]["content"]["text"],
            "MCP_TOOL_ERROR: Error: gone"
        );
        kernel.dispose().await;
    }
}
