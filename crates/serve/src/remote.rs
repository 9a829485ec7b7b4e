//! [`RemoteClient`]: the [`Client`] trait over a `dsh serve` server.
//!
//! Calls map one to one to the HTTP API. `subscribe` reads the event stream; when the connection
//! drops it reconnects with `Last-Event-ID` set to the last id it received, so the stream it
//! yields has every committed event exactly once (a reconnect yields a fresh snapshot of the
//! live state). A server that ends the stream cleanly ends it (the session was closed).

use std::collections::VecDeque;
use std::time::Duration;

use dsh_protocol::{
    Client, CommandInfo, ErrorCode, Event, EventMsg, EventStream, LogRecord, LogStream, Op,
    OpAccepted, OpenSession, ProtocolError, SessionQuery, SessionSummary,
};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;

use crate::sse::{SseMessage, SseParser};

/// The bound on one event the client accepts (16 MiB).
const MAX_EVENT: usize = 16 * 1024 * 1024;

/// Reconnect attempts after a dropped event stream before giving up (with an `error` event).
const RECONNECTS: u32 = 20;

/// Why a remote client cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The base URL is not an `http(s)` URL.
    #[error("`{0}` is not an http:// or https:// URL")]
    InvalidUrl(String),
    /// The HTTP client could not be built.
    #[error("the HTTP client cannot be built: {0}")]
    Http(#[from] reqwest::Error),
}

/// A [`Client`] over HTTP.
#[derive(Clone, Debug)]
pub struct RemoteClient {
    http: reqwest::Client,
    base: Url,
    token: Option<String>,
    retry_delay: Duration,
}

fn transport(e: &reqwest::Error) -> ProtocolError {
    ProtocolError::new(
        ErrorCode::Transport,
        format!("the server cannot be reached: {e}"),
    )
}

impl RemoteClient {
    /// A client of the server at `base` (`http://127.0.0.1:8080`), with a bearer token.
    pub fn new(base: &str, token: Option<String>) -> Result<Self, RemoteError> {
        let base = Url::parse(base).map_err(|_| RemoteError::InvalidUrl(base.to_owned()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(RemoteError::InvalidUrl(base.to_string()));
        }
        let builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none());
        let http = match dsh_tls::client_config() {
            Some(tls) => builder.tls_backend_preconfigured(tls),
            None => {
                dsh_tls::install_crypto_provider();
                builder
            }
        }
        .build()?;
        Ok(RemoteClient {
            http,
            base,
            token,
            retry_delay: Duration::from_millis(100),
        })
    }

    /// A client of the server on the unix socket at `path` (`dsh serve --unix`): no token, the
    /// socket's file mode is the access control.
    #[cfg(unix)]
    pub fn unix(path: &std::path::Path) -> Result<Self, RemoteError> {
        // No TLS over the socket, but reqwest wants a crypto provider to build a client.
        dsh_tls::install_crypto_provider();
        let http = reqwest::Client::builder()
            .unix_socket(path)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let base = Url::parse("http://localhost/")
            .map_err(|_| RemoteError::InvalidUrl(path.display().to_string()))?;
        Ok(RemoteClient {
            http,
            base,
            token: None,
            retry_delay: Duration::from_millis(100),
        })
    }

    /// The first delay between reconnects of an event stream (doubled up to 2 s).
    pub fn with_retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    fn request(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        let mut req = self.http.request(method, url);
        if let Some(t) = &self.token {
            req = req.header(AUTHORIZATION, format!("Bearer {t}"));
        }
        req
    }

    async fn call<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T, ProtocolError> {
        let response = req.send().await.map_err(|e| transport(&e))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| transport(&e))?;
        if !status.is_success() {
            return Err(error_body(status, &bytes));
        }
        let bytes = if bytes.is_empty() {
            bytes::Bytes::from_static(b"null")
        } else {
            bytes
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            ProtocolError::new(
                ErrorCode::MalformedResponse,
                format!("the server's answer cannot be read: {e}"),
            )
        })
    }

    fn json<B: serde::Serialize>(
        &self,
        method: Method,
        url: Url,
        body: &B,
    ) -> Result<reqwest::RequestBuilder, ProtocolError> {
        let body = serde_json::to_vec(body)
            .map_err(|e| ProtocolError::new(ErrorCode::InvalidRequest, e.to_string()))?;
        Ok(self
            .request(method, url)
            .header(CONTENT_TYPE, "application/json")
            .body(body))
    }

    /// Opens the event stream (`events`) or the log stream (`log`) from `after` or `last_id`.
    async fn connect(
        &self,
        session: &str,
        route: &str,
        after: Option<u64>,
        last_id: Option<&str>,
    ) -> Result<reqwest::Response, ProtocolError> {
        let mut url = self.url(&["v1", "sessions", session, route]);
        if let Some(a) = after.filter(|_| last_id.is_none()) {
            url.query_pairs_mut().append_pair("after", &a.to_string());
        }
        let mut req = self
            .request(Method::GET, url)
            .header(ACCEPT, "text/event-stream");
        if let Some(id) = last_id {
            req = req.header("last-event-id", id);
        }
        let response = req.send().await.map_err(|e| transport(&e))?;
        let status = response.status();
        if !status.is_success() {
            let bytes = response.bytes().await.unwrap_or_default();
            return Err(error_body(status, &bytes));
        }
        Ok(response)
    }
}

/// The error of a failure answer (its `ProtocolError` body, or one made from the status).
fn error_body(status: StatusCode, bytes: &[u8]) -> ProtocolError {
    serde_json::from_slice::<ProtocolError>(bytes).unwrap_or_else(|_| {
        let code = match status {
            StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
            StatusCode::FORBIDDEN => ErrorCode::Forbidden,
            StatusCode::NOT_FOUND => ErrorCode::SessionNotFound,
            s if s.is_client_error() => ErrorCode::InvalidRequest,
            _ => ErrorCode::Server,
        };
        ProtocolError::new(
            code,
            format!(
                "the server answered {status}: {}",
                String::from_utf8_lossy(bytes)
            ),
        )
    })
}

/// The reading side of a subscription.
struct Reader {
    client: RemoteClient,
    session: String,
    after: Option<u64>,
    /// The last `id:` received: where a reconnect resumes.
    last_id: Option<String>,
    body: Option<BoxStream<'static, Result<bytes::Bytes, reqwest::Error>>>,
    parser: SseParser,
    ready: VecDeque<Event>,
    done: bool,
}

fn body_of(
    response: reqwest::Response,
) -> BoxStream<'static, Result<bytes::Bytes, reqwest::Error>> {
    response.bytes_stream().boxed()
}

fn error_event(e: ProtocolError) -> Event {
    Event::new(0, EventMsg::Error(e))
}

impl Reader {
    fn take(&mut self, msgs: Vec<SseMessage>) {
        for m in msgs {
            if m.id.is_some() {
                self.last_id = m.id;
            }
            match serde_json::from_str::<Event>(&m.data) {
                Ok(ev) => self.ready.push_back(ev),
                Err(e) => {
                    tracing::warn!(event = ?m.event, "unreadable event from the server: {e}");
                    self.ready.push_back(error_event(ProtocolError::new(
                        ErrorCode::MalformedResponse,
                        format!("an event of the server cannot be read: {e}"),
                    )));
                }
            }
        }
    }

    /// Reconnects after a drop; `Err` when the server cannot be had back.
    async fn reconnect(&mut self) -> Result<(), ProtocolError> {
        let mut delay = self.client.retry_delay;
        let mut last = None;
        for _ in 0..RECONNECTS {
            tokio::time::sleep(delay).await;
            match self
                .client
                .connect(&self.session, "events", self.after, self.last_id.as_deref())
                .await
            {
                Ok(r) => {
                    self.body = Some(body_of(r));
                    self.parser = SseParser::new(MAX_EVENT);
                    return Ok(());
                }
                // The server answered: no use retrying a refusal.
                Err(e) if e.code != ErrorCode::Transport => return Err(e),
                Err(e) => last = Some(e),
            }
            delay = (delay * 2).min(Duration::from_secs(2));
        }
        Err(last.unwrap_or_else(|| ProtocolError::new(ErrorCode::Transport, "reconnect failed")))
    }

    async fn next(mut self) -> Option<(Event, Reader)> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Some((ev, self));
            }
            if self.done {
                return None;
            }
            let body = self.body.as_mut()?;
            match body.try_next().await {
                Ok(Some(bytes)) => match self.parser.push(&bytes) {
                    Ok(msgs) => self.take(msgs),
                    Err(e) => {
                        self.done = true;
                        self.ready.push_back(error_event(ProtocolError::new(
                            ErrorCode::MalformedResponse,
                            e.to_string(),
                        )));
                    }
                },
                // A clean end: the server closed the session's stream.
                Ok(None) => self.done = true,
                Err(e) => {
                    tracing::debug!(session = %self.session, "event stream dropped: {e}; reconnecting");
                    self.body = None;
                    if let Err(e) = self.reconnect().await {
                        self.done = true;
                        self.ready.push_back(error_event(e));
                    }
                }
            }
        }
    }
}

/// The reading side of a log stream: reconnects after a drop from the last seq it yielded.
struct LogReader {
    client: RemoteClient,
    session: String,
    /// The last seq yielded (or asked for).
    after: Option<u64>,
    body: Option<BoxStream<'static, Result<bytes::Bytes, reqwest::Error>>>,
    parser: SseParser,
    ready: VecDeque<Result<LogRecord, ProtocolError>>,
    done: bool,
}

impl LogReader {
    fn take(&mut self, msgs: Vec<SseMessage>) {
        for m in msgs {
            if m.event.as_deref() == Some("error") {
                let e = serde_json::from_str::<ProtocolError>(&m.data).unwrap_or_else(|e| {
                    ProtocolError::new(
                        ErrorCode::MalformedResponse,
                        format!("an error of the server cannot be read: {e}"),
                    )
                });
                self.ready.push_back(Err(e));
                self.done = true;
                continue;
            }
            match m.id.as_deref().map(str::parse::<u64>) {
                Some(Ok(seq)) => {
                    self.after = Some(seq);
                    self.ready.push_back(Ok(LogRecord {
                        seq,
                        line: m.data.into(),
                    }));
                }
                _ => {
                    self.ready.push_back(Err(ProtocolError::new(
                        ErrorCode::MalformedResponse,
                        "a log record of the server has no seq id",
                    )));
                    self.done = true;
                }
            }
        }
    }

    async fn reconnect(&mut self) -> Result<(), ProtocolError> {
        let mut delay = self.client.retry_delay;
        let mut last = None;
        for _ in 0..RECONNECTS {
            tokio::time::sleep(delay).await;
            match self
                .client
                .connect(&self.session, "log", self.after, None)
                .await
            {
                Ok(r) => {
                    self.body = Some(body_of(r));
                    self.parser = SseParser::new(MAX_EVENT);
                    return Ok(());
                }
                Err(e) if e.code != ErrorCode::Transport => return Err(e),
                Err(e) => last = Some(e),
            }
            delay = (delay * 2).min(Duration::from_secs(2));
        }
        Err(last.unwrap_or_else(|| ProtocolError::new(ErrorCode::Transport, "reconnect failed")))
    }

    async fn next(mut self) -> Option<(Result<LogRecord, ProtocolError>, LogReader)> {
        loop {
            if let Some(r) = self.ready.pop_front() {
                return Some((r, self));
            }
            if self.done {
                return None;
            }
            let body = self.body.as_mut()?;
            match body.try_next().await {
                Ok(Some(bytes)) => match self.parser.push(&bytes) {
                    Ok(msgs) => {
                        if !self.done {
                            self.take(msgs);
                        }
                    }
                    Err(e) => {
                        self.done = true;
                        self.ready.push_back(Err(ProtocolError::new(
                            ErrorCode::MalformedResponse,
                            e.to_string(),
                        )));
                    }
                },
                // A clean end: the session was closed.
                Ok(None) => self.done = true,
                Err(e) => {
                    tracing::debug!(session = %self.session, "log stream dropped: {e}; reconnecting");
                    self.body = None;
                    if let Err(e) = self.reconnect().await {
                        self.done = true;
                        self.ready.push_back(Err(e));
                    }
                }
            }
        }
    }
}

impl Client for RemoteClient {
    fn open(&self, request: OpenSession) -> BoxFuture<'_, Result<SessionSummary, ProtocolError>> {
        Box::pin(async move {
            let req = self.json(Method::POST, self.url(&["v1", "sessions"]), &request)?;
            self.call(req).await
        })
    }

    fn send(&self, session_id: &str, op: Op) -> BoxFuture<'_, Result<OpAccepted, ProtocolError>> {
        let url = self.url(&["v1", "sessions", session_id, "ops"]);
        Box::pin(async move {
            let req = self.json(Method::POST, url, &op)?;
            self.call(req).await
        })
    }

    fn subscribe(
        &self,
        session_id: &str,
        after: Option<u64>,
    ) -> BoxFuture<'_, Result<EventStream, ProtocolError>> {
        let session = session_id.to_owned();
        Box::pin(async move {
            let response = self.connect(&session, "events", after, None).await?;
            let reader = Reader {
                client: self.clone(),
                session,
                after,
                last_id: None,
                body: Some(body_of(response)),
                parser: SseParser::new(MAX_EVENT),
                ready: VecDeque::new(),
                done: false,
            };
            Ok(futures::stream::unfold(reader, Reader::next).boxed())
        })
    }

    fn log(
        &self,
        session_id: &str,
        after: Option<u64>,
    ) -> BoxFuture<'_, Result<LogStream, ProtocolError>> {
        let session = session_id.to_owned();
        Box::pin(async move {
            let response = self.connect(&session, "log", after, None).await?;
            let reader = LogReader {
                client: self.clone(),
                session,
                after,
                body: Some(body_of(response)),
                parser: SseParser::new(MAX_EVENT),
                ready: VecDeque::new(),
                done: false,
            };
            Ok(futures::stream::unfold(reader, LogReader::next).boxed())
        })
    }

    fn sessions(
        &self,
        query: SessionQuery,
    ) -> BoxFuture<'_, Result<Vec<SessionSummary>, ProtocolError>> {
        let mut url = self.url(&["v1", "sessions"]);
        {
            let mut q = url.query_pairs_mut();
            if let Some(c) = &query.cwd {
                q.append_pair("cwd", c);
            }
            if let Some(l) = query.limit {
                q.append_pair("limit", &l.to_string());
            }
            if let Some(s) = &query.q {
                q.append_pair("q", s);
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        Box::pin(async move { self.call(self.request(Method::GET, url)).await })
    }

    fn session(&self, session_id: &str) -> BoxFuture<'_, Result<SessionSummary, ProtocolError>> {
        let url = self.url(&["v1", "sessions", session_id]);
        Box::pin(async move { self.call(self.request(Method::GET, url)).await })
    }

    fn commands(&self, session_id: &str) -> BoxFuture<'_, Result<Vec<CommandInfo>, ProtocolError>> {
        let url = self.url(&["v1", "sessions", session_id, "commands"]);
        Box::pin(async move { self.call(self.request(Method::GET, url)).await })
    }

    fn close(&self, session_id: &str) -> BoxFuture<'_, Result<(), ProtocolError>> {
        let url = self.url(&["v1", "sessions", session_id]);
        Box::pin(async move {
            let _: serde_json::Value = self.call(self.request(Method::DELETE, url)).await?;
            Ok(())
        })
    }
}
