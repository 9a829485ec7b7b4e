//! Provider rows: base URL, key variable, headers, reasoning dialect and model catalog.

use std::collections::BTreeMap;

use dsh_llm::{ModelPricing, SystemPromptUpdate, ToolUpdate};
pub use dsh_llm_http::ApiKey;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default route.
pub const DEFAULT_ROUTE: &str = "openai-compatible";
/// Default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Default base URL variable.
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";
/// Default key variable.
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// Which member carries reasoning back to the endpoint on assistant turns. Every dialect is
/// *read* from the stream whatever this says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningPassBack {
    /// `reasoning_content` (DeepSeek, vLLM, SGLang, Qwen): the text, byte-exact.
    ReasoningContent,
    /// `reasoning` (OpenRouter's plain form, Ollama, llama.cpp): the text, byte-exact.
    Reasoning,
    /// `reasoning_details` (OpenRouter): the structured items as streamed (signatures and
    /// encrypted items included), replayed unchanged from the replay state.
    ReasoningDetails,
    /// Not sent back (endpoints that reject unknown members; OpenAI itself).
    #[default]
    None,
}

/// How an effort reaches the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EffortParam {
    /// `reasoning_effort: "low"|"high"` (`off` omits it).
    #[default]
    ReasoningEffort,
    /// OpenRouter's `reasoning: {"effort": …}` (`off` → `{"enabled": false}`).
    Reasoning,
    /// Never sent (the route offers no efforts).
    None,
}

/// Which member caps the output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensParam {
    /// `max_tokens`.
    #[default]
    MaxTokens,
    /// `max_completion_tokens` (OpenAI's current name).
    MaxCompletionTokens,
}

/// One catalog entry.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelEntry {
    /// Model id sent on the wire.
    pub id: String,
    /// Context window in tokens.
    pub context_window: u64,
    /// Output cap sent when the caller sets none.
    pub default_max_tokens: u64,
    /// Largest accepted output cap.
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// Whether the model reasons (efforts `off|low|high` offered; default effort `high`).
    #[serde(default)]
    pub reasoning: bool,
    /// Whether the model accepts images (sent as `image_url` parts with `data:` URLs).
    #[serde(default)]
    pub vision: bool,
    /// `in-history` when a changed system prompt may be appended later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub system_prompt_update: Option<SystemPromptUpdate>,
    /// How tool-set changes reach the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub tool_update: Option<ToolUpdate>,
    /// Prices in USD per million tokens (`cacheHitInput`, `cacheMissInput`, `output`, optional
    /// `cacheWriteInput` and an `offPeak` window in UTC with its own rates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<ModelPricing>,
}

/// Configuration of one `openai-compatible` row. Mount one row per endpoint (each with its own
/// `route`): a local vLLM, Ollama, OpenRouter...
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OpenAiConfig {
    /// Provider route (default `openai-compatible`).
    #[serde(default)]
    pub route: Option<String>,
    /// Provider name in messages (default `OpenAI-compatible`).
    #[serde(default)]
    pub label: Option<String>,
    /// Base URL (`/chat/completions` is appended); default `baseUrlEnv`, else
    /// `https://api.openai.com/v1`.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Variable read for the base URL when `baseUrl` is unset (default `OPENAI_BASE_URL`).
    #[serde(default)]
    pub base_url_env: Option<String>,
    /// API key; default: `apiKeyEnv`, read per request.
    #[serde(default)]
    pub api_key: Option<ApiKey>,
    /// Variable holding the key (default `OPENAI_API_KEY`).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Send no `Authorization` when no key is set (local servers). Default false: a missing key
    /// is `MISSING_CREDENTIAL`.
    #[serde(default)]
    pub key_optional: bool,
    /// Extra headers (e.g. OpenRouter's `HTTP-Referer`, `X-Title`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Model used when the caller names none (default: the first catalog entry, else
    /// `gpt-4o-mini`).
    #[serde(default)]
    pub default_model: Option<String>,
    /// The catalog (unknown ids pass through: 128K context, 16K output, no efforts).
    #[serde(default)]
    pub models: Vec<ModelEntry>,
    /// Which member carries reasoning back.
    #[serde(default)]
    pub reasoning_pass_back: ReasoningPassBack,
    /// How efforts reach the wire.
    #[serde(default)]
    pub effort_param: EffortParam,
    /// Which member caps the output.
    #[serde(default)]
    pub max_tokens_param: MaxTokensParam,
    /// Send `stream_options: {"include_usage": true}` (default true; some servers reject it).
    #[serde(default)]
    pub stream_usage: Option<bool>,
    /// Connect timeout (default 10 000 ms).
    #[serde(default)]
    pub connect_timeout_ms: Option<u64>,
    /// Idle read watchdog (default 300 000 ms).
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    /// Progress deadline (default 660 000 ms).
    #[serde(default)]
    pub progress_timeout_ms: Option<u64>,
    /// Total attempt deadline (default 3 600 000 ms).
    #[serde(default)]
    pub total_timeout_ms: Option<u64>,
    /// Cap on one SSE event (default 8 MiB).
    #[serde(default)]
    pub max_event_bytes: Option<usize>,
}
