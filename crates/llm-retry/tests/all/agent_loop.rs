//! The plugin inside the real agent loop (`dsh-agent-loop`) with a scripted adapter: the
//! upstream `provider-retry` event order, the budget, and cancellation during the backoff.

use std::sync::Arc;

use dsh_agent::{Agent, CancelCause};
use dsh_llm::{FinishReason, LlmFailure, Message, StreamChunk, codes};
use dsh_llm_retry::LlmRetryPlugin;
use dsh_test_harness::{Script, ScriptedAdapter, TestHarness, idle, next, text};
use serde_json::{Value, json};
use tokio::sync::mpsc;

fn empty_response() -> Vec<StreamChunk> {
    vec![StreamChunk::finish(FinishReason::error(LlmFailure::new(
        codes::EMPTY_RESPONSE,
        "model returned a completed response with no content",
    )))]
}

struct Loop {
    h: TestHarness,
    llm: Arc<ScriptedAdapter>,
    agent: Arc<dyn Agent>,
    /// Types of committed session events, as they are committed.
    events: mpsc::UnboundedReceiver<String>,
}

async fn start(retry: Value, scripts: Vec<Result<Vec<StreamChunk>, LlmFailure>>) -> Loop {
    let h = TestHarness::builder()
        .scripts(scripts.into_iter().map(|s| match s {
            Ok(chunks) => Script::Chunks(chunks),
            Err(f) => Script::Fail(f),
        }))
        .plugin_json::<LlmRetryPlugin>(retry)
        .build()
        .await;
    let events = h.committed_kinds();
    let agent = h.agent().await;
    Loop {
        llm: h.llm.clone(),
        h,
        agent,
        events,
    }
}

impl Loop {
    async fn run_turn(&self, prompt: &str) {
        self.h.prompt(&self.agent, prompt).await;
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
    l.h.dispose().await;
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
    l.h.dispose().await;
}

#[tokio::test]
async fn cancelling_during_the_backoff_aborts_the_turn_without_retry_started() {
    let mut l = start(
        json!({"default": {"initialDelayMs": 60000, "maxDelayMs": 60000}}),
        vec![Err(LlmFailure::new(codes::TRANSPORT, "connection refused"))],
    )
    .await;
    l.agent.followup(Message::user_text("", "hello")).unwrap();
    while next(&mut l.events).await != "llm/retry" {}
    l.agent.cancel(CancelCause::User, false);
    idle(&l.agent).await;
    let tail = l.tail();
    let kinds: Vec<&str> = tail.iter().map(|(k, _)| k.as_str()).collect();
    assert!(!kinds.contains(&"llm/retry-started"), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "llm/retry").count(), 1);
    let end = &tail.last().unwrap();
    assert_eq!(end.0, "turn/end");
    assert_eq!(end.1["reason"]["kind"], "aborted", "{}", end.1);
    assert_eq!(l.llm.request_count(), 1);
    l.h.dispose().await;
}
