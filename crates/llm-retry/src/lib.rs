//! `dsh-llm-retry`: the provider retry policy of dsh.
//!
//! - [`policy`]: which failures retry, exponential backoff with jitter within a budget, the
//!   provider's `Retry-After` ([`RetryPolicy::decide`], pure and deterministic given the draw).
//! - [`record`]: the `llm/retry` and `llm/retry-started` session events.
//! - [`LlmRetryPlugin`]: the policy as a listener of `agent/request-error` (`dsh-agent`).

mod plugin;
pub mod policy;
pub mod record;

pub use plugin::{ConfigError, LlmRetryConfig, LlmRetryPlugin};
pub use policy::{GiveUp, PolicyError, RetryDecision, RetryMode, RetryPolicy, random_unit};
pub use record::{RETRY_EVENT, RETRY_STARTED_EVENT, RetryRecord};
