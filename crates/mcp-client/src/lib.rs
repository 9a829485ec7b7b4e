//! The MCP client of dsh: tools from any MCP server, on the official `rmcp` SDK.
//!
//! [`McpClientPlugin`] (plugin name `mcp-client`) is mounted once per server (one composition
//! row each, [`McpServerConfig`]). It connects in the background over stdio
//! ([`connect`]: a child in its own process group, scrubbed environment, stderr to the
//! tracing log) or streamable HTTP, registers the server's tools with the `tools` service as
//! `mcp__<server>__<tool>` ([`names`]), re-syncs them on `tools/list_changed`, and reconnects
//! with doubling backoff after the transport closes ([`server`]). Results are rendered as
//! upstream does ([`render`]). [`json_config`] reads the de-facto `mcpServers` JSON files.
//! [`McpResourcesPlugin`] (`mcp-resources`) bridges the servers' resources as the tools
//! `list_mcp_resources`, `list_mcp_resource_templates` and `read_mcp_resource` ([`resources`]).

pub use dsh_mcp_api::config;
pub mod connect;
pub mod env;
pub mod images;
pub mod json_config;
pub mod names;
mod plugin;
pub mod render;
pub mod resources;
pub mod server;
mod tool;

pub use config::{ConfigError, McpServerConfig, ReconnectConfig, TransportKind};
pub use plugin::{ActivationError, McpClientPlugin, SharedServer, probe};
pub use resources::{McpResources, McpResourcesPlugin};
pub use server::{McpServerChanged, ServerInfo, Status};
pub use tool::{CALL_FAILED, McpTool, SERVER_UNAVAILABLE};
