//! The `tool-subagent` plugin.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_subagent::Subagents;
use dsh_tools::Tools;
use serde::Deserialize;

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
        let background = |tool: DelegateTool| {
            if config.enable_run_in_background {
                tool.with_background(ctx.clone())
            } else {
                tool
            }
        };
        tools.register(
            &ctx,
            Arc::new(background(DelegateTool::spawn(subagents.clone()))),
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
