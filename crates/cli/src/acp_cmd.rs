//! `dsh acp`: dsh as an Agent Client Protocol agent on stdio (`dsh-acp`), over the headless
//! composition (preset, `$DSH_HOME/dsh.yaml`, `--config`, `--patch`). The composition root of
//! the ACP server: it builds the in-process host (`dsh-host`) the server drives sessions
//! through, and gives each session what its client offers ([`KernelSetup`]): the session's own
//! `bash` on the client's terminal, the client's files as its file backend, the client's MCP
//! servers mounted in its scope.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use dsh_acp::{Attached, ClientOffer, SessionSetup, SetupError};
use dsh_agent::{Agent, AgentOptions};
use dsh_host::{Host, HostOptions};
use dsh_kernel::{Composer, Ctx, Kernel};
use dsh_mcp_api::{McpServerChanged, McpServerConfig, PLUGIN_NAME, Status};
use futures::future::BoxFuture;

use crate::compose::{compose, registry};
use crate::{ComposeArgs, Failure};

/// Longest wait for the client's MCP servers of one session to settle before it answers anyway
/// (a slower server's tools arrive later, announced as the tool set grows).
const MCP_SETTLE: Duration = Duration::from_secs(15);

/// Options of `dsh acp`.
#[derive(Debug, Args)]
pub(crate) struct AcpArgs {
    /// Model id of new sessions (default: the provider's default model).
    #[arg(long, value_name = "M")]
    pub(crate) model: Option<String>,
    /// Provider route of new sessions.
    #[arg(long, value_name = "P", default_value = "deepseek")]
    pub(crate) provider: String,
    /// Run `bash` in the client's terminal (`terminal/*`) when the client offers one; the
    /// commands then run outside dsh's sandbox.
    #[arg(long)]
    pub(crate) client_terminal: bool,
    /// Keep `read`, `write` and `edit` on the local disk even when the client offers its files
    /// (`fs/read_text_file`, `fs/write_text_file`; used by default).
    #[arg(long)]
    pub(crate) local_fs: bool,
    #[command(flatten)]
    pub(crate) compose: ComposeArgs,
}

/// Runs `dsh acp` on its own runtime, shut down without waiting for a blocked stdin read.
pub(crate) fn main(args: AcpArgs) -> Result<u8, Failure> {
    crate::init_logging();
    let rt = crate::runtime()?;
    let code = rt.block_on(serve(args));
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}

async fn serve(args: AcpArgs) -> Result<u8, Failure> {
    let registry = registry();
    let composition = compose(&args.compose, None, &registry)?;
    let kernel = Kernel::new(registry);
    let composer = Arc::new(tokio::sync::Mutex::new(Composer::new(kernel.root())));
    {
        let mut c = composer.lock().await;
        c.apply(&composition).await.map_err(Failure::usage)?;
        c.ready().await.map_err(Failure::usage)?;
    }
    let cwd = std::env::current_dir().map_err(|e| Failure::usage(anyhow!(e)))?;
    let host = Host::new(
        kernel.root(),
        HostOptions {
            defaults: AgentOptions {
                provider: Some(args.provider),
                model: args.model,
                reasoning_effort: None,
                max_tokens: None,
                temperature: None,
                cwd,
            },
            answer_approvals: true,
        },
    )
    .map_err(|e| Failure::usage(anyhow!(e)))?;
    let setup = Arc::new(KernelSetup {
        root: kernel.root(),
        host: host.clone(),
    });
    let options = dsh_acp::AcpOptions {
        version: env!("CARGO_PKG_VERSION").into(),
        client_terminal: args.client_terminal,
        client_fs: !args.local_fs,
    };
    let served = dsh_acp::serve(
        host.client(),
        setup,
        options,
        agent_client_protocol::Stdio::new(),
    )
    .await;
    host.shutdown().await;
    kernel.dispose().await;
    served.map(|()| 0).map_err(|e| Failure::run(anyhow!(e)))
}

/// Gives ACP sessions what their client offers, through the kernel.
struct KernelSetup {
    root: Ctx,
    host: Host,
}

impl SessionSetup for KernelSetup {
    fn attach<'a>(
        &'a self,
        session_id: &'a str,
        offer: ClientOffer,
    ) -> BoxFuture<'a, Result<Attached, SetupError>> {
        Box::pin(async move {
            let agent = self
                .host
                .agent(session_id)
                .ok_or_else(|| SetupError::new("cannot set up the session", "it is not open"))?;
            let mut kept: Vec<Attached> = Vec::new();
            if let Some(terminal) = offer.terminal {
                // The session's own `bash` (registered in its scope, shadowing the global one)
                // runs in the client's terminal.
                let what = "cannot route bash to the client";
                let tools = self
                    .root
                    .get::<dyn dsh_tools::Tools>()
                    .ok_or_else(|| SetupError::new(what, "the composition mounts no tools"))?;
                tools
                    .register(
                        agent.ctx(),
                        Arc::new(dsh_tool_bash::BashTool::new(terminal)),
                    )
                    .map_err(|e| SetupError::new(what, e))?;
            }
            if let Some(files) = offer.files {
                // No file tools mounted: nothing to route.
                if let Some(backends) = self.root.get::<dsh_fs_backend::FileBackends>() {
                    kept.push(Box::new(backends.set(session_id, files)));
                }
            }
            mount_mcp(&self.root, &agent, offer.mcp_servers)
                .await
                .map_err(|e| SetupError::new("cannot start the client's MCP servers", e))?;
            Ok(Box::new(kept) as Attached)
        })
    }
}

/// Mounts each of the client's MCP servers as an `mcp-client` plugin in `agent`'s scope (its
/// tools are that session's only and stop with it) and waits (at most [`MCP_SETTLE`]) until
/// each is ready or failed. A failed server is logged, not an error: the session works without
/// its tools.
async fn mount_mcp(
    root: &Ctx,
    agent: &Arc<dyn Agent>,
    servers: Vec<McpServerConfig>,
) -> anyhow::Result<()> {
    if servers.is_empty() {
        return Ok(());
    }
    let pending: Arc<parking_lot::Mutex<HashSet<String>>> = Arc::new(parking_lot::Mutex::new(
        servers.iter().map(|s| s.server_name.clone()).collect(),
    ));
    let settled = Arc::new(tokio::sync::Notify::new());
    let (p, n) = (pending.clone(), settled.clone());
    let listener = root.on::<McpServerChanged>(move |e| {
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
    })?;
    for config in servers {
        let name = config.server_name.clone();
        let raw = serde_json::to_value(&config)?;
        agent
            .ctx()
            .mount(PLUGIN_NAME, raw)
            .map_err(|e| anyhow!("cannot start MCP server \"{name}\": {e}"))?;
    }
    if !pending.lock().is_empty()
        && tokio::time::timeout(MCP_SETTLE, settled.notified())
            .await
            .is_err()
    {
        tracing::warn!(servers = ?pending.lock(), "MCP servers still starting; the session goes on");
    }
    listener.dispose();
    Ok(())
}
