//! Randomized run plans and the scripts they push to the scripted adapter.

use super::*;

/// How one attempt fails before the step's success.
#[derive(Debug, Clone)]
pub(super) enum Failure {
    /// The adapter refuses before streaming.
    Refused,
    /// A text prefix streams, then the finish carries an error.
    MidStream,
}

#[derive(Debug, Clone)]
pub(super) struct StepPlan {
    /// Failed attempts before the answer; every one is retried.
    pub(super) retried: Vec<Failure>,
    pub(super) reasoning: bool,
    pub(super) text: bool,
    /// Tool indices into [`TOOLS`]; empty = the final text answer.
    pub(super) calls: Vec<usize>,
}

#[derive(Debug, Clone)]
pub(super) struct TurnPlan {
    /// Which of [`TOOLS`] are registered during this turn.
    pub(super) tools: [bool; 3],
    pub(super) steps: Vec<StepPlan>,
    /// How the turn's last step ends.
    pub(super) ending: Ending,
    /// `agent/pre-step` starts a new request series at the turn's first step.
    pub(super) new_series: bool,
    /// The variant of the prompt section during this turn (`None`: not registered).
    pub(super) prompt: Option<u8>,
    /// The variant of the runtime-context section during this turn (`None`: not registered).
    pub(super) runtime: Option<u8>,
    /// Dispose the agent before this turn and resume its stored session in a new loop instance.
    pub(super) resume: bool,
    /// `keep_inbox` of the cancellation a `gamma` call with `n == 2` makes.
    pub(super) keep_inbox: bool,
}

/// How a turn's last step ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Ending {
    /// The planned text answer.
    Answer,
    /// A failure the listener does not retry (`FATAL`): the turn ends `error`.
    Fatal,
    /// Text and a cut tool call, finish `max-tokens`: the turn ends `max-tokens`.
    MaxTokens,
    /// The last step's `gamma` call with `n == 2` (third call) cancels the agent: later calls
    /// are never dispatched and the turn ends `aborted`. Set by the plan's normalisation.
    Cancelled,
}

pub(super) fn failure() -> impl Strategy<Value = Failure> {
    prop_oneof![Just(Failure::Refused), Just(Failure::MidStream)]
}

pub(super) fn step(calls: bool) -> impl Strategy<Value = StepPlan> {
    let calls = if calls {
        prop::collection::vec(0usize..3, 1..=4).boxed()
    } else {
        Just(Vec::new()).boxed()
    };
    (
        prop::collection::vec(failure(), 0..=2),
        any::<bool>(),
        any::<bool>(),
        calls,
    )
        .prop_map(|(retried, reasoning, text, calls)| StepPlan {
            // A text-only answer always carries text.
            text: text || calls.is_empty(),
            retried,
            reasoning,
            calls,
        })
}

pub(super) fn turn() -> impl Strategy<Value = TurnPlan> {
    (
        any::<[bool; 3]>(),
        prop::collection::vec(step(true), 0..=3),
        step(false),
        prop_oneof![
            6 => Just(Ending::Answer),
            1 => Just(Ending::Fatal),
            1 => Just(Ending::MaxTokens),
        ],
        prop::bool::weighted(0.2),
        prop::option::of(0u8..2),
        prop::option::of(0u8..2),
        prop::bool::weighted(0.2),
        any::<bool>(),
    )
        .prop_map(
            |(tools, mut steps, last, mut ending, new_series, prompt, runtime, resume, keep)| {
                steps.push(last);
                // A registered `gamma` as third call cancels the turn: nothing after that step
                // is ever requested.
                if let Some(s) = steps
                    .iter()
                    .position(|s| tools[2] && s.calls.get(2) == Some(&2))
                {
                    steps.truncate(s + 1);
                    ending = Ending::Cancelled;
                }
                TurnPlan {
                    tools,
                    steps,
                    ending,
                    new_series,
                    prompt,
                    runtime,
                    resume,
                    keep_inbox: keep,
                }
            },
        )
}

pub(super) fn block(index: u32, kind: BlockKind, text: &str) -> Vec<StreamChunk> {
    let (delta, end) = match kind {
        BlockKind::Reasoning => (
            StreamChunk::ReasoningDelta {
                index,
                text: text.into(),
            },
            ContentBlock::reasoning(text),
        ),
        _ => (
            StreamChunk::TextDelta {
                index,
                text: text.into(),
            },
            ContentBlock::text(text),
        ),
    };
    vec![
        StreamChunk::BlockStart {
            index,
            block_type: kind,
        },
        delta,
        StreamChunk::BlockEnd { index, block: end },
    ]
}

/// Pushes the scripts of one planned step (`t`/`s` label ids and texts).
pub(super) fn script_step(
    llm: &Scripted,
    plan: &StepPlan,
    t: usize,
    s: usize,
    ending: Ending,
    keep: bool,
) {
    for (k, f) in plan.retried.iter().enumerate() {
        let failure = LlmFailure::new("RETRY_ME", format!("transient {t}.{s}.{k}"));
        llm.push(match f {
            Failure::Refused => Script::Fail(failure),
            Failure::MidStream => {
                let mut chunks = block(0, BlockKind::Text, &format!("partial {t}.{s}.{k}"));
                chunks.push(StreamChunk::finish(FinishReason::error(failure)));
                Script::Chunks(chunks)
            }
        });
    }
    match ending {
        Ending::Answer | Ending::Cancelled => {}
        Ending::Fatal => {
            llm.push(Script::Fail(LlmFailure::new(
                "FATAL",
                format!("fatal {t}.{s}"),
            )));
            return;
        }
        Ending::MaxTokens => {
            let mut chunks = block(0, BlockKind::Text, &format!("cut {t}.{s}"));
            chunks.push(StreamChunk::BlockStart {
                index: 1,
                block_type: BlockKind::ToolCall,
            });
            chunks.push(StreamChunk::ToolCallDelta {
                index: 1,
                id: format!("cut-{t}-{s}"),
                name: Some("alpha".into()),
                arguments_delta: r#"{"n":"#.into(),
            });
            // Adapters close every open block before the finish (the cut call included).
            chunks.push(StreamChunk::BlockEnd {
                index: 1,
                block: ContentBlock::ToolCall(ToolCall {
                    id: format!("cut-{t}-{s}"),
                    name: "alpha".into(),
                    arguments: r#"{"n":"#.into(),
                }),
            });
            chunks.push(StreamChunk::finish(FinishReason::MaxTokens));
            llm.push(Script::Chunks(chunks));
            return;
        }
    }
    let mut chunks = Vec::new();
    let mut index = 0u32;
    if plan.reasoning {
        chunks.extend(block(
            index,
            BlockKind::Reasoning,
            &format!("think {t}.{s}"),
        ));
        index += 1;
    }
    if plan.text {
        chunks.extend(block(index, BlockKind::Text, &format!("say {t}.{s}")));
        index += 1;
    }
    for (c, tool) in plan.calls.iter().enumerate() {
        let id = format!("call-{t}-{s}-{c}");
        let name = TOOLS[*tool].0.to_owned();
        let arguments = format!(r#"{{"n":{c},"keep":{keep}}}"#);
        chunks.push(StreamChunk::BlockStart {
            index,
            block_type: BlockKind::ToolCall,
        });
        chunks.push(StreamChunk::ToolCallDelta {
            index,
            id: id.clone(),
            name: Some(name.clone()),
            arguments_delta: arguments.clone(),
        });
        chunks.push(StreamChunk::BlockEnd {
            index,
            block: ContentBlock::ToolCall(ToolCall {
                id,
                name,
                arguments: arguments.into(),
            }),
        });
        index += 1;
    }
    chunks.push(StreamChunk::finish(if plan.calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    }));
    llm.push(Script::Chunks(chunks));
}
