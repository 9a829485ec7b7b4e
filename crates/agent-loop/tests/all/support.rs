//! A kernel with the loop and its services, a scripted adapter, and log helpers.

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::{Agent, AgentOptions, Agents, AgentsPlugin, CreateAgent};
use dsh_agent_loop::{AgentLoopConfig, AgentLoopPlugin};
use dsh_kernel::{EmptyConfig, Kernel, PluginRegistry};
use dsh_llm::Message;
use dsh_llm::service::LlmPlugin;
use dsh_session::SessionsPlugin;
use dsh_tools::{Tool, Tools, ToolsPlugin};
use serde_json::Value;

pub use dsh_testkit::scripted::{
    Script, ScriptedAdapter as Scripted, ScriptedRoute, ScriptedRouteConfig, calls, calls_with,
    text,
};

pub struct Harness {
    pub kernel: Kernel,
    pub llm: Arc<Scripted>,
    /// The agent loop's fiber (for live config updates).
    pub loop_fiber: dsh_kernel::FiberHandle,
}

impl Harness {
    pub async fn new() -> Self {
        Self::with_config(AgentLoopConfig::default()).await
    }

    pub async fn with_config(config: AgentLoopConfig) -> Self {
        let llm = Arc::new(Scripted::default());
        let kernel = Kernel::new(PluginRegistry::new());
        let mut handles = vec![
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
        ];
        let loop_fiber = kernel.mount_plugin::<AgentLoopPlugin>(config).unwrap();
        handles.push(loop_fiber.clone());
        for h in handles {
            h.ready().await.unwrap();
        }
        Self {
            kernel,
            llm,
            loop_fiber,
        }
    }

    pub fn agents(&self) -> Arc<dyn Agents> {
        self.kernel.root().get::<dyn Agents>().unwrap()
    }

    pub fn tools(&self) -> Arc<dyn Tools> {
        self.kernel.root().get::<dyn Tools>().unwrap()
    }

    pub fn register_tool(&self, tool: impl Tool) {
        self.tools()
            .register(&self.kernel.root(), Arc::new(tool))
            .unwrap();
    }

    pub async fn agent(&self) -> Arc<dyn Agent> {
        let options = AgentOptions {
            provider: Some("mock".into()),
            cwd: std::env::temp_dir(),
            ..Default::default()
        };
        self.agents()
            .create(
                &self.kernel.root(),
                CreateAgent {
                    options,
                    ..Default::default()
                },
            )
            .await
            .unwrap()
    }
}

pub fn user(text: &str) -> Message {
    Message::user_text("", text)
}

/// Event types of a session, in order.
pub fn kinds(agent: &Arc<dyn Agent>) -> Vec<String> {
    agent
        .session()
        .events()
        .iter()
        .map(|e| e.kind().to_owned())
        .collect()
}

/// Data of every event of `kind`.
pub fn data_of(agent: &Arc<dyn Agent>, kind: &str) -> Vec<Value> {
    agent
        .session()
        .events()
        .iter()
        .filter(|e| e.kind() == kind)
        .map(|e| e.data().clone())
        .collect()
}

/// Waits for the agent to be idle (bounded).
pub async fn idle(agent: &Arc<dyn Agent>) {
    tokio::time::timeout(Duration::from_secs(10), agent.when_idle())
        .await
        .expect("agent never went idle");
}
