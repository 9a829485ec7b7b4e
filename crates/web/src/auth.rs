//! The login layer: one-time links and stored tokens sign a browser in (a random cookie secret,
//! only its hash kept, in memory); every request but the public ones is authenticated by the
//! cookie or a bearer token; cookie requests that change something must carry [`CSRF_HEADER`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dsh_protocol::{ErrorCode, ProtocolError};
use parking_lot::Mutex;
use ring::digest;
use ring::rand::{SecureRandom, SystemRandom};

use crate::{Access, TokenCheck, WebConfig, WebError};

/// The header the page sends with every request that changes something. A cross-site page
/// cannot set it without a CORS preflight, which this server never grants.
pub const CSRF_HEADER: &str = "x-dsh-web";

/// The Content-Security-Policy of every answer: scripts, styles and connections from this
/// origin only; no inline script, no plugins, no framing.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; manifest-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

type Digest = [u8; 32];

fn sha256(secret: &str) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, secret.as_bytes()).as_ref());
    out
}

fn random_secret(prefix: &str) -> Result<String, WebError> {
    let mut raw = [0u8; 32];
    SystemRandom::new()
        .fill(&mut raw)
        .map_err(|_| WebError::Random)?;
    let mut s = String::with_capacity(prefix.len() + 64);
    s.push_str(prefix);
    for b in raw {
        use std::fmt::Write;
        let _ = write!(s, "{b:02x}");
    }
    Ok(s)
}

/// A one-time login link not used yet.
struct Login {
    access: Access,
    expires: Instant,
}

/// A signed-in browser.
struct Signed {
    access: Access,
    /// The stored token it signed in with: checked again on every request, so a revoked token
    /// signs its browsers out.
    token: Option<String>,
    since: Instant,
}

/// The state the routes and the layer share.
pub(crate) struct Auth {
    pub(crate) config: WebConfig,
    tokens: Option<Arc<dyn TokenCheck>>,
    logins: Mutex<HashMap<Digest, Login>>,
    signed: Mutex<HashMap<Digest, Signed>>,
}

/// Why a login failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoginRefused {
    /// Not a live one-time link nor a stored token.
    Unknown,
    /// The token file could not be read.
    Unreadable,
}

impl Auth {
    pub(crate) fn new(config: WebConfig, tokens: Option<Arc<dyn TokenCheck>>) -> Self {
        Auth {
            config,
            tokens,
            logins: Mutex::new(HashMap::new()),
            signed: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn mint_login(&self, access: Access) -> Result<String, WebError> {
        let secret = random_secret("dshl_")?;
        let now = Instant::now();
        let mut logins = self.logins.lock();
        logins.retain(|_, l| l.expires > now);
        logins.insert(
            sha256(&secret),
            Login {
                access,
                expires: now + self.config.login_ttl,
            },
        );
        Ok(secret)
    }

    fn stored(&self, secret: &str) -> Result<Option<Access>, LoginRefused> {
        match &self.tokens {
            None => Ok(None),
            Some(t) => t.check(secret).map_err(|e| {
                tracing::warn!("dsh web: {e}");
                LoginRefused::Unreadable
            }),
        }
    }

    /// Signs a browser in with a one-time secret (consumed) or a stored token: the new cookie
    /// secret and what it may do.
    pub(crate) fn sign_in(&self, presented: &str) -> Result<(String, Access), LoginRefused> {
        let now = Instant::now();
        let one_time = {
            let mut logins = self.logins.lock();
            logins.retain(|_, l| l.expires > now);
            logins.remove(&sha256(presented)).map(|l| l.access)
        };
        let (access, token) = match one_time {
            Some(a) => (a, None),
            None => match self.stored(presented)? {
                Some(a) => (a, Some(presented.to_owned())),
                None => return Err(LoginRefused::Unknown),
            },
        };
        let cookie = random_secret("dshc_").map_err(|_| LoginRefused::Unreadable)?;
        let mut signed = self.signed.lock();
        if signed.len() >= self.config.max_sessions.max(1)
            && let Some(oldest) = signed.iter().min_by_key(|(_, s)| s.since).map(|(k, _)| *k)
        {
            signed.remove(&oldest);
        }
        signed.insert(
            sha256(&cookie),
            Signed {
                access,
                token,
                since: now,
            },
        );
        Ok((cookie, access))
    }

    /// Forgets a signed-in browser.
    pub(crate) fn sign_out(&self, cookie: &str) {
        self.signed.lock().remove(&sha256(cookie));
    }

    /// What the cookie's browser may do (`None`: not signed in, or its token was revoked).
    fn cookie_access(&self, cookie: &str) -> Option<Access> {
        let key = sha256(cookie);
        let (access, token) = {
            let signed = self.signed.lock();
            let s = signed.get(&key)?;
            (s.access, s.token.clone())
        };
        match token {
            None => Some(access),
            Some(t) => match self.stored(&t) {
                Ok(Some(a)) => Some(a),
                _ => {
                    self.signed.lock().remove(&key);
                    None
                }
            },
        }
    }

    /// The value of this server's cookie in a request.
    pub(crate) fn cookie<'a>(&self, headers: &'a HeaderMap) -> Option<&'a str> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == self.config.cookie_name)
            .map(|(_, value)| value.trim())
    }

    /// `Set-Cookie` for a signed-in browser: HttpOnly, SameSite=Strict, the whole site.
    pub(crate) fn set_cookie(&self, secret: &str) -> String {
        format!(
            "{}={secret}; Path=/; HttpOnly; SameSite=Strict",
            self.config.cookie_name
        )
    }

    /// `Set-Cookie` that removes it.
    pub(crate) fn clear_cookie(&self) -> String {
        format!(
            "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
            self.config.cookie_name
        )
    }
}

/// Paths anyone may fetch: the assets (nothing secret), the login, the health check.
fn public(path: &str) -> bool {
    path.starts_with("/assets/")
        || path == "/login"
        || path == "/v1/health"
        || path == "/favicon.ico"
}

/// Paths a browser navigates to (refused with the login page rather than JSON).
fn page(path: &str) -> bool {
    path == "/"
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// A refusal with a `ProtocolError` body, as the API answers.
pub(crate) fn refusal(status: StatusCode, code: ErrorCode, message: &str) -> Response {
    let body = serde_json::to_string(&ProtocolError::new(code, message)).unwrap_or_default();
    let mut r = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.into_bytes(),
    )
        .into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

/// How a request is authenticated.
enum Credential {
    Bearer(Access),
    Cookie(Access),
}

/// Why a request is not.
enum Refused {
    NoCredential,
    BadBearer,
    BadCookie,
    Unreadable,
}

fn authenticate(auth: &Auth, headers: &HeaderMap) -> Result<Credential, Refused> {
    if let Some(secret) = bearer(headers) {
        return match auth.stored(secret) {
            Ok(Some(a)) => Ok(Credential::Bearer(a)),
            Ok(None) => Err(Refused::BadBearer),
            Err(_) => Err(Refused::Unreadable),
        };
    }
    match auth.cookie(headers) {
        Some(c) => auth
            .cookie_access(c)
            .map(Credential::Cookie)
            .ok_or(Refused::BadCookie),
        None => Err(Refused::NoCredential),
    }
}

fn security_headers(response: &mut Response) {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

fn changes_something(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD)
}

/// The middleware around the whole application.
pub(crate) async fn layer(State(auth): State<Arc<Auth>>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    if public(&path) {
        let mut response = next.run(req).await;
        security_headers(&mut response);
        return response;
    }
    let mutating = changes_something(req.method());
    let result = match authenticate(&auth, req.headers()) {
        Ok(Credential::Cookie(_)) if mutating && !req.headers().contains_key(CSRF_HEADER) => {
            Err(refusal(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                "a request signed in by the web cookie that changes something must come from \
                 the page (the x-dsh-web header is missing: cross-site request refused)",
            ))
        }
        Ok(Credential::Cookie(Access::ReadOnly) | Credential::Bearer(Access::ReadOnly))
            if mutating && path != "/logout" =>
        {
            Err(refusal(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                "this sign-in is read-only: it may watch sessions, not change them",
            ))
        }
        Ok(Credential::Cookie(a) | Credential::Bearer(a)) => Ok(a),
        Err(why) if page(&path) => {
            let note = match why {
                Refused::BadCookie => crate::pages::LoginNote::Expired,
                Refused::Unreadable => crate::pages::LoginNote::Unreadable,
                _ => crate::pages::LoginNote::None,
            };
            Err(crate::pages::login_page(
                StatusCode::UNAUTHORIZED,
                note,
                &auth,
            ))
        }
        Err(why) => {
            let (status, code, message) = match why {
                Refused::NoCredential => (
                    StatusCode::UNAUTHORIZED,
                    ErrorCode::Unauthorized,
                    "sign in first: open the login link `dsh web` printed, or send \
                     `Authorization: Bearer <token>` (create one with `dsh serve token create`)",
                ),
                Refused::BadBearer => (
                    StatusCode::UNAUTHORIZED,
                    ErrorCode::Unauthorized,
                    "the token is not valid (revoked?)",
                ),
                Refused::BadCookie => (
                    StatusCode::UNAUTHORIZED,
                    ErrorCode::Unauthorized,
                    "the web sign-in is not valid any more (server restarted or token \
                     revoked): sign in again",
                ),
                Refused::Unreadable => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    ErrorCode::Internal,
                    "the token file cannot be read",
                ),
            };
            Err(refusal(status, code, message))
        }
    };
    let mut response = match result {
        Ok(access) => {
            req.extensions_mut().insert(access);
            next.run(req).await
        }
        Err(r) => r,
    };
    security_headers(&mut response);
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn auth() -> Auth {
        Auth::new(WebConfig::for_port(1), None)
    }

    #[test]
    fn a_login_link_works_once() {
        let a = auth();
        let link = a.mint_login(Access::ReadOnly).unwrap();
        let (cookie, access) = a.sign_in(&link).unwrap();
        assert_eq!(access, Access::ReadOnly);
        assert_eq!(a.cookie_access(&cookie), Some(Access::ReadOnly));
        assert_eq!(a.sign_in(&link).unwrap_err(), LoginRefused::Unknown);
        a.sign_out(&cookie);
        assert_eq!(a.cookie_access(&cookie), None);
    }

    #[test]
    fn an_expired_link_is_refused() {
        let mut config = WebConfig::for_port(1);
        config.login_ttl = std::time::Duration::ZERO;
        let a = Auth::new(config, None);
        let link = a.mint_login(Access::Full).unwrap();
        assert_eq!(a.sign_in(&link).unwrap_err(), LoginRefused::Unknown);
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let a = auth();
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("other=1; dsh_web_1=dshc_ab ; x=y"),
        );
        assert_eq!(a.cookie(&h), Some("dshc_ab"));
        assert!(a.set_cookie("s").contains("HttpOnly; SameSite=Strict"));
    }

    #[test]
    fn the_oldest_browser_is_forgotten_past_the_bound() {
        let mut config = WebConfig::for_port(1);
        config.max_sessions = 1;
        let a = Auth::new(config, None);
        let (first, _) = a.sign_in(&a.mint_login(Access::Full).unwrap()).unwrap();
        let (second, _) = a.sign_in(&a.mint_login(Access::Full).unwrap()).unwrap();
        assert_eq!(a.cookie_access(&first), None);
        assert_eq!(a.cookie_access(&second), Some(Access::Full));
    }
}
