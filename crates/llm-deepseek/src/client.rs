//! The DeepSeek adapter: its dialect (body, translator, live config) over the shared HTTP/SSE
//! attempt engine of `dsh-llm-http` (send, time budgets, cancellation, drain, error mapping).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_llm::attachments::{AttachmentLookup, no_attachments};
use dsh_llm::{
    ChunkStream, LlmAdapter, LlmFailure, LlmRequest, Modality, ModelInfo, ReasoningEffort,
    SseEvent, StreamChunk,
};
use dsh_llm_http::{Attempt, Decoder, KeyStyle, build_client, resolve_key};
pub use dsh_llm_http::{EnvFn, Timeouts, install_crypto_provider, process_env};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use reqwest::header::HeaderMap;
use secrecy::SecretString;
use tokio::sync::watch;

use crate::config::{
    API_KEY_ENV, BASE_URL_ENV, DEFAULT_BASE_URL, DEFAULT_MODEL, DeepSeekConfig, ModelEntry,
    ThinkingMode, default_catalog,
};
use crate::request::{BodyCache, BodyOptions, Images, body_extending};
use crate::translate::{Progress, Translator};

/// Why an adapter cannot be built from a config snapshot (nothing changes then).
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// The base URL does not make a valid endpoint.
    #[error("invalid DeepSeek base URL `{url}`: {source}")]
    BaseUrl {
        /// The base URL as configured (trailing slash removed).
        url: String,
        /// The URL parser's error.
        source: <reqwest::Url as std::str::FromStr>::Err,
    },
    /// The HTTP client (TLS backend) cannot be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// Response headers that carry a request id, first found wins.
const REQUEST_ID_HEADERS: &[&str] = &["x-ds-trace-id", "x-request-id", "x-deepseek-request-id"];

struct Inner {
    client: dsh_llm_http::HttpClient,
    base_url: String,
    endpoint: String,
    /// Content type, accept and user agent (the key is added per request).
    headers: HeaderMap,
    key: Option<SecretString>,
    key_env: String,
    env: EnvFn,
    default_model: String,
    catalog: Vec<ModelEntry>,
    thinking_locked: bool,
    options: BodyOptions,
    timeouts: Timeouts,
    max_event_bytes: usize,
    /// Size of the last request body: the capacity hint of the next one (append-only requests
    /// grow a little per step), so the body never reallocates while it is written.
    last_body: AtomicUsize,
    /// The last body and its messages: the next request of the series writes only its new
    /// messages (taken while a body is written, so concurrent requests never wait on it). This
    /// is the dialect's body hook: the engine sends whatever bytes it is given.
    body_cache: Mutex<BodyCache>,
}

struct Shared {
    current: Mutex<Arc<Inner>>,
    env: EnvFn,
    updates: Option<Mutex<watch::Receiver<DeepSeekConfig>>>,
    /// Where image bytes come from on image routes.
    attachments: AttachmentLookup,
}

/// The DeepSeek chat-completions adapter (route `deepseek`).
///
/// Its settings can change while it is registered: [`DeepSeekAdapter::reconfigure`] (or a
/// followed config watch, see [`DeepSeekAdapter::follow`]) swaps them for the next request; an
/// invalid snapshot is refused and the last good one (URL and key together) stays.
#[derive(Clone)]
pub struct DeepSeekAdapter {
    shared: Arc<Shared>,
}

impl fmt::Debug for DeepSeekAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.shared.current.lock().clone();
        f.debug_struct("DeepSeekAdapter")
            .field("endpoint", &inner.endpoint)
            .field("key", &inner.key.as_ref().map(|_| "[redacted]"))
            .field("key_env", &inner.key_env)
            .field("timeouts", &inner.timeouts)
            .finish()
    }
}

impl DeepSeekAdapter {
    /// Builds the adapter from its config, reading `DEEPSEEK_BASE_URL` from the process
    /// environment when the config has no base URL.
    pub fn new(config: &DeepSeekConfig) -> Result<Self, AdapterError> {
        Self::with_env(config, process_env())
    }

    /// Like [`DeepSeekAdapter::new`] with an injected environment (the key is looked up in it
    /// on every request).
    pub fn with_env(config: &DeepSeekConfig, env: EnvFn) -> Result<Self, AdapterError> {
        let inner = Inner::build(config, &env)?;
        Ok(Self {
            shared: Arc::new(Shared {
                current: Mutex::new(Arc::new(inner)),
                env,
                updates: None,
                attachments: no_attachments(),
            }),
        })
    }

    /// Follows a config watch (the kernel's live config): before each request, a changed
    /// snapshot is applied; an invalid one is logged and the last good settings stay.
    pub fn follow(self, updates: watch::Receiver<DeepSeekConfig>) -> Self {
        let shared = Shared {
            current: Mutex::new(self.shared.current.lock().clone()),
            env: self.shared.env.clone(),
            updates: Some(Mutex::new(updates)),
            attachments: self.shared.attachments.clone(),
        };
        Self {
            shared: Arc::new(shared),
        }
    }

    /// Reads image bytes through `lookup` (the plugin gives the `attachments` service's soft
    /// lookup); without it, an image on an image route fails the request.
    pub fn with_attachments(self, lookup: AttachmentLookup) -> Self {
        let shared = Shared {
            current: Mutex::new(self.shared.current.lock().clone()),
            env: self.shared.env.clone(),
            updates: self
                .shared
                .updates
                .as_ref()
                .map(|u| Mutex::new(u.lock().clone())),
            attachments: lookup,
        };
        Self {
            shared: Arc::new(shared),
        }
    }

    /// Replaces the settings for the next request. On error nothing changes.
    pub fn reconfigure(&self, config: &DeepSeekConfig) -> Result<(), AdapterError> {
        let inner = Inner::build(config, &self.shared.env)?;
        *self.shared.current.lock() = Arc::new(inner);
        Ok(())
    }

    /// The current settings, after applying a pending config update if there is one.
    fn inner(&self) -> Arc<Inner> {
        if let Some(updates) = &self.shared.updates {
            let mut rx = updates.lock();
            if rx.has_changed().unwrap_or(false) {
                let config = rx.borrow_and_update().clone();
                drop(rx);
                if let Err(f) = self.reconfigure(&config) {
                    tracing::warn!(error = %f, "DeepSeek config update refused; keeping the last good settings");
                }
            }
        }
        self.shared.current.lock().clone()
    }

    /// The endpoint requests go to (`<base>/chat/completions`).
    pub fn endpoint(&self) -> String {
        self.inner().endpoint.clone()
    }

    /// The effective time budgets.
    pub fn timeouts(&self) -> Timeouts {
        self.inner().timeouts
    }
}

impl Inner {
    fn build(config: &DeepSeekConfig, env: &EnvFn) -> Result<Self, AdapterError> {
        let timeouts = Timeouts::with_ms(
            config.connect_timeout_ms,
            config.idle_timeout_ms,
            config.progress_timeout_ms,
            config.total_timeout_ms,
        );
        let base = config
            .base_url
            .clone()
            .filter(|b| !b.is_empty())
            .or_else(|| env(BASE_URL_ENV).filter(|b| !b.is_empty()))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let base_url = base.strip_suffix('/').unwrap_or(&base).to_owned();
        let endpoint = format!("{base_url}/chat/completions");
        reqwest::Url::parse(&endpoint).map_err(|source| AdapterError::BaseUrl {
            url: base_url.clone(),
            source,
        })?;
        let client = build_client(&timeouts).map_err(AdapterError::Client)?;
        let headers = dsh_llm_http::base_headers();
        Ok(Inner {
            client,
            base_url,
            endpoint,
            headers,
            key: config.api_key.as_ref().map(|k| k.0.clone()),
            key_env: config
                .api_key_env
                .clone()
                .unwrap_or_else(|| API_KEY_ENV.to_owned()),
            env: env.clone(),
            default_model: config
                .default_model
                .clone()
                .unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
            catalog: config.models.clone().unwrap_or_else(default_catalog),
            thinking_locked: config.thinking == Some(ThinkingMode::Disabled),
            options: BodyOptions {
                reasoning_placeholder: config.reasoning_placeholder,
            },
            timeouts,
            max_event_bytes: config
                .max_event_bytes
                .unwrap_or(dsh_llm::sse::DEFAULT_MAX_EVENT_BYTES),
            last_body: AtomicUsize::new(0),
            body_cache: Mutex::new(BodyCache::default()),
        })
    }

    /// Everything before I/O: the key (config, else the environment, read now), the body
    /// (extending the previous one where the messages extend), the headers.
    fn prepare(&self, req: &LlmRequest, images: Images<'_>) -> Result<Attempt, LlmFailure> {
        let key = resolve_key(
            self.key.as_ref(),
            &self.key_env,
            &self.env,
            KeyStyle::Bearer,
            "DeepSeek",
            false,
        )?;
        let hint = self.last_body.load(Ordering::Relaxed);
        let mut cache = std::mem::take(&mut *self.body_cache.lock());
        let body = body_extending(
            req,
            self.options,
            images,
            &mut cache,
            hint + hint / 16 + 16 * 1024,
        );
        *self.body_cache.lock() = cache;
        let body = body?;
        self.last_body.store(body.len(), Ordering::Relaxed);
        let mut headers = self.headers.clone();
        let secret = key.map(|(secret, value)| {
            headers.insert(KeyStyle::Bearer.header(), value);
            secret
        });
        tracing::debug!(endpoint = %self.endpoint, model = %req.call.model.id, bytes = body.len(), "DeepSeek request");
        Ok(Attempt {
            client: self.client.clone(),
            label: "DeepSeek".to_owned(),
            endpoint: self.endpoint.clone(),
            origin: self.base_url.clone(),
            headers,
            body,
            timeouts: self.timeouts,
            max_event_bytes: self.max_event_bytes,
            secret,
            request_id_headers: REQUEST_ID_HEADERS,
        })
    }

    fn model_info(&self, model: &str) -> ModelInfo {
        let entry = self.catalog.iter().find(|m| m.id == model);
        let efforts: Vec<ReasoningEffort> = if self.thinking_locked {
            vec![ReasoningEffort::Off]
        } else {
            ReasoningEffort::KNOWN.to_vec()
        };
        let default_effort = if self.thinking_locked {
            ReasoningEffort::Off
        } else {
            ReasoningEffort::High
        };
        let mut modalities = vec![Modality::Text];
        if entry.is_some_and(|e| e.vision) {
            modalities.push(Modality::Image);
        }
        ModelInfo {
            id: model.to_owned(),
            context_window: entry.map_or(1_000_000, |e| e.context_window),
            default_max_tokens: entry.map_or(256_000, |e| e.default_max_tokens),
            max_output_tokens: entry.map_or(Some(393_216), |e| e.max_output_tokens),
            reasoning_efforts: efforts,
            default_effort: Some(default_effort),
            input_modalities: modalities,
            system_prompt_update: entry.and_then(|e| e.system_prompt_update),
            tool_update: entry.and_then(|e| e.tool_update),
            pricing: entry.and_then(|e| e.pricing),
        }
    }
}

/// The DeepSeek dialect's decoder for the engine: SSE `data:` payloads through the
/// [`Translator`].
struct DeepSeekDecoder(Translator);

impl Decoder for DeepSeekDecoder {
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamChunk>,
    ) -> Result<Progress, LlmFailure> {
        self.0.event(&event.data, out)
    }

    fn end_without_done(&mut self, out: &mut Vec<StreamChunk>) -> bool {
        // A complete finish (reason and usage) then a clean end without `[DONE]`.
        if self.0.is_complete() {
            self.0.end_without_done(out);
            true
        } else {
            false
        }
    }

    fn events_seen(&self) -> usize {
        self.0.events_seen()
    }

    fn truncated_message(&self) -> &'static str {
        "SSE stream ended without [DONE]"
    }
}

impl LlmAdapter for DeepSeekAdapter {
    fn default_model(&self) -> String {
        self.inner().default_model.clone()
    }

    fn resolve_model(&self, model: &str) -> ModelInfo {
        self.inner().model_info(model)
    }

    fn models(&self) -> Vec<ModelInfo> {
        let inner = self.inner();
        inner
            .catalog
            .iter()
            .map(|e| inner.model_info(&e.id))
            .collect()
    }

    fn stream(&self, req: LlmRequest) -> BoxFuture<'static, Result<ChunkStream, LlmFailure>> {
        // Everything that can fail without I/O fails first. The effort was validated once,
        // against this route's list, by `Llm::prepare_call`.
        let images = Images {
            lookup: &self.shared.attachments,
        };
        let prepared = self.inner().prepare(&req, images);
        let cancel = req.cancel.clone();
        Box::pin(async move {
            dsh_llm_http::start(prepared?, DeepSeekDecoder(Translator::new()), cancel).await
        })
    }
}
