//! `dsh-web`: the browser front end of `dsh serve`.
//!
//! The page is one more client of the HTTP API (`docs/http-api.md`): it lists sessions, opens
//! them, sends ops and follows their event streams, with no engine of its own. This crate holds
//! the page and its assets (embedded in the binary: nothing is built at install time and no
//! Node.js runs) and the login: a one-time link ([`Web::login_link`]) or a stored token sets an
//! HttpOnly, `SameSite=Strict` cookie; a request authenticated by the cookie that changes
//! something must also carry the header the page sets ([`CSRF_HEADER`]), which no other site
//! can send without a CORS preflight the server never grants. A read-only token gives a
//! watch-only page.
//!
//! The `dsh` binary composes it: `dsh_serve::router_with(client, config, web.routes())` merges
//! the page beside the API (behind serve's `Host`/`Origin` guard) and [`Web::protect`] wraps the
//! whole application in the login layer, which then authenticates every request (a bearer token
//! still works for programs).

mod assets;
mod auth;
mod pages;

use std::sync::Arc;
use std::time::Duration;

pub use assets::{ASSETS, Asset};
pub use auth::CSRF_HEADER;

/// What a browser (or a bearer token) may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Everything the API offers.
    Full,
    /// Watch only: `GET` requests and event streams.
    ReadOnly,
}

impl Access {
    /// The spelling the page reads (`full`, `read-only`).
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Full => "full",
            Access::ReadOnly => "read-only",
        }
    }
}

/// A stored token could not be checked (the token file is unreadable or malformed).
#[derive(Debug, thiserror::Error)]
#[error("the token file cannot be read: {0}")]
pub struct TokenCheckError(#[source] pub Box<dyn std::error::Error + Send + Sync>);

/// The server's stored bearer tokens (`dsh serve token create`), as the login layer sees them.
pub trait TokenCheck: Send + Sync + 'static {
    /// What `secret` may do, or `None` when it is not a stored token.
    fn check(&self, secret: &str) -> Result<Option<Access>, TokenCheckError>;
}

/// Why a login link cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The system's random source failed.
    #[error("the system random source failed")]
    Random,
}

/// How the web front end behaves.
#[derive(Clone, Debug)]
pub struct WebConfig {
    /// The login cookie's name (cookies are not separated by port: give each server its own).
    pub cookie_name: String,
    /// How long a one-time login link stays usable.
    pub login_ttl: Duration,
    /// At most this many signed-in browsers are remembered (the oldest is forgotten first).
    pub max_sessions: usize,
}

impl WebConfig {
    /// Defaults for a server listening on `port`: the cookie `dsh_web_PORT`, links usable for
    /// 15 minutes, 256 signed-in browsers.
    pub fn for_port(port: u16) -> Self {
        WebConfig {
            cookie_name: format!("dsh_web_{port}"),
            login_ttl: Duration::from_secs(15 * 60),
            max_sessions: 256,
        }
    }
}

/// The web front end: its routes and its login layer, sharing the signed-in browsers.
#[derive(Clone)]
pub struct Web {
    inner: Arc<auth::Auth>,
}

impl std::fmt::Debug for Web {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Web").finish_non_exhaustive()
    }
}

impl Web {
    /// A front end checking bearer tokens and stored-token logins against `tokens` (`None`: only
    /// one-time links sign in).
    pub fn new(config: WebConfig, tokens: Option<Arc<dyn TokenCheck>>) -> Self {
        Web {
            inner: Arc::new(auth::Auth::new(config, tokens)),
        }
    }

    /// A new one-time login secret of this access (usable once, within the configured time):
    /// open `/login?token=SECRET`.
    pub fn login_link(&self, access: Access) -> Result<String, WebError> {
        self.inner.mint_login(access)
    }

    /// The page, its assets and the login routes (`/`, `/assets/{file}`, `/login`, `/logout`),
    /// to merge beside the API (no fallback of their own).
    pub fn routes(&self) -> axum::Router {
        pages::routes(self.inner.clone())
    }

    /// Wraps the whole application (API and page) in the login layer and the security headers:
    /// every request but the assets, `/login` and `/v1/health` needs the cookie or a bearer
    /// token.
    pub fn protect(&self, app: axum::Router) -> axum::Router {
        app.layer(axum::middleware::from_fn_with_state(
            self.inner.clone(),
            auth::layer,
        ))
    }
}
