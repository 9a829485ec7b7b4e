//! Plugin configuration, credentials and the model catalog (configuration data, never an enum).

use dsh_llm::{ModelPricing, SystemPromptUpdate, ToolUpdate, UsdPerMTok};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
/// Environment variable holding the API key (unless the config names another).
pub const API_KEY_ENV: &str = "DEEPSEEK_API_KEY";
/// Environment variable overriding the base URL.
pub const BASE_URL_ENV: &str = "DEEPSEEK_BASE_URL";
/// Default route: the original harness's provider id, so a session moved between the two keeps
/// its provider (and does not read as a model change).
pub const DEFAULT_ROUTE: &str = "deepseek-official";
/// Extra routes of the default registration (dsh's earlier id; logs written with it resume).
pub const DEFAULT_ALIASES: [&str; 1] = ["deepseek"];
/// Default model id.
pub const DEFAULT_MODEL: &str = "deepseek-flash";

pub use dsh_llm_http::ApiKey;

/// `thinking: disabled` locks the route to effort `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingMode {
    /// Efforts `off|low|high|max` (default `high`).
    Enabled,
    /// Only `off` is accepted; other efforts fail with `UNSUPPORTED_REASONING_EFFORT`.
    Disabled,
}

/// One catalog entry.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelEntry {
    /// Model id sent on the wire.
    pub id: String,
    /// Context window in tokens.
    pub context_window: u64,
    /// `max_tokens` sent when the caller sets none.
    pub default_max_tokens: u64,
    /// Largest accepted `max_tokens`.
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// Whether the model accepts images.
    #[serde(default)]
    pub vision: bool,
    /// `in-history`: a changed system prompt may be appended as a later system message
    /// (session-format §10). Default: absent (the prompt is consolidated at the head).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub system_prompt_update: Option<SystemPromptUpdate>,
    /// `addition-only` or `in-history`: how tool-set changes reach the model
    /// (session-format §9.7). Default: absent (developer messages are dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub tool_update: Option<ToolUpdate>,
    /// Prices in USD per million tokens (`cacheHitInput`, `cacheMissInput`, `output`, optional
    /// `cacheWriteInput` and an `offPeak` window in UTC with its own rates); front ends compute
    /// the session cost from them. Absent: no cost is shown for this model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<ModelPricing>,
}

/// DeepSeek's list prices per million tokens (cache hit $0.028, cache miss $0.28, output
/// $0.42): the defaults of the catalog's entries. DeepSeek's current list has no off-peak
/// discount (its former 16:30–00:30 UTC window ended with the V3.2 prices) and bills no cache
/// writes; configure an entry's `pricing.offPeak` if a window returns.
pub const LIST_PRICES: ModelPricing = ModelPricing::new(
    UsdPerMTok::from_micros(28_000),
    UsdPerMTok::from_micros(280_000),
    UsdPerMTok::from_micros(420_000),
);

/// The default catalog (`wire-protocol.md` §2): 1M context, 384K output, upstream's 256000
/// default `max_tokens`; images on `deepseek-flash` only.
pub fn default_catalog() -> Vec<ModelEntry> {
    vec![
        ModelEntry {
            id: "deepseek-flash".into(),
            context_window: 1_000_000,
            default_max_tokens: 256_000,
            max_output_tokens: Some(393_216),
            vision: true,
            system_prompt_update: None,
            tool_update: None,
            pricing: Some(LIST_PRICES),
        },
        ModelEntry {
            id: "deepseek-v4-pro".into(),
            context_window: 1_000_000,
            default_max_tokens: 256_000,
            max_output_tokens: Some(393_216),
            vision: false,
            system_prompt_update: None,
            tool_update: None,
            pricing: Some(LIST_PRICES),
        },
    ]
}

/// Configuration of the `deepseek` plugin. Every field is optional.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeepSeekConfig {
    /// Provider route to register (default `deepseek-official`).
    #[serde(default)]
    pub route: Option<String>,
    /// More routes for the same adapter (default `["deepseek"]` with the default route, none
    /// with a configured one).
    #[serde(default)]
    pub aliases: Option<Vec<String>>,
    /// API key; default: the environment variable `apiKeyEnv`, read per request.
    #[serde(default)]
    pub api_key: Option<ApiKey>,
    /// Environment variable holding the key (default `DEEPSEEK_API_KEY`).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Base URL; default `DEEPSEEK_BASE_URL`, else `https://api.deepseek.com`.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Model used when the caller names none (default `deepseek-flash`).
    #[serde(default)]
    pub default_model: Option<String>,
    /// Model catalog; replaces the default catalog when set. Unknown ids still pass through.
    #[serde(default)]
    pub models: Option<Vec<ModelEntry>>,
    /// Deployment lock: `disabled` allows only effort `off`.
    #[serde(default)]
    pub thinking: Option<ThinkingMode>,
    /// Send `reasoning_content: ""` on assistant messages without reasoning in thinking mode.
    #[serde(default)]
    pub reasoning_placeholder: bool,
    /// Connect timeout (default 10 000 ms).
    #[serde(default)]
    pub connect_timeout_ms: Option<u64>,
    /// Idle read watchdog, re-armed by any byte (default 300 000 ms).
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    /// Progress deadline, re-armed by data events only (default 660 000 ms).
    #[serde(default)]
    pub progress_timeout_ms: Option<u64>,
    /// Total attempt deadline from send, never extended (default 3 600 000 ms).
    #[serde(default)]
    pub total_timeout_ms: Option<u64>,
    /// Cap on one SSE event (default 8 MiB).
    #[serde(default)]
    pub max_event_bytes: Option<usize>,
}
