//! The routes of the page: `/` (the app), `/assets/{file}`, `/login`, `/logout`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use dsh_protocol::ErrorCode;

use crate::Access;
use crate::assets::{self, INDEX};
use crate::auth::{Auth, CSRF_HEADER, LoginRefused, refusal};

pub(crate) fn routes(auth: Arc<Auth>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/assets/{file}", get(asset))
        .route("/login", get(login))
        .route("/logout", post(logout))
        .with_state(auth)
}

/// What the login page says above its form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LoginNote {
    None,
    /// A link that was used, expired, or never existed.
    Refused,
    /// The cookie is not valid any more.
    Expired,
    /// The token file cannot be read.
    Unreadable,
    /// Signed out.
    SignedOut,
}

const LOGIN_HEAD: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<link rel=\"icon\" href=\"data:,\"><title>dsh: sign in</title>\
<link rel=\"stylesheet\" href=\"/assets/app.css\"></head><body class=\"login\"><main>\
<h1>dsh</h1>";

/// The sign-in page: a note and a form for a login link's secret or a token. Nothing from the
/// request is echoed.
pub(crate) fn login_page(status: StatusCode, note: LoginNote, _auth: &Auth) -> Response {
    let text = match note {
        LoginNote::None => {
            "Open the login link that <code>dsh web</code> printed, or paste a \
                            token (<code>dsh serve token create</code>)."
        }
        LoginNote::Refused => {
            "This login link was used already, has expired, or is not valid. \
                               Login links work once: run <code>dsh web</code> again for a new \
                               one, or paste a token."
        }
        LoginNote::Expired => {
            "Your sign-in is not valid any more (the server restarted or its \
                               token was revoked). Sign in again."
        }
        LoginNote::Unreadable => "The server cannot read its token file; see its log.",
        LoginNote::SignedOut => "Signed out.",
    };
    let body = format!(
        "{LOGIN_HEAD}<p id=\"login-note\" role=\"status\">{text}</p>\
<form method=\"get\" action=\"/login\"><label for=\"token\">Token</label>\
<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required>\
<button type=\"submit\">Sign in</button></form></main></body></html>"
    );
    html(status, body)
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

async fn index(req: axum::extract::Request) -> Response {
    // The login layer puts the access on every request it lets through to the page.
    let access = req
        .extensions()
        .get::<Access>()
        .copied()
        .unwrap_or(Access::ReadOnly);
    html(StatusCode::OK, INDEX.replace("{{ACCESS}}", access.as_str()))
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let Some(a) = assets::find(&file) else {
        return refusal(
            StatusCode::NOT_FOUND,
            ErrorCode::InvalidRequest,
            "no such asset",
        );
    };
    let etag = assets::etag(a);
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == etag);
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(header::CONTENT_TYPE, a.content_type)],
            a.body.as_bytes().to_vec(),
        )
            .into_response()
    };
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    response
}

async fn login(
    State(auth): State<Arc<Auth>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let Some(token) = query
        .get("token")
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
    else {
        return login_page(StatusCode::OK, LoginNote::None, &auth);
    };
    match auth.sign_in(token) {
        Ok((cookie, access)) => {
            tracing::info!("dsh web: a browser signed in ({})", access.as_str());
            // A page, not a redirect: the cookie is SameSite=Strict, and a navigation that
            // another site started would not carry it through a redirect.
            let body = format!(
                "{}<p id=\"login-note\" role=\"status\">Signed in{}. \
<a id=\"continue\" href=\"/\">Continue</a></p></main></body></html>",
                LOGIN_HEAD.replace(
                    "<title>",
                    "<meta http-equiv=\"refresh\" content=\"0;url=/\"><title>"
                ),
                if access == Access::ReadOnly {
                    " (watch only)"
                } else {
                    ""
                }
            );
            let mut r = html(StatusCode::OK, body);
            if let Ok(v) = HeaderValue::from_str(&auth.set_cookie(&cookie)) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err(LoginRefused::Unknown) => {
            login_page(StatusCode::UNAUTHORIZED, LoginNote::Refused, &auth)
        }
        Err(LoginRefused::Unreadable) => login_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            LoginNote::Unreadable,
            &auth,
        ),
    }
}

async fn logout(State(auth): State<Arc<Auth>>, headers: HeaderMap) -> Response {
    // The login layer let this through signed in; a cookie request also carried the header.
    if !headers.contains_key(CSRF_HEADER) && headers.get(header::AUTHORIZATION).is_none() {
        return refusal(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "sign out from the page",
        );
    }
    if let Some(c) = auth.cookie(&headers) {
        auth.sign_out(c);
    }
    let mut r = login_page(StatusCode::OK, LoginNote::SignedOut, &auth);
    if let Ok(v) = HeaderValue::from_str(&auth.clear_cookie()) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}
