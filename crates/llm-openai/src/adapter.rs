//! The OpenAI-compatible adapter: one HTTP attempt per `stream()`.

use std::fmt;

use dsh_llm::attachments::{AttachmentLookup, no_attachments};
use dsh_llm::{
    ChunkStream, LlmAdapter, LlmFailure, LlmRequest, Modality, ModelInfo, ReasoningEffort,
};
use dsh_llm_http::{Attempt, EnvFn, KeyStyle, Timeouts, build_client, process_env, resolve_key};
use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use secrecy::SecretString;

use crate::config::{
    API_KEY_ENV, BASE_URL_ENV, DEFAULT_BASE_URL, EffortParam, ModelEntry, OpenAiConfig,
};
use crate::decode::OpenAiDecoder;
use crate::request::{BodyOptions, Images, body};

/// Why an adapter cannot be built from its config.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// The base URL does not make a valid endpoint.
    #[error("invalid OpenAI-compatible base URL `{url}`: {source}")]
    BaseUrl {
        /// The base URL as configured.
        url: String,
        /// The parser's error.
        source: <reqwest::Url as std::str::FromStr>::Err,
    },
    /// An extra header that cannot be sent.
    #[error("invalid header `{0}` in the row's `headers`")]
    Header(String),
    /// The HTTP client cannot be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// The OpenAI-compatible chat-completions adapter (one per provider row).
pub struct OpenAiAdapter {
    label: String,
    client: dsh_llm_http::HttpClient,
    endpoint: String,
    headers: HeaderMap,
    key: Option<SecretString>,
    key_env: String,
    key_optional: bool,
    env: EnvFn,
    default_model: String,
    catalog: Vec<ModelEntry>,
    options: BodyOptions,
    timeouts: Timeouts,
    max_event_bytes: usize,
    attachments: AttachmentLookup,
}

impl fmt::Debug for OpenAiAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiAdapter")
            .field("endpoint", &self.endpoint)
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
            .field("key_env", &self.key_env)
            .finish_non_exhaustive()
    }
}

impl OpenAiAdapter {
    /// Builds the adapter, reading the base URL variable from the process environment.
    pub fn new(config: &OpenAiConfig) -> Result<Self, AdapterError> {
        Self::with_env(config, process_env())
    }

    /// Like [`OpenAiAdapter::new`] with an injected environment.
    pub fn with_env(config: &OpenAiConfig, env: EnvFn) -> Result<Self, AdapterError> {
        let timeouts = Timeouts::with_ms(
            config.connect_timeout_ms,
            config.idle_timeout_ms,
            config.progress_timeout_ms,
            config.total_timeout_ms,
        );
        let base_env = config.base_url_env.as_deref().unwrap_or(BASE_URL_ENV);
        let base = config
            .base_url
            .clone()
            .filter(|b| !b.is_empty())
            .or_else(|| env(base_env).filter(|b| !b.is_empty()))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let endpoint = format!("{}/chat/completions", base.trim_end_matches('/'));
        reqwest::Url::parse(&endpoint).map_err(|source| AdapterError::BaseUrl {
            url: base.clone(),
            source,
        })?;
        let mut headers = dsh_llm_http::base_headers();
        for (name, value) in &config.headers {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| AdapterError::Header(name.clone()))?;
            let v = HeaderValue::from_str(value).map_err(|_| AdapterError::Header(name.clone()))?;
            headers.insert(n, v);
        }
        Ok(Self {
            label: config
                .label
                .clone()
                .unwrap_or_else(|| "OpenAI-compatible".to_owned()),
            client: build_client(&timeouts).map_err(AdapterError::Client)?,
            endpoint,
            headers,
            key: config.api_key.as_ref().map(|k| k.0.clone()),
            key_env: config
                .api_key_env
                .clone()
                .unwrap_or_else(|| API_KEY_ENV.to_owned()),
            key_optional: config.key_optional,
            env,
            default_model: config
                .default_model
                .clone()
                .or_else(|| config.models.first().map(|m| m.id.clone()))
                .unwrap_or_else(|| "gpt-4o-mini".to_owned()),
            catalog: config.models.clone(),
            options: BodyOptions {
                pass_back: config.reasoning_pass_back,
                effort: config.effort_param,
                max_tokens: config.max_tokens_param,
                stream_usage: config.stream_usage.unwrap_or(true),
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

    /// The endpoint requests go to (`<base>/chat/completions`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

impl LlmAdapter for OpenAiAdapter {
    fn default_model(&self) -> String {
        self.default_model.clone()
    }

    fn resolve_model(&self, model: &str) -> ModelInfo {
        let entry = self.catalog.iter().find(|m| m.id == model);
        let reasons =
            entry.is_some_and(|e| e.reasoning) && self.options.effort != EffortParam::None;
        ModelInfo {
            id: model.to_owned(),
            context_window: entry.map_or(128_000, |e| e.context_window),
            default_max_tokens: entry.map_or(16_384, |e| e.default_max_tokens),
            max_output_tokens: entry.and_then(|e| e.max_output_tokens),
            reasoning_efforts: if reasons {
                vec![
                    ReasoningEffort::Off,
                    ReasoningEffort::Low,
                    ReasoningEffort::High,
                ]
            } else {
                Vec::new()
            },
            default_effort: reasons.then_some(ReasoningEffort::High),
            input_modalities: if entry.is_some_and(|e| e.vision) {
                vec![Modality::Text, Modality::Image]
            } else {
                vec![Modality::Text]
            },
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
                KeyStyle::Bearer,
                &self.label,
                self.key_optional,
            )?;
            let images = Images {
                lookup: &self.attachments,
                label: &self.label,
            };
            let bytes = body(&req, &self.options, images)?;
            let mut headers = self.headers.clone();
            let secret = key.map(|(secret, value)| {
                headers.insert(KeyStyle::Bearer.header(), value);
                secret
            });
            tracing::debug!(endpoint = %self.endpoint, model = %req.call.model.id, bytes = bytes.len(), "chat-completions request");
            Ok::<_, LlmFailure>(Attempt {
                client: self.client.clone(),
                label: self.label.clone(),
                endpoint: self.endpoint.clone(),
                origin: self.endpoint.clone(),
                headers,
                body: bytes.into(),
                timeouts: self.timeouts,
                max_event_bytes: self.max_event_bytes,
                secret,
                request_id_headers: &["x-request-id", "request-id", "x-ds-trace-id"],
            })
        })();
        let cancel = req.cancel.clone();
        Box::pin(async move { dsh_llm_http::start(prepared?, OpenAiDecoder::new(), cancel).await })
    }
}
