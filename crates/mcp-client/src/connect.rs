//! Opening one connection: spawn (stdio) or dial (streamable HTTP), initialize, list tools.

use std::collections::HashMap;
use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;

use dsh_sandbox::Sandbox;

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, JsonRpcMessage, ProtocolVersion,
    ServerNotification, Tool as McpTool,
};
use rmcp::service::{NotificationContext, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess, Transport};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use crate::config::{McpServerConfig, TransportKind};
use crate::env::server_env;
use crate::server::ListRefresh;

/// The live client service of one connection.
pub type Service = RunningService<RoleClient, Handler>;

/// Why a connection attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The server process could not be started.
    #[error("cannot start {command:?}: {source}")]
    Spawn {
        /// The program.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A header name or value is not valid HTTP.
    #[error("invalid header {0:?}")]
    Header(String),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
    /// The MCP handshake failed (the server exited, spoke garbage or refused).
    #[error("initialize failed: {0}")]
    Initialize(String),
    /// `tools/list` failed.
    #[error("tools/list failed: {0}")]
    ListTools(String),
    /// The attempt took longer than `startupTimeoutMs`.
    #[error("no answer within {0} ms")]
    Timeout(u64),
    /// The sandbox cannot enforce its policy: the server was not started.
    #[error("cannot start {command:?} under the sandbox: {reason}")]
    Sandbox {
        /// The program.
        command: String,
        /// The sandbox's reason (and how to fix it).
        reason: String,
    },
}

/// The confinement of a stdio server: the `sandbox` service and the workspace its policy is
/// taken for (the server's `cwd`, else dsh's working directory).
#[derive(Clone)]
pub struct Confinement {
    /// The sandbox service.
    pub sandbox: Arc<dyn Sandbox>,
}

impl std::fmt::Debug for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confinement").finish_non_exhaustive()
    }
}

/// The client side's handler: forwards `notifications/tools/list_changed` to the runner.
#[derive(Debug)]
pub struct Handler {
    changed: mpsc::UnboundedSender<()>,
}

impl Handler {
    /// A handler that signals tool-list changes on `changed`.
    pub fn new(changed: mpsc::UnboundedSender<()>) -> Self {
        Self { changed }
    }
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // Counted already, in arrival order, by `Watched`; this handler runs on a task of its
        // own. The runner may be gone (shutting down): nothing to re-sync then.
        let _ = self.changed.send(());
    }

    fn get_info(&self) -> ClientConfig {
        // The handshake lifecycle (initialize) is what every released server speaks, and it
        // is the one under which unscoped list_changed notifications reach this handler.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("dsh", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// A transport that counts `notifications/tools/list_changed` as it receives them, before rmcp
/// dispatches anything: rmcp runs notification handlers on tasks of their own, so a call's
/// response can reach its caller before the handler of a notification sent ahead of it. The
/// count is what [`ListRefresh::settled`] waits on.
struct Watched<T> {
    inner: T,
    refresh: Arc<ListRefresh>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Watched<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let refresh = self.refresh.clone();
        let next = self.inner.receive();
        async move {
            let message = next.await;
            if let Some(JsonRpcMessage::Notification(n)) = &message
                && matches!(
                    n.notification,
                    ServerNotification::ToolListChangedNotification(_)
                )
            {
                refresh.ask();
            }
            message
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Kills a stdio server's whole process group when dropped, so no server process (nor its
/// children) outlives the connection, however the connection ends.
#[derive(Debug)]
pub struct ProcessGuard {
    pgid: Option<i32>,
}

impl ProcessGuard {
    /// The process id of the group leader, if this connection spawned one.
    pub fn pid(&self) -> Option<i32> {
        self.pgid
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            // ESRCH (already gone) is the normal case after a clean exit.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// One open connection and the server's tools at connect time.
pub struct Connection {
    /// The running client.
    pub service: Service,
    /// The server's tools (all pages).
    pub tools: Vec<McpTool>,
    /// Kills the process group on drop (stdio only).
    pub guard: ProcessGuard,
    /// Whether the server declared the `resources` capability.
    pub resources: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("tools", &self.tools.len())
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

/// Connects to the server of `config` and lists its tools, within `startupTimeoutMs`. A stdio
/// server is spawned under `confinement` when given (and `config.sandbox` is on).
pub async fn connect(
    config: &McpServerConfig,
    changed: mpsc::UnboundedSender<()>,
    refresh: Arc<ListRefresh>,
    confinement: Option<&Confinement>,
) -> Result<Connection, ConnectError> {
    let budget = config.startup_timeout_ms;
    let mut guard = ProcessGuard { pgid: None };
    let attempt = async {
        let handler = Handler::new(changed);
        let service = match config.transport {
            TransportKind::Stdio => {
                let confinement = confinement.filter(|_| config.sandbox);
                let transport = spawn(config, confinement, &mut guard)?;
                handler
                    .serve(Watched {
                        inner: transport,
                        refresh,
                    })
                    .await
                    .map_err(|e| ConnectError::Initialize(e.to_string()))?
            }
            TransportKind::StreamableHttp => {
                let transport = http_transport(config)?;
                handler
                    .serve(Watched {
                        inner: transport,
                        refresh,
                    })
                    .await
                    .map_err(|e| ConnectError::Initialize(e.to_string()))?
            }
        };
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| ConnectError::ListTools(e.to_string()))?;
        Ok::<_, ConnectError>((service, tools))
    };
    let (service, tools) =
        match tokio::time::timeout(std::time::Duration::from_millis(budget), attempt).await {
            Ok(r) => r?,
            Err(_) => return Err(ConnectError::Timeout(budget)),
        };
    let resources = service
        .peer_info()
        .is_some_and(|info| info.capabilities.resources.is_some());
    Ok(Connection {
        service,
        tools,
        guard,
        resources,
    })
}

fn spawn(
    config: &McpServerConfig,
    confinement: Option<&Confinement>,
    guard: &mut ProcessGuard,
) -> Result<TokioChildProcess, ConnectError> {
    let program = config.command.clone().unwrap_or_default();
    let argv = confined_argv(config, &program, confinement)?;
    let mut parts = argv.into_iter();
    let exe = parts.next().unwrap_or_else(|| OsString::from(&program));
    let mut cmd = tokio::process::Command::new(&exe);
    cmd.args(parts)
        .env_clear()
        .envs(server_env(std::env::vars_os(), &config.env))
        .kill_on_drop(true);
    if let Some(cwd) = &config.cwd {
        cmd.current_dir(cwd);
    }
    die_with_parent(&mut cmd);
    let mut wrap = process_wrap::tokio::CommandWrap::from(cmd);
    wrap.wrap(process_wrap::tokio::ProcessGroup::leader());
    let (transport, stderr) = TokioChildProcess::builder(wrap)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ConnectError::Spawn {
            command: program.clone(),
            source,
        })?;
    guard.pgid = transport.id().and_then(|p| i32::try_from(p).ok());
    if let Some(stderr) = stderr {
        let server = config.server_name.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "dsh_mcp_client::stderr", server = %server, "{line}");
            }
        });
    }
    Ok(transport)
}

/// The argv of a stdio server: `command args…`, behind the sandbox's launcher when confined.
fn confined_argv(
    config: &McpServerConfig,
    program: &str,
    confinement: Option<&Confinement>,
) -> Result<Vec<OsString>, ConnectError> {
    let argv: Vec<OsString> = std::iter::once(OsString::from(program))
        .chain(config.args.iter().map(OsString::from))
        .collect();
    let Some(c) = confinement else {
        return Ok(argv);
    };
    let workspace = match &config.cwd {
        Some(cwd) => cwd.clone(),
        None => std::env::current_dir().map_err(|source| ConnectError::Spawn {
            command: program.to_owned(),
            source,
        })?,
    };
    // The policy of a call outside any session: the configured mode, network and roots.
    let policy = c.sandbox.policy("", &workspace, None);
    let confined = c
        .sandbox
        .confine(&policy, argv)
        .map_err(|e| ConnectError::Sandbox {
            command: program.to_owned(),
            reason: e.to_string(),
        })?;
    tracing::debug!(
        server = %config.server_name,
        backend = confined.backend,
        mode = policy.mode.as_str(),
        "MCP server confined"
    );
    Ok(confined.argv)
}

/// Asks the kernel to SIGKILL the child when the thread that spawned it dies, so a server
/// never outlives dsh, even when dsh itself is killed with SIGKILL (which runs no
/// destructor). The spawning thread is a runtime worker, which lives as long as dsh's
/// runtime.
fn die_with_parent(cmd: &mut tokio::process::Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before `exec`; it only makes the
    // async-signal-safe system calls prctl(2) and getppid(2) and allocates nothing (errors
    // are raw OS errors).
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)?;
            // The parent died between fork and prctl: do not start an orphan.
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(
                    nix::errno::Errno::ESRCH as i32,
                ));
            }
            Ok(())
        });
    }
}

fn http_transport(
    config: &McpServerConfig,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, ConnectError> {
    dsh_tls::install_crypto_provider();
    let mut headers = HashMap::new();
    for (k, v) in &config.headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| ConnectError::Header(k.clone()))?;
        let value = reqwest::header::HeaderValue::from_str(v)
            .map_err(|_| ConnectError::Header(k.clone()))?;
        headers.insert(name, value);
    }
    // The process's one TLS configuration: building the client reads no certificate; the
    // first TLS handshake of any client loads the system's roots, once for the process.
    let builder = reqwest::Client::builder();
    let builder = match dsh_tls::client_config() {
        Some(tls) => builder.tls_backend_preconfigured(tls),
        None => builder,
    };
    let client = builder
        .build()
        .map_err(|e| ConnectError::Http(e.to_string()))?;
    let url = config.url.clone().unwrap_or_default();
    let transport_config =
        StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    Ok(StreamableHttpClientTransport::with_client(
        client,
        transport_config,
    ))
}
