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

mod checks;
mod extras;
mod plan;

pub(crate) use checks::calls_answered;
use checks::*;
use extras::*;
use plan::*;

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
    // Session turn numbers of the plan's turns: a fresh session starts at 1, one turn per plan
    // turn (input kept by a `keep_inbox` cancel is parked until the next followup's turn).
    let series_turns: Vec<u64> = (1u64..)
        .zip(&plan)
        .filter(|(_, t)| t.new_series)
        .map(|(n, _)| n)
        .collect();
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
        // A steer kept by a `keep_inbox` cancel stays parked: the next followup's turn claims
        // it with its own message (no extra request).
        agent.followup(user(&format!("turn {t}"))).unwrap();
        idle(&agent).await;
    }
    let (header, events) = (agent.session().header(), agent.session().events());
    let requests = rig.llm.take_requests();
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
            .sum::<usize>();
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
    let sent = h.llm.requests()[0].messages.clone();
    let users: Vec<String> = data_of(&agent, "user/message")
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(users, vec!["hi"], "the claimed user message is in the log");
    assert_eq!(sent.len(), 1, "the request carries the user message");
    assert_eq!(sent[0].text(), "hi");
    h.kernel.dispose().await;
}
