//! The harness itself: what the builder mounts, the shared steps, the on-disk store.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_agent::events::InboxInserted;
use dsh_test_harness::{Script, TestHarness, data_of, drain, kinds, last_data, next, text};
use dsh_tools::{FnTool, ToolOutput, ToolTimeoutPlugin};
use serde_json::json;

fn echo() -> FnTool {
    FnTool::new(
        "echo",
        "Echoes `say`.",
        json!({"type":"object","properties":{"say":{"type":"string"}},"required":["say"]}),
        |_ctx, args| async move { Ok(ToolOutput::text(format!("echo {}", args["say"]))) },
    )
}

/// A tool that waits until its call is cancelled.
fn hang() -> FnTool {
    FnTool::new(
        "hang",
        "Waits until cancelled.",
        json!({"type":"object","properties":{}}),
        |ctx, _args| async move {
            ctx.cancel_token().cancelled().await;
            Ok(ToolOutput::text("cancelled"))
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_turn_returns_each_steps_results_and_commits_the_calls() {
    let h = TestHarness::builder().tool(echo()).build().await;
    let agent = h.agent().await;
    assert_eq!(agent.options().cwd, h.dir());
    assert!(h.dir().is_dir());
    let mut inserted = h.on::<InboxInserted, _>(|e| e.message.text());
    let r = h
        .tool_turn(
            &agent,
            &[
                &[
                    ("c1", "echo", r#"{"say":"a"}"#),
                    ("c2", "echo", r#"{"say":"b"}"#),
                ],
                &[("c3", "missing", "{}")],
            ],
            "done",
        )
        .await;
    assert_eq!(next(&mut inserted).await, "go");
    assert_eq!(r.len(), 3);
    assert!(r[0].contains(r#"echo \"a\""#), "{}", r[0]);
    assert!(r[1].contains(r#"echo \"b\""#), "{}", r[1]);
    assert!(r[2].contains("\"isError\":true"), "{}", r[2]);
    assert_eq!(h.llm.request_count(), 3);
    assert_eq!(data_of(&agent, "tool/call").len(), 3);
    assert_eq!(kinds(&agent).iter().filter(|k| *k == "turn/end").count(), 1);
    assert_eq!(
        last_data(&agent, "turn/end")["reason"],
        json!({"kind": "completed"})
    );
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builder_scripts_are_answered_first_and_committed_kinds_stream() {
    let h = TestHarness::builder()
        .script(Script::Chunks(text("first")))
        .build()
        .await;
    let mut committed = h.committed_kinds();
    let agent = h.agent().await;
    h.prompt(&agent, "one").await;
    h.reply(&agent, "two", "second").await;
    let answers: Vec<String> = h
        .llm
        .requests()
        .iter()
        .map(|r| r.messages.last().unwrap().text())
        .collect();
    assert_eq!(answers, ["one", "two"]);
    let last = h.llm.messages(1);
    assert!(last.iter().any(|m| m.contains("first")), "{last:?}");
    assert_eq!(drain(&mut committed), kinds(&agent));
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_configured_plugin_is_mounted_with_its_config() {
    let h = TestHarness::builder()
        .plugin_json::<ToolTimeoutPlugin>(json!({"defaultMs": 20}))
        .tool(hang())
        .build()
        .await;
    assert_eq!(h.fiber("tool-timeout").name(), "tool-timeout");
    let agent = h.agent().await;
    let r = h.tool_turn(&agent, &[&[("c1", "hang", "{}")]], "ok").await;
    assert!(r[0].contains("tool call timed out after 20ms"), "{}", r[0]);
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_patches_layer_as_the_binarys_files_do() {
    let h = TestHarness::builder()
        .register::<ToolTimeoutPlugin>()
        .config_patch("plugins:\n  - name: tool-timeout\n    config: { defaultMs: 20 }\n")
        .config_patch("plugins:\n  - id: tool-timeout\n    name: tool-timeout\n    config: { defaultMs: 30 }\n")
        .tool(hang())
        .build()
        .await;
    let agent = h.agent().await;
    let r = h.tool_turn(&agent, &[&[("c1", "hang", "{}")]], "ok").await;
    assert!(r[0].contains("tool call timed out after 30ms"), "{}", r[0]);
    h.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "plugin `tool-timeout`")]
async fn a_config_the_plugin_refuses_fails_the_build_naming_it() {
    TestHarness::builder()
        .plugin_json::<ToolTimeoutPlugin>(json!({"defaultMillis": 20}))
        .build()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_disk_session_is_resumed_by_a_second_harness() {
    let first = TestHarness::builder().on_disk().build().await;
    let root = first.store_root().unwrap().to_path_buf();
    let agent = first.agent().await;
    let id = agent.session().id().to_owned();
    first.reply(&agent, "remember 42", "noted").await;
    first.dispose().await;
    assert!(root.is_dir());

    let second = TestHarness::builder().on_disk_at(&root).build().await;
    let resumed = second.resume(&id).await;
    second.reply(&resumed, "what was it?", "42").await;
    let sent = second.llm.messages(0);
    assert!(sent.iter().any(|m| m.contains("remember 42")), "{sent:?}");
    assert!(sent.iter().any(|m| m.contains("noted")), "{sent:?}");
    assert_eq!(
        kinds(&resumed).iter().filter(|k| *k == "turn/end").count(),
        2
    );
    second.dispose().await;
    drop(first);
}
