//! `dsh-llm-deepseek`: the DeepSeek chat-completions adapter, hand-written over the shared
//! HTTP/SSE engine `dsh-llm-http`.
//!
//! - [`request`]: byte-deterministic request bodies (`reasoning_content` replayed verbatim,
//!   `content` never null, tool results as `tool` messages).
//! - [`translate`]: DeepSeek SSE chunks → [`dsh_llm::StreamChunk`]s.
//! - [`client`]: [`DeepSeekAdapter`]: credentials (never printed), base URL, live config, the
//!   body cache; each attempt runs on `dsh-llm-http`'s engine (connect timeout, idle watchdog,
//!   progress and total deadlines, prompt cancellation, error mapping, connection reuse).
//! - [`plugin`]: [`DeepSeekPlugin`], registering route `deepseek` on the `llm` service.
//!
//! Wire reference: `docs/wire-protocol.md`.

pub mod client;
pub mod config;
pub mod plugin;
pub mod request;
pub mod translate;

pub use client::{
    AdapterError, DeepSeekAdapter, EnvFn, Timeouts, install_crypto_provider, process_env,
};
pub use config::{ApiKey, DeepSeekConfig, ModelEntry, ThinkingMode, default_catalog};
/// HTTP failure classification and `Retry-After` (the shared engine's).
pub use dsh_llm_http::errors;
pub use plugin::DeepSeekPlugin;
pub use request::BodyOptions;
pub use translate::{Progress, Translator};
