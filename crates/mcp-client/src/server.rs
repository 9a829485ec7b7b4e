//! One server's live state and the background runner that connects, registers its tools,
//! re-syncs them on `tools/list_changed` and reconnects after the transport closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dsh_kernel::{Ctx, Registration};
use dsh_tools::Tools;
use parking_lot::Mutex;
use rmcp::RoleClient;
use rmcp::model::Tool as RawTool;
use rmcp::service::Peer;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::config::McpServerConfig;
use crate::connect::{Confinement, ConnectError, connect};
use crate::names::tool_name;
use crate::resources::McpResources;
use crate::tool::McpTool;
pub use dsh_mcp_api::{McpServerChanged, ServerInfo, Status};

#[derive(Debug)]
struct Inner {
    status: Status,
    peer: Option<Peer<RoleClient>>,
    tools: usize,
    last_error: Option<String>,
}

/// One configured server, shared by its tools and its runner.
pub struct Server {
    config: McpServerConfig,
    /// Where [`McpServerChanged`] is emitted.
    emitter: Option<Ctx>,
    inner: Mutex<Inner>,
    /// Bumped on every status change (for waiting on "settled").
    version: watch::Sender<u64>,
    /// Tool-list refreshes asked for and applied.
    refresh: Arc<ListRefresh>,
}

/// How long a tool call's result waits for a tool-list refresh its server asked for (a server
/// that announces a change and then stalls on `tools/list` delays a result at most this long).
pub const REFRESH_WAIT: Duration = Duration::from_secs(2);

/// The refreshes of one server's tool list: asked for by each `notifications/tools/list_changed`
/// (counted as it arrives), applied by the runner once the re-fetched list is registered. A
/// tool call returns only after the refreshes asked for before its result, so a tool that
/// changed the list (adding a tool, say) hands the model a result and a tool set that agree:
/// the next request carries the new tools, whatever the scheduling of the runner.
#[derive(Debug)]
pub struct ListRefresh {
    asked: AtomicU64,
    applied: watch::Sender<u64>,
}

impl ListRefresh {
    /// No refresh asked for yet.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            asked: AtomicU64::new(0),
            applied: watch::Sender::new(0),
        })
    }

    /// A `list_changed` notification arrived.
    pub fn ask(&self) {
        self.asked.fetch_add(1, Ordering::SeqCst);
    }

    fn asked(&self) -> u64 {
        self.asked.load(Ordering::SeqCst)
    }

    /// Every refresh asked for up to `n` is applied (or moot: the connection closed).
    fn applied_up_to(&self, n: u64) {
        self.applied.send_if_modified(|v| {
            let newer = *v < n;
            if newer {
                *v = n;
            }
            newer
        });
    }

    /// Waits, at most `limit`, until every refresh asked for so far is applied.
    pub async fn settled(&self, limit: Duration) {
        let want = self.asked();
        let mut applied = self.applied.subscribe();
        if *applied.borrow() >= want {
            return;
        }
        if tokio::time::timeout(limit, applied.wait_for(|v| *v >= want))
            .await
            .is_err()
        {
            tracing::warn!(
                "MCP tool-list refresh still pending after {limit:?}; the result is returned without it"
            );
        }
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.config.server_name)
            .field("inner", &*self.inner.lock())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A server of `config`, not yet connected, announcing its changes through `emitter`.
    pub fn new(config: McpServerConfig, emitter: Option<Ctx>) -> Arc<Self> {
        Arc::new(Self {
            config,
            emitter,
            inner: Mutex::new(Inner {
                status: Status::Connecting,
                peer: None,
                tools: 0,
                last_error: None,
            }),
            version: watch::Sender::new(0),
            refresh: ListRefresh::new(),
        })
    }

    /// Its tool-list refreshes.
    pub(crate) fn refresh(&self) -> &Arc<ListRefresh> {
        &self.refresh
    }

    /// The plugin's context (services such as `attachments` are looked up in it).
    pub(crate) fn ctx(&self) -> Option<&Ctx> {
        self.emitter.as_ref()
    }

    /// Its configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.config
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.config.server_name
    }

    /// A snapshot.
    pub fn info(&self) -> ServerInfo {
        let inner = self.inner.lock();
        ServerInfo {
            name: self.config.server_name.clone(),
            status: inner.status.clone(),
            tools: inner.tools,
            last_error: inner.last_error.clone(),
        }
    }

    /// The peer to call, or why there is none.
    pub(crate) fn peer(&self) -> Result<Peer<RoleClient>, (Status, Option<String>)> {
        let inner = self.inner.lock();
        match (&inner.status, &inner.peer) {
            (Status::Ready, Some(p)) if !p.is_transport_closed() => Ok(p.clone()),
            (status, _) => Err((status.clone(), inner.last_error.clone())),
        }
    }

    fn update(&self, f: impl FnOnce(&mut Inner)) {
        f(&mut self.inner.lock());
        self.version.send_modify(|v| *v += 1);
        if let Some(ctx) = &self.emitter {
            ctx.emit(&McpServerChanged { info: self.info() });
        }
    }

    /// Waits until the first attempt settled (ready, or failed); returns whether it is ready.
    pub async fn settled(&self) -> bool {
        let mut rx = self.version.subscribe();
        loop {
            match self.inner.lock().status {
                Status::Ready => return true,
                Status::Failed | Status::Reconnecting { .. } => return false,
                Status::Connecting => {}
            }
            if rx.changed().await.is_err() {
                return false;
            }
        }
    }
}

/// The runner's registrations: withdrawn as a whole when the tool set changes.
struct Registered {
    regs: Vec<Registration>,
    /// Raw name, description and schema of each tool, to skip identical re-syncs.
    fingerprint: Vec<(String, String, Value)>,
}

impl Registered {
    fn none() -> Self {
        Self {
            regs: Vec::new(),
            fingerprint: Vec::new(),
        }
    }

    fn withdraw(&mut self) {
        for r in self.regs.drain(..) {
            r.dispose();
        }
        self.fingerprint.clear();
    }
}

fn fingerprint(tools: &[RawTool]) -> Vec<(String, String, Value)> {
    tools
        .iter()
        .map(|t| {
            (
                t.name.to_string(),
                t.description.as_deref().unwrap_or("").to_owned(),
                Value::Object((*t.input_schema).clone()),
            )
        })
        .collect()
}

/// Why a listed tool set cannot be used.
#[derive(Debug, thiserror::Error)]
enum ListError {
    #[error("the server listed the tool {0:?} twice")]
    Duplicate(String),
}

/// Runs `server` for the life of the plugin's fiber: connect, register, watch, reconnect.
pub(crate) async fn run(ctx: Ctx, tools: Arc<dyn Tools>, server: Arc<Server>) {
    let config = server.config.clone();
    let mut registered = Registered::none();
    let mut attempts: u32 = 0;
    let mut delay = Duration::from_millis(config.reconnect.initial_delay_ms);
    let max_delay = Duration::from_millis(config.reconnect.max_delay_ms);
    let mut ever_connected = false;
    let mut offer = Offer {
        hub: None,
        name: server.name().to_owned(),
    };
    loop {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let confinement = match confinement(&ctx, &config).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(server = %server.name(), error = %e, "MCP server not started");
                record_failure(&server, &e);
                server.update(|i| i.status = Status::Failed);
                offer.withdraw();
                return;
            }
        };
        // Refreshes asked for before this connection are moot once its first list is in.
        let before = server.refresh.asked();
        match connect(&config, tx, server.refresh.clone(), confinement.as_ref()).await {
            Ok(conn) => {
                ever_connected = true;
                let started = Instant::now();
                let peer = conn.service.peer().clone();
                sync(&ctx, &tools, &server, &mut registered, &conn.tools);
                server.refresh.applied_up_to(before);
                server.update(|i| {
                    i.status = Status::Ready;
                    i.peer = Some(peer.clone());
                });
                if conn.resources {
                    offer.offer(&ctx, &server);
                } else {
                    offer.withdraw();
                }
                tracing::info!(server = %server.name(), tools = conn.tools.len(), "MCP server ready");
                let _guard = conn.guard;
                let closed = conn.service.waiting();
                tokio::pin!(closed);
                loop {
                    tokio::select! {
                        _ = &mut closed => break,
                        Some(()) = rx.recv() => {
                            // One fetch answers every notification queued so far.
                            while rx.try_recv().is_ok() {}
                            let asked = server.refresh.asked();
                            match peer.list_all_tools().await {
                                Ok(list) => sync(&ctx, &tools, &server, &mut registered, &list),
                                Err(e) => {
                                    // A failed fetch keeps the old tools.
                                    tracing::warn!(server = %server.name(), error = %e, "tools/list after list_changed failed");
                                    server.update(|i| i.last_error = Some(format!("tools/list failed: {e}")));
                                }
                            }
                            server.refresh.applied_up_to(asked);
                        }
                    }
                }
                // Nothing more will be fetched on this connection: no call waits for it.
                server.refresh.applied_up_to(server.refresh.asked());
                tracing::warn!(server = %server.name(), "MCP server closed the connection");
                server.update(|i| {
                    i.peer = None;
                    i.last_error = Some("the server closed the connection".to_owned());
                });
                if started.elapsed() > max_delay {
                    attempts = 0;
                    delay = Duration::from_millis(config.reconnect.initial_delay_ms);
                }
            }
            Err(e) => {
                tracing::warn!(server = %server.name(), error = %e, "MCP server connection failed");
                record_failure(&server, &e);
                if !ever_connected {
                    // Upstream: a failed first start is logged and leaves no tools; there
                    // is no transport to reconnect.
                    server.update(|i| i.status = Status::Failed);
                    offer.withdraw();
                    return;
                }
            }
        }
        if !config.reconnect.enabled || attempts >= config.reconnect.max_attempts {
            registered.withdraw();
            offer.withdraw();
            server.update(|i| {
                i.status = Status::Failed;
                i.tools = 0;
            });
            tracing::warn!(server = %server.name(), "MCP server given up: its tools are removed");
            return;
        }
        attempts += 1;
        server.update(|i| {
            i.status = Status::Reconnecting {
                attempt: attempts,
                max: config.reconnect.max_attempts,
            }
        });
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(max_delay);
    }
}

/// The sandbox a stdio server is spawned under: looked up softly (without a `sandbox` row
/// nothing is confined) unless the composition root said one is mounted
/// (`sandboxRequired`): then it is awaited, since rows activate concurrently, and its absence
/// after `startupTimeoutMs` fails the start.
async fn confinement(
    ctx: &Ctx,
    config: &McpServerConfig,
) -> Result<Option<Confinement>, ConnectError> {
    if !config.sandbox || config.transport != crate::config::TransportKind::Stdio {
        return Ok(None);
    }
    let lookup = || {
        ctx.get::<dyn dsh_sandbox::Sandbox>()
            .map(|sandbox| Confinement { sandbox })
    };
    if !config.sandbox_required {
        return Ok(lookup());
    }
    let deadline = Instant::now() + Duration::from_millis(config.startup_timeout_ms);
    loop {
        if let Some(c) = lookup() {
            return Ok(Some(c));
        }
        if Instant::now() >= deadline {
            return Err(ConnectError::Sandbox {
                command: config.command.clone().unwrap_or_default(),
                reason: format!(
                    "the sandbox service did not come up within {} ms",
                    config.startup_timeout_ms
                ),
            });
        }
        // The kernel has no "service provided" notification: a short poll during start-up.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// This server's place in the resources bridge: offered while connected with the
/// `resources` capability, withdrawn when given up or when the runner ends (unload).
struct Offer {
    hub: Option<Arc<dyn McpResources>>,
    name: String,
}

impl Offer {
    fn offer(&mut self, ctx: &Ctx, server: &Arc<Server>) {
        // Looked up softly: without the `mcp-resources` row there is no bridge.
        if let Some(hub) = ctx.get::<dyn McpResources>() {
            hub.offer(server.clone());
            self.hub = Some(hub);
        } else {
            tracing::debug!(server = %self.name, "the server offers resources but no mcp-resources row is mounted");
        }
    }

    fn withdraw(&mut self) {
        if let Some(hub) = self.hub.take() {
            hub.withdraw(&self.name);
        }
    }
}

impl Drop for Offer {
    fn drop(&mut self) {
        self.withdraw();
    }
}

fn record_failure(server: &Server, e: &ConnectError) {
    let message = e.to_string();
    server.update(|i| i.last_error = Some(message));
}

/// Registers `list` in place of what is registered (nothing when identical). An invalid list
/// keeps the old tools; a registration conflict leaves zero tools from this server.
fn sync(
    ctx: &Ctx,
    tools: &Arc<dyn Tools>,
    server: &Arc<Server>,
    registered: &mut Registered,
    list: &[RawTool],
) {
    let print = fingerprint(list);
    if !registered.regs.is_empty() && print == registered.fingerprint {
        return;
    }
    if let Err(e) = check_list(list) {
        tracing::warn!(server = %server.name(), error = %e, "invalid tool list ignored");
        server.update(|i| i.last_error = Some(e.to_string()));
        return;
    }
    registered.withdraw();
    let mut regs = Vec::with_capacity(list.len());
    for raw in list {
        let name = tool_name(server.name(), &raw.name);
        let tool = McpTool::new(server.clone(), name.clone(), raw);
        match tools.register_removable(ctx, Arc::new(tool)) {
            Ok(r) => regs.push(r),
            Err(e) => {
                tracing::warn!(server = %server.name(), tool = %name, error = %e, "registration conflict: no tools from this server");
                for r in regs.drain(..) {
                    r.dispose();
                }
                server.update(|i| {
                    i.tools = 0;
                    i.last_error = Some(format!("cannot register {name}: {e}"));
                });
                return;
            }
        }
    }
    let count = regs.len();
    registered.regs = regs;
    registered.fingerprint = print;
    server.update(|i| i.tools = count);
}

fn check_list(list: &[RawTool]) -> Result<(), ListError> {
    let mut seen = std::collections::HashSet::new();
    for t in list {
        if !seen.insert(t.name.as_ref()) {
            return Err(ListError::Duplicate(t.name.to_string()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_call_waits_for_the_refreshes_asked_before_its_result() {
        let r = ListRefresh::new();
        // Nothing asked: no wait.
        r.settled(Duration::from_secs(60)).await;
        r.ask();
        r.ask();
        let waiter = {
            let r = r.clone();
            tokio::spawn(async move { r.settled(Duration::from_secs(60)).await })
        };
        tokio::task::yield_now().await;
        r.applied_up_to(1);
        tokio::task::yield_now().await;
        assert!(
            !waiter.is_finished(),
            "one of two refreshes is still pending"
        );
        r.applied_up_to(2);
        waiter.await.unwrap();
        // A refresh asked for later is not waited on by a call that already returned, and a
        // stalled one is given up after the limit (paused clock: no real wait).
        r.ask();
        let started = tokio::time::Instant::now();
        r.settled(Duration::from_secs(2)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        // Moot refreshes (the connection closed) release everyone.
        r.applied_up_to(r.asked());
        r.settled(Duration::from_secs(60)).await;
    }
}
