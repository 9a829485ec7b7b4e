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
use dsh_mcp_client::{McpClientPlugin, McpServerChanged, McpServerConfig, Status};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

/// Longest wait for the servers of one session to settle before it answers anyway (a slower
/// server's tools arrive later, announced as the tool set grows).
const SETTLE: Duration = Duration::from_secs(15);

fn pairs<'a>(items: impl Iterator<Item = (&'a str, &'a str)>) -> Value {
    Value::Object(
        items
            .map(|(k, v)| (k.to_owned(), Value::from(v)))
            .collect::<Map<String, Value>>(),
    )
}

/// The `mcp-client` configs of the client's servers; `Err` names the bad server and why.
pub(crate) fn configs(servers: &[McpServer]) -> Result<Vec<McpServerConfig>, String> {
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
            McpServer::Sse(s) => {
                return Err(format!(
                    "mcpServers: server \"{}\" uses the SSE transport, which dsh does not \
                     support (use stdio or http)",
                    s.name
                ));
            }
            #[allow(unreachable_patterns)] // the enum is non-exhaustive
            _ => return Err("mcpServers: unsupported transport".into()),
        };
        if !names.insert(name.clone()) {
            return Err(format!("mcpServers: server \"{name}\" is listed twice"));
        }
        let config: McpServerConfig = serde_json::from_value(raw)
            .map_err(|e| format!("mcpServers: server \"{name}\": {e}"))?;
        config
            .validate()
            .map_err(|e| format!("mcpServers: server \"{name}\": {e}"))?;
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
) -> Result<(), String> {
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
        .map_err(|e| e.to_string())?;
    for config in servers {
        let name = config.server_name.clone();
        agent
            .ctx()
            .mount_plugin::<McpClientPlugin>(config)
            .map_err(|e| format!("cannot start MCP server \"{name}\": {e}"))?;
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
