//! The `tool-todo` plugin.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_tools::Tools;
use serde::Deserialize;

use crate::TodoWriteTool;

/// Config of the `tool-todo` plugin.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TodoToolConfig {
    /// Allow more than one item `in_progress` at once (default true, as the original).
    #[serde(default = "yes")]
    pub allow_parallel_in_progress: bool,
}

fn yes() -> bool {
    true
}

impl Default for TodoToolConfig {
    fn default() -> Self {
        Self {
            allow_parallel_in_progress: true,
        }
    }
}

/// Registers `todo_write` while a `tools` service exists.
#[derive(Debug)]
pub struct TodoToolPlugin;

impl Plugin for TodoToolPlugin {
    const NAME: &'static str = "tool-todo";
    type Config = TodoToolConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>()]
    }

    async fn apply(ctx: Ctx, config: TodoToolConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        tools.register(
            &ctx,
            Arc::new(TodoWriteTool::new(
                ctx.clone(),
                config.allow_parallel_in_progress,
            )),
        )?;
        Ok(())
    }
}
