//! Plugin `openai-compatible`: one provider row = one adapter registered on its route.

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_llm::Llm;

use crate::adapter::OpenAiAdapter;
use crate::config::{DEFAULT_ROUTE, OpenAiConfig};

/// Registers an OpenAI-compatible adapter for the row's `route` (default
/// `openai-compatible`). Mount several rows (distinct ids and routes) for several endpoints.
pub struct OpenAiPlugin;

impl Plugin for OpenAiPlugin {
    const NAME: &'static str = "openai-compatible";
    type Config = OpenAiConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Llm>()]
    }

    async fn apply(ctx: Ctx, config: OpenAiConfig) -> Result<(), BoxError> {
        let adapter = OpenAiAdapter::new(&config)?
            .with_attachments(dsh_llm::attachments::service_lookup(&ctx));
        let route = config.route.as_deref().unwrap_or(DEFAULT_ROUTE);
        ctx.dep::<dyn Llm>()?
            .register(&ctx, route, Arc::new(adapter))?;
        tracing::debug!(route, "OpenAI-compatible adapter registered");
        Ok(())
    }
}
