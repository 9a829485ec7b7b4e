//! Plugin `anthropic`: builds the adapter from its config and registers its route on `llm`.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_llm::Llm;

use crate::adapter::AnthropicAdapter;
use crate::config::AnthropicConfig;

/// Registers the Messages adapter for its flavor's route (`deepseek-anthropic` or
/// `anthropic`) or the configured one. A config change restarts the plugin.
pub struct AnthropicPlugin;

impl Plugin for AnthropicPlugin {
    const NAME: &'static str = "anthropic";
    type Config = AnthropicConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Llm>()]
    }

    async fn apply(ctx: Ctx, config: AnthropicConfig) -> Result<(), BoxError> {
        let adapter = AnthropicAdapter::new(&config)?
            .with_attachments(dsh_llm::attachments::service_lookup(&ctx));
        let route = config
            .route
            .clone()
            .unwrap_or_else(|| config.flavor.route().to_owned());
        ctx.dep::<dyn Llm>()?
            .register(&ctx, &route, Arc::new(adapter))?;
        tracing::debug!(route, "Messages adapter registered");
        Ok(())
    }
}
