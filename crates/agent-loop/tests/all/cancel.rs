//! Cancellation: delivered text kept, tools drained, undispatched calls answered.

use std::sync::Arc;

use dsh_agent::CancelCause;
use dsh_agent::events::AgentStreamChunk;
use dsh_llm::StreamChunk;
use dsh_tools::{FnTool, ToolOutput};
use serde_json::json;
use tokio::sync::Notify;

use crate::support::*;

#[tokio::test]
async fn cancel_mid_stream_keeps_the_delivered_text_as_an_interrupted_message() {
    let h = Harness::new().await;
    let mut partial = text("Before sign-out");
    partial.truncate(2); // block-start + delta, then the stream hangs
    h.llm.push(Script::ChunksThenHang(partial));
    h.llm.push(Script::Chunks(text("resumed")));
    let delivered = Arc::new(Notify::new());
    let d = delivered.clone();
    h.kernel
        .root()
        .on::<AgentStreamChunk>(move |e| {
            if matches!(e.chunk, StreamChunk::TextDelta { .. }) {
                d.notify_one();
            }
            Ok(())
        })
        .unwrap();
    let agent = h.agent().await;
    agent.followup(user("talk")).unwrap();
    // Cancel once the text was delivered to listeners (what a user saw).
    delivered.notified().await;
    agent.cancel(CancelCause::User, false);
    idle(&agent).await;
    let msg = &data_of(&agent, "assistant/message")[0];
    assert_eq!(msg["interrupted"], true);
    assert_eq!(
        msg["message"]["content"],
        json!([{"type": "text", "text": "Before sign-out"}])
    );
    assert_eq!(
        data_of(&agent, "turn/end")[0]["reason"],
        json!({"kind": "aborted", "reason": {"kind": "user"}})
    );
    // The next request contains exactly what the user saw.
    agent.followup(user("again")).unwrap();
    idle(&agent).await;
    let texts: Vec<String> = h.llm.requests()[1]
        .messages
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, vec!["talk", "Before sign-out", "again"]);
    h.kernel.dispose().await;
}

#[tokio::test]
async fn cancel_during_a_tool_drains_it_and_answers_undispatched_calls() {
    let h = Harness::new().await;
    let started = register_wait_tool(&h);
    h.llm.push(Script::Chunks(calls(&[
        ("call_wait", "wait", "{}"),
        ("call_skipped", "wait", "{}"),
    ])));
    let agent = h.agent().await;
    agent.followup(user("go")).unwrap();
    started.notified().await;
    agent.cancel(CancelCause::User, false);
    idle(&agent).await;
    let k = kinds(&agent);
    let tail: Vec<&str> = k[k.len() - 6..].iter().map(String::as_str).collect();
    assert_eq!(
        tail,
        vec![
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/result",
            "step/end",
            "turn/end"
        ]
    );
    let results = data_of(&agent, "tool/result");
    assert_eq!(results[0]["error"]["code"], "ABORTED");
    assert_eq!(
        results[0]["message"]["content"][0]["text"],
        "Error: tool call aborted"
    );
    assert_eq!(
        results[1]["error"],
        json!({"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"})
    );
    assert_eq!(
        results[1]["message"]["content"][0]["text"],
        "Error: tool call aborted before dispatch"
    );
    h.kernel.dispose().await;
}

#[tokio::test]
async fn cancel_without_keep_inbox_discards_queued_input_and_keep_inbox_parks_it() {
    let h = Harness::new().await;
    let mut partial = text("x");
    partial.truncate(2);
    h.llm.push(Script::ChunksThenHang(partial.clone()));
    h.llm.push(Script::ChunksThenHang(partial));
    h.llm.push(Script::Chunks(text("parked ran")));
    let agent = h.agent().await;
    agent.followup(user("one")).unwrap();
    agent.followup(user("queued")).unwrap();
    h.llm.wait_requests(1).await;
    agent.cancel(CancelCause::User, false);
    idle(&agent).await;
    let splices = data_of(&agent, "agent/inbox/spliced");
    assert!(
        splices.iter().any(|s| s["outcome"] == "canceled"),
        "{splices:?}"
    );
    assert_eq!(data_of(&agent, "turn/start").len(), 1);

    agent.followup(user("two")).unwrap();
    agent.followup(user("kept")).unwrap();
    h.llm.wait_requests(2).await;
    agent.cancel(CancelCause::User, true);
    idle(&agent).await;
    // The kept message stays parked: no turn runs until the next waking send.
    assert_eq!(data_of(&agent, "turn/start").len(), 2);
    assert_eq!(h.llm.request_count(), 2);
    h.llm.push(Script::Chunks(text("fresh ran")));
    agent.followup(user("fresh")).unwrap();
    idle(&agent).await;
    // The parked message runs first (one next-turn message per turn), then the new one.
    assert_eq!(data_of(&agent, "turn/start").len(), 4);
    assert_eq!(h.llm.requests()[2].messages.last().unwrap().text(), "kept");
    assert_eq!(h.llm.requests()[3].messages.last().unwrap().text(), "fresh");
    h.kernel.dispose().await;
}

#[tokio::test]
async fn a_cancel_before_the_woken_turn_starts_discards_its_input_and_no_turn_runs() {
    let h = Harness::new().await;
    h.llm.push(Script::Chunks(text("should not run")));
    let agent = h.agent().await;
    // On this single-threaded runtime the agent's driver cannot claim the input between the
    // two calls: the cancel lands after the waking send, before the turn starts.
    agent.followup(user("go")).unwrap();
    agent.cancel(CancelCause::Parent, false);
    idle(&agent).await;
    assert!(data_of(&agent, "turn/start").is_empty());
    assert_eq!(h.llm.request_count(), 0);
    let splices = data_of(&agent, "agent/inbox/spliced");
    assert!(
        splices.iter().any(|s| s["outcome"] == "canceled"),
        "{splices:?}"
    );
    // The agent still serves the next send.
    h.llm.push(Script::Chunks(text("after")));
    agent.followup(user("again")).unwrap();
    idle(&agent).await;
    assert_eq!(data_of(&agent, "turn/start").len(), 1);
    assert_eq!(h.llm.requests()[0].messages.last().unwrap().text(), "again");
    h.kernel.dispose().await;
}

#[tokio::test]
async fn cancelling_an_idle_agent_is_a_no_op() {
    let h = Harness::new().await;
    h.llm.push(Script::Chunks(text("fine")));
    let agent = h.agent().await;
    agent.cancel(CancelCause::User, false);
    agent.followup(user("hi")).unwrap();
    idle(&agent).await;
    assert_eq!(
        data_of(&agent, "turn/end")[0]["reason"]["kind"],
        "completed"
    );
    h.kernel.dispose().await;
}

#[tokio::test]
async fn disposal_mid_turn_ends_it_aborted_disposed_with_balanced_brackets() {
    let h = Harness::new().await;
    let mut partial = text("x");
    partial.truncate(1);
    h.llm.push(Script::ChunksThenHang(partial));
    let agent = h.agent().await;
    agent.followup(user("go")).unwrap();
    h.llm.wait_requests(1).await;
    agent.dispose().await;
    let k = kinds(&agent);
    assert_eq!(k.last().unwrap(), "turn/end");
    assert!(k.contains(&"step/end".to_owned()));
    assert_eq!(
        data_of(&agent, "turn/end")[0]["reason"],
        json!({"kind": "aborted", "reason": {"kind": "disposed"}})
    );
    assert_eq!(agent.status(), dsh_agent::AgentStatus::Disposed);
    assert!(h.agents().get(agent.id()).is_none());
    h.kernel.dispose().await;
}

#[tokio::test]
async fn tool_contexts_of_a_cancelled_batch_follow_the_inbox() {
    for keep in [false, true] {
        let h = Harness::new().await;
        h.register_tool(FnTool::new(
            "note",
            "Note.",
            json!({"type": "object"}),
            |_c, _a| async {
                let mut out = ToolOutput::text("noted");
                out.contexts.push("remember the note".into());
                Ok(out)
            },
        ));
        let started = register_wait_tool(&h);
        h.llm.push(Script::Chunks(calls(&[
            ("c1", "note", "{}"),
            ("c2", "wait", "{}"),
        ])));
        h.llm.push(Script::Chunks(text("next")));
        let agent = h.agent().await;
        agent.followup(user("go")).unwrap();
        started.notified().await;
        agent.cancel(CancelCause::User, keep);
        idle(&agent).await;
        agent.followup(user("again")).unwrap();
        idle(&agent).await;
        let texts: Vec<String> = h.llm.requests()[1]
            .messages
            .iter()
            .map(|m| m.text())
            .collect();
        assert_eq!(
            texts.iter().any(|t| t == "remember the note"),
            keep,
            "keep_inbox={keep}: {texts:?}"
        );
        h.kernel.dispose().await;
    }
}

#[tokio::test]
async fn the_first_cancellation_cause_wins() {
    let h = Harness::new().await;
    let mut partial = text("x");
    partial.truncate(1);
    h.llm.push(Script::ChunksThenHang(partial));
    let agent = h.agent().await;
    agent.followup(user("go")).unwrap();
    h.llm.wait_requests(1).await;
    agent.cancel(
        CancelCause::Hook {
            reason: "signed-out".into(),
        },
        false,
    );
    agent.cancel(CancelCause::User, false);
    idle(&agent).await;
    assert_eq!(
        data_of(&agent, "turn/end")[0]["reason"],
        json!({"kind": "aborted", "reason": {"kind": "hook", "reason": "signed-out"}})
    );
    h.kernel.dispose().await;
}

/// Registers `wait`: it signals the returned `Notify` when its body starts, then waits for its
/// cancellation token.
fn register_wait_tool(h: &Harness) -> Arc<Notify> {
    let started = Arc::new(Notify::new());
    let s = started.clone();
    h.register_tool(FnTool::new(
        "wait",
        "Wait.",
        json!({"type": "object"}),
        move |ctx, _a| {
            let s = s.clone();
            async move {
                s.notify_one();
                ctx.cancel_token().cancelled().await;
                Ok(ToolOutput::text("never"))
            }
        },
    ));
    started
}
