//! The `tool-subagent` plugin.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_subagent_api::{Capabilities, Subagents, ToolFilterSpec};
use dsh_tools::Tools;
use serde::Deserialize;
use serde_json::Value;

use crate::delegate::BackgroundMode;
use crate::{DelegateTool, InterruptAgentTool, ListAgentsTool, SendMessageTool};

/// Config of the `tool-subagent` plugin.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SubagentToolsConfig {
    /// Register `subagent_fork` too (default true).
    #[serde(default = "yes")]
    pub fork: bool,
    /// Register `list_agents`, `interrupt_agent` and `send_message` (default true).
    #[serde(default = "yes")]
    pub control: bool,
    /// Accept `run_in_background` (default true): the run becomes a job of the `jobs`
    /// service (a call without one mounted gets `background jobs unavailable: …`).
    #[serde(default = "yes")]
    pub enable_run_in_background: bool,
    /// `one-shot` (default: foreground, background = a job) or `continuable` (background by
    /// default: `started subagent <id>`, a settlement notice later, `send_message` continues
    /// the child, which has the `report` tool).
    #[serde(default)]
    pub background_mode: BackgroundMode,
    /// Name of the spawn tool (default `subagent`): a second row with another name can offer
    /// a specialised delegate (a persona, a tool filter, an output schema).
    #[serde(default = "default_tool_name")]
    pub tool_name: String,
    /// The children's persona (replaces the `persona` prompt section in their scope).
    #[serde(default)]
    pub persona: Option<String>,
    /// The children's tools (`allow` and/or `deny`; an empty filter fails the load).
    #[serde(default)]
    pub tool_filter: Option<ToolFilterSpec>,
    /// JSON Schema of the children's answer (an object schema of the tools' argument subset):
    /// they record it with `structured_output`, and the result is that JSON. One-shot only.
    #[serde(default)]
    pub output_schema: Option<Value>,
}

fn default_tool_name() -> String {
    "subagent".to_owned()
}

impl SubagentToolsConfig {
    /// The capabilities of the config, checked as the original checks them at load.
    fn capabilities(&self) -> Result<Capabilities, BoxError> {
        if self
            .tool_filter
            .as_ref()
            .is_some_and(ToolFilterSpec::is_empty)
        {
            return Err(
                "tool-subagent: toolFilter must set allow or deny (an empty filter)".into(),
            );
        }
        if let Some(schema) = &self.output_schema {
            if self.background_mode == BackgroundMode::Continuable {
                return Err(
                    "tool-subagent: outputSchema needs backgroundMode one-shot (a continuable child has no single answer)"
                        .into(),
                );
            }
            dsh_tools::schema::check_schema(schema)
                .map_err(|e| format!("tool-subagent: invalid outputSchema: {e}"))?;
        }
        if self.persona.as_ref().is_some_and(|p| p.trim().is_empty()) {
            return Err("tool-subagent: persona is empty".into());
        }
        Ok(Capabilities {
            persona: self.persona.clone(),
            tool_filter: self.tool_filter.clone(),
            output_schema: self.output_schema.clone(),
        })
    }
}

fn yes() -> bool {
    true
}

impl Default for SubagentToolsConfig {
    fn default() -> Self {
        Self {
            fork: true,
            control: true,
            enable_run_in_background: true,
            background_mode: BackgroundMode::OneShot,
            tool_name: default_tool_name(),
            persona: None,
            tool_filter: None,
            output_schema: None,
        }
    }
}

/// Registers `subagent`, and unless disabled `subagent_fork`, `list_agents` and
/// `interrupt_agent`, while a `subagents` service exists.
#[derive(Debug)]
pub struct SubagentToolsPlugin;

impl Plugin for SubagentToolsPlugin {
    const NAME: &'static str = "tool-subagent";
    type Config = SubagentToolsConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>(), Dep::on::<dyn Subagents>()]
    }

    async fn apply(ctx: Ctx, config: SubagentToolsConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        let subagents = ctx.dep::<dyn Subagents>()?;
        let capabilities = config.capabilities()?;
        let background = |tool: DelegateTool| {
            let tool = if config.enable_run_in_background {
                tool.with_background(ctx.clone())
            } else {
                tool
            };
            let tool = tool.with_capabilities(capabilities.clone());
            match config.background_mode {
                BackgroundMode::OneShot => tool,
                BackgroundMode::Continuable => tool.continuable(),
            }
        };
        tools.register(
            &ctx,
            Arc::new(background(
                DelegateTool::spawn(subagents.clone()).named(config.tool_name.clone()),
            )),
        )?;
        if config.fork {
            tools.register(
                &ctx,
                Arc::new(background(DelegateTool::fork(subagents.clone()))),
            )?;
        }
        if config.control {
            tools.register(&ctx, Arc::new(InterruptAgentTool::new(subagents.clone())))?;
            tools.register(&ctx, Arc::new(SendMessageTool::new(subagents.clone())))?;
            tools.register(&ctx, Arc::new(ListAgentsTool::new(subagents)))?;
        }
        Ok(())
    }
}
