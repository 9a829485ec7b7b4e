//! API keys: from config, else from an environment variable read on every request.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use dsh_llm::{LlmFailure, codes};
use reqwest::header::HeaderValue;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer};

/// An API key from the config file: held as a [`SecretString`], never printed.
#[derive(Clone)]
pub struct ApiKey(pub SecretString);

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl<'de> Deserialize<'de> for ApiKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(ApiKey(SecretString::from(String::deserialize(
            deserializer,
        )?)))
    }
}

impl JsonSchema for ApiKey {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "ApiKey".into()
    }
    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "description": "API key (prefer the environment)."})
    }
}

/// Reads an environment variable (injectable for tests).
pub type EnvFn = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The process environment.
pub fn process_env() -> EnvFn {
    Arc::new(|name| std::env::var(name).ok())
}

/// How the key travels: `Authorization: Bearer <key>` (OpenAI) or `x-api-key: <key>`
/// (Anthropic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyStyle {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// `x-api-key: <key>`.
    XApiKey,
}

impl KeyStyle {
    /// The header name.
    pub fn header(self) -> &'static str {
        match self {
            KeyStyle::Bearer => "authorization",
            KeyStyle::XApiKey => "x-api-key",
        }
    }
}

/// The key (config first, else `env_name` in `env`) and its header value (marked sensitive).
/// `label` names the provider in the error (`no Anthropic API key: set ANTHROPIC_API_KEY ...`).
/// `optional` routes (local servers) send no key when none is set: `Ok(None)`.
pub fn resolve_key(
    configured: Option<&SecretString>,
    env_name: &str,
    env: &EnvFn,
    style: KeyStyle,
    label: &str,
    optional: bool,
) -> Result<Option<(SecretString, HeaderValue)>, LlmFailure> {
    let key = match configured {
        Some(k) if !k.expose_secret().is_empty() => k.clone(),
        _ => match env(env_name).filter(|k| !k.is_empty()) {
            Some(k) => SecretString::from(k),
            None if optional => return Ok(None),
            None => {
                return Err(LlmFailure::new(
                    codes::MISSING_CREDENTIAL,
                    format!("no {label} API key: set {env_name} or the plugin's `apiKey`"),
                ));
            }
        },
    };
    let text = match style {
        KeyStyle::Bearer => format!("Bearer {}", key.expose_secret()),
        KeyStyle::XApiKey => key.expose_secret().to_owned(),
    };
    let mut value = HeaderValue::from_str(&text).map_err(|_| {
        LlmFailure::new(
            codes::INVALID_CREDENTIAL,
            format!("the {label} API key contains characters that cannot be sent in a header"),
        )
    })?;
    value.set_sensitive(true);
    Ok(Some((key, value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_then_env_then_missing() {
        let env: EnvFn = Arc::new(|n| (n == "K").then(|| "sk-env".to_owned()));
        let none: EnvFn = Arc::new(|_| None);
        let cfg = SecretString::from("sk-cfg");
        let (k, v) = resolve_key(Some(&cfg), "K", &env, KeyStyle::XApiKey, "X", false)
            .unwrap()
            .unwrap();
        assert_eq!(
            (k.expose_secret(), v.to_str().unwrap()),
            ("sk-cfg", "sk-cfg")
        );
        let (_, v) = resolve_key(None, "K", &env, KeyStyle::Bearer, "X", false)
            .unwrap()
            .unwrap();
        assert_eq!(v.to_str().unwrap(), "Bearer sk-env");
        assert!(v.is_sensitive());
        let f = resolve_key(None, "K", &none, KeyStyle::Bearer, "Acme", false).unwrap_err();
        assert_eq!(f.code, codes::MISSING_CREDENTIAL);
        assert!(
            f.message.contains("no Acme API key: set K"),
            "{}",
            f.message
        );
        assert!(
            resolve_key(None, "K", &none, KeyStyle::Bearer, "Acme", true)
                .unwrap()
                .is_none()
        );
        let bad = SecretString::from("a\nb");
        let f = resolve_key(Some(&bad), "K", &none, KeyStyle::Bearer, "Acme", false).unwrap_err();
        assert_eq!(f.code, codes::INVALID_CREDENTIAL);
    }
}
