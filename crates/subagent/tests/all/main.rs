//! The sub-agent seam on the real agent loop with a scripted model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_agent::events::AgentSessionStart;
use dsh_agent::{AgentOptions, Agents, AgentsPlugin, CreateAgent};
use dsh_agent_loop::{AgentLoopConfig, AgentLoopPlugin};
use dsh_kernel::{EmptyConfig, Kernel, PluginRegistry};
use dsh_llm::service::LlmPlugin;
use dsh_session::SessionsPlugin;
use dsh_subagent::{
    Capabilities, StopReason, SubagentMode, SubagentRequest, SubagentUsage, Subagents,
    SubagentsConfig, SubagentsPlugin,
};
use dsh_testkit::scripted::{Script, ScriptedAdapter, ScriptedRoute, ScriptedRouteConfig, text};
use dsh_tools::ToolsPlugin;
use parking_lot::Mutex;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_is_created_as_new_with_its_lineage_and_its_usage_logged_in_the_parent() {
    let llm = Arc::new(ScriptedAdapter::default());
    let kernel = Kernel::new(PluginRegistry::new());
    let handles = vec![
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
        kernel
            .mount_plugin::<SubagentsPlugin>(SubagentsConfig::default())
            .unwrap(),
    ];
    for h in handles {
        h.ready().await.unwrap();
    }
    let starts: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let s = starts.clone();
    kernel
        .root()
        .on::<AgentSessionStart>(move |ev| {
            s.lock().push((ev.agent_id.clone(), ev.resumed));
            Ok(())
        })
        .unwrap();
    let agents = kernel.root().get::<dyn Agents>().unwrap();
    let parent = agents
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
    let subagents = kernel.root().get::<dyn Subagents>().unwrap();
    llm.push(Script::Chunks(text("child answer")));
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
    let starts = starts.lock().clone();
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
    kernel.dispose().await;
}
