//! The plugin inside the real agent loop (`dsh-agent-loop`) with a scripted adapter: the
//! upstream `provider-retry` event order, the budget, and cancellation during the backoff.

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::{Agent, AgentOptions, Agents, AgentsPlugin, CancelCause, CreateAgent};
use dsh_agent_loop::{AgentLoopConfig, AgentLoopPlugin};
use dsh_kernel::{EmptyConfig, Kernel, PluginRegistry};
use dsh_llm::service::LlmPlugin;
use dsh_llm::{FinishReason, LlmFailure, Message, StreamChunk, codes};
use dsh_llm_retry::LlmRetryPlugin;
use dsh_session::{SessionEvent, SessionsPlugin};
use dsh_testkit::scripted::{Script, ScriptedAdapter, ScriptedRoute, ScriptedRouteConfig, text};
use dsh_tools::ToolsPlugin;
use serde_json::{Value, json};
use tokio::sync::mpsc;

fn empty_response() -> Vec<StreamChunk> {
    vec![StreamChunk::finish(FinishReason::error(LlmFailure::new(
        codes::EMPTY_RESPONSE,
        "model returned a completed response with no content",
    )))]
}

struct Loop {
    kernel: Kernel,
    llm: Arc<ScriptedAdapter>,
    agent: Arc<dyn Agent>,
    /// Types of committed session events, as they are committed.
    events: mpsc::UnboundedReceiver<String>,
}

async fn start(retry: Value, scripts: Vec<Result<Vec<StreamChunk>, LlmFailure>>) -> Loop {
    let llm = Arc::new(ScriptedAdapter::default());
    for s in scripts {
        llm.push(match s {
            Ok(chunks) => Script::Chunks(chunks),
            Err(f) => Script::Fail(f),
        });
    }
    let mut reg = PluginRegistry::new();
    reg.register::<LlmRetryPlugin>();
    let kernel = Kernel::new(reg);
    for h in [
        kernel
            .mount_plugin::<ScriptedRoute>(ScriptedRouteConfig {
                route: None,
                adapter: Some(llm.clone()),
            })
            .unwrap(),
        kernel.mount_plugin::<LlmPlugin>(EmptyConfig {}).unwrap(),
        kernel.mount_plugin::<AgentsPlugin>(EmptyConfig {}).unwrap(),
        kernel
            .mount_plugin::<SessionsPlugin>(EmptyConfig {})
            .unwrap(),
        kernel
            .mount_plugin::<ToolsPlugin>(Default::default())
            .unwrap(),
        kernel
            .mount_plugin::<AgentLoopPlugin>(AgentLoopConfig::default())
            .unwrap(),
        kernel.mount("llm-retry", retry).unwrap(),
    ] {
        h.ready().await.unwrap();
    }
    let (tx, events) = mpsc::unbounded_channel();
    kernel
        .root()
        .on::<SessionEvent>(move |e| {
            let _ = tx.send(e.event.kind().to_owned());
            Ok(())
        })
        .unwrap();
    let agents = kernel.root().get::<dyn Agents>().unwrap();
    let agent = agents
        .create(
            &kernel.root(),
            CreateAgent {
                options: AgentOptions {
                    provider: Some("mock".into()),
                    cwd: std::env::temp_dir(),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    Loop {
        kernel,
        llm,
        agent,
        events,
    }
}

impl Loop {
    async fn run_turn(&self, prompt: &str) {
        self.agent.followup(Message::user_text("", prompt)).unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.agent.when_idle())
            .await
            .expect("agent never went idle");
    }

    /// The log from the first `assistant/attempt` on, as `(type, data)`.
    fn tail(&self) -> Vec<(String, Value)> {
        let events = self.agent.session().events();
        let from = events
            .iter()
            .position(|e| e.kind() == "assistant/attempt")
            .unwrap_or(events.len());
        events[from..]
            .iter()
            .map(|e| (e.kind().to_owned(), e.data().clone()))
            .collect()
    }
}

fn fast() -> Value {
    json!({"default": {"maxRetries": 2, "initialDelayMs": 1, "maxDelayMs": 1, "jitterRatio": 0}})
}

#[tokio::test]
async fn an_empty_response_is_retried_in_the_same_step_as_upstream_logs_it() {
    let l = start(fast(), vec![Ok(empty_response()), Ok(text("Recovered."))]).await;
    l.run_turn("hello").await;
    let tail = l.tail();
    let kinds: Vec<&str> = tail.iter().map(|(k, _)| k.as_str()).collect();
    // v3 `provider-retry`, seqs 13–18.
    assert_eq!(
        kinds,
        [
            "assistant/attempt",
            "llm/retry",
            "llm/retry-started",
            "assistant/message",
            "step/end",
            "turn/end"
        ]
    );
    let retry = &tail[1].1;
    let id = retry["retryId"].clone();
    assert_eq!(
        retry,
        &json!({
            "retryId": id, "turn": 1, "step": 1, "provider": "mock", "mode": "normal",
            "policyKey": "[\"normal\",2,[\"EMPTY_RESPONSE\",\"RATE_LIMIT\",\"SERVER\",\"TIMEOUT\",\"TRANSPORT\"],1,1,0]",
            "retry": 1, "maxRetries": 2, "delayMs": 1,
            "failure": {"message": "model returned a completed response with no content", "code": "EMPTY_RESPONSE"}
        })
    );
    assert_eq!(
        tail[2].1,
        json!({"retryId": id, "turn": 1, "step": 1, "retry": 1})
    );
    assert_eq!(tail[5].1["reason"], json!({"kind": "completed"}));
    assert_eq!(l.llm.request_count(), 2);
    l.kernel.dispose().await;
}

#[tokio::test]
async fn a_spent_budget_ends_the_turn_with_the_failure() {
    let fail = || Err(LlmFailure::new(codes::SERVER, "overloaded").with_status(503));
    let l = start(fast(), vec![fail(), fail(), fail(), Ok(text("late"))]).await;
    l.run_turn("hello").await;
    let tail = l.tail();
    let count = |k: &str| tail.iter().filter(|(t, _)| t == k).count();
    assert_eq!(count("assistant/attempt"), 3);
    assert_eq!(count("llm/retry"), 2);
    assert_eq!(count("llm/retry-started"), 2);
    let end = &tail.last().unwrap().1;
    assert_eq!(end["reason"]["kind"], "error");
    assert_eq!(end["reason"]["error"]["code"], "SERVER");
    // The next turn has a fresh budget.
    l.run_turn("again").await;
    let end = l.agent.session().events().last().unwrap().data().clone();
    assert_eq!(end["reason"], json!({"kind": "completed"}));
    l.kernel.dispose().await;
}

#[tokio::test]
async fn cancelling_during_the_backoff_aborts_the_turn_without_retry_started() {
    let mut l = start(
        json!({"default": {"initialDelayMs": 60000, "maxDelayMs": 60000}}),
        vec![Err(LlmFailure::new(codes::TRANSPORT, "connection refused"))],
    )
    .await;
    l.agent.followup(Message::user_text("", "hello")).unwrap();
    loop {
        let kind = tokio::time::timeout(Duration::from_secs(10), l.events.recv())
            .await
            .expect("no llm/retry")
            .unwrap();
        if kind == "llm/retry" {
            break;
        }
    }
    l.agent.cancel(CancelCause::User, false);
    tokio::time::timeout(Duration::from_secs(10), l.agent.when_idle())
        .await
        .expect("agent never went idle");
    let tail = l.tail();
    let kinds: Vec<&str> = tail.iter().map(|(k, _)| k.as_str()).collect();
    assert!(!kinds.contains(&"llm/retry-started"), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "llm/retry").count(), 1);
    let end = &tail.last().unwrap();
    assert_eq!(end.0, "turn/end");
    assert_eq!(end.1["reason"]["kind"], "aborted", "{}", end.1);
    assert_eq!(l.llm.request_count(), 1);
    l.kernel.dispose().await;
}
