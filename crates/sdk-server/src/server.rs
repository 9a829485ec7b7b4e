//! The serve loop: reads frames, runs the methods through the protocol client the
//! composition root connects at `initialize`, streams every session's log, state and
//! sub-agents as notifications (`streams`), and tears down on `shutdown` or end of input.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use dsh_protocol::{Client, ErrorCode, Op, OpenSession, ProtocolError, SessionOptions};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::connect::{Connector, Init};
use crate::frame::{self, ErrorCode as FrameCode, Incoming, Line, LineSplitter};
use crate::output::{Out, write_loop};
use crate::protocol::{
    CwdResult, InitializeParams, InitializeResult, Method, PromptParams, PromptResult, ServerInfo,
    SessionParams, SetWorkingDirectoryParams,
};
use crate::streams::Streams;
use crate::{SdkServerConfig, aliases};

/// How a serve run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServeEnd {
    /// The client called `shutdown`.
    Shutdown,
    /// stdin reached end of file (or failed).
    InputClosed,
    /// stdout could not be written any more.
    OutputClosed,
    /// The `stop` future resolved (SIGTERM, SIGINT): the same orderly teardown as end of input.
    Stopped,
}

/// A failed method: answered as an error response with the message.
struct MethodError(String);

impl From<ProtocolError> for MethodError {
    fn from(e: ProtocolError) -> Self {
        MethodError(e.message)
    }
}

struct Server {
    connector: Arc<dyn Connector>,
    config: SdkServerConfig,
    tx: mpsc::UnboundedSender<Out>,
    /// The host, once `initialize` connected it, and its notification streams.
    host: Option<(Arc<dyn Client>, Streams)>,
    /// Sessions this runtime opened, by id, with the task writing their logs.
    open: HashMap<String, JoinHandle<()>>,
}

/// Serves the SDK protocol on `input`/`output` until `shutdown`, end of input, a closed output
/// or `stop`; then closes every session it opened (each flushed) and returns.
pub async fn serve<R, W>(
    connector: Arc<dyn Connector>,
    input: R,
    output: W,
    config: SdkServerConfig,
    stop: impl std::future::Future<Output = ()>,
) -> ServeEnd
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut stop = std::pin::pin!(stop);
    let (tx, rx) = mpsc::unbounded_channel::<Out>();
    let (closed_tx, mut closed_rx) = watch::channel(false);
    let writer = tokio::spawn(write_loop(output, rx, closed_tx));
    let permits = Arc::new(Semaphore::new(config.max_pending_responses.max(1)));
    let mut server = Server {
        connector,
        config,
        tx: tx.clone(),
        host: None,
        open: HashMap::new(),
    };

    let mut input = input;
    let mut splitter = LineSplitter::new(server.config.max_line_bytes);
    let mut buf = vec![0u8; 64 * 1024];
    let mut lines = Vec::new();
    let end = 'serve: loop {
        let n = tokio::select! {
            r = input.read(&mut buf) => match r {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "reading stdin failed");
                    0
                }
            },
            _ = closed_rx.wait_for(|c| *c) => break 'serve ServeEnd::OutputClosed,
            () = &mut stop => break 'serve ServeEnd::Stopped,
        };
        if n == 0 {
            if let Some(last) = splitter.finish() {
                lines.push(last);
            }
        } else {
            splitter.push(&buf[..n], &mut lines);
        }
        for line in lines.drain(..) {
            // A response waits for a free slot in the output queue: a client that stops
            // reading stops being read.
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break 'serve ServeEnd::OutputClosed;
            };
            let incoming = match line {
                Line::Complete(bytes) => frame::parse_line(&bytes),
                Line::TooLong => Incoming::Invalid {
                    id: None,
                    code: FrameCode::InvalidRequest,
                    message: format!(
                        "invalid request: a frame is longer than {} bytes",
                        server.config.max_line_bytes
                    ),
                },
            };
            match incoming {
                Incoming::Blank | Incoming::Response => {}
                Incoming::Notification { method } => {
                    tracing::debug!(%method, "ignoring a client notification");
                }
                Incoming::Invalid { id, code, message } => {
                    tracing::warn!(%message, "bad frame from the client");
                    let line = frame::error_response(id.as_ref(), code, &message);
                    let _ = tx.send(Out::Line {
                        text: line,
                        _permit: Some(permit),
                    });
                }
                Incoming::Request { id, method, params } => {
                    let shutdown = method == Method::Shutdown.name();
                    let result = server.handle(&method, params).await;
                    let line = match result {
                        Ok(v) => frame::response(&id, &v),
                        Err(MethodError(m)) => {
                            frame::error_response(Some(&id), FrameCode::Internal, &m)
                        }
                    };
                    let _ = tx.send(Out::Line {
                        text: line,
                        _permit: Some(permit),
                    });
                    if shutdown {
                        flush(&tx).await;
                        break 'serve ServeEnd::Shutdown;
                    }
                }
            }
        }
        if n == 0 {
            break ServeEnd::InputClosed;
        }
    };
    // Teardown: every session this runtime opened is closed (its turn cancelled, its closing
    // events committed and flushed); what they log on the way out is still written.
    if let Some((client, streams)) = server.host.take() {
        let open: Vec<(String, JoinHandle<()>)> = server.open.drain().collect();
        for (id, _) in &open {
            if let Err(e) = client.close(id).await {
                tracing::warn!(session = %id, error = %e.message, "closing a session failed");
            }
        }
        for (_, log) in open {
            let _ = log.await;
        }
        streams.abort_rest();
    }
    drop(server);
    drop(tx);
    let _ = writer.await;
    end
}

async fn flush(tx: &mpsc::UnboundedSender<Out>) {
    let (done, wait) = oneshot::channel();
    if tx.send(Out::Flush(done)).is_ok() {
        let _ = wait.await;
    }
}

/// Queues a notification (unbounded like events: their number follows the agents' work, not
/// the client's requests).
pub(crate) fn notification<T: serde::Serialize>(
    tx: &mpsc::UnboundedSender<Out>,
    method: &str,
    params: &T,
) {
    match serde_json::to_string(params) {
        Ok(p) => {
            let _ = tx.send(Out::Line {
                text: frame::notification_raw(method, &p),
                _permit: None,
            });
        }
        Err(error) => tracing::warn!(%error, "cannot encode {method}"),
    }
}

fn params<T: DeserializeOwned>(method: Method, params: Value) -> Result<T, MethodError> {
    serde_json::from_value(params)
        .map_err(|e| MethodError(format!("invalid params for {}: {e}", method.name())))
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, MethodError> {
    serde_json::to_value(v).map_err(|e| MethodError(format!("cannot encode the result: {e}")))
}

impl Server {
    async fn handle(&mut self, method: &str, raw: Value) -> Result<Value, MethodError> {
        let Some(m) = Method::parse(method) else {
            return Err(MethodError(format!(
                "unknown DeepSeek Harness SDK runtime method: {method}"
            )));
        };
        match m {
            Method::Initialize => self.initialize(params(m, raw)?),
            Method::Shutdown => Ok(Value::Object(Default::default())),
            Method::Prompt => self.prompt(params(m, raw)?).await,
            Method::Resume => self.resume(params(m, raw)?).await,
            Method::WorkingDirectoryGet => {
                let p: SessionParams = params(m, raw)?;
                let client = self.open_session(&p.session_id, m).await?;
                let summary = client.session(&p.session_id).await?;
                let cwd = if PathBuf::from(&summary.cwd).is_dir() {
                    summary.cwd
                } else {
                    // Vanished: the host moves the session back to its origin.
                    set_cwd(&client, &p.session_id, ".").await?
                };
                to_value(&CwdResult { cwd })
            }
            Method::WorkingDirectorySet => {
                let p: SetWorkingDirectoryParams = params(m, raw)?;
                let client = self.open_session(&p.session_id, m).await?;
                if p.path.is_empty() {
                    return Err(MethodError(format!("{}: path must be non-empty", m.name())));
                }
                let cwd = set_cwd(&client, &p.session_id, &p.path).await?;
                to_value(&CwdResult { cwd })
            }
        }
    }

    fn initialize(&mut self, p: InitializeParams) -> Result<Value, MethodError> {
        if self.host.is_some() {
            return Err(MethodError(
                "the runtime is already initialized (reinitialization is unsupported)".into(),
            ));
        }
        let cwd = PathBuf::from(&p.cwd);
        if !cwd.is_absolute() {
            return Err(MethodError(format!(
                "initialize: cwd must be an absolute path, got \"{}\"",
                p.cwd
            )));
        }
        if !cwd.is_dir() {
            return Err(MethodError(format!(
                "initialize: cwd \"{}\" is not a directory",
                p.cwd
            )));
        }
        let max_tokens = match &p.max_tokens {
            None => None,
            Some(n) => match n.as_u64().filter(|v| *v > 0 && *v < (1u64 << 53)) {
                Some(v) => Some(v),
                None => {
                    return Err(MethodError(format!(
                        "initialize: maxTokens must be a positive safe integer, got {n}"
                    )));
                }
            },
        };
        if p.reasoning_effort.as_deref() == Some("") {
            return Err(MethodError(
                "initialize: reasoningEffort must be a non-empty string".into(),
            ));
        }
        let init = Init {
            cwd,
            provider: p
                .provider
                .unwrap_or_else(|| aliases::CLIENT_PROVIDER.into()),
            model: p.model,
            reasoning_effort: p.reasoning_effort,
            max_tokens,
        };
        let client = self.connector.connect(init).map_err(|e| MethodError(e.0))?;
        let streams = Streams::new(client.clone(), self.tx.clone());
        self.host = Some((client, streams));
        tracing::info!("SDK runtime initialized");
        to_value(&InitializeResult {
            server_info: ServerInfo {
                name: self.config.server_name.clone(),
                version: self.config.server_version.clone(),
            },
        })
    }

    fn host(&self, m: Method) -> Result<(Arc<dyn Client>, Streams), MethodError> {
        self.host
            .clone()
            .ok_or_else(|| MethodError(format!("initialize must be called before {}", m.name())))
    }

    /// The session, created (or its stored session opened) on first use, and streamed.
    async fn open_session(&mut self, id: &str, m: Method) -> Result<Arc<dyn Client>, MethodError> {
        let (client, streams) = self.host(m)?;
        if id.is_empty() {
            return Err(MethodError(format!(
                "{}: sessionId must be non-empty",
                m.name()
            )));
        }
        if self.open.contains_key(id) {
            return Ok(client);
        }
        // A stored session streams what it logs from now on; a new one from its first record.
        let stored = match client.session(id).await {
            Ok(s) => Some(s.last_seq),
            Err(e) if e.code == ErrorCode::SessionNotFound => None,
            Err(e) => return Err(e.into()),
        };
        let summary = client
            .open(OpenSession::Create {
                session_id: Some(id.to_owned()),
                options: SessionOptions::default(),
                prompt: None,
            })
            .await?;
        let log = streams
            .drive(id, stored.flatten(), summary.last_seq)
            .await?;
        self.open.insert(id.to_owned(), log);
        Ok(client)
    }

    async fn prompt(&mut self, p: PromptParams) -> Result<Value, MethodError> {
        if p.content_blocks.is_empty() {
            return Err(MethodError(
                "session/prompt: contentBlocks must not be empty".into(),
            ));
        }
        let mut texts = Vec::new();
        for b in p.content_blocks {
            match (b.kind.as_str(), b.text) {
                ("text", Some(t)) => texts.push(t),
                (kind, _) => {
                    return Err(MethodError(format!(
                        "session/prompt: content blocks of type \"{kind}\" are not supported \
                         (text only)"
                    )));
                }
            }
        }
        let client = self.open_session(&p.session_id, Method::Prompt).await?;
        let accepted = client
            .send(
                &p.session_id,
                Op::Submit {
                    text: texts.join("\n"),
                    attachments: Vec::new(),
                },
            )
            .await?;
        let message_id = accepted
            .id
            .ok_or_else(|| MethodError("session/prompt: the host answered no message id".into()))?;
        to_value(&PromptResult { message_id })
    }

    async fn resume(&mut self, p: SessionParams) -> Result<Value, MethodError> {
        let (client, streams) = self.host(Method::Resume)?;
        if self.open.contains_key(&p.session_id) {
            return Err(MethodError(format!(
                "session/resume: session \"{}\" is already open in this runtime",
                p.session_id
            )));
        }
        let summary = client
            .open(OpenSession::Resume {
                session_id: p.session_id.clone(),
                options: SessionOptions::default(),
            })
            .await
            .map_err(|e| match e.code {
                ErrorCode::SessionNotFound => MethodError(format!(
                    "session/resume: no stored session \"{}\"",
                    p.session_id
                )),
                _ => MethodError(format!("session/resume: {}", e.message)),
            })?;
        let log = streams
            .drive(&p.session_id, summary.last_seq, summary.last_seq)
            .await?;
        self.open.insert(p.session_id, log);
        Ok(Value::Object(Default::default()))
    }
}

/// Moves the session (the host validates, logs `working-directory/change` and tells the model);
/// the new directory.
async fn set_cwd(client: &Arc<dyn Client>, id: &str, path: &str) -> Result<String, MethodError> {
    let accepted = client
        .send(
            id,
            Op::SetWorkingDirectory {
                path: path.to_owned(),
            },
        )
        .await?;
    accepted
        .id
        .ok_or_else(|| MethodError("the host answered no working directory".into()))
}
