//! The `mcp-client` plugin: one row per server.

use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_tools::Tools;

use crate::config::McpServerConfig;
use crate::server::{Server, run};

/// The `mcp-client` plugin. Its activation starts the server in the background and waits at
/// most `startupGraceMs` for its tools; a slower server's tools appear when it is ready (the
/// agent loop announces them with a developer message, so the cached prefix holds).
#[derive(Debug)]
pub struct McpClientPlugin;

/// Why activation failed.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    /// `failOnStartupError` is set and the server was not ready within the grace.
    #[error("MCP server {server:?} did not start: {reason}")]
    Startup {
        /// The server.
        server: String,
        /// The last error, or that the grace ran out.
        reason: String,
    },
}

impl Plugin for McpClientPlugin {
    const NAME: &'static str = "mcp-client";
    type Config = McpServerConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>()]
    }

    async fn apply(ctx: Ctx, config: McpServerConfig) -> Result<(), BoxError> {
        config.validate()?;
        let tools = ctx.dep::<dyn Tools>()?;
        let grace = Duration::from_millis(config.startup_grace_ms);
        let fail = config.fail_on_startup_error;
        let server = Server::new(config, Some(ctx.clone()));
        ctx.spawn(run(ctx.clone(), tools, server.clone()))?;
        let ready = tokio::time::timeout(grace, server.settled())
            .await
            .unwrap_or(false);
        if !ready && fail {
            let info = server.info();
            return Err(Box::new(ActivationError::Startup {
                server: info.name,
                reason: info
                    .last_error
                    .unwrap_or_else(|| format!("not ready within {} ms", grace.as_millis())),
            }));
        }
        Ok(())
    }
}

/// Connects to one server outside any kernel (for `dsh mcp list`): its status, tool count
/// and error after at most `startupTimeoutMs`. The probe runs the server unconfined (there is
/// no `sandbox` service outside a kernel).
pub async fn probe(config: McpServerConfig) -> crate::server::ServerInfo {
    use crate::server::{ServerInfo, Status};
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let name = config.server_name.clone();
    let refresh = crate::server::ListRefresh::new();
    match crate::connect::connect(&config, tx, refresh, None).await {
        Ok(conn) => {
            let tools = conn.tools.len();
            let mut service = conn.service;
            let _ = service.close().await;
            drop(conn.guard);
            ServerInfo {
                name,
                status: Status::Ready,
                tools,
                last_error: None,
            }
        }
        Err(e) => ServerInfo {
            name,
            status: Status::Failed,
            tools: 0,
            last_error: Some(e.to_string()),
        },
    }
}

/// The shared state of a server, for tests and front ends that mount the plugin themselves.
pub type SharedServer = Arc<Server>;
