//! `dsh-llm-anthropic`: the Anthropic Messages adapter, for DeepSeek's Anthropic-compatible
//! endpoint (`https://api.deepseek.com/anthropic`, what the original harness 0.2.1 speaks) and for
//! Anthropic itself.
//!
//! - [`config`]: the plugin config; [`Flavor`] picks route, base URL, key variable, thinking
//!   style, cache breakpoints and catalog.
//! - [`request`]: byte-deterministic bodies (thinking replayed with its signature, `tool_use`
//!   inputs as the raw argument strings, tool results as `tool_result` blocks, breakpoints).
//! - [`decode`]: SSE events → [`dsh_llm::StreamChunk`]s, usage with cache reads and writes.
//! - [`replay`]: the `replayState` that carries signatures from one request to the next.
//! - [`adapter`]: [`AnthropicAdapter`] over the shared `dsh-llm-http` engine.
//! - [`plugin`]: [`AnthropicPlugin`] (`anthropic`).

pub mod adapter;
pub mod config;
pub mod decode;
pub mod plugin;
pub mod replay;
pub mod request;

pub use adapter::{AdapterError, AnthropicAdapter, endpoint_of};
pub use config::{AnthropicConfig, Flavor, ModelEntry, ThinkingStyle};
pub use decode::AnthropicDecoder;
pub use plugin::AnthropicPlugin;
pub use replay::ReplayState;
