//! Tokens and cost.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Token counts (a step, a turn, a session) and their cost when the route has prices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens (reasoning included).
    pub output_tokens: u64,
    /// Input tokens served from the provider's prefix cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to the cache (providers that report it).
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Reasoning tokens (part of `output_tokens`).
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Cost in US dollars (`None`: the route has no prices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Model requests these tokens were reported by (attempts that reported usage; one for a
    /// single request).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests: u64,
    /// Requests whose route had no prices: their tokens are counted, their cost is not in
    /// `cost_usd`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unpriced_requests: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Adds `other` (costs add when both are known; a known cost stays when the other is not).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.requests += other.requests;
        self.unpriced_requests += other.unpriced_requests;
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }

    /// All input tokens: uncached, cached and written to the cache.
    pub fn input_total(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    /// The share of input tokens served from the cache (0 when there was no input).
    pub fn cache_hit_ratio(&self) -> f64 {
        let total = self.input_tokens + self.cache_read_tokens;
        if total == 0 {
            0.0
        } else {
            self.cache_read_tokens as f64 / total as f64
        }
    }
}
