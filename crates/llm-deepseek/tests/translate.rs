//! Fixture decoding, random re-fragmenting, and translation edge cases.

use dsh_llm::{
    BlockAssembler, BlockKind, ContentBlock, FailureCode, FinishReason, StreamChunk, StreamNote,
    TokenUsage,
};
use dsh_llm_deepseek::Translator;
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
fn malformed_payload_errors_name_the_problem_not_the_payload() {
    let mut tr = dsh_llm_deepseek::Translator::new();
    let mut out = Vec::new();
    let long = format!("{{not json {}", "x".repeat(300));
    let err = tr.event(&long, &mut out).unwrap_err();
    assert_eq!(err.code, FailureCode::MalformedResponse);
    assert_eq!(
        err.message,
        "malformed SSE payload: not JSON (key must be a string at line 1 column 2)"
    );
    assert!(!err.message.contains("xxxx"), "{}", err.message);
    // A wrong type names the field.
    for (chunk, want) in [
        (
            json!({"choices":[{"delta":{"content":5}}]}),
            "`choices[0].delta.content` is a number, expected a string",
        ),
        (
            json!({"choices":{"delta":{}}}),
            "`choices` is an object, expected an array",
        ),
        (
            json!({"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}),
            "`choices[0].delta.tool_calls[0].index` is a number, expected a call index (u32)",
        ),
        (
            json!({"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"a":1}}}]}}]}),
            "`choices[0].delta.tool_calls[0].function.arguments` is an object, expected a string",
        ),
        (
            json!({"choices":[{"finish_reason":1}]}),
            "`choices[0].finish_reason` is a number, expected a string",
        ),
    ] {
        let err = Translator::new()
            .event(&chunk.to_string(), &mut out)
            .unwrap_err();
        assert_eq!(err.message, format!("malformed SSE payload: {want}"));
    }
}

/// The chunks of one whole SSE body.
fn all_chunks(events: &[serde_json::Value]) -> Vec<StreamChunk> {
    let (chunks, done) = decode(&sse(events), &[]);
    assert!(done);
    chunks
}

fn notes_of(chunks: &[StreamChunk]) -> Vec<StreamNote> {
    match chunks.last() {
        Some(StreamChunk::Finish { notes, .. }) => notes.clone(),
        other => panic!("last chunk is {other:?}"),
    }
}

#[test]
fn a_bad_usage_value_is_dropped_and_the_answer_kept() {
    for bad in [
        "-5",
        "1e30",
        "18446744073709551617",
        "1e308",
        "\"7\"",
        "1.5",
    ] {
        let fin = format!(
            r#"{{"id":"x","choices":[{{"index":0,"delta":{{"content":""}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":{bad},"completion_tokens":9,"prompt_cache_hit_tokens":2}}}}"#
        );
        let fin: serde_json::Value = serde_json::from_str(&fin).unwrap();
        let chunks = all_chunks(&[delta(json!({"content":"the answer"}), None), fin]);
        let mut a = BlockAssembler::new();
        for c in &chunks {
            a.push(c).unwrap();
        }
        let done = a.finish().unwrap();
        assert_eq!(done.finish, FinishReason::Stop, "{bad}");
        assert_eq!(done.content, vec![ContentBlock::text("the answer")]);
        assert_eq!(
            done.usage,
            Some(TokenUsage {
                input_tokens: 0,
                output_tokens: 9,
                cache_read_tokens: Some(2),
                ..Default::default()
            })
        );
        assert_eq!(
            done.notes,
            vec![StreamNote::UsageFieldDropped {
                field: "usage.prompt_tokens".into(),
                value: serde_json::from_str::<serde_json::Value>(bad)
                    .unwrap()
                    .to_string()
            }],
            "{bad}"
        );
    }
    // A usage that is not an object at all is dropped whole.
    let mut fin = delta(json!({"content":""}), Some("stop"));
    fin["usage"] = json!("lots");
    let chunks = all_chunks(&[delta(json!({"content":"ok"}), None), fin]);
    assert!(
        !chunks
            .iter()
            .any(|c| matches!(c, StreamChunk::Usage { .. }))
    );
    assert_eq!(
        notes_of(&chunks),
        vec![StreamNote::UsageFieldDropped {
            field: "usage".into(),
            value: "\"lots\"".into()
        }]
    );
}

#[test]
fn lone_surrogates_become_replacement_characters() {
    let events = [
        r#"{"id":"x","choices":[{"index":0,"delta":{"content":"a\ud800b"},"finish_reason":null}]}"#,
        r#"{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"\udfff"},"finish_reason":null}]}"#,
        r#"{"id":"x","choices":[{"index":0,"delta":{"content":" \ud83d\ude00"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
    ];
    let mut bytes = String::new();
    for e in events {
        bytes.push_str(&format!("data: {e}\n\n"));
    }
    bytes.push_str("data: [DONE]\n\n");
    let (chunks, done) = decode(bytes.as_bytes(), &[]);
    assert!(done);
    let mut a = BlockAssembler::new();
    for c in &chunks {
        a.push(c).unwrap();
    }
    let done = a.finish().unwrap();
    assert_eq!(done.finish, FinishReason::Stop);
    assert_eq!(
        done.content,
        vec![
            ContentBlock::text("a\u{fffd}b \u{1f600}"),
            ContentBlock::reasoning("\u{fffd}"),
        ]
    );
    assert_eq!(
        done.notes,
        vec![StreamNote::SurrogatesReplaced { count: 2 }]
    );
    // What the log gets is valid JSON.
    let logged = serde_json::to_string(&done.content).unwrap();
    assert!(serde_json::from_str::<serde_json::Value>(&logged).is_ok());
}

#[test]
fn a_tool_call_without_an_id_gets_a_stable_synthetic_one() {
    for id in [json!(""), serde_json::Value::Null] {
        let mut head = json!({"tool_calls":[{"index":0,"type":"function","function":{"name":"bash","arguments":""}}]});
        if !id.is_null() {
            head["tool_calls"][0]["id"] = id.clone();
        }
        let mk = || {
            all_chunks(&[
                json!({"id":"resp-1","choices":[{"index":0,"delta":head,"finish_reason":null}]}),
                delta(
                    json!({"tool_calls":[{"index":0,"id":"late","function":{"arguments":"{}"}}]}),
                    Some("tool_calls"),
                ),
            ])
        };
        let chunks = mk();
        assert_eq!(chunks, mk(), "deterministic");
        for c in &chunks {
            if let StreamChunk::ToolCallDelta { id, .. } = c {
                assert_eq!(id, "call_synth_0_resp-1");
            }
        }
        let mut a = BlockAssembler::new();
        for c in &chunks {
            a.push(c).unwrap();
        }
        let done = a.finish().unwrap();
        let call = done.tool_calls().next().unwrap().clone();
        assert_eq!(
            (
                call.id.as_str(),
                call.name.as_str(),
                call.arguments.as_str()
            ),
            ("call_synth_0_resp-1", "bash", "{}")
        );
        assert_eq!(
            done.notes,
            vec![StreamNote::SynthesizedToolCallId {
                index: 0,
                id: "call_synth_0_resp-1".into()
            }]
        );
    }
}

#[test]
fn an_id_repeated_within_one_response_is_replaced_by_a_synthetic_one() {
    let call = |i: u32, args: &str| json!({"tool_calls":[{"index":i,"id":"call_00_same","type":"function","function":{"name":"bash","arguments":args}}]});
    let chunks = all_chunks(&[
        json!({"id":"r9","choices":[{"index":0,"delta":call(0, "{}"),"finish_reason":null}]}),
        json!({"id":"r9","choices":[{"index":0,"delta":call(1, "{}"),"finish_reason":"tool_calls"}]}),
    ]);
    let mut a = BlockAssembler::new();
    for c in &chunks {
        a.push(c).unwrap();
    }
    let done = a.finish().unwrap();
    let ids: Vec<&str> = done.tool_calls().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["call_00_same", "call_synth_1_r9"]);
    assert_eq!(
        done.notes,
        vec![StreamNote::SynthesizedToolCallId {
            index: 1,
            id: "call_synth_1_r9".into()
        }]
    );
}

#[test]
fn a_complete_finish_without_done_can_be_ended() {
    let mut tr = Translator::new();
    let mut out = Vec::new();
    tr.event(&delta(json!({"content":"hi"}), None).to_string(), &mut out)
        .unwrap();
    assert!(!tr.is_complete());
    tr.event(
        &delta(json!({"content":""}), Some("stop")).to_string(),
        &mut out,
    )
    .unwrap();
    assert!(!tr.is_complete(), "no usage yet");
    tr.event(
        &json!({"id":"x","choices":[],"usage":wire_usage()}).to_string(),
        &mut out,
    )
    .unwrap();
    assert!(tr.is_complete());
    tr.end_without_done(&mut out);
    assert_eq!(notes_of(&out), vec![StreamNote::MissingDone]);
    let mut a = BlockAssembler::new();
    for c in &out {
        a.push(c).unwrap();
    }
    assert_eq!(a.finish().unwrap().finish, FinishReason::Stop);
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
