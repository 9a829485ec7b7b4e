//! One HTTP attempt of any SSE dialect: send, time budgets, cancellation, drain, contract.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use dsh_llm::{
    ChunkStream, FailureCode, FinishReason, LlmFailure, SseError, SseEvent, SseFramer, SseItem,
    StreamChunk, codes,
};
use futures::StreamExt;
use hyper_util::client::legacy::connect::HttpInfo;
use reqwest::header::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::errors::classify;
use crate::pool::{ConnectionReturns, ReturnLayer};

/// The four time budgets of an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP/TLS connect.
    pub connect: Duration,
    /// Idle read watchdog, re-armed by any byte; also bounds the wait for the response head.
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

impl Timeouts {
    /// The defaults with the given millisecond overrides.
    pub fn with_ms(
        connect: Option<u64>,
        idle: Option<u64>,
        progress: Option<u64>,
        total: Option<u64>,
    ) -> Self {
        let d = Self::default();
        let dur = |v: Option<u64>, def: Duration| v.map(Duration::from_millis).unwrap_or(def);
        Self {
            connect: dur(connect, d.connect),
            idle: dur(idle, d.idle),
            progress: dur(progress, d.progress),
            total: dur(total, d.total),
        }
    }
}

const MAX_ERROR_BODY: usize = 64 * 1024;
/// How long the body is read past the last event for its end, so the connection is reused.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// How many bytes past the last event are read (and ignored) before giving the connection up.
pub const MAX_DRAIN_BYTES: usize = 64 * 1024;

/// Installs rustls' `ring` provider once per process (a provider installed by someone else is
/// kept).
pub fn install_crypto_provider() {
    dsh_tls::install_crypto_provider();
}

/// A client of the attempt engine: reqwest's client (its pool keeps one connection for a run)
/// and the record of connections being returned to that pool ([`crate::pool`]).
#[derive(Clone, Debug)]
pub struct HttpClient {
    http: reqwest::Client,
    returns: Arc<ConnectionReturns>,
}

impl HttpClient {
    /// reqwest's client.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }
}

/// A client with the connect timeout and no redirects (a redirect would replay the key
/// elsewhere; it is an error `HTTP_3xx`). Its TLS configuration is the process's one
/// ([`dsh_tls::client_config`]): building the client reads no certificate; the system's roots
/// are loaded by the first TLS handshake of any client, once. Its connector waits for a
/// connection being returned to the pool rather than opening a second one ([`crate::pool`]).
pub fn build_client(timeouts: &Timeouts) -> Result<HttpClient, reqwest::Error> {
    let returns = Arc::new(ConnectionReturns::default());
    let builder = reqwest::Client::builder()
        .connect_timeout(timeouts.connect)
        .redirect(reqwest::redirect::Policy::none())
        .connector_layer(ReturnLayer(returns.clone()));
    let http = match dsh_tls::client_config() {
        Some(tls) => builder.tls_backend_preconfigured(tls),
        None => {
            install_crypto_provider();
            builder
        }
    }
    .build()?;
    Ok(HttpClient { http, returns })
}

/// The local address of the HTTP/1.1 keep-alive connection `response` came on (`None` for
/// HTTP/2, whose connection is shared rather than returned, and for `connection: close`).
fn returning_connection(response: &reqwest::Response) -> Option<SocketAddr> {
    if response.version() != reqwest::Version::HTTP_11 {
        return None;
    }
    let close = response
        .headers()
        .get(reqwest::header::CONNECTION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    if close {
        return None;
    }
    response
        .extensions()
        .get::<HttpInfo>()
        .map(HttpInfo::local_addr)
}

/// The headers every dialect sends: `content-type: application/json`,
/// `accept: text/event-stream`, `user-agent: dsh/<version>` (the key is added per request).
pub fn base_headers() -> HeaderMap {
    use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue, USER_AGENT};
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    headers.insert(
        USER_AGENT,
        HeaderValue::from_static(concat!("dsh/", env!("CARGO_PKG_VERSION"))),
    );
    headers
}

/// What a decoder says after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// More events follow.
    Continue,
    /// The stream is complete (the decoder pushed its `finish` chunk).
    Done,
}

/// A dialect's SSE decoder: events in, [`StreamChunk`]s out, obeying the chunk contract.
pub trait Decoder: Send + 'static {
    /// Decodes one event. `Err` ends the attempt with that failure (as an `error` finish).
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamChunk>,
    ) -> Result<Progress, LlmFailure>;

    /// The body ended cleanly before [`Progress::Done`]: `true` (after pushing the finishing
    /// chunks) when what arrived is a complete answer, `false` = truncated.
    fn end_without_done(&mut self, out: &mut Vec<StreamChunk>) -> bool;

    /// How many data events were decoded.
    fn events_seen(&self) -> usize;

    /// The `STREAM_CLOSED` message when the body ends after some events but before the last
    /// one (DeepSeek: `SSE stream ended without [DONE]`).
    fn truncated_message(&self) -> &'static str {
        "SSE stream ended before its last event"
    }
}

/// `MALFORMED_RESPONSE` naming what is wrong (never echoing the payload).
pub fn malformed(what: &str) -> LlmFailure {
    LlmFailure::new(
        FailureCode::MalformedResponse,
        format!("malformed SSE payload: {what}"),
    )
}

/// One prepared request.
pub struct Attempt {
    /// Client (shared: its pool is what keeps one connection for a run).
    pub client: HttpClient,
    /// Provider name for messages (`Anthropic`, `OpenAI-compatible`).
    pub label: String,
    /// Full URL.
    pub endpoint: String,
    /// The URL transport failures name (`<label> API request to <origin> failed`): the
    /// endpoint, or the configured base URL.
    pub origin: String,
    /// Headers (credential included, marked sensitive).
    pub headers: HeaderMap,
    /// The JSON body (shared, not copied: a dialect may keep it to extend the next body).
    pub body: Bytes,
    /// Budgets.
    pub timeouts: Timeouts,
    /// Cap on one SSE event.
    pub max_event_bytes: usize,
    /// The key, removed from any failure message.
    pub secret: Option<SecretString>,
    /// Response headers that carry a request id, first found wins.
    pub request_id_headers: &'static [&'static str],
}

fn redact(mut failure: LlmFailure, key: Option<&SecretString>) -> LlmFailure {
    if let Some(key) = key {
        let k = key.expose_secret();
        if k.len() >= 4 && failure.message.contains(k) {
            failure.message = failure.message.replace(k, "[redacted]");
        }
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

fn one_chunk(reason: FinishReason) -> ChunkStream {
    futures::stream::iter([StreamChunk::finish(reason)]).boxed()
}

#[derive(Clone)]
struct Clock {
    label: String,
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
    async fn wait<T>(&self, cancel: &CancellationToken, fut: impl Future<Output = T>) -> Wait<T> {
        let idle_at = Instant::now() + self.timeouts.idle;
        let t = self.timeouts;
        let label = &self.label;
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Wait::Cancelled,
            _ = sleep_until(self.total_at) => Wait::Timeout(LlmFailure::new(codes::TIMEOUT, format!(
                "{label} attempt exceeded its total deadline of {}ms", t.total.as_millis()))),
            _ = sleep_until(self.progress_at) => Wait::Timeout(LlmFailure::new(codes::TIMEOUT, format!(
                "{label} stream made no progress (no data event) for {}ms", t.progress.as_millis()))),
            _ = sleep_until(idle_at) => Wait::Timeout(LlmFailure::new(codes::TIMEOUT, format!(
                "{label} stream idle timeout after {}ms", t.idle.as_millis()))),
            v = fut => Wait::Done(v),
        }
    }

    fn aborted(&self) -> FinishReason {
        FinishReason::Aborted {
            failure: LlmFailure::new(
                codes::ABORTED,
                format!("{} request aborted by caller", self.label),
            ),
        }
    }
}

/// Sends `attempt` and streams its chunks through `decoder`. `Err` = failed before any chunk
/// (transport, HTTP status); later failures end the stream with `finish {error|aborted}`.
pub async fn start<D: Decoder>(
    attempt: Attempt,
    decoder: D,
    cancel: CancellationToken,
) -> Result<ChunkStream, LlmFailure> {
    let now = Instant::now();
    let t = attempt.timeouts;
    let clock = Clock {
        label: attempt.label.clone(),
        timeouts: t,
        total_at: now + t.total,
        progress_at: now + t.progress,
    };
    if cancel.is_cancelled() {
        return Ok(one_chunk(clock.aborted()));
    }
    let base = attempt.origin.clone();
    let returns = attempt.client.returns.clone();
    let send = attempt
        .client
        .http
        .post(&attempt.endpoint)
        .headers(attempt.headers)
        .body(attempt.body)
        .send();
    let secret = attempt.secret;
    let response = match clock.wait(&cancel, send).await {
        Wait::Cancelled => return Ok(one_chunk(clock.aborted())),
        Wait::Timeout(f) => return Err(f),
        Wait::Done(Err(e)) => {
            let f = if e.is_timeout() || e.is_connect() && error_chain(&e).contains("timed out") {
                LlmFailure::new(
                    codes::TIMEOUT,
                    format!(
                        "{} API request to {base} failed: connect timeout after {}ms",
                        clock.label,
                        t.connect.as_millis()
                    ),
                )
            } else {
                LlmFailure::new(
                    codes::TRANSPORT,
                    format!(
                        "{} API request to {base} failed: {}",
                        clock.label,
                        error_chain(&e)
                    ),
                )
            };
            return Err(redact(f, secret.as_ref()));
        }
        Wait::Done(Ok(r)) => r,
    };
    if let Some(info) = response.extensions().get::<HttpInfo>() {
        returns.response_started(info.local_addr());
    }
    let conn = returning_connection(&response);
    let status = response.status().as_u16();
    let rid = attempt.request_id_headers.iter().find_map(|h| {
        response
            .headers()
            .get(*h)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    });
    if !response.status().is_success() {
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut response = response;
        let mut body = Vec::new();
        loop {
            match clock.wait(&cancel, response.chunk()).await {
                Wait::Done(Ok(Some(b))) => {
                    let room = MAX_ERROR_BODY.saturating_sub(body.len());
                    body.extend_from_slice(&b[..b.len().min(room)]);
                    if room <= b.len() {
                        break;
                    }
                }
                Wait::Done(Ok(None)) => {
                    if let Some(local) = conn {
                        returns.body_ended(local);
                    }
                    break;
                }
                Wait::Done(Err(_)) | Wait::Timeout(_) => break,
                Wait::Cancelled => return Ok(one_chunk(clock.aborted())),
            }
        }
        let f = classify(
            &clock.label,
            status,
            &body,
            retry_after.as_deref(),
            rid,
            SystemTime::now(),
        );
        tracing::debug!(status, code = %f.code, "{} HTTP error", clock.label);
        return Err(redact(f, secret.as_ref()));
    }
    let state = Body {
        response: Some(response),
        framer: SseFramer::with_max_event_bytes(attempt.max_event_bytes),
        decoder,
        pending: VecDeque::new(),
        held: None,
        items: Vec::new(),
        out: Vec::new(),
        finished: false,
        saw_bytes: false,
        cancel,
        clock,
        request_id: rid,
        secret,
        origin: base,
        returns,
        conn,
    };
    Ok(futures::stream::unfold(state, Body::next).boxed())
}

struct Body<D> {
    response: Option<reqwest::Response>,
    framer: SseFramer,
    decoder: D,
    pending: VecDeque<StreamChunk>,
    held: Option<StreamChunk>,
    items: Vec<SseItem>,
    out: Vec<StreamChunk>,
    finished: bool,
    saw_bytes: bool,
    cancel: CancellationToken,
    clock: Clock,
    request_id: Option<String>,
    secret: Option<SecretString>,
    origin: String,
    returns: Arc<ConnectionReturns>,
    /// The keep-alive connection the response came on (HTTP/1.1).
    conn: Option<SocketAddr>,
}

impl<D: Decoder> Body<D> {
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

    /// After the last event: reads the rest of the body so the connection returns to the
    /// pool (bounded), then releases the held finish chunk.
    async fn drain(&mut self) {
        if let Some(mut response) = self.response.take() {
            let until = (Instant::now() + DRAIN_TIMEOUT).min(self.clock.total_at);
            let mut extra = 0usize;
            loop {
                let chunk = tokio::select! {
                    biased;
                    _ = self.cancel.cancelled() => break,
                    _ = sleep_until(until) => break,
                    c = response.chunk() => c,
                };
                match chunk {
                    Ok(Some(bytes)) => {
                        extra += bytes.len();
                        if extra > MAX_DRAIN_BYTES {
                            break;
                        }
                    }
                    Ok(None) => {
                        self.body_ended();
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        self.finished = true;
        if let Some(finish) = self.held.take() {
            self.pending.push_back(finish);
        }
    }

    /// The body was read to its end: its connection is on its way back to the pool.
    fn body_ended(&self) {
        if let Some(local) = self.conn {
            self.returns.body_ended(local);
        }
    }

    fn end(&mut self, reason: FinishReason) {
        self.response = None;
        self.finished = true;
        let reason = match reason {
            FinishReason::Error { failure } => FinishReason::Error {
                failure: redact(failure, self.secret.as_ref())
                    .with_request_id(self.request_id.clone()),
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
        let clock = self.clock.clone();
        match clock.wait(&self.cancel, response.chunk()).await {
            Wait::Cancelled => self.end(clock.aborted()),
            Wait::Timeout(f) => self.end(FinishReason::error(f)),
            Wait::Done(Err(e)) => self.end(FinishReason::error(LlmFailure::new(
                codes::TRANSPORT,
                format!(
                    "{} API stream from {} failed: {}",
                    clock.label,
                    self.origin,
                    error_chain(&e)
                ),
            ))),
            Wait::Done(Ok(None)) => {
                self.body_ended();
                if self.framer.is_idle() {
                    self.out.clear();
                    if self.decoder.end_without_done(&mut self.out) {
                        self.pending.extend(self.out.drain(..));
                        self.response = None;
                        self.finished = true;
                        return;
                    }
                }
                let f = if self.decoder.events_seen() > 0 || !self.framer.is_idle() {
                    LlmFailure::new(codes::STREAM_CLOSED, self.decoder.truncated_message())
                } else if self.saw_bytes {
                    LlmFailure::new(
                        codes::TRANSPORT,
                        format!(
                            "{} API stream from {} closed before any event",
                            clock.label, self.origin
                        ),
                    )
                } else {
                    LlmFailure::new(
                        codes::EMPTY_RESPONSE,
                        format!("{} API returned no response body", clock.label),
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
            let r = self.decoder.event(ev, &mut self.out);
            self.pending.extend(self.out.drain(..));
            match r {
                Ok(Progress::Continue) => {}
                Ok(Progress::Done) => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn building_a_client_loads_no_root_certificate() {
        let timeouts = Timeouts::default();
        assert!(build_client(&timeouts).is_ok());
        assert!(build_client(&timeouts).is_ok());
        assert!(
            !dsh_tls::roots_loaded(),
            "no TLS handshake happened: the system's roots must not be read"
        );
    }
}
