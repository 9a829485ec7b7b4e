//! The goal's runtime-context section: a goal set mid-session reaches the model as an appended
//! context message; the requests before it keep their bytes (the cached prefix).

use std::sync::Arc;

use dsh_goal::{GoalConfig, GoalContextPlugin, GoalPlugin, Goals, run_goal_command};
use dsh_llm::Message;
use dsh_system_prompt::SystemPromptPlugin;
use dsh_test_harness::{Script, TestHarness, calls, idle, text, user, within};
use serde_json::json;

/// Whether request `a`'s messages are the first messages of request `b`, byte for byte.
fn is_prefix(a: &[Arc<Message>], b: &[Arc<Message>]) -> bool {
    a.len() < b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// The messages of request `i` that carry the goal's section.
fn goal_sections(h: &TestHarness, i: usize) -> Vec<String> {
    h.llm.requests()[i]
        .messages
        .iter()
        .map(|m| m.text())
        .filter(|t| t.contains("Goal of this session"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_set_mid_session_is_appended_as_context_and_earlier_bytes_stay() {
    let h = TestHarness::builder()
        .plugin::<SystemPromptPlugin>(serde_json::from_value(json!({})).unwrap())
        .plugin::<GoalPlugin>(GoalConfig::default())
        .plugin::<GoalContextPlugin>(Default::default())
        .build()
        .await;
    let agent = h.agent().await;
    h.llm.push(Script::Chunks(text("hello there")));
    agent.followup(user("hi")).unwrap();
    within("the first turn", idle(&agent)).await;
    assert!(goal_sections(&h, 0).is_empty(), "no goal, no section");

    // A goal, set mid-session; its first round completes it at once.
    let goals = h.get::<Goals>();
    let id = goals
        .create(agent.as_ref(), "ship the release", None)
        .unwrap()
        .goal()
        .id
        .clone();
    let args = json!({"goal_id": id, "revision": 1, "action": "complete"}).to_string();
    h.llm.push(Script::Chunks(calls(&[(
        "c1",
        "update_goal",
        args.as_str(),
    )])));
    h.llm.push(Script::Chunks(text("Shipped.")));
    run_goal_command(&goals, &agent, "resume").unwrap();
    within("the round", async {
        h.llm.wait_requests(3).await;
        idle(&agent).await;
    })
    .await;

    let requests = h.llm.requests();
    assert!(
        is_prefix(&requests[0].messages, &requests[1].messages),
        "the goal changed the bytes of the request before it"
    );
    assert!(is_prefix(&requests[1].messages, &requests[2].messages));
    // The round's request carries the section, after everything the first request sent.
    let sections = goal_sections(&h, 1);
    assert_eq!(sections.len(), 1, "{sections:?}");
    assert!(
        sections[0].starts_with(dsh_system_prompt::runtime_context::SNAPSHOT_HEADER)
            && sections[0].contains(
                "\n\nGoal of this session (set by the user): \"ship the release\"\nIt is active:"
            ),
        "{}",
        sections[0]
    );
    assert!(sections[0].contains("after the same blocker persisted 3 consecutive rounds"));
    let at = requests[1]
        .messages
        .iter()
        .position(|m| m.text().contains("Goal of this session"))
        .unwrap();
    assert!(at >= requests[0].messages.len());
    // Completed: the next step's context no longer has it (a new snapshot, appended: here the
    // cleared form, the goal being the only section).
    let last_context = requests[2]
        .messages
        .iter()
        .rev()
        .find(|m| m.source.kind == "runtime-context")
        .map(|m| m.text());
    assert_eq!(
        last_context.as_deref(),
        Some(dsh_system_prompt::runtime_context::CLEARED_TEXT)
    );
    h.dispose().await;
}
