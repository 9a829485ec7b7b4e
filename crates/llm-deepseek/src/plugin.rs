//! Plugin `deepseek`: builds the adapter from its config and registers its route on `llm`.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_llm::Llm;

use crate::client::DeepSeekAdapter;
use crate::config::{DEFAULT_ROUTE, DeepSeekConfig};

/// Registers the DeepSeek adapter for route `deepseek` (or the configured route), owned by this
/// plugin's fiber. Live config: a config update reaches the next request without
/// re-registration; an invalid snapshot (e.g. a bad base URL) is refused and the last good
/// settings stay. A changed `route` takes effect only when the plugin restarts.
pub struct DeepSeekPlugin;

impl Plugin for DeepSeekPlugin {
    const NAME: &'static str = "deepseek";
    type Config = DeepSeekConfig;
    const LIVE_CONFIG: bool = true;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Llm>()]
    }

    async fn apply(ctx: Ctx, config: DeepSeekConfig) -> Result<(), BoxError> {
        let mut adapter = DeepSeekAdapter::new(&config)?;
        if let Some(updates) = ctx.config_watch::<DeepSeekConfig>() {
            adapter = adapter.follow(updates);
        }
        let route = config.route.as_deref().unwrap_or(DEFAULT_ROUTE);
        ctx.dep::<dyn Llm>()?
            .register(&ctx, route, Arc::new(adapter))?;
        tracing::debug!(route, "DeepSeek adapter registered");
        Ok(())
    }
}
