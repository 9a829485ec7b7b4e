//! Every refusal answers its status with a typed `ProtocolError` body.

use std::sync::Arc;

use dsh_approval::ApprovalPolicy;
use dsh_serve::{TokenKind, TokenStore};
use serde_json::{Value, json};

use crate::common::*;

struct Answer {
    status: u16,
    body: Value,
    www_authenticate: Option<String>,
}

async fn send(req: reqwest::RequestBuilder) -> Answer {
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let www_authenticate = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = r.text().await.unwrap();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("status {status}: not JSON ({e}): {text:?}"));
    Answer {
        status,
        body,
        www_authenticate,
    }
}

fn assert_refused(a: &Answer, status: u16, code: &str) {
    assert_eq!(a.status, status, "{}", a.body);
    assert_eq!(a.body["code"], code, "{}", a.body);
    assert!(a.body["message"].as_str().is_some_and(|m| !m.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_hosts_origins_and_malformed_requests_are_refused_with_typed_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(TokenStore::new(dir.path().join("serve-tokens.json")));
    let full = store.create("full", TokenKind::Full).unwrap();
    let watch = store.create("watch", TokenKind::ReadOnly).unwrap();
    let s = Server::start_with(
        vec![],
        ApprovalPolicy::Never,
        Opts {
            tokens: Some(store.clone()),
            max_body: Some(64 * 1024),
        },
    )
    .await;
    let http = &s.http;
    let bearer = |t: &str| format!("Bearer {t}");
    let cwd = s.h.dir().display().to_string();

    // Health needs no token.
    let a = send(http.get(s.url("/v1/health"))).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body["status"], "ok");
    // No token, a wrong token: 401 with a challenge.
    let a = send(http.get(s.url("/v1/sessions"))).await;
    assert_refused(&a, 401, "UNAUTHORIZED");
    assert_eq!(a.www_authenticate.as_deref(), Some("Bearer"));
    let a = send(
        http.get(s.url("/v1/sessions"))
            .header("authorization", bearer("dshs_wrong")),
    )
    .await;
    assert_refused(&a, 401, "UNAUTHORIZED");
    // The full token opens a session.
    let a = send(
        http.post(s.url("/v1/sessions"))
            .header("authorization", bearer(&full))
            .json(&json!({"cwd": cwd})),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let id = a.body["id"].as_str().unwrap().to_owned();
    // The read-only token watches but cannot send.
    let a = send(
        http.get(s.url(&format!("/v1/sessions/{id}")))
            .header("authorization", bearer(&watch)),
    )
    .await;
    assert_eq!(a.status, 200);
    let a = send(
        http.post(s.url(&format!("/v1/sessions/{id}/ops")))
            .header("authorization", bearer(&watch))
            .json(&json!({"type": "interrupt"})),
    )
    .await;
    assert_refused(&a, 403, "FORBIDDEN");
    let a = send(
        http.post(s.url("/v1/sessions"))
            .header("authorization", bearer(&watch))
            .json(&json!({"cwd": cwd})),
    )
    .await;
    assert_refused(&a, 403, "FORBIDDEN");
    let auth = bearer(&full);
    // A foreign Origin, a foreign Host (DNS rebinding).
    let a = send(
        http.get(s.url("/v1/sessions"))
            .header("authorization", &auth)
            .header("origin", "https://evil.example"),
    )
    .await;
    assert_refused(&a, 403, "FORBIDDEN");
    let a = send(
        http.get(s.url("/v1/sessions"))
            .header("authorization", &auth)
            .header("host", format!("evil.example:{}", s.addr.port())),
    )
    .await;
    assert_refused(&a, 403, "FORBIDDEN");
    // The same origin is fine.
    let a = send(
        http.get(s.url("/v1/sessions"))
            .header("authorization", &auth)
            .header("origin", format!("http://{}", s.addr)),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let ops = s.url(&format!("/v1/sessions/{id}/ops"));
    // An oversized body.
    let big = json!({"type": "submit", "text": "x".repeat(100 * 1024)});
    let a = send(http.post(&ops).header("authorization", &auth).json(&big)).await;
    assert_refused(&a, 413, "INVALID_REQUEST");
    // Malformed JSON, an unknown op, a wrong content type, a wrong method.
    let a = send(
        http.post(&ops)
            .header("authorization", &auth)
            .header("content-type", "application/json")
            .body("{\"type\": \"submit\", "),
    )
    .await;
    assert_refused(&a, 400, "INVALID_REQUEST");
    let a = send(
        http.post(&ops)
            .header("authorization", &auth)
            .json(&json!({"type": "selfDestruct"})),
    )
    .await;
    assert_refused(&a, 400, "INVALID_REQUEST");
    let a = send(
        http.post(&ops)
            .header("authorization", &auth)
            .header("content-type", "text/plain")
            .body("{\"type\": \"interrupt\"}"),
    )
    .await;
    assert_refused(&a, 415, "INVALID_REQUEST");
    let a = send(http.put(&ops).header("authorization", &auth)).await;
    assert_refused(&a, 405, "INVALID_REQUEST");
    let a = send(
        http.get(s.url("/v2/nothing"))
            .header("authorization", &auth),
    )
    .await;
    assert_refused(&a, 404, "INVALID_REQUEST");
    // Unknown sessions.
    for req in [
        http.get(s.url("/v1/sessions/no-such-session")),
        http.get(s.url("/v1/sessions/no-such-session/events")),
        http.delete(s.url("/v1/sessions/no-such-session")),
        http.post(s.url("/v1/sessions/no-such-session/ops"))
            .json(&json!({"type": "interrupt"})),
    ] {
        let a = send(req.header("authorization", &auth)).await;
        assert_refused(&a, 404, "SESSION_NOT_FOUND");
    }
    // Bad query values and ids.
    let a = send(
        http.get(s.url("/v1/sessions?limit=-1"))
            .header("authorization", &auth),
    )
    .await;
    assert_refused(&a, 400, "INVALID_REQUEST");
    let a = send(
        http.get(s.url(&format!("/v1/sessions/{id}/events")))
            .header("authorization", &auth)
            .header("last-event-id", "yesterday"),
    )
    .await;
    assert_refused(&a, 400, "INVALID_REQUEST");
    let a = send(
        http.post(s.url("/v1/sessions"))
            .header("authorization", &auth)
            .json(&json!({"cwd": "relative/dir"})),
    )
    .await;
    assert_refused(&a, 400, "INVALID_REQUEST");
    // A revoked token stops working at once, without a restart.
    store.revoke("full").unwrap();
    let a = send(
        http.get(s.url("/v1/sessions"))
            .header("authorization", &auth),
    )
    .await;
    assert_refused(&a, 401, "UNAUTHORIZED");
    s.stop().await;
}

#[test]
fn a_non_loopback_listener_refuses_to_start_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(TokenStore::new(dir.path().join("serve-tokens.json")));
    let addr: std::net::SocketAddr = "0.0.0.0:8080".parse().unwrap();
    let mut config = dsh_serve::ServeConfig::new(dsh_serve::Bound::Tcp(addr));
    config.tokens = Some(store.clone());
    assert!(matches!(
        dsh_serve::check_exposure(&config),
        Err(dsh_serve::ServeError::NoToken(_))
    ));
    store.create("remote", TokenKind::Full).unwrap();
    dsh_serve::check_exposure(&config).unwrap();
    let local =
        dsh_serve::ServeConfig::new(dsh_serve::Bound::Tcp("127.0.0.1:8080".parse().unwrap()));
    dsh_serve::check_exposure(&local).unwrap();
}
