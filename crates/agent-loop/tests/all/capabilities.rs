//! Route capabilities come from the model info: an `in-history` route gets a changed system
//! prompt appended (the old prefix stays, the cache keeps hitting); a route without it gets the
//! prompt folded into the head (a replacement, a new series).

use dsh_llm::adapter::SystemPromptUpdate;
use dsh_system_prompt::{Section, SystemPrompt, SystemPromptPlugin};
use serde_json::json;

use crate::support::*;

/// Two turns; the prompt changes from `A` to `B` between them. Returns the agent's log kinds
/// of system messages and the second request's system texts.
async fn two_prompts(
    capability: Option<SystemPromptUpdate>,
) -> (Vec<serde_json::Value>, Vec<String>, Vec<serde_json::Value>) {
    let h = Harness::new().await;
    h.llm.set_capabilities(capability, None);
    let sp = h
        .kernel
        .mount_plugin::<SystemPromptPlugin>(
            serde_json::from_value(json!({"includeHarnessIdentity": false})).unwrap(),
        )
        .unwrap();
    sp.ready().await.unwrap();
    let root = h.kernel.root();
    let prompts = root.get::<dyn SystemPrompt>().unwrap();
    let a = prompts
        .section(&root, Section::new("t", "Prompt A"))
        .unwrap();
    h.llm.push(Script::Chunks(text("one")));
    h.llm.push(Script::Chunks(text("two")));
    let agent = h.agent().await;
    agent.followup(user("first")).unwrap();
    idle(&agent).await;
    a.dispose();
    let _b = prompts
        .section(&root, Section::new("t", "Prompt B"))
        .unwrap();
    agent.followup(user("second")).unwrap();
    idle(&agent).await;
    let systems: Vec<serde_json::Value> = agent
        .session()
        .events()
        .iter()
        .filter(|e| *e.event_kind() == dsh_session::EventKind::SystemMessage)
        .map(|e| serde_json::from_str(&e.to_json_line()).unwrap())
        .collect();
    let sent: Vec<String> = h.llm.requests()[1]
        .messages
        .iter()
        .filter(|m| m.role == dsh_llm::Role::System)
        .map(|m| m.text())
        .collect();
    (systems, sent, data_of(&agent, "request/context"))
}

#[tokio::test]
async fn an_in_history_route_gets_the_changed_prompt_appended() {
    let (systems, sent, contexts) = two_prompts(Some(SystemPromptUpdate::InHistory)).await;
    assert_eq!(systems.len(), 2);
    assert_eq!(systems[1]["surfaceOp"], json!("append"), "{systems:?}");
    assert_eq!(sent, ["Prompt A", "Prompt B"]);
    assert_eq!(contexts[0]["systemPromptUpdate"], "in-history");
}

#[tokio::test]
async fn a_route_without_it_gets_the_head_replaced() {
    let (systems, sent, contexts) = two_prompts(None).await;
    assert_eq!(systems.len(), 2);
    assert_eq!(systems[1]["surfaceOp"]["op"], "replace", "{systems:?}");
    assert_eq!(sent, ["Prompt B"]);
    assert!(contexts[0].get("systemPromptUpdate").is_none());
}
