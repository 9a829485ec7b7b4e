//! Tool scheduling: barriers, the rolling pool, model order.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_agent_loop::AgentLoopConfig;
use dsh_tools::{FnTool, ToolOutput};
use parking_lot::Mutex;
use serde_json::json;

use crate::support::*;

struct Probe {
    running: AtomicUsize,
    peak: AtomicUsize,
    log: Mutex<Vec<String>>,
}

fn probe_tool(name: &str, parallel: bool, probe: Arc<Probe>) -> FnTool {
    let label = name.to_owned();
    let tool = FnTool::new(
        name,
        "Probe.",
        json!({"type": "object", "properties": {"id": {"type": "string"}}}),
        move |_c, args| {
            let probe = probe.clone();
            let label = label.clone();
            async move {
                let id = args["id"].as_str().unwrap_or("").to_owned();
                let now = probe.running.fetch_add(1, Ordering::SeqCst) + 1;
                probe.peak.fetch_max(now, Ordering::SeqCst);
                probe.log.lock().push(format!("start:{label}:{id}"));
                for _ in 0..20 {
                    tokio::task::yield_now().await;
                }
                probe.running.fetch_sub(1, Ordering::SeqCst);
                probe.log.lock().push(format!("end:{label}:{id}"));
                Ok(ToolOutput::text(format!("{label}:{id}")))
            }
        },
    );
    if parallel { tool.parallel_safe() } else { tool }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_calls_are_barriers_and_results_keep_model_order() {
    let h = Harness::new().await;
    let probe = Arc::new(Probe {
        running: 0.into(),
        peak: 0.into(),
        log: Mutex::new(vec![]),
    });
    h.register_tool(probe_tool("p", true, probe.clone()));
    h.register_tool(probe_tool("x", false, probe.clone()));
    h.llm.push(Script::Chunks(calls(&[
        ("1", "p", r#"{"id":"1"}"#),
        ("2", "p", r#"{"id":"2"}"#),
        ("3", "x", r#"{"id":"3"}"#),
        ("4", "p", r#"{"id":"4"}"#),
    ])));
    h.llm.push(Script::Chunks(text("done")));
    let agent = h.agent().await;
    agent.followup(user("go")).unwrap();
    idle(&agent).await;
    let log = probe.log.lock().clone();
    let pos = |s: &str| log.iter().position(|l| l == s).unwrap();
    // The exclusive call starts after both earlier calls ended and ends before the last starts.
    assert!(pos("start:x:3") > pos("end:p:1") && pos("start:x:3") > pos("end:p:2"));
    assert!(pos("start:p:4") > pos("end:x:3"));
    let results: Vec<String> = data_of(&agent, "tool/result")
        .iter()
        .map(|r| r["message"]["toolCallId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results, vec!["1", "2", "3", "4"]);
    h.kernel.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_never_exceeds_max_parallel_tool_calls() {
    let h = Harness::with_config(AgentLoopConfig {
        max_parallel_tool_calls: 2,
        ..Default::default()
    })
    .await;
    let probe = Arc::new(Probe {
        running: 0.into(),
        peak: 0.into(),
        log: Mutex::new(vec![]),
    });
    h.register_tool(probe_tool("p", true, probe.clone()));
    let ids: Vec<String> = (0..6).map(|i| i.to_string()).collect();
    let args: Vec<String> = ids.iter().map(|i| format!(r#"{{"id":"{i}"}}"#)).collect();
    let list: Vec<(&str, &str, &str)> = ids
        .iter()
        .zip(&args)
        .map(|(i, a)| (i.as_str(), "p", a.as_str()))
        .collect();
    h.llm.push(Script::Chunks(calls(&list)));
    h.llm.push(Script::Chunks(text("done")));
    let agent = h.agent().await;
    agent.followup(user("go")).unwrap();
    idle(&agent).await;
    assert!(probe.peak.load(Ordering::SeqCst) <= 2);
    assert_eq!(data_of(&agent, "tool/result").len(), 6);
    // tool/call is logged at dispatch: the first two calls precede the first result.
    let k = kinds(&agent);
    let first_result = k.iter().position(|t| t == "tool/result").unwrap();
    assert_eq!(
        k[first_result - 2..first_result],
        ["tool/call", "tool/call"]
    );
    h.kernel.dispose().await;
}

#[tokio::test]
async fn unknown_tools_and_invalid_arguments_become_error_results() {
    let h = Harness::new().await;
    let probe = Arc::new(Probe {
        running: 0.into(),
        peak: 0.into(),
        log: Mutex::new(vec![]),
    });
    h.register_tool(probe_tool("p", true, probe));
    h.llm.push(Script::Chunks(calls(&[
        ("1", "nope", "{}"),
        ("2", "p", "{not json"),
    ])));
    h.llm.push(Script::Chunks(text("done")));
    let agent = h.agent().await;
    agent.followup(user("go")).unwrap();
    idle(&agent).await;
    let results = data_of(&agent, "tool/result");
    assert_eq!(results[0]["error"]["code"], "UNKNOWN_TOOL");
    assert_eq!(results[1]["error"]["code"], "INVALID_ARGS");
    assert_eq!(
        data_of(&agent, "turn/end")[0]["reason"]["kind"],
        "completed"
    );
    h.kernel.dispose().await;
}

/// A tool call's arguments are held once: the logged message, its stream record, the
/// `tool/call` event and the tool body's request all share the assembled string (a megabyte
/// `write` must not cost a copy per holder, nor one string per streamed delta).
#[tokio::test]
async fn tool_call_arguments_are_shared_not_copied() {
    use dsh_llm::{BlockKind, ContentBlock, FinishReason, StreamChunk, ToolArguments};
    use dsh_session::data::CoreEvent;
    let h = Harness::new().await;
    let seen = Arc::new(Mutex::new(None::<usize>));
    let sink = seen.clone();
    h.register_tool(FnTool::new(
        "w",
        "Probe.",
        json!({"type": "object", "properties": {"content": {"type": "string"}}}),
        move |_c, args| {
            let sink = sink.clone();
            async move {
                *sink.lock() = args["content"].as_str().map(str::len);
                Ok(ToolOutput::text("ok"))
            }
        },
    ));
    let content = "x\"y\\z ".repeat(20_000);
    let args = json!({ "content": content }).to_string();
    let mut chunks = vec![StreamChunk::BlockStart {
        index: 0,
        block_type: BlockKind::ToolCall,
    }];
    for piece in args.as_bytes().chunks(256) {
        chunks.push(StreamChunk::ToolCallDelta {
            index: 0,
            id: "c1".into(),
            name: Some("w".into()),
            arguments_delta: String::from_utf8(piece.to_vec()).unwrap(),
        });
    }
    chunks.push(StreamChunk::BlockEnd {
        index: 0,
        block: ContentBlock::tool_call("c1", "w", args.clone()),
    });
    chunks.push(StreamChunk::finish(FinishReason::ToolCalls));
    h.llm.push(Script::Chunks(chunks));
    h.llm.push(Script::Chunks(text("done")));
    let agent = h.agent().await;
    agent.followup(user("go")).unwrap();
    idle(&agent).await;
    assert_eq!(*seen.lock(), Some(content.len()));

    let events = agent.session().events();
    let (message, stream) = events
        .iter()
        .find_map(|e| match e.core() {
            Some(CoreEvent::AssistantMessage(m)) if m.message.tool_calls().count() == 1 => {
                Some((m.message.clone(), m.stream.clone()))
            }
            _ => None,
        })
        .expect("the assistant message with the call");
    let in_message = &message.tool_calls().next().unwrap().arguments;
    assert_eq!(*in_message, args);
    let in_stream = stream
        .packed()
        .and_then(|p| p.arguments(0))
        .expect("a packed stream");
    assert!(ToolArguments::ptr_eq(in_message, in_stream));
    let in_call = events
        .iter()
        .find_map(|e| match e.core() {
            Some(CoreEvent::ToolCallEvent(c)) => Some(c.arguments.clone()),
            _ => None,
        })
        .expect("the tool/call event");
    assert!(ToolArguments::ptr_eq(in_message, &in_call));
    // The stream still records every delta, exactly.
    let records = stream.records().unwrap();
    let deltas: Vec<&str> = records
        .iter()
        .filter(|r| r["type"] == "tool-call-chunks")
        .flat_map(|r| {
            r["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
        })
        .collect();
    assert_eq!(deltas.len(), args.len().div_ceil(256));
    assert_eq!(deltas.concat(), args);
    h.kernel.dispose().await;
}
