//! The sub-agent seam on the real agent loop with a scripted model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_agent::events::AgentSessionStart;
use dsh_subagent::{
    Capabilities, StopReason, SubagentMode, SubagentRequest, SubagentUsage, Subagents,
    SubagentsConfig, SubagentsPlugin,
};
use dsh_test_harness::{Script, TestHarness, drain, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_is_created_as_new_with_its_lineage_and_its_usage_logged_in_the_parent() {
    let h = TestHarness::builder()
        .plugin::<SubagentsPlugin>(SubagentsConfig::default())
        .build()
        .await;
    let mut started = h.on::<AgentSessionStart, _>(|ev| (ev.agent_id.clone(), ev.resumed));
    let parent = h.agent().await;
    let subagents = h.get::<dyn Subagents>();
    h.llm.push(Script::Chunks(text("child answer")));
    let outcome = subagents
        .run(SubagentRequest {
            parent_id: parent.id().to_owned(),
            mode: SubagentMode::Spawn,
            label: "Probe".into(),
            prompt: "do it".into(),
            cwd: None,
            cancel: Default::default(),
            continuable: false,
            capabilities: Capabilities::default(),
        })
        .await
        .unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.output, "child answer");
    // The child was created as a new agent, not resumed.
    let starts = drain(&mut started);
    let child = starts
        .iter()
        .find(|(id, _)| *id == outcome.child_id)
        .unwrap();
    assert!(!child.1, "a brand-new child reported resumed: {starts:?}");
    // Its usage is in the parent's log.
    let record = parent
        .session()
        .events()
        .iter()
        .find_map(|e| e.plugin::<SubagentUsage>().and_then(Result::ok))
        .unwrap();
    assert_eq!(record.child_id, outcome.child_id);
    assert_eq!(record.requests, 1);
    assert_eq!(record.usage, outcome.usage);
    h.dispose().await;
}
