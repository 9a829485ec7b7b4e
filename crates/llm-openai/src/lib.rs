//! `dsh-llm-openai`: an OpenAI-compatible chat-completions adapter for any base URL (vLLM,
//! llama.cpp, Ollama, OpenRouter, OpenAI), configured per provider row.
//!
//! - [`config`]: the row: base URL and its variable, key and its variable (optional for local
//!   servers), extra headers, catalog, the reasoning pass-back dialect, the effort and output-cap
//!   members.
//! - [`request`]: byte-deterministic bodies; raw tool-argument strings sent unchanged;
//!   reasoning passed back as `reasoning_content`, `reasoning` or `reasoning_details`.
//! - [`decode`]: SSE chunks → [`dsh_llm::StreamChunk`]s reading all three reasoning dialects.
//! - [`replay`]: the replay state keeping `reasoning_details` items.
//! - [`adapter`]: [`OpenAiAdapter`] over the shared `dsh-llm-http` engine.
//! - [`plugin`]: [`OpenAiPlugin`] (`openai-compatible`).

pub mod adapter;
pub mod config;
pub mod decode;
pub mod plugin;
pub mod replay;
pub mod request;

pub use adapter::{AdapterError, OpenAiAdapter};
pub use config::{EffortParam, MaxTokensParam, ModelEntry, OpenAiConfig, ReasoningPassBack};
pub use decode::OpenAiDecoder;
pub use plugin::OpenAiPlugin;
