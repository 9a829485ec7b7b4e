//! `dsh-session-title`: names sessions as the original harness does (`original-0.2.1.md` §4.6).
//!
//! When a top-level session's first human prompt is sent (its first `request/context`), the
//! plugin `session-title` appends a **fallback** `session/title` made from the prompt (its first
//! five words, at most 40 bytes) and, when `llm` is on, asks the session's own route for a
//! title: one small streamed request with thinking off, logged first as
//! `session/title-llm-request` so the call can be rebuilt from the log. The first non-empty line
//! of the answer (at most 80 bytes, `*` emphasis stripped) becomes the provider title. A failed,
//! cut or tool-calling answer leaves the fallback. Titles are log-only: never model-visible.

mod make;
mod plugin;

pub use make::{fallback_title, model_title};
pub use plugin::{SessionTitlePlugin, TITLE_PROVIDER, TitleConfig, TitleLlmRequest};
