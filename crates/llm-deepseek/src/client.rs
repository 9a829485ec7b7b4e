//! The DeepSeek adapter: one HTTP attempt per `stream()`, with timeouts and cancellation.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Once};
use std::time::{Duration, SystemTime};

use dsh_llm::{
    ChunkStream, FinishReason, LlmAdapter, LlmFailure, LlmRequest, Modality, ModelInfo,
    ReasoningEffort, SseError, SseFramer, SseItem, StreamChunk, codes,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, USER_AGENT};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::config::{
    API_KEY_ENV, BASE_URL_ENV, DEFAULT_BASE_URL, DEFAULT_MODEL, DeepSeekConfig, ModelEntry,
    ThinkingMode, default_catalog,
};
use crate::errors::classify;
use crate::request::{BodyCache, BodyOptions, body_extending};
use crate::translate::{Progress, Translator, malformed};

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

/// Reads an environment variable (injectable for tests).
pub type EnvFn = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The process environment.
pub fn process_env() -> EnvFn {
    Arc::new(|name| std::env::var(name).ok())
}

/// The four time budgets of an attempt (`wire-protocol.md` §13).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP/TLS connect.
    pub connect: Duration,
    /// Idle read watchdog, re-armed by any byte (comments included); also bounds the wait for
    /// the response head.
    pub idle: Duration,
    /// Progress deadline, re-armed by data events only.
    pub progress: Duration,
    /// Total attempt deadline from send; nothing extends it.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            idle: Duration::from_secs(300),
            progress: Duration::from_secs(660),
            total: Duration::from_secs(3600),
        }
    }
}

const MAX_ERROR_BODY: usize = 64 * 1024;
/// How long the body is read past `[DONE]` for its end (the chunked terminator), so the
/// connection goes back to the pool; also bounded by the total deadline.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// How many bytes past `[DONE]` are read (and ignored) before giving the connection up.
pub const MAX_DRAIN_BYTES: usize = 64 * 1024;

/// Installs rustls' `ring` provider once per process (idempotent; a provider installed by
/// someone else is kept).
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

struct Inner {
    client: reqwest::Client,
    base_url: String,
    endpoint: String,
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
    last_body: std::sync::atomic::AtomicUsize,
    /// The last body and its messages: the next request of the series writes only its new
    /// messages (taken while a body is written, so concurrent requests never wait on it).
    body_cache: parking_lot::Mutex<BodyCache>,
}

struct Shared {
    current: Mutex<Arc<Inner>>,
    env: EnvFn,
    updates: Option<Mutex<watch::Receiver<DeepSeekConfig>>>,
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

fn ms(d: Duration) -> u128 {
    d.as_millis()
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
        install_crypto_provider();
        let d = Timeouts::default();
        let dur = |v: Option<u64>, def: Duration| v.map(Duration::from_millis).unwrap_or(def);
        let timeouts = Timeouts {
            connect: dur(config.connect_timeout_ms, d.connect),
            idle: dur(config.idle_timeout_ms, d.idle),
            progress: dur(config.progress_timeout_ms, d.progress),
            total: dur(config.total_timeout_ms, d.total),
        };
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
        let client = reqwest::Client::builder()
            .connect_timeout(timeouts.connect)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(AdapterError::Client)?;
        Ok(Inner {
            client,
            base_url,
            endpoint,
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
            last_body: std::sync::atomic::AtomicUsize::new(0),
            body_cache: parking_lot::Mutex::new(BodyCache::default()),
        })
    }

    /// The key from config, else from the environment; never echoed.
    fn credential(&self) -> Result<(SecretString, HeaderValue), LlmFailure> {
        let key = match &self.key {
            Some(k) if !k.expose_secret().is_empty() => k.clone(),
            _ => match (self.env)(&self.key_env).filter(|k| !k.is_empty()) {
                Some(k) => SecretString::from(k),
                None => {
                    return Err(LlmFailure::new(
                        codes::MISSING_CREDENTIAL,
                        format!(
                            "no DeepSeek API key: set {} or the plugin's `apiKey`",
                            self.key_env
                        ),
                    ));
                }
            },
        };
        let mut value =
            HeaderValue::from_str(&format!("Bearer {}", key.expose_secret())).map_err(|_| {
                LlmFailure::new(
                    codes::INVALID_CREDENTIAL,
                    "the DeepSeek API key contains characters that cannot be sent in a header",
                )
            })?;
        value.set_sensitive(true);
        Ok((key, value))
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

/// Removes every occurrence of the key from a message (defence in depth: a proxy might echo it).
fn redact(mut failure: LlmFailure, key: &SecretString) -> LlmFailure {
    let k = key.expose_secret();
    if k.len() >= 4 && failure.message.contains(k) {
        failure.message = failure.message.replace(k, "[redacted]");
    }
    failure
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

fn request_id(headers: &HeaderMap) -> Option<String> {
    ["x-ds-trace-id", "x-request-id", "x-deepseek-request-id"]
        .iter()
        .find_map(|h| {
            headers
                .get(*h)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
}

fn aborted() -> LlmFailure {
    LlmFailure::new(codes::ABORTED, "DeepSeek request aborted by caller")
}

fn idle_timeout(idle: Duration) -> LlmFailure {
    LlmFailure::new(
        codes::TIMEOUT,
        format!("DeepSeek stream idle timeout after {}ms", ms(idle)),
    )
}

fn total_timeout(total: Duration) -> LlmFailure {
    LlmFailure::new(
        codes::TIMEOUT,
        format!(
            "DeepSeek attempt exceeded its total deadline of {}ms",
            ms(total)
        ),
    )
}

fn progress_timeout(p: Duration) -> LlmFailure {
    LlmFailure::new(
        codes::TIMEOUT,
        format!(
            "DeepSeek stream made no progress (no data event) for {}ms",
            ms(p)
        ),
    )
}

fn one_chunk(reason: FinishReason) -> ChunkStream {
    futures::stream::iter([StreamChunk::finish(reason)]).boxed()
}

/// Deadlines shared by the head and body phases.
#[derive(Clone, Copy)]
struct Clock {
    timeouts: Timeouts,
    total_at: Instant,
    progress_at: Instant,
}

enum Wait<T> {
    Done(T),
    Cancelled,
    Timeout(LlmFailure),
}

impl Clock {
    /// Awaits `fut` under cancel, total, progress and idle (armed now) budgets; cancel wins.
    async fn wait<T>(&self, cancel: &CancellationToken, fut: impl Future<Output = T>) -> Wait<T> {
        let idle_at = Instant::now() + self.timeouts.idle;
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Wait::Cancelled,
            _ = sleep_until(self.total_at) => Wait::Timeout(total_timeout(self.timeouts.total)),
            _ = sleep_until(self.progress_at) => Wait::Timeout(progress_timeout(self.timeouts.progress)),
            _ = sleep_until(idle_at) => Wait::Timeout(idle_timeout(self.timeouts.idle)),
            v = fut => Wait::Done(v),
        }
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
        let inner = self.inner();
        Box::pin(async move { attempt(inner, req).await })
    }
}

async fn attempt(inner: Arc<Inner>, req: LlmRequest) -> Result<ChunkStream, LlmFailure> {
    // Everything that can fail without I/O fails first.
    // The effort was validated once, against this route's list, by `Llm::prepare_call`.
    let (key, auth) = inner.credential()?;
    let hint = inner.last_body.load(std::sync::atomic::Ordering::Relaxed);
    let mut cache = std::mem::take(&mut *inner.body_cache.lock());
    let bytes = body_extending(
        &req,
        inner.options,
        &mut cache,
        hint + hint / 16 + 16 * 1024,
    )?;
    *inner.body_cache.lock() = cache;
    inner
        .last_body
        .store(bytes.len(), std::sync::atomic::Ordering::Relaxed);
    if req.cancel.is_cancelled() {
        return Ok(one_chunk(FinishReason::Aborted { failure: aborted() }));
    }
    tracing::debug!(endpoint = %inner.endpoint, model = %req.call.model.id, bytes = bytes.len(), "DeepSeek request");
    let now = Instant::now();
    let t = inner.timeouts;
    let clock = Clock {
        timeouts: t,
        total_at: now + t.total,
        progress_at: now + t.progress,
    };
    let send = inner
        .client
        .post(&inner.endpoint)
        .header(AUTHORIZATION, auth)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "text/event-stream")
        .header(USER_AGENT, concat!("dsh/", env!("CARGO_PKG_VERSION")))
        .body(bytes)
        .send();
    let response = match clock.wait(&req.cancel, send).await {
        Wait::Cancelled => return Ok(one_chunk(FinishReason::Aborted { failure: aborted() })),
        Wait::Timeout(f) => return Err(f),
        Wait::Done(Err(e)) => {
            let f = if e.is_timeout() || e.is_connect() && error_chain(&e).contains("timed out") {
                LlmFailure::new(
                    codes::TIMEOUT,
                    format!(
                        "DeepSeek API request to {} failed: connect timeout after {}ms",
                        inner.base_url,
                        ms(t.connect)
                    ),
                )
            } else {
                LlmFailure::new(
                    codes::TRANSPORT,
                    format!(
                        "DeepSeek API request to {} failed: {}",
                        inner.base_url,
                        error_chain(&e)
                    ),
                )
            };
            tracing::debug!(code = %f.code, message = %f.message, "DeepSeek request failed");
            return Err(redact(f, &key));
        }
        Wait::Done(Ok(r)) => r,
    };
    let status = response.status().as_u16();
    let rid = request_id(response.headers());
    if !response.status().is_success() {
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut response = response;
        let mut body = Vec::new();
        loop {
            match clock.wait(&req.cancel, response.chunk()).await {
                Wait::Done(Ok(Some(b))) => {
                    let room = MAX_ERROR_BODY.saturating_sub(body.len());
                    body.extend_from_slice(&b[..b.len().min(room)]);
                    if room <= b.len() {
                        break;
                    }
                }
                Wait::Done(Ok(None) | Err(_)) | Wait::Timeout(_) => break,
                Wait::Cancelled => {
                    return Ok(one_chunk(FinishReason::Aborted { failure: aborted() }));
                }
            }
        }
        let f = classify(
            status,
            &body,
            retry_after.as_deref(),
            rid,
            SystemTime::now(),
        );
        tracing::debug!(status, code = %f.code, "DeepSeek HTTP error");
        return Err(redact(f, &key));
    }
    let state = BodyState {
        response: Some(response),
        framer: SseFramer::with_max_event_bytes(inner.max_event_bytes),
        translator: Translator::new(),
        pending: VecDeque::new(),
        held: None,
        items: Vec::new(),
        out: Vec::new(),
        finished: false,
        saw_bytes: false,
        cancel: req.cancel.clone(),
        clock,
        base_url: inner.base_url.clone(),
        request_id: rid,
        key,
    };
    Ok(futures::stream::unfold(state, BodyState::next).boxed())
}

struct BodyState {
    response: Option<reqwest::Response>,
    framer: SseFramer,
    translator: Translator,
    pending: VecDeque<StreamChunk>,
    /// The finish chunk, held back after `[DONE]` until the body has been read to its end.
    held: Option<StreamChunk>,
    items: Vec<SseItem>,
    out: Vec<StreamChunk>,
    finished: bool,
    saw_bytes: bool,
    cancel: CancellationToken,
    clock: Clock,
    base_url: String,
    request_id: Option<String>,
    key: SecretString,
}

impl BodyState {
    async fn next(mut self) -> Option<(StreamChunk, Self)> {
        loop {
            if let Some(c) = self.pending.pop_front() {
                return Some((c, self));
            }
            if self.finished {
                return None;
            }
            if self.held.is_some() {
                self.drain().await;
                continue;
            }
            self.read().await;
        }
    }

    /// After `[DONE]`: reads the rest of the body (normally just the chunked terminator) so the
    /// connection returns to the pool, bounded by [`DRAIN_TIMEOUT`], the total deadline and
    /// [`MAX_DRAIN_BYTES`]; cancellation stops it. Then releases the held finish chunk (the
    /// answer is complete whatever the drain gives).
    async fn drain(&mut self) {
        if let Some(mut response) = self.response.take() {
            let until = (Instant::now() + DRAIN_TIMEOUT).min(self.clock.total_at);
            let mut extra = 0usize;
            loop {
                let chunk = tokio::select! {
                    biased;
                    _ = self.cancel.cancelled() => break,
                    _ = sleep_until(until) => {
                        tracing::debug!("DeepSeek body did not end after [DONE]; connection dropped");
                        break;
                    }
                    c = response.chunk() => c,
                };
                match chunk {
                    Ok(Some(bytes)) => {
                        extra += bytes.len();
                        if extra > MAX_DRAIN_BYTES {
                            tracing::debug!(
                                extra,
                                "DeepSeek body continues after [DONE]; connection dropped"
                            );
                            break;
                        }
                    }
                    // The end of the body: the connection is reusable.
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "DeepSeek body failed after [DONE]");
                        break;
                    }
                }
            }
        }
        self.finished = true;
        if let Some(finish) = self.held.take() {
            self.pending.push_back(finish);
        }
    }

    /// Ends the attempt with `reason`: the connection is dropped now.
    fn end(&mut self, reason: FinishReason) {
        self.response = None;
        self.finished = true;
        let reason = match reason {
            FinishReason::Error { failure } => FinishReason::Error {
                failure: redact(failure, &self.key).with_request_id(self.request_id.clone()),
            },
            other => other,
        };
        self.pending.push_back(StreamChunk::finish(reason));
    }

    async fn read(&mut self) {
        let Some(response) = self.response.as_mut() else {
            self.finished = true;
            return;
        };
        let clock = self.clock;
        match clock.wait(&self.cancel, response.chunk()).await {
            Wait::Cancelled => self.end(FinishReason::Aborted { failure: aborted() }),
            Wait::Timeout(f) => self.end(FinishReason::error(f)),
            Wait::Done(Err(e)) => self.end(FinishReason::error(LlmFailure::new(
                codes::TRANSPORT,
                format!(
                    "DeepSeek API stream from {} failed: {}",
                    self.base_url,
                    error_chain(&e)
                ),
            ))),
            Wait::Done(Ok(None)) => {
                if self.translator.is_complete() && self.framer.is_idle() {
                    // A complete finish (reason and usage) then a clean end without `[DONE]`.
                    self.out.clear();
                    self.translator.end_without_done(&mut self.out);
                    self.pending.extend(self.out.drain(..));
                    self.response = None;
                    self.finished = true;
                    return;
                }
                let f = if self.translator.events_seen() > 0 || !self.framer.is_idle() {
                    LlmFailure::new(codes::STREAM_CLOSED, "SSE stream ended without [DONE]")
                } else if self.saw_bytes {
                    LlmFailure::new(
                        codes::TRANSPORT,
                        format!(
                            "DeepSeek API stream from {} closed before any event",
                            self.base_url
                        ),
                    )
                } else {
                    LlmFailure::new(
                        codes::EMPTY_RESPONSE,
                        "DeepSeek API returned no response body",
                    )
                };
                self.end(FinishReason::error(f));
            }
            Wait::Done(Ok(Some(bytes))) => {
                self.saw_bytes |= !bytes.is_empty();
                self.feed(&bytes);
            }
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.items.clear();
        let framed = self.framer.push(bytes, &mut self.items);
        let items = std::mem::take(&mut self.items);
        for item in &items {
            let SseItem::Event(ev) = item else { continue };
            self.clock.progress_at = Instant::now() + self.clock.timeouts.progress;
            self.out.clear();
            let r = self.translator.event(&ev.data, &mut self.out);
            self.pending.extend(self.out.drain(..));
            match r {
                Ok(Progress::Continue) => {}
                Ok(Progress::Done) => {
                    // Hold the finish until the body is read to its end (connection reuse).
                    if matches!(self.pending.back(), Some(StreamChunk::Finish { .. })) {
                        self.held = self.pending.pop_back();
                    } else {
                        self.response = None;
                        self.finished = true;
                    }
                    self.items = items;
                    return;
                }
                Err(f) => {
                    self.end(FinishReason::error(f));
                    self.items = items;
                    return;
                }
            }
        }
        self.items = items;
        if let Err(e) = framed {
            let f = match e {
                SseError::TooLarge { limit } => malformed(&format!("event exceeds {limit} bytes")),
                SseError::InvalidUtf8 => malformed("invalid UTF-8"),
                SseError::Truncated => malformed("truncated"),
            };
            self.end(FinishReason::error(f));
        }
    }
}
