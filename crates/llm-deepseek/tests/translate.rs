//! Fixture decoding, random re-fragmenting, and translation edge cases.

use dsh_llm::{BlockAssembler, BlockKind, ContentBlock, FinishReason, StreamChunk, TokenUsage};
use proptest::prelude::*;
use serde_json::json;

use crate::common::{decode, fixture};

fn start(index: u32, kind: BlockKind) -> StreamChunk {
    StreamChunk::BlockStart {
        index,
        block_type: kind,
    }
}
fn text(index: u32, t: &str) -> StreamChunk {
    StreamChunk::TextDelta {
        index,
        text: t.into(),
    }
}
fn reasoning(index: u32, t: &str) -> StreamChunk {
    StreamChunk::ReasoningDelta {
        index,
        text: t.into(),
    }
}
fn call(index: u32, id: &str, args: &str) -> StreamChunk {
    StreamChunk::ToolCallDelta {
        index,
        id: id.into(),
        name: Some("read".into()),
        arguments_delta: args.into(),
    }
}
fn end(index: u32, block: ContentBlock) -> StreamChunk {
    StreamChunk::BlockEnd { index, block }
}
fn usage(input: u64, output: u64, cache: u64, reasoning: Option<u64>) -> StreamChunk {
    StreamChunk::Usage {
        usage: TokenUsage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: Some(cache),
            reasoning_tokens: reasoning,
            ..Default::default()
        },
    }
}

pub fn expected(name: &str) -> Vec<StreamChunk> {
    const C0: &str = "call_00_JQSxFX1xOHGH6ajdpN88RMXO";
    const C1: &str = "call_01_L8UtYbkfaMFr7hzsToGPWGfI";
    match name {
        "text.sse" => vec![
            start(0, BlockKind::Text),
            text(0, "Hello"),
            text(0, "! How can I help"),
            text(0, " you today?"),
            end(0, ContentBlock::text("Hello! How can I help you today?")),
            usage(12, 9, 0, None),
            StreamChunk::finish(FinishReason::Stop),
        ],
        "reasoning-text.sse" => vec![
            start(0, BlockKind::Reasoning),
            reasoning(0, "9.8 = 9.80"),
            reasoning(0, " > 9.11."),
            start(1, BlockKind::Text),
            text(1, "9.8"),
            text(1, " is greater."),
            end(0, ContentBlock::reasoning("9.8 = 9.80 > 9.11.")),
            end(1, ContentBlock::text("9.8 is greater.")),
            usage(27, 17, 256, Some(9)),
            StreamChunk::finish(FinishReason::Stop),
        ],
        "parallel-tools.sse" => vec![
            start(0, BlockKind::Reasoning),
            reasoning(0, "Need both files; read them in parallel."),
            start(1, BlockKind::Text),
            text(1, "Reading both files."),
            start(2, BlockKind::ToolCall),
            call(2, C0, ""),
            call(2, C0, "{\""),
            call(2, C0, "file_pa"),
            call(2, C0, "th\": \"src/ma"),
            call(2, C0, "in.rs\"}"),
            start(3, BlockKind::ToolCall),
            call(3, C1, ""),
            call(3, C1, "{\"file_path\": \"Cargo.toml\"}"),
            end(
                0,
                ContentBlock::reasoning("Need both files; read them in parallel."),
            ),
            end(1, ContentBlock::text("Reading both files.")),
            end(
                2,
                ContentBlock::tool_call(C0, "read", "{\"file_path\": \"src/main.rs\"}"),
            ),
            end(
                3,
                ContentBlock::tool_call(C1, "read", "{\"file_path\": \"Cargo.toml\"}"),
            ),
            usage(50, 85, 256, Some(31)),
            StreamChunk::finish(FinishReason::ToolCalls),
        ],
        _ => unreachable!(),
    }
}

pub const FIXTURES: [&str; 3] = ["text.sse", "reasoning-text.sse", "parallel-tools.sse"];

#[test]
fn every_fixture_decodes_to_the_expected_chunks() {
    for name in FIXTURES {
        let (chunks, done) = decode(&fixture(name), &[]);
        assert!(done, "{name}");
        assert_eq!(chunks, expected(name), "{name}");
        // The chunks honour the contract: the assembler folds them without complaint.
        let mut a = BlockAssembler::new();
        for c in &chunks {
            a.push(c).unwrap();
        }
        a.finish().unwrap();
    }
}

#[test]
fn every_single_byte_split_and_line_ending_gives_the_same_chunks() {
    for name in FIXTURES {
        let bytes = fixture(name);
        let all_cuts: Vec<usize> = (0..bytes.len()).collect();
        assert_eq!(decode(&bytes, &all_cuts).0, expected(name), "{name}");
        let text = String::from_utf8(bytes).unwrap();
        for ending in ["\r\n", "\r"] {
            let mut alt = "\u{feff}".to_owned();
            alt.push_str(&text.replace('\n', ending));
            assert_eq!(
                decode(alt.as_bytes(), &[3, 100]).0,
                expected(name),
                "{name} {ending:?}"
            );
        }
    }
}

proptest! {
    #[test]
    fn random_refragmenting_gives_identical_chunks(
        cuts in prop::collection::vec(any::<usize>(), 0..64),
    ) {
        for name in FIXTURES {
            let (chunks, done) = decode(&fixture(name), &cuts);
            prop_assert!(done);
            prop_assert_eq!(chunks, expected(name));
        }
    }
}

fn sse(events: &[serde_json::Value]) -> Vec<u8> {
    let mut s = String::new();
    for e in events {
        s.push_str(&format!("data: {e}\n\n"));
    }
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

fn delta(d: serde_json::Value, finish: Option<&str>) -> serde_json::Value {
    json!({"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":d,"logprobs":null,"finish_reason":finish}],"usage":null})
}

fn wire_usage() -> serde_json::Value {
    json!({"prompt_tokens":306,"completion_tokens":85,"total_tokens":391,"prompt_cache_hit_tokens":256,"prompt_cache_miss_tokens":50})
}

#[test]
fn usage_from_a_trailing_chunk_last_wins_and_falls_back_to_hit_tokens() {
    let want = StreamChunk::Usage {
        usage: TokenUsage {
            input_tokens: 50,
            output_tokens: 85,
            cache_read_tokens: Some(256),
            ..Default::default()
        },
    };
    for trailing in [
        json!({"id":"x","choices":[],"usage":wire_usage()}),
        json!({"id":"x","choices":null,"usage":wire_usage()}),
        json!({"id":"x","usage":wire_usage()}),
    ] {
        let mut fin = delta(json!({"content":""}), Some("stop"));
        fin["usage"] = json!({"prompt_tokens":1,"completion_tokens":1});
        let bytes = sse(&[delta(json!({"content":"hi"}), None), fin, trailing]);
        let (chunks, _) = decode(&bytes, &[]);
        assert_eq!(chunks[chunks.len() - 2], want);
        assert_eq!(
            chunks[chunks.len() - 1],
            StreamChunk::finish(FinishReason::Stop)
        );
    }
}

fn finish_of(bytes: &[u8]) -> FinishReason {
    match decode(bytes, &[]).0.pop().unwrap() {
        StreamChunk::Finish { reason, .. } => reason,
        other => panic!("last chunk is {other:?}"),
    }
}

#[test]
fn finish_reason_mapping() {
    let code = |wire: &str| {
        let r = finish_of(&sse(&[delta(json!({"content":"a"}), Some(wire))]));
        match r {
            FinishReason::Error { failure } => {
                assert_eq!(failure.message, format!("model stopped: {wire}"));
                failure.code.as_str().to_owned()
            }
            other => format!("{other:?}"),
        }
    };
    assert_eq!(code("stop"), "Stop");
    assert_eq!(code("tool_calls"), "ToolCalls");
    assert_eq!(code("length"), "MaxTokens");
    assert_eq!(code("content_filter"), "CONTENT_FILTER");
    assert_eq!(code("insufficient_system_resource"), "SERVER");
    assert_eq!(code("aborted"), "SERVER");
    assert_eq!(code("weird_reason"), "WEIRD_REASON");
    // No finish_reason at all: stop.
    assert_eq!(
        finish_of(&sse(&[delta(json!({"content":"a"}), None)])),
        FinishReason::Stop
    );
}

#[test]
fn empty_response_after_usage_and_reasoning_only_success() {
    let mut fin = delta(
        json!({"role":"assistant","content":null,"reasoning_content":""}),
        Some("stop"),
    );
    fin["usage"] = wire_usage();
    let (chunks, _) = decode(&sse(&[fin]), &[]);
    assert_eq!(chunks.len(), 2);
    assert!(matches!(chunks[0], StreamChunk::Usage { .. }));
    let StreamChunk::Finish {
        reason: FinishReason::Error { failure },
        ..
    } = &chunks[1]
    else {
        panic!("{chunks:?}")
    };
    assert_eq!(failure.code, "EMPTY_RESPONSE");
    assert_eq!(
        failure.message,
        "model returned a completed response with no content"
    );

    let r = finish_of(&sse(&[delta(
        json!({"reasoning_content":"hmm"}),
        Some("stop"),
    )]));
    assert_eq!(r, FinishReason::Stop);
}

#[test]
fn later_empty_id_and_name_keep_the_first() {
    let bytes = sse(&[
        delta(
            json!({"tool_calls":[{"index":0,"id":"call_00_a","type":"function","function":{"name":"bash","arguments":""}}]}),
            None,
        ),
        delta(
            json!({"tool_calls":[{"index":0,"id":"","type":"function","function":{"name":"","arguments":"{}"}}]}),
            Some("tool_calls"),
        ),
    ]);
    let (chunks, _) = decode(&bytes, &[]);
    assert_eq!(
        chunks[2],
        StreamChunk::ToolCallDelta {
            index: 0,
            id: "call_00_a".into(),
            name: Some("bash".into()),
            arguments_delta: "{}".into(),
        }
    );
    assert_eq!(
        chunks[3],
        end(0, ContentBlock::tool_call("call_00_a", "bash", "{}"))
    );
}

#[test]
fn length_finish_with_truncated_tool_json_is_max_tokens_and_drops_the_call() {
    let bytes = sse(&[
        delta(json!({"content":"Let me"}), None),
        delta(
            json!({"tool_calls":[{"index":0,"id":"call_00_a","type":"function","function":{"name":"bash","arguments":"{\"comm"}}]}),
            Some("length"),
        ),
    ]);
    let (chunks, _) = decode(&bytes, &[]);
    let mut a = BlockAssembler::new();
    for c in &chunks {
        a.push(c).unwrap();
    }
    let done = a.finish().unwrap();
    assert_eq!(done.finish, FinishReason::MaxTokens);
    assert_eq!(done.content, vec![ContentBlock::text("Let me")]);
    assert_eq!(done.dropped_tool_calls[0].arguments, "{\"comm");
}

#[test]
fn malformed_payload_is_an_error_with_the_payload_head() {
    let mut tr = dsh_llm_deepseek::Translator::new();
    let mut out = Vec::new();
    let long = format!("{{not json {}", "x".repeat(300));
    let err = tr.event(&long, &mut out).unwrap_err();
    assert_eq!(err.code, "MALFORMED_RESPONSE");
    assert_eq!(
        err.message,
        format!("malformed SSE payload: {}", &long[..120])
    );
}

proptest! {
    #[test]
    fn hostile_payloads_never_panic(
        payloads in prop::collection::vec(
            prop_oneof![
                "[{}\\[\\]\":,a-z0-9_ ]{0,40}",
                (0u32..5, "[a-z\"{}]{0,5}", prop::option::of("[a-z_]{0,8}")).prop_map(|(i, a, f)| {
                    delta(
                        json!({"tool_calls":[{"index":i,"function":{"arguments":a}}],"content":a}),
                        f.as_deref(),
                    )
                    .to_string()
                }),
            ],
            0..12,
        ),
    ) {
        let mut tr = dsh_llm_deepseek::Translator::new();
        let mut out = Vec::new();
        for p in &payloads {
            let _ = tr.event(p, &mut out);
        }
        let _ = tr.event("[DONE]", &mut out);
        // Whatever came in, the output keeps the chunk contract.
        let mut a = BlockAssembler::new();
        for c in &out {
            prop_assert!(a.push(c).is_ok(), "{:?}", c);
        }
    }
}
