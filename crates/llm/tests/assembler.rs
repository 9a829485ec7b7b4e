//! BlockAssembler: folding, interrupted prefix, max-tokens, protocol violations.

use dsh_llm::{
    BlockAssembler, BlockKind, ContentBlock, FinishReason, LlmFailure, ProtocolViolation,
    StreamChunk, StreamNote, TokenUsage, ToolArguments,
};

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
fn call(index: u32, id: &str, name: Option<&str>, args: &str) -> StreamChunk {
    StreamChunk::ToolCallDelta {
        index,
        id: id.into(),
        name: name.map(Into::into),
        arguments_delta: args.into(),
    }
}
fn end(index: u32, block: ContentBlock) -> StreamChunk {
    StreamChunk::BlockEnd { index, block }
}
fn usage() -> StreamChunk {
    StreamChunk::Usage {
        usage: TokenUsage {
            input_tokens: 1,
            output_tokens: 2,
            ..Default::default()
        },
    }
}

fn tool_stream() -> Vec<StreamChunk> {
    vec![
        start(0, BlockKind::Reasoning),
        reasoning(0, "think"),
        start(1, BlockKind::Text),
        text(1, "Hi"),
        start(2, BlockKind::ToolCall),
        call(2, "c0", Some("read"), ""),
        call(2, "c0", Some("read"), "{\"a\":"),
        call(2, "c0", Some("read"), " 1}"),
        end(0, ContentBlock::reasoning("think")),
        end(1, ContentBlock::text("Hi")),
        end(2, ContentBlock::tool_call("c0", "read", "{\"a\": 1}")),
        usage(),
    ]
}

fn fold(chunks: &[StreamChunk]) -> BlockAssembler {
    let mut a = BlockAssembler::new();
    for c in chunks {
        a.push(c).unwrap();
    }
    a
}

#[test]
fn folds_blocks_in_index_order() {
    let mut chunks = tool_stream();
    chunks.push(StreamChunk::finish(FinishReason::ToolCalls));
    let done = fold(&chunks).finish().unwrap();
    assert_eq!(
        done.content,
        vec![
            ContentBlock::reasoning("think"),
            ContentBlock::text("Hi"),
            ContentBlock::tool_call("c0", "read", "{\"a\": 1}")
        ]
    );
    assert_eq!(done.usage.unwrap().output_tokens, 2);
    assert_eq!(done.finish, FinishReason::ToolCalls);
    assert_eq!(done.tool_calls().count(), 1);
    let msg = done.into_message("m1", "deepseek", "deepseek-flash");
    assert_eq!(msg.source.provider(), Some("deepseek"));
    assert_eq!(msg.reasoning(), "think");
}

/// An adapter may leave a tool call's arguments "as streamed": the assembler's own text becomes
/// them (moved, not copied), in its result and, through `fill`, in the chunk passed on.
#[test]
fn arguments_left_as_streamed_are_the_streamed_text() {
    let mut chunks = tool_stream();
    chunks[10] = end(
        2,
        ContentBlock::tool_call("c0", "read", ToolArguments::streamed()),
    );
    chunks.push(StreamChunk::finish(FinishReason::ToolCalls));
    let mut a = BlockAssembler::new();
    let mut passed_on = Vec::new();
    for mut c in chunks {
        a.push(&c).unwrap();
        a.fill(&mut c);
        passed_on.push(c);
    }
    let StreamChunk::BlockEnd {
        block: ContentBlock::ToolCall(sent),
        ..
    } = &passed_on[10]
    else {
        panic!("{:?}", passed_on[10]);
    };
    assert!(!sent.arguments.is_streamed());
    assert_eq!(sent.arguments, "{\"a\": 1}");
    let done = a.finish().unwrap();
    let call = done.tool_calls().next().unwrap();
    assert_eq!(call.arguments, "{\"a\": 1}");
    assert!(ToolArguments::ptr_eq(&call.arguments, &sent.arguments));
    // Real arguments are still checked against the deltas, and `fill` leaves them alone.
    let mut bad = tool_stream();
    bad[10] = end(2, ContentBlock::tool_call("c0", "read", "{\"a\": 2}"));
    let mut a = BlockAssembler::new();
    let refused = bad.iter().find_map(|c| a.push(c).err());
    assert_eq!(refused, Some(ProtocolViolation::EndMismatch(2)));
    assert!(!ToolArguments::from("").is_streamed() && ToolArguments::streamed().is_streamed());
}

#[test]
fn max_tokens_drops_tool_calls() {
    let mut chunks = tool_stream();
    chunks.push(StreamChunk::finish(FinishReason::MaxTokens));
    let done = fold(&chunks).finish().unwrap();
    assert_eq!(
        done.content,
        vec![ContentBlock::reasoning("think"), ContentBlock::text("Hi")]
    );
    assert_eq!(done.dropped_tool_calls.len(), 1);
    assert_eq!(done.tool_calls().count(), 0);
}

#[test]
fn interrupted_prefix_keeps_delivered_text_and_reasoning_only() {
    let chunks = &tool_stream()[..7];
    let a = fold(chunks);
    assert_eq!(
        a.interrupted_prefix(),
        vec![ContentBlock::reasoning("think"), ContentBlock::text("Hi")]
    );
    assert!(!a.is_finished());
    assert_eq!(a.finish().unwrap_err(), ProtocolViolation::NoFinish);
}

#[test]
fn error_finish_with_open_blocks_is_allowed() {
    let mut a = fold(&tool_stream()[..4]);
    let f = LlmFailure::new("TRANSPORT", "reset");
    a.push(&StreamChunk::finish(FinishReason::error(f.clone())))
        .unwrap();
    let done = a.finish().unwrap();
    assert!(done.content.is_empty());
    assert_eq!(done.finish.failure(), Some(&f));
}

#[test]
fn protocol_violations_are_errors() {
    let finished = {
        let mut c = tool_stream();
        c.push(StreamChunk::finish(FinishReason::Stop));
        c
    };
    let cases: Vec<(Vec<StreamChunk>, StreamChunk, ProtocolViolation)> = vec![
        (
            finished.clone(),
            usage(),
            ProtocolViolation::AfterFinish("usage"),
        ),
        (
            finished.clone(),
            text(1, "x"),
            ProtocolViolation::AfterFinish("text-delta"),
        ),
        (
            vec![],
            text(0, "x"),
            ProtocolViolation::UnknownBlock {
                kind: "text-delta",
                index: 0,
            },
        ),
        (
            vec![start(0, BlockKind::Text)],
            start(0, BlockKind::Text),
            ProtocolViolation::DuplicateStart(0),
        ),
        (
            vec![start(0, BlockKind::Text)],
            reasoning(0, "x"),
            ProtocolViolation::KindMismatch {
                kind: "reasoning-delta",
                index: 0,
                block: "text".into(),
            },
        ),
        (
            vec![start(0, BlockKind::Text), text(0, "a")],
            end(0, ContentBlock::text("b")),
            ProtocolViolation::EndMismatch(0),
        ),
        (
            vec![start(0, BlockKind::Text), end(0, ContentBlock::text(""))],
            text(0, "late"),
            ProtocolViolation::AfterBlockEnd {
                kind: "text-delta",
                index: 0,
            },
        ),
        (
            vec![start(0, BlockKind::Text)],
            StreamChunk::finish(FinishReason::Stop),
            ProtocolViolation::OpenAtFinish(0),
        ),
    ];
    for (prefix, bad, want) in cases {
        let mut a = fold(&prefix);
        assert_eq!(a.push(&bad), Err(want.clone()));
        assert_eq!(want.to_failure().code, "PROTOCOL_VIOLATION");
        assert!(!want.to_string().is_empty());
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Plan {
        Text(Vec<String>),
        Reasoning(Vec<String>),
        Call(String, Vec<String>),
    }

    fn plan() -> impl Strategy<Value = Vec<Plan>> {
        let pieces = || prop::collection::vec("[a-z{}\":é ]{0,6}", 0..5);
        prop::collection::vec(
            prop_oneof![
                pieces().prop_map(Plan::Text),
                pieces().prop_map(Plan::Reasoning),
                ("call_[0-9]{2}", pieces()).prop_map(|(id, p)| Plan::Call(id, p)),
            ],
            0..6,
        )
    }

    /// Chunks for a plan: all starts and deltas in order, then every block-end, usage, finish.
    fn chunks_of(plan: &[Plan], finish: FinishReason) -> Vec<StreamChunk> {
        let mut out = Vec::new();
        let mut ends = Vec::new();
        for (i, p) in plan.iter().enumerate() {
            let i = i as u32;
            match p {
                Plan::Text(ps) => {
                    out.push(start(i, BlockKind::Text));
                    out.extend(ps.iter().map(|t| text(i, t)));
                    ends.push(end(i, ContentBlock::text(ps.concat())));
                }
                Plan::Reasoning(ps) => {
                    out.push(start(i, BlockKind::Reasoning));
                    out.extend(ps.iter().map(|t| reasoning(i, t)));
                    ends.push(end(i, ContentBlock::reasoning(ps.concat())));
                }
                Plan::Call(id, ps) => {
                    out.push(start(i, BlockKind::ToolCall));
                    out.extend(ps.iter().map(|a| call(i, id, Some("t"), a)));
                    ends.push(end(
                        i,
                        ContentBlock::tool_call(id.clone(), "t", ps.concat()),
                    ));
                }
            }
        }
        out.extend(ends);
        out.push(usage());
        out.push(StreamChunk::finish(finish));
        out
    }

    proptest! {
        #[test]
        fn folding_reproduces_the_plan(plan in plan(), max_tokens in any::<bool>()) {
            let finish = if max_tokens { FinishReason::MaxTokens } else { FinishReason::ToolCalls };
            let done = fold(&chunks_of(&plan, finish)).finish().unwrap();
            let want: Vec<ContentBlock> = plan
                .iter()
                .filter_map(|p| match p {
                    Plan::Text(ps) => Some(ContentBlock::text(ps.concat())),
                    Plan::Reasoning(ps) => Some(ContentBlock::reasoning(ps.concat())),
                    Plan::Call(id, ps) if !max_tokens => {
                        Some(ContentBlock::tool_call(id.clone(), "t", ps.concat()))
                    }
                    Plan::Call(..) => None,
                })
                .collect();
            prop_assert_eq!(done.content, want);
            let calls = plan.iter().filter(|p| matches!(p, Plan::Call(..))).count();
            prop_assert_eq!(done.dropped_tool_calls.len(), if max_tokens { calls } else { 0 });
        }

        #[test]
        fn interrupted_prefix_is_what_was_delivered(plan in plan(), cut in any::<prop::sample::Index>()) {
            let chunks = chunks_of(&plan, FinishReason::Stop);
            let cut = cut.index(chunks.len() + 1);
            let a = fold(&chunks[..cut]);
            // Expected: per text/reasoning block, the concatenation of its deltas before the cut.
            let mut want = Vec::new();
            for (i, p) in plan.iter().enumerate() {
                let delivered: String = chunks[..cut]
                    .iter()
                    .filter_map(|c| match c {
                        StreamChunk::TextDelta { index, text }
                        | StreamChunk::ReasoningDelta { index, text } if *index as usize == i => {
                            Some(text.as_str())
                        }
                        _ => None,
                    })
                    .collect();
                match p {
                    Plan::Text(_) if !delivered.is_empty() => want.push(ContentBlock::text(delivered)),
                    Plan::Reasoning(_) if !delivered.is_empty() => {
                        want.push(ContentBlock::reasoning(delivered))
                    }
                    _ => {}
                }
            }
            prop_assert_eq!(a.interrupted_prefix(), want);
        }

        #[test]
        fn arbitrary_chunk_sequences_never_panic(
            plan in plan(),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
        ) {
            // Shuffle-ish: pick chunks from a valid stream in arbitrary order and repetition.
            let pool = chunks_of(&plan, FinishReason::Stop);
            let mut a = BlockAssembler::new();
            for p in picks {
                let _ = a.push(&pool[p.index(pool.len())]);
            }
            let _ = a.interrupted_prefix();
            let _ = a.finish();
        }
    }
}

#[test]
fn ended_blocks_stay_in_the_interrupted_prefix_and_notes_reach_the_result() {
    // Every block ended (their text moved into the ended blocks), no finish yet.
    let all = tool_stream();
    let before_finish: Vec<_> = all
        .iter()
        .take_while(|c| !matches!(c, StreamChunk::Finish { .. }))
        .cloned()
        .collect();
    let a = fold(&before_finish);
    assert_eq!(
        a.interrupted_prefix(),
        vec![ContentBlock::reasoning("think"), ContentBlock::text("Hi")]
    );
    let mut a = fold(&before_finish);
    let notes = vec![
        StreamNote::MissingDone,
        StreamNote::SynthesizedToolCallId {
            index: 2,
            id: "call_synth_0".into(),
        },
    ];
    a.push(&StreamChunk::Finish {
        reason: FinishReason::ToolCalls,
        replay_state: None,
        notes: notes.clone(),
    })
    .unwrap();
    let done = a.finish().unwrap();
    assert_eq!(done.notes, notes);
    assert_eq!(done.tool_calls().count(), 1);
}

#[test]
fn finish_notes_round_trip_and_unknown_notes_are_kept() {
    let chunk = StreamChunk::Finish {
        reason: FinishReason::Stop,
        replay_state: None,
        notes: vec![
            StreamNote::UsageFieldDropped {
                field: "usage.prompt_tokens".into(),
                value: "-5".into(),
            },
            StreamNote::SurrogatesReplaced { count: 2 },
        ],
    };
    let text = serde_json::to_string(&chunk).unwrap();
    assert_eq!(
        text,
        r#"{"type":"finish","reason":{"kind":"stop"},"notes":[{"kind":"usage-field-dropped","field":"usage.prompt_tokens","value":"-5"},{"kind":"surrogates-replaced","count":2}]}"#
    );
    assert_eq!(serde_json::from_str::<StreamChunk>(&text).unwrap(), chunk);
    // No notes: the finish chunk is byte-identical to before.
    assert_eq!(
        serde_json::to_string(&StreamChunk::finish(FinishReason::Stop)).unwrap(),
        r#"{"type":"finish","reason":{"kind":"stop"}}"#
    );
    let other = r#"{"type":"finish","reason":{"kind":"stop"},"notes":[{"kind":"from-elsewhere","x":1},{"kind":"missing-done"}]}"#;
    let parsed: StreamChunk = serde_json::from_str(other).unwrap();
    let StreamChunk::Finish { notes, .. } = &parsed else {
        panic!("{parsed:?}")
    };
    assert_eq!(
        notes,
        &vec![
            StreamNote::Other(serde_json::json!({"kind":"from-elsewhere","x":1})),
            StreamNote::MissingDone
        ]
    );
    assert_eq!(serde_json::to_string(&parsed).unwrap(), other);
}
