//! Adapters (issue 18): the same bash-step session through every provider route of the release
//! `dsh` (`deepseek`, `deepseek-anthropic`, `anthropic`, `openai-compatible`), each against the
//! testkit serving its dialect: the harness overhead per step (response end → next request,
//! minus the tool's run time), prefix stability (for `anthropic`, with its moving
//! `cache_control` breakpoints removed), rule violations and connections per run.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use dsh_testkit::openai::{self, ReasoningField};
use dsh_testkit::validate::common_prefix_len;
use dsh_testkit::{Completion, RecordedRequest, Reply, anthropic};

use crate::report::{Group, Row};
use crate::run::{World, run_dsh, session_log};
use crate::scenario::read_events;
use crate::stats::Stat;

/// One route and its dialect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    DeepSeek,
    DeepSeekMessages,
    Anthropic,
    OpenAi,
}

impl Route {
    const ALL: [Route; 4] = [
        Route::DeepSeek,
        Route::DeepSeekMessages,
        Route::Anthropic,
        Route::OpenAi,
    ];

    fn name(self) -> &'static str {
        match self {
            Route::DeepSeek => "deepseek",
            Route::DeepSeekMessages => "deepseek-anthropic",
            Route::Anthropic => "anthropic",
            Route::OpenAi => "openai-compatible",
        }
    }

    /// The composition patch pointing the route at the mock.
    fn patch(self, base: &str) -> Option<String> {
        match self {
            Route::DeepSeek => None,
            Route::DeepSeekMessages => Some(format!(
                "plugins:\n  - id: deepseek-anthropic\n    name: anthropic\n    config: {{ flavor: deepseek, baseUrl: \"{base}\" }}\n"
            )),
            Route::Anthropic => Some(format!(
                "plugins:\n  - id: anthropic\n    name: anthropic\n    config: {{ flavor: anthropic, baseUrl: \"{base}\", apiKey: sk-bench }}\n"
            )),
            Route::OpenAi => Some(format!(
                "plugins:\n  - id: openai-compatible\n    name: openai-compatible\n    config:\n      baseUrl: \"{base}/v1\"\n      apiKey: sk-bench\n      reasoningPassBack: reasoning_content\n      models:\n        - {{ id: bench-model, contextWindow: 262144, defaultMaxTokens: 8192, reasoning: true }}\n"
            )),
        }
    }

    fn step(self, k: usize) -> Reply {
        let reasoning = format!("Step {k}: run the next command and check what it prints. ");
        let args = format!(r#"{{"command":"echo step-{k}","description":"Print step {k}"}}"#);
        let id = format!("call_{k:05}");
        match self {
            Route::DeepSeek => Completion::new()
                .chars_per_delta(8)
                .reasoning(&reasoning)
                .tool_call_with_id(&id, "bash", &args)
                .reply(),
            Route::OpenAi => openai::reply(
                &Completion::new()
                    .model("bench-model")
                    .chars_per_delta(8)
                    .reasoning(&reasoning)
                    .tool_call_with_id(&id, "bash", &args),
                &ReasoningField::ReasoningContent,
            ),
            Route::DeepSeekMessages | Route::Anthropic => anthropic::Message::new()
                .model(self.model())
                .chars_per_delta(8)
                .thinking(&reasoning, &format!("sig-{k}"))
                .tool_use(&id, "bash", &args)
                .reply(),
        }
    }

    fn model(self) -> &'static str {
        match self {
            Route::Anthropic => "claude-sonnet-4-5",
            Route::OpenAi => "bench-model",
            _ => "deepseek-flash",
        }
    }

    fn last(self) -> Reply {
        match self {
            Route::DeepSeek => Completion::new().text(FINAL).reply(),
            Route::OpenAi => openai::reply(
                &Completion::new().model("bench-model").text(FINAL),
                &ReasoningField::ReasoningContent,
            ),
            _ => anthropic::Message::new()
                .model(self.model())
                .text(FINAL)
                .reply(),
        }
    }
}

const FINAL: &str = "All steps are done.";

/// The figures of one run.
#[derive(Debug, Default)]
struct RouteRun {
    overhead_us: Vec<f64>,
    prefix: Vec<f64>,
    violations: usize,
    connections: usize,
}

/// The tool run time of `step` from the log (`meta.durationMs`), ms.
fn tool_ms(events: &[serde_json::Value], step: usize) -> f64 {
    events
        .iter()
        .filter(|e| e["type"] == "tool/result" && e["data"]["step"].as_u64() == Some(step as u64))
        .filter_map(|e| e["data"]["meta"]["durationMs"].as_f64())
        .reduce(f64::max)
        .unwrap_or(0.0)
}

fn open_messages(body: &[u8], strip_breakpoints: bool) -> Result<Vec<u8>> {
    #[derive(serde::Deserialize)]
    struct Raw<'a> {
        #[serde(borrow)]
        messages: &'a serde_json::value::RawValue,
    }
    let m = if strip_breakpoints {
        let mut v: serde_json::Value =
            serde_json::from_slice(body).context("a request body that is not JSON")?;
        anthropic::strip_cache_control(&mut v);
        v["messages"].to_string().into_bytes()
    } else {
        let raw: Raw<'_> =
            serde_json::from_slice(body).context("a request body without messages")?;
        raw.messages.get().as_bytes().to_vec()
    };
    Ok(m[..m.len().saturating_sub(1)].to_vec())
}

fn run(dsh: &std::path::Path, route: Route, steps: usize) -> Result<RouteRun> {
    let world = World::new()?;
    for k in 1..=steps {
        world.server.push(route.step(k));
    }
    world.server.push(route.last());
    let mut args = vec!["exec".to_owned()];
    if let Some(patch) = route.patch(&world.server.base_url()) {
        let path = world.home.path().join("route.yaml");
        std::fs::write(&path, patch).context("writing the route patch")?;
        args.push("--patch".into());
        args.push(path.display().to_string());
    }
    args.extend(["--provider".into(), route.name().into()]);
    args.push("Run the benchmark steps one by one, then report.".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_dsh(dsh, &world, &refs, false).with_context(|| route.name().to_owned())?;
    ensure!(
        out.stdout.contains(FINAL),
        "{}: no final answer",
        route.name()
    );
    let reqs: Vec<RecordedRequest> = world
        .server
        .wait_for_finished_blocking(steps + 1, Duration::from_secs(10))
        .with_context(|| format!("{}: fewer than {} responses", route.name(), steps + 1))?
        .into_iter()
        .filter(|r| r.is_chat())
        .collect();
    ensure!(
        reqs.len() == steps + 1,
        "{}: {} requests",
        route.name(),
        reqs.len()
    );
    let events = read_events(&session_log(world.home.path())?)?;
    let mut r = RouteRun {
        violations: world.server.dsh_rule_violations().len(),
        connections: world.server.connection_count(),
        ..RouteRun::default()
    };
    for k in 0..steps {
        let (a, b) = (&reqs[k], &reqs[k + 1]);
        let finished = a.finished_at.context("a response never finished")?;
        let gap = b
            .arrived_at
            .saturating_duration_since(finished)
            .as_secs_f64()
            * 1e6;
        r.overhead_us.push(gap - tool_ms(&events, k + 1) * 1e3);
        // Breakpoints move from step to step; the cache keys on the content they mark.
        let strip = route == Route::Anthropic;
        let prev = open_messages(&a.body, strip)?;
        let next = open_messages(&b.body, strip)?;
        r.prefix
            .push(common_prefix_len(&prev, &next) as f64 / prev.len().max(1) as f64);
    }
    Ok(r)
}

/// Runs every route `iterations` times and adds its rows: overhead per step within the
/// DeepSeek budget (2 ms), prefix stability 1.0, no rule violation, exactly one connection
/// per run.
pub fn rows(
    dsh: &std::path::Path,
    quick: bool,
    iterations: u32,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let steps = if quick { 6 } else { 40 };
    let mut g = Group::new(
        rows,
        format!("adapters ({steps} bash steps with reasoning)"),
    );
    for route in Route::ALL {
        let runs = (0..iterations)
            .map(|_| run(dsh, route, steps))
            .collect::<Result<Vec<_>>>()?;
        let overhead: Vec<f64> = runs
            .iter()
            .map(|r| Stat::median_of(&r.overhead_us) / 1e3)
            .collect();
        g.limit(
            &format!("{}: harness overhead per step", route.name()),
            &overhead,
            "ms",
            2,
            2.0,
        );
        let min_prefix = runs
            .iter()
            .flat_map(|r| r.prefix.iter().copied())
            .fold(1.0_f64, f64::min);
        g.exact(
            &format!("{}: prefix stability (min over steps)", route.name()),
            "1.0",
            &format!("{min_prefix:.4}"),
            min_prefix == 1.0,
        );
        let violations: usize = runs.iter().map(|r| r.violations).sum();
        g.exact(
            &format!("{}: request rule violations", route.name()),
            "0",
            &violations.to_string(),
            violations == 0,
        );
        let connections: Vec<usize> = runs.iter().map(|r| r.connections).collect();
        let extra = connections.iter().filter(|&&c| c != 1).count();
        g.exact(
            &format!("{}: TCP connections per run", route.name()),
            "1 in every run",
            &if extra == 0 {
                "1".to_owned()
            } else {
                format!(
                    "{connections:?} ({extra} of {} runs not 1)",
                    connections.len()
                )
            },
            extra == 0,
        );
    }
    Ok(())
}
