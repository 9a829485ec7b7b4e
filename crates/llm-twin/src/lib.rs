//! `dsh-llm-twin`: the library twin of the hand-written DeepSeek adapter. The same endpoint
//! (`{base}/chat/completions`, DeepSeek's dialect) through `async-openai`'s client with
//! bring-your-own types: the library owns the HTTP request, the SSE framing (`eventsource-stream`)
//! and the error envelope; dsh owns the body and the chunk fold ([`translate`]). The
//! conformance suite runs both adapters with one test list, so two independent internals check
//! the protocol.
//!
//! Why `async-openai` and not `genai` (evaluated first): `genai`'s `ToolCall::fn_arguments` is a
//! parsed `serde_json::Value`, so raw argument strings do not survive (whitespace, `1.50` →
//! `1.5`, text that is not JSON), and they cannot be sent back byte-exact either. `async-openai`'s
//! typed chunks have no `reasoning_content`, but its `byot` methods take our own request and
//! chunk types, which keep raw argument strings and pass reasoning back. Its default retry layer
//! is replaced (one `stream()` is one attempt), and a tower service keeps the `Retry-After` and
//! request id the library drops.

pub mod translate;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_llm::{
    ChunkStream, ContentBlock, FinishReason, Llm, LlmAdapter, LlmFailure, LlmRequest, Modality,
    ModelInfo, ReasoningEffort, Role, StreamChunk, codes,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::translate::{Chunk, Fold};

/// Configuration of the `deepseek-twin` plugin.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TwinConfig {
    /// Route (default `deepseek-twin`).
    #[serde(default)]
    pub route: Option<String>,
    /// Base URL; default `DEEPSEEK_BASE_URL`, else `https://api.deepseek.com`.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Variable holding the key (default `DEEPSEEK_API_KEY`).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Model used when the caller names none (default `deepseek-flash`).
    #[serde(default)]
    pub default_model: Option<String>,
    /// Connect timeout (default 10 000 ms).
    #[serde(default)]
    pub connect_timeout_ms: Option<u64>,
    /// Idle watchdog between events (default 300 000 ms). The library hides comments and
    /// partial events, so only whole events re-arm it.
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
}

/// Reads an environment variable (injectable for tests).
pub type EnvFn = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Why the adapter cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    /// The HTTP client cannot be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// The library twin (route `deepseek-twin`).
pub struct TwinAdapter {
    http: reqwest::Client,
    base_url: String,
    key_env: String,
    env: EnvFn,
    default_model: String,
    idle: Duration,
}

impl fmt::Debug for TwinAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TwinAdapter")
            .field("base_url", &self.base_url)
            .field("key_env", &self.key_env)
            .finish_non_exhaustive()
    }
}

impl TwinAdapter {
    /// Builds the adapter with the process environment.
    pub fn new(config: &TwinConfig) -> Result<Self, TwinError> {
        Self::with_env(config, Arc::new(|n| std::env::var(n).ok()))
    }

    /// Builds the adapter with an injected environment.
    pub fn with_env(config: &TwinConfig, env: EnvFn) -> Result<Self, TwinError> {
        dsh_tls::install_crypto_provider();
        let builder = match dsh_tls::client_config() {
            Some(tls) => reqwest::Client::builder().tls_backend_preconfigured(tls),
            None => reqwest::Client::builder(),
        };
        let http = builder
            .connect_timeout(Duration::from_millis(
                config.connect_timeout_ms.unwrap_or(10_000),
            ))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(TwinError::Client)?;
        let base = config
            .base_url
            .clone()
            .filter(|b| !b.is_empty())
            .or_else(|| env("DEEPSEEK_BASE_URL").filter(|b| !b.is_empty()))
            .unwrap_or_else(|| "https://api.deepseek.com".to_owned());
        Ok(Self {
            http,
            base_url: base.trim_end_matches('/').to_owned(),
            key_env: config
                .api_key_env
                .clone()
                .unwrap_or_else(|| "DEEPSEEK_API_KEY".to_owned()),
            env,
            default_model: config
                .default_model
                .clone()
                .unwrap_or_else(|| "deepseek-flash".to_owned()),
            idle: Duration::from_millis(config.idle_timeout_ms.unwrap_or(300_000)),
        })
    }
}

fn text_of(blocks: &[ContentBlock]) -> String {
    blocks.iter().filter_map(ContentBlock::as_text).collect()
}

/// A user/tool/system message's text: images and files as their `session-format.md` §9.7
/// placeholders (this twin sends no image bytes).
fn input_text_of(blocks: &[ContentBlock]) -> String {
    let mut s = String::new();
    for b in blocks {
        match b {
            ContentBlock::Text { text } => s.push_str(text),
            ContentBlock::File { attachment } => {
                s.push_str(&dsh_llm::attachments::file_placeholder(attachment));
            }
            ContentBlock::Image {
                attachment,
                offloaded,
            } => s.push_str(&dsh_llm::attachments::image_placeholder(
                attachment,
                *offloaded == Some(true),
            )),
            _ => {}
        }
    }
    s
}

/// The DeepSeek body, built as a JSON value (members in DeepSeek's order).
fn body(req: &LlmRequest) -> Value {
    let messages: Vec<Value> = req
        .messages
        .iter()
        .filter_map(|m| match m.role {
            Role::System => Some(json!({"role": "system", "content": input_text_of(&m.content)})),
            Role::User => Some(json!({"role": "user", "content": input_text_of(&m.content)})),
            Role::Developer => None,
            Role::Tool => {
                let t = input_text_of(&m.content);
                Some(json!({
                    "role": "tool",
                    "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": if t.is_empty() { "(no output)".to_owned() } else { t },
                }))
            }
            Role::Assistant => {
                let mut a = serde_json::Map::new();
                a.insert("role".into(), json!("assistant"));
                a.insert("content".into(), json!(text_of(&m.content)));
                let reasoning = m.reasoning();
                if !reasoning.is_empty() {
                    a.insert("reasoning_content".into(), json!(reasoning));
                }
                let calls: Vec<Value> = m
                    .tool_calls()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
                if !calls.is_empty() {
                    a.insert("tool_calls".into(), Value::Array(calls));
                }
                Some(Value::Object(a))
            }
        })
        .collect();
    let mut b = serde_json::Map::new();
    b.insert("model".into(), json!(req.call.model.id));
    b.insert("messages".into(), Value::Array(messages));
    b.insert("stream".into(), json!(true));
    b.insert("stream_options".into(), json!({"include_usage": true}));
    match &req.call.effort {
        Some(ReasoningEffort::Off) => {
            b.insert("thinking".into(), json!({"type": "disabled"}));
        }
        Some(e) => {
            b.insert("thinking".into(), json!({"type": "enabled"}));
            b.insert("reasoning_effort".into(), json!(e.as_str()));
        }
        None => {}
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters.as_ref()}}))
            .collect();
        b.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = req.call.temperature {
        b.insert("temperature".into(), json!(t));
    }
    b.insert("max_tokens".into(), json!(req.call.max_tokens));
    if !req.call.stop.is_empty() {
        b.insert("stop".into(), json!(req.call.stop));
    }
    Value::Object(b)
}

/// What the tower service saw of an error response (the library keeps only status and body).
#[derive(Default, Clone)]
struct Seen {
    retry_after: Option<String>,
    request_id: Option<String>,
}

fn retry_after_ms(v: &str) -> Option<u64> {
    v.trim()
        .parse::<u64>()
        .ok()
        .and_then(|s| s.checked_mul(1000))
        .filter(|ms| *ms > 0)
}

fn classify(e: OpenAIError, seen: &Seen) -> LlmFailure {
    match e {
        OpenAIError::ApiError(r) => {
            let status = r.status_code.as_u16();
            let wording = format!(
                "{} {} {}",
                r.api_error.code.as_deref().unwrap_or(""),
                r.api_error.r#type.as_deref().unwrap_or(""),
                r.api_error.message
            )
            .to_ascii_lowercase();
            let quota = [
                "insufficient balance",
                "insufficient_quota",
                "exceeded your current quota",
            ]
            .iter()
            .any(|w| wording.contains(w));
            let context = [
                "maximum context length",
                "context_length_exceeded",
                "too long",
            ]
            .iter()
            .any(|w| wording.contains(w));
            let code = match status {
                401 | 403 => codes::AUTH,
                402 => codes::QUOTA,
                _ if quota => codes::QUOTA,
                429 => codes::RATE_LIMIT,
                400 if context => codes::CONTEXT_WINDOW_EXCEEDED,
                500.. => codes::SERVER,
                400.. => codes::INVALID_REQUEST,
                s => dsh_llm::FailureCode::from(format!("HTTP_{s}")),
            };
            let message = if r.api_error.message.is_empty() {
                format!("DeepSeek API error (HTTP {status})")
            } else {
                r.api_error.message
            };
            LlmFailure::new(code, message)
                .with_status(status)
                .with_retry_after_ms(seen.retry_after.as_deref().and_then(retry_after_ms))
                .with_request_id(seen.request_id.clone())
        }
        OpenAIError::Reqwest(e) if e.is_timeout() => {
            LlmFailure::new(codes::TIMEOUT, format!("request timed out: {e}"))
        }
        OpenAIError::Reqwest(e) => {
            LlmFailure::new(codes::TRANSPORT, format!("request failed: {e}"))
        }
        OpenAIError::JSONDeserialize(e, _) => LlmFailure::new(
            codes::MALFORMED_RESPONSE,
            format!(
                "malformed SSE payload: {}",
                e.to_string().split(" at line ").next().unwrap_or("")
            ),
        ),
        OpenAIError::StreamError(e) => {
            LlmFailure::new(codes::TRANSPORT, format!("stream failed: {e}"))
        }
        other => LlmFailure::new(codes::UNKNOWN, other.to_string()),
    }
}

impl LlmAdapter for TwinAdapter {
    fn default_model(&self) -> String {
        self.default_model.clone()
    }

    fn resolve_model(&self, model: &str) -> ModelInfo {
        ModelInfo {
            id: model.to_owned(),
            context_window: 1_000_000,
            default_max_tokens: 256_000,
            max_output_tokens: Some(393_216),
            reasoning_efforts: ReasoningEffort::KNOWN.to_vec(),
            default_effort: Some(ReasoningEffort::High),
            input_modalities: vec![Modality::Text],
            system_prompt_update: None,
            tool_update: None,
            pricing: None,
        }
    }

    fn stream(&self, req: LlmRequest) -> BoxFuture<'static, Result<ChunkStream, LlmFailure>> {
        let key = (self.env)(&self.key_env).filter(|k| !k.is_empty());
        let http = self.http.clone();
        let base = self.base_url.clone();
        let key_env = self.key_env.clone();
        let idle = self.idle;
        Box::pin(async move {
            let Some(key) = key else {
                return Err(LlmFailure::new(
                    codes::MISSING_CREDENTIAL,
                    format!("no DeepSeek API key: set {key_env}"),
                ));
            };
            let seen = Arc::new(parking_lot_free::Slot::default());
            let slot = seen.clone();
            // The library's transport without its retry layer: one attempt, and the headers
            // of an error response kept for the failure.
            let service = tower::service_fn(move |factory: HttpRequestFactory| {
                let http = http.clone();
                let slot = slot.clone();
                async move {
                    let request = factory.build().await?;
                    let response = http.execute(request).await.map_err(OpenAIError::Reqwest)?;
                    if !response.status().is_success() {
                        let h = response.headers();
                        let get =
                            |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
                        slot.set(Seen {
                            retry_after: get("retry-after"),
                            request_id: get("x-ds-trace-id").or_else(|| get("x-request-id")),
                        });
                    }
                    Ok::<_, OpenAIError>(response)
                }
            });
            let config = OpenAIConfig::new()
                .with_api_base(&base)
                .with_api_key(secrecy::SecretString::from(key).expose_secret());
            let client = Client::with_config(config).with_http_service(service);
            let body = body(&req);
            let cancel = req.cancel.clone();
            let chat = client.chat();
            let started = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Ok(aborted_stream()),
                r = chat.create_stream_byot::<Value, Chunk>(body) => r,
            };
            let events = started.map_err(|e| classify(e, &seen.get()))?;
            Ok(fold_stream(events, cancel, idle))
        })
    }
}

/// A tiny mutex-protected slot (std only).
mod parking_lot_free {
    use std::sync::Mutex;

    #[derive(Default)]
    pub struct Slot(Mutex<super::Seen>);

    impl Slot {
        pub fn set(&self, v: super::Seen) {
            if let Ok(mut g) = self.0.lock() {
                *g = v;
            }
        }
        pub fn get(&self) -> super::Seen {
            self.0.lock().map(|g| g.clone()).unwrap_or_default()
        }
    }
}

fn aborted() -> FinishReason {
    FinishReason::Aborted {
        failure: LlmFailure::new(codes::ABORTED, "DeepSeek request aborted by caller"),
    }
}

fn aborted_stream() -> ChunkStream {
    futures::stream::iter([StreamChunk::finish(aborted())]).boxed()
}

type Events = async_openai::types::stream::StreamResponse<Chunk>;

/// Folds the library's stream into chunks under the idle watchdog and cancellation.
fn fold_stream(events: Events, cancel: CancellationToken, idle: Duration) -> ChunkStream {
    let state = (
        Some(events),
        Fold::default(),
        std::collections::VecDeque::new(),
    );
    futures::stream::unfold(state, move |(mut events, mut fold, mut pending)| {
        let cancel = cancel.clone();
        async move {
            loop {
                if let Some(c) = pending.pop_front() {
                    return Some((c, (events, fold, pending)));
                }
                let mut ev = events.take()?;
                let next = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => {
                        pending.push_back(StreamChunk::finish(aborted()));
                        continue;
                    }
                    n = tokio::time::timeout(idle, ev.next()) => n,
                };
                match next {
                    Err(_) => pending.push_back(StreamChunk::finish(FinishReason::error(
                        LlmFailure::new(
                            codes::TIMEOUT,
                            format!("DeepSeek stream idle timeout after {}ms", idle.as_millis()),
                        ),
                    ))),
                    Ok(Some(Ok(chunk))) => {
                        let mut out = Vec::new();
                        fold.push(chunk, &mut out);
                        pending.extend(out);
                        events = Some(ev);
                    }
                    Ok(Some(Err(e))) => pending.push_back(StreamChunk::finish(
                        FinishReason::error(classify(e, &Seen::default())),
                    )),
                    Ok(None) => {
                        let done = std::mem::take(&mut fold);
                        if done.has_finish() {
                            let mut out = Vec::new();
                            done.end(&mut out);
                            pending.extend(out);
                        } else {
                            pending.push_back(StreamChunk::finish(FinishReason::error(
                                LlmFailure::new(
                                    codes::STREAM_CLOSED,
                                    "SSE stream ended without a finish reason",
                                ),
                            )));
                        }
                    }
                }
            }
        }
    })
    .boxed()
}

/// Plugin `deepseek-twin`: registers the twin for route `deepseek-twin` (or the configured one).
pub struct TwinPlugin;

impl Plugin for TwinPlugin {
    const NAME: &'static str = "deepseek-twin";
    type Config = TwinConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Llm>()]
    }

    async fn apply(ctx: Ctx, config: TwinConfig) -> Result<(), BoxError> {
        let adapter = TwinAdapter::new(&config)?;
        let route = config.route.as_deref().unwrap_or("deepseek-twin");
        ctx.dep::<dyn Llm>()?
            .register(&ctx, route, Arc::new(adapter))?;
        Ok(())
    }
}
