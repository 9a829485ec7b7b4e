//! `dsh serve`: the composed harness's sessions over HTTP (dsh-serve over a dsh-host Host),
//! and `dsh serve token create|list|revoke`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use dsh_agent::AgentOptions;
use dsh_host::{Host, HostOptions};
use dsh_kernel::{Composer, Composition, Kernel};
use dsh_serve::{Bound, ServeConfig, TokenKind, TokenStore};

use crate::compose::registry;
use crate::exec::working_dir;
use crate::{ComposeArgs, Effort, Failure};

/// `dsh web`: this server plus the web page (its own file, a child module so it builds a
/// `ServeArgs`).
#[path = "web_cmd.rs"]
pub(crate) mod web;

/// The default listen address: loopback only.
const DEFAULT_LISTEN: &str = "127.0.0.1:7433";

/// `dsh serve`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct ServeArgs {
    #[command(subcommand)]
    token: Option<ServeCommand>,
    /// Listen on this TCP address (default 127.0.0.1:7433; port 0 picks one). A non-loopback
    /// address refuses to start until a token exists.
    #[arg(long, value_name = "ADDR", conflicts_with = "unix")]
    listen: Option<SocketAddr>,
    /// Listen on a unix socket instead (created owner-only).
    #[arg(long, value_name = "PATH")]
    unix: Option<PathBuf>,
    /// With --unix: exit (closing every session) after this long with no request or event
    /// stream open and no session working or waiting for an approval (`300ms`, `90s`, `5m`).
    /// Such a server asks no token (the socket's mode is the access control). The background
    /// server of `dsh exec --bg` runs with it.
    #[arg(long, value_name = "DURATION", requires = "unix", value_parser = crate::bg::server::parse_duration)]
    idle_exit: Option<std::time::Duration>,
    /// Another name clients may use in the `Host` header (besides the listen address,
    /// localhost, 127.0.0.1 and [::1]); repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_host: Vec<String>,
    #[command(flatten)]
    defaults: SessionDefaults,
}

/// What a server's new sessions get unless a client asks otherwise, and its composition
/// (`dsh serve` and `dsh web` alike).
#[derive(Debug, Args)]
pub(crate) struct SessionDefaults {
    /// Default model of new sessions.
    #[arg(long, value_name = "M")]
    model: Option<String>,
    /// Default provider route of new sessions.
    #[arg(long, value_name = "P", default_value = "deepseek-official")]
    provider: String,
    /// Default reasoning effort of new sessions.
    #[arg(long, value_enum)]
    effort: Option<Effort>,
    #[command(flatten)]
    compose: ComposeArgs,
    #[command(flatten)]
    sandbox: crate::sandbox_args::SandboxArgs,
}

#[derive(Debug, Subcommand)]
enum ServeCommand {
    /// Manage the server's bearer tokens ($DSH_HOME/serve-tokens.json, hashes only).
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create a token and print it (once: only its hash is stored).
    Create {
        /// A watch-only token: GET requests and event streams, no ops.
        #[arg(long)]
        read_only: bool,
        /// Its name (default: token-N).
        #[arg(long, value_name = "N")]
        name: Option<String>,
    },
    /// The tokens: name, kind, creation time (never the secret).
    List,
    /// Delete a token; a running server refuses it at once.
    Revoke {
        /// The token's name.
        name: String,
    },
}

fn token_store() -> TokenStore {
    TokenStore::new(crate::home::dsh_home().join("serve-tokens.json"))
}

fn token(cmd: TokenCommand) -> Result<u8, Failure> {
    let store = token_store();
    match cmd {
        TokenCommand::Create { read_only, name } => {
            let name = match name {
                Some(n) => n,
                None => {
                    let taken = store.list().map_err(Failure::run)?;
                    (1..)
                        .map(|i| format!("token-{i}"))
                        .find(|n| !taken.iter().any(|t| &t.name == n))
                        .unwrap_or_default()
                }
            };
            let kind = if read_only {
                TokenKind::ReadOnly
            } else {
                TokenKind::Full
            };
            let secret = store.create(&name, kind).map_err(Failure::usage)?;
            eprintln!(
                "token `{name}` ({}) created; it is shown once, store it now:",
                kind.as_str()
            );
            println!("{secret}");
        }
        TokenCommand::List => {
            for t in store.list().map_err(Failure::run)? {
                println!("{}\t{}\t{}", t.name, t.kind.as_str(), t.created);
            }
        }
        TokenCommand::Revoke { name } => {
            store.revoke(&name).map_err(Failure::usage)?;
            eprintln!("token `{name}` revoked");
        }
    }
    Ok(0)
}

/// SIGTERM or SIGINT.
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Runs `dsh serve`.
pub(crate) async fn run(args: ServeArgs) -> Result<u8, Failure> {
    run_with(args, None).await
}

/// Runs `dsh serve`, with the web front end when `web` is given (TCP only: it authenticates
/// every request itself, so the exposure check and serve's token guard are its own).
async fn run_with(args: ServeArgs, web: Option<web::Front>) -> Result<u8, Failure> {
    let ServeArgs {
        token: command,
        listen,
        unix,
        idle_exit,
        allow_host,
        defaults:
            SessionDefaults {
                model,
                provider,
                effort,
                mut compose,
                sandbox,
            },
    } = args;
    if let Some(ServeCommand::Token(cmd)) = command {
        return token(cmd);
    }
    let cwd = working_dir(None)?;
    compose.project_dir = Some(cwd.clone());
    let store = Arc::new(token_store());
    let mut config = ServeConfig::new(Bound::Unix);
    config.tokens = Some(store);
    config.allowed_hosts = allow_host.iter().map(|h| h.to_ascii_lowercase()).collect();
    let listen = match (&unix, listen) {
        (Some(_), _) => None,
        (None, Some(a)) => Some(a),
        (None, None) => Some(
            DEFAULT_LISTEN
                .parse::<SocketAddr>()
                .map_err(|e| Failure::usage(anyhow!("{e}")))?,
        ),
    };
    if let Some(addr) = listen {
        config.bound = Bound::Tcp(addr);
        if web.is_none() {
            dsh_serve::check_exposure(&config).map_err(Failure::usage)?;
        }
    }

    let registry = registry();
    let extra: Arc<dyn Fn(&mut Composition) + Send + Sync> =
        Arc::new(move |c: &mut Composition| sandbox.apply(c));
    let mut composition = crate::compose::compose(&compose, None, &registry)?;
    extra(&mut composition);
    let kernel = Kernel::new(registry.clone());
    let composer = Arc::new(tokio::sync::Mutex::new(Composer::new(kernel.root())));
    {
        let mut c = composer.lock().await;
        c.apply(&composition).await.map_err(Failure::usage)?;
        c.ready().await.map_err(Failure::usage)?;
    }
    let _watcher = crate::watch::watch(
        crate::home::user_file(),
        compose.clone(),
        extra,
        registry,
        composer.clone(),
        composition,
    );
    let result = serve(
        &kernel, config, listen, unix, idle_exit, provider, model, effort, cwd, web,
    )
    .await;
    kernel.dispose().await;
    result
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    kernel: &Kernel,
    config: ServeConfig,
    listen: Option<SocketAddr>,
    unix: Option<PathBuf>,
    idle_exit: Option<std::time::Duration>,
    provider: String,
    model: Option<String>,
    effort: Option<Effort>,
    cwd: PathBuf,
    web: Option<web::Front>,
) -> Result<u8, Failure> {
    let host = Host::new(
        kernel.root(),
        HostOptions {
            defaults: AgentOptions {
                provider: Some(provider),
                model,
                reasoning_effort: effort.map(Into::into),
                max_tokens: None,
                temperature: None,
                cwd,
            },
            answer_approvals: true,
        },
    )
    .map_err(|e| Failure::usage(anyhow!("{e}")))?;
    let forwarder = forwarder(kernel, &host).await?;
    let client = match &forwarder {
        Some(f) => Arc::clone(f) as Arc<dyn dsh_protocol::Client>,
        None => host.client(),
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let stopper = {
        let host = host.clone();
        let forwarder = forwarder.clone();
        tokio::spawn(async move {
            terminated().await;
            eprintln!("dsh serve: stopping (closing every open session)");
            // Stop accepting first, then close the sessions: their event streams end, so the
            // open connections finish.
            let _ = stop_tx.send(());
            if let Some(f) = &forwarder {
                f.stop().await;
            }
            host.shutdown().await;
        })
    };
    let shutdown = async move {
        let _ = stop_rx.await;
    };
    let served = match (listen, unix) {
        (Some(addr), _) if web.is_some() => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| Failure::usage(anyhow!("cannot listen on {addr}: {e}")))?;
            let front = web.ok_or_else(|| Failure::run(anyhow!("no web front end")))?;
            front.start(listener, client, config, shutdown)?
        }
        (Some(addr), _) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| Failure::usage(anyhow!("cannot listen on {addr}: {e}")))?;
            let bound = listener
                .local_addr()
                .map_err(|e| Failure::run(anyhow!("{e}")))?;
            println!("http://{bound}");
            eprintln!("dsh serve: listening on http://{bound} (API: /openapi.json)");
            tokio::spawn(dsh_serve::serve(listener, client, config, shutdown))
        }
        (None, Some(path)) => {
            let listener = bind_unix(&path)?;
            println!("unix:{}", path.display());
            eprintln!("dsh serve: listening on unix socket {}", path.display());
            match idle_exit {
                Some(idle) => tokio::spawn(crate::bg::serve_until_idle(
                    listener, client, config, idle, shutdown, path,
                )),
                None => tokio::spawn(dsh_serve::serve_unix(listener, client, config, shutdown)),
            }
        }
        (None, None) => return Err(Failure::usage(anyhow!("nothing to listen on"))),
    };
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let result = served.await;
    // Whatever ended the server, every session is closed (flushed) before the kernel goes.
    if let Some(f) = &forwarder {
        f.stop().await;
    }
    host.shutdown().await;
    stopper.abort();
    match result {
        Ok(Ok(())) => Ok(0),
        Ok(Err(e)) => Err(Failure::run(anyhow!("{e}"))),
        Err(e) => Err(Failure::run(anyhow!("the server task failed: {e}"))),
    }
}

/// With a PostgreSQL store (`--store`): the client that forwards ops for sessions another
/// server owns to it, and follows their events in the store, projected by this host (issue 39;
/// `docs/fleet.md`).
async fn forwarder(
    kernel: &Kernel,
    host: &Host,
) -> Result<Option<Arc<dsh_session_postgres::Forwarder>>, Failure> {
    use dsh_session_postgres::{PgHandle, StoredProjection};
    /// The host's view of a stored session, as the forwarder projects it.
    struct View(dsh_host::StoredView);
    impl StoredProjection for View {
        fn project(&mut self, event: &dsh_session::Event) -> Vec<dsh_protocol::EventMsg> {
            self.0.project(event)
        }
        fn snapshot(&self) -> dsh_protocol::Snapshot {
            self.0.snapshot()
        }
    }
    let root = kernel.root();
    let Some(handle) = root.get::<PgHandle>() else {
        return Ok(None);
    };
    let resolver: dsh_session_postgres::forward::StoreResolver =
        Arc::new(move || root.get::<PgHandle>().map(|h| Arc::clone(&h.store)));
    let viewer = host.clone();
    let projections: dsh_session_postgres::Projections =
        Arc::new(move |header| Box::new(View(viewer.stored_view(header))));
    dsh_session_postgres::Forwarder::start(
        host.client(),
        resolver,
        handle.forward.clone(),
        projections,
    )
    .await
    .map(Some)
    .map_err(|e| Failure::run(anyhow!("cannot forward through the session store: {e}")))
}

/// A unix listener at `path`, owner-only; a stale socket (nobody answers) is replaced.
fn bind_unix(path: &std::path::Path) -> Result<tokio::net::UnixListener, Failure> {
    use std::os::unix::fs::PermissionsExt;
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(Failure::usage(anyhow!(
                "{} is in use by a running server",
                path.display()
            )));
        }
        let _ = std::fs::remove_file(path);
    }
    let listener = tokio::net::UnixListener::bind(path)
        .map_err(|e| Failure::usage(anyhow!("cannot listen on {}: {e}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Failure::run(anyhow!("cannot restrict {}: {e}", path.display())))?;
    Ok(listener)
}
