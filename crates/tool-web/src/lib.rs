//! `dsh-tool-web`: `web_fetch` and `web_search` (plugin `tool-web`).
//!
//! - [`WebFetchTool`]: an http(s) URL as text — HTML converted to markdown (`htmd`), other
//!   text as is, binary refused — with bounded, re-checked redirects (a loop is refused), size
//!   and time limits, no proxy, and the SSRF guard of [`guard`]: loopback, private, link-local,
//!   shared and other non-public addresses (mapped IPv6 forms included) are refused unless
//!   `allowPrivateNetwork` is configured, checked before each hop and enforced by the client's
//!   own resolver on every connection.
//! - [`WebSearchTool`]: declared only when `search` is configured and its key variable is set.
//!
//! Both follow the sandbox's network policy (refused, `WEB_NETWORK_DISABLED` / a
//! `tools/pre-execute` denial, when the call's policy has no network) and go through the
//! approval seam like other side-effecting tools.

mod fetch;
pub mod guard;
mod network;
mod search;

pub use fetch::{
    FetchConfig, WEB_FETCH_BINARY, WEB_FETCH_FAILED, WEB_FETCH_HTTP, WEB_FETCH_INVALID_URL,
    WEB_FETCH_REFUSED, WebFetchTool, html_to_markdown,
};
pub use network::{WEB_NETWORK_DISABLED, refusal_text};
pub use search::{SearchConfig, WEB_SEARCH_FAILED, WebSearchTool};

use std::sync::Arc;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_tools::{Tool, Tools};
use serde::Deserialize;

/// Config of the `tool-web` plugin.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WebToolsConfig {
    /// `web_fetch`'s limits and address policy.
    #[serde(default)]
    pub fetch: FetchConfig,
    /// The search API of `web_search` (absent: the tool is not declared).
    #[serde(default)]
    pub search: Option<SearchConfig>,
}

/// Registers `web_fetch` (unless disabled) and, when configured, `web_search`.
#[derive(Debug)]
pub struct WebToolsPlugin;

impl Plugin for WebToolsPlugin {
    const NAME: &'static str = "tool-web";
    type Config = WebToolsConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>()]
    }

    async fn apply(ctx: Ctx, config: WebToolsConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        let mut names = Vec::new();
        if config.fetch.enabled {
            let tool = WebFetchTool::new(config.fetch.clone())?.with_sandbox_lookup(ctx.clone());
            names.push(tool.name().to_owned());
            tools.register(&ctx, Arc::new(tool))?;
        }
        if let Some(search) = config.search
            && let Some(tool) = WebSearchTool::from_env(search)?
        {
            let tool = tool.with_sandbox_lookup(ctx.clone());
            names.push(tool.name().to_owned());
            tools.register(&ctx, Arc::new(tool))?;
        }
        if !names.is_empty() {
            network::hook(&ctx, names, network::NetworkPolicy::from_ctx(ctx.clone()))?;
        }
        Ok(())
    }
}
