//! The checks every request passes before a handler: `Host` (DNS rebinding), `Origin`
//! (cross-site requests), then the bearer token (all but `/v1/health`) and its kind.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dsh_protocol::ErrorCode;

use crate::AppState;
use crate::error::ApiError;
use crate::tokens::{Access, TokenKind};

/// Where the server listens, as far as the `Host` check is concerned.
#[derive(Clone, Debug)]
pub enum Bound {
    /// A TCP address.
    Tcp(std::net::SocketAddr),
    /// A unix socket: no browser reaches it, so any `Host` is accepted.
    Unix,
}

/// The host part of a `Host` header value (`[::1]:80` → `::1`, `a.b:80` → `a.b`).
fn host_name(value: &str) -> &str {
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match value.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => value,
    }
}

/// Whether a `Host` header value names this server.
pub(crate) fn host_allowed(state: &AppState, value: &str) -> bool {
    let name = host_name(value).to_ascii_lowercase();
    match &state.config.bound {
        Bound::Unix => true,
        Bound::Tcp(addr) => {
            if matches!(name.as_str(), "localhost" | "127.0.0.1" | "::1") {
                return true;
            }
            if state.config.allowed_hosts.contains(&name) {
                return true;
            }
            match name.parse::<IpAddr>() {
                Ok(ip) if ip == addr.ip() => true,
                // A wildcard listener has no one name: any address literal of the machine
                // may be used (a token is required there anyway).
                Ok(_) => addr.ip().is_unspecified(),
                Err(_) => false,
            }
        }
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

fn check(state: &AppState, req: &Request) -> Result<(), ApiError> {
    let headers = req.headers();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let forbidden = |m: String| ApiError::new(ErrorCode::Forbidden, m);
    match host {
        Some(h) if host_allowed(state, h) => {}
        Some(h) => {
            return Err(forbidden(format!(
                "Host `{h}` does not name this server (DNS rebinding refused); \
                 add it with --allow-host"
            )));
        }
        None if matches!(state.config.bound, Bound::Unix) => {}
        None => return Err(forbidden("a Host header is required".into())),
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("null");
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        let same = match (authority, host) {
            (Some(a), Some(h)) => a.eq_ignore_ascii_case(h),
            (Some(a), None) => host_allowed(state, a),
            _ => false,
        };
        if !same {
            return Err(forbidden(format!(
                "cross-site request refused: Origin `{origin}` is not this server"
            )));
        }
    }
    if req.uri().path() == "/v1/health" {
        return Ok(());
    }
    let Some(tokens) = &state.config.tokens else {
        return Ok(());
    };
    let access = tokens.check(bearer(headers)).map_err(|e| {
        ApiError::new(
            ErrorCode::Internal,
            format!("the token file cannot be read: {e}"),
        )
    })?;
    let unauthorized = |m: &str| ApiError::new(ErrorCode::Unauthorized, m);
    match access {
        Access::Open | Access::Token(TokenKind::Full) => Ok(()),
        Access::Token(TokenKind::ReadOnly) => {
            if matches!(*req.method(), Method::GET | Method::HEAD) {
                Ok(())
            } else {
                Err(forbidden(
                    "this token is read-only: it may watch sessions, not change them".into(),
                ))
            }
        }
        Access::Missing => Err(unauthorized(
            "a token is required: send `Authorization: Bearer <token>` \
             (create one with `dsh serve token create`)",
        )),
        Access::Invalid => Err(unauthorized("the token is not valid (revoked?)")),
    }
}

/// The middleware.
pub(crate) async fn guard(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    match check(&state, &req) {
        Ok(()) => next.run(req).await,
        Err(e) => {
            let mut response = e.into_response();
            if response.status() == axum::http::StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
            }
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::host_name;

    #[test]
    fn host_names() {
        assert_eq!(host_name("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_name("[::1]:8080"), "::1");
        assert_eq!(host_name("localhost"), "localhost");
        assert_eq!(host_name("evil.example:80"), "evil.example");
    }
}
