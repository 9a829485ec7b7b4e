//! `dsh-testkit`: a scriptable, DeepSeek-shaped HTTP server for dsh's end-to-end tests.
//!
//! - [`MockServer`]: a real HTTP/1.1 server on `127.0.0.1` (ephemeral port) answering
//!   `POST /chat/completions` (and `/v1/…`, `/beta/…`) with scripted [`Reply`]s, in queue mode or
//!   responder mode, recording every request ([`RecordedRequest`]) with timings.
//! - [`Reply`] / [`Step`]: byte-level scripts: writes of chosen sizes (each flushed on its own),
//!   sleeps, keep-alive comments, gates, connection resets, stalls, any status and headers.
//! - [`Completion`]: DeepSeek-shaped SSE from a high-level description (reasoning, text, tool
//!   calls, usage, finish reason), shaped like `fixtures/deepseek/*.sse`.
//! - [`anthropic`]: the Anthropic Messages dialect (`POST /v1/messages`): replies, errors,
//!   request checks and prefix rules.
//! - [`openai`]: the OpenAI-compatible dialect: reasoning as `reasoning_content`, `reasoning`
//!   or `reasoning_details`; OpenAI's error wording.
//! - [`deepseek`]: DeepSeek's HTTP error replies (401, 402, 429 + `retry-after`, 400 context, 5xx).
//! - [`scenario`]: JSON/YAML scenario files, served by the `dsh-mock-llm` binary.
//! - [`validate`]: DeepSeek's request checks (opt-in on the server) and dsh's request rules.
//!
//! ```no_run
//! # async fn demo() {
//! use dsh_testkit::{Completion, MockServer, Reply, Split};
//! let server = MockServer::start().await;
//! server.push(Completion::new().text("Hello!").reply_split(&Split::Every(7)));
//! server.push(dsh_testkit::deepseek::rate_limited(Some("2")));
//! // point the client at server.base_url() ...
//! let requests = server.wait_for_requests(1).await;
//! assert_eq!(requests[0].path, "/chat/completions");
//! # }
//! ```

pub mod anthropic;
mod body;
pub mod deepseek;
pub mod fixtures;
pub mod openai;
mod record;
mod reply;
pub mod scenario;
pub mod scripted;
mod server;
mod sse;
pub mod validate;

pub use record::{ImagePart, Outcome, RecordedRequest};
pub use reply::{
    Gate, KEEP_ALIVE, Reply, SSE_CONTENT_TYPE, Split, Step, random_sizes, split_events,
    split_every, split_sizes,
};
pub use server::{CHAT_PATHS, MAX_REQUEST_BODY, MockServer, Observer, Responder};
pub use sse::{
    Completion, DONE_EVENT, Usage, UsagePlacement, data_event, split_chars, tool_call_id,
};
