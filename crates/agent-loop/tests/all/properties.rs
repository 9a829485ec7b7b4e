//! Item 5's two properties over randomized multi-step runs with the scripted adapter:
//! (a) every request can be rebuilt byte for byte from the session log alone;
//! (b) within a request series, each request's messages extend the previous request's.
//!
//! A run is a few followup turns; each turn is a few tool-call steps (1–3 calls to three
//! registered test tools, two parallel-safe and one exclusive; some of them unregistered at
//! that turn), optional reasoning and text blocks, failed attempts an `agent/request-error`
//! listener retries (`RETRY_ME`) or lets fail (`FATAL`, which ends the turn `error`), and a
//! final text answer. The registered tool set changes between turns.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_agent::Agent;
use dsh_agent::hooks::{AgentRequestError, PreStep, RequestErrorDecision};
use dsh_kernel::{BoxError, Ctx, FiberHandle, Plugin};
use dsh_llm::adapter::LlmRequest;
use dsh_llm::{BlockKind, ContentBlock, FinishReason, LlmFailure, Role, StreamChunk, ToolCall};
use dsh_session::data::RequestHeader;
use dsh_session::{Event, SessionLog};
use dsh_tools::{FnTool, ToolOutput, Tools};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::*;

/// The three test tools: `(name, parallel-safe)`.
const TOOLS: [(&str, bool); 3] = [("alpha", true), ("beta", true), ("gamma", false)];

fn test_tool(name: &str, parallel: bool) -> FnTool {
    let label = name.to_owned();
    let tool = FnTool::new(
        name,
        format!("Test tool {name}."),
        json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        move |_c, args| {
            let label = label.clone();
            async move {
                // Let parallel calls interleave.
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
                Ok(ToolOutput::text(format!("{label} -> {}", args["n"])))
            }
        },
    );
    if parallel { tool.parallel_safe() } else { tool }
}

#[derive(Clone, Default, serde::Deserialize, schemars::JsonSchema)]
struct ToolSetConfig {
    #[serde(skip)]
    tool: Option<(String, bool)>,
}

/// Registers one test tool for as long as it is mounted (disposing it removes the tool).
struct ToolSetPlugin;
impl Plugin for ToolSetPlugin {
    const NAME: &'static str = "prop-tool";
    type Config = ToolSetConfig;
    fn deps() -> Vec<dsh_kernel::Dep> {
        vec![dsh_kernel::Dep::on::<dyn Tools>()]
    }
    async fn apply(ctx: Ctx, c: ToolSetConfig) -> Result<(), BoxError> {
        let (name, parallel) = c.tool.ok_or("no tool")?;
        ctx.dep::<dyn Tools>()?
            .register(&ctx, Arc::new(test_tool(&name, parallel)))?;
        Ok(())
    }
}

/// How one attempt fails before the step's success.
#[derive(Debug, Clone)]
enum Failure {
    /// The adapter refuses before streaming.
    Refused,
    /// A text prefix streams, then the finish carries an error.
    MidStream,
}

#[derive(Debug, Clone)]
struct StepPlan {
    /// Failed attempts before the answer; every one is retried.
    retried: Vec<Failure>,
    reasoning: bool,
    text: bool,
    /// Tool indices into [`TOOLS`]; empty = the final text answer.
    calls: Vec<usize>,
}

#[derive(Debug, Clone)]
struct TurnPlan {
    /// Which of [`TOOLS`] are registered during this turn.
    tools: [bool; 3],
    steps: Vec<StepPlan>,
    /// The turn's last step fails for good (`FATAL`) instead of answering.
    fatal: bool,
    /// `agent/pre-step` starts a new request series at the turn's first step.
    new_series: bool,
}

fn failure() -> impl Strategy<Value = Failure> {
    prop_oneof![Just(Failure::Refused), Just(Failure::MidStream)]
}

fn step(calls: bool) -> impl Strategy<Value = StepPlan> {
    let calls = if calls {
        prop::collection::vec(0usize..3, 1..=3).boxed()
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

fn turn() -> impl Strategy<Value = TurnPlan> {
    (
        any::<[bool; 3]>(),
        prop::collection::vec(step(true), 0..=3),
        step(false),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(tools, mut steps, last, fatal, new_series)| {
            steps.push(last);
            TurnPlan {
                tools,
                steps,
                fatal,
                new_series,
            }
        })
}

fn block(index: u32, kind: BlockKind, text: &str) -> Vec<StreamChunk> {
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
fn script_step(llm: &Scripted, plan: &StepPlan, t: usize, s: usize, fatal: bool) {
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
    if fatal {
        llm.push(Script::Fail(LlmFailure::new(
            "FATAL",
            format!("fatal {t}.{s}"),
        )));
        return;
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
        let arguments = format!(r#"{{"n":{c}}}"#);
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
                arguments,
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

/// A request as comparable JSON: route settings, tools and messages.
fn request_json(r: &LlmRequest) -> (Value, Vec<String>) {
    let settings = json!({
        "provider": r.provider,
        "model": r.model,
        "effort": r.effort,
        "maxTokens": r.max_tokens,
        "temperature": r.temperature,
        "stop": r.stop,
        "tools": serde_json::to_value(&r.tools).unwrap(),
    });
    let messages = r
        .messages
        .iter()
        .map(|m| serde_json::to_string(m).unwrap())
        .collect();
    (settings, messages)
}

/// The request rebuilt from a log prefix alone: the latest header's settings and tools, and the
/// derived history without developer messages.
fn rebuilt(log: &SessionLog) -> (Value, Vec<String>) {
    let header: RequestHeader = log
        .latest_request_header()
        .expect("a request without a header")
        .data_as()
        .unwrap();
    let c = &header.header.config;
    let tools: Vec<Value> = header
        .header
        .tools
        .unwrap_or_default()
        .into_iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    let settings = json!({
        "provider": c.provider,
        "model": c.model,
        "effort": c.reasoning_effort,
        "maxTokens": c.max_tokens.unwrap(),
        "temperature": c.temperature,
        "stop": c.stop.clone().unwrap_or_default(),
        "tools": tools,
    });
    let messages = log
        .derive_messages()
        .iter()
        .filter(|m| m.role != Role::Developer)
        .map(|m| serde_json::to_string(&**m).unwrap())
        .collect();
    (settings, messages)
}

/// Positions (event indices) of the committed outcome of every request, in request order: each
/// adapter call is followed by exactly one `assistant/message` or `assistant/attempt`.
fn request_positions(events: &[Arc<Event>]) -> Vec<usize> {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.kind(), "assistant/message" | "assistant/attempt"))
        .map(|(i, _)| i)
        .collect()
}

/// Runs a plan; returns the agent's events and the requests the adapter received.
async fn run(plan: Vec<TurnPlan>) -> (Vec<Arc<Event>>, Vec<LlmRequest>, Arc<dyn Agent>, Harness) {
    let h = Harness::new().await;
    h.kernel
        .root()
        .hook::<AgentRequestError, _, _>(|input, next| async move {
            if input.failure.code == "RETRY_ME" {
                RequestErrorDecision::Retry
            } else {
                next.run(input).await
            }
        })
        .unwrap();
    // A fresh session: plan turn `t` is session turn `t + 1`.
    let series_turns: Vec<u64> = plan
        .iter()
        .enumerate()
        .filter(|(_, t)| t.new_series)
        .map(|(i, _)| i as u64 + 1)
        .collect();
    h.kernel
        .root()
        .hook::<PreStep, _, _>(move |mut input, next| {
            if input.step == 1 && series_turns.contains(&input.turn) {
                input.starts_request_series = true;
            }
            next.run(input)
        })
        .unwrap();
    let agent = h.agent().await;
    let mut mounted: HashMap<usize, FiberHandle> = HashMap::new();
    for (t, turn) in plan.iter().enumerate() {
        // Change the tool set between turns (the agent is idle).
        for (i, (name, parallel)) in TOOLS.iter().enumerate() {
            match (turn.tools[i], mounted.contains_key(&i)) {
                (true, false) => {
                    let handle = h
                        .kernel
                        .mount_plugin::<ToolSetPlugin>(ToolSetConfig {
                            tool: Some(((*name).to_owned(), *parallel)),
                        })
                        .unwrap();
                    handle.ready().await.unwrap();
                    mounted.insert(i, handle);
                }
                (false, true) => mounted.remove(&i).unwrap().dispose().await,
                _ => {}
            }
        }
        let last = turn.steps.len() - 1;
        for (s, step) in turn.steps.iter().enumerate() {
            script_step(&h.llm, step, t, s, turn.fatal && s == last);
        }
        agent.followup(user(&format!("turn {t}"))).unwrap();
        idle(&agent).await;
    }
    let events = agent.session().events();
    let requests = std::mem::take(&mut *h.llm.requests.lock());
    (events, requests, agent, h)
}

/// Which property a case checks.
#[derive(Clone, Copy, PartialEq)]
enum Property {
    /// (a) every request rebuilt from the log alone.
    Rebuild,
    /// (b) byte extension within a series.
    Extend,
}

fn check(plan: Vec<TurnPlan>, property: Property) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let expected: usize = plan
            .iter()
            .flat_map(|t| &t.steps)
            .map(|s| s.retried.len() + 1)
            .sum();
        let fatal_turns = plan.iter().filter(|t| t.fatal).count();
        // Nothing here replaces history: only the first request and the turns `agent/pre-step`
        // marks start a series.
        let series = 1 + plan.iter().skip(1).filter(|t| t.new_series).count();
        let (events, requests, agent, h) = run(plan).await;
        prop_assert_eq!(requests.len(), expected, "every script was requested");
        let errors = events
            .iter()
            .filter(|e| e.kind() == "turn/end" && e.data()["reason"]["kind"] == "error")
            .count();
        prop_assert_eq!(errors, fatal_turns);

        // (a) Every request rebuilt from the log prefix that preceded it.
        let positions = request_positions(&events);
        prop_assert_eq!(positions.len(), requests.len());
        let header = agent.session().header();
        let mut series_starts = Vec::new();
        let mut rebuilt_messages = Vec::new();
        let mut last_pos = 0usize;
        for (k, (pos, request)) in positions.iter().zip(&requests).enumerate() {
            let sent = request_json(request);
            if property == Property::Rebuild {
                let prefix: Vec<Event> = events[..*pos].iter().map(|e| (**e).clone()).collect();
                let log = SessionLog::replay(header.clone(), prefix).unwrap();
                let from_log = rebuilt(&log);
                prop_assert_eq!(&from_log.0, &sent.0, "request {} settings/tools", k);
                prop_assert_eq!(&from_log.1, &sent.1, "request {} messages", k);
            }
            // Series: a header with reason `series` or `startsSeries` since the last request.
            let starts = k == 0
                || events[last_pos..*pos].iter().any(|e| {
                    e.kind() == "request/header"
                        && (e.data()["reason"] == "series" || e.data()["startsSeries"] == true)
                });
            series_starts.push(starts);
            rebuilt_messages.push(sent.1);
            last_pos = *pos;
        }

        prop_assert_eq!(series_starts.iter().filter(|s| **s).count(), series);

        // (b) Within a series, each request extends the previous one byte for byte.
        for k in 1..requests.len() {
            if property != Property::Extend || series_starts[k] {
                continue;
            }
            let (prev, cur) = (&rebuilt_messages[k - 1], &rebuilt_messages[k]);
            prop_assert!(
                cur.len() >= prev.len() && cur[..prev.len()] == prev[..],
                "request {} does not extend request {}",
                k,
                k - 1
            );
        }
        h.kernel.dispose().await;
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// (a) Every request the adapter received equals the one rebuilt from the log prefix that
    /// preceded its outcome: the latest header's settings and tools, and the derived history
    /// without developer messages.
    #[test]
    fn every_request_rebuilds_byte_for_byte_from_the_log(
        plan in prop::collection::vec(turn(), 1..=4)
    ) {
        check(plan, Property::Rebuild)?;
    }

    /// (b) Each request's messages are a byte extension of the previous request's, unless a
    /// `request/header` with reason `series` or `startsSeries: true` came between them.
    #[test]
    fn requests_extend_the_previous_request_within_a_series(
        plan in prop::collection::vec(turn(), 1..=4)
    ) {
        check(plan, Property::Extend)?;
    }
}
