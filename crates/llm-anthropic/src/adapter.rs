//! The Messages adapter: one HTTP attempt per `stream()`.

use std::fmt;
use std::sync::Arc;

use dsh_llm::attachments::{AttachmentLookup, no_attachments};
use dsh_llm::{
    ChunkStream, LlmAdapter, LlmFailure, LlmRequest, Modality, ModelInfo, ReasoningEffort,
};
use dsh_llm_http::{Attempt, EnvFn, KeyStyle, Timeouts, build_client, process_env, resolve_key};
use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use secrecy::SecretString;

use crate::config::{AnthropicConfig, Flavor, ModelEntry};
use crate::decode::AnthropicDecoder;
use crate::request::{BodyOptions, Images, body};

/// Why an adapter cannot be built from its config.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// The base URL does not make a valid endpoint.
    #[error("invalid Messages API base URL `{url}`: {source}")]
    BaseUrl {
        /// The base URL as configured.
        url: String,
        /// The parser's error.
        source: <reqwest::Url as std::str::FromStr>::Err,
    },
    /// An extra header that cannot be sent.
    #[error("invalid header `{0}` in the plugin's `headers`")]
    Header(String),
    /// The HTTP client cannot be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// The Anthropic Messages adapter.
pub struct AnthropicAdapter {
    flavor: Flavor,
    client: dsh_llm_http::HttpClient,
    endpoint: String,
    headers: HeaderMap,
    key: Option<SecretString>,
    key_env: String,
    env: EnvFn,
    default_model: String,
    catalog: Vec<ModelEntry>,
    options: BodyOptions,
    timeouts: Timeouts,
    max_event_bytes: usize,
    attachments: AttachmentLookup,
}

impl fmt::Debug for AnthropicAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicAdapter")
            .field("flavor", &self.flavor)
            .field("endpoint", &self.endpoint)
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
            .field("key_env", &self.key_env)
            .finish_non_exhaustive()
    }
}

/// `{base}/v1/messages`, without doubling a `/v1` the base already ends with.
pub fn endpoint_of(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

impl AnthropicAdapter {
    /// Builds the adapter, reading the base URL variable from the process environment.
    pub fn new(config: &AnthropicConfig) -> Result<Self, AdapterError> {
        Self::with_env(config, process_env())
    }

    /// Like [`AnthropicAdapter::new`] with an injected environment.
    pub fn with_env(config: &AnthropicConfig, env: EnvFn) -> Result<Self, AdapterError> {
        let flavor = config.flavor;
        let timeouts = Timeouts::with_ms(
            config.connect_timeout_ms,
            config.idle_timeout_ms,
            config.progress_timeout_ms,
            config.total_timeout_ms,
        );
        let base_env = config
            .base_url_env
            .clone()
            .unwrap_or_else(|| flavor.base_url_env().to_owned());
        let base = config
            .base_url
            .clone()
            .filter(|b| !b.is_empty())
            .or_else(|| env(&base_env).filter(|b| !b.is_empty()))
            .unwrap_or_else(|| flavor.base_url().to_owned());
        let endpoint = endpoint_of(&base);
        reqwest::Url::parse(&endpoint).map_err(|source| AdapterError::BaseUrl {
            url: base.clone(),
            source,
        })?;
        let mut headers = dsh_llm_http::base_headers();
        let version = config.anthropic_version.as_deref().unwrap_or("2023-06-01");
        headers.insert(
            "anthropic-version",
            HeaderValue::from_str(version)
                .map_err(|_| AdapterError::Header("anthropic-version".into()))?,
        );
        for (name, value) in &config.headers {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| AdapterError::Header(name.clone()))?;
            let v = HeaderValue::from_str(value).map_err(|_| AdapterError::Header(name.clone()))?;
            headers.insert(n, v);
        }
        Ok(Self {
            flavor,
            client: build_client(&timeouts).map_err(AdapterError::Client)?,
            endpoint,
            headers,
            key: config.api_key.as_ref().map(|k| k.0.clone()),
            key_env: config
                .api_key_env
                .clone()
                .unwrap_or_else(|| flavor.api_key_env().to_owned()),
            env,
            default_model: config
                .default_model
                .clone()
                .unwrap_or_else(|| flavor.default_model().to_owned()),
            catalog: config.models.clone().unwrap_or_else(|| flavor.catalog()),
            options: BodyOptions {
                thinking: config.thinking.unwrap_or(flavor.thinking()),
                cache_breakpoints: config
                    .cache_breakpoints
                    .unwrap_or(flavor.cache_breakpoints()),
                replay_kind: flavor.replay_kind(),
                unsigned_thinking: matches!(flavor, Flavor::Deepseek),
            },
            timeouts,
            max_event_bytes: config
                .max_event_bytes
                .unwrap_or(dsh_llm::sse::DEFAULT_MAX_EVENT_BYTES),
            attachments: no_attachments(),
        })
    }

    /// Reads image bytes through `lookup` (the plugin passes the `attachments` service).
    pub fn with_attachments(mut self, lookup: AttachmentLookup) -> Self {
        self.attachments = lookup;
        self
    }

    /// The endpoint requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The models of the catalog.
    pub fn catalog(&self) -> &[ModelEntry] {
        &self.catalog
    }
}

impl LlmAdapter for AnthropicAdapter {
    fn default_model(&self) -> String {
        self.default_model.clone()
    }

    fn resolve_model(&self, model: &str) -> ModelInfo {
        let entry = self.catalog.iter().find(|m| m.id == model);
        let mut modalities = vec![Modality::Text];
        if entry.is_some_and(|e| e.vision) {
            modalities.push(Modality::Image);
        }
        ModelInfo {
            id: model.to_owned(),
            context_window: entry.map_or(200_000, |e| e.context_window),
            default_max_tokens: entry.map_or(32_000, |e| e.default_max_tokens),
            max_output_tokens: entry.and_then(|e| e.max_output_tokens),
            reasoning_efforts: ReasoningEffort::KNOWN.to_vec(),
            default_effort: Some(ReasoningEffort::High),
            input_modalities: modalities,
            system_prompt_update: entry.and_then(|e| e.system_prompt_update),
            tool_update: entry.and_then(|e| e.tool_update),
            pricing: entry.and_then(|e| e.pricing),
        }
    }

    fn models(&self) -> Vec<ModelInfo> {
        self.catalog
            .iter()
            .map(|e| self.resolve_model(&e.id))
            .collect()
    }

    fn stream(&self, req: LlmRequest) -> BoxFuture<'static, Result<ChunkStream, LlmFailure>> {
        let prepared = (|| {
            let key = resolve_key(
                self.key.as_ref(),
                &self.key_env,
                &self.env,
                KeyStyle::XApiKey,
                self.flavor.label(),
                false,
            )?;
            let images = Images {
                lookup: &self.attachments,
                label: self.flavor.label(),
            };
            let bytes = body(&req, &self.options, images)?;
            let mut headers = self.headers.clone();
            let secret = key.map(|(secret, value)| {
                headers.insert(KeyStyle::XApiKey.header(), value);
                secret
            });
            tracing::debug!(endpoint = %self.endpoint, model = %req.call.model.id, bytes = bytes.len(), "Messages request");
            Ok::<_, LlmFailure>(Attempt {
                client: self.client.clone(),
                label: self.flavor.label().to_owned(),
                endpoint: self.endpoint.clone(),
                origin: self.endpoint.clone(),
                headers,
                body: bytes.into(),
                timeouts: self.timeouts,
                max_event_bytes: self.max_event_bytes,
                secret,
                request_id_headers: &["request-id", "x-request-id", "x-ds-trace-id"],
            })
        })();
        let decoder = AnthropicDecoder::new(self.options.replay_kind, &req.call.model.id);
        let cancel = req.cancel.clone();
        Box::pin(async move { dsh_llm_http::start(prepared?, decoder, cancel).await })
    }
}

/// Shares one adapter (the plugin registers it behind an `Arc`).
pub fn shared(adapter: AnthropicAdapter) -> Arc<dyn LlmAdapter> {
    Arc::new(adapter)
}
