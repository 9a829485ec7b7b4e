//! Plugin `deepseek`: builds the adapter from its config and registers its route on `llm`.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_llm::Llm;

use crate::client::DeepSeekAdapter;
use crate::config::{DEFAULT_ROUTE, DeepSeekConfig};

/// Registers the DeepSeek adapter for route `deepseek` (or the configured route). The route is
/// owned by this plugin's fiber: a config change restarts the plugin and re-registers it.
pub struct DeepSeekPlugin;

impl Plugin for DeepSeekPlugin {
    const NAME: &'static str = "deepseek";
    type Config = DeepSeekConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Llm>()]
    }

    async fn apply(ctx: Ctx, config: DeepSeekConfig) -> Result<(), BoxError> {
        let adapter = DeepSeekAdapter::new(&config)?;
        let route = config.route.as_deref().unwrap_or(DEFAULT_ROUTE);
        ctx.dep::<dyn Llm>()?
            .register(&ctx, route, Arc::new(adapter))?;
        tracing::debug!(route, "DeepSeek adapter registered");
        Ok(())
    }
}
