//! Item 5's two properties over randomized multi-step runs with the scripted adapter:
//! (a) every request can be rebuilt byte for byte from the session log alone;
//! (b) within a request series, each request's messages extend the previous request's.
//!
//! A run is a few followup turns; each turn is a few tool-call steps (1–3 calls to three
//! registered test tools, two parallel-safe and one exclusive; some of them unregistered at
//! that turn), optional reasoning and text blocks, failed attempts an `agent/request-error`
//! listener retries (`RETRY_ME`) or lets fail (`FATAL`, which ends the turn `error`), and a
//! final text answer (or a `max-tokens` cut that ends the turn). Between turns the registered
//! tool set, a system prompt section and a runtime-context section change; some turns start a
//! new request series through `agent/pre-step`. Tools defer contexts to the next step (`alpha`
//! with `n == 2`) and steer the agent mid-step (`gamma` with `n == 1`); a registered `gamma` as
//! third call (`n == 2`) cancels the agent (`keep_inbox` varies), so later calls of the message
//! are never dispatched (`ABORTED_BEFORE_DISPATCH`) and the turn ends `aborted`.
//!
//! Sessions persist as JSONL in a tempdir; before some turns the agent is disposed and its
//! session resumed in a new loop instance (a resume alone starts no series, `session-format.md`
//! §9.2), so later requests are rebuilt from events read back from disk.
//!
//! Also checked with (a): each tool call of an assistant message is answered by exactly one
//! later tool message (a dangling call is a request DeepSeek refuses); the `developer/message`
//! emission rule of §9.4; and §9.5 (one route, so exactly one `request/context`).

use std::collections::HashMap;
use std::sync::Arc;

use dsh_agent::hooks::{AgentRequestError, PreStep, RequestErrorDecision};
use dsh_agent::{Agent, AgentOptions, Agents, CancelCause, CreateAgent, ResumeAgent};
use dsh_kernel::{BoxError, Ctx, FiberHandle, Kernel, Plugin};
use dsh_llm::adapter::LlmRequest;
use dsh_llm::{BlockKind, ContentBlock, FinishReason, LlmFailure, Role, StreamChunk, ToolCall};
use dsh_session::data::RequestHeader;
use dsh_session::{Event, SessionHeader, SessionLog};
use dsh_system_prompt::{Section, SystemPrompt, SystemPromptPlugin};
use dsh_tools::{FnTool, ToolOutput, Tools};
use parking_lot::Mutex;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::*;

/// The three test tools: `(name, parallel-safe)`.
const TOOLS: [(&str, bool); 3] = [("alpha", true), ("beta", true), ("gamma", false)];

/// The agent of the case (replaced when it is resumed), for tools that steer it.
type AgentCell = Arc<Mutex<Option<Arc<dyn Agent>>>>;

fn test_tool(name: &str, parallel: bool, agent: AgentCell) -> FnTool {
    let label = name.to_owned();
    let tool = FnTool::new(
        name,
        format!("Test tool {name}."),
        json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        move |_c, args| {
            let label = label.clone();
            let agent = agent.clone();
            async move {
                // Let parallel calls interleave.
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
                let n = args["n"].as_u64().unwrap_or(0);
                let mut out = ToolOutput::text(format!("{label} -> {n}"));
                if label == "alpha" && n == 2 {
                    out.contexts
                        .push(format!("context deferred by {label} {n}"));
                }
                if label == "gamma" && n == 1 {
                    let agent = agent.lock().clone().expect("agent set");
                    agent.steer(user(&format!("steer from {label}"))).unwrap();
                }
                if label == "gamma" && n == 2 {
                    let agent = agent.lock().clone().expect("agent set");
                    agent.cancel(CancelCause::User, args["keep"] == true);
                }
                Ok(out)
            }
        },
    );
    if parallel { tool.parallel_safe() } else { tool }
}

/// What one mounted [`ExtraPlugin`] registers.
#[derive(Clone)]
enum Extra {
    Tool {
        name: String,
        parallel: bool,
        agent: AgentCell,
    },
    Prompt(String),
    Runtime(String),
}

#[derive(Clone, Default, serde::Deserialize, schemars::JsonSchema)]
struct ExtraConfig {
    #[serde(skip)]
    extra: Option<Extra>,
}

/// Registers one test tool, prompt section or runtime-context section for as long as it is
/// mounted: disposing the fiber removes it (and waits for the teardown).
struct ExtraPlugin;
impl Plugin for ExtraPlugin {
    const NAME: &'static str = "prop-extra";
    type Config = ExtraConfig;
    fn deps() -> Vec<dsh_kernel::Dep> {
        vec![
            dsh_kernel::Dep::on::<dyn Tools>(),
            dsh_kernel::Dep::on::<dyn SystemPrompt>(),
        ]
    }
    async fn apply(ctx: Ctx, c: ExtraConfig) -> Result<(), BoxError> {
        match c.extra.ok_or("nothing to register")? {
            Extra::Tool {
                name,
                parallel,
                agent,
            } => ctx
                .dep::<dyn Tools>()?
                .register(&ctx, Arc::new(test_tool(&name, parallel, agent)))?,
            Extra::Prompt(text) => {
                ctx.dep::<dyn SystemPrompt>()?
                    .section(&ctx, Section::new("prop-prompt", text))?;
            }
            Extra::Runtime(text) => {
                ctx.dep::<dyn SystemPrompt>()?
                    .runtime_context(&ctx, Section::new("prop:context", text))?;
            }
        }
        Ok(())
    }
}

/// Mounts or disposes extras so that exactly `want` (key → text) is registered.
async fn sync_extras(
    kernel: &Kernel,
    mounted: &mut HashMap<String, (String, FiberHandle)>,
    want: Vec<(String, String, Extra)>,
) {
    let keys: Vec<String> = want.iter().map(|(k, _, _)| k.clone()).collect();
    let stale: Vec<String> = mounted
        .iter()
        .filter(|(k, (text, _))| !want.iter().any(|(wk, wt, _)| wk == *k && wt == text))
        .map(|(k, _)| k.clone())
        .collect();
    for k in stale {
        mounted.remove(&k).unwrap().1.dispose().await;
    }
    for (key, text, extra) in want {
        if mounted.contains_key(&key) {
            continue;
        }
        let handle = kernel
            .mount_plugin::<ExtraPlugin>(ExtraConfig { extra: Some(extra) })
            .unwrap();
        handle.ready().await.unwrap();
        mounted.insert(key, (text, handle));
    }
    assert!(mounted.keys().all(|k| keys.contains(k)));
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
    /// How the turn's last step ends.
    ending: Ending,
    /// `agent/pre-step` starts a new request series at the turn's first step.
    new_series: bool,
    /// The variant of the prompt section during this turn (`None`: not registered).
    prompt: Option<u8>,
    /// The variant of the runtime-context section during this turn (`None`: not registered).
    runtime: Option<u8>,
    /// Dispose the agent before this turn and resume its stored session in a new loop instance.
    resume: bool,
    /// `keep_inbox` of the cancellation a `gamma` call with `n == 2` makes.
    keep_inbox: bool,
}

/// How a turn's last step ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
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

fn failure() -> impl Strategy<Value = Failure> {
    prop_oneof![Just(Failure::Refused), Just(Failure::MidStream)]
}

fn step(calls: bool) -> impl Strategy<Value = StepPlan> {
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

fn turn() -> impl Strategy<Value = TurnPlan> {
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

/// Whether the cancelling step also steered (`gamma` with `n == 1`) and the cancellation keeps
/// the inbox: the kept steer then runs in a turn of its own right after the aborted one (the
/// loop latches the steer's wake-up; `cancel.rs` pins the same for kept followups).
fn kept_steer(turn: &TurnPlan) -> bool {
    turn.ending == Ending::Cancelled
        && turn.keep_inbox
        && turn
            .steps
            .last()
            .is_some_and(|s| s.calls.get(1) == Some(&2))
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
fn script_step(llm: &Scripted, plan: &StepPlan, t: usize, s: usize, ending: Ending, keep: bool) {
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

/// Every tool call of an assistant message is answered by exactly one later tool message.
pub(crate) fn calls_answered(messages: &[String]) -> Result<(), String> {
    let values: Vec<Value> = messages
        .iter()
        .map(|m| serde_json::from_str(m).unwrap())
        .collect();
    for (i, m) in values.iter().enumerate() {
        if m["role"] != "assistant" {
            continue;
        }
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] != "tool-call" {
                continue;
            }
            let answers = values[i + 1..]
                .iter()
                .filter(|r| r["role"] == "tool" && r["toolCallId"] == block["id"])
                .count();
            if answers != 1 {
                return Err(format!("call {} has {answers} results", block["id"]));
            }
        }
    }
    Ok(())
}

fn tool_names(header: &Value) -> Vec<String> {
    header["header"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `session-format.md` §9.4, checked independently: a `developer/message` follows a header with
/// reason `resume` or `change` iff a baseline existed and the tool names differ; additions (in
/// current order) then removals (in baseline order); `headerSeq` only with additions. No other
/// developer messages.
fn developer_rule(events: &[Arc<Event>]) -> Result<(), String> {
    let mut baseline: Option<Value> = None;
    let mut expected_dev = 0;
    for (i, e) in events.iter().enumerate() {
        if e.kind() != "request/header" {
            continue;
        }
        let h = e.data().clone();
        let reason = h["reason"].as_str().unwrap_or_default().to_owned();
        let next = events
            .get(i + 1)
            .filter(|n| n.kind() == "developer/message");
        let mut want: Vec<Value> = Vec::new();
        if let Some(b) = &baseline
            && (reason == "resume" || reason == "change")
        {
            let (prev, cur) = (tool_names(b), tool_names(&h));
            for n in cur.iter().filter(|n| !prev.contains(n)) {
                want.push(json!({"type": "tool-addition", "toolName": n}));
            }
            for n in prev.iter().filter(|n| !cur.contains(n)) {
                want.push(json!({"type": "tool-removal", "toolName": n}));
            }
        }
        match (next, want.is_empty()) {
            (None, true) => {}
            (Some(d), false) => {
                expected_dev += 1;
                let d = d.data();
                if d["message"]["content"] != Value::Array(want.clone()) {
                    return Err(format!("header {}: {} != {want:?}", e.seq(), d["message"]));
                }
                let additions = want.iter().any(|w| w["type"] == "tool-addition");
                let seq = d.get("headerSeq").and_then(Value::as_u64);
                if seq != additions.then_some(e.seq()) {
                    return Err(format!("header {}: headerSeq {seq:?}", e.seq()));
                }
            }
            (got, _) => {
                return Err(format!(
                    "header {} ({reason}): developer message {:?}, expected {want:?}",
                    e.seq(),
                    got.map(|d| d.data().clone())
                ));
            }
        }
        baseline = Some(h);
    }
    let total = events
        .iter()
        .filter(|e| e.kind() == "developer/message")
        .count();
    if total != expected_dev {
        return Err(format!(
            "{total} developer messages, {expected_dev} expected"
        ));
    }
    Ok(())
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

/// A kernel with the loop, JSONL persistence in a tempdir and the scripted adapter.
struct Rig {
    kernel: Kernel,
    llm: Arc<Scripted>,
    _dir: tempfile::TempDir,
}

fn options() -> AgentOptions {
    AgentOptions {
        provider: Some("mock".into()),
        cwd: std::env::temp_dir(),
        ..Default::default()
    }
}

/// Runs a plan; returns the final agent's events (read back from disk across resumes) and the
/// requests the adapter received.
async fn run(plan: Vec<TurnPlan>) -> (SessionHeader, Vec<Arc<Event>>, Vec<LlmRequest>, Rig) {
    let dir = tempfile::tempdir().unwrap();
    let llm = Arc::new(Scripted::default());
    let kernel = crate::fixtures::kernel_with_store(dir.path(), llm.clone()).await;
    let rig = Rig {
        kernel,
        llm,
        _dir: dir,
    };
    let root = rig.kernel.root();
    root.hook::<AgentRequestError, _, _>(|input, next| async move {
        if input.failure.code == "RETRY_ME" {
            RequestErrorDecision::Retry
        } else {
            next.run(input).await
        }
    })
    .unwrap();
    // Session turn numbers of the plan's turns: a fresh session starts at 1, and a kept steer
    // takes a turn of its own after its plan turn.
    let mut series_turns = Vec::new();
    let mut number = 0u64;
    for t in &plan {
        number += 1;
        if t.new_series {
            series_turns.push(number);
        }
        if kept_steer(t) {
            number += 1;
        }
    }
    root.hook::<PreStep, _, _>(move |mut input, next| {
        if input.step == 1 && series_turns.contains(&input.turn) {
            input.starts_request_series = true;
        }
        next.run(input)
    })
    .unwrap();
    // Prompt and runtime-context sections come from the system-prompt service (no identity
    // line, no persona: the prompt is exactly the registered section, or "").
    let sp = rig
        .kernel
        .mount_plugin::<SystemPromptPlugin>(
            serde_json::from_value(json!({"includeHarnessIdentity": false})).unwrap(),
        )
        .unwrap();
    sp.ready().await.unwrap();
    let agents = root.get::<dyn Agents>().unwrap();
    let mut agent = agents
        .create(
            &root,
            CreateAgent {
                options: options(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let cell: AgentCell = Arc::new(Mutex::new(Some(agent.clone())));
    let mut mounted = HashMap::new();
    for (t, turn) in plan.iter().enumerate() {
        if turn.resume && t > 0 {
            let id = agent.id().to_owned();
            agent.dispose().await;
            agent = agents
                .resume(
                    &root,
                    ResumeAgent {
                        session_id: id,
                        options: options(),
                        setup: None,
                    },
                )
                .await
                .unwrap();
            *cell.lock() = Some(agent.clone());
        }
        // Change tools and sections between turns (the agent is idle).
        let mut want = Vec::new();
        for (i, (name, parallel)) in TOOLS.iter().enumerate() {
            if turn.tools[i] {
                let extra = Extra::Tool {
                    name: (*name).to_owned(),
                    parallel: *parallel,
                    agent: cell.clone(),
                };
                want.push((format!("tool:{name}"), String::new(), extra));
            }
        }
        if let Some(v) = turn.prompt {
            let text = format!("Prompt variant {v}.");
            want.push(("prompt".into(), text.clone(), Extra::Prompt(text)));
        }
        if let Some(v) = turn.runtime {
            let text = format!("Runtime variant {v}.");
            want.push(("runtime".into(), text.clone(), Extra::Runtime(text)));
        }
        sync_extras(&rig.kernel, &mut mounted, want).await;
        let last = turn.steps.len() - 1;
        for (s, step) in turn.steps.iter().enumerate() {
            let ending = if s == last {
                turn.ending
            } else {
                Ending::Answer
            };
            script_step(&rig.llm, step, t, s, ending, turn.keep_inbox);
        }
        if kept_steer(turn) {
            rig.llm
                .push(Script::Chunks(text(&format!("kept steer {t}"))));
        }
        agent.followup(user(&format!("turn {t}"))).unwrap();
        idle(&agent).await;
    }
    let (header, events) = (agent.session().header(), agent.session().events());
    let requests = std::mem::take(&mut *rig.llm.requests.lock());
    cell.lock().take();
    (header, events, requests, rig)
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
            .sum::<usize>()
            + plan.iter().filter(|t| kept_steer(t)).count();
        let endings = |e: Ending| plan.iter().filter(|t| t.ending == e).count();
        let (fatal_turns, cut_turns) = (endings(Ending::Fatal), endings(Ending::MaxTokens));
        let cancelled_turns = endings(Ending::Cancelled);
        // A series starts at the first request, at turns `agent/pre-step` marks, and at turns
        // whose prompt differs from the previous turn's: the DeepSeek-like route consolidates
        // the prompt into the head node, a replacement.
        let series = 1 + plan
            .windows(2)
            .filter(|w| w[1].new_series || w[1].prompt != w[0].prompt)
            .count();
        let (header, events, requests, rig) = run(plan).await;
        prop_assert_eq!(requests.len(), expected, "every script was requested");
        let errors = events
            .iter()
            .filter(|e| e.kind() == "turn/end" && e.data()["reason"]["kind"] == "error")
            .count();
        prop_assert_eq!(errors, fatal_turns);
        let cut = events
            .iter()
            .filter(|e| e.kind() == "turn/end" && e.data()["reason"]["kind"] == "max-tokens")
            .count();
        prop_assert_eq!(cut, cut_turns);
        let aborted = events
            .iter()
            .filter(|e| e.kind() == "turn/end" && e.data()["reason"]["kind"] == "aborted")
            .count();
        prop_assert_eq!(aborted, cancelled_turns);

        // §9.4 tool-change messages, and §9.5: one route, so one `request/context` ever.
        if property == Property::Rebuild {
            let dev = developer_rule(&events);
            prop_assert!(dev.is_ok(), "{:?}", dev);
            let contexts = events
                .iter()
                .filter(|e| e.kind() == "request/context")
                .count();
            prop_assert_eq!(contexts, 1);
        }

        // (a) Every request rebuilt from the log prefix that preceded it.
        let positions = request_positions(&events);
        prop_assert_eq!(positions.len(), requests.len());
        let mut series_starts = Vec::new();
        let mut rebuilt_messages = Vec::new();
        let mut last_pos = 0usize;
        for (k, (pos, request)) in positions.iter().zip(&requests).enumerate() {
            let sent = request_json(request);
            if property == Property::Rebuild {
                let answered = calls_answered(&sent.1);
                prop_assert!(answered.is_ok(), "request {}: {:?}", k, answered);
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
        rig.kernel.dispose().await;
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

// Found while writing the properties: a first attempt that fails before the request is built
// (in `prepare_call`) and is retried must still admit the turn's input.

#[tokio::test]
async fn a_retried_prepare_failure_still_admits_the_accepted_input() {
    let h = Harness::new().await;
    let root = h.kernel.root();
    let (ctx, adapter) = (root.clone(), h.llm.clone());
    // The route `late` has no adapter at the first attempt (NO_ADAPTER from prepare_call); the
    // listener registers it and retries.
    root.hook::<AgentRequestError, _, _>(move |input, next| {
        let (ctx, adapter) = (ctx.clone(), adapter.clone());
        async move {
            if input.failure.code == dsh_llm::codes::NO_ADAPTER && input.attempt == 1 {
                let llm = ctx.get::<dyn dsh_llm::service::Llm>().unwrap();
                llm.register(&ctx, "late", adapter).unwrap();
                RequestErrorDecision::Retry
            } else {
                next.run(input).await
            }
        }
    })
    .unwrap();
    h.llm.push(Script::Chunks(text("hello")));
    let agent = h
        .agents()
        .create(
            &root,
            CreateAgent {
                options: AgentOptions {
                    provider: Some("late".into()),
                    model: Some("mock-model".into()),
                    cwd: std::env::temp_dir(),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    agent.followup(user("hi")).unwrap();
    idle(&agent).await;
    assert_eq!(h.llm.request_count(), 1);
    let sent = h.llm.requests.lock()[0].messages.clone();
    let users: Vec<String> = data_of(&agent, "user/message")
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(users, vec!["hi"], "the claimed user message is in the log");
    assert_eq!(sent.len(), 1, "the request carries the user message");
    assert_eq!(sent[0].text(), "hi");
    h.kernel.dispose().await;
}
