//! The adapter against a real HTTP server on 127.0.0.1 (dsh-testkit).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_llm::service::PreparedCall;
use dsh_llm::{
    ChunkStream, FinishReason, LlmAdapter, LlmFailure, LlmRequest, Message, ModelInfo,
    ReasoningEffort, StreamChunk,
};
use dsh_llm_deepseek::{DeepSeekAdapter, DeepSeekConfig, EnvFn};
use dsh_testkit::{Gate, MockServer, Outcome, Reply, Split};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::common::fixture;
use crate::translate::{FIXTURES, expected};

pub const KEY: &str = "sk-test-S3CRETKEY-0123456789";
const SAFETY: Duration = Duration::from_secs(10);

pub fn env_with_key(key: Option<&'static str>) -> EnvFn {
    Arc::new(move |name| match name {
        "DEEPSEEK_API_KEY" => key.map(str::to_owned),
        _ => None,
    })
}

pub fn config(server: &MockServer) -> DeepSeekConfig {
    DeepSeekConfig {
        base_url: Some(format!("{}/", server.base_url())),
        ..Default::default()
    }
}

pub fn adapter(cfg: &DeepSeekConfig) -> DeepSeekAdapter {
    DeepSeekAdapter::with_env(cfg, env_with_key(Some(KEY))).unwrap()
}

pub fn request(cancel: CancellationToken) -> LlmRequest {
    LlmRequest {
        call: call(Some("high".into()), 1000),
        messages: vec![Message::user_text("m1", "hi").into()],
        tools: vec![],
        cancel,
    }
}

/// The call settings of these tests (and `request.rs`): `deepseek-flash` on `deepseek`.
pub fn call(effort: Option<ReasoningEffort>, max_tokens: u64) -> PreparedCall {
    let model = ModelInfo {
        id: "deepseek-flash".into(),
        context_window: 1_000_000,
        default_max_tokens: max_tokens,
        max_output_tokens: None,
        reasoning_efforts: Vec::new(),
        default_effort: None,
        input_modalities: Vec::new(),
        system_prompt_update: None,
        tool_update: None,
        pricing: None,
    };
    PreparedCall {
        effort,
        ..PreparedCall::with_defaults("deepseek", model)
    }
}

async fn collect(s: ChunkStream) -> Vec<StreamChunk> {
    tokio::time::timeout(SAFETY, s.collect())
        .await
        .expect("stream did not end")
}

/// Runs one attempt; returns the chunks, or the failure returned before streaming.
pub async fn run(a: &DeepSeekAdapter) -> Result<Vec<StreamChunk>, LlmFailure> {
    let s = tokio::time::timeout(SAFETY, a.stream(request(CancellationToken::new())))
        .await
        .expect("stream() did not return")?;
    Ok(crate::common::filled(collect(s).await))
}

fn finish_failure(chunks: &[StreamChunk]) -> LlmFailure {
    match chunks.last() {
        Some(StreamChunk::Finish {
            reason: FinishReason::Error { failure },
            ..
        }) => failure.clone(),
        other => panic!("expected an error finish, got {other:?}"),
    }
}

fn data_event(i: usize) -> String {
    format!(
        "data: {{\"id\":\"x\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i}\"}},\"finish_reason\":null}}],\"usage\":null}}\n\n"
    )
}

#[tokio::test]
async fn fixtures_over_http_at_several_splits() {
    let server = MockServer::start().await;
    let a = adapter(&config(&server));
    for name in FIXTURES {
        for split in [
            Split::Whole,
            Split::PerEvent,
            Split::Every(1),
            Split::Every(7),
        ] {
            server.push(Reply::sse().split(fixture(name), &split));
            assert_eq!(run(&a).await.unwrap(), expected(name), "{name} {split:?}");
        }
    }
    let req = &server.requests()[0];
    assert_eq!(req.path, "/chat/completions");
    assert_eq!(req.bearer(), Some(KEY));
    assert_eq!(req.header("accept"), Some("text/event-stream"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert!(req.header("user-agent").unwrap().starts_with("dsh/"));
    assert_eq!(
        req.body_json().unwrap()["stream_options"]["include_usage"],
        true
    );
}

#[tokio::test]
async fn http_errors_map_to_codes_and_keep_the_message() {
    let server = MockServer::start().await;
    let a = adapter(&config(&server));
    let cases = [
        (
            401,
            "http-401.json",
            "AUTH",
            "Authentication Fails, Your api key: ****abcd is invalid",
        ),
        (402, "http-402.json", "QUOTA", "Insufficient Balance"),
        (429, "http-429.json", "RATE_LIMIT", "Rate Limit Reached"),
        (
            400,
            "http-400-context.json",
            "CONTEXT_WINDOW_EXCEEDED",
            "This model's maximum context length is 1048576 tokens. However, you requested 1333908 tokens (1325716 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.",
        ),
    ];
    for (status, file, code, message) in cases {
        server.push(Reply::json(status, fixture(file)).header("x-ds-trace-id", "trace-7"));
        let f = run(&a).await.unwrap_err();
        assert_eq!(
            (f.code.as_str(), f.message.as_str(), f.status),
            (code, message, Some(status))
        );
        assert_eq!(f.request_id.as_deref(), Some("trace-7"));
        assert_eq!(f.provider_retry_after_ms, None);
    }
    server.push(Reply::text(503, "Server Overloaded"));
    let f = run(&a).await.unwrap_err();
    assert_eq!(
        (f.code.as_str(), f.message.as_str()),
        ("SERVER", "DeepSeek API error (HTTP 503)")
    );
}

#[tokio::test]
async fn retry_after_in_seconds_and_as_an_http_date() {
    let server = MockServer::start().await;
    let a = adapter(&config(&server));
    let future = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(120));
    let past = httpdate::fmt_http_date(std::time::SystemTime::now() - Duration::from_secs(120));
    for (value, want) in [
        ("2", Some(2000)),
        ("0", None),
        ("soon", None),
        (past.as_str(), None),
    ] {
        server.push(Reply::json(429, fixture("http-429.json")).header("retry-after", value));
        let f = run(&a).await.unwrap_err();
        assert_eq!(
            (f.code.as_str(), f.provider_retry_after_ms),
            ("RATE_LIMIT", want),
            "{value}"
        );
    }
    server.push(Reply::json(429, fixture("http-429.json")).header("retry-after", future));
    let ms = run(&a).await.unwrap_err().provider_retry_after_ms.unwrap();
    assert!((100_000..=120_000).contains(&ms), "{ms}");
}

#[tokio::test]
async fn missing_and_invalid_credentials_fail_before_any_io() {
    let server = MockServer::start().await;
    let a = DeepSeekAdapter::with_env(&config(&server), env_with_key(None)).unwrap();
    let f = run(&a).await.unwrap_err();
    assert_eq!(f.code, "MISSING_CREDENTIAL");
    assert!(f.message.contains("DEEPSEEK_API_KEY"), "{}", f.message);
    let bad =
        DeepSeekAdapter::with_env(&config(&server), env_with_key(Some("sk-bad\nkey"))).unwrap();
    let f = run(&bad).await.unwrap_err();
    assert_eq!(f.code, "INVALID_CREDENTIAL");
    assert!(!f.message.contains("sk-bad"));
    assert_eq!(server.request_count(), 0);
    // A config key wins over the environment.
    let mut cfg = config(&server);
    cfg.api_key = serde_json::from_value(serde_json::json!("sk-from-config")).unwrap();
    server.push(Reply::sse().bytes(fixture("text.sse")));
    run(&DeepSeekAdapter::with_env(&cfg, env_with_key(Some(KEY))).unwrap())
        .await
        .unwrap();
    assert_eq!(server.requests()[0].bearer(), Some("sk-from-config"));
}

#[tokio::test]
async fn a_stall_trips_the_idle_watchdog() {
    let server = MockServer::start().await;
    let mut cfg = config(&server);
    cfg.idle_timeout_ms = Some(300);
    let a = adapter(&cfg);
    server.push(Reply::sse().bytes(data_event(0)).stall());
    let started = Instant::now();
    let chunks = run(&a).await.unwrap();
    let f = finish_failure(&chunks);
    assert_eq!(
        (f.code.as_str(), f.message.as_str()),
        ("TIMEOUT", "DeepSeek stream idle timeout after 300ms")
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    // A server that never sends its head is bounded by the same watchdog.
    server.push(Reply::sse().stall_head());
    assert_eq!(run(&a).await.unwrap_err().code, "TIMEOUT");
}

#[tokio::test]
async fn endless_keep_alives_trip_the_total_deadline_not_the_idle_watchdog() {
    // Keep-alives every 50 ms re-arm a 400 ms idle watchdog (8x margin for a loaded machine);
    // only the total deadline can end the attempt.
    let server = MockServer::start().await;
    let mut cfg = config(&server);
    cfg.idle_timeout_ms = Some(400);
    cfg.total_timeout_ms = Some(1200);
    let a = adapter(&cfg);
    let mut reply = Reply::sse().bytes(data_event(0));
    for _ in 0..400 {
        reply = reply.keep_alive().sleep(Duration::from_millis(50));
    }
    server.push(reply);
    let started = Instant::now();
    let chunks = run(&a).await.unwrap();
    let f = finish_failure(&chunks);
    assert_eq!(f.code, "TIMEOUT");
    assert!(
        f.message.contains("total deadline of 1200ms"),
        "{}",
        f.message
    );
    assert!(started.elapsed() >= Duration::from_millis(1200));
    // Comments never become chunks: only the text block and the finish.
    assert!(matches!(chunks[0], StreamChunk::BlockStart { .. }));
    assert_eq!(chunks.len(), 3);

    // The progress deadline (data events only) catches the same pattern with a long total.
    let mut cfg = config(&server);
    cfg.idle_timeout_ms = Some(400);
    cfg.progress_timeout_ms = Some(1000);
    let a = adapter(&cfg);
    let mut reply = Reply::sse();
    for _ in 0..400 {
        reply = reply.keep_alive().sleep(Duration::from_millis(50));
    }
    server.push(reply);
    let f = finish_failure(&run(&a).await.unwrap());
    assert!(f.message.contains("no progress"), "{}", f.message);
}

#[tokio::test]
async fn truncations_resets_and_bad_payloads() {
    let server = MockServer::start().await;
    let a = adapter(&config(&server));
    let text = fixture("text.sse");
    let code = |chunks: Vec<StreamChunk>| finish_failure(&chunks).code;

    // Reset mid-stream.
    server.push(Reply::sse().bytes(text[..300].to_vec()).reset());
    let c = code(run(&a).await.unwrap());
    assert!(c == "STREAM_CLOSED" || c == "TRANSPORT", "{c}");
    // Reset before the head: transport failure before streaming.
    server.push(Reply::sse().reset_head());
    assert_eq!(run(&a).await.unwrap_err().code, "TRANSPORT");
    // Redirects are not followed (the key is never replayed elsewhere).
    server.push(Reply::status(307).header("location", "http://127.0.0.1:9/chat/completions"));
    assert_eq!(run(&a).await.unwrap_err().code, "HTTP_307");
    // Clean EOF without [DONE]; [DONE] without its blank line.
    server.push(Reply::sse().bytes(data_event(0)));
    assert_eq!(code(run(&a).await.unwrap()), "STREAM_CLOSED");
    server.push(Reply::sse().bytes(text[..text.len() - 1].to_vec()));
    assert_eq!(code(run(&a).await.unwrap()), "STREAM_CLOSED");
    // Only keep-alives, then EOF: nothing was delivered, retryable transport failure.
    server.push(Reply::sse().keep_alive().keep_alive());
    assert_eq!(code(run(&a).await.unwrap()), "TRANSPORT");
    // 200 with no body at all.
    server.push(Reply::sse());
    assert_eq!(code(run(&a).await.unwrap()), "EMPTY_RESPONSE");
    // Not JSON.
    server.push(Reply::sse().bytes("data: {not json}\n\n"));
    let f = finish_failure(&run(&a).await.unwrap());
    assert_eq!(
        (f.code.as_str(), f.message.as_str()),
        (
            "MALFORMED_RESPONSE",
            "malformed SSE payload: not JSON (key must be a string at line 1 column 2)"
        )
    );
    // Oversized event.
    let mut cfg = config(&server);
    cfg.max_event_bytes = Some(64);
    server.push(Reply::sse().bytes(fixture("text.sse")));
    let f = finish_failure(&run(&adapter(&cfg)).await.unwrap());
    assert_eq!(f.code, "MALFORMED_RESPONSE");
}

#[tokio::test]
async fn connection_refused_is_transport_naming_the_endpoint() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let cfg = DeepSeekConfig {
        base_url: Some(format!("http://{addr}")),
        ..Default::default()
    };
    let f = run(&adapter(&cfg)).await.unwrap_err();
    assert_eq!(f.code, "TRANSPORT");
    assert!(
        f.message
            .starts_with(&format!("DeepSeek API request to http://{addr} failed")),
        "{}",
        f.message
    );
    assert!(!f.message.contains(KEY));
}

#[tokio::test]
async fn cancel_mid_stream_returns_within_100ms_and_closes_the_connection() {
    let server = MockServer::start().await;
    let a = adapter(&config(&server));
    let gate = Gate::new();
    server.push(
        Reply::sse()
            .bytes(data_event(0))
            .gate(&gate)
            .bytes(data_event(1)),
    );
    let cancel = CancellationToken::new();
    let mut s = a.stream(request(cancel.clone())).await.unwrap();
    // The first delta arrived; the server now holds the stream open at the gate.
    assert!(matches!(
        s.next().await,
        Some(StreamChunk::BlockStart { .. })
    ));
    assert!(matches!(
        s.next().await,
        Some(StreamChunk::TextDelta { .. })
    ));
    gate.wait_reached(1).await;
    let started = Instant::now();
    cancel.cancel();
    let rest: Vec<StreamChunk> = collect(s).await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(100), "{elapsed:?}");
    match rest.as_slice() {
        [
            StreamChunk::Finish {
                reason: FinishReason::Aborted { failure },
                ..
            },
        ] => {
            assert_eq!(failure.code, "ABORTED");
        }
        other => panic!("{other:?}"),
    }
    let reqs = server.wait_for_finished(1).await;
    assert_eq!(reqs[0].outcome, Outcome::Dropped);

    // Cancelled while waiting for the head: an aborted finish, promptly.
    server.push(Reply::sse().stall_head());
    let cancel = CancellationToken::new();
    let fut = a.stream(request(cancel.clone()));
    let c2 = cancel.clone();
    let waiter = tokio::spawn(async move {
        let s = fut.await.unwrap();
        s.collect::<Vec<_>>().await
    });
    server.wait_for_requests(2).await;
    let started = Instant::now();
    c2.cancel();
    let chunks = tokio::time::timeout(SAFETY, waiter).await.unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_millis(100));
    assert!(matches!(
        chunks.as_slice(),
        [StreamChunk::Finish {
            reason: FinishReason::Aborted { .. },
            ..
        }]
    ));
}

#[test]
fn base_url_from_config_else_environment_else_default() {
    let env: EnvFn = Arc::new(|name| {
        (name == "DEEPSEEK_BASE_URL").then(|| "http://proxy.invalid:8080/".to_owned())
    });
    let none: EnvFn = Arc::new(|_| None);
    let cfg = DeepSeekConfig::default();
    assert_eq!(
        DeepSeekAdapter::with_env(&cfg, none).unwrap().endpoint(),
        "https://api.deepseek.com/chat/completions"
    );
    assert_eq!(
        DeepSeekAdapter::with_env(&cfg, env.clone())
            .unwrap()
            .endpoint(),
        "http://proxy.invalid:8080/chat/completions"
    );
    let explicit = DeepSeekConfig {
        base_url: Some("http://a.invalid/v1".into()),
        ..Default::default()
    };
    assert_eq!(
        DeepSeekAdapter::with_env(&explicit, env)
            .unwrap()
            .endpoint(),
        "http://a.invalid/v1/chat/completions"
    );
    let bad = DeepSeekConfig {
        base_url: Some("not a url".into()),
        ..Default::default()
    };
    let err = DeepSeekAdapter::with_env(&bad, Arc::new(|_| None)).unwrap_err();
    assert!(
        matches!(&err, dsh_llm_deepseek::AdapterError::BaseUrl { url, .. } if url == "not a url"),
        "{err:?}"
    );
    assert!(
        std::error::Error::source(&err).is_some(),
        "the parse error is kept"
    );
}

#[tokio::test]
async fn testkit_completions_round_trip_through_the_adapter() {
    use dsh_llm::{BlockAssembler, ContentBlock, TokenUsage};
    use dsh_testkit::{Completion, Usage, UsagePlacement};

    let server = MockServer::start().await;
    let a = adapter(&config(&server));
    for placement in [
        UsagePlacement::FinishChunk,
        UsagePlacement::TrailingEmptyChoices,
        UsagePlacement::TrailingNullChoices,
    ] {
        let c = Completion::new()
            .thinking(true)
            .keep_alives(2)
            .reasoning("Think ✓ about ünïcode.")
            .text("Answer: 😀 done.")
            .tool_call_with_id("call_00_a", "read", "{\"file_path\": \"a.rs\"}")
            .tool_call_with_id("call_01_b", "bash", "{\"command\": \"ls\"}")
            .usage(Usage::new(306, 85).cache_hit(256).reasoning(31))
            .usage_placement(placement)
            .chars_per_delta(3);
        server.push(c.reply_split(&Split::Every(1)));
        let chunks = run(&a).await.unwrap();
        let mut asm = BlockAssembler::new();
        for ch in &chunks {
            asm.push(ch).unwrap();
        }
        let done = asm.finish().unwrap();
        assert_eq!(done.finish, FinishReason::ToolCalls);
        assert_eq!(
            done.content,
            vec![
                ContentBlock::reasoning("Think ✓ about ünïcode."),
                ContentBlock::text("Answer: 😀 done."),
                ContentBlock::tool_call("call_00_a", "read", "{\"file_path\": \"a.rs\"}"),
                ContentBlock::tool_call("call_01_b", "bash", "{\"command\": \"ls\"}"),
            ]
        );
        assert_eq!(
            done.usage,
            Some(TokenUsage {
                input_tokens: 50,
                output_tokens: 85,
                cache_read_tokens: Some(256),
                reasoning_tokens: Some(31),
                ..Default::default()
            }),
            "{placement:?}"
        );
    }
}

#[tokio::test]
async fn connect_timeout_when_the_server_never_completes_the_handshake() {
    // A listener that never accepts: once its accept queue is full, the kernel drops further
    // SYNs, so a new connection hangs in the handshake.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    let full = loop {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => held.push(s),
            Err(_) => break true,
        }
        if held.len() > 4096 {
            break false;
        }
    };
    if !full {
        // This kernel never refuses: nothing to test here.
        return;
    }
    let cfg = DeepSeekConfig {
        base_url: Some(format!("http://{addr}")),
        connect_timeout_ms: Some(300),
        ..Default::default()
    };
    let started = Instant::now();
    let f = run(&adapter(&cfg)).await.unwrap_err();
    assert_eq!(f.code, "TIMEOUT", "{}", f.message);
    assert!(
        f.message.contains("connect timeout after 300ms"),
        "{}",
        f.message
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    drop(held);
}

/// Reads one attempt the way the agent loop does: up to the finish chunk, then drops the stream.
async fn run_to_finish(a: &DeepSeekAdapter) -> StreamChunk {
    let mut s = tokio::time::timeout(SAFETY, a.stream(request(CancellationToken::new())))
        .await
        .expect("stream() did not return")
        .expect("streaming");
    loop {
        let c = tokio::time::timeout(SAFETY, s.next())
            .await
            .expect("stream stalled")
            .expect("the stream ended without a finish");
        if matches!(c, StreamChunk::Finish { .. }) {
            return c;
        }
    }
}

#[tokio::test]
async fn the_body_is_read_past_done_so_one_connection_serves_a_20_step_run() {
    let server = MockServer::start().await;
    let a = adapter(&config(&server));
    for i in 0..20 {
        server.push(
            dsh_testkit::Completion::new()
                .text(&format!("step {i}"))
                .reply()
                .terminator_after(Duration::from_millis(15)),
        );
    }
    for _ in 0..20 {
        let finish = run_to_finish(&a).await;
        assert_eq!(finish, StreamChunk::finish(FinishReason::Stop));
    }
    let done = server.wait_for_finished(20).await;
    assert!(done.iter().all(|r| r.outcome == Outcome::Completed));
    assert_eq!(server.connection_count(), 1, "one keep-alive connection");
}

#[tokio::test]
async fn a_body_that_never_ends_after_done_still_delivers_the_finish() {
    let server = MockServer::start().await;
    let mut cfg = config(&server);
    cfg.total_timeout_ms = Some(300);
    let a = adapter(&cfg);
    // `[DONE]`, then the body stays open: the drain gives up at the total deadline.
    server.push(
        Reply::sse()
            .bytes(dsh_testkit::Completion::new().text("ok").to_bytes())
            .stall(),
    );
    let started = Instant::now();
    assert_eq!(
        run_to_finish(&a).await,
        StreamChunk::finish(FinishReason::Stop)
    );
    assert!(started.elapsed() < SAFETY);
}

#[tokio::test]
async fn a_complete_finish_then_eof_without_done_is_accepted_with_a_note() {
    let server = MockServer::start().await;
    let a = adapter(&config(&server));
    let c = dsh_testkit::Completion::new()
        .tool_call_with_id("call_00_x", "bash", r#"{"command":"ls"}"#)
        .no_done();
    server.push(c.reply());
    let chunks = run(&a).await.unwrap();
    let mut asm = dsh_llm::BlockAssembler::new();
    for ch in &chunks {
        asm.push(ch).unwrap();
    }
    let done = asm.finish().unwrap();
    assert_eq!(done.finish, FinishReason::ToolCalls);
    assert_eq!(done.tool_calls().count(), 1);
    assert_eq!(done.notes, vec![dsh_llm::StreamNote::MissingDone]);
    // Without usage the finish is not complete: still STREAM_CLOSED.
    server.push(
        dsh_testkit::Completion::new()
            .text("partial")
            .no_usage()
            .no_done()
            .reply(),
    );
    assert_eq!(
        finish_failure(&run(&a).await.unwrap()).code,
        dsh_llm::FailureCode::StreamClosed
    );
}

/// Issue 33: hyper returns a finished connection to its pool from a task of its own; with the
/// cores oversubscribed, the OS used to preempt that task's worker just as the next request
/// looked for a connection, and the request opened a second one (about one gap in 600). The
/// client now waits for the return: 400 back-to-back attempts on a two-worker runtime, with
/// four threads spinning on the same cores, use exactly one connection.
#[test]
fn one_connection_even_when_the_pool_return_is_preempted() {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hogs: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let count = rt.block_on(async {
        let server = MockServer::start().await;
        let a = adapter(&config(&server));
        const N: usize = 400;
        for i in 0..N {
            server.push(
                dsh_testkit::Completion::new()
                    .text(&format!("s{i}"))
                    .reply(),
            );
        }
        for _ in 0..N {
            // Each attempt in a task of its own, as the agent loop runs them.
            let a = a.clone();
            let finish = tokio::spawn(async move { run_to_finish(&a).await })
                .await
                .expect("attempt task");
            assert_eq!(finish, StreamChunk::finish(FinishReason::Stop));
        }
        server.wait_for_finished(N).await;
        server.connection_count()
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in hogs {
        h.join().expect("hog");
    }
    assert_eq!(count, 1, "one keep-alive connection for every attempt");
}
