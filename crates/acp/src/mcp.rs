//! The client's MCP servers (`mcpServers` of `session/new` / `session/load`): each becomes an
//! `mcp-client` plugin mounted in the session's own scope, so its tools are that session's
//! only and go away with it. The session answers once every server is ready or has failed
//! (bounded), so the first prompt's request already lists their tools.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::McpServer;
use dsh_agent::Agent;
use dsh_kernel::Ctx;
use dsh_mcp_api::{McpServerChanged, McpServerConfig, PLUGIN_NAME, Status};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

/// Longest wait for the servers of one session to settle before it answers anyway (a slower
/// server's tools arrive later, announced as the tool set grows).
const SETTLE: Duration = Duration::from_secs(15);

/// Why the client's `mcpServers` could not be taken or started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum McpSetupError {
    /// A server uses a transport dsh does not support.
    #[error(
        "mcpServers: server \"{0}\" uses the SSE transport, which dsh does not support (use stdio or http)"
    )]
    Sse(String),
    /// A transport this version of the schema does not know.
    #[error("mcpServers: unsupported transport")]
    UnsupportedTransport,
    /// Two servers share a name.
    #[error("mcpServers: server \"{0}\" is listed twice")]
    Duplicate(String),
    /// A server's settings are not a valid `mcp-client` config.
    #[error("mcpServers: server \"{name}\": {reason}")]
    Invalid {
        /// The server.
        name: String,
        /// Why.
        reason: String,
    },
    /// The kernel refused the status listener.
    #[error("{0}")]
    Listen(dsh_kernel::KernelError),
    /// The kernel refused the plugin.
    #[error("cannot start MCP server \"{name}\": {source}")]
    Mount {
        /// The server.
        name: String,
        /// The kernel's error.
        source: dsh_kernel::KernelError,
    },
}

fn pairs<'a>(items: impl Iterator<Item = (&'a str, &'a str)>) -> Value {
    Value::Object(
        items
            .map(|(k, v)| (k.to_owned(), Value::from(v)))
            .collect::<Map<String, Value>>(),
    )
}

/// The `mcp-client` configs of the client's servers; `Err` names the bad server and why.
pub(crate) fn configs(servers: &[McpServer]) -> Result<Vec<McpServerConfig>, McpSetupError> {
    let mut names = HashSet::new();
    let mut out = Vec::with_capacity(servers.len());
    for s in servers {
        let (name, raw) = match s {
            McpServer::Stdio(s) => (
                s.name.clone(),
                json!({
                    "transport": "stdio",
                    "serverName": s.name,
                    "command": s.command.display().to_string(),
                    "args": s.args,
                    "env": pairs(s.env.iter().map(|e| (e.name.as_str(), e.value.as_str()))),
                }),
            ),
            McpServer::Http(s) => (
                s.name.clone(),
                json!({
                    "transport": "streamable-http",
                    "serverName": s.name,
                    "url": s.url,
                    "headers": pairs(s.headers.iter().map(|h| (h.name.as_str(), h.value.as_str()))),
                }),
            ),
            McpServer::Sse(s) => return Err(McpSetupError::Sse(s.name.clone())),
            #[allow(unreachable_patterns)] // the enum is non-exhaustive
            _ => return Err(McpSetupError::UnsupportedTransport),
        };
        if !names.insert(name.clone()) {
            return Err(McpSetupError::Duplicate(name));
        }
        let invalid = |reason: String| McpSetupError::Invalid {
            name: name.clone(),
            reason,
        };
        let config: McpServerConfig =
            serde_json::from_value(raw).map_err(|e| invalid(e.to_string()))?;
        config.validate().map_err(|e| invalid(e.to_string()))?;
        out.push(config);
    }
    Ok(out)
}

/// Mounts each server in `agent`'s scope and waits (at most [`SETTLE`]) until each is ready or
/// failed. A failed server is logged, not an error: the session works without its tools.
pub(crate) async fn mount(
    root: &Ctx,
    agent: &Arc<dyn Agent>,
    servers: Vec<McpServerConfig>,
) -> Result<(), McpSetupError> {
    if servers.is_empty() {
        return Ok(());
    }
    let pending: Arc<Mutex<HashSet<String>>> = Arc::new(Mutex::new(
        servers.iter().map(|s| s.server_name.clone()).collect(),
    ));
    let settled = Arc::new(tokio::sync::Notify::new());
    let (p, n) = (pending.clone(), settled.clone());
    let listener = root
        .on::<McpServerChanged>(move |e| {
            match e.info.status {
                Status::Ready => {}
                Status::Failed => tracing::warn!(
                    server = %e.info.name,
                    error = ?e.info.last_error,
                    "an ACP client's MCP server failed to start"
                ),
                _ => return Ok(()),
            }
            let mut p = p.lock();
            if p.remove(&e.info.name) && p.is_empty() {
                n.notify_one();
            }
            Ok(())
        })
        .map_err(McpSetupError::Listen)?;
    for config in servers {
        let name = config.server_name.clone();
        // Mounted by name: the composition root registers the `mcp-client` implementation.
        let raw = serde_json::to_value(&config).map_err(|e| McpSetupError::Invalid {
            name: name.clone(),
            reason: e.to_string(),
        })?;
        agent
            .ctx()
            .mount(PLUGIN_NAME, raw)
            .map_err(|source| McpSetupError::Mount { name, source })?;
    }
    if !pending.lock().is_empty()
        && tokio::time::timeout(SETTLE, settled.notified())
            .await
            .is_err()
    {
        tracing::warn!(servers = ?pending.lock(), "MCP servers still starting; the session goes on");
    }
    listener.dispose();
    Ok(())
}
