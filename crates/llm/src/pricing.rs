//! Prices and cost: the one place every front end turns token usage into US dollars.
//!
//! A route's [`ModelPricing`] (on [`crate::ModelInfo`]) prices the three things DeepSeek bills:
//! input served from the prefix cache, input that missed it, and output (reasoning included).
//! Amounts are kept as exact integers (micro-dollars per million tokens; pico-dollars of cost),
//! so totals do not drift and the types stay `Eq`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::TokenUsage;

/// A price in US dollars per million tokens, held exactly in micro-dollars per million tokens.
/// Serialised as a JSON number of dollars (`0.28`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsdPerMTok(u64);

impl UsdPerMTok {
    /// A price of `micros` micro-dollars per million tokens.
    pub const fn from_micros(micros: u64) -> Self {
        UsdPerMTok(micros)
    }

    /// A price in dollars per million tokens (rounded to the micro-dollar); `None` when negative
    /// or not finite.
    pub fn from_usd(usd: f64) -> Option<Self> {
        (usd.is_finite() && usd >= 0.0).then(|| UsdPerMTok((usd * 1_000_000.0).round() as u64))
    }

    /// Micro-dollars per million tokens.
    pub const fn micros(self) -> u64 {
        self.0
    }

    /// Dollars per million tokens.
    pub fn usd(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }

    /// The cost of `tokens` tokens at this price.
    pub fn of(self, tokens: u64) -> Cost {
        // micro-dollars per 1e6 tokens × tokens = pico-dollars.
        Cost(u128::from(self.0) * u128::from(tokens))
    }
}

impl Serialize for UsdPerMTok {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.usd())
    }
}

impl<'de> Deserialize<'de> for UsdPerMTok {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let usd = f64::deserialize(d)?;
        UsdPerMTok::from_usd(usd).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "a price must be a non-negative number of USD per million tokens, got {usd}"
            ))
        })
    }
}

/// What a route charges, per million tokens (DeepSeek's three-part billing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelPricing {
    /// Input tokens served from the prefix cache.
    pub cache_hit_input: UsdPerMTok,
    /// Input tokens that missed the cache.
    pub cache_miss_input: UsdPerMTok,
    /// Output tokens (reasoning included).
    pub output: UsdPerMTok,
}

impl ModelPricing {
    /// The cost of one attempt's usage. `usage.input_tokens` counts the uncached input only;
    /// `cache_read_tokens` the cached part.
    pub fn cost(&self, usage: &TokenUsage) -> Cost {
        self.cache_miss_input.of(usage.input_tokens)
            + self
                .cache_hit_input
                .of(usage.cache_read_tokens.unwrap_or(0))
            + self.output.of(usage.output_tokens)
    }
}

/// An exact amount of US dollars (pico-dollars internally).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost(u128);

impl Cost {
    /// Nothing.
    pub const ZERO: Cost = Cost(0);

    /// Pico-dollars.
    pub const fn picos(self) -> u128 {
        self.0
    }

    /// Dollars.
    pub fn usd(self) -> f64 {
        self.0 as f64 / 1e12
    }
}

impl std::ops::Add for Cost {
    type Output = Cost;
    fn add(self, rhs: Cost) -> Cost {
        Cost(self.0.saturating_add(rhs.0))
    }
}

impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, rhs: Cost) {
        *self = *self + rhs;
    }
}

impl std::fmt::Display for Cost {
    /// `$0.0123` (four decimals; six under a cent so small sessions are not shown as zero).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let usd = self.usd();
        if usd != 0.0 && usd < 0.01 {
            write!(f, "${usd:.6}")
        } else {
            write!(f, "${usd:.4}")
        }
    }
}

/// Token usage and cost folded over many attempts (a turn, a session).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageTally {
    /// Uncached input tokens.
    pub cache_miss_input: u64,
    /// Cached input tokens.
    pub cache_hit_input: u64,
    /// Output tokens.
    pub output: u64,
    /// Attempts that reported usage.
    pub attempts: u64,
    /// Cost of the usage whose route had prices.
    pub cost: Cost,
    /// Attempts whose route had no prices (their cost is not in `cost`).
    pub unpriced: u64,
}

impl UsageTally {
    /// Folds one attempt's usage, priced with `pricing` when the route has prices.
    pub fn add(&mut self, usage: &TokenUsage, pricing: Option<&ModelPricing>) {
        self.cache_miss_input += usage.input_tokens;
        self.cache_hit_input += usage.cache_read_tokens.unwrap_or(0);
        self.output += usage.output_tokens;
        self.attempts += 1;
        match pricing {
            Some(p) => self.cost += p.cost(usage),
            None => self.unpriced += 1,
        }
    }

    /// Folds another tally.
    pub fn merge(&mut self, other: &UsageTally) {
        self.cache_miss_input += other.cache_miss_input;
        self.cache_hit_input += other.cache_hit_input;
        self.output += other.output;
        self.attempts += other.attempts;
        self.cost += other.cost;
        self.unpriced += other.unpriced;
    }

    /// All input tokens (cached and not).
    pub fn input(&self) -> u64 {
        self.cache_miss_input + self.cache_hit_input
    }

    /// Share of input served from the cache, in `0.0..=1.0` (`None` before any input).
    pub fn cache_hit_ratio(&self) -> Option<f64> {
        let input = self.input();
        (input > 0).then(|| self.cache_hit_input as f64 / input as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(miss: u64, hit: u64, out: u64) -> TokenUsage {
        TokenUsage {
            input_tokens: miss,
            output_tokens: out,
            total_tokens: None,
            cache_read_tokens: Some(hit),
            cache_write_tokens: None,
            reasoning_tokens: None,
        }
    }

    const P: ModelPricing = ModelPricing {
        cache_hit_input: UsdPerMTok::from_micros(28_000),
        cache_miss_input: UsdPerMTok::from_micros(280_000),
        output: UsdPerMTok::from_micros(420_000),
    };

    #[test]
    fn cost_prices_hit_miss_and_output_separately() {
        // 1M miss = $0.28, 1M hit = $0.028, 1M out = $0.42.
        let c = P.cost(&usage(1_000_000, 1_000_000, 1_000_000));
        assert_eq!(c.picos(), 728_000_000_000);
        assert_eq!(format!("{c}"), "$0.7280");
        assert_eq!(format!("{}", P.cost(&usage(100, 0, 0))), "$0.000028");
        assert_eq!(format!("{}", Cost::ZERO), "$0.0000");
    }

    #[test]
    fn tally_folds_usage_and_ratio() {
        let mut t = UsageTally::default();
        assert_eq!(t.cache_hit_ratio(), None);
        t.add(&usage(100, 900, 50), Some(&P));
        t.add(&usage(100, 0, 50), None);
        assert_eq!(t.input(), 1100);
        assert_eq!(t.output, 100);
        assert_eq!(t.unpriced, 1);
        assert_eq!(t.attempts, 2);
        assert!((t.cache_hit_ratio().unwrap() - 900.0 / 1100.0).abs() < 1e-9);
        assert_eq!(t.cost, P.cost(&usage(100, 900, 50)));
    }

    #[test]
    fn prices_round_trip_as_dollars_and_reject_negatives() {
        let json = serde_json::to_string(&P).unwrap();
        assert_eq!(
            json,
            r#"{"cacheHitInput":0.028,"cacheMissInput":0.28,"output":0.42}"#
        );
        let back: ModelPricing = serde_json::from_str(&json).unwrap();
        assert_eq!(back, P);
        let err = serde_json::from_str::<ModelPricing>(
            r#"{"cacheHitInput":-1,"cacheMissInput":0.28,"output":0.42}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("non-negative"), "{err}");
    }
}
