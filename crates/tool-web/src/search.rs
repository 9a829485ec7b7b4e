//! `web_search {queries}`: a search API configured by the user (Brave Search's web API shape:
//! `GET <endpoint>?q=…&count=N` with `X-Subscription-Token`, answering
//! `{web:{results:[{title,url,description}]}}`). Declared only when configured and its key is
//! in the environment; the key is never logged or shown.

use std::collections::HashSet;
use std::time::Duration;

use dsh_tools::{
    Concurrency, DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolErrorCode, ToolKind,
    ToolOutput,
};
use futures::future::BoxFuture;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::network::NetworkPolicy;

/// The search API failed.
pub const WEB_SEARCH_FAILED: ToolErrorCode = ToolErrorCode::tool_defined("WEB_SEARCH_FAILED");

const DESCRIPTION: &str = "Search the web with 1-4 queries; merged results (title, URL, snippet).";

/// Where `web_search` sends its queries.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SearchConfig {
    /// The search endpoint (default Brave Search's web search).
    #[serde(default = "default_endpoint")]
    pub endpoint: String,
    /// The environment variable holding the API key (default `BRAVE_SEARCH_API_KEY`).
    #[serde(default = "default_key_env")]
    pub api_key_env: String,
    /// Results per query (default 5).
    #[serde(default = "default_count")]
    pub results_per_query: u32,
    /// Budget of one query (default 15000 ms).
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
}

fn default_endpoint() -> String {
    "https://api.search.brave.com/res/v1/web/search".into()
}
fn default_key_env() -> String {
    "BRAVE_SEARCH_API_KEY".into()
}
fn default_count() -> u32 {
    5
}
fn default_timeout() -> u64 {
    15_000
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    web: Option<WebResults>,
}

#[derive(Deserialize)]
struct WebResults {
    #[serde(default)]
    results: Vec<Hit>,
}

#[derive(Deserialize)]
struct Hit {
    #[serde(default)]
    title: String,
    url: String,
    #[serde(default)]
    description: String,
}

/// The `web_search` tool.
pub struct WebSearchTool {
    client: reqwest::Client,
    config: SearchConfig,
    key: SecretString,
    parameters: Value,
    network: NetworkPolicy,
}

impl std::fmt::Debug for WebSearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSearchTool")
            .field("endpoint", &self.config.endpoint)
            .finish_non_exhaustive()
    }
}

impl WebSearchTool {
    /// The tool, when `config`'s key variable is set in the environment (`None` otherwise: the
    /// tool is then not declared at all).
    pub fn from_env(config: SearchConfig) -> Result<Option<Self>, reqwest::Error> {
        let Some(key) = std::env::var(&config.api_key_env)
            .ok()
            .filter(|k| !k.trim().is_empty())
        else {
            tracing::info!(
                env = %config.api_key_env,
                "web_search is configured but its key variable is unset: not declared"
            );
            return Ok(None);
        };
        let client = crate::fetch::client_builder()
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(Some(Self {
            client,
            config,
            key: SecretString::from(key),
            parameters: json!({
                "type": "object",
                "properties": {
                    "queries": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["queries"]
            }),
            network: NetworkPolicy::default(),
        }))
    }

    /// Builder: refuse calls whose sandbox policy (the `sandbox` service found through `ctx` at
    /// call time) has no network access (the plugin sets this).
    pub fn with_sandbox_lookup(mut self, ctx: dsh_kernel::Ctx) -> Self {
        self.network = NetworkPolicy::from_ctx(ctx);
        self
    }

    fn redact(&self, text: String) -> String {
        let k = self.key.expose_secret();
        if k.len() >= 4 {
            text.replace(k, "[redacted]")
        } else {
            text
        }
    }

    async fn query(&self, q: &str) -> Result<Vec<Hit>, ToolError> {
        let mut url = reqwest::Url::parse(&self.config.endpoint).map_err(|e| {
            ToolError::new(
                WEB_SEARCH_FAILED,
                format!(
                    "the search endpoint {:?} is not a URL: {e}",
                    self.config.endpoint
                ),
            )
        })?;
        url.query_pairs_mut()
            .append_pair("q", q)
            .append_pair("count", &self.config.results_per_query.to_string());
        let response = self
            .client
            .get(url)
            .header("X-Subscription-Token", self.key.expose_secret())
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(Duration::from_millis(self.config.timeout_ms))
            .send()
            .await
            .map_err(|e| {
                ToolError::new(
                    WEB_SEARCH_FAILED,
                    self.redact(format!("search for {q:?} failed: {}", e.without_url())),
                )
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(ToolError::new(
                WEB_SEARCH_FAILED,
                format!("search for {q:?} failed: HTTP {status}"),
            ));
        }
        let answer: Answer = response.json().await.map_err(|e| {
            ToolError::new(
                WEB_SEARCH_FAILED,
                self.redact(format!(
                    "search for {q:?}: unreadable answer: {}",
                    e.without_url()
                )),
            )
        })?;
        Ok(answer.web.map(|w| w.results).unwrap_or_default())
    }
}

/// The arguments of `web_search` (the schema checked their shape).
#[derive(Default, serde::Deserialize)]
struct SearchArgs {
    #[serde(default)]
    queries: Vec<String>,
}

/// The display of a `web_search` call: its queries.
pub fn search_display(call: &DisplayInput<'_>) -> ToolDisplay {
    let mut d = ToolDisplay::new(ToolKind::Fetch, "web_search");
    if let Some(a) = call.parse::<SearchArgs>() {
        d = d.with_subject(a.queries.join(" · "));
    }
    if let Some(r) = call.succeeded() {
        d = d.with_output(dsh_tools::display::output_head(r.text, 3));
    }
    d
}

impl Tool for WebSearchTool {
    fn name(&self) -> &str {
        "web_search"
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        search_display(call)
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            self.network.check(self.name(), &ctx)?;
            let args: SearchArgs = serde_json::from_value(args).unwrap_or_default();
            let queries: Vec<String> = args.queries.iter().map(|s| s.trim().to_owned()).collect();
            if queries.is_empty() || queries.len() > 4 || queries.iter().any(String::is_empty) {
                return Err(ToolError::invalid_args(
                    "`queries` must hold 1 to 4 non-empty strings",
                ));
            }
            let all = futures::future::join_all(queries.iter().map(|q| self.query(q)));
            let answers = tokio::select! {
                a = all => a,
                () = ctx.cancel_token().cancelled() => return Err(ToolError::aborted()),
            };
            let mut seen = HashSet::new();
            let mut lines = Vec::new();
            let mut failures = Vec::new();
            for (q, a) in queries.iter().zip(answers) {
                match a {
                    Ok(hits) => {
                        for h in hits {
                            if seen.insert(h.url.clone()) {
                                lines.push(format!(
                                    "{}. {}\n   {}\n   {}",
                                    lines.len() + 1,
                                    h.title.trim(),
                                    h.url,
                                    h.description.trim()
                                ));
                            }
                        }
                    }
                    Err(e) => failures.push((q.clone(), e)),
                }
            }
            if lines.is_empty() && !failures.is_empty() {
                return Err(failures.swap_remove(0).1);
            }
            let mut text = if lines.is_empty() {
                "No results.".to_owned()
            } else {
                lines.join("\n")
            };
            for (_, e) in failures {
                text.push_str(&format!("\n\n({})", e.message));
            }
            Ok(ToolOutput::text(text))
        })
    }
}
