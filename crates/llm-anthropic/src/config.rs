//! Plugin configuration: two flavors (DeepSeek's Anthropic endpoint, Anthropic itself) that set
//! the defaults, and the model catalog (configuration data, never an enum).

use std::collections::BTreeMap;

use dsh_llm::{ModelPricing, SystemPromptUpdate, ToolUpdate, UsdPerMTok};
pub use dsh_llm_http::ApiKey;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which service the route speaks to; it picks every default below.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// DeepSeek's Anthropic-compatible endpoint: route `deepseek-anthropic`, base
    /// `DEEPSEEK_ANTHROPIC_BASE_URL` else `https://api.deepseek.com/anthropic`, key
    /// `DEEPSEEK_API_KEY`, thinking by effort (`output_config.effort`), no cache breakpoints
    /// (DeepSeek caches every prefix by itself), the DeepSeek catalog.
    #[default]
    Deepseek,
    /// Anthropic: route `anthropic`, base `ANTHROPIC_BASE_URL` else `https://api.anthropic.com`,
    /// key `ANTHROPIC_API_KEY`, thinking by token budget, cache breakpoints, the Claude catalog.
    Anthropic,
}

impl Flavor {
    /// Default route.
    pub fn route(self) -> &'static str {
        match self {
            Flavor::Deepseek => "deepseek-anthropic",
            Flavor::Anthropic => "anthropic",
        }
    }
    /// Default base URL.
    pub fn base_url(self) -> &'static str {
        match self {
            Flavor::Deepseek => "https://api.deepseek.com/anthropic",
            Flavor::Anthropic => "https://api.anthropic.com",
        }
    }
    /// Environment variable overriding the base URL.
    pub fn base_url_env(self) -> &'static str {
        match self {
            Flavor::Deepseek => "DEEPSEEK_ANTHROPIC_BASE_URL",
            Flavor::Anthropic => "ANTHROPIC_BASE_URL",
        }
    }
    /// Environment variable holding the key.
    pub fn api_key_env(self) -> &'static str {
        match self {
            Flavor::Deepseek => "DEEPSEEK_API_KEY",
            Flavor::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
    /// Provider name in messages.
    pub fn label(self) -> &'static str {
        match self {
            Flavor::Deepseek => "DeepSeek (Anthropic API)",
            Flavor::Anthropic => "Anthropic",
        }
    }
    /// Default model.
    pub fn default_model(self) -> &'static str {
        match self {
            Flavor::Deepseek => "deepseek-flash",
            Flavor::Anthropic => "claude-sonnet-4-5",
        }
    }
    /// Default thinking style.
    pub fn thinking(self) -> ThinkingStyle {
        match self {
            Flavor::Deepseek => ThinkingStyle::Effort,
            Flavor::Anthropic => ThinkingStyle::Budget,
        }
    }
    /// Whether cache breakpoints are placed by default.
    pub fn cache_breakpoints(self) -> bool {
        matches!(self, Flavor::Anthropic)
    }
    /// `replayState.response.kind` of this flavor's assistant messages (DeepSeek's is the one
    /// the original harness writes, so its logs and ours replay each other's signatures).
    pub fn replay_kind(self) -> &'static str {
        match self {
            Flavor::Deepseek => "deepseek-messages",
            Flavor::Anthropic => "anthropic-messages",
        }
    }
    /// The built-in catalog.
    pub fn catalog(self) -> Vec<ModelEntry> {
        match self {
            Flavor::Deepseek => deepseek_catalog(),
            Flavor::Anthropic => anthropic_catalog(),
        }
    }
}

/// How an effort becomes the `thinking` member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingStyle {
    /// `thinking {"type":"enabled"}` + `output_config {"effort"}` (DeepSeek; `off` → disabled).
    Effort,
    /// `thinking {"type":"enabled","budget_tokens":N}`: `low` 4096, `high` 16384, `max` 32768
    /// (capped below `max_tokens`); `off` → no `thinking` member.
    Budget,
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
    /// `in-history`: a changed system prompt may be appended as a later `system` message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub system_prompt_update: Option<SystemPromptUpdate>,
    /// How tool-set changes reach the model (absent: declarations are replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub tool_update: Option<ToolUpdate>,
    /// Prices in USD per million tokens (`cacheHitInput`, `cacheMissInput`, `output`, optional
    /// `cacheWriteInput` and an `offPeak` window in UTC with its own rates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<ModelPricing>,
}

const fn usd(micros: u64) -> UsdPerMTok {
    UsdPerMTok::from_micros(micros)
}

/// DeepSeek's list prices per million tokens (hit $0.028, miss $0.28, output $0.42).
pub const DEEPSEEK_PRICES: ModelPricing =
    ModelPricing::new(usd(28_000), usd(280_000), usd(420_000));

/// The DeepSeek catalog as the original 0.2.1 declares it on this endpoint: 1M context, 256000
/// default `max_tokens`; `deepseek-flash` takes a changed system prompt in history and tool
/// additions as deferred declarations, `deepseek-v4-pro` neither. DeepSeek documents images on this
/// endpoint for neither model, so no entry declares them (their images become placeholders).
pub fn deepseek_catalog() -> Vec<ModelEntry> {
    vec![
        ModelEntry {
            id: "deepseek-flash".into(),
            context_window: 1_000_000,
            default_max_tokens: 256_000,
            max_output_tokens: Some(393_216),
            vision: false,
            system_prompt_update: Some(SystemPromptUpdate::InHistory),
            tool_update: Some(ToolUpdate::AdditionOnly),
            pricing: Some(DEEPSEEK_PRICES),
        },
        ModelEntry {
            id: "deepseek-v4-pro".into(),
            context_window: 1_000_000,
            default_max_tokens: 256_000,
            max_output_tokens: Some(393_216),
            vision: false,
            system_prompt_update: None,
            tool_update: None,
            pricing: Some(DEEPSEEK_PRICES),
        },
    ]
}

/// Claude models (images accepted) with Anthropic's list prices (cache hit = 0.1 × input, cache write (5-minute
/// TTL, the breakpoints this adapter places) = 1.25 × input).
pub fn anthropic_catalog() -> Vec<ModelEntry> {
    let entry = |id: &str, window, out, hit, miss, output| ModelEntry {
        id: id.into(),
        context_window: window,
        default_max_tokens: out,
        max_output_tokens: Some(out),
        vision: true,
        system_prompt_update: None,
        tool_update: None,
        pricing: Some(
            ModelPricing::new(usd(hit), usd(miss), usd(output))
                .with_cache_write(usd(miss + miss / 4)),
        ),
    };
    vec![
        entry(
            "claude-sonnet-4-5",
            200_000,
            64_000,
            300_000,
            3_000_000,
            15_000_000,
        ),
        entry(
            "claude-opus-4-5",
            200_000,
            64_000,
            500_000,
            5_000_000,
            25_000_000,
        ),
        entry(
            "claude-haiku-4-5",
            200_000,
            64_000,
            100_000,
            1_000_000,
            5_000_000,
        ),
    ]
}

/// Configuration of the `anthropic` plugin. Every field is optional; `flavor` picks the
/// defaults of the others.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AnthropicConfig {
    /// `deepseek` (default) or `anthropic`.
    #[serde(default)]
    pub flavor: Flavor,
    /// Provider route to register (default: the flavor's).
    #[serde(default)]
    pub route: Option<String>,
    /// API key; default: the environment variable `apiKeyEnv`, read per request.
    #[serde(default)]
    pub api_key: Option<ApiKey>,
    /// Environment variable holding the key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Base URL (`/v1/messages` is appended; `/v1` is not doubled).
    #[serde(default)]
    pub base_url: Option<String>,
    /// Environment variable overriding the base URL when `baseUrl` is unset.
    #[serde(default)]
    pub base_url_env: Option<String>,
    /// Model used when the caller names none.
    #[serde(default)]
    pub default_model: Option<String>,
    /// Model catalog; replaces the flavor's when set. Unknown ids still pass through.
    #[serde(default)]
    pub models: Option<Vec<ModelEntry>>,
    /// How efforts become `thinking`.
    #[serde(default)]
    pub thinking: Option<ThinkingStyle>,
    /// Place `cache_control` breakpoints (system, the previous request's end, the last block).
    #[serde(default)]
    pub cache_breakpoints: Option<bool>,
    /// `anthropic-version` header (default `2023-06-01`).
    #[serde(default)]
    pub anthropic_version: Option<String>,
    /// Extra headers sent on every request (e.g. `anthropic-beta`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Connect timeout (default 10 000 ms).
    #[serde(default)]
    pub connect_timeout_ms: Option<u64>,
    /// Idle read watchdog, re-armed by any byte (default 300 000 ms).
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    /// Progress deadline, re-armed by events only (default 660 000 ms).
    #[serde(default)]
    pub progress_timeout_ms: Option<u64>,
    /// Total attempt deadline (default 3 600 000 ms).
    #[serde(default)]
    pub total_timeout_ms: Option<u64>,
    /// Cap on one SSE event (default 8 MiB).
    #[serde(default)]
    pub max_event_bytes: Option<usize>,
}
