//! `dsh-llm-http`: the HTTP/SSE attempt engine shared by dsh's dialect adapters
//! (`dsh-llm-openai`, `dsh-llm-anthropic`).
//!
//! An adapter owns its dialect (the request body and a [`Decoder`] of SSE events into
//! [`dsh_llm::StreamChunk`]s); this crate owns everything that is the same for every dialect:
//!
//! - [`credential`]: the API key from config or an environment variable, read per request,
//!   held as a [`secrecy::SecretString`] and never echoed.
//! - [`errors`]: HTTP status and error body → [`dsh_llm::FailureCode`] (OpenAI and Anthropic
//!   error envelopes), `Retry-After`.
//! - [`transport`]: one attempt: send, the four time budgets (connect, idle watchdog, progress,
//!   total), prompt cancellation, the body read to its end so the keep-alive connection is
//!   reused, and the stream contract (nothing after `finish`).

pub mod credential;
pub mod errors;
pub mod pool;
pub mod transport;

pub use credential::{ApiKey, EnvFn, KeyStyle, process_env, resolve_key};
pub use errors::{classify, parse_retry_after};
pub use transport::{
    Attempt, Decoder, HttpClient, Progress, Timeouts, base_headers, build_client,
    install_crypto_provider, malformed, start,
};
