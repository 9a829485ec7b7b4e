//! A tool defined here, which dsh-acp has never heard of, shows in ACP as its own display says:
//! kind, title, diff, location and fields on the card, the headline and output when it ends.

use dsh_protocol::{FileDiff, OutputSummary, ToolDisplay, ToolKind};
use dsh_test_harness::{Script, TestHarness, calls, text};
use dsh_tools::{DisplayInput, Tool, ToolContext, ToolError, ToolOutput};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::inproc::{Acp, updates};

/// Replaces one line of a file (pretends to: the test needs its display only).
struct PatchLine {
    parameters: Value,
}

impl PatchLine {
    fn new() -> Self {
        PatchLine {
            parameters: json!({"type": "object", "properties": {
                "file": {"type": "string"}, "line": {"type": "number"},
                "old": {"type": "string"}, "new": {"type": "string"}}}),
        }
    }
}

#[derive(serde::Deserialize)]
struct Args {
    file: String,
    line: u64,
    old: String,
    new: String,
}

impl Tool for PatchLine {
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
        Box::pin(async { Ok(ToolOutput::text("patched line 7")) })
    }
    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        let mut d = ToolDisplay::new(ToolKind::Edit, "Patch");
        if let Some(a) = call.parse::<Args>() {
            d = d
                .with_subject(a.file.clone())
                .with_location(a.file.clone(), Some(a.line))
                .with_diff(FileDiff {
                    path: a.file,
                    old_text: Some(a.old),
                    new_text: a.new,
                })
                .with_field("line", a.line.to_string());
        }
        if let Some(r) = call.succeeded() {
            d = d.with_output(OutputSummary {
                text: r.text.to_owned(),
                headline: Some("1 line".into()),
                ..Default::default()
            });
        }
        d
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_defined_in_a_test_crate_shows_with_its_own_display() {
    let args = r#"{"file":"src/a.rs","line":7,"old":"let a = 1;\n","new":"let a = 2;\n"}"#;
    let h = TestHarness::builder()
        .tool(PatchLine::new())
        .script(Script::Chunks(calls(&[("p1", "patch_line", args)])))
        .script(Script::Chunks(text("patched")))
        .build()
        .await;
    let cwd = h.dir().to_path_buf();
    let mut acp = Acp::start(&h);
    let session = acp.open(&cwd).await;
    let frames = acp
        .request(
            2,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "patch it"}]}),
        )
        .await;
    assert_eq!(
        frames.last().unwrap()["result"]["stopReason"],
        "end_turn",
        "{frames:#?}"
    );
    let updates = updates(&frames);
    let card = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap_or_else(|| panic!("no tool card: {updates:#?}"));
    let file = cwd.join("src/a.rs").display().to_string();
    assert_eq!(card["toolCallId"], "p1");
    assert_eq!(card["kind"], "edit");
    assert_eq!(card["title"], format!("Patch {file}"));
    assert_eq!(card["status"], "in_progress");
    assert_eq!(card["locations"], json!([{"path": file, "line": 7}]));
    assert_eq!(
        card["content"],
        json!([
            {"type": "diff", "path": file, "oldText": "let a = 1;\n", "newText": "let a = 2;\n"},
            {"type": "content", "content": {"type": "text", "text": "line: 7"}}
        ])
    );
    let done = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "p1")
        .unwrap_or_else(|| panic!("no end of the card: {updates:#?}"));
    assert_eq!(done["status"], "completed");
    assert_eq!(done["title"], format!("Patch {file} (1 line)"));
    assert_eq!(done["content"][0]["content"]["text"], "patched line 7");
    let answer: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(answer, "patched");
    acp.close().await;
    h.dispose().await;
}
