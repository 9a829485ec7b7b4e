//! The session events of a provider retry (`session-format.md` §7.13, §13.2).

use dsh_llm::LlmFailure;
use dsh_session::EventKind;
use serde_json::{Map, Value, json};

use crate::policy::{RetryMode, RetryPolicy};

/// Event type written before the wait (`llm/retry`).
pub const RETRY_EVENT: EventKind = EventKind::LlmRetry;
/// Event type written after the wait, before the next attempt (`llm/retry-started`).
pub const RETRY_STARTED_EVENT: EventKind = EventKind::LlmRetryStarted;

/// One scheduled retry: what `llm/retry` records.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryRecord {
    /// Unique id shared by `llm/retry` and `llm/retry-started`.
    pub retry_id: String,
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// Provider route of the failed attempt.
    pub provider: String,
    /// The policy that decided (mode, budget and key).
    pub policy: RetryPolicy,
    /// 1-based retry number within the chain.
    pub retry: u32,
    /// The wait, ms.
    pub delay_ms: u64,
    /// The failure being retried.
    pub failure: LlmFailure,
}

impl RetryRecord {
    /// `llm/retry` data: `{retryId, turn, step, provider, mode, policyKey, retry, maxRetries,
    /// delayMs, failure}`, `maxRetries` omitted in always mode.
    pub fn retry_data(&self) -> Value {
        let mut m = Map::new();
        m.insert("retryId".into(), json!(self.retry_id));
        m.insert("turn".into(), json!(self.turn));
        m.insert("step".into(), json!(self.step));
        m.insert("provider".into(), json!(self.provider));
        m.insert("mode".into(), json!(self.policy.mode.as_str()));
        m.insert("policyKey".into(), json!(self.policy.policy_key()));
        m.insert("retry".into(), json!(self.retry));
        if self.policy.mode == RetryMode::Normal {
            m.insert("maxRetries".into(), json!(self.policy.max_retries));
        }
        m.insert("delayMs".into(), json!(self.delay_ms));
        m.insert(
            "failure".into(),
            serde_json::to_value(&self.failure).unwrap_or(Value::Null),
        );
        Value::Object(m)
    }

    /// `llm/retry-started` data: `{retryId, turn, step, retry}`.
    pub fn started_data(&self) -> Value {
        json!({
            "retryId": self.retry_id,
            "turn": self.turn,
            "step": self.step,
            "retry": self.retry,
        })
    }
}
