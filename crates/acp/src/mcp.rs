//! The client's MCP servers (`mcpServers` of `session/new` / `session/load`) as `mcp-client`
//! configs (the vocabulary of `dsh-mcp-api`); the composition root mounts them in the
//! session's own scope ([`crate::SessionSetup`]).

use std::collections::HashSet;

use agent_client_protocol::v1::schema::McpServer;
use dsh_mcp_api::McpServerConfig;
use serde_json::{Map, Value, json};

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
