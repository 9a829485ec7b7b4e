//! Plugin `deepseek`: builds the adapter from its config and registers its route on `llm`.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_llm::Llm;

use crate::client::DeepSeekAdapter;
use crate::config::{DEFAULT_ALIASES, DEFAULT_ROUTE, DeepSeekConfig};

/// Registers the DeepSeek adapter for route `deepseek-official` and its alias `deepseek` (or the
/// configured route and aliases), owned by this
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
        let adapter = adapter.with_attachments(dsh_llm::attachments::service_lookup(&ctx));
        let route = config.route.as_deref().unwrap_or(DEFAULT_ROUTE);
        let aliases: Vec<String> = match (&config.aliases, &config.route) {
            (Some(a), _) => a.clone(),
            (None, None) => DEFAULT_ALIASES.iter().map(|a| (*a).to_owned()).collect(),
            (None, Some(_)) => Vec::new(),
        };
        let llm = ctx.dep::<dyn Llm>()?;
        let adapter: Arc<DeepSeekAdapter> = Arc::new(adapter);
        llm.register(&ctx, route, adapter.clone())?;
        for alias in aliases.iter().filter(|a| a.as_str() != route) {
            llm.register(&ctx, alias, adapter.clone())?;
        }
        tracing::debug!(route, ?aliases, "DeepSeek adapter registered");
        Ok(())
    }
}
