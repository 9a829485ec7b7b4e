//! The MCP vocabulary of dsh: a server's configuration ([`McpServerConfig`], the config of the
//! `mcp-client` plugin, which a front end mounts by name with `Ctx::mount("mcp-client", ..)`),
//! where a server stands ([`Status`], [`ServerInfo`]) and the `mcp/server-changed`
//! notification ([`McpServerChanged`]). The client itself (on `rmcp`) is `dsh-mcp-client`.

pub mod config;

pub use config::{ConfigError, McpServerConfig, ReconnectConfig, TransportKind};

/// The name of the plugin that connects one MCP server (`dsh-mcp-client`'s `McpClientPlugin`).
pub const PLUGIN_NAME: &str = "mcp-client";

/// Where a server stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// The first connection attempt is under way.
    Connecting,
    /// Connected; its tools are registered.
    Ready,
    /// The transport closed; attempt `attempt` of `max` is pending (tools stay registered
    /// and fail with a clear error meanwhile).
    Reconnecting {
        /// The attempt about to be made (1-based).
        attempt: u32,
        /// The budget.
        max: u32,
    },
    /// Given up (first connection failed, or the reconnection budget ran out): no tools
    /// until the plugin restarts.
    Failed,
}

impl Status {
    /// The short word `dsh mcp list` prints.
    pub fn word(&self) -> &'static str {
        match self {
            Self::Connecting => "connecting",
            Self::Ready => "ready",
            Self::Reconnecting { .. } => "reconnecting",
            Self::Failed => "failed",
        }
    }
}

/// A snapshot of one server for front ends and `dsh mcp list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// The server name.
    pub name: String,
    /// Where it stands.
    pub status: Status,
    /// How many of its tools are registered.
    pub tools: usize,
    /// The last connection or protocol error, if any.
    pub last_error: Option<String>,
}

/// Notification `mcp/server-changed`: a server's status, tool count or last error changed
/// (emitted after its tools were registered or withdrawn, so a listener that sees `Ready`
/// with `n` tools finds them in the registry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServerChanged {
    /// The new snapshot.
    pub info: ServerInfo,
}

impl dsh_kernel::Notify for McpServerChanged {
    const NAME: &'static str = "mcp/server-changed";
}
