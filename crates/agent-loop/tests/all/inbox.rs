//! Inbox: followup, steer, inject, bursts, claims.

use std::sync::Arc;

use dsh_agent::Target;
use dsh_agent::hooks::TurnStopping;
use dsh_tools::{FnTool, ToolOutput};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::Notify;

use crate::support::*;

#[tokio::test]
async fn each_message_of_a_burst_gets_its_own_turn() {
    let h = Harness::new().await;
    for t in ["a", "b", "c"] {
        h.llm.push(Script::Chunks(text(t)));
    }
    let agent = h.agent().await;
    for t in ["one", "two", "three"] {
        agent.followup(user(t)).unwrap();
    }
    idle(&agent).await;
    let starts = data_of(&agent, "turn/start");
    assert_eq!(
        starts,
        vec![json!({"turn": 1}), json!({"turn": 2}), json!({"turn": 3})]
    );
    let users: Vec<String> = data_of(&agent, "user/message")
        .iter()
        .map(|u| u["content"][0]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(users, vec!["one", "two", "three"]);
    h.kernel.dispose().await;
}

#[tokio::test]
async fn inject_on_an_idle_agent_opens_no_turn_and_is_claimed_at_the_next_wake() {
    let h = Harness::new().await;
    h.llm.push(Script::Chunks(text("ok")));
    let agent = h.agent().await;
    agent.inject(user("context")).unwrap();
    idle(&agent).await;
    assert_eq!(kinds(&agent), vec!["agent/inbox/spliced"]);
    agent.followup(user("question")).unwrap();
    idle(&agent).await;
    // Next-step messages come first, then the next-turn message.
    let texts: Vec<String> = h.llm.requests()[0]
        .messages
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, vec!["context", "question"]);
    let splices = data_of(&agent, "agent/inbox/spliced");
    assert_eq!(splices[2]["target"], "next-step");
    assert_eq!(splices[3]["target"], "next-turn");
    h.kernel.dispose().await;
}

#[tokio::test]
async fn steering_during_a_tool_enters_the_next_step_of_the_same_turn() {
    let h = Harness::new().await;
    let gate = Arc::new(Notify::new());
    let started = Arc::new(Notify::new());
    let (g, s) = (gate.clone(), started.clone());
    h.register_tool(FnTool::new(
        "wait",
        "Wait.",
        json!({"type": "object"}),
        move |_c, _a| {
            let (g, s) = (g.clone(), s.clone());
            async move {
                s.notify_one();
                g.notified().await;
                Ok(ToolOutput::text("waited"))
            }
        },
    ));
    h.llm.push(Script::Chunks(calls(&[("c1", "wait", "{}")])));
    h.llm.push(Script::Chunks(text("after steer")));
    let agent = h.agent().await;
    agent.followup(user("start")).unwrap();
    started.notified().await;
    agent.steer(user("also do this")).unwrap();
    gate.notify_one();
    idle(&agent).await;
    assert_eq!(data_of(&agent, "turn/start").len(), 1);
    let second: Vec<String> = h.llm.requests()[1]
        .messages
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(second.last().unwrap(), "also do this");
    // The steer lands after the step's tool result.
    assert_eq!(second[second.len() - 2], "waited");
    h.kernel.dispose().await;
}

#[tokio::test]
async fn a_turn_stopping_listener_that_steers_forces_another_step() {
    let h = Harness::new().await;
    let once = Arc::new(Mutex::new(true));
    let o = once.clone();
    h.kernel
        .root()
        .hook::<TurnStopping, _, _>(move |input, next| {
            if std::mem::replace(&mut *o.lock(), false) {
                input.agent.steer(user("keep going")).unwrap();
            }
            next.run(input)
        })
        .unwrap();
    h.llm.push(Script::Chunks(text("first")));
    h.llm.push(Script::Chunks(text("second")));
    let agent = h.agent().await;
    agent.followup(user("go")).unwrap();
    idle(&agent).await;
    assert_eq!(data_of(&agent, "turn/start").len(), 1);
    assert_eq!(data_of(&agent, "step/start").len(), 2);
    h.kernel.dispose().await;
}

#[tokio::test]
async fn sending_a_non_user_message_is_refused() {
    let h = Harness::new().await;
    let agent = h.agent().await;
    let m = dsh_llm::Message::system("x", "not allowed");
    assert!(agent.send(m, Target::NextTurn, true).is_err());
    assert!(kinds(&agent).is_empty());
    h.kernel.dispose().await;
}
