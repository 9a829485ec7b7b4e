//! The retry policy, as pure code (`docs/behaviours.md` §9).
//!
//! Delay of retry `k` (1-based) = `min(initial · 2^(k−1), max) × (1 − j + 2j·r)`, capped at
//! `max`, where `j` is the jitter ratio and `r ∈ [0, 1)` a random draw. A provider `Retry-After`
//! in `(0, max]` is used verbatim, without jitter; a larger one ends retrying in `normal` mode.

use std::time::Duration;

use dsh_llm::{FailureCode, LlmFailure};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How a policy treats failures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RetryMode {
    /// Retry the retryable codes, at most `maxRetries` times per step.
    #[default]
    Normal,
    /// Retry every failure without limit, after downstream recovery had its chance.
    Always,
}

impl RetryMode {
    /// `"normal"` or `"always"`, as logged.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryMode::Normal => "normal",
            RetryMode::Always => "always",
        }
    }
}

fn d_max_retries() -> u32 {
    5
}
fn d_retryable() -> Vec<FailureCode> {
    vec![
        FailureCode::EmptyResponse,
        FailureCode::RateLimit,
        FailureCode::Server,
        FailureCode::Timeout,
        FailureCode::Transport,
    ]
}
fn d_true() -> bool {
    true
}
fn d_initial() -> u64 {
    500
}
fn d_max_delay() -> u64 {
    10_000
}
fn d_jitter() -> f64 {
    0.1
}

/// One provider's retry policy. Every field has the upstream default, so `{}` is the default
/// policy and `{"maxRetries": 2}` changes only the budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetryPolicy {
    /// `normal` (default) or `always`.
    #[serde(default)]
    pub mode: RetryMode,
    /// Retries per (turn, step, provider) in `normal` mode. Default 5.
    #[serde(default = "d_max_retries")]
    pub max_retries: u32,
    /// Failure codes retried in `normal` mode. Default `EMPTY_RESPONSE`, `RATE_LIMIT`, `SERVER`,
    /// `TIMEOUT`, `TRANSPORT` (upstream's list). Unknown codes are kept and matched verbatim.
    #[serde(default = "d_retryable")]
    #[schemars(with = "Vec<String>")]
    pub retryable: Vec<FailureCode>,
    /// Also retry `STREAM_CLOSED` (a stream that closed after partial output without `[DONE]`)
    /// in `normal` mode, as Codex retries "stream disconnected before completion". Default
    /// `true`; `false` restores the original harness's behaviour (the turn ends). The partial
    /// attempt stays in the log as `assistant/attempt` and never enters a later request. Not
    /// part of [`RetryPolicy::policy_key`] (the key stays upstream's).
    #[serde(default = "d_true")]
    pub retry_stream_closed: bool,
    /// Delay of the first retry, ms. Default 500.
    #[serde(default = "d_initial")]
    pub initial_delay_ms: u64,
    /// Cap of every delay, ms; also the longest provider `Retry-After` honoured. Default 10000.
    #[serde(default = "d_max_delay")]
    pub max_delay_ms: u64,
    /// Jitter ratio in `[0, 1]`: the delay is scaled by a factor in `[1 − j, 1 + j)`. Default 0.1.
    #[serde(default = "d_jitter")]
    pub jitter_ratio: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            mode: RetryMode::Normal,
            max_retries: d_max_retries(),
            retryable: d_retryable(),
            retry_stream_closed: true,
            initial_delay_ms: d_initial(),
            max_delay_ms: d_max_delay(),
            jitter_ratio: d_jitter(),
        }
    }
}

/// A policy value that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// `jitterRatio` outside `[0, 1]` or not finite.
    #[error("jitterRatio must be a number in [0, 1], got {0}")]
    Jitter(String),
    /// An empty code in `retryable`.
    #[error("retryable[{0}]: empty failure code")]
    EmptyCode(usize),
}

/// What the policy says about one failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryDecision {
    /// Wait `delay`, then re-request; this is retry number `retry` (1-based) of the chain.
    Retry {
        /// 1-based retry number.
        retry: u32,
        /// The wait before the next attempt.
        delay: Duration,
    },
    /// Do not retry (for this reason); the failure goes on down the chain.
    GiveUp(GiveUp),
}

/// Why the policy does not retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// The code is not retryable (normal mode).
    NotRetryable,
    /// `maxRetries` retries were already spent in this chain.
    Exhausted,
    /// The provider asked to wait longer than `maxDelayMs` (normal mode).
    RetryAfterTooLong,
}

/// Renders a jitter ratio the way upstream's JSON does: integral values without a fraction.
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

impl RetryPolicy {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if !self.jitter_ratio.is_finite() || !(0.0..=1.0).contains(&self.jitter_ratio) {
            return Err(PolicyError::Jitter(self.jitter_ratio.to_string()));
        }
        if let Some(i) = self
            .retryable
            .iter()
            .position(|c| c.as_str().trim().is_empty())
        {
            return Err(PolicyError::EmptyCode(i));
        }
        Ok(())
    }

    /// The opaque identity of the policy, as logged in `llm/retry.policyKey`: the JSON text of
    /// `[mode, maxRetries, retryable, initialDelayMs, maxDelayMs, jitterRatio]` (`maxRetries` is
    /// `null` in always mode).
    pub fn policy_key(&self) -> String {
        let max = match self.mode {
            RetryMode::Normal => json!(self.max_retries),
            RetryMode::Always => Value::Null,
        };
        json!([
            self.mode.as_str(),
            max,
            self.retryable,
            self.initial_delay_ms,
            self.max_delay_ms,
            number(self.jitter_ratio),
        ])
        .to_string()
    }

    /// Whether `code` is retried in normal mode: listed in `retryable`, or `STREAM_CLOSED` with
    /// `retryStreamClosed`.
    pub fn is_retryable(&self, code: &FailureCode) -> bool {
        (self.retry_stream_closed && *code == FailureCode::StreamClosed)
            || self.retryable.iter().any(|c| c == code)
    }

    /// The backoff before retry `retry` (1-based) with the random draw `rand ∈ [0, 1)`.
    pub fn backoff(&self, retry: u32, rand: f64) -> Duration {
        let shift = retry.saturating_sub(1).min(63);
        let base = self
            .initial_delay_ms
            .saturating_mul(1u64 << shift)
            .min(self.max_delay_ms);
        let rand = if rand.is_finite() {
            rand.clamp(0.0, 1.0)
        } else {
            0.5
        };
        let j = self.jitter_ratio;
        let factor = 1.0 - j + 2.0 * j * rand;
        let ms = (base as f64 * factor).round();
        let ms = if ms.is_finite() && ms > 0.0 {
            (ms as u64).min(self.max_delay_ms)
        } else {
            0
        };
        Duration::from_millis(ms)
    }

    /// Decides about `failure`, given that `spent` retries of this chain were already made.
    /// `rand ∈ [0, 1)` drives the jitter. Always mode never gives up (the caller first lets
    /// downstream recovery try, and stops on cancellation).
    pub fn decide(&self, failure: &LlmFailure, spent: u32, rand: f64) -> RetryDecision {
        let retry = spent.saturating_add(1);
        if self.mode == RetryMode::Normal {
            if !self.is_retryable(&failure.code) {
                return RetryDecision::GiveUp(GiveUp::NotRetryable);
            }
            if spent >= self.max_retries {
                return RetryDecision::GiveUp(GiveUp::Exhausted);
            }
        }
        let delay = match failure.provider_retry_after_ms.filter(|ms| *ms > 0) {
            Some(ms) if ms <= self.max_delay_ms => Duration::from_millis(ms),
            Some(ms) => match self.mode {
                RetryMode::Normal => return RetryDecision::GiveUp(GiveUp::RetryAfterTooLong),
                RetryMode::Always => Duration::from_millis(ms),
            },
            None => self.backoff(retry, rand),
        };
        RetryDecision::Retry { retry, delay }
    }
}

/// A uniform draw in `[0, 1)` from the standard library's randomly keyed hasher (enough for
/// jitter; not for anything secret).
pub fn random_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x9e37_79b9_7f4a_7c15);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_unit_is_in_range_and_varies() {
        let draws: Vec<f64> = (0..64).map(|_| random_unit()).collect();
        assert!(draws.iter().all(|r| (0.0..1.0).contains(r)));
        assert!(draws.iter().any(|r| *r != draws[0]));
    }
}
