//! Config of `compaction-basic` (upstream compaction-basic table): defaults, validation and
//! per-model policies.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::meter::TokenMeter;

/// The policy keys, each optional so a model policy overrides only what it names.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyKeys {
    /// Compact when the next request would exceed `floor(contextWindow × thresholdRatio)`
    /// tokens; in (0, 1], default 0.8.
    #[serde(default)]
    pub threshold_ratio: Option<f64>,
    /// Retained tail as a share of the window; in (0, 1] and below `thresholdRatio`, default
    /// 0.16. Exclusive with `retainTokens`.
    #[serde(default)]
    pub retain_ratio: Option<f64>,
    /// Retained tail in tokens (below the threshold); exclusive with `retainRatio`.
    #[serde(default)]
    pub retain_tokens: Option<u64>,
    /// Output cap of the summary call, reasoning included (default 8192).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Extra summary rounds while still above the threshold (default 1).
    #[serde(default)]
    pub compaction_retries: Option<u32>,
    /// Compact-and-retry rounds after `CONTEXT_WINDOW_EXCEEDED` (default 1; 0 disables).
    #[serde(default)]
    pub max_overflow_retries: Option<u32>,
}

/// A policy for one exact provider/model pair.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelPolicy {
    /// Provider route.
    pub provider: String,
    /// Model id.
    pub model: String,

    /// Compact when the next request would exceed `floor(contextWindow × thresholdRatio)`
    /// tokens; in (0, 1], default 0.8.
    #[serde(default)]
    pub threshold_ratio: Option<f64>,
    /// Retained tail as a share of the window; in (0, 1] and below `thresholdRatio`, default
    /// 0.16. Exclusive with `retainTokens`.
    #[serde(default)]
    pub retain_ratio: Option<f64>,
    /// Retained tail in tokens (below the threshold); exclusive with `retainRatio`.
    #[serde(default)]
    pub retain_tokens: Option<u64>,
    /// Output cap of the summary call, reasoning included (default 8192).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Extra summary rounds while still above the threshold (default 1).
    #[serde(default)]
    pub compaction_retries: Option<u32>,
    /// Compact-and-retry rounds after `CONTEXT_WINDOW_EXCEEDED` (default 1; 0 disables).
    #[serde(default)]
    pub max_overflow_retries: Option<u32>,
}

impl ModelPolicy {
    /// The policy keys it sets.
    pub fn keys(&self) -> PolicyKeys {
        PolicyKeys {
            threshold_ratio: self.threshold_ratio,
            retain_ratio: self.retain_ratio,
            retain_tokens: self.retain_tokens,
            max_tokens: self.max_tokens,
            compaction_retries: self.compaction_retries,
            max_overflow_retries: self.max_overflow_retries,
        }
    }
}

/// Config of plugin `compaction-basic`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BasicConfig {
    /// Compact when the next request would exceed `floor(contextWindow × thresholdRatio)`
    /// tokens; in (0, 1], default 0.8.
    #[serde(default)]
    pub threshold_ratio: Option<f64>,
    /// Retained tail as a share of the window; in (0, 1] and below `thresholdRatio`, default
    /// 0.16. Exclusive with `retainTokens`.
    #[serde(default)]
    pub retain_ratio: Option<f64>,
    /// Retained tail in tokens (below the threshold); exclusive with `retainRatio`.
    #[serde(default)]
    pub retain_tokens: Option<u64>,
    /// Output cap of the summary call, reasoning included (default 8192).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Extra summary rounds while still above the threshold (default 1).
    #[serde(default)]
    pub compaction_retries: Option<u32>,
    /// Compact-and-retry rounds after `CONTEXT_WINDOW_EXCEEDED` (default 1; 0 disables).
    #[serde(default)]
    pub max_overflow_retries: Option<u32>,
    /// Summarise with this provider instead of the conversation's (set with the model).
    #[serde(default)]
    pub summarization_provider: String,
    /// Summarise with this model instead of the conversation's (set with the provider).
    #[serde(default)]
    pub summarization_model: String,
    /// Per-model policies (exact match; a pair may appear once).
    #[serde(default)]
    pub model_policies: Vec<ModelPolicy>,
    /// Compact automatically (default true); `false` leaves only the manual command.
    #[serde(default)]
    pub auto: Option<bool>,
    /// The token meter.
    #[serde(default)]
    pub meter: Option<TokenMeter>,
}

/// A resolved policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Policy {
    /// See [`PolicyKeys::threshold_ratio`].
    pub threshold_ratio: f64,
    /// See [`PolicyKeys::retain_ratio`].
    pub retain_ratio: f64,
    /// See [`PolicyKeys::retain_tokens`].
    pub retain_tokens: Option<u64>,
    /// See [`PolicyKeys::max_tokens`].
    pub max_tokens: u64,
    /// See [`PolicyKeys::compaction_retries`].
    pub compaction_retries: u32,
    /// See [`PolicyKeys::max_overflow_retries`].
    pub max_overflow_retries: u32,
}

impl Policy {
    /// `floor(window × thresholdRatio)`.
    pub fn threshold(&self, window: u64) -> u64 {
        (window as f64 * self.threshold_ratio).floor() as u64
    }

    /// Tokens the retained tail holds for `window`.
    pub fn retain(&self, window: u64) -> u64 {
        self.retain_tokens
            .unwrap_or_else(|| (window as f64 * self.retain_ratio).floor() as u64)
    }
}

/// A config that cannot load, naming the key.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A key outside its range.
    #[error("compaction-basic: {key} = {value} is out of range ({rule})")]
    Range {
        /// Where (`thresholdRatio`, `modelPolicies[0].retainRatio`, ...).
        key: String,
        /// The value.
        value: String,
        /// The rule.
        rule: &'static str,
    },
    /// Both retain keys set.
    #[error("compaction-basic: {0}retainRatio and retainTokens are exclusive")]
    BothRetains(String),
    /// Only half of the summariser pair set.
    #[error(
        "compaction-basic: summarizationProvider and summarizationModel must both be set or both be empty"
    )]
    HalfPair,
    /// A pair with two policies.
    #[error("compaction-basic: modelPolicies has {provider}/{model} twice")]
    Duplicate {
        /// Provider.
        provider: String,
        /// Model.
        model: String,
    },
}

fn merge(base: &PolicyKeys, over: &PolicyKeys) -> PolicyKeys {
    // A policy that names a retain key replaces both.
    let retain_set = over.retain_ratio.is_some() || over.retain_tokens.is_some();
    PolicyKeys {
        threshold_ratio: over.threshold_ratio.or(base.threshold_ratio),
        retain_ratio: if retain_set {
            over.retain_ratio
        } else {
            base.retain_ratio
        },
        retain_tokens: if retain_set {
            over.retain_tokens
        } else {
            base.retain_tokens
        },
        max_tokens: over.max_tokens.or(base.max_tokens),
        compaction_retries: over.compaction_retries.or(base.compaction_retries),
        max_overflow_retries: over.max_overflow_retries.or(base.max_overflow_retries),
    }
}

fn resolve(keys: &PolicyKeys, at: &str) -> Result<Policy, ConfigError> {
    if keys.retain_ratio.is_some() && keys.retain_tokens.is_some() {
        return Err(ConfigError::BothRetains(at.to_owned()));
    }
    let p = Policy {
        threshold_ratio: keys.threshold_ratio.unwrap_or(0.8),
        retain_ratio: keys.retain_ratio.unwrap_or(0.16),
        retain_tokens: keys.retain_tokens,
        max_tokens: keys.max_tokens.unwrap_or(8192),
        compaction_retries: keys.compaction_retries.unwrap_or(1),
        max_overflow_retries: keys.max_overflow_retries.unwrap_or(1),
    };
    let range = |key: &str, value: f64, rule| ConfigError::Range {
        key: format!("{at}{key}"),
        value: value.to_string(),
        rule,
    };
    if !(p.threshold_ratio > 0.0 && p.threshold_ratio <= 1.0) {
        return Err(range("thresholdRatio", p.threshold_ratio, "(0, 1]"));
    }
    if !(p.retain_ratio > 0.0 && p.retain_ratio <= 1.0 && p.retain_ratio < p.threshold_ratio) {
        return Err(range(
            "retainRatio",
            p.retain_ratio,
            "(0, 1] and below thresholdRatio",
        ));
    }
    if p.max_tokens == 0 {
        return Err(range("maxTokens", 0.0, "at least 1"));
    }
    Ok(p)
}

impl BasicConfig {
    /// The policy keys it sets.
    pub fn keys(&self) -> PolicyKeys {
        PolicyKeys {
            threshold_ratio: self.threshold_ratio,
            retain_ratio: self.retain_ratio,
            retain_tokens: self.retain_tokens,
            max_tokens: self.max_tokens,
            compaction_retries: self.compaction_retries,
            max_overflow_retries: self.max_overflow_retries,
        }
    }
    /// Checks every key and policy, naming the bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        resolve(&self.keys(), "")?;
        if self.summarization_provider.is_empty() != self.summarization_model.is_empty() {
            return Err(ConfigError::HalfPair);
        }
        for (i, p) in self.model_policies.iter().enumerate() {
            resolve(
                &merge(&self.keys(), &p.keys()),
                &format!("modelPolicies[{i}]."),
            )?;
            if self.model_policies[..i]
                .iter()
                .any(|q| q.provider == p.provider && q.model == p.model)
            {
                return Err(ConfigError::Duplicate {
                    provider: p.provider.clone(),
                    model: p.model.clone(),
                });
            }
        }
        Ok(())
    }

    /// The policy of a provider/model pair (its model policy over the defaults). Call after
    /// [`BasicConfig::validate`]; a bad policy falls back to the defaults.
    pub fn policy_for(&self, provider: &str, model: &str) -> Policy {
        let keys = match self
            .model_policies
            .iter()
            .find(|p| p.provider == provider && p.model == model)
        {
            Some(p) => merge(&self.keys(), &p.keys()),
            None => self.keys(),
        };
        resolve(&keys, "").unwrap_or(Policy {
            threshold_ratio: 0.8,
            retain_ratio: 0.16,
            retain_tokens: None,
            max_tokens: 8192,
            compaction_retries: 1,
            max_overflow_retries: 1,
        })
    }

    /// Whether listeners are registered.
    pub fn auto(&self) -> bool {
        self.auto.unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> Result<BasicConfig, String> {
        let c: BasicConfig = serde_json::from_value(v).map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    #[test]
    fn defaults_are_the_originals() {
        let c = parse(serde_json::json!({})).unwrap();
        let p = c.policy_for("deepseek", "m");
        assert_eq!(p.threshold(32_000), 25_600);
        assert_eq!(p.retain(32_000), 5_120);
        assert_eq!(
            (p.max_tokens, p.compaction_retries, p.max_overflow_retries),
            (8192, 1, 1)
        );
        assert!(c.auto());
    }

    #[test]
    fn model_policies_override_and_bad_configs_name_the_key() {
        let c = parse(serde_json::json!({
            "retainTokens": 1000,
            "modelPolicies": [{"provider": "deepseek", "model": "big", "retainRatio": 0.1, "maxTokens": 100}]
        }))
        .unwrap();
        let p = c.policy_for("deepseek", "big");
        assert_eq!((p.retain(1000), p.max_tokens), (100, 100));
        assert_eq!(c.policy_for("deepseek", "small").retain(1_000_000), 1000);
        for (bad, needle) in [
            (
                serde_json::json!({"thresholdRatio": 0}),
                "thresholdRatio = 0",
            ),
            (serde_json::json!({"retainRatio": 0.9}), "retainRatio = 0.9"),
            (
                serde_json::json!({"retainRatio": 0.1, "retainTokens": 5}),
                "exclusive",
            ),
            (
                serde_json::json!({"summarizationProvider": "x"}),
                "both be set",
            ),
            (serde_json::json!({"thresholdRatioo": 0.5}), "unknown field"),
            (
                serde_json::json!({"modelPolicies": [{"provider": "a", "model": "b"}, {"provider": "a", "model": "b"}]}),
                "a/b twice",
            ),
            (
                serde_json::json!({"modelPolicies": [{"provider": "a", "model": "b", "thresholdRatio": 2}]}),
                "modelPolicies[0].thresholdRatio",
            ),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(needle), "{e} lacks {needle}");
        }
    }
}
