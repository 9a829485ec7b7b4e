//! `todo_write` through the real tools pipeline and agent loop, with a scripted model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_agent::Agent;
use dsh_session::feature::{TodoStatus, TodoWrite};
use dsh_test_harness::TestHarness;
use dsh_tool_todo::{TodoToolConfig, TodoToolPlugin, checklist, latest};
use dsh_tools::ToolRequest;
use serde_json::json;

async fn harness(config: TodoToolConfig) -> TestHarness {
    TestHarness::builder()
        .plugin::<TodoToolPlugin>(config)
        .build()
        .await
}

/// One turn: the model calls `todo_write` with `args`, then answers "ok". Returns the tool
/// result's text as the second request carried it.
async fn write(h: &TestHarness, agent: &Arc<dyn Agent>, args: serde_json::Value) -> String {
    let args = args.to_string();
    let call: &[_] = &[("c1", "todo_write", args.as_str())];
    h.tool_turn(agent, &[call], "ok").await.pop().unwrap()
}

fn todos(agent: &Arc<dyn Agent>) -> Option<TodoWrite> {
    latest(&agent.session().events())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_updated_over_three_calls_is_logged_and_latest_wins() {
    let h = harness(TodoToolConfig::default()).await;
    let agent = h.agent().await;
    let r = write(
        &h,
        &agent,
        json!({"todos": [
            {"content": "read the code", "status": "in_progress"},
            {"content": "  fix the bug ", "status": "pending"},
            {"content": "run the tests", "status": "pending"}
        ]}),
    )
    .await;
    assert!(
        r.contains("Updated todo list: 2 pending, 1 in progress, 0 completed."),
        "{r}"
    );
    let first = todos(&agent).unwrap();
    assert_eq!(first.todos[1].content, "fix the bug", "content is trimmed");
    write(
        &h,
        &agent,
        json!({"todos": [
            {"content": "read the code", "status": "completed"},
            {"content": "fix the bug", "status": "in_progress"},
            {"content": "run the tests", "status": "pending"}
        ]}),
    )
    .await;
    let r = write(
        &h,
        &agent,
        json!({"todos": [
            {"content": "read the code", "status": "completed"},
            {"content": "fix the bug", "status": "completed"},
            {"content": "run the tests", "status": "completed"}
        ]}),
    )
    .await;
    assert!(
        r.contains("Updated todo list: 0 pending, 0 in progress, 3 completed."),
        "{r}"
    );
    let last = todos(&agent).unwrap();
    assert!(last.todos.iter().all(|t| t.status == TodoStatus::Completed));
    assert_eq!(
        checklist(&last.todos),
        "[x] read the code\n[x] fix the bug\n[x] run the tests"
    );
    // Each list sits between its call and its result.
    let kinds: Vec<String> = agent
        .session()
        .events()
        .iter()
        .map(|e| e.kind().to_owned())
        .collect();
    let writes: Vec<usize> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| *k == "todo/write")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(writes.len(), 3);
    for w in writes {
        assert_eq!(kinds[w - 1], "tool/call");
        assert_eq!(kinds[w + 1], "tool/result");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_lists_are_refused_and_keep_the_previous_one() {
    let h = harness(TodoToolConfig {
        allow_parallel_in_progress: false,
    })
    .await;
    let agent = h.agent().await;
    write(
        &h,
        &agent,
        json!({"todos": [{"content": "a", "status": "pending"}]}),
    )
    .await;
    let cases = [
        (
            json!({"todos": [{"content": "  ", "status": "pending"}]}),
            "invalid todo: `content` must be a non-empty string",
        ),
        (
            json!({"todos": [{"content": "x", "status": "pending"}, {"content": " x", "status": "completed"}]}),
            "invalid todos: duplicate content \\\"x\\\"",
        ),
        (
            json!({"todos": [{"content": "x", "status": "in_progress"}, {"content": "y", "status": "in_progress"}]}),
            "invalid todos: at most one task may be in_progress (got 2)",
        ),
        (
            json!({"todos": [{"content": "x", "status": "done"}]}),
            "invalid arguments",
        ),
        (
            json!({"todos": [{"content": "x", "status": "pending", "extra": 1}]}),
            "invalid arguments",
        ),
        (json!({}), "invalid arguments"),
    ];
    for (args, want) in cases {
        let r = write(&h, &agent, args.clone()).await;
        assert!(r.contains(want), "{args}: {r}");
        assert!(r.contains("\"isError\":true"), "{r}");
    }
    let kept = todos(&agent).unwrap();
    assert_eq!(kept.todos.len(), 1);
    assert_eq!(kept.todos[0].content, "a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_without_an_agent_fails_clearly_and_the_schema_is_the_originals() {
    let h = harness(TodoToolConfig::default()).await;
    let tools = h.tools();
    let r = tools
        .execute(ToolRequest::new(
            "c",
            "todo_write",
            r#"{"todos":[]}"#,
            "nobody",
            std::env::temp_dir(),
        ))
        .await;
    assert!(r.is_error);
    assert_eq!(
        r.text(),
        "Error: todo_write requires an owning agent session"
    );
    let spec = tools
        .schemas(None)
        .into_iter()
        .find(|s| s.name == "todo_write")
        .unwrap();
    let mut p = (*spec.parameters).clone();
    p["properties"]["todos"]
        .as_object_mut()
        .unwrap()
        .remove("description");
    assert_eq!(
        serde_json::to_string(&p).unwrap(),
        r#"{"type":"object","properties":{"todos":{"type":"array","items":{"type":"object","additionalProperties":false,"properties":{"content":{"type":"string"},"status":{"type":"string","enum":["pending","in_progress","completed"]}},"required":["content","status"]}}},"required":["todos"]}"#
    );
}
