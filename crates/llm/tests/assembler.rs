//! BlockAssembler: folding, interrupted prefix, max-tokens, protocol violations.

use dsh_llm::{
    BlockAssembler, BlockKind, ContentBlock, FinishReason, LlmFailure, ProtocolViolation,
    StreamChunk, TokenUsage,
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
