//! The `tool-workflow` plugin.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_session::CoreEvent;
use dsh_session::plugin::SessionEvent;
use dsh_subagent_api::Subagents;
use dsh_subagent_api::events::SubagentStarted;
use dsh_tools::Tools;

use crate::config::{NEVER_SCRIPTED, WorkflowConfig};
use crate::error::ConfigError;
use crate::run::StartRegistry;
use crate::tool::WorkflowTool;

/// Registers `workflow` while a `subagents` service exists.
#[derive(Debug)]
pub struct WorkflowToolPlugin;

fn check(config: &WorkflowConfig) -> Result<(), ConfigError> {
    if let Some(t) = config
        .tools
        .iter()
        .find(|t| NEVER_SCRIPTED.contains(&t.as_str()))
    {
        return Err(ConfigError::NotReadOnly(t.clone()));
    }
    for (name, value) in [
        ("maxWallMs", config.max_wall_ms),
        ("maxMemoryBytes", config.max_memory_bytes),
        ("maxStackBytes", config.max_stack_bytes),
        ("maxAgents", config.max_agents),
        ("maxTokens", config.max_tokens),
    ] {
        if value == 0 {
            return Err(ConfigError::Zero(name));
        }
    }
    Ok(())
}

impl Plugin for WorkflowToolPlugin {
    const NAME: &'static str = "tool-workflow";
    type Config = WorkflowConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>(), Dep::on::<dyn Subagents>()]
    }

    async fn apply(ctx: Ctx, config: WorkflowConfig) -> Result<(), BoxError> {
        check(&config)?;
        let tools = ctx.dep::<dyn Tools>()?;
        let subagents = ctx.dep::<dyn Subagents>()?;
        let starts = Arc::new(StartRegistry::default());
        {
            let starts = starts.clone();
            ctx.on::<SubagentStarted>(move |e| {
                starts.started(&e.parent_id, &e.label, &e.child_id);
                Ok(())
            })?;
        }
        {
            // A running child's usage counts toward its run's maxTokens as each response ends.
            let starts = starts.clone();
            ctx.on::<SessionEvent>(move |e| {
                if let Some(CoreEvent::AssistantMessage(m)) = e.event.core()
                    && let Some(u) = &m.usage
                {
                    starts.usage(
                        &e.session_id,
                        u.input_tokens.saturating_add(u.output_tokens),
                    );
                }
                Ok(())
            })?;
        }
        tools.register(
            &ctx,
            Arc::new(WorkflowTool::new(ctx.clone(), subagents, starts, config)),
        )?;
        Ok(())
    }
}
