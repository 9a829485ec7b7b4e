//! What the client offers a session besides the session's ops: its terminal, its files and its
//! MCP servers. They reach the engine through the composition root (the `dsh` binary), which
//! owns the kernel: this crate builds each from the client's capabilities as an implementation
//! of an interface crate's seam ([`ShellExecutor`], [`FileBackend`], [`McpServerConfig`]) and
//! hands them to [`SessionSetup::attach`] once the session is open.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_fs_backend::FileBackend;
use dsh_mcp_api::McpServerConfig;
use dsh_shell::ShellExecutor;
use futures::future::BoxFuture;

/// What the client offers one session.
pub struct ClientOffer {
    /// The session's working directory (absolute).
    pub cwd: PathBuf,
    /// The client's terminal (`terminal/*`), when the client offers one and `dsh acp
    /// --client-terminal` asked for it: the session's `bash` runs there.
    pub terminal: Option<Arc<dyn ShellExecutor>>,
    /// The client's files (`fs/read_text_file`, `fs/write_text_file`), when the client offers
    /// both and `--local-fs` was not given: the session's file tools read and write them.
    pub files: Option<Arc<dyn FileBackend>>,
    /// The client's MCP servers (`mcpServers`), validated: the session's own.
    pub mcp_servers: Vec<McpServerConfig>,
}

impl std::fmt::Debug for ClientOffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOffer")
            .field("cwd", &self.cwd)
            .field("terminal", &self.terminal.is_some())
            .field("files", &self.files.is_some())
            .field(
                "mcp_servers",
                &self
                    .mcp_servers
                    .iter()
                    .map(|s| s.server_name.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Keeps what [`SessionSetup::attach`] set up; dropped when the session closes in this server
/// (or the client disconnects).
pub type Attached = Box<dyn Send + Sync>;

/// Why a session's client resources could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct SetupError {
    /// What could not be set up (`cannot route bash to the client`).
    pub what: String,
    /// Why.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl SetupError {
    /// `what` failed because of `source`.
    pub fn new(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        SetupError {
            what: what.into(),
            source: source.into(),
        }
    }
}

/// Gives an open session what its client offers: the composition root implements it over the
/// kernel (the session's own `bash` on the client's terminal, its file backend, its MCP
/// servers mounted in its scope).
pub trait SessionSetup: Send + Sync + 'static {
    /// Sets up `offer` for the open session `session_id`; answers once the session can use it
    /// (MCP servers ready or failed). What it returns is kept while the session is open.
    fn attach<'a>(
        &'a self,
        session_id: &'a str,
        offer: ClientOffer,
    ) -> BoxFuture<'a, Result<Attached, SetupError>>;
}

/// A setup that uses nothing the client offers (a host whose sessions keep their own terminal,
/// files and MCP servers).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSetup;

impl SessionSetup for NoSetup {
    fn attach<'a>(
        &'a self,
        _session_id: &'a str,
        _offer: ClientOffer,
    ) -> BoxFuture<'a, Result<Attached, SetupError>> {
        Box::pin(async { Ok(Box::new(()) as Attached) })
    }
}
