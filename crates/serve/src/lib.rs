//! `dsh-serve`: any [`dsh_protocol::Client`] over HTTP/1.1, and the [`RemoteClient`] that
//! speaks it back.
//!
//! The server ([`router`], [`serve`]) exposes sessions as JSON resources and their events as
//! Server-Sent Events (`docs/http-api.md`, `GET /openapi.json`). Every request passes the
//! [`guard`] checks (`Host`, `Origin`, bearer tokens from a [`tokens::TokenStore`]); every
//! failure answers a [`dsh_protocol::ProtocolError`] body with the status of
//! [`error::status_of`]. The crate speaks `dsh-protocol` only: the `dsh` binary hands it a
//! `dsh_host::Host` as an `Arc<dyn Client>`.

pub mod app;
pub mod error;
pub mod events;
pub mod files;
pub mod guard;
pub mod idle;
pub mod openapi;
pub mod remote;
mod settings;
pub mod sse;
pub mod tokens;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dsh_protocol::Client;

/// The protocol the server and the remote client speak (a client of `RemoteClient` needs no other
/// dsh crate).
pub use dsh_protocol as protocol;
pub use error::{ApiError, status_of};
pub use guard::Bound;
pub use remote::{RemoteClient, RemoteError};
pub use tokens::{Access, TokenEntry, TokenError, TokenKind, TokenStore};

/// Request bodies larger than this are refused (413) by default.
pub const DEFAULT_MAX_BODY: usize = 1024 * 1024;

/// How often an idle event stream carries a keep-alive comment by default.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How the server is exposed.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Where it listens (for the `Host` check).
    pub bound: Bound,
    /// The token store; `None`: no authentication at all (tests, a private unix socket).
    pub tokens: Option<Arc<TokenStore>>,
    /// More names the `Host` header may use (lowercase, no port).
    pub allowed_hosts: Vec<String>,
    /// The request body bound, in bytes.
    pub max_body: usize,
    /// The keep-alive interval of event streams.
    pub keep_alive: Duration,
}

impl ServeConfig {
    /// Defaults for a server bound at `bound`.
    pub fn new(bound: Bound) -> Self {
        ServeConfig {
            bound,
            tokens: None,
            allowed_hosts: Vec::new(),
            max_body: DEFAULT_MAX_BODY,
            keep_alive: DEFAULT_KEEP_ALIVE,
        }
    }
}

/// What the handlers share.
pub(crate) struct AppState {
    pub client: Arc<dyn Client>,
    pub config: ServeConfig,
    pub openapi: serde_json::Value,
}

/// Why a server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without a token.
    #[error(
        "refusing to listen on {0} without a token: create one with `dsh serve token create` \
         (a non-loopback address is reachable by other machines)"
    )]
    NoToken(std::net::SocketAddr),
    /// The token file cannot be read.
    #[error(transparent)]
    Tokens(#[from] TokenError),
    /// The listener failed.
    #[error("listening failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Refuses a configuration that would expose sessions to other machines without a token.
pub fn check_exposure(config: &ServeConfig) -> Result<(), ServeError> {
    if let Bound::Tcp(addr) = &config.bound
        && !addr.ip().is_loopback()
    {
        let any = match &config.tokens {
            Some(t) => t.any()?,
            None => false,
        };
        if !any {
            return Err(ServeError::NoToken(*addr));
        }
    }
    Ok(())
}

/// The application: every route over `client`.
pub fn router(client: Arc<dyn Client>, config: ServeConfig) -> axum::Router {
    router_with(client, config, axum::Router::new())
}

/// The application with `extra` routes merged beside the API (another front end of the same
/// server, e.g. `dsh web`'s page and assets). They pass the same guard (`Host`, `Origin`, and
/// the bearer token when `config.tokens` is set); `extra` must not set a fallback, and its paths
/// must not collide with the API's (axum panics on both).
pub fn router_with(
    client: Arc<dyn Client>,
    config: ServeConfig,
    extra: axum::Router,
) -> axum::Router {
    app::router(
        Arc::new(AppState {
            client,
            config,
            openapi: openapi::openapi(),
        }),
        extra,
    )
}

/// Serves `client` on a TCP listener until `shutdown` resolves (then stops accepting, ends the
/// event streams, and returns once the open requests are answered).
pub async fn serve(
    listener: tokio::net::TcpListener,
    client: Arc<dyn Client>,
    mut config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    config.bound = Bound::Tcp(listener.local_addr()?);
    check_exposure(&config)?;
    let app = router(client, config);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

/// Serves `client` on a unix socket until `shutdown` resolves.
#[cfg(unix)]
pub async fn serve_unix(
    listener: tokio::net::UnixListener,
    client: Arc<dyn Client>,
    mut config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    config.bound = Bound::Unix;
    let app = router(client, config);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
