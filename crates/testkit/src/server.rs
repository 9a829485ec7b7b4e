//! The mock server: a real HTTP/1.1 server on 127.0.0.1 that plays scripted replies.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::body::{Finisher, ScriptBody};
use crate::deepseek;
use crate::record::{Outcome, RecordedRequest};
use crate::reply::{Reply, Step};

/// Paths answered with scripted replies (POST only).
pub const CHAT_PATHS: &[&str] = &[
    "/chat/completions",
    "/v1/chat/completions",
    "/beta/chat/completions",
    // The Anthropic Messages dialect (`crate::anthropic`).
    "/v1/messages",
    "/anthropic/v1/messages",
];

/// Largest request body the server accepts (bigger ones get a 413).
pub const MAX_REQUEST_BODY: usize = 64 * 1024 * 1024;

/// Picks the reply for a request in responder mode.
pub type Responder = dyn Fn(&RecordedRequest) -> Reply + Send + Sync;

/// Sees every request (with its chosen status) before its response is played.
pub type Observer = dyn Fn(&RecordedRequest) + Send + Sync;

pub(crate) struct Shared {
    inner: Mutex<Inner>,
    /// Counters, bumped while `inner` is locked (so blocking waiters cannot miss a change).
    received: watch::Sender<usize>,
    finished: watch::Sender<usize>,
    /// Notified on every counter change, for the blocking waits.
    changed: Condvar,
    /// TCP connections accepted so far.
    connections: AtomicUsize,
}

struct Inner {
    queue: VecDeque<Reply>,
    repeat: bool,
    responder: Option<Arc<Responder>>,
    observer: Option<Arc<Observer>>,
    api_key: Option<String>,
    validate: bool,
    records: Vec<RecordedRequest>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking responder must not take the whole server down with a poisoned lock.
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn finish(&self, index: usize, outcome: Outcome) {
        let mut inner = self.lock();
        if let Some(rec) = inner.records.get_mut(index) {
            rec.outcome = outcome;
            rec.finished_at = Some(Instant::now());
        }
        self.finished.send_modify(|n| *n += 1);
        drop(inner);
        self.changed.notify_all();
    }

    fn received_one(&self) {
        let inner = self.lock();
        self.received.send_modify(|n| *n += 1);
        drop(inner);
        self.changed.notify_all();
    }

    /// Blocks until `done()` holds (checked under the lock) or `timeout` passes.
    fn wait_blocking(
        &self,
        timeout: Duration,
        done: impl Fn() -> bool,
    ) -> Option<Vec<RecordedRequest>> {
        let deadline = Instant::now() + timeout;
        let mut inner = self.lock();
        loop {
            if done() {
                return Some(inner.records.clone());
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            inner = match self.changed.wait_timeout(inner, left) {
                Ok((guard, _)) => guard,
                Err(poison) => poison.into_inner().0,
            };
        }
    }
}

/// A scriptable DeepSeek-shaped HTTP server on an ephemeral 127.0.0.1 port.
///
/// Queue mode (default): each chat request takes the next queued [`Reply`]; when none is left the
/// request gets a 500 whose body says "no scripted response left". Responder mode
/// ([`MockServer::set_responder`]): a function of the recorded request picks every reply.
///
/// Every request is recorded (see [`RecordedRequest`]). Dropping the server stops it and aborts
/// every connection task, including stalled ones.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
    thread: Option<ServerThread>,
}

/// The dedicated thread (and runtime) of a server started with [`MockServer::start_blocking`].
struct ServerThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl fmt::Debug for MockServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(thread) = &mut self.thread {
            if let Some(stop) = thread.stop.take() {
                let _ = stop.send(());
            }
            // Dropping that runtime drops every connection task; the thread then ends.
            if let Some(handle) = thread.handle.take() {
                let _ = handle.join();
            }
        }
    }
}

impl MockServer {
    /// Starts a server on `127.0.0.1:0` with an empty queue.
    ///
    /// # Panics
    /// If no local port can be bound (a broken test environment); use [`MockServer::bind`] to
    /// handle that as an error.
    pub async fn start() -> Self {
        match Self::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await {
            Ok(server) => server,
            Err(err) => panic!("dsh-testkit: cannot bind 127.0.0.1:0: {err}"),
        }
    }

    /// Starts a server on `127.0.0.1:0` with `replies` queued in order.
    pub async fn start_with(replies: impl IntoIterator<Item = Reply>) -> Self {
        let server = Self::start().await;
        server.push_all(replies);
        server
    }

    /// Starts a server on `addr` (port 0 picks an ephemeral port). Must run inside a tokio runtime.
    pub async fn bind(addr: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                repeat: false,
                responder: None,
                observer: None,
                api_key: None,
                validate: false,
                records: Vec::new(),
            }),
            received: watch::channel(0).0,
            finished: watch::channel(0).0,
            changed: Condvar::new(),
            connections: AtomicUsize::new(0),
        });
        let task = tokio::spawn(accept_loop(listener, shared.clone()));
        tracing::debug!(%addr, "dsh-testkit mock server listening");
        Ok(Self {
            addr,
            shared,
            task,
            thread: None,
        })
    }

    /// Starts a server on `127.0.0.1:0` on its own thread with its own tokio runtime, for
    /// synchronous tests (a plain `#[test]` that runs the `dsh` binary with `std::process`, or a
    /// test whose runtime would be blocked while the client runs). Dropping the server stops that
    /// thread.
    ///
    /// # Panics
    /// If no local port can be bound or the thread cannot start; see
    /// [`MockServer::bind_blocking`].
    pub fn start_blocking() -> Self {
        match Self::bind_blocking(SocketAddr::from(([127, 0, 0, 1], 0))) {
            Ok(server) => server,
            Err(err) => panic!("dsh-testkit: cannot start a server thread: {err}"),
        }
    }

    /// [`MockServer::start_blocking`] on an explicit address.
    pub fn bind_blocking(addr: SocketAddr) -> io::Result<Self> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<MockServer>>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("dsh-testkit-server".to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = ready_tx.send(Err(err));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let server = MockServer::bind(addr).await;
                    let ok = server.is_ok();
                    let _ = ready_tx.send(server);
                    if ok {
                        let _ = stop_rx.await;
                    }
                });
            })?;
        let mut server = ready_rx
            .recv()
            .map_err(|_| io::Error::other("dsh-testkit: the server thread ended early"))??;
        server.thread = Some(ServerThread {
            stop: Some(stop_tx),
            handle: Some(handle),
        });
        Ok(server)
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, `http://127.0.0.1:<port>` (no trailing slash): what `DEEPSEEK_BASE_URL`
    /// takes.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Same as [`MockServer::base_url`].
    pub fn url(&self) -> String {
        self.base_url()
    }

    /// The full chat-completions URL, `http://127.0.0.1:<port>/chat/completions`.
    pub fn chat_url(&self) -> String {
        format!("http://{}/chat/completions", self.addr)
    }

    /// Queues one reply (queue mode).
    pub fn push(&self, reply: Reply) {
        self.shared.lock().queue.push_back(reply);
    }

    /// Queues replies in order (queue mode).
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.lock().queue.extend(replies);
    }

    /// Cycles through the queue forever instead of consuming it (a taken reply is re-queued at the
    /// back). For benchmarks and manual runs.
    pub fn set_repeat(&self, repeat: bool) {
        self.shared.lock().repeat = repeat;
    }

    /// Number of queued replies not yet taken.
    pub fn remaining(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Responder mode: `responder` picks the reply for every chat request from the recorded
    /// request (its `index` counts all requests). The queue is ignored while a responder is set.
    pub fn set_responder(
        &self,
        responder: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) {
        self.shared.lock().responder = Some(Arc::new(responder));
    }

    /// Calls `observer` for every request (all paths) once its reply is chosen and before the
    /// reply is played, inline: a log line written here exists before the client sees any
    /// response byte. Panics in the observer are caught and logged.
    pub fn on_request(&self, observer: impl Fn(&RecordedRequest) + Send + Sync + 'static) {
        self.shared.lock().observer = Some(Arc::new(observer));
    }

    /// Back to queue mode.
    pub fn clear_responder(&self) {
        self.shared.lock().responder = None;
    }

    /// Requires `authorization: Bearer <key>` on chat requests; others get DeepSeek's 401 body
    /// (see [`deepseek::unauthorized`]) without consuming a scripted reply.
    pub fn require_api_key(&self, key: impl Into<String>) {
        self.shared.lock().api_key = Some(key.into());
    }

    /// Rejects chat requests that DeepSeek would reject (unknown model, missing
    /// `reasoning_content` on a tool-call turn in thinking mode, tool-message order, bad
    /// `reasoning_effort`, …) with DeepSeek's 400/422 bodies, without consuming a scripted reply.
    /// See [`crate::validate::validate_request`].
    pub fn validate_requests(&self, on: bool) {
        self.shared.lock().validate = on;
    }

    /// dsh's own request rules over every chat request so far, taken as ONE session in arrival
    /// order: key order, no `content: null`, and each request byte-extends the previous one
    /// (see [`crate::validate::dsh_rule_violations`]; Messages requests by
    /// [`crate::anthropic::rule_violations`]). Empty when all is well.
    pub fn dsh_rule_violations(&self) -> Vec<String> {
        let records = self.requests();
        let chats: Vec<&RecordedRequest> = records.iter().filter(|r| r.is_chat()).collect();
        let mut out = Vec::new();
        for (i, req) in chats.iter().enumerate() {
            let previous = i.checked_sub(1).map(|p| &chats[p].body[..]);
            let violations = if crate::anthropic::MESSAGES_PATHS.contains(&req.path.as_str()) {
                crate::anthropic::rule_violations(&req.body, previous)
            } else {
                crate::validate::dsh_rule_violations(&req.body, previous)
            };
            for v in violations {
                out.push(format!("request #{}: {v}", req.index));
            }
        }
        out
    }

    /// Snapshot of every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().records.clone()
    }

    /// The request with this index, if it has arrived.
    pub fn request(&self, index: usize) -> Option<RecordedRequest> {
        self.shared.lock().records.get(index).cloned()
    }

    /// Number of requests received so far (all paths).
    pub fn request_count(&self) -> usize {
        self.shared.lock().records.len()
    }

    /// Number of TCP connections accepted so far: 1 for a client that reuses one keep-alive
    /// connection for every request.
    pub fn connection_count(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Whether the client kept one keep-alive connection for every request: exactly 1 TCP
    /// connection accepted. (dsh's HTTP client waits for a finished connection's return to
    /// hyper's pool instead of racing it with a new connect, so a multi-threaded client has no
    /// "2 when preempted" exception.) A client that does not reuse connections opens one per
    /// request.
    pub fn kept_one_connection(&self) -> bool {
        self.connection_count() == 1
    }

    /// Waits until at least `n` requests have arrived (bodies fully read), then returns them all.
    pub async fn wait_for_requests(&self, n: usize) -> Vec<RecordedRequest> {
        let mut rx = self.shared.received.subscribe();
        // The sender lives in `self.shared`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|count| *count >= n).await;
        self.requests()
    }

    /// Waits until at least `n` responses have ended (completed, reset or dropped), then returns
    /// every request.
    pub async fn wait_for_finished(&self, n: usize) -> Vec<RecordedRequest> {
        let mut rx = self.shared.finished.subscribe();
        let _ = rx.wait_for(|count| *count >= n).await;
        self.requests()
    }

    /// Blocking [`MockServer::wait_for_requests`] for synchronous tests: `None` if fewer than `n`
    /// requests arrived within `timeout`. Do not call it on the runtime thread that runs this
    /// server (use a [`MockServer::start_blocking`] server from synchronous code).
    pub fn wait_for_requests_blocking(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Option<Vec<RecordedRequest>> {
        self.shared
            .wait_blocking(timeout, || *self.shared.received.borrow() >= n)
    }

    /// Blocking [`MockServer::wait_for_finished`]; `None` on timeout. Same caveat as
    /// [`MockServer::wait_for_requests_blocking`].
    pub fn wait_for_finished_blocking(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Option<Vec<RecordedRequest>> {
        self.shared
            .wait_blocking(timeout, || *self.shared.finished.borrow() >= n)
    }

    /// Stops the server: no new connections, every open connection (stalled ones included) is
    /// aborted. Dropping the server does the same without waiting for the accept task to end.
    pub async fn shutdown(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    // Dropping this set (when the accept task is aborted) aborts every connection task.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    shared.connections.fetch_add(1, Ordering::SeqCst);
                    conns.spawn(serve_connection(stream, shared.clone()));
                }
                Err(err) => {
                    tracing::warn!(%err, "dsh-testkit: accept failed");
                    // Avoid a hot loop on persistent errors such as EMFILE.
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    // Small scripted writes must leave immediately, not wait for Nagle.
    let _ = stream.set_nodelay(true);
    let kill = Arc::new(Notify::new());
    let service_kill = kill.clone();
    let service =
        hyper::service::service_fn(move |req| handle(shared.clone(), service_kill.clone(), req));
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        result = conn => {
            if let Err(err) = result {
                tracing::debug!(%err, "dsh-testkit: connection ended with an error");
            }
        }
        () = kill.notified() => {
            tracing::debug!("dsh-testkit: scripted reset before the response head");
        }
    }
}

/// Why a request body was not read.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    /// The connection failed while reading it.
    #[error("reading the request body failed: {0}")]
    Read(#[source] hyper::Error),
    /// It is larger than [`MAX_REQUEST_BODY`].
    #[error("request body larger than {MAX_REQUEST_BODY} bytes")]
    TooLarge,
}

async fn read_body(mut body: Incoming) -> Result<Bytes, BodyError> {
    let mut buf = BytesMut::new();
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(BodyError::Read)?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > MAX_REQUEST_BODY {
                return Err(BodyError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

enum Choice {
    Scripted(Reply),
    Respond(Arc<Responder>),
    Unscripted(Reply),
}

async fn handle(
    shared: Arc<Shared>,
    kill: Arc<Notify>,
    req: Request<Incoming>,
) -> Result<Response<ScriptBody>, Infallible> {
    let arrived_at = Instant::now();
    let (parts, body) = req.into_parts();
    let method = parts.method.as_str().to_owned();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().map(str::to_owned);
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                Bytes::copy_from_slice(value.as_bytes()),
            )
        })
        .collect::<Vec<_>>();
    let (body, body_error) = match read_body(body).await {
        Ok(body) => (body, None),
        Err(err) => (Bytes::new(), Some(err)),
    };

    let (record, choice) = {
        let mut inner = shared.lock();
        let index = inner.records.len();
        let mut record = RecordedRequest {
            index,
            method,
            path,
            query,
            headers,
            body,
            arrived_at,
            finished_at: None,
            outcome: Outcome::Pending,
            status: 0,
            scripted: false,
            cached_prefix_bytes: 0,
        };
        record.cached_prefix_bytes = cached_prefix(&inner.records, &record);
        let choice = choose(&mut inner, &record, body_error);
        record.scripted = !matches!(choice, Choice::Unscripted(_));
        inner.records.push(record.clone());
        (record, choice)
    };

    let reply = match choice {
        Choice::Scripted(reply) | Choice::Unscripted(reply) => reply,
        Choice::Respond(responder) => {
            let picked =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| responder(&record)));
            match picked {
                Ok(reply) => reply,
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    if let Some(rec) = shared.lock().records.get_mut(record.index) {
                        rec.scripted = false;
                    }
                    Reply::text(500, format!("dsh-testkit: the responder panicked: {what}"))
                }
            }
        }
    };
    let (snapshot, observer) = {
        let mut inner = shared.lock();
        let snapshot = inner.records.get_mut(record.index).map(|rec| {
            rec.status = reply.status;
            rec.clone()
        });
        (snapshot, inner.observer.clone())
    };
    if let (Some(observer), Some(snapshot)) = (observer, snapshot) {
        let observed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| observer(&snapshot)));
        if observed.is_err() {
            tracing::warn!(
                index = snapshot.index,
                "dsh-testkit: the request observer panicked"
            );
        }
    }
    shared.received_one();
    tracing::debug!(
        index = record.index,
        method = %record.method,
        path = %record.path,
        status = reply.status,
        "dsh-testkit: request"
    );
    Ok(play(shared, kill, record.index, reply).await)
}

/// How many earlier chat requests the prefix-cache estimate looks at.
const PREFIX_WINDOW: usize = 8;

/// Longest common byte prefix of this chat request's body with the last [`PREFIX_WINDOW`]
/// earlier chat requests (0 for non-chat requests).
fn cached_prefix(earlier: &[RecordedRequest], record: &RecordedRequest) -> usize {
    if !record.is_chat() {
        return 0;
    }
    earlier
        .iter()
        .rev()
        .filter(|r| r.is_chat())
        .take(PREFIX_WINDOW)
        .map(|r| crate::validate::common_prefix_len(&r.body, &record.body))
        .max()
        .unwrap_or(0)
}

fn choose(inner: &mut Inner, record: &RecordedRequest, body_error: Option<BodyError>) -> Choice {
    if let Some(err) = body_error {
        return Choice::Unscripted(Reply::text(413, format!("dsh-testkit: {err}")));
    }
    if !CHAT_PATHS.contains(&record.path.as_str()) {
        if record.method == "GET" && record.path == "/models" {
            return Choice::Unscripted(Reply::json(200, deepseek::MODELS_BODY));
        }
        return Choice::Unscripted(Reply::text(
            404,
            format!(
                "dsh-testkit: no route for {} {}; the mock serves POST {}",
                record.method,
                record.path,
                CHAT_PATHS.join(", POST ")
            ),
        ));
    }
    if record.method != "POST" {
        return Choice::Unscripted(
            Reply::text(
                405,
                format!(
                    "dsh-testkit: {} {} is not allowed; use POST",
                    record.method, record.path
                ),
            )
            .header("allow", "POST"),
        );
    }
    let messages_dialect = crate::anthropic::MESSAGES_PATHS.contains(&record.path.as_str());
    if let Some(key) = &inner.api_key {
        if messages_dialect && record.header("x-api-key") != Some(key.as_str()) {
            return Choice::Unscripted(crate::anthropic::unauthorized());
        }
        if !messages_dialect && record.bearer() != Some(key.as_str()) {
            return Choice::Unscripted(deepseek::unauthorized());
        }
    }
    if inner.validate {
        let checked = if messages_dialect {
            crate::anthropic::validate_request(&record.body)
        } else {
            crate::validate::validate_request(&record.body)
        };
        if let Err(reply) = checked {
            return Choice::Unscripted(reply);
        }
    }
    if let Some(responder) = &inner.responder {
        return Choice::Respond(responder.clone());
    }
    match inner.queue.pop_front() {
        Some(reply) => {
            if inner.repeat {
                inner.queue.push_back(reply.clone());
            }
            Choice::Scripted(reply)
        }
        None => Choice::Unscripted(deepseek::error_reply(
            500,
            &format!(
                "dsh-testkit: no scripted response left for request #{} ({} {}); queue more \
                 replies or set a responder",
                record.index, record.method, record.path
            ),
            "testkit_error",
            "no_scripted_response",
        )),
    }
}

async fn play(
    shared: Arc<Shared>,
    kill: Arc<Notify>,
    index: usize,
    reply: Reply,
) -> Response<ScriptBody> {
    let mut finisher = Finisher::new(shared, index);
    for step in reply.before_head {
        match step {
            Step::Bytes(_) => {}
            Step::Sleep(delay) => tokio::time::sleep(delay).await,
            Step::Gate(gate) => gate.pass().await,
            Step::Stall | Step::KeepAliveEvery(_) => futures::future::pending::<()>().await,
            Step::Reset => {
                finisher.finish(Outcome::Reset);
                kill.notify_one();
                // The connection task drops this future together with the connection.
                futures::future::pending::<()>().await;
            }
        }
    }

    let Ok(status) = hyper::StatusCode::from_u16(reply.status) else {
        return invalid_reply(
            finisher,
            format!("dsh-testkit: invalid scripted status {}", reply.status),
        );
    };
    let mut builder = Response::builder().status(status);
    for (name, value) in &reply.headers {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(name), Ok(value)) => builder = builder.header(name, value),
            _ => {
                return invalid_reply(
                    finisher,
                    format!("dsh-testkit: invalid scripted header {name:?}: {value:?}"),
                );
            }
        }
    }
    let exact_len = reply.content_length.then(|| {
        reply
            .body
            .iter()
            .map(|step| match step {
                Step::Bytes(b) => b.len() as u64,
                _ => 0,
            })
            .sum()
    });
    let body = ScriptBody::new(reply.body, finisher, exact_len);
    match builder.body(body) {
        Ok(response) => response,
        Err(err) => {
            // Unreachable with validated parts; answer with a clear 500 rather than panic.
            let mut response = Response::new(ScriptBody::empty());
            *response.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
            tracing::warn!(%err, "dsh-testkit: cannot build the scripted response");
            response
        }
    }
}

fn invalid_reply(finisher: Finisher, message: String) -> Response<ScriptBody> {
    tracing::warn!("{message}");
    let len = message.len() as u64;
    let body = ScriptBody::new(vec![Step::Bytes(Bytes::from(message))], finisher, Some(len));
    let mut response = Response::new(body);
    *response.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
    response
}
