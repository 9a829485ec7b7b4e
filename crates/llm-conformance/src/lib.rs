//! `dsh-llm-conformance`: one test list every LLM adapter runs, each against `dsh-testkit`
//! serving its dialect byte-exactly.
//!
//! An adapter implements [`Dialect`] (how to build it for a base URL, and its dialect's replies)
//! and instantiates the list with [`suite!`]: the same tests, one module per adapter. The tests
//! check the chunk contract (usage before finish, nothing after finish, raw-string tool
//! arguments, the two error paths: `Err` before any chunk and `finish {error}` after), the
//! error mapping (401, 402/quota, 429 with `Retry-After`, 5xx, context overflow, malformed and
//! truncated streams), reasoning passed back on the next request, cancellation mid-stream, the
//! idle watchdog, and connection reuse (one connection for a 20-step run).

use std::sync::Arc;

use dsh_llm::{
    Assembled, BlockAssembler, ChunkStream, LlmAdapter, LlmFailure, Message, PreparedCall,
    StreamChunk, ToolSpec,
};
use dsh_testkit::Reply;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

/// What the suite needs from one adapter and its dialect.
pub trait Dialect: 'static {
    /// Adapter name in messages.
    const NAME: &'static str;
    /// The adapter for `base_url` with key `sk-test-key` and an idle watchdog of `idle_ms`.
    fn adapter(base_url: &str, idle_ms: u64) -> Arc<dyn LlmAdapter>;
    /// A text answer (with usage).
    fn text(text: &str) -> Reply;
    /// Reasoning, then one tool call whose raw arguments arrive as `parts`.
    fn reasoning_then_tool(reasoning: &str, id: &str, name: &str, parts: &[&str]) -> Reply;
    /// `text` streamed, then the body ends without the dialect's end of stream.
    fn truncated(text: &str) -> Reply;
    /// `text` streamed, then nothing (the connection stays open).
    fn stalled(text: &str) -> Reply;
    /// A 200 stream whose first event is not valid JSON.
    fn malformed() -> Reply;
    /// 401.
    fn unauthorized() -> Reply;
    /// The dialect's quota/balance error.
    fn quota() -> Reply;
    /// 429 with `retry-after`.
    fn rate_limited(retry_after: &str) -> Reply;
    /// A 5xx.
    fn server_error() -> Reply;
    /// The dialect's context-overflow error.
    fn context_exceeded() -> Reply;
    /// Whether the request body passes `reasoning` back on the assistant turn.
    fn passes_reasoning_back(body: &serde_json::Value, reasoning: &str) -> bool;
    /// The raw tool arguments of the assistant turn as sent in the request body text.
    fn sent_arguments(body: &str, args: &str) -> bool;
    /// The adapter for `base_url` reading image bytes through `images`; `None` when the
    /// dialect sends no images yet (its images always become placeholder text).
    fn image_adapter(
        _base_url: &str,
        _images: dsh_llm::AttachmentLookup,
    ) -> Option<Arc<dyn LlmAdapter>> {
        None
    }
    /// Whether the body carries an image of `media_type` with base64 `data` in the dialect's
    /// shape, in a user message (`in_tool_result` false) or for a tool result.
    fn sent_image(
        _body: &serde_json::Value,
        _media_type: &str,
        _data: &str,
        _in_tool_result: bool,
    ) -> bool {
        false
    }
}

/// An in-memory attachment store for the image tests.
pub struct MemoryStore(pub std::collections::HashMap<String, Vec<u8>>);

impl dsh_llm::AttachmentStore for MemoryStore {
    fn read(&self, attachment_id: &str) -> Result<Vec<u8>, dsh_llm::AttachmentError> {
        self.0
            .get(attachment_id)
            .cloned()
            .ok_or_else(|| dsh_llm::AttachmentError::NotFound(attachment_id.to_owned()))
    }
}

/// The image of the tests: `sha256:` id, media type, bytes, and their base64.
pub const IMAGE_ID: &str =
    "sha256:b1ff9c8ea3a780bad09b346c423d2d0e46815926879b18e841d928376a946640";
/// The image's bytes.
pub const IMAGE_BYTES: &[u8] = b"\x89PNG-test";
/// Their base64.
pub const IMAGE_BASE64: &str = "iVBORy10ZXN0";

/// An image block of the test image.
pub fn image_block(id: &str) -> dsh_llm::ContentBlock {
    dsh_llm::ContentBlock::Image {
        attachment: dsh_llm::ImageRef {
            attachment_id: id.to_owned(),
            media_type: "image/png".to_owned(),
            width: 1,
            height: 1,
            bytes: IMAGE_BYTES.len() as u64,
            name: None,
            original_dimensions: None,
            extra: serde_json::Map::new(),
        },
        offloaded: None,
    }
}

/// A store holding the test image.
pub fn image_store() -> dsh_llm::AttachmentLookup {
    let mut m = std::collections::HashMap::new();
    m.insert(IMAGE_ID.to_owned(), IMAGE_BYTES.to_vec());
    dsh_llm::fixed_attachments(Arc::new(MemoryStore(m)))
}

/// The prompt with an image in the user message, and a tool turn whose result is an image.
pub fn image_history() -> Vec<Message> {
    let call = dsh_llm::ToolCall {
        id: "call_img".to_owned(),
        name: "read_image".to_owned(),
        arguments: "{\"path\":\"a.png\"}".into(),
    };
    vec![
        Message::system("sys", "You are a test."),
        Message::new(
            "u1",
            dsh_llm::Role::User,
            vec![
                dsh_llm::ContentBlock::text("What is this?"),
                image_block(IMAGE_ID),
            ],
            dsh_llm::MessageSource::user(),
        ),
        Message::new(
            "a1",
            dsh_llm::Role::Assistant,
            vec![
                dsh_llm::ContentBlock::reasoning("Look at the file."),
                dsh_llm::ContentBlock::ToolCall(call),
            ],
            dsh_llm::MessageSource::model("conformance", "m", None),
        ),
        Message::tool_result(
            "t1",
            "call_img",
            vec![dsh_llm::ContentBlock::text("a.png"), image_block(IMAGE_ID)],
            false,
        ),
    ]
}

/// A request of `adapter`'s default model over `messages`, its model declaring images or not.
pub fn request_with_images(
    adapter: &dyn LlmAdapter,
    messages: Vec<Message>,
    accepts_images: bool,
) -> dsh_llm::LlmRequest {
    let mut req = request(adapter, messages, CancellationToken::new());
    req.call.model.input_modalities = if accepts_images {
        vec![dsh_llm::Modality::Text, dsh_llm::Modality::Image]
    } else {
        vec![dsh_llm::Modality::Text]
    };
    req
}

/// A request of the adapter's default model with `messages` and one `bash` tool.
pub fn request(
    adapter: &dyn LlmAdapter,
    messages: Vec<Message>,
    cancel: CancellationToken,
) -> dsh_llm::LlmRequest {
    let model = adapter.resolve_model(&adapter.default_model());
    let call = PreparedCall::with_defaults("conformance", model);
    let tool = ToolSpec::new(
        "bash",
        "Run a command",
        serde_json::json!({"type":"object","properties":{"command":{"type":"string"}}}),
    );
    call.request(
        messages.into_iter().map(Arc::new).collect(),
        vec![tool],
        cancel,
    )
}

/// The chunks of one attempt (`Err` = failed before any chunk).
pub async fn run(
    adapter: &dyn LlmAdapter,
    messages: Vec<Message>,
) -> Result<Vec<StreamChunk>, LlmFailure> {
    let stream = adapter
        .stream(request(adapter, messages, CancellationToken::new()))
        .await?;
    Ok(collect(stream).await)
}

/// Every chunk of a stream.
pub async fn collect(stream: ChunkStream) -> Vec<StreamChunk> {
    stream.collect().await
}

/// Checks the chunk contract and folds the chunks: exactly one `finish`, last; `usage`, when
/// present, before it; every block closed on a successful finish.
///
/// # Panics
/// When the contract is broken (this is a test helper).
#[allow(clippy::panic)]
pub fn assemble(chunks: &[StreamChunk]) -> Assembled {
    let finishes = chunks
        .iter()
        .filter(|c| matches!(c, StreamChunk::Finish { .. }))
        .count();
    assert_eq!(finishes, 1, "exactly one finish: {chunks:?}");
    assert!(
        matches!(chunks.last(), Some(StreamChunk::Finish { .. })),
        "finish is last: {chunks:?}"
    );
    let mut a = BlockAssembler::new();
    for c in chunks {
        if let Err(v) = a.push(c) {
            panic!("chunk contract broken: {v:?} in {chunks:?}");
        }
    }
    match a.finish() {
        Ok(done) => done,
        Err(v) => panic!("chunk contract broken at the end: {v:?}"),
    }
}

/// The prompt of the suite.
pub fn prompt() -> Vec<Message> {
    vec![
        Message::system("sys", "You are a test."),
        Message::user_text("u1", "Go"),
    ]
}

/// Instantiates the conformance test list for a [`Dialect`] as a module of tests.
#[macro_export]
macro_rules! suite {
    ($module:ident, $dialect:ty) => {
        mod $module {
            use std::time::Duration;

            use dsh_llm::{FinishReason, StreamChunk, codes};
            use dsh_testkit::MockServer;
            use tokio_util::sync::CancellationToken;
            use $crate::{Dialect, assemble, collect, prompt, request, run};

            type D = $dialect;

            async fn server() -> MockServer {
                MockServer::start().await
            }

            #[tokio::test]
            async fn text_obeys_the_chunk_rules() {
                let s = server().await;
                s.push(D::text("Hello there"));
                let a = D::adapter(&s.base_url(), 60_000);
                let chunks = run(&*a, prompt()).await.unwrap();
                let usage_at = chunks
                    .iter()
                    .position(|c| matches!(c, StreamChunk::Usage { .. }));
                assert!(usage_at.is_some(), "{} reports usage", D::NAME);
                let done = assemble(&chunks);
                assert_eq!(done.finish, FinishReason::Stop);
                assert_eq!(
                    done.content,
                    vec![dsh_llm::ContentBlock::text("Hello there")]
                );
                assert!(done.usage.is_some_and(|u| u.output_tokens > 0));
            }

            #[tokio::test]
            async fn tool_arguments_stay_raw_and_reasoning_goes_back() {
                let s = server().await;
                let parts = ["{\"command\" :", " \"echo  hi\",", "\"n\":1.50}"];
                let raw: String = parts.concat();
                s.push(D::reasoning_then_tool(
                    "Let me think.",
                    "call_1",
                    "bash",
                    &parts,
                ));
                s.push(D::text("done"));
                let a = D::adapter(&s.base_url(), 60_000);
                let chunks = run(&*a, prompt()).await.unwrap();
                let done = assemble(&chunks);
                assert_eq!(done.finish, FinishReason::ToolCalls);
                let call = done.tool_calls().next().expect("one tool call").clone();
                assert_eq!(call.arguments, raw, "arguments byte-exact");
                assert_eq!((call.id.as_str(), call.name.as_str()), ("call_1", "bash"));
                assert_eq!(
                    done.content[0],
                    dsh_llm::ContentBlock::reasoning("Let me think.")
                );
                let model = a.default_model();
                let source =
                    dsh_llm::MessageSource::model("conformance", model, done.replay_state.clone());
                let reply = dsh_llm::Message::new(
                    "a1",
                    dsh_llm::Role::Assistant,
                    done.content.clone(),
                    source,
                );
                let mut history = prompt();
                history.push(reply);
                history.push(dsh_llm::Message::tool_result(
                    "t1",
                    "call_1",
                    vec![dsh_llm::ContentBlock::text("hi")],
                    false,
                ));
                let chunks = run(&*a, history).await.unwrap();
                assert_eq!(assemble(&chunks).finish, FinishReason::Stop);
                let second = s.request(1).unwrap();
                let body = second.body_json().unwrap();
                assert!(D::passes_reasoning_back(&body, "Let me think."), "{body}");
                assert!(
                    D::sent_arguments(&second.body_text(), &raw),
                    "{}",
                    second.body_text()
                );
            }

            async fn failure_before_stream(reply: dsh_testkit::Reply) -> dsh_llm::LlmFailure {
                let s = server().await;
                s.push(reply);
                let a = D::adapter(&s.base_url(), 60_000);
                run(&*a, prompt())
                    .await
                    .expect_err("an HTTP error fails before any chunk")
            }

            #[tokio::test]
            async fn http_errors_map_to_codes() {
                let f = failure_before_stream(D::unauthorized()).await;
                assert_eq!((f.code, f.status), (codes::AUTH, Some(401)));
                let f = failure_before_stream(D::quota()).await;
                assert_eq!(f.code, codes::QUOTA);
                let f = failure_before_stream(D::rate_limited("2")).await;
                assert_eq!(
                    (f.code, f.provider_retry_after_ms),
                    (codes::RATE_LIMIT, Some(2000))
                );
                let f = failure_before_stream(D::server_error()).await;
                assert_eq!(f.code, codes::SERVER);
                let f = failure_before_stream(D::context_exceeded()).await;
                assert_eq!(f.code, codes::CONTEXT_WINDOW_EXCEEDED);
                assert!(!f.message.is_empty());
            }

            async fn failure_in_stream(reply: dsh_testkit::Reply) -> dsh_llm::LlmFailure {
                let s = server().await;
                s.push(reply);
                let a = D::adapter(&s.base_url(), 60_000);
                let chunks = run(&*a, prompt()).await.expect("the head was 200");
                let done = assemble(&chunks);
                done.finish.failure().cloned().expect("an error finish")
            }

            #[tokio::test]
            async fn malformed_and_truncated_streams_end_with_an_error_finish() {
                let f = failure_in_stream(D::malformed()).await;
                assert_eq!(f.code, codes::MALFORMED_RESPONSE);
                let f = failure_in_stream(D::truncated("partial")).await;
                assert_eq!(f.code, codes::STREAM_CLOSED);
            }

            #[tokio::test]
            async fn cancellation_mid_stream_ends_with_aborted() {
                let s = server().await;
                s.push(D::stalled("some text"));
                let a = D::adapter(&s.base_url(), 60_000);
                let cancel = CancellationToken::new();
                let mut stream = a
                    .stream(request(&*a, prompt(), cancel.clone()))
                    .await
                    .unwrap();
                use futures::StreamExt;
                let mut seen = Vec::new();
                while let Some(c) = stream.next().await {
                    let text = matches!(c, StreamChunk::TextDelta { .. });
                    seen.push(c);
                    if text {
                        break;
                    }
                }
                cancel.cancel();
                let rest = tokio::time::timeout(Duration::from_secs(5), collect(stream))
                    .await
                    .expect("cancellation is prompt");
                seen.extend(rest);
                let done = assemble(&seen);
                assert!(
                    matches!(done.finish, FinishReason::Aborted { .. }),
                    "{:?}",
                    done.finish
                );
            }

            #[tokio::test]
            async fn the_idle_watchdog_fires() {
                let s = server().await;
                s.push(D::stalled("some text"));
                let a = D::adapter(&s.base_url(), 300);
                let chunks = run(&*a, prompt()).await.unwrap();
                let f = assemble(&chunks)
                    .finish
                    .failure()
                    .cloned()
                    .expect("error finish");
                assert_eq!(f.code, codes::TIMEOUT);
                assert!(f.message.contains("idle"), "{}", f.message);
            }

            #[tokio::test]
            async fn images_go_as_bytes_only_where_the_model_takes_them() {
                use $crate::{IMAGE_BASE64, image_history, image_store, request_with_images};
                // A text-only model: placeholders, never the bytes.
                let s = server().await;
                s.push(D::text("a picture"));
                let a = D::image_adapter(&s.base_url(), image_store())
                    .unwrap_or_else(|| D::adapter(&s.base_url(), 60_000));
                let req = request_with_images(&*a, image_history(), false);
                let chunks = collect(a.stream(req).await.unwrap()).await;
                assert!(assemble(&chunks).finish.is_success());
                let body = s.request(0).unwrap().body_text();
                assert!(!body.contains(IMAGE_BASE64), "{}: bytes sent to a text-only model", D::NAME);
                assert!(
                    body.contains("[image omitted because this model accepts text only; attachment sha256:b1ff9c8e]"),
                    "{}: {body}", D::NAME
                );
                let Some(a) = D::image_adapter(&s.base_url(), image_store()) else {
                    return;
                };
                // An image model (a new series: a fresh server): the user's image and the tool
                // result's image as base64.
                let s = server().await;
                s.push(D::text("a small png"));
                let a = D::image_adapter(&s.base_url(), image_store()).unwrap();
                let req = request_with_images(&*a, image_history(), true);
                let chunks = collect(a.stream(req).await.unwrap()).await;
                assert!(assemble(&chunks).finish.is_success(), "{chunks:?}");
                let body = s.request(0).unwrap().body_json().unwrap();
                assert!(D::sent_image(&body, "image/png", IMAGE_BASE64, false), "{}: {body}", D::NAME);
                assert!(D::sent_image(&body, "image/png", IMAGE_BASE64, true), "{}: {body}", D::NAME);
                assert!(s.dsh_rule_violations().is_empty(), "{:?}", s.dsh_rule_violations());
                // Bytes that cannot be read: the typed refusal, before any I/O.
                let mut history = image_history();
                history.truncate(2);
                history[1] = dsh_llm::Message::new(
                    "u1",
                    dsh_llm::Role::User,
                    vec![$crate::image_block(
                        "sha256:0000000000000000000000000000000000000000000000000000000000000000",
                    )],
                    dsh_llm::MessageSource::user(),
                );
                let req = request_with_images(&*a, history, true);
                let f = a.stream(req).await.err().expect("refused before I/O");
                assert_eq!(f.code, codes::UNSUPPORTED_CONTENT, "{}", f.message);
                assert!(f.message.contains("not in the store"), "{}", f.message);
                assert_eq!(s.request_count(), 1);
            }

            #[tokio::test]
            async fn one_connection_for_twenty_steps() {
                let s = server().await;
                for i in 0..20 {
                    s.push(D::text(&format!("answer {i}")));
                }
                let a = D::adapter(&s.base_url(), 60_000);
                for _ in 0..20 {
                    let chunks = run(&*a, prompt()).await.unwrap();
                    assert!(assemble(&chunks).finish.is_success());
                }
                assert_eq!(s.request_count(), 20);
                assert_eq!(s.connection_count(), 1, "{} reuses its connection", D::NAME);
            }
        }
    };
}
