//! Declarative agents and live configuration of the loop.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_agent_loop::{AgentLoopConfig, AgentLoopPlugin, AgentSpec};
use dsh_kernel::PluginRegistry;
use dsh_tools::{FnTool, ToolOutput};
use serde_json::json;

use crate::support::*;

fn spec(id: &str) -> AgentSpec {
    AgentSpec {
        id: id.into(),
        provider: Some("mock".into()),
        model: None,
        reasoning_effort: None,
        max_tokens: Some(1000),
        cwd: Some(std::env::temp_dir().to_string_lossy().into_owned()),
        session_id: None,
        resume_session_id: None,
    }
}

#[tokio::test]
async fn declarative_agents_start_at_load() {
    let mut exact = spec("exact");
    exact.session_id = Some("exact-session".into());
    let mut missing = spec("ghost");
    missing.resume_session_id = Some("no-such-session".into());
    let config = AgentLoopConfig {
        agents: vec![spec("main"), exact, missing],
        ..Default::default()
    };
    let h = Harness::with_config(config).await;
    let ids: Vec<String> = h
        .agents()
        .list()
        .iter()
        .map(|a| a.id().to_owned())
        .collect();
    assert_eq!(
        ids.len(),
        2,
        "the missing resume warns and starts nothing: {ids:?}"
    );
    assert!(ids.contains(&"exact-session".to_owned()));
    assert!(
        ids.iter().any(|i| i.starts_with("main-session-")),
        "{ids:?}"
    );
    // The declared route and output cap reach the request.
    h.llm.push(Script::Chunks(text("hi")));
    let agent = h.agents().get("exact-session").unwrap();
    agent.followup(user("hello")).unwrap();
    idle(&agent).await;
    assert_eq!(h.llm.requests()[0].call.max_tokens, 1000);
    h.kernel.dispose().await;
}

#[tokio::test]
async fn invalid_loop_configs_are_refused_with_the_field() {
    let mut reg = PluginRegistry::new();
    reg.register::<AgentLoopPlugin>();
    let err = reg
        .validate("agent-loop", &json!({"maxParallelToolCalls": "ten"}))
        .unwrap_err();
    assert!(err.to_string().contains("maxParallelToolCalls"), "{err}");
    let err = reg
        .validate(
            "agent-loop",
            &json!({"agents": [{"id": "a", "sessionIdd": "x"}]}),
        )
        .unwrap_err();
    assert!(err.to_string().contains("agents[0]"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_parallel_tool_calls_is_live_for_the_next_batch() {
    let h = Harness::with_config(AgentLoopConfig {
        max_parallel_tool_calls: 4,
        ..Default::default()
    })
    .await;
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    h.register_tool(
        FnTool::new("p", "Probe.", json!({"type": "object"}), move |_c, _a| {
            let (r, p) = (r.clone(), p.clone());
            async move {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                for _ in 0..20 {
                    tokio::task::yield_now().await;
                }
                r.fetch_sub(1, Ordering::SeqCst);
                Ok(ToolOutput::text("ok"))
            }
        })
        .parallel_safe(),
    );
    let batch: Vec<(String, &str, &str)> = (0..6).map(|i| (format!("c{i}"), "p", "{}")).collect();
    let batch: Vec<(&str, &str, &str)> =
        batch.iter().map(|(a, b, c)| (a.as_str(), *b, *c)).collect();
    h.llm.push(Script::Chunks(calls(&batch)));
    h.llm.push(Script::Chunks(text("done")));
    let agent = h.agent().await;
    // Serial from now on: the update is delivered in place (no restart, the agent survives).
    let fh = h.loop_fiber.clone();
    fh.update_config(json!({"maxParallelToolCalls": 1}))
        .await
        .unwrap();
    agent.followup(user("go")).unwrap();
    idle(&agent).await;
    assert_eq!(peak.load(Ordering::SeqCst), 1);
    assert_eq!(data_of(&agent, "tool/result").len(), 6);
    assert_eq!(fh.state(), dsh_kernel::FiberState::Active);
    h.kernel.dispose().await;
}
