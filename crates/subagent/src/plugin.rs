//! The `subagents` plugin: provides the in-process [`Subagents`] service.

use std::sync::Arc;

use dsh_agent::Agents;
use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_session::Sessions;
use serde::Deserialize;

use crate::Subagents;
use crate::inprocess::{InProcessSubagents, Provider};

/// Config of the `subagents` plugin.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SubagentsConfig {
    /// Deepest delegation allowed (a top-level session is 0; its children are 1). Default 3.
    #[serde(default = "default_max_depth")]
    pub max_depth: u64,
    /// Children one agent may run at once; further delegations wait for a slot. Default 8.
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent: usize,
}

fn default_max_depth() -> u64 {
    3
}

fn default_max_concurrent() -> usize {
    8
}

impl Default for SubagentsConfig {
    fn default() -> Self {
        Self {
            max_depth: default_max_depth(),
            max_concurrent: default_max_concurrent(),
        }
    }
}

/// The `subagents` plugin (provider names `spawn` and `fork`, both in process).
#[derive(Debug)]
pub struct SubagentsPlugin;

impl Plugin for SubagentsPlugin {
    const NAME: &'static str = "subagents";
    type Config = SubagentsConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Agents>(), Dep::on::<dyn Sessions>()]
    }

    async fn apply(ctx: Ctx, config: SubagentsConfig) -> Result<(), BoxError> {
        let agents = ctx.dep::<dyn Agents>()?;
        let sessions = ctx.dep::<dyn Sessions>()?;
        crate::repair::install(&ctx, sessions.clone())?;
        let provider = Arc::new(InProcessSubagents::new(
            ctx.clone(),
            agents,
            sessions,
            config.max_depth,
            config.max_concurrent,
        ));
        // A parent being torn down cancels its live children (their runs end `aborted`).
        let p = provider.clone();
        ctx.on::<dsh_agent::events::AgentDisposing>(move |ev| {
            p.parent_disposing(&ev.agent_id);
            Ok(())
        })?;
        let service: Arc<dyn Subagents> = Arc::new(Provider(provider));
        ctx.provide::<dyn Subagents>(service)?;
        Ok(())
    }
}
