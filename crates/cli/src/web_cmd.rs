//! `dsh web`: `dsh serve` plus the web page (dsh-web) at `/`. The page signs in with a one-time
//! link printed on stdout (and opened in the browser on loopback); the API keeps taking bearer
//! tokens. A child module of `serve_cmd`: it runs the same server.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::anyhow;
use clap::Args;
use dsh_protocol::Client;
use dsh_serve::{Bound, ServeConfig, TokenKind, TokenStore};
use dsh_web::{Access, TokenCheck, TokenCheckError, Web, WebConfig};

use super::{DEFAULT_LISTEN, ServeArgs, SessionDefaults, token_store};
use crate::Failure;

/// `dsh web`.
#[derive(Debug, Args)]
pub(crate) struct WebArgs {
    /// Listen on this TCP address (default 127.0.0.1:7433; port 0 picks one). Every request
    /// needs the sign-in cookie or a bearer token, on loopback too.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Do not open the browser (the login link is printed either way).
    #[arg(long)]
    no_open: bool,
    /// Another name browsers may use in the `Host` header (a tunnel's name); repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_host: Vec<String>,
    #[command(flatten)]
    defaults: SessionDefaults,
}

/// Runs `dsh web`.
pub(crate) async fn run(args: WebArgs) -> Result<u8, Failure> {
    let WebArgs {
        listen,
        no_open,
        allow_host,
        defaults,
    } = args;
    let listen = match listen {
        Some(a) => a,
        None => DEFAULT_LISTEN
            .parse()
            .map_err(|e| Failure::usage(anyhow!("{e}")))?,
    };
    let serve = ServeArgs {
        token: None,
        listen: Some(listen),
        unix: None,
        idle_exit: None,
        allow_host,
        defaults,
    };
    super::run_with(serve, Some(Front { open: !no_open })).await
}

/// The stored serve tokens, as the web login layer checks them.
struct StoredTokens(Arc<TokenStore>);

impl TokenCheck for StoredTokens {
    fn check(&self, secret: &str) -> Result<Option<Access>, TokenCheckError> {
        let access = self
            .0
            .check(Some(secret))
            .map_err(|e| TokenCheckError(Box::new(e)))?;
        Ok(match access {
            dsh_serve::Access::Token(TokenKind::Full) => Some(Access::Full),
            dsh_serve::Access::Token(TokenKind::ReadOnly) => Some(Access::ReadOnly),
            // No stored token matches (or none exists): only a one-time link signs in.
            dsh_serve::Access::Open | dsh_serve::Access::Missing | dsh_serve::Access::Invalid => {
                None
            }
        })
    }
}

/// What `dsh web` adds to the server.
pub(crate) struct Front {
    open: bool,
}

impl Front {
    /// Serves the API and the page on `listener` until `shutdown`: prints the login link (and
    /// opens it on loopback), then runs the server as a task.
    pub(crate) fn start(
        self,
        listener: tokio::net::TcpListener,
        client: Arc<dyn Client>,
        mut config: ServeConfig,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<tokio::task::JoinHandle<Result<(), dsh_serve::ServeError>>, Failure> {
        let bound = listener
            .local_addr()
            .map_err(|e| Failure::run(anyhow!("{e}")))?;
        config.bound = Bound::Tcp(bound);
        // The web layer authenticates every request (cookie or bearer against the same store);
        // serve's guard keeps its Host and Origin checks.
        let store = config
            .tokens
            .take()
            .unwrap_or_else(|| Arc::new(token_store()));
        let web = Web::new(
            WebConfig::for_port(bound.port()),
            Some(Arc::new(StoredTokens(store))),
        );
        let secret = web
            .login_link(Access::Full)
            .map_err(|e| Failure::run(anyhow!("{e}")))?;
        let url = format!("http://{bound}/login?token={secret}");
        println!("{url}");
        let loopback = bound.ip().is_loopback();
        eprintln!(
            "dsh web: listening on http://{bound} (API: /openapi.json); the link above signs one \
             browser in, once, within 15 minutes{}",
            if bound.ip().is_unspecified() {
                " (use this machine's address instead of the wildcard)"
            } else {
                ""
            }
        );
        if loopback && self.open {
            open_browser(&url);
        }
        let app = web.protect(dsh_serve::router_with(client, config, web.routes()));
        Ok(tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
                .map_err(dsh_serve::ServeError::Io)
        }))
    }
}

/// Opens `url` in the desktop's browser (detached; a failure is only reported).
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reaped in the background: the opener usually exits at once.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => {
            eprintln!("dsh web: could not open a browser ({opener}: {e}); open the link above");
        }
    }
}
