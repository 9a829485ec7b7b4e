//! The `serve_request` target: an HTTP request from the network through `dsh serve`'s whole
//! router (guards, tokens, path, query and body decoding, the handlers) over a real in-process
//! host with a scripted model.
//!
//! Input layout: the first byte picks the method and which credentials to add (a valid `Host`, a
//! full or a read-only bearer token); the bytes up to the first `\n` are the path and query
//! (`{S}` stands for the id of a session that exists); the lines up to an empty line are
//! headers (`name: value`, the invalid ones dropped); the rest is the body.
//!
//! Properties: no panic; never a 5xx (a hostile request is the client's fault); every error
//! answer is a typed JSON error body (`{"code": …, "message": …}`).

use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Method, Request, header};
use dsh_serve::{Bound, ServeConfig, TokenKind, TokenStore};
use dsh_test_harness::TestHarness;
use tower::ServiceExt;

/// The largest body the fixture's server accepts (small, so the fuzzer reaches the bound).
const MAX_BODY: usize = 4096;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    _host: dsh_host::Host,
    router: axum::Router,
    harness: TestHarness,
    session: String,
    full: String,
    read_only: String,
    _dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(build)
}

/// Setup failures are the fixture's, not findings: they panic with the step named.
#[allow(clippy::expect_used)]
fn build() -> Fixture {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (router, host, harness, session, full, read_only) = runtime.block_on(async {
        let harness = TestHarness::builder().on_disk().build().await;
        let host = dsh_host::Host::new(
            harness.root(),
            dsh_host::HostOptions {
                defaults: harness.options(),
                answer_approvals: true,
            },
        )
        .expect("a host over the harness");
        let client = host.client();
        let summary = client
            .open(dsh_protocol::OpenSession::Create {
                session_id: None,
                options: Default::default(),
                prompt: None,
            })
            .await
            .expect("a session");
        let tokens = TokenStore::new(dir.path().join("serve-tokens.json"));
        let full = tokens.create("fuzz", TokenKind::Full).expect("a token");
        let read_only = tokens
            .create("fuzz-watch", TokenKind::ReadOnly)
            .expect("a read-only token");
        let mut config = ServeConfig::new(Bound::Tcp(([127, 0, 0, 1], 7777).into()));
        config.tokens = Some(Arc::new(tokens));
        config.max_body = MAX_BODY;
        let router = dsh_serve::router(client, config);
        (router, host, harness, summary.id, full, read_only)
    });
    Fixture {
        runtime,
        _host: host,
        router,
        harness,
        session,
        full,
        read_only,
        _dir: dir,
    }
}

const METHODS: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::DELETE,
    Method::PUT,
    Method::OPTIONS,
];

/// The target.
pub fn serve_request(data: &[u8]) {
    serve_request_status(data);
}

/// The target, answering the response's status (`None` when the input is no HTTP request),
/// so a test can check that the seeds reach the handlers they are meant for.
pub fn serve_request_status(data: &[u8]) -> Option<u16> {
    let (&flags, rest) = data.split_first()?;
    let fx = fixture();
    let (line, rest) = split_line(rest);
    let path = std::str::from_utf8(line).ok()?;
    let path = path.replace("{S}", &fx.session);
    let mut builder = Request::builder()
        .method(METHODS[usize::from(flags & 7) % METHODS.len()].clone())
        .uri(path.as_str());
    if flags & 8 != 0 {
        builder = builder.header(header::HOST, "127.0.0.1:7777");
    }
    if flags & 16 != 0 {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {}", fx.full));
    } else if flags & 32 != 0 {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {}", fx.read_only));
    }
    if flags & 64 != 0 {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
    }
    let mut body = rest;
    loop {
        let (line, after) = split_line(body);
        body = after;
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) else {
            continue;
        };
        builder = builder.header(name, value);
    }
    let request = builder.body(Body::from(body.to_vec())).ok()?;
    let status = fx.runtime.block_on(async {
        let Ok(response) = fx.router.clone().oneshot(request).await;
        let status = response.status();
        assert!(
            !status.is_server_error(),
            "{status} for {path}: a hostile request is the client's fault"
        );
        if status.is_client_error() {
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .unwrap_or_default();
            let error: serde_json::Value = serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("{status} for {path}: the body is not JSON ({e})"));
            assert!(
                error["code"].is_string() && error["message"].is_string(),
                "{status} for {path}: not a typed error body: {error}"
            );
        }
        // A 2xx event stream is dropped unread (it never ends by itself).
        status.as_u16()
    });
    // What the scripted model recorded is not needed: keep a long run's memory flat.
    fx.harness.llm.take_requests();
    Some(status)
}

fn split_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}
