//! Turn and step lifecycle, request bookkeeping, failures and retries.

use std::sync::Arc;

use dsh_agent::AgentStatus;
use dsh_agent::events::AgentStatusChanged;
use dsh_agent::hooks::{AgentRequestError, PreStep, PreStepDecision, RequestErrorDecision};
use dsh_llm::{FinishReason, LlmFailure};
use dsh_tools::{FnTool, ToolOutput};
use parking_lot::Mutex;
use serde_json::json;

use crate::support::*;

fn echo_tool() -> FnTool {
    FnTool::new(
        "echo",
        "Echo the text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |_ctx, args| async move {
            Ok(ToolOutput::text(
                args["text"].as_str().unwrap_or("").to_owned(),
            ))
        },
    )
}

#[tokio::test]
async fn a_plain_turn_logs_the_upstream_event_order() {
    let h = Harness::new().await;
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let s = statuses.clone();
    h.kernel
        .root()
        .on::<AgentStatusChanged>(move |e| {
            s.lock().push(e.status);
            Ok(())
        })
        .unwrap();
    h.llm.push(Script::Chunks(text("hello")));
    let agent = h.agent().await;
    agent.followup(user("hi")).unwrap();
    idle(&agent).await;
    assert_eq!(
        kinds(&agent),
        vec![
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "step/start",
            "system/message",
            "user/message",
            "request/header",
            "request/context",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
    );
    assert_eq!(
        *statuses.lock(),
        vec![AgentStatus::Running, AgentStatus::Idle]
    );
    let end = &data_of(&agent, "turn/end")[0];
    assert_eq!(end, &json!({"turn": 1, "reason": {"kind": "completed"}}));
    let header = &data_of(&agent, "request/header")[0];
    assert_eq!(header["reason"], "initial");
    assert_eq!(header["header"]["config"]["provider"], "mock");
    assert_eq!(
        header["header"]["adapterDefaults"],
        json!({"maxTokens": true})
    );
    // The claim is a pure deletion with the same id as the insertion and the user message.
    let splices = data_of(&agent, "agent/inbox/spliced");
    let id = splices[0]["inserted"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        splices[1],
        json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})
    );
    assert_eq!(data_of(&agent, "user/message")[0]["id"], json!(id));
    // The request: an (empty) system node derives nothing; the user message.
    assert_eq!(h.llm.request_count(), 1);
    let req = h.llm.requests()[0].messages.clone();
    assert_eq!(req.len(), 1);
    assert_eq!(req[0].text(), "hi");
    h.kernel.dispose().await;
}

#[tokio::test]
async fn a_tool_step_feeds_the_result_into_the_next_request_without_repeating_headers() {
    let h = Harness::new().await;
    h.register_tool(echo_tool());
    h.llm.push(Script::Chunks(calls(&[(
        "c1",
        "echo",
        r#"{"text":"PONG"}"#,
    )])));
    h.llm.push(Script::Chunks(text("done")));
    let agent = h.agent().await;
    agent.followup(user("ping")).unwrap();
    idle(&agent).await;
    let k = kinds(&agent);
    let tail: Vec<&str> = k[8..].iter().map(String::as_str).collect();
    assert_eq!(
        tail,
        vec![
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
    );
    assert_eq!(data_of(&agent, "request/header").len(), 1);
    let result = &data_of(&agent, "tool/result")[0];
    assert_eq!(result["message"]["content"][0]["text"], "PONG");
    assert_eq!(result["message"]["isError"], false);
    let second = h.llm.requests()[1].messages.clone();
    assert_eq!(second.last().unwrap().text(), "PONG");
    // Append-only: the second request extends the first byte for byte.
    let (a, b) = (h.llm.messages(0), h.llm.messages(1));
    assert_eq!(&b[..a.len()], &a[..]);
    let tools = &data_of(&agent, "request/header")[0]["header"]["tools"];
    assert_eq!(tools[0]["name"], "echo");
    h.kernel.dispose().await;
}

#[tokio::test]
async fn every_request_byte_extends_the_previous_one_over_many_steps() {
    let h = Harness::new().await;
    h.register_tool(echo_tool());
    for i in 0..8 {
        let args = format!(r#"{{"text":"step-{i}"}}"#);
        h.llm
            .push(Script::Chunks(calls(&[(&format!("c{i}"), "echo", &args)])));
    }
    h.llm.push(Script::Chunks(text("finished")));
    let agent = h.agent().await;
    agent.followup(user("go")).unwrap();
    idle(&agent).await;
    assert_eq!(h.llm.request_count(), 9);
    for i in 1..9 {
        let (a, b) = (h.llm.messages(i - 1), h.llm.messages(i));
        assert!(b.len() > a.len());
        assert_eq!(
            &b[..a.len()],
            &a[..],
            "request {i} does not extend request {}",
            i - 1
        );
    }
    // Rebuilding: the last request equals the messages derived from the log alone.
    let derived: Vec<String> = agent
        .session()
        .derive_messages()
        .iter()
        .filter(|m| m.role != dsh_llm::Role::Developer)
        .map(|m| serde_json::to_string(&**m).unwrap())
        .collect();
    let last = h.llm.messages(8);
    assert_eq!(&derived[..last.len()], &last[..]);
    h.kernel.dispose().await;
}

#[tokio::test]
async fn pre_step_reject_blocks_and_an_empty_first_batch_completes_without_a_model_call() {
    let h = Harness::new().await;
    let mode = Arc::new(Mutex::new("reject"));
    let m = mode.clone();
    h.kernel
        .root()
        .hook::<PreStep, _, _>(move |input, next| {
            let mode = *m.lock();
            async move {
                match mode {
                    "reject" => PreStepDecision::Reject {
                        reason: "policy".into(),
                    },
                    "empty" => PreStepDecision::Enter {
                        batch: vec![],
                        starts_request_series: false,
                    },
                    _ => next.run(input).await,
                }
            }
        })
        .unwrap();
    let agent = h.agent().await;
    agent.followup(user("one")).unwrap();
    idle(&agent).await;
    *mode.lock() = "empty";
    agent.followup(user("two")).unwrap();
    idle(&agent).await;
    let ends = data_of(&agent, "turn/end");
    assert_eq!(ends[0]["reason"], json!({"kind": "blocked"}));
    assert_eq!(ends[1]["reason"], json!({"kind": "completed"}));
    assert!(!kinds(&agent).contains(&"step/start".to_owned()));
    assert_eq!(h.llm.request_count(), 0);
    h.kernel.dispose().await;
}

#[tokio::test]
async fn a_retry_answer_re_requests_in_the_same_step() {
    let h = Harness::new().await;
    h.kernel
        .root()
        .hook::<AgentRequestError, _, _>(|input, next| async move {
            if input.failure.code == "SERVER" && input.attempt < 3 {
                RequestErrorDecision::Retry
            } else {
                next.run(input).await
            }
        })
        .unwrap();
    h.llm.push(Script::Fail(LlmFailure::new("SERVER", "boom")));
    h.llm.push(Script::Chunks(vec![dsh_llm::StreamChunk::finish(
        FinishReason::error(LlmFailure::new("SERVER", "mid-stream")),
    )]));
    h.llm.push(Script::Chunks(text("ok")));
    let agent = h.agent().await;
    agent.followup(user("hi")).unwrap();
    idle(&agent).await;
    let k = kinds(&agent);
    assert_eq!(k.iter().filter(|t| *t == "turn/start").count(), 1);
    assert_eq!(k.iter().filter(|t| *t == "step/start").count(), 1);
    assert_eq!(k.iter().filter(|t| *t == "assistant/attempt").count(), 2);
    assert_eq!(
        k.iter().filter(|t| *t == "user/message").count(),
        1,
        "users only on the first attempt"
    );
    assert_eq!(
        data_of(&agent, "turn/end")[0]["reason"],
        json!({"kind": "completed"})
    );
    // The failed attempts never enter later requests.
    assert_eq!(h.llm.messages(2), h.llm.messages(0));
    h.kernel.dispose().await;
}

#[tokio::test]
async fn an_unhandled_failure_ends_the_turn_with_it_and_the_loop_serves_the_next_turn() {
    let h = Harness::new().await;
    h.llm.push(Script::Fail(
        LlmFailure::new("AUTH", "bad key").with_status(401),
    ));
    h.llm.push(Script::Chunks(text("second")));
    let agent = h.agent().await;
    agent.followup(user("one")).unwrap();
    idle(&agent).await;
    agent.followup(user("two")).unwrap();
    idle(&agent).await;
    let ends = data_of(&agent, "turn/end");
    assert_eq!(ends[0]["reason"]["kind"], "error");
    assert_eq!(ends[0]["reason"]["error"]["code"], "AUTH");
    assert_eq!(ends[0]["reason"]["error"]["message"], "bad key");
    assert_eq!(ends[1], json!({"turn": 2, "reason": {"kind": "completed"}}));
    h.kernel.dispose().await;
}

#[tokio::test]
async fn max_tokens_drops_tool_calls_and_ends_the_turn() {
    let h = Harness::new().await;
    let ran = Arc::new(Mutex::new(0));
    let r = ran.clone();
    h.register_tool(FnTool::new(
        "touch",
        "Touch.",
        json!({"type": "object"}),
        move |_c, _a| {
            *r.lock() += 1;
            async { Ok(ToolOutput::text("touched")) }
        },
    ));
    let mut chunks = text("partial");
    chunks.pop();
    chunks.extend(
        calls_with(&[("c1", "touch", "{}")], FinishReason::MaxTokens)
            .into_iter()
            .map(|c| match c {
                dsh_llm::StreamChunk::BlockStart { index, block_type } => {
                    dsh_llm::StreamChunk::BlockStart {
                        index: index + 1,
                        block_type,
                    }
                }
                dsh_llm::StreamChunk::ToolCallDelta {
                    index,
                    id,
                    name,
                    arguments_delta,
                } => dsh_llm::StreamChunk::ToolCallDelta {
                    index: index + 1,
                    id,
                    name,
                    arguments_delta,
                },
                dsh_llm::StreamChunk::BlockEnd { index, block } => dsh_llm::StreamChunk::BlockEnd {
                    index: index + 1,
                    block,
                },
                other => other,
            }),
    );
    h.llm.push(Script::Chunks(chunks));
    let agent = h.agent().await;
    agent.followup(user("go")).unwrap();
    idle(&agent).await;
    assert_eq!(*ran.lock(), 0);
    assert!(!kinds(&agent).contains(&"tool/call".to_owned()));
    let msg = &data_of(&agent, "assistant/message")[0];
    assert_eq!(
        msg["message"]["content"],
        json!([{"type": "text", "text": "partial"}])
    );
    assert_eq!(
        data_of(&agent, "turn/end")[0]["reason"],
        json!({"kind": "max-tokens"})
    );
    h.kernel.dispose().await;
}

#[tokio::test]
async fn a_panicking_plugin_ends_the_turn_not_the_loop() {
    let h = Harness::new().await;
    let armed = Arc::new(Mutex::new(true));
    let a = armed.clone();
    h.kernel
        .root()
        .hook::<PreStep, _, _>(move |input, next| {
            let boom = std::mem::replace(&mut *a.lock(), false);
            async move {
                if boom {
                    panic!("listener bug");
                }
                next.run(input).await
            }
        })
        .unwrap();
    h.llm.push(Script::Chunks(text("fine")));
    let agent = h.agent().await;
    agent.followup(user("one")).unwrap();
    idle(&agent).await;
    agent.followup(user("two")).unwrap();
    idle(&agent).await;
    let ends = data_of(&agent, "turn/end");
    assert_eq!(ends[0]["reason"]["kind"], "error");
    assert_eq!(ends[0]["reason"]["error"]["code"], "UNKNOWN");
    assert_eq!(ends[1]["reason"]["kind"], "completed");
    // Brackets stay balanced.
    let k = kinds(&agent);
    assert_eq!(
        k.iter().filter(|t| *t == "turn/start").count(),
        k.iter().filter(|t| *t == "turn/end").count()
    );
    h.kernel.dispose().await;
}

#[tokio::test]
async fn a_changed_tool_set_logs_a_change_header_and_a_developer_message() {
    let h = Harness::new().await;
    h.llm.push(Script::Chunks(text("one")));
    h.llm.push(Script::Chunks(text("two")));
    let agent = h.agent().await;
    agent.followup(user("first")).unwrap();
    idle(&agent).await;
    h.register_tool(echo_tool());
    agent.followup(user("second")).unwrap();
    idle(&agent).await;
    let headers = data_of(&agent, "request/header");
    assert_eq!(headers.len(), 2);
    assert_eq!(headers[1]["reason"], "change");
    let dev = data_of(&agent, "developer/message");
    assert_eq!(dev.len(), 1);
    assert_eq!(
        dev[0]["message"]["content"],
        json!([{"type": "tool-addition", "toolName": "echo"}])
    );
    // Developer messages are not sent on a route without tool updates.
    let last = h.llm.requests()[1].messages.clone();
    assert!(last.iter().all(|m| m.role != dsh_llm::Role::Developer));
    h.kernel.dispose().await;
}

fn named_tool(name: &'static str) -> FnTool {
    FnTool::new(
        name,
        "A tool.",
        json!({"type": "object", "properties": {}}),
        |_ctx, _args| async move { Ok(ToolOutput::text("ok")) },
    )
}

#[tokio::test]
async fn a_late_tool_is_appended_after_the_declared_ones() {
    let h = Harness::new().await;
    h.llm.push(Script::Chunks(text("one")));
    h.llm.push(Script::Chunks(text("two")));
    h.llm.push(Script::Chunks(text("three")));
    h.register_tool(named_tool("m_tool"));
    h.register_tool(named_tool("z_tool"));
    let agent = h.agent().await;
    agent.followup(user("first")).unwrap();
    idle(&agent).await;
    // sorts before both, but arrives after the first request
    h.register_tool(named_tool("a_late"));
    agent.followup(user("second")).unwrap();
    idle(&agent).await;
    let names = |i: usize| -> Vec<String> {
        h.llm.requests()[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(names(0), ["m_tool", "z_tool"]);
    assert_eq!(names(1), ["m_tool", "z_tool", "a_late"]);
    let headers = data_of(&agent, "request/header");
    let header_names: Vec<&str> = headers[1]["header"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        header_names,
        ["m_tool", "z_tool", "a_late"],
        "the log declares what was sent"
    );
    // a third request keeps that order (nothing changed)
    agent.followup(user("third")).unwrap();
    idle(&agent).await;
    assert_eq!(names(2), names(1));
    h.kernel.dispose().await;
}

#[tokio::test]
async fn throwing_observers_never_unbalance_turns() {
    let h = Harness::new().await;
    let root = h.kernel.root();
    root.on::<dsh_session::plugin::SessionEvent>(|_| panic!("observer bug"))
        .unwrap();
    root.on::<AgentStatusChanged>(|_| Err("observer refuses".into()))
        .unwrap();
    root.on::<dsh_agent::events::AgentStreamChunk>(|_| panic!("stream observer bug"))
        .unwrap();
    h.llm.push(Script::Chunks(text("still fine")));
    h.llm.push(Script::Chunks(text("again")));
    let agent = h.agent().await;
    agent.followup(user("one")).unwrap();
    agent.followup(user("two")).unwrap();
    idle(&agent).await;
    let ends = data_of(&agent, "turn/end");
    assert_eq!(ends.len(), 2);
    assert!(
        ends.iter().all(|e| e["reason"]["kind"] == "completed"),
        "{ends:?}"
    );
    h.kernel.dispose().await;
}
